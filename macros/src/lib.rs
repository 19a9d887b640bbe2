//! Placeholder until the macro issue lands.
