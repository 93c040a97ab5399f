//! The Peregrine daemon: configuration, features (UPF, INT, ...) composed into the workers'
//! pipelines, the control loop, metrics and reporting.
//!
//! Modules, leaves first (no module imports one above it): `error`, `metrics`, `summary`,
//! `neighbour`, `gtpu_frames`, `n4`, `impair`; `platform`; `feature`; the features `upf`, `int` (with `int_stage`), `fridge`;
//! `registry`; `config`; `platform_metrics`, `classify_stage`; `daemon`.

mod classify_stage;
pub mod codesign;
pub mod config;
pub mod daemon;
pub mod dta;
pub mod error;
pub mod feature;
pub mod fridge;
pub mod gtpu_frames;
pub mod impair;
pub mod int;
mod int_stage;
pub mod kestrel;
pub mod metrics;
pub mod n4;
pub mod neighbour;
pub mod nexthop;
pub mod pinning;
pub mod platform;
pub mod platform_metrics;
pub mod registry;
pub mod summary;
pub mod telemetry;
pub mod upf;
