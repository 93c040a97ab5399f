//! IPv6 in-band telemetry for Peregrine: the worker stages (Miranda et al., "A Flexible
//! In-band Network Telemetry Framework", section III; RFC 9197/9486 IOAM on the wire).
//!
//! This crate runs on the workers, so it holds only what the stages need and links no
//! ZeroMQ: the INT manager (REP rule API, PUB reports), the request decoders and the QoS
//! monitor are control-side, in `peregrine-int-manager`; the option formats are in
//! `peregrine_wire::int`, next to `peregrine_wire::ioam`.
//!
//! - [`gate`]: the sketch-INT co-design gate (INT only for small flows; `docs/codesign.md`).
//! - [`stages`]: INTSource / INTInter / INTSink as worker pipeline stages.
//! - [`namespace`]: the namespace table (III-B.2) and the immutable snapshots the stages read.
//! - [`request`]: the rule model the table holds and the in-band 0x32 request encoder.
//! - [`report`]: the INT sink's fixed-size raw report ([`report::IntReport`]) and the compact
//!   form of the piggy-backed 0x33 report.
#![forbid(unsafe_code)]

pub mod gate;
pub mod namespace;
pub mod report;
pub mod request;
pub mod stages;
