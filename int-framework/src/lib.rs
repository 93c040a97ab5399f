//! IPv6 in-band telemetry for Peregrine (seed 003, RFC 9197/9486 IOAM on the wire).
//!
//! Modules so far:
//! - [`request`] and [`namespace`]: the INT manager's rule API and namespace table (III-B).
//! - [`manager`]: the INT manager over ZeroMQ (REP rule API, PUB reports), III-B.
//! - [`qos_monitor`]: the seed's QoS Monitor (section III-F): throughput, delay, jitter and packet
//!   loss per namespace over 1 s / 10 s / 60 s windows, per hop pair and end to end, plus the
//!   path composition rules of the seed's equations (1)-(3).
//! - [`report`]: the INT sink's fixed-size raw report ([`report::IntReport`]).
//! - [`option`]: the seed's INT options (0x31/0x11, 0x32/0x33) and their IOAM mapping.
//! - [`stages`]: INTSource / INTInter / INTSink as worker pipeline stages.
#![forbid(unsafe_code)]

pub mod manager;
pub mod namespace;
pub mod option;
pub mod qos_monitor;
pub mod report;
pub mod request;
pub mod stages;
