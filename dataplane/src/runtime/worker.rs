//! The poll-mode worker loop (`super::launch` starts the workers, `super::running` watches
//! and stops them).
//!
//! A worker owns its rx queues, its tx queue on every port, its pipeline and its counters.
//! Per burst: rx -> stages -> dispatch (tx per port / drop by reason / to control) -> tx.
//! Nothing on that path allocates, locks or makes a syscall; the control thread reads the
//! worker's counters from atomics the worker refreshes every few thousand polls.
//!
//! Ports configured with an egress scheduler ([`RuntimeConfig::egress`]) queue their `Tx`
//! packets per QID in the worker's own `qos::Scheduler`; the worker dequeues a burst per
//! such port after every batch and on idle polls (so a shaper drains without new traffic),
//! and at stop sends whatever is still queued, shaper or not.
//!
//! Every burst about to be sent on a port (dequeued from its scheduler, or straight from
//! dispatch on an unscheduled port) goes through that port's post-dequeue taps first
//! ([`Pipeline::with_tap`], `runtime::tap`).
//!
//! With several workers, a stage may hand a packet to another worker
//! ([`Disposition::handoff`](super::Disposition::handoff), flow steering): dispatch stages it
//! per destination and pushes each burst to that worker's SPSC ring after the batch; every
//! worker polls its incoming rings after its rx queues and resumes those packets at the stage
//! the sender named (`runtime::handoff`).
//!
//! The control side sends frames of its own (ARP/ND replies, GTP-U End Markers) through an
//! [`Injector`](super::inject::Injector): one bounded channel per worker of fixed-size frames, allocated when the
//! channel is made. A worker looks at its channel once per poll (`is_empty`, two relaxed
//! loads when nothing is pending), and only then copies the frames into buffers of its own
//! pool and sends them on its own tx queue, so injection needs no lock on any port.

use super::batch::{Action, Batch};
use super::counters::{Counters, SharedCounters};
use super::egress::{EgressConfig, EgressPort, NO_EGRESS};
use super::end::{EndGate, END_HOLD_LIMIT};
use super::handoff::{Inbox, Item, Lockstep, Outbox, Quiesce};
use super::inject::{InjectFrame, INJECT_QUEUE};
use super::reason::Reasons;
use super::stage::{Context, Pipeline};
use crate::buffer::PacketBuf;
use crate::io::pcap::RECORDED_BATCH_SPAN_NS;
use crate::io::{Burst, PortId, WorkerIo};
use arrayvec::ArrayVec;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of an exception packet copied to the control thread.
pub const CONTROL_SNAP: usize = 2048;

/// A packet the pipeline handed to the control thread (ARP, unknown traffic, ...), copied so
/// the buffer goes straight back to the worker's pool.
#[derive(Debug, Clone)]
pub struct ControlPacket {
    pub worker: usize,
    pub port: PortId,
    /// Original length; `data` holds at most [`CONTROL_SNAP`] bytes of it.
    pub len: usize,
    pub data: ArrayVec<u8, CONTROL_SNAP>,
}

/// Which queues a worker polls and where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSpec {
    pub id: usize,
    /// CPU to pin to, if any.
    pub core: Option<usize>,
    /// (port, rx queue) pairs this worker polls.
    pub rx_queues: Vec<(PortId, u16)>,
    /// This worker's tx queue on every port.
    pub tx_queue: u16,
}

/// Runtime-wide settings.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub workers: Vec<WorkerSpec>,
    /// Packets per rx burst (32..=256).
    pub burst: usize,
    /// Stop once no packet has arrived for this long (replays on ports with no end signal).
    pub stop_after_idle: Option<Duration>,
    /// Capacity of the worker -> control exception queue (per runtime).
    pub control_queue: usize,
    /// Egress scheduling per port, indexed by port; missing or `None` entries send straight
    /// to the driver (the unscheduled path, unchanged). Each worker gets its own schedulers.
    pub egress: Vec<Option<EgressConfig>>,
}

const PUBLISH_EVERY: u64 = 1024;

/// A worker whose rx is exhausted keeps serving its (shaped) egress queues until they are
/// empty, unless they have not moved for this long (a shaper that can never pass the head
/// packet); then the stop flush sends the rest unshaped.
const EGRESS_STALL_NS: u64 = 1_000_000_000;

/// On a recorded clock, a worker holds its rx at most this long for a tap that is not ready
/// (`Tap::ready`: the control side has not returned a Kestrel bank), then goes on.
pub const TAP_WAIT_LIMIT: Duration = Duration::from_secs(2);

/// At stop, a worker waits at most this long for the other workers to stop handing it
/// packets (a worker that panicked never does).
const HANDOFF_DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// When traffic was last seen, for `stop_after_idle`: busy polls only set a flag.
#[derive(Debug)]
struct IdleClock {
    since: Instant,
    saw_rx: bool,
}

pub(super) struct Worker<I: WorkerIo> {
    pub(super) spec: WorkerSpec,
    pub(super) io: I,
    pub(super) pipeline: Pipeline<I::Buf>,
    pub(super) counters: Counters,
    pub(super) shared: Arc<SharedCounters>,
    pub(super) txq: Vec<Burst<I::Buf>>,
    /// Some `txq` holds packets (set by the slow dispatch path).
    pub(super) tx_pending: bool,
    pub(super) control: Sender<ControlPacket>,
    /// Exception packets sent to the control thread and not yet handled there (see
    /// [`Running::recv_control`](super::running::Running::recv_control)).
    pub(super) control_pending: Arc<AtomicU64>,
    /// Frames from the [`Injector`](super::inject::Injector).
    pub(super) inject_rx: Receiver<InjectFrame>,
    /// One injected frame on its way to `tx_burst` (kept here: no per-call stack array).
    pub(super) inject_burst: Burst<I::Buf>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) epoch: Instant,
    pub(super) burst: usize,
    pub(super) stop_after_idle: Option<Duration>,
    /// Per port: index into `egress`, or [`NO_EGRESS`].
    pub(super) egress_slot: Vec<u16>,
    pub(super) egress: Vec<EgressPort<I::Buf>>,
    /// Worker-clock time of the last dequeue from any scheduler.
    pub(super) egress_progress_ns: u64,
    /// On a recorded clock: the latest capture time this worker has run a batch at.
    pub(super) recorded_ns: u64,
    /// Hand-off rings to and from the other workers (empty with one worker).
    pub(super) outbox: Outbox<I::Buf>,
    pub(super) inbox: Inbox<I::Buf>,
    pub(super) quiesce: Quiesce,
    /// Keeps workers on recorded clocks within a slack of each other.
    pub(super) lockstep: Lockstep,
    /// The end of the run (`super::end`).
    pub(super) end: Arc<EndGate>,
}

impl<I: WorkerIo> Worker<I> {
    pub(super) fn run(mut self) -> Counters {
        if let Some(core) = self.spec.core {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
                tracing::warn!(worker = self.spec.id, core, "could not pin worker to core");
            }
        }
        let mut batch: Batch<I::Buf> = Batch::new();
        batch.want_spares(self.pipeline.spare_buffers());
        self.top_up_spares(&mut batch);
        let mut cx = Context::live(self.epoch, self.spec.id);
        let mut polls: u64 = 0;
        let mut idle = IdleClock {
            since: Instant::now(),
            saw_rx: false,
        };
        let rxq = std::mem::take(&mut self.spec.rx_queues);
        let recorded_clock = self.io.recorded_clock();
        let lossless = self.io.lossless() && self.inbox.rings() > 0;
        let lockstep = recorded_clock && self.inbox.rings() > 0;
        let me = self.spec.id;
        // Where this worker's own rx is in recorded time: its last rx batch (its clock may be
        // further on, pulled by packets handed to it; pacing on that would let two workers
        // ratchet each other forward and leave their rx behind).
        let mut rx_ns = 0u64;
        // Since when a tap has not been ready (recorded clocks only).
        let mut taps_waiting: Option<Instant> = None;
        if lockstep && rxq.is_empty() {
            self.lockstep.set(me, u64::MAX);
        }
        loop {
            let mut got = 0usize;
            // A replay waits for room in the hand-off rings rather than drop (see
            // `WorkerIo::lossless`), and on a recorded clock for the other workers to catch
            // up (`handoff::Lockstep`); its incoming rings are still served below, so two
            // workers waiting on each other both make progress.
            let rx_ok = (!lossless || self.outbox.min_room() >= self.burst)
                && (!lockstep || !self.lockstep.ahead(me, rx_ns))
                && (!recorded_clock || self.taps_ready(&mut taps_waiting));
            for &(port, queue) in rxq.iter().filter(|_| rx_ok) {
                let n = self.io.rx_burst(port, queue, &mut batch.pkts, self.burst);
                if n == 0 {
                    continue;
                }
                got += n;
                if let Some(c) = self.counters.rx_pkts.get_mut(port as usize) {
                    *c += n as u64;
                }
                self.counters.bursts += 1;
                batch.rx_port = port;
                if lockstep {
                    if let Some(p) = batch.pkts.first() {
                        rx_ns = p.meta().timestamp_ns;
                    }
                }
                self.process(&mut batch, &mut cx, recorded_clock, None);
            }
            // Packets other workers steered here: polled like one more rx source.
            if !self.inbox.is_empty() {
                got += self.poll_handoffs(&mut batch, &mut cx, recorded_clock);
            }
            // Empty on the busy path: a check of the channel's head and tail, nothing more.
            if !self.inject_rx.is_empty() {
                self.inject(&cx);
            }
            polls += 1;
            if lockstep {
                let t = if self.io.rx_exhausted() {
                    u64::MAX
                } else {
                    rx_ns
                };
                self.lockstep.set(me, t);
            }
            if got == 0 {
                self.counters.idle_polls += 1;
                if !self.egress.is_empty() && self.egress_backlog() != 0 {
                    // Taps of what drains now see the worker clock (a replay on its recorded
                    // clock keeps the last batch's time).
                    if !recorded_clock {
                        cx.next_batch();
                    }
                    let epoch = self.epoch;
                    self.service_egress(|| epoch.elapsed().as_nanos() as u64);
                    self.flush_tx(&cx);
                }
                if self.idle_should_stop(&mut idle, polls, &cx) {
                    break;
                }
            } else {
                idle.saw_rx = true;
            }
            if polls.is_multiple_of(PUBLISH_EVERY) {
                self.publish();
                if self.stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        self.lockstep.set(me, u64::MAX);
        self.drain_handoffs(&mut batch, &mut cx, recorded_clock);
        // A last quiescent point: stages that stage work for idle moments (the DTA
        // translator's partial Append batches and cached postcards) write it now.
        self.pipeline.idle();
        self.flush_egress(&cx);
        if self.end.held() {
            self.linger(&cx);
        }
        for b in batch.drain_spares() {
            self.io.release(b);
        }
        self.io.flush();
        self.publish();
        self.counters
    }

    /// Run one batch (fresh from rx, or from a hand-off ring resuming at stage `resume`)
    /// through the pipeline, dispatch it, push its hand-offs, serve egress and send.
    #[inline]
    fn process(
        &mut self,
        batch: &mut Batch<I::Buf>,
        cx: &mut Context,
        recorded_clock: bool,
        resume: Option<usize>,
    ) {
        batch.reset_dispositions();
        cx.next_batch();
        if recorded_clock {
            // The batch runs at its first packet's capture time; a run handed over by
            // another worker (whose clock follows its own files, kept within
            // `handoff::LOCKSTEP_SLACK_NS` of ours) never earlier than our last batch:
            // packets that come late run at this worker's time, as if they had waited in
            // a queue, and a token bucket never sees its clock go back for them (a file
            // that loops again does move it back; the meters then add nothing until it
            // passes their last time).
            if let Some(p) = batch.pkts.first() {
                let t = p.meta().timestamp_ns;
                self.recorded_ns = match resume {
                    Some(_) => self.recorded_ns.max(t),
                    None => t,
                };
            }
            cx.set_now(self.recorded_ns);
        }
        match resume {
            None => self.pipeline.run(batch, cx),
            Some(first) => self.pipeline.run_from(first, batch, cx),
        }
        self.dispatch(batch, cx, resume.is_some());
        self.top_up_spares(batch);
        let (counters, io) = (&mut self.counters, &mut self.io);
        counters.handed_off += self.outbox.flush(|pkt| {
            counters.drops[Reasons::HANDOFF_RING_FULL.0 as usize] += 1;
            io.release(pkt);
        });
        if !self.egress.is_empty() {
            self.service_egress(|| cx.now_ns());
        }
        self.flush_tx(cx);
        debug_assert!(batch.pkts.is_empty());
    }

    /// Stages that made packets took spare buffers: top them up, off the stages' path (one
    /// comparison when none was taken).
    #[inline]
    fn top_up_spares(&mut self, batch: &mut Batch<I::Buf>) {
        let n = batch.spares_missing();
        if n == 0 {
            return;
        }
        // `spares_missing` buffers always fit: `give_spare` cannot refuse one here.
        self.io.alloc_many(n, |b| {
            let _ = batch.give_spare(b);
        });
    }

    /// Take up to a burst from each incoming hand-off ring, one run (same rx port and resume
    /// stage) per batch; returns how many packets were taken.
    fn poll_handoffs(
        &mut self,
        batch: &mut Batch<I::Buf>,
        cx: &mut Context,
        recorded_clock: bool,
    ) -> usize {
        let mut got = 0;
        // On a recorded clock a run covers no more recorded time than an rx batch does.
        let span = if recorded_clock {
            RECORDED_BATCH_SPAN_NS
        } else {
            u64::MAX
        };
        for r in 0..self.inbox.rings() {
            let mut budget = self.burst;
            while budget > 0 {
                let Some((port, resume)) =
                    self.inbox.pop_run_within(r, &mut batch.pkts, budget, span)
                else {
                    break;
                };
                let n = batch.pkts.len();
                budget = budget.saturating_sub(n);
                got += n;
                self.counters.handoff_received += n as u64;
                self.counters.bursts += 1;
                batch.rx_port = port;
                self.process(batch, cx, recorded_clock, Some(usize::from(resume)));
            }
        }
        got
    }

    /// At stop: stop handing off, then keep serving the incoming rings until every worker
    /// has stopped handing off and they are empty (see `runtime::handoff`).
    fn drain_handoffs(&mut self, batch: &mut Batch<I::Buf>, cx: &mut Context, recorded: bool) {
        if self.inbox.rings() == 0 {
            return;
        }
        self.quiesce.arrive();
        let deadline = Instant::now() + HANDOFF_DRAIN_LIMIT;
        let mut polls = 0u64;
        loop {
            polls += 1;
            if polls.is_multiple_of(64) {
                // Still a quiescent state for snapshot publishers while waiting.
                self.pipeline.idle();
            }
            // Read before polling: once all have arrived, every push is visible.
            let all = self.quiesce.all();
            let got = self.poll_handoffs(batch, cx, recorded);
            if !self.inject_rx.is_empty() {
                self.inject(cx);
            }
            if !self.egress.is_empty() && self.egress_backlog() != 0 {
                let epoch = self.epoch;
                self.service_egress(|| epoch.elapsed().as_nanos() as u64);
                self.flush_tx(cx);
            }
            if all && got == 0 && self.inbox.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                tracing::warn!(
                    worker = self.spec.id,
                    "other workers still running at stop; leaving the hand-off rings"
                );
                break;
            }
            std::hint::spin_loop();
        }
    }

    /// On a recorded clock: every tap is ready, or one has not been for [`TAP_WAIT_LIMIT`]
    /// (then the worker goes on and the tap degrades as a live one would).
    #[inline]
    fn taps_ready(&mut self, since: &mut Option<Instant>) -> bool {
        if self.pipeline.taps_ready() {
            *since = None;
            return true;
        }
        let t0 = *since.get_or_insert_with(Instant::now);
        t0.elapsed() > TAP_WAIT_LIMIT
    }

    /// Held at the end (`super::end`): hand over what the taps hold, arrive, and send what
    /// the control side injects until it releases the workers.
    #[cold]
    fn linger(&mut self, cx: &Context) {
        let deadline = Instant::now() + END_HOLD_LIMIT;
        // A tap with no room to hand over yet (a window bank whose spare the control side
        // has not returned) is asked again.
        while !self.pipeline.end() && Instant::now() <= deadline {
            if !self.inject_rx.is_empty() {
                self.inject(cx);
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        self.publish();
        self.end.arrive();
        loop {
            // Read before draining: every frame injected before the release is seen below.
            let released = self.end.released();
            if !self.inject_rx.is_empty() {
                self.inject(cx);
            }
            if released && self.inject_rx.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                tracing::warn!(
                    worker = self.spec.id,
                    "no release from the control side at the end; stopping"
                );
                break;
            }
            // Off the packet path (the run is over): give the core back between checks.
            std::thread::sleep(Duration::from_micros(100));
        }
        self.flush_tx(cx);
    }

    /// Copy the schedulers' counters and depths into `counters`, then publish them.
    fn publish(&mut self) {
        for (e, c) in self.egress.iter().zip(self.counters.egress.iter_mut()) {
            for (qid, q) in c.queues.iter_mut().enumerate() {
                let st = e.sched.stats(qid as u8);
                q.enq_pkts = st.enq_pkts;
                q.enq_bytes = st.enq_bytes;
                q.deq_pkts = st.deq_pkts;
                q.deq_bytes = st.deq_bytes;
                q.drop_pkts = st.drop_pkts;
                q.drop_bytes = st.drop_bytes;
                q.depth_pkts = e.sched.queue_len(qid as u8) as u64;
                q.depth_bytes = e.sched.queue_bytes(qid as u8);
            }
        }
        self.shared.store(&self.counters);
    }

    /// Packets queued in this worker's schedulers.
    #[inline]
    fn egress_backlog(&self) -> usize {
        self.egress.iter().map(|e| e.sched.len()).sum()
    }

    /// Dequeue up to a burst from every non-empty scheduler into its port's tx queue; `now`
    /// is read only if some scheduler holds packets. `flush_tx` sends them.
    #[inline]
    fn service_egress(&mut self, now: impl FnOnce() -> u64) {
        if self.egress_backlog() == 0 {
            return;
        }
        let now_ns = now();
        let mut moved = 0;
        for (e, c) in self.egress.iter_mut().zip(self.counters.egress.iter_mut()) {
            if e.sched.is_empty() {
                continue;
            }
            let q = &mut self.txq[e.port as usize];
            let room = self.burst.min(q.remaining_capacity());
            moved += e.sched.dequeue_burst(now_ns, room, |d| {
                c.queues[usize::from(d.qid)].record_sojourn(d.sojourn_ns);
                q.push(d.pkt);
            });
        }
        if moved > 0 {
            self.tx_pending = true;
            self.egress_progress_ns = now_ns;
        }
    }

    /// At stop: send everything still queued, ignoring shapers; what the driver does not
    /// take is counted `tx_full` by `flush_tx`, so nothing is lost uncounted.
    fn flush_egress(&mut self, cx: &Context) {
        if self.egress_backlog() == 0 {
            return;
        }
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        for i in 0..self.egress.len() {
            loop {
                let e = &mut self.egress[i];
                let c = &mut self.counters.egress[i];
                let q = &mut self.txq[e.port as usize];
                let room = q.remaining_capacity();
                let n = e.sched.flush_burst(now_ns, room, |d| {
                    c.queues[usize::from(d.qid)].record_sojourn(d.sojourn_ns);
                    q.push(d.pkt);
                });
                if n == 0 {
                    break;
                }
                self.tx_pending = true;
                self.flush_tx(cx);
            }
        }
    }

    /// Called on an empty poll: flushes writers now and then and decides whether to stop.
    #[cold]
    fn idle_should_stop(&mut self, idle: &mut IdleClock, polls: u64, cx: &Context) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return true;
        }
        if polls.is_multiple_of(64) {
            // Quiescent state: idle stages pick up newly published tables now.
            self.pipeline.idle();
        }
        if self.io.rx_exhausted() {
            // A replay's shaped queues drain at the shaper's rate before the worker stops, and
            // what it sent the control thread is handled first (an ARP reply to inject, say),
            // unless that takes longer than a stalled shaper would.
            let now_ns = self.epoch.elapsed().as_nanos() as u64;
            let stalled = now_ns.saturating_sub(self.egress_progress_ns) > EGRESS_STALL_NS;
            let control_done =
                self.control_pending.load(Ordering::Acquire) == 0 && self.inject_rx.is_empty();
            if !control_done && !self.inject_rx.is_empty() {
                self.inject(cx);
            }
            if (self.egress_backlog() == 0 && control_done) || stalled {
                return true;
            }
        }
        if polls.is_multiple_of(256) {
            self.io.flush();
            self.publish();
            if let Some(limit) = self.stop_after_idle {
                // The clock is read here, on the idle path, never per busy poll.
                if std::mem::take(&mut idle.saw_rx) {
                    idle.since = Instant::now();
                } else if idle.since.elapsed() >= limit {
                    return true;
                }
            }
        }
        std::hint::spin_loop();
        false
    }

    /// Carry out every packet's disposition. `resumed`: the batch came from a hand-off ring
    /// (its packets may not be handed off again).
    #[inline]
    fn dispatch(&mut self, batch: &mut Batch<I::Buf>, cx: &Context, resumed: bool) {
        // Whole batch sent on one port (cross-connects, one-way forwarding, a UPF forwarding
        // every packet of the batch one way: their egress queue ids may differ, which a port
        // without a scheduler ignores): hand the batch's array straight to the driver, no
        // per-packet work at all.
        if let Some(p) = batch.one_tx_port() {
            // The per-port tx queues are empty here: `flush_tx` drains them after every
            // batch, so sending this batch first cannot reorder anything. A scheduled port
            // takes the per-packet path below (enqueue by queue id).
            if self.egress_slot.get(p as usize) == Some(&NO_EGRESS) {
                debug_assert!(self.txq[p as usize].is_empty());
                self.pipeline.run_taps(p, &mut batch.pkts, cx);
                let n = batch.pkts.len();
                let sent = self.io.tx_burst(p, self.spec.tx_queue, &mut batch.pkts);
                self.counters.tx_pkts[p as usize] += sent as u64;
                if sent < n {
                    self.counters.drops[Reasons::TX_FULL.0 as usize] += (n - sent) as u64;
                }
                return;
            }
        }
        if let Some(d) = batch.uniform() {
            // Whole batch dropped under one reason (a collector that stored every report):
            // counted at once, freed in one bulk call.
            if let Action::Drop(r) = d.action() {
                if let Some(c) = self.counters.drops.get_mut(r.0 as usize) {
                    *c += batch.pkts.len() as u64;
                }
                self.io.release_all(&mut batch.pkts);
                return;
            }
        }
        self.tx_pending = true;
        let rx_port = batch.rx_port;
        for (pkt, d) in batch.drain() {
            match d.action() {
                Action::Tx(p) => match self.egress_slot.get(p as usize) {
                    Some(&NO_EGRESS) => {
                        if let Err(e) = self.txq[p as usize].try_push(pkt) {
                            self.count_drop(Reasons::TX_FULL.0);
                            self.io.release(e.element());
                        }
                    }
                    Some(&slot) => {
                        let e = &mut self.egress[usize::from(slot)];
                        let qid = d.qid().unwrap_or(e.default_qid);
                        if let Err(pkt) = e.sched.enqueue(pkt, qid, cx.now_ns()) {
                            self.count_drop(Reasons::EGRESS_QUEUE_FULL.0);
                            self.io.release(pkt);
                        }
                    }
                    None => {
                        self.count_drop(Reasons::BAD_TX_PORT.0);
                        self.io.release(pkt);
                    }
                },
                Action::Drop(r) => {
                    self.count_drop(r.0);
                    self.io.release(pkt);
                }
                Action::ToControl => {
                    self.send_to_control(rx_port, &pkt);
                    self.io.release(pkt);
                }
                Action::Continue => {
                    self.count_drop(Reasons::NO_DISPOSITION.0);
                    self.io.release(pkt);
                }
                Action::Handoff { worker, resume_at } => {
                    let w = usize::from(worker);
                    if resumed || !self.outbox.reaches(w) {
                        self.count_drop(Reasons::BAD_HANDOFF.0);
                        self.io.release(pkt);
                        continue;
                    }
                    let item = Item {
                        pkt,
                        rx_port,
                        resume_at,
                    };
                    if let Err(item) = self.outbox.stage(w, item) {
                        self.count_drop(Reasons::HANDOFF_RING_FULL.0);
                        self.io.release(item.pkt);
                    }
                }
            }
        }
    }

    #[inline]
    fn count_drop(&mut self, r: u16) {
        if let Some(c) = self.counters.drops.get_mut(r as usize) {
            *c += 1;
        }
    }

    fn send_to_control(&mut self, port: PortId, pkt: &I::Buf) {
        let bytes = pkt.data();
        let mut data = ArrayVec::new();
        let _ = data.try_extend_from_slice(&bytes[..bytes.len().min(CONTROL_SNAP)]);
        let msg = ControlPacket {
            worker: self.spec.id,
            port,
            len: bytes.len(),
            data,
        };
        // Counted before the send, so the control side never sees it go below zero.
        self.control_pending.fetch_add(1, Ordering::AcqRel);
        match self.control.try_send(msg) {
            Ok(()) => self.counters.to_control += 1,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.control_pending.fetch_sub(1, Ordering::AcqRel);
                self.count_drop(Reasons::CONTROL_QUEUE_FULL.0)
            }
        }
    }

    /// Send what the control side injected. Our own tx queues are flushed first, so a frame
    /// injected after the rules that stopped a flow were published leaves after every packet
    /// of that flow this worker already handled (the End Marker ordering, TS 29.281 section
    /// 7.3.2). Frames go straight to the driver: a port's egress scheduler is bypassed.
    #[cold]
    #[inline(never)]
    fn inject(&mut self, cx: &Context) {
        self.flush_tx(cx);
        let q = self.spec.tx_queue;
        for _ in 0..INJECT_QUEUE {
            let Ok(f) = self.inject_rx.try_recv() else {
                break;
            };
            let Some(mut b) = self.io.alloc() else {
                self.count_drop(Reasons::INJECT_FAILED.0);
                continue;
            };
            match b.append(f.data.len()) {
                Ok(room) => room.copy_from_slice(&f.data),
                Err(_) => {
                    self.io.release(b);
                    self.count_drop(Reasons::INJECT_FAILED.0);
                    continue;
                }
            }
            self.inject_burst.push(b);
            // Counted apart from `tx_pkts`, which stays the fate of received packets.
            if self.io.tx_burst(f.port, q, &mut self.inject_burst) == 1 {
                self.counters.injected += 1;
            } else {
                self.count_drop(Reasons::INJECT_FAILED.0);
            }
        }
    }

    /// Send every per-port tx queue, each burst through its port's taps first.
    #[inline]
    fn flush_tx(&mut self, cx: &Context) {
        if !self.tx_pending {
            return;
        }
        self.tx_pending = false;
        let q = self.spec.tx_queue;
        for (port, pkts) in self.txq.iter_mut().enumerate() {
            if pkts.is_empty() {
                continue;
            }
            self.pipeline.run_taps(port as PortId, pkts, cx);
            let n = pkts.len();
            let sent = self.io.tx_burst(port as PortId, q, pkts);
            self.counters.tx_pkts[port] += sent as u64;
            if sent < n {
                self.counters.drops[Reasons::TX_FULL.0 as usize] += (n - sent) as u64;
            }
        }
    }
}
