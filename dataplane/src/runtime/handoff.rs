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
use std::sync::atomic::{AtomicUsize, Ordering};
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
        let c = &mut self.rings[ring];
        let want = c.slots().min(max).min(out.remaining_capacity());
        if want == 0 {
            return None;
        }
        let chunk = c.read_chunk(want).ok()?;
        let (a, b) = chunk.as_slices();
        let first = a.first()?;
        let key = (first.rx_port, first.resume_at);
        let run = a
            .iter()
            .chain(b)
            .take_while(|i| (i.rx_port, i.resume_at) == key)
            .count();
        for i in chunk.into_iter().take(run) {
            out.push(i.pkt);
        }
        Some(key)
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
}
