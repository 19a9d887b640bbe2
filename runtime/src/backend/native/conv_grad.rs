//! A convolution's kernel gradient as one native kernel.
//!
//! The IR has one convolution layout (NHWC input, HWIO kernel), so the autodiff writes the
//! kernel gradient as a convolution of the transposed input (features as batch, batch as
//! features) with the transposed cotangent as kernel, transposed back
//! (`ops::convolution::vjp`). On the native backend those three transposes move every
//! activation of the layer through memory twice. The planner recognises the pattern and
//! computes the same value from the untransposed input and cotangent, as the forward's
//! patches transposed times the cotangent (`ops::convolution::native_kernel_grad`). It is
//! an identity of the ops, not a guess about where they came from: any graph of this
//! shape is computed exactly this way, and the transposes it no longer reads are dead.

use crate::ir::{ConvParams, Node, Op, Value};

/// Kernel gradients with shorter patch rows keep the transposed form (see `matches`).
const MIN_PATCH_ROW: usize = 32;

/// For each node: the forward parameters when the node is such a kernel gradient, whose
/// op has been rewritten to `Convolution { lhs: input, rhs: cotangent, .. }` (the pattern's
/// parameters kept, for printing).
pub(super) fn rewrite(nodes: &mut [Node]) -> Vec<Option<ConvParams>> {
    let mut found = vec![None; nodes.len()];
    for i in 0..nodes.len() {
        let Some((x, ct, kg)) = matches(nodes, i) else {
            continue;
        };
        found[i] = Some(crate::ops::convolution::forward_of_kernel_grad(&kg));
        nodes[i].op = Op::Convolution {
            lhs: x,
            rhs: ct,
            params: kg,
        };
    }
    found
}

/// `transpose(convolution(transpose(x), transpose(ct), kg), back)` with the permutations
/// of the kernel gradient and one group: `(x, ct, kg)`.
fn matches(nodes: &[Node], i: usize) -> Option<(Value, Value, ConvParams)> {
    let Op::Transpose { x: conv, perm } = &nodes[i].op else {
        return None;
    };
    let Op::Convolution { lhs, rhs, params } = &nodes[conv.index()].op else {
        return None;
    };
    let out = &nodes[i].ty;
    let n = out.rank().checked_sub(2)?;
    // Patch rows of the kernel's positions times its input features: with very few (a
    // first layer on one channel: 9) the product from the untransposed operands is too
    // shallow for the matrix kernel, and the transposed form, deep along the batch, is
    // faster in spite of its transposes (measured on the convnet of the `cnn` workload),
    // unless the direct kernel for few input features computes it from the untransposed
    // operands.
    let patch_row: usize = out.dims()[..=n].iter().product();
    let forward = crate::ops::convolution::forward_of_kernel_grad(params);
    let (cin, taps) = (out.dims()[n], out.dims()[..n].iter().product());
    let direct = crate::ops::conv_native::direct_kernel_grad(&forward, cin, taps);
    if params.feature_groups != 1 || (patch_row < MIN_PATCH_ROW && !direct) {
        return None;
    }
    // [C, k…, Co] -> [k…, C, Co]
    let back: Vec<usize> = (1..=n).chain([0, n + 1]).collect();
    // x [N, s…, C] -> [C, s…, N]
    let xperm: Vec<usize> = [n + 1].into_iter().chain(1..=n).chain([0]).collect();
    // ct [N, o…, Co] -> [o…, N, Co]
    let cperm = &back;
    let (Op::Transpose { x, perm: xp }, Op::Transpose { x: ct, perm: cp }) =
        (&nodes[lhs.index()].op, &nodes[rhs.index()].op)
    else {
        return None;
    };
    (*perm == back && *xp == xperm && cp == cperm).then(|| (*x, *ct, params.clone()))
}

#[cfg(test)]
mod tests {
    use super::super::executor::NativeExecutable;
    use super::super::NativeBackend;
    use crate::backend::{Backend, CompileOptions, Executable};
    use crate::ir::{ConvParams, DType, Graph, TensorType};
    use crate::Tensor;

    fn numbers(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed | 1;
        (0..len)
            .map(|_| {
                s = s
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    /// The kernel gradient as the VJP rule writes it, run on the native backend; how many
    /// kernel gradients the planner recognised, and the result against the definition.
    fn check(x: [usize; 4], k: [usize; 2], cout: usize, p: ConvParams) -> usize {
        let [n, h, w, c] = x;
        let mut g = Graph::new("kernel_grad");
        let xv = g.parameter(TensorType::new(DType::F32, x.to_vec()));
        let wv = g.parameter(TensorType::new(DType::F32, vec![k[0], k[1], c, cout]));
        let y = g.convolution(xv, wv, p.clone()).unwrap();
        let ct = g.parameter(g.ty(y).clone());
        let (oh, ow) = (g.ty(y).dims()[1], g.ty(y).dims()[2]);
        let (_, dw) = crate::ops::convolution::vjp(&mut g, xv, wv, &p, ct).unwrap();
        g.set_outputs(vec![dw]).unwrap();

        let opts = CompileOptions::default();
        let mut exe = NativeExecutable::new(&g, &opts).unwrap();
        let recognised = exe.plan_mut().kernel_grads.iter().flatten().count();
        let be = NativeBackend::new();
        let xs = numbers(n * h * w * c, 1);
        let cts = numbers(n * oh * ow * cout, 2);
        let mut args = vec![
            be.upload(&Tensor::from_vec(&x, xs.clone()).unwrap())
                .unwrap(),
            be.upload(
                &Tensor::from_vec(&[k[0], k[1], c, cout], vec![0.0f32; k[0] * k[1] * c * cout])
                    .unwrap(),
            )
            .unwrap(),
            be.upload(&Tensor::from_vec(&[n, oh, ow, cout], cts.clone()).unwrap())
                .unwrap(),
        ];
        let got = be
            .download(&exe.execute(&mut args).unwrap()[0])
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for (i, kh) in (0..k[0])
            .flat_map(|a| (0..k[1]).map(move |b| (a, b)))
            .enumerate()
        {
            for ci in 0..c {
                for co in 0..cout {
                    let mut want = 0.0f64;
                    for b in 0..n {
                        for (y0, x0) in (0..oh).flat_map(|a| (0..ow).map(move |bb| (a, bb))) {
                            let pos = |o: usize, kk: usize, d: usize| {
                                (o * p.strides[d] + kk * p.rhs_dilation[d]) as i64 - p.padding[d].0
                            };
                            let (py, px) = (pos(y0, kh.0, 0), pos(x0, kh.1, 1));
                            if py < 0 || px < 0 || py >= h as i64 || px >= w as i64 {
                                continue;
                            }
                            let xi = ((b * h + py as usize) * w + px as usize) * c + ci;
                            let ci_ = ((b * oh + y0) * ow + x0) * cout + co;
                            want += xs[xi] as f64 * cts[ci_] as f64;
                        }
                    }
                    let at = (i * c + ci) * cout + co;
                    assert!(
                        (got[at] as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "dw[{at}] {} vs {want}",
                        got[at]
                    );
                }
            }
        }
        recognised
    }

    fn params(s: usize, pad: i64, d: usize) -> ConvParams {
        ConvParams {
            strides: vec![s; 2],
            padding: vec![(pad, pad); 2],
            lhs_dilation: vec![1; 2],
            rhs_dilation: vec![d; 2],
            feature_groups: 1,
        }
    }

    #[test]
    fn the_kernel_gradient_from_untransposed_operands_matches_the_definition() {
        // a second layer's shape, strided with `same`-like padding, dilated
        assert_eq!(check([3, 9, 8, 8], [3, 3], 5, params(1, 0, 1)), 1);
        assert_eq!(check([2, 9, 10, 6], [3, 2], 4, params(2, 1, 1)), 1);
        assert_eq!(check([2, 11, 9, 4], [3, 3], 3, params(1, 2, 2)), 1);
        // a first layer on one or two channels (9 or 18 patch columns): the direct kernel's
        // where this CPU runs it, else the transposed form
        let direct = usize::from(crate::kernel::conv_direct::thin(1, 9));
        assert_eq!(check([2, 8, 8, 1], [3, 3], 4, params(1, 0, 1)), direct);
        assert_eq!(check([1, 7, 9, 2], [3, 3], 13, params(2, 1, 1)), direct);
    }
}
