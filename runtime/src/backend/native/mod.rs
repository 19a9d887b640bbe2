//! The embedded CPU backend: nothing to install, planned execution over a reused arena.
//!
//! Compiling a graph plans it once: dead nodes are dropped, reshapes become views,
//! constants are materialised, and every remaining value is given a slot in an arena whose
//! slots are reused as soon as their value is dead. Executing walks the plan calling each
//! op's kernel (in `crate::ops`) on slices of the arena, so a steady-state step allocates
//! no tensor memory. Matrix products and convolutions use the `gemm` crate.

mod bias_relu_pool;
#[cfg(test)]
mod bias_relu_pool_tests;
mod conv_grad;
mod conv_pool;
mod conv_pool_grad;
#[cfg(test)]
mod conv_pool_grad_tests;
#[cfg(test)]
mod conv_pool_tests;
mod executor;
mod fuse;
mod fused_adam;
mod loop_entry;
#[cfg(test)]
mod loop_entry_tests;
mod plan;
#[cfg(test)]
mod pool_index_tests;
pub(crate) mod replicated;
mod sum_of_products;
#[cfg(test)]
mod sum_of_products_tests;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod while_tests;
mod window;
#[cfg(test)]
mod window_tests;

pub use crate::kernel::Storage;
pub use replicated::MAX_NATIVE_REPLICAS;

use super::{Backend, Buffer, CompileOptions, Executable};
use crate::ir::Graph;
use crate::kernel::data::Data;
use crate::{Error, Result, Tensor};

/// The native CPU backend.
#[derive(Clone, Debug, Default)]
pub struct NativeBackend {
    _private: (),
}

impl NativeBackend {
    pub fn new() -> NativeBackend {
        NativeBackend { _private: () }
    }
}

impl Backend for NativeBackend {
    fn name(&self) -> String {
        "native".into()
    }

    fn compile(&self, graph: &Graph, options: &CompileOptions) -> Result<Box<dyn Executable>> {
        graph.verify()?;
        options.validate(graph)?;
        Ok(Box::new(executor::NativeExecutable::new(graph, options)?))
    }

    fn upload(&self, t: &Tensor) -> Result<Buffer> {
        Ok(Buffer::native(t.ty(), Storage::from_tensor(t)))
    }

    fn upload_into(&self, t: &Tensor, b: &mut Buffer) -> Result<()> {
        b.native_storage_mut()?.assign_from_tensor(t);
        // Compared before building: a type is a small allocation, and this runs every step.
        if b.ty.dtype != t.dtype() || b.ty.dims() != t.dims() {
            b.ty = t.ty();
        }
        Ok(())
    }

    fn upload_taking(&self, t: &mut Tensor, b: &mut Buffer) -> Result<()> {
        if b.native_storage_mut()?.swap_with_tensor(t) {
            if b.ty.dtype != t.dtype() || b.ty.dims() != t.dims() {
                b.ty = t.ty();
            }
            return Ok(());
        }
        self.upload_into(t, b)
    }

    fn download(&self, b: &Buffer) -> Result<Tensor> {
        b.native_storage()?.to_tensor(b.ty())
    }

    fn read_f32_into(&self, b: &Buffer, out: &mut [f32]) -> Result<()> {
        super::check_f32_vector(b, out.len())?;
        match b.native_storage()?.data() {
            Data::F32(a) if a.len() == out.len() => {
                out.copy_from_slice(a);
                Ok(())
            }
            _ => Err(Error::invalid(
                "read_f32_into",
                format!("the buffer's storage does not hold its {}", b.ty()),
            )),
        }
    }

    fn read_scalar(&self, b: &Buffer) -> Result<f64> {
        let s = b.native_storage()?;
        if b.ty().numel() != 1 || s.is_empty() {
            return Err(Error::invalid(
                "read_scalar",
                format!("expected one element, got {}", b.ty()),
            ));
        }
        Ok(match s.data() {
            Data::F32(a) => a[0] as f64,
            Data::F64(a) => a[0],
            Data::BF16(a) => a[0].to_f64(),
            Data::I32(a) => a[0] as f64,
            Data::I64(a) => a[0] as f64,
            Data::Bool(a) => a[0] as u8 as f64,
        })
    }
}
