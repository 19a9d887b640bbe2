//! Data for a model with several inputs or outputs, as the step graphs take it: packed
//! rows (see `ir::side_by_side`), each array checked against its input or output first.

use crate::data::Data;
use crate::ir::side_by_side::{pack, unpack};
use crate::{Error, Result, Tensor};
use ndarray::{ArrayD, IxDyn};

impl<A: crate::nn::Architecture> crate::Model<A> {
    /// The tensor the step graphs take for `data` as the model's inputs: the one array, or
    /// for several inputs their packed rows, each array checked against its input's shape
    /// and element type first (building the model from their shapes if it is not built).
    pub(crate) fn inputs_tensor(&mut self, what: &str, data: Data) -> Result<Tensor> {
        let (names, parts) = self.input_parts(what, data)?;
        if parts.len() > 1 && !self.is_built() {
            let shapes = parts
                .iter()
                .map(|p| p.dims().get(1..).unwrap_or(&[]).to_vec())
                .collect::<Vec<_>>();
            self.build_inputs(&shapes)?;
        }
        self.pack_inputs(what, &names, parts)
    }

    /// `inputs_tensor` for a call that cannot build the model (`&self`).
    pub(crate) fn built_inputs_tensor(&self, what: &str, data: Data) -> Result<Tensor> {
        let (names, parts) = self.input_parts(what, data)?;
        self.pack_inputs(what, &names, parts)
    }

    /// The model's input names, and `data`'s arrays in their order.
    fn input_parts(&self, what: &str, data: Data) -> Result<(Vec<String>, Vec<Tensor>)> {
        let names: Vec<String> = self
            .arch()
            .input_names()
            .iter()
            .map(|n| n.to_string())
            .collect();
        let parts = in_order(what, "input", &names, data)?;
        Ok((names, parts))
    }

    /// The one array as it is (its caller checks it as before), or several checked and
    /// packed.
    fn pack_inputs(&self, what: &str, names: &[String], mut parts: Vec<Tensor>) -> Result<Tensor> {
        if parts.len() == 1 {
            if let Some(one) = parts.pop() {
                return Ok(one);
            }
        }
        let shapes = self
            .input_shapes()
            .ok_or_else(|| Error::invalid(what, format!("model `{}` is not built", self.name())))?;
        let dtypes = self.input_dtypes();
        for (k, p) in parts.iter().enumerate() {
            let what = format!("{what} input `{}`", names[k]);
            if p.dims().get(1..) != Some(shapes[k].as_slice()) {
                return Err(Error::InputShape {
                    what,
                    expected: std::iter::once(None)
                        .chain(shapes[k].iter().copied().map(Some))
                        .collect(),
                    got: p.dims().to_vec(),
                });
            }
            if p.dtype() != dtypes[k] {
                return Err(Error::DType {
                    what,
                    expected: dtypes[k],
                    got: p.dtype(),
                });
            }
        }
        let refs: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
        pack(what, &refs, &parts)
    }

    /// The tensor the step graphs take for `data` as the model's targets: the one array,
    /// or for several outputs their packed rows, each array reshaped to what its output's
    /// loss takes (`[n]` or `[n, 1]` labels alike).
    pub(crate) fn targets_tensor(&self, what: &str, data: Data) -> Result<Tensor> {
        let names = self.output_names();
        let mut parts = in_order(what, "output", &names, data)?;
        if parts.len() == 1 {
            if let Some(one) = parts.pop() {
                return Ok(one);
            }
        }
        let t = self.compiled()?;
        let Some(heads) = t.loss.as_heads() else {
            return Err(Error::invalid(
                what,
                "internal: a model with several outputs compiled without their layout",
            ));
        };
        let dims = heads.target_dims();
        let mut shaped = Vec::with_capacity(parts.len());
        for (k, p) in parts.into_iter().enumerate() {
            // Labels are integers, as for a model of one output.
            let want = heads.parts[k].1.target_dtype();
            if want == crate::ir::DType::I32
                && !matches!(p.dtype(), crate::ir::DType::I32 | crate::ir::DType::I64)
            {
                return Err(Error::DType {
                    what: format!(
                        "{what} targets for `{}` ({})",
                        names[k],
                        heads.parts[k].1.name()
                    ),
                    expected: want,
                    got: p.dtype(),
                });
            }
            let n = p.dims().first().copied().unwrap_or(0);
            let want: usize = dims[k].iter().product();
            let per: usize = p.dims().iter().skip(1).product();
            if p.dims().is_empty() || per != want {
                let mut expected = vec![n];
                expected.extend(&dims[k]);
                return Err(Error::invalid(
                    format!("{what} targets for `{}`", names[k]),
                    format!(
                        "expected {expected:?} ({want} values per sample), got {:?}",
                        p.dims()
                    ),
                ));
            }
            let mut to = vec![n];
            to.extend(&dims[k]);
            shaped.push(reshaped(p, &to)?);
        }
        let refs: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
        pack(what, &refs, &shaped)
    }

    /// A model's several outputs from their packed rows (`[n, Σ]`), each `[n, dims...]`.
    pub(crate) fn unpack_outputs(&self, what: &str, packed: Tensor) -> Result<Vec<Tensor>> {
        let heads = self
            .output_shapes()
            .ok_or_else(|| Error::invalid(what, format!("model `{}` is not built", self.name())))?;
        match heads {
            [_] => Ok(vec![packed]),
            _ => unpack(what, &packed, heads),
        }
    }
}

/// `t` with its elements in `dims`.
fn reshaped(t: Tensor, dims: &[usize]) -> Result<Tensor> {
    fn go<T: Clone>(a: ArrayD<T>, dims: &[usize]) -> Result<ArrayD<T>> {
        a.into_shape_with_order(IxDyn(dims))
            .map_err(|e| Error::invalid("targets", format!("reshaping: {e}")))
    }
    Ok(match t {
        Tensor::F32(a) => Tensor::F32(go(a, dims)?),
        Tensor::F64(a) => Tensor::F64(go(a, dims)?),
        Tensor::BF16(a) => Tensor::BF16(go(a, dims)?),
        Tensor::I32(a) => Tensor::I32(go(a, dims)?),
        Tensor::I64(a) => Tensor::I64(go(a, dims)?),
        Tensor::Bool(a) => Tensor::Bool(go(a, dims)?),
    })
}

/// The arrays of `data`, one per entry of `names` (the model's inputs or outputs, `kind`),
/// in that order: a list must have one per entry, named data every name and no other.
fn in_order(what: &str, kind: &str, names: &[String], data: Data) -> Result<Vec<Tensor>> {
    let listed = || names.join(", ");
    match data {
        Data::One(t) if names.len() == 1 => Ok(vec![t]),
        Data::One(_) => Err(Error::invalid(
            what,
            format!(
                "the model has {} {kind}s ({}): pass one array each, in that order or by name",
                names.len(),
                listed()
            ),
        )),
        Data::List(v) if v.len() == names.len() => Ok(v),
        Data::List(v) => Err(Error::invalid(
            what,
            format!(
                "{} arrays for the model's {} {kind}s ({})",
                v.len(),
                names.len(),
                listed()
            ),
        )),
        Data::Named(mut v) => {
            if let Some((n, _)) = v.iter().find(|(n, _)| !names.contains(n)) {
                return Err(Error::invalid(
                    what,
                    format!("the model has no {kind} `{n}`; its {kind}s: {}", listed()),
                ));
            }
            names
                .iter()
                .map(|name| {
                    let mut at = v.iter().enumerate().filter(|(_, (n, _))| n == name);
                    let Some((i, _)) = at.next() else {
                        return Err(Error::invalid(
                            what,
                            format!(
                                "no array for the {kind} `{name}` (its {kind}s: {})",
                                listed()
                            ),
                        ));
                    };
                    if at.next().is_some() {
                        return Err(Error::invalid(
                            what,
                            format!("two arrays for the {kind} `{name}`"),
                        ));
                    }
                    Ok(i)
                })
                .collect::<Result<Vec<usize>>>()
                .map(|order| {
                    let mut taken: Vec<Option<Tensor>> =
                        v.drain(..).map(|(_, t)| Some(t)).collect();
                    order.into_iter().filter_map(|i| taken[i].take()).collect()
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::side_by_side::{join, split};
    use crate::Tensor;

    #[test]
    fn the_graph_split_and_join_are_the_host_unpack_and_pack() {
        let mut g = crate::ir::Graph::new("split");
        let x = g.parameter(crate::ir::TensorType::new(crate::ir::DType::F32, [2, 5]));
        let parts = split(
            &mut g,
            x,
            &[vec![3], vec![2]],
            &[crate::ir::DType::F32, crate::ir::DType::I32],
        )
        .unwrap();
        assert_eq!(g.ty(parts[0]).dims(), [2, 3]);
        assert_eq!(g.ty(parts[1]).dtype, crate::ir::DType::I32);
        let back = join(&mut g, &parts).unwrap();
        g.set_outputs(vec![back]).unwrap();
        let packed =
            Tensor::from_vec(&[2, 5], vec![1f32, 2., 3., 7., 8., 4., 5., 6., 9., 10.]).unwrap();
        use crate::backend::Backend;
        let out = crate::backend::native::NativeBackend::new()
            .run(&g, std::slice::from_ref(&packed))
            .unwrap();
        assert_eq!(out[0], packed);
    }
}
