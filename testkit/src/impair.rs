//! Link impairment (loss, rate, delay, jitter): the dataplane's model and stage
//! (`peregrine_dataplane::stages::impair`), where the daemon's `impair` pipeline kind takes
//! them from, re-exported under the name the tests and `perf` have always used.

pub use peregrine_dataplane::stages::impair::*;
