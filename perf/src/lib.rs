//! perf helpers
