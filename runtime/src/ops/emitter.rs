//! The ops' StableHLO lowerings write through this: the shared vocabulary of
//! [`crate::hlo`], bound to the graph being printed and the SSA name of each value.

use crate::hlo::Writer;
use crate::ir::{Graph, Op, TensorType, Value};
use std::ops::{Deref, DerefMut};

/// What op lowerings write into: the function body, with fresh SSA names.
pub(crate) struct Emitter<'g> {
    g: &'g Graph,
    w: Writer,
    names: Vec<String>,
    num_replicas: usize,
    /// The loops printed so far (one sibling's op each) and the name of their results.
    loops: Vec<(Op, String)>,
}

impl<'g> Emitter<'g> {
    pub fn new(g: &'g Graph, num_replicas: usize) -> Emitter<'g> {
        Emitter {
            g,
            w: Writer::default(),
            names: vec![String::new(); g.len()],
            num_replicas,
            loops: Vec::new(),
        }
    }

    /// The results' name of the loop `op` is a sibling of, if it is printed already.
    pub fn loop_name(&self, op: &Op) -> Option<String> {
        self.loops
            .iter()
            .find(|(o, _)| super::while_loop::same_loop(o, op))
            .map(|(_, n)| n.clone())
    }

    pub fn set_loop_name(&mut self, op: Op, name: String) {
        self.loops.push((op, name));
    }

    /// Runs `f` over an emitter for the region graph `g` that continues this one's names,
    /// and returns the instructions it wrote (not added to this body) with `f`'s result.
    pub fn nested<R>(
        &mut self,
        g: &Graph,
        f: impl FnOnce(&mut Emitter<'_>) -> crate::Result<R>,
    ) -> crate::Result<(String, R)> {
        let mut inner = Emitter::new(g, self.num_replicas);
        inner.w.set_next_name(self.w.next_name());
        let r = f(&mut inner)?;
        self.w.set_next_name(inner.w.next_name());
        Ok((inner.w.body().to_string(), r))
    }

    pub fn graph(&self) -> &'g Graph {
        self.g
    }

    /// The SSA name holding an (already lowered) value of the graph.
    pub fn name(&self, v: Value) -> String {
        self.names[v.index()].clone()
    }

    /// Records the SSA name that holds `v`, once its lowering is written.
    pub fn set_name(&mut self, v: Value, name: String) {
        self.names[v.index()] = name;
    }

    pub fn ty(&self, v: Value) -> &'g TensorType {
        self.g.ty(v)
    }

    pub fn num_replicas(&self) -> usize {
        self.num_replicas
    }
}

impl Deref for Emitter<'_> {
    type Target = Writer;
    fn deref(&self) -> &Writer {
        &self.w
    }
}

impl DerefMut for Emitter<'_> {
    fn deref_mut(&mut self) -> &mut Writer {
        &mut self.w
    }
}
