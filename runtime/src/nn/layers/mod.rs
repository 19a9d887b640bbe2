//! The layer catalogue's runtime side: each layer composes IR primitives.

mod dense;

pub use dense::Dense;
