//! The UPF packet path (TS 23.501 section 6.2.3, TS 29.244 section 5.2): compiled PFCP
//! rule tables and the stages that apply them.

pub mod tables;

pub use tables::{Shard, UpfTables};
