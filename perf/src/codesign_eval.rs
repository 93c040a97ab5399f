//! The sketch-INT co-design evaluation (`pg-codesign-eval`, `docs/codesign.md`).

pub mod accuracy;
pub mod planner;
