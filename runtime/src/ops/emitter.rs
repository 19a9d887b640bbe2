//! The ops' StableHLO lowerings write through this: the shared vocabulary of
//! [`crate::hlo`], bound to the graph being printed and the SSA name of each value.

use crate::hlo::Writer;
use crate::ir::{Graph, TensorType, Value};
use std::ops::{Deref, DerefMut};

/// What op lowerings write into: the function body, with fresh SSA names.
pub(crate) struct Emitter<'g> {
    g: &'g Graph,
    w: Writer,
    names: Vec<String>,
    num_replicas: usize,
}

impl<'g> Emitter<'g> {
    pub fn new(g: &'g Graph, num_replicas: usize) -> Emitter<'g> {
        Emitter {
            g,
            w: Writer::default(),
            names: vec![String::new(); g.len()],
            num_replicas,
        }
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
