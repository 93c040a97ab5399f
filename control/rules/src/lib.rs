//! The PFCP rule compiler of the Peregrine UPF (docs/design.md, "Shape": "PFCP session
//! state machine -> rule compiler -> snapshot publish"). It turns the N4 node's sessions
//! ([`peregrine_n4::Session`], TS 29.244 section 5.2) into the sharded, immutable
//! [`UpfTables`](peregrine_dataplane::upf::UpfTables) the workers read, patching only the
//! shards a change touches.
//!
//! * [`sdf`]: SDF Filter Flow Description parser (TS 29.212 section 5.4.2, RFC 6733 4.3).
//! * [`compile`]: the [`Compiler`] (validation, slot allocation, staging, snapshots).
//! * `patch`: the next version of a touched shard, copied from the previous one without
//!   the changed sessions' entries, plus their new ones.
//! * [`static_sessions`]: sessions from the daemon config, and synthetic ones matching
//!   `pg-gen`.
#![forbid(unsafe_code)]

pub mod compile;
mod patch;
pub mod sdf;
pub mod static_sessions;

pub use compile::{
    session_bytes_estimate, shard_bits_for, CompileError, CompileErrorKind, Compiler,
    CompilerConfig, CompilerStats, GROW_KEYS_PER_SHARD,
};
pub use sdf::{parse_flow_description, FlowDescription, SdfError};
