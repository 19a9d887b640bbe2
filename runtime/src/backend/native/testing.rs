//! Hooks for tests above the backend: the optimizers' tests check that the native
//! planner recognises their updates, the training tests pin the plans of whole steps.

use super::executor::NativeExecutable;
use super::plan::{Plan, Step};
use crate::backend::{CompileOptions, Executable};
use crate::ir::Graph;
use std::cell::RefCell;

/// Compiles `g` natively, with the single-pass Adam kernel enabled or not, and says how
/// many fused groups it recognised as Adam's update.
pub(crate) fn compile_fused_adam(
    g: &Graph,
    options: &CompileOptions,
    enabled: bool,
) -> (Box<dyn Executable>, usize) {
    let mut exe = NativeExecutable::new(g, options).expect("the test graph compiles");
    let mut recognised = 0;
    for s in exe.plan_mut().steps.iter_mut() {
        if let Step::Fused { kernel, .. } = s {
            if !enabled {
                kernel.adam = None;
            }
            recognised += usize::from(kernel.adam.is_some());
        }
    }
    (Box::new(exe), recognised)
}

/// What a plan runs, in numbers: enough to notice a kernel more or less, a group split
/// or merged, an instruction added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlanSummary {
    pub graph: String,
    pub steps: usize,
    /// The op of each unfused kernel, in order.
    pub kernels: Vec<&'static str>,
    pub fused: usize,
    pub adam: usize,
    pub insts: usize,
    pub slots: usize,
    /// Poolings and gradients with the bias and ReLU fused in (see `bias_relu_pool`).
    pub bias_relu_pools: usize,
    /// Of those, poolings that compute their convolution (see `conv_pool`).
    pub conv_pools: usize,
    /// Kernel, input and bias gradients computed from a pooled cotangent (see
    /// `conv_pool_grad`).
    pub pooled_grads: usize,
    /// Sums of products computed without the product (see `sum_of_products`).
    pub sums_of_products: usize,
}

thread_local! {
    /// The plans made on this thread, in order, each with its steps as `Debug` prints
    /// them (shown by `--nocapture`, to diff whole plans while changing the planner).
    static MADE: RefCell<Vec<(PlanSummary, String)>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn record(graph: &str, plan: &Plan) {
    use super::bias_relu_pool::Fused;
    let count = |which: fn(&Fused) -> bool| {
        plan.fused_pools
            .iter()
            .flatten()
            .filter(|f| which(f))
            .count()
    };
    let mut s = PlanSummary {
        graph: graph.to_string(),
        steps: plan.steps.len(),
        kernels: Vec::new(),
        fused: 0,
        adam: 0,
        insts: 0,
        slots: plan.slots.len(),
        bias_relu_pools: count(|f| f.is_pool() || matches!(f, Fused::Gradient { .. })),
        conv_pools: count(|f| matches!(f, Fused::ConvPool { .. })),
        pooled_grads: count(|f| {
            matches!(
                f,
                Fused::PooledKernelGrad { .. }
                    | Fused::PooledInputGrad { .. }
                    | Fused::PooledBiasGrad { .. }
            )
        }),
        sums_of_products: plan.sums_of_products.iter().flatten().count(),
    };
    for step in &plan.steps {
        match step {
            Step::Kernel { node, .. } | Step::Loop { node, .. } => {
                s.kernels.push(plan.nodes[*node].op.name())
            }
            Step::Fused { kernel, .. } => {
                s.fused += 1;
                s.adam += usize::from(kernel.adam.is_some());
                s.insts += kernel.insts.len();
            }
        }
    }
    MADE.with(|m| m.borrow_mut().push((s, format!("{:?}", plan.steps))));
    // A loop's body is planned as a graph of its own: recorded after the graph holding it.
    for (i, lp) in plan.loops.iter().enumerate() {
        record(&format!("{graph}/loop {i} body"), &lp.body);
    }
}

/// The plans made on this thread since the last call, in order, each with its steps as
/// `Debug` prints them.
pub(crate) fn take_plans() -> Vec<(PlanSummary, String)> {
    MADE.with(|m| std::mem::take(&mut *m.borrow_mut()))
}

/// Compiles `g` natively with max/min poolings paired with their gradients (the pooling
/// records its selections for the gradient) or not, and says how many gradients read a
/// recorded index.
pub(crate) fn compile_pool_index(
    g: &Graph,
    options: &CompileOptions,
    enabled: bool,
) -> (Box<dyn Executable>, usize) {
    use super::plan::PoolIndex;
    let mut exe = NativeExecutable::new(g, options).expect("the test graph compiles");
    let mut paired = 0;
    let plan = exe.plan_mut();
    for s in plan.steps.iter_mut() {
        if let Step::Kernel { index, node, .. } = s {
            // A fused pooling's kernel is the indexed one (its bias and ReLU are in it).
            if !enabled && plan.fused_pools[*node].is_none() {
                *index = None;
            }
            paired += usize::from(matches!(index, Some(PoolIndex::Use(_))));
        }
    }
    (Box::new(exe), paired)
}

thread_local! {
    static NO_BIAS_RELU_POOL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the planner leaves bias, ReLU and max pooling unfused on this thread (see
/// [`without_bias_relu_pool`]).
pub(crate) fn bias_relu_pool_disabled() -> bool {
    NO_BIAS_RELU_POOL.with(|c| c.get())
}

/// Runs `f` with the planner's `bias_relu_pool` fusion off on this thread: the unfused
/// reference path that the fused kernels are compared with.
pub(crate) fn without_bias_relu_pool<R>(f: impl FnOnce() -> R) -> R {
    switched_on(&NO_BIAS_RELU_POOL, f)
}

/// Runs `f` with the thread's `switch` set, then puts it back as it was.
fn switched_on<R>(
    switch: &'static std::thread::LocalKey<std::cell::Cell<bool>>,
    f: impl FnOnce() -> R,
) -> R {
    let before = switch.with(|c| c.replace(true));
    let r = f();
    switch.with(|c| c.set(before));
    r
}

thread_local! {
    static NO_CONV_POOL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the planner leaves convolutions out of their fused poolings on this thread
/// (see [`without_conv_pool`]).
pub(crate) fn conv_pool_disabled() -> bool {
    NO_CONV_POOL.with(|c| c.get())
}

/// Runs `f` with the planner's `conv_pool` fusion off on this thread (the `bias_relu_pool`
/// fusion stays on): the plan the fused convolution and pooling are compared with.
pub(crate) fn without_conv_pool<R>(f: impl FnOnce() -> R) -> R {
    switched_on(&NO_CONV_POOL, f)
}

thread_local! {
    static NO_CONV_POOL_GRAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the planner leaves the kernel, input and bias gradients of a pooled convolution
/// reading the convolution output's cotangent on this thread (see
/// [`without_conv_pool_grad`]).
pub(crate) fn conv_pool_grad_disabled() -> bool {
    NO_CONV_POOL_GRAD.with(|c| c.get())
}

/// Runs `f` with the planner's `conv_pool_grad` fusion off on this thread (the other
/// fusions stay on): the plan the gradients from the pooled cotangent are compared with.
pub(crate) fn without_conv_pool_grad<R>(f: impl FnOnce() -> R) -> R {
    switched_on(&NO_CONV_POOL_GRAD, f)
}

thread_local! {
    static NO_WINDOWS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the planner copies every dynamic slice out on this thread (see
/// [`without_windows`]).
pub(crate) fn windows_disabled() -> bool {
    NO_WINDOWS.with(|c| c.get())
}

/// Runs `f` with the planner's in-place reading of dynamic slices (`window`) off on this
/// thread: the copying plan the windows are compared with.
pub(crate) fn without_windows<R>(f: impl FnOnce() -> R) -> R {
    switched_on(&NO_WINDOWS, f)
}

thread_local! {
    static NO_SUM_OF_PRODUCTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the planner writes products out before summing them on this thread (see
/// [`without_sum_of_products`]).
pub(crate) fn sum_of_products_disabled() -> bool {
    NO_SUM_OF_PRODUCTS.with(|c| c.get())
}

/// Runs `f` with the planner's `sum_of_products` rewrite off on this thread: the plan
/// the one-pass sums are compared with.
pub(crate) fn without_sum_of_products<R>(f: impl FnOnce() -> R) -> R {
    switched_on(&NO_SUM_OF_PRODUCTS, f)
}
