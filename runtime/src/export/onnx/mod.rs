//! `Model::export_onnx` (filled in by the ONNX work).
