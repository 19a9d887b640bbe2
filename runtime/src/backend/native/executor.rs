//! Running a plan.

use super::data::{Data, Storage};
use super::plan::{plan, Loc, OutputPlan, Plan};
use super::KernelCtx;
use crate::backend::{check_args, Buffer, CompileOptions, Executable};
use crate::ir::{Graph, TensorType};
use crate::ops::{self, In};
use crate::{Error, Result};

pub(crate) struct NativeExecutable {
    plan: Plan,
    arena: Vec<Storage>,
    ctx: KernelCtx,
    param_types: Vec<TensorType>,
    output_types: Vec<TensorType>,
}

impl NativeExecutable {
    pub fn new(g: &Graph, options: &CompileOptions) -> Result<NativeExecutable> {
        let plan = plan(g, options);
        let arena = plan
            .slots
            .iter()
            .map(|&(dtype, len)| Storage::zeros(dtype, len))
            .collect();
        Ok(NativeExecutable {
            plan,
            arena,
            ctx: KernelCtx::default(),
            param_types: g.param_types(),
            output_types: g.output_types(),
        })
    }
}

/// Operand lists longer than this (only `concatenate`) go through a heap vector.
const INLINE_OPERANDS: usize = 4;

fn data_of<'a>(
    loc: Loc,
    params: &[&'a Storage],
    arena: &'a [Storage],
    consts: &'a [Storage],
    n: usize,
) -> Data<'a> {
    storage_of(loc, params, arena, consts).prefix(n)
}

fn storage_of<'a>(
    loc: Loc,
    params: &[&'a Storage],
    arena: &'a [Storage],
    consts: &'a [Storage],
) -> &'a Storage {
    match loc {
        Loc::Param(i) => params[i],
        Loc::Slot(i) => &arena[i],
        Loc::Const(i) => &consts[i],
    }
}

/// A copy of the first `n` elements (outputs are exact-size buffers).
fn exact_copy(s: &Storage, ty: &TensorType) -> Storage {
    s.prefix(ty.numel()).to_storage()
}

impl Executable for NativeExecutable {
    fn param_types(&self) -> &[TensorType] {
        &self.param_types
    }

    fn output_types(&self) -> &[TensorType] {
        &self.output_types
    }

    fn execute(&mut self, args: &mut [Buffer]) -> Result<Vec<Buffer>> {
        check_args("native", &self.param_types, args)?;
        // Resolved once: check_args has made sure every argument is a native buffer.
        let params = args
            .iter()
            .map(Buffer::native_storage)
            .collect::<Result<Vec<&Storage>>>()?;
        let plan = &self.plan;
        for step in &plan.steps {
            let node = &plan.nodes[step.node];
            let mut out = std::mem::replace(&mut self.arena[step.out], Storage::F32(Vec::new()));
            let result = {
                let make = |k: usize| {
                    let ty = &plan.nodes[step.in_nodes[k]].ty;
                    In {
                        data: data_of(step.ins[k], &params, &self.arena, &plan.consts, ty.numel()),
                        ty,
                    }
                };
                let out_view = out.prefix_mut(node.ty.numel());
                if step.ins.len() <= INLINE_OPERANDS {
                    let mut ins = [EMPTY_IN; INLINE_OPERANDS];
                    for (k, x) in ins.iter_mut().enumerate().take(step.ins.len()) {
                        *x = make(k);
                    }
                    ops::native(
                        &node.op,
                        &ins[..step.ins.len()],
                        out_view,
                        &node.ty,
                        &mut self.ctx,
                    )
                } else {
                    let ins: Vec<In<'_>> = (0..step.ins.len()).map(make).collect();
                    ops::native(&node.op, &ins, out_view, &node.ty, &mut self.ctx)
                }
            };
            self.arena[step.out] = out;
            result.map_err(|e| match e {
                Error::Backend { backend, message } => Error::Backend {
                    backend,
                    message: format!("node %{} ({}): {message}", step.node, node.op.name()),
                },
                e => e,
            })?;
        }

        // Copies first (they may read parameters that swaps are about to replace), then
        // swaps, then the copied updates.
        let mut returned = Vec::new();
        let mut copied_updates = Vec::new();
        for (k, out) in plan.outputs.iter().enumerate() {
            let ty = &self.output_types[k];
            match *out {
                OutputPlan::Return { loc } => {
                    let s = exact_copy(storage_of(loc, &params, &self.arena, &plan.consts), ty);
                    returned.push(Buffer::native(ty.clone(), s));
                }
                OutputPlan::Update {
                    loc,
                    param,
                    swap: false,
                } => {
                    let s = exact_copy(storage_of(loc, &params, &self.arena, &plan.consts), ty);
                    copied_updates.push((param, s));
                }
                OutputPlan::Update { swap: true, .. } => {}
            }
        }
        for out in &plan.outputs {
            if let OutputPlan::Update {
                loc: Loc::Slot(s),
                param,
                swap: true,
            } = *out
            {
                std::mem::swap(args[param].native_storage_mut()?, &mut self.arena[s]);
            }
        }
        for (param, s) in copied_updates {
            *args[param].native_storage_mut()? = s;
        }
        Ok(returned)
    }
}

static EMPTY_TY: TensorType = TensorType {
    dtype: crate::ir::DType::F32,
    shape: crate::ir::Shape(Vec::new()),
};

const EMPTY_IN: In<'static> = In {
    data: Data::F32(&[]),
    ty: &EMPTY_TY,
};
