//! The Peregrine daemon: configuration, backend construction, control loop and reporting.

pub mod config;
pub mod daemon;
pub mod end_marker;
pub mod int;
pub mod metrics;
pub mod n4;
pub mod neighbour;
pub mod summary;
pub mod upf;
