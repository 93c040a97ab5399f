//! Direct Telemetry Access (Langlet et al., "Direct Telemetry Access", SIGCOMM 2023) in
//! software: the translator's writes into a shared-memory region laid out for the four
//! primitives (Key-Write, Key-Increment, Append, Postcarding), and the collector's queries
//! over it. See docs/dta.md.
//!
//! - [`layout`]: the descriptor the translator publishes in the region's first page;
//! - [`region`]: creating / attaching the mapped file (the crate's only `unsafe`);
//! - [`hash`]: slot formulas, checksums, the Postcarding value hash;
//! - [`store`]: the translator's writes; [`translator`]: a worker's report handling;
//! - [`collector`]: queries and Append list following;
//! - [`rdma`]: the RoCEv2 output mode (WRITE / FETCH_ADD requests, PSN, NAK resync);
//! - `verbs` (feature `verbs`): the collector's side on a real RDMA NIC (libibverbs).

pub mod collector;
pub mod hash;
pub mod layout;
pub mod rdma;
pub mod region;
pub mod store;
pub mod translator;
#[cfg(feature = "verbs")]
pub mod verbs;

#[cfg(test)]
mod tests;

pub use collector::{Collector, KwAnswer, ListFollower, PathAnswer, Polled};
pub use layout::{Layout, PostcardMode, Sizes};
pub use region::Region;
pub use store::Store;
pub use translator::{Config, Counters, RateLimiter, Refused, Translator};

/// Errors of the region and the collector's queries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error("region layout: {field}: {why}")]
    Layout { field: &'static str, why: String },
    #[error("corrupt DTA region: {0}")]
    Corrupt(String),
    #[error("DTA region version {0}, this collector reads version {v}", v = layout::VERSION)]
    Version(u32),
    #[error("DTA region header says {header} bytes but the file has {actual}")]
    Size { header: u64, actual: u64 },
    #[error("the region has no {0} section")]
    Disabled(&'static str),
    #[error("unknown list {0} (the region has lists 0..{1})")]
    UnknownList(u32, u32),
    #[error("{0}")]
    Query(String),
}

/// Why the translator refused a report. Every refusal is counted under [`Refusal::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Shorter than its base header or sub-header.
    Truncated,
    /// A length that is no sub-header's, or bad outer headers.
    Malformed,
    UnknownOpcode,
    RedundancyZero,
    /// Redundancy above the region's maximum.
    RedundancyTooHigh,
    /// Key-Write data words other than the region's K.
    DataWords,
    UnknownList,
    /// Postcard hop at or beyond B.
    HopOutOfRange,
    /// Postcard value outside V (hashed mode): the collector could never validate it.
    ValueOutOfRange,
    /// The region has no section for this primitive.
    PrimitiveDisabled,
    /// A Key-Write slot (K > 1) stayed locked by another writer.
    SlotBusy,
    /// The source exceeded its rate.
    RateLimited,
}

impl Refusal {
    pub const COUNT: usize = 12;
    pub const ALL: [Refusal; Refusal::COUNT] = [
        Refusal::Truncated,
        Refusal::Malformed,
        Refusal::UnknownOpcode,
        Refusal::RedundancyZero,
        Refusal::RedundancyTooHigh,
        Refusal::DataWords,
        Refusal::UnknownList,
        Refusal::HopOutOfRange,
        Refusal::ValueOutOfRange,
        Refusal::PrimitiveDisabled,
        Refusal::SlotBusy,
        Refusal::RateLimited,
    ];

    pub const fn index(self) -> usize {
        self as usize
    }

    pub const fn name(self) -> &'static str {
        match self {
            Refusal::Truncated => "truncated",
            Refusal::Malformed => "malformed",
            Refusal::UnknownOpcode => "unknown_opcode",
            Refusal::RedundancyZero => "redundancy_zero",
            Refusal::RedundancyTooHigh => "redundancy_too_high",
            Refusal::DataWords => "data_words",
            Refusal::UnknownList => "unknown_list",
            Refusal::HopOutOfRange => "hop_out_of_range",
            Refusal::ValueOutOfRange => "value_out_of_range",
            Refusal::PrimitiveDisabled => "primitive_disabled",
            Refusal::SlotBusy => "slot_busy",
            Refusal::RateLimited => "rate_limited",
        }
    }
}
