//! Quality of service: RFC 2698 TrTCM meters for QER enforcement and the per-port egress
//! scheduler (8 queues, strict priority plus deficit round robin), the UPF model of
//! Kestrel (Saha et al.; docs/design.md, "UPF facts").
//!
//! Everything takes time as an argument (`runtime::Context::now_ns`), so tests run on a fake
//! clock, and nothing allocates per packet.

pub mod pacer;
pub mod policy;
pub mod scheduler;
pub mod trtcm;
pub mod wheel;

pub use pacer::{Pace, Pacer, PacerConfig};
pub use policy::{BurstSpec, Enforcement, QerPolicy, QosPolicies};
pub use scheduler::{
    Dequeued, QfiMap, QueueClass, QueueConfig, QueueStats, Scheduler, SchedulerConfig,
    ShaperConfig, NUM_QFI, NUM_QUEUES,
};
pub use trtcm::{
    kbps_to_bytes_per_s, Colour, ColourMode, QosConfigError, TokenBucket, TrTcm, TrTcmConfig,
};
