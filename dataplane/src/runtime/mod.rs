//! The poll-mode worker runtime: batches, dispositions, named drop reasons, stages,
//! per-worker counters, snapshot publication and the worker loop.

pub mod batch;
pub mod counters;
pub mod egress;
pub mod end;
pub mod handoff;
pub mod inject;
pub mod launch;
pub mod reason;
pub mod running;
pub mod scope;
pub mod snapshot;
pub mod stage;
pub mod tap;
pub mod worker;

pub use batch::{Action, Batch, Disposition, Dispositions};
pub use counters::{Counters, EgressCounters, QidCounters, SOJOURN_BINS, SOJOURN_BIN_EDGES_US};
pub use egress::{EgressConfig, EgressConfigError};
pub use end::END_HOLD_LIMIT;
pub use handoff::HANDOFF_RING;
pub use inject::{InjectError, InjectFrame, Injector, INJECT_MAX};
pub use launch::{start, start_held, WORKER_THREAD_PREFIX};
pub use reason::{DropReason, Reasons};
pub use running::{Handled, Running};
pub use scope::{OnEgress, OnIngress};
pub use snapshot::{Publisher, Reader};
pub use stage::{Context, Pipeline, PipelineFactory, Stage};
pub use tap::Tap;
pub use worker::{ControlPacket, RuntimeConfig, WorkerSpec};
