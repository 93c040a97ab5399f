//! The Peregrine packet path: buffers, I/O backends, the poll-mode worker runtime and the
//! stages that run in it.

pub mod buffer;
pub mod classify;
pub mod io;
pub mod meta;
pub mod qos;
pub mod runtime;
pub mod stages;
pub mod telemetry;
pub mod upf;

pub use buffer::{Meta, OwnedBuf, PacketBuf};
pub use meta::{Direction, PacketMeta};
