//! Hand-off rings between workers (flow steering, `Disposition::handoff`).
//!
//! Every ordered pair of workers has one lock-free single-producer single-consumer ring
//! ([`rtrb`]: a well-kept SPSC ring whose chunked write and read move a whole burst with
//! one index update each, where crossbeam's `ArrayQueue` is multi-producer and pays a CAS per
//! element). A worker stages the packets it hands off during dispatch, one burst per
//! destination, and pushes each burst with one chunk write after the batch; the owner polls
//! its incoming rings like another rx source and resumes each run of packets from the stage
//! the sender named. One ring per pair and FIFO rings keep the order of a flow. All rings are
//! allocated when the runtime starts; nothing allocates per packet.
//!
//! Stopping: a worker whose rx is finished (or that was told to stop) counts itself
//! *quiesced* and keeps draining its incoming rings until every worker is quiesced and its
//! rings are empty. A resumed packet is never handed off again (`bad_handoff`), so a
//! quiesced worker produces no hand-offs and nothing is left in a ring uncounted.

use crate::buffer::PacketBuf;
use crate::io::{Burst, PortId, MAX_BURST};
use arrayvec::ArrayVec;
use rtrb::{Consumer, Producer, RingBuffer};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Packets each ring between two workers holds.
pub const HANDOFF_RING: usize = 1024;

/// A packet on its way to another worker, with what that worker needs to resume it.
#[derive(Debug)]
pub struct Item<B> {
    pub pkt: B,
    /// The port the packet was received on (stages read `Batch::rx_port`).
    pub rx_port: PortId,
    /// The stage index to resume at.
    pub resume_at: u8,
}

/// One worker's outgoing side: a staging burst and a ring producer per other worker.
#[derive(Debug)]
pub struct Outbox<B> {
    staged: Vec<ArrayVec<Item<B>, MAX_BURST>>,
    rings: Vec<Option<Producer<Item<B>>>>,
    pending: bool,
}

/// One worker's incoming side: a ring consumer per other worker.
#[derive(Debug)]
pub struct Inbox<B> {
    rings: Vec<Consumer<Item<B>>>,
}

/// Rings between every ordered pair of `n` workers: worker `i` gets `(outbox, inbox)` number
/// `i`. Allocates every ring now. (Public for benchmarks; the runtime makes its own.)
pub fn mesh<B>(n: usize, slots: usize) -> Vec<(Outbox<B>, Inbox<B>)> {
    let mut out: Vec<Vec<Option<Producer<Item<B>>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut inb: Vec<Vec<Consumer<Item<B>>>> = (0..n).map(|_| Vec::new()).collect();
    for (from, row) in out.iter_mut().enumerate() {
        for (to, slot) in row.iter_mut().enumerate() {
            if from != to {
                let (p, c) = RingBuffer::new(slots);
                *slot = Some(p);
                inb[to].push(c);
            }
        }
    }
    out.into_iter()
        .zip(inb)
        .map(|(rings, cons)| {
            (
                Outbox {
                    staged: (0..n).map(|_| ArrayVec::new()).collect(),
                    rings,
                    pending: false,
                },
                Inbox { rings: cons },
            )
        })
        .collect()
}

impl<B: PacketBuf> Outbox<B> {
    /// Whether `worker` is another worker this one has a ring to.
    #[inline]
    pub fn reaches(&self, worker: usize) -> bool {
        matches!(self.rings.get(worker), Some(Some(_)))
    }

    /// Free slots of the fullest ring to another worker (`usize::MAX` with no rings).
    #[inline]
    pub fn min_room(&self) -> usize {
        self.rings
            .iter()
            .flatten()
            .map(|r| r.slots())
            .min()
            .unwrap_or(usize::MAX)
    }

    /// Stage `item` for `worker` (which [`reaches`](Self::reaches) must accept); hands it
    /// back if that worker's staging burst is full.
    #[inline]
    pub fn stage(&mut self, worker: usize, item: Item<B>) -> Result<(), Item<B>> {
        self.pending = true;
        self.staged[worker].try_push(item).map_err(|e| e.element())
    }

    /// Push every staged burst to its ring in one chunk write; what a ring has no room for
    /// goes to `rejected`. Returns how many packets were pushed.
    #[inline]
    pub fn flush(&mut self, mut rejected: impl FnMut(B)) -> u64 {
        if !std::mem::take(&mut self.pending) {
            return 0;
        }
        let mut pushed = 0;
        for (staged, ring) in self.staged.iter_mut().zip(self.rings.iter_mut()) {
            if staged.is_empty() {
                continue;
            }
            let Some(ring) = ring else {
                // `stage` is only called for workers `reaches` accepts.
                staged.drain(..).for_each(|i| rejected(i.pkt));
                continue;
            };
            let k = staged.len().min(ring.slots());
            if k > 0 {
                if let Ok(chunk) = ring.write_chunk_uninit(k) {
                    pushed += chunk.fill_from_iter(staged.drain(..k)) as u64;
                }
            }
            staged.drain(..).for_each(|i| rejected(i.pkt));
        }
        pushed
    }
}

impl<B: PacketBuf> Inbox<B> {
    /// Whether every incoming ring looks empty (cheap: cached indices first).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rings.iter().all(|r| r.is_empty())
    }

    /// Number of incoming rings.
    #[inline]
    pub fn rings(&self) -> usize {
        self.rings.len()
    }

    /// Move the next run of packets of ring `ring` that share an rx port and a resume stage
    /// into `out` (at most `max`, and no more than its room); returns `(rx_port, resume_at)`
    /// of the run, or `None` if the ring is empty.
    #[inline]
    pub fn pop_run(&mut self, ring: usize, out: &mut Burst<B>, max: usize) -> Option<(PortId, u8)> {
        self.pop_run_within(ring, out, max, u64::MAX)
    }

    /// [`pop_run`](Self::pop_run), the run also ending before the first packet captured more
    /// than `span_ns` after the run's first (`Meta::timestamp_ns`): on a recorded clock a
    /// batch runs at its first packet's time, so a run must not cover more recorded time
    /// than an rx batch does (`io::pcap::RECORDED_BATCH_SPAN_NS`).
    #[inline]
    pub fn pop_run_within(
        &mut self,
        ring: usize,
        out: &mut Burst<B>,
        max: usize,
        span_ns: u64,
    ) -> Option<(PortId, u8)> {
        let c = &mut self.rings[ring];
        let want = c.slots().min(max).min(out.remaining_capacity());
        if want == 0 {
            return None;
        }
        let chunk = c.read_chunk(want).ok()?;
        let (a, b) = chunk.as_slices();
        let first = a.first()?;
        let key = (first.rx_port, first.resume_at);
        let until = first.pkt.meta().timestamp_ns.saturating_add(span_ns);
        let run = a
            .iter()
            .chain(b)
            .take_while(|i| (i.rx_port, i.resume_at) == key && i.pkt.meta().timestamp_ns <= until)
            .count();
        for i in chunk.into_iter().take(run) {
            out.push(i.pkt);
        }
        Some(key)
    }
}

/// Replays on a recorded clock (`WorkerIo::recorded_clock`) with several workers: each
/// worker's clock follows its own files, as fast as it polls, so one worker could run
/// seconds of trace time ahead of another, and packets the slower one hands it would reach
/// its meters long after their time. Each worker publishes where its rx is (the capture
/// time of its last rx batch) here and reads no rx while it is more than
/// [`LOCKSTEP_SLACK_NS`] ahead of the slowest other (which keeps
/// serving its hand-off rings, so nobody waits on a full ring); a worker with no rx left
/// publishes `u64::MAX`. Live traffic never uses this: its clock is the wall clock.
#[derive(Debug, Clone)]
pub(crate) struct Lockstep {
    clocks: Arc<[AtomicU64]>,
}

/// How far (recorded time) a worker may run ahead of the slowest other on a recorded clock.
pub(crate) const LOCKSTEP_SLACK_NS: u64 = 100_000;

impl Lockstep {
    pub fn new(workers: usize) -> Lockstep {
        Lockstep {
            clocks: (0..workers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Worker `me`'s recorded clock is now `ns` (`u64::MAX`: it reads no more rx).
    #[inline]
    pub fn set(&self, me: usize, ns: u64) {
        if let Some(c) = self.clocks.get(me) {
            c.store(ns, Ordering::Relaxed);
        }
    }

    /// Whether worker `me`, at `ns`, is more than the slack ahead of another worker.
    #[inline]
    pub fn ahead(&self, me: usize, ns: u64) -> bool {
        let slowest = self
            .clocks
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != me)
            .map(|(_, c)| c.load(Ordering::Relaxed))
            .min()
            .unwrap_or(u64::MAX);
        ns > slowest.saturating_add(LOCKSTEP_SLACK_NS)
    }
}

/// How many workers have stopped producing hand-offs (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Quiesce {
    done: Arc<AtomicUsize>,
    workers: usize,
}

impl Quiesce {
    pub fn new(workers: usize) -> Quiesce {
        Quiesce {
            done: Arc::new(AtomicUsize::new(0)),
            workers,
        }
    }

    /// This worker hands off nothing more. Its earlier pushes happen-before this.
    pub fn arrive(&self) {
        self.done.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether every worker has arrived; when true, every push any worker will ever make is
    /// visible to the caller.
    pub fn all(&self) -> bool {
        self.done.load(Ordering::Acquire) >= self.workers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OwnedBuf;

    fn item(tag: u8, rx_port: PortId, resume_at: u8) -> Item<OwnedBuf> {
        Item {
            pkt: OwnedBuf::from_slice(&[tag]),
            rx_port,
            resume_at,
        }
    }

    #[test]
    fn burst_round_trip_keeps_order_and_splits_runs() {
        let mut m = mesh::<OwnedBuf>(3, 8);
        let (mut out0, _) = m.remove(0);
        let (_, mut in1) = m.remove(0);
        assert!(out0.reaches(1) && out0.reaches(2) && !out0.reaches(0) && !out0.reaches(3));
        assert_eq!(in1.rings(), 2);
        assert!(in1.is_empty());
        for (t, port) in [(1, 0), (2, 0), (3, 1), (4, 1), (5, 0)] {
            out0.stage(1, item(t, port, 2)).unwrap();
        }
        let mut rejected = 0;
        assert_eq!(out0.flush(|_| rejected += 1), 5);
        assert_eq!(rejected, 0);
        assert!(!in1.is_empty());
        // Worker 0's ring is worker 1's first incoming ring.
        let mut got = Burst::new();
        let mut runs = Vec::new();
        while let Some(k) = in1.pop_run(0, &mut got, 32) {
            runs.push((k, got.len()));
        }
        assert_eq!(runs, vec![((0, 2), 2), ((1, 2), 4), ((0, 2), 5)]);
        let tags: Vec<u8> = got.iter().map(|b| b.data()[0]).collect();
        assert_eq!(tags, [1, 2, 3, 4, 5]);
        assert!(in1.is_empty());
    }

    #[test]
    fn a_full_ring_rejects_the_rest() {
        let mut m = mesh::<OwnedBuf>(2, 4);
        let (mut out0, _) = m.remove(0);
        let (_, mut in1) = m.remove(0);
        for t in 0..6 {
            out0.stage(1, item(t, 0, 1)).unwrap();
        }
        let mut rejected = Vec::new();
        assert_eq!(out0.flush(|b| rejected.push(b.data()[0])), 4);
        assert_eq!(rejected, [4, 5]);
        // Nothing pending: a second flush does nothing.
        assert_eq!(out0.flush(|_| panic!("nothing staged")), 0);
        let mut got = Burst::new();
        assert_eq!(in1.pop_run(0, &mut got, 3), Some((0, 1)));
        assert_eq!(got.len(), 3, "max bounds a run");
        out0.stage(1, item(9, 0, 1)).unwrap();
        out0.stage(1, item(10, 0, 1)).unwrap();
        assert_eq!(out0.flush(|_| panic!("room for two")), 2);
        while in1.pop_run(0, &mut got, 32).is_some() {}
        let tags: Vec<u8> = got.iter().map(|b| b.data()[0]).collect();
        assert_eq!(tags, [0, 1, 2, 3, 9, 10]);
    }

    #[test]
    fn quiesce_counts_every_worker() {
        let q = Quiesce::new(2);
        assert!(!q.all());
        q.arrive();
        assert!(!q.all());
        q.clone().arrive();
        assert!(q.all());
    }

    #[test]
    fn a_run_within_a_span_stops_at_the_first_later_packet() {
        let mut m = mesh::<OwnedBuf>(2, 8);
        let (mut out0, _) = m.remove(0);
        let (_, mut in1) = m.remove(0);
        for (t, ts) in [(1u8, 1_000u64), (2, 1_050), (3, 1_101), (4, 1_120)] {
            let mut it = item(t, 0, 2);
            it.pkt.set_meta(crate::Meta {
                rx_port: 0,
                hash: 0,
                timestamp_ns: ts,
            });
            out0.stage(1, it).unwrap();
        }
        assert_eq!(out0.flush(|_| unreachable!()), 4);
        let mut got = Burst::new();
        assert_eq!(in1.pop_run_within(0, &mut got, 32, 100), Some((0, 2)));
        assert_eq!(got.iter().map(|p| p.data()[0]).collect::<Vec<_>>(), [1, 2]);
        got.clear();
        assert_eq!(in1.pop_run_within(0, &mut got, 32, 100), Some((0, 2)));
        assert_eq!(got.iter().map(|p| p.data()[0]).collect::<Vec<_>>(), [3, 4]);
    }

    #[test]
    fn lockstep_holds_back_only_the_worker_ahead() {
        let l = Lockstep::new(3);
        l.set(0, 10_000_000);
        l.set(1, 10_000_000 + LOCKSTEP_SLACK_NS);
        l.set(2, u64::MAX);
        assert!(!l.ahead(1, 10_000_000 + LOCKSTEP_SLACK_NS));
        assert!(l.ahead(1, 10_000_001 + LOCKSTEP_SLACK_NS));
        assert!(!l.ahead(0, 10_000_000));
        // Worker 2 has no rx left; alone, nobody is ever ahead.
        assert!(!Lockstep::new(1).ahead(0, u64::MAX - 1));
    }
}
