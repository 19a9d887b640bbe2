//! THE layer catalogue: every layer `model!` knows, with its Keras name and aliases, its
//! arguments in Keras' positional order (type, default, range), and the rules giving its
//! output shape and parameters from its input shape.
//!
//! Two readers, one definition. The macro (`strata-macros`) reads an entry at expansion
//! time, over shapes that may be partly unknown; the runtime (`strata-runtime`) reads the
//! same entry when a model is built, over the shapes of real data. Shapes are therefore
//! `Option<usize>` dims ([`Shape`]), `None` being a size not known before the data.
//!
//! Adding a layer touches no macro code:
//! 1. an entry in [`LAYERS`] (`layers.rs`): names, arguments (a [`Kind`] brings its range),
//!    shape rule, parameters (dims, initializer argument, fans), `validate` for arguments
//!    that must agree, `states` for the outputs a call gives after its first (a recurrent
//!    layer's `return_state`; `no_states` for most); a new rule goes in `rules.rs`, a new [`ShapeError`] in `error.rs`
//!    with both wordings;
//! 2. `runtime/src/nn/layers/<layer>.rs`: the struct (a field per argument marked
//!    `field`), `new` with Keras' defaults, and `Layer`'s `class`, `name`, `args` and
//!    `forward`; exported from `layers/mod.rs` and listed in `nn/entry.rs`'s test;
//! 3. tests: forward values by hand and the gradient (`runtime/tests/layers.rs`), the
//!    compile-time shapes against the built model (`tests/model_forms.rs`), a compile-fail
//!    file per new rule (`tests/ui/`); and the catalogue lists in README.md and
//!    `src/lib.rs`.

mod attention;
mod choice;
mod entry;
mod error;
mod layers;
mod merge;
mod recurrent;
mod rules;
mod shape;
mod value;
mod wrapper;

pub use choice::{
    initializer_named, Choice, ACTIVATIONS, DATA_FORMATS, INITIALIZERS, INTERNAL_INITIALIZERS,
    INTERPOLATIONS, MERGE_MODES, PADDINGS, SCORE_MODES,
};
pub use entry::{
    ArgDef, ArgDefault, CallError, LayerDef, ListParamRule, ListRule, Param, ParamRule, Rule,
    ShapeRule, StatesRule, COMMON,
};
pub use error::{ArgError, MergeError, ShapeError};
pub use layers::{layer, layer_names, LAYERS};
pub use shape::{dims_text, product, NoSuchAxis, Shape};
pub use value::{check_inferred, check_not_batch, check_size, check_sizes_item, Args, Kind, Val};
pub use wrapper::Wrapped;
