//! The UPF packet path (TS 23.501 section 6.2.3, TS 29.244 section 5.2): compiled PFCP
//! rule tables and the stage that applies them, in phases: [`parse`], [`lookup`],
//! [`enforce`], [`emit`].

pub mod config;
pub mod csum;
pub mod emit;
pub mod encap;
pub mod enforce;
pub mod fast;
pub mod frag;
pub mod keymap;
pub mod lookup;
pub mod meter;
pub mod pages;
pub mod parse;
pub mod prefetch;
pub mod quick;
pub mod reasm;
pub mod shards;
pub mod stage;
pub mod stats;
pub mod tables;
pub mod work;

pub use stage::{Upf, UpfConfig};
pub use stats::{QfiUsage, UpfStats, UpfTotals, UrrUsage};
pub use tables::{Shard, UpfTables};
