//! Worker runtime.
