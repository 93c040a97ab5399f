//! The poll-mode worker runtime: batches, dispositions, named drop reasons, stages,
//! per-worker counters, snapshot publication and the worker loop.

pub mod batch;
pub mod counters;
pub mod reason;
pub mod snapshot;
pub mod stage;
pub mod worker;

pub use batch::{Action, Batch, Disposition};
pub use counters::Counters;
pub use reason::{DropReason, Reasons};
pub use snapshot::{Publisher, Reader};
pub use stage::{Context, Pipeline, PipelineFactory, Stage};
pub use worker::{start, ControlPacket, Running, RuntimeConfig, WorkerSpec};
