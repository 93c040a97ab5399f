//! Telemetry estimators that run in the workers: I/O-free, time passed in, per-worker state.

pub mod fridge;
