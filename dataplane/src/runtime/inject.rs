//! Frames the control side sends through a worker's tx queue (ARP/ND replies, GTP-U End
//! Markers): one bounded channel per worker of fixed-size frames, allocated when the channel
//! is made, so injection needs no lock on any port. The worker side is `Worker::inject`.

use crate::io::PortId;
use arrayvec::ArrayVec;
use crossbeam_channel::{Sender, TrySendError};
use std::sync::Arc;

/// Largest frame the control side can inject (the data room of a default buffer).
pub const INJECT_MAX: usize = crate::buffer::DEFAULT_DATA_ROOM;

/// Frames a worker's injection channel holds.
pub const INJECT_QUEUE: usize = 256;

/// A frame on its way from the control side to a worker's tx queue.
#[derive(Debug, Clone)]
pub struct InjectFrame {
    pub port: PortId,
    pub data: ArrayVec<u8, INJECT_MAX>,
}

/// Why [`Injector::inject`] refused a frame. A frame accepted here can still fail in the
/// worker (no buffer, port full): that is counted as the drop reason `inject_failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InjectError {
    #[error("no worker {0}")]
    NoSuchWorker(usize),
    #[error("no port {0}")]
    NoSuchPort(PortId),
    #[error("frame of {0} bytes: empty or longer than {INJECT_MAX}")]
    BadLength(usize),
    #[error("the worker's injection queue is full")]
    QueueFull,
    #[error("the worker has stopped")]
    Stopped,
}

/// The control side's handle for sending frames out of a port through a worker.
#[derive(Debug, Clone)]
pub struct Injector {
    pub(crate) workers: Arc<[Sender<InjectFrame>]>,
    pub(crate) ports: usize,
}

impl Injector {
    /// Queue `bytes` (a whole Ethernet frame) to be sent on `port` by `worker`, on that
    /// worker's tx queue. Never blocks. Frames injected through one worker go out in order,
    /// after whatever that worker had already queued for the port (see `Worker::inject`).
    pub fn inject(&self, worker: usize, port: PortId, bytes: &[u8]) -> Result<(), InjectError> {
        let tx = self
            .workers
            .get(worker)
            .ok_or(InjectError::NoSuchWorker(worker))?;
        if usize::from(port) >= self.ports {
            return Err(InjectError::NoSuchPort(port));
        }
        let mut data = ArrayVec::new();
        if bytes.is_empty() || data.try_extend_from_slice(bytes).is_err() {
            return Err(InjectError::BadLength(bytes.len()));
        }
        tx.try_send(InjectFrame { port, data })
            .map_err(|e| match e {
                TrySendError::Full(_) => InjectError::QueueFull,
                TrySendError::Disconnected(_) => InjectError::Stopped,
            })
    }

    /// How many workers frames can be injected through.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }
}
