//! `Model::export` and `Exported` (filled in by the export work).
