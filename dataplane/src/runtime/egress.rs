//! Per-port egress scheduling in the worker: the configuration and each worker's own
//! schedulers (8 queues, strict priority plus byte DRR, optional shaper; `qos::scheduler`),
//! the UPF queueing model of Kestrel (Saha et al.; docs/design.md, "UPF facts").
//!
//! A stage marks a packet with [`Disposition::tx_queue`](super::Disposition::tx_queue)
//! (for a UPF, the QID its QoS flow's QFI maps to, TS 23.501 §5.7); a `Tx` disposition to a
//! scheduled port is enqueued there instead of going straight to the driver, and the worker
//! dequeues a burst per port after every batch and on idle polls.

use crate::io::PortId;
use crate::qos::{QfiMap, QosConfigError, Scheduler, SchedulerConfig, NUM_QUEUES};

/// Egress scheduling of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressConfig {
    pub scheduler: SchedulerConfig,
    /// Queue for a `Tx` disposition that names none (`Disposition::tx`).
    pub default_qid: u8,
}

/// The queue the default [`QfiMap`] gives QFI 9 (5QI 9, the default bearer).
pub fn default_qid() -> u8 {
    QfiMap::default().qid(9)
}

impl EgressConfig {
    /// `scheduler` with the default queue of [`default_qid`].
    pub fn new(scheduler: SchedulerConfig) -> EgressConfig {
        EgressConfig {
            scheduler,
            default_qid: default_qid(),
        }
    }

    /// Check the configuration as a worker would build it.
    pub fn validate(&self) -> Result<(), EgressConfigError> {
        if usize::from(self.default_qid) >= NUM_QUEUES {
            return Err(EgressConfigError::DefaultQid(self.default_qid));
        }
        Scheduler::<crate::buffer::OwnedBuf>::new(&self.scheduler, 0)?;
        Ok(())
    }
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig::new(SchedulerConfig::default())
    }
}

/// Why an egress configuration was refused.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum EgressConfigError {
    #[error("default egress queue {0} is not below {NUM_QUEUES}")]
    DefaultQid(u8),
    #[error(transparent)]
    Scheduler(#[from] QosConfigError),
    #[error("egress scheduler configured for port {0}, which does not exist")]
    NoSuchPort(usize),
}

/// One scheduled port in a worker.
#[derive(Debug)]
pub(crate) struct EgressPort<B> {
    pub port: PortId,
    pub sched: Scheduler<B>,
    pub default_qid: u8,
}

/// `egress_slot` value of a port without a scheduler.
pub(crate) const NO_EGRESS: u16 = u16::MAX;
