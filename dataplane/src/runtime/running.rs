//! The control thread's handle on running workers ([`Running`]): counters, exception
//! packets, injection, stop and the end of a run. Started by `super::launch::start`.

use super::counters::{Counters, EgressCounters, SharedCounters};
use super::end::EndGate;
use super::inject::Injector;
use super::reason::Reasons;
use super::worker::ControlPacket;
use crate::io::PortInfo;
use crossbeam_channel::Receiver;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// An exception packet being handled by the control thread; see [`Running::recv_control`].
#[derive(Debug)]
pub struct Handled<'a> {
    pub packet: ControlPacket,
    pending: &'a AtomicU64,
}

impl std::ops::Deref for Handled<'_> {
    type Target = ControlPacket;
    fn deref(&self) -> &ControlPacket {
        &self.packet
    }
}

impl Drop for Handled<'_> {
    fn drop(&mut self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Workers started on a backend; the handle the control thread keeps.
#[derive(Debug)]
pub struct Running {
    pub(super) handles: Vec<JoinHandle<Counters>>,
    pub(super) shared: Vec<Arc<SharedCounters>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) control_rx: Receiver<ControlPacket>,
    pub(super) control_pending: Arc<AtomicU64>,
    pub(super) injector: Injector,
    pub(super) reasons: Reasons,
    pub(super) ports: Vec<PortInfo>,
    pub(super) stage_names: Vec<&'static str>,
    pub(super) end: Arc<EndGate>,
}

impl Running {
    /// Counters summed over workers, as last published.
    pub fn counters(&self) -> Counters {
        let mut total = Counters::new(self.ports.len(), self.reasons.len());
        for s in &self.shared {
            total.add(&s.load());
        }
        total
    }

    pub fn reasons(&self) -> &Reasons {
        &self.reasons
    }

    pub fn ports(&self) -> &[PortInfo] {
        &self.ports
    }

    pub fn stage_names(&self) -> &[&'static str] {
        &self.stage_names
    }

    /// Per-port, per-QID egress counters of every scheduled port, summed over workers, as
    /// last published (also in [`counters`](Self::counters)`().egress`).
    pub fn egress(&self) -> Vec<EgressCounters> {
        self.counters().egress
    }

    /// The next exception packet from the workers, waiting at most `timeout`. The packet
    /// counts as handled when the returned guard is dropped: a worker whose replay has ended
    /// waits for that before stopping, so what the control thread injects in answer (an ARP
    /// reply) still goes out.
    pub fn recv_control(&self, timeout: Duration) -> Option<Handled<'_>> {
        let p = self.control_rx.recv_timeout(timeout).ok()?;
        Some(Handled {
            packet: p,
            pending: &self.control_pending,
        })
    }

    /// Exception packets waiting for the control thread.
    pub fn control_backlog(&self) -> usize {
        self.control_rx.len()
    }

    /// A handle for sending frames through the workers (Clone + Send).
    pub fn injector(&self) -> Injector {
        self.injector.clone()
    }

    /// The flag workers poll; set it (e.g. from a signal handler) to stop them.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Every worker has reached its end and is held there (a runtime from
    /// [`start_held`](super::launch::start_held)), or has returned.
    pub fn all_ended(&self) -> bool {
        self.end.arrived() >= self.handles.len() || self.finished()
    }

    /// Whether the workers wait for [`release_end`](Self::release_end) at their end.
    pub fn holds_end(&self) -> bool {
        self.end.held()
    }

    /// Let the held workers send what was injected and return.
    pub fn release_end(&self) {
        self.end.release();
    }

    /// True once every worker has returned.
    pub fn finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    /// Each worker's counters, as last published, in worker order.
    pub fn worker_counters(&self) -> Vec<Counters> {
        self.shared.iter().map(|s| s.load()).collect()
    }

    /// Wait for every worker; returns the final counters summed over workers.
    pub fn join(self) -> Counters {
        let mut total = Counters::new(self.ports.len(), self.reasons.len());
        for c in self.join_workers() {
            total.add(&c);
        }
        total
    }

    /// Wait for every worker; returns each worker's final counters, in worker order (a
    /// worker that panicked gives empty counters).
    pub fn join_workers(self) -> Vec<Counters> {
        let (ports, reasons) = (self.ports.len(), self.reasons.len());
        self.handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    tracing::error!("a worker panicked");
                    Counters::new(ports, reasons)
                })
            })
            .collect()
    }
}
