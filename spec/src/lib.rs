//! THE layer catalogue: every layer `model!` knows, with its Keras name and aliases, its
//! arguments in Keras' positional order (type, default, range), and the rules giving its
//! output shape and parameters from its input shape.
//!
//! Two readers, one definition. The macro (`strata-macros`) reads an entry at expansion
//! time, over shapes that may be partly unknown; the runtime (`strata-runtime`) reads the
//! same entry when a model is built, over the shapes of real data. Shapes are therefore
//! `Option<usize>` dims ([`Shape`]), `None` being a size not known before the data.
//!
//! Adding a layer is one entry in [`LAYERS`] (with any new rule beside it), its runtime
//! struct and forward pass in `strata_runtime::nn`, and its tests.

mod choice;
mod entry;
mod error;
mod layers;
mod rules;
mod shape;
mod value;

pub use choice::{Choice, ACTIVATIONS, DATA_FORMATS, INITIALIZERS, PADDINGS};
pub use entry::{ArgDef, ArgDefault, LayerDef, Param, COMMON};
pub use error::{ArgError, ShapeError};
pub use layers::{layer, layer_names, LAYERS};
pub use shape::{dims_text, product, NoSuchAxis, Shape};
pub use value::{check_inferred, check_size, check_sizes_item, Args, Kind, Val};
