//! The model evaluator lives in the collector (`peregrine_control::kestrel::gbt`): the
//! evaluation scores its test runs with the very code `peregrine run` uses online.

pub use peregrine_control::kestrel::gbt::*;
