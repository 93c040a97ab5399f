//! Per-port egress scheduler: 8 queues, strict priority plus weighted round robin, the
//! UPF model of Kestrel (Saha et al.; docs/design.md, "UPF facts").
//!
//! * Queues configured [`QueueClass::StrictPriority`] are served first, in ascending QID
//!   order: QID 0 is the most urgent. An SP queue is served whenever it has a packet, so it
//!   can starve everything below it; police SP traffic upstream (QER meters).
//! * The other queues share what is left by byte-based **deficit round robin** (Shreedhar and
//!   Varghese, SIGCOMM 1995): each visit adds `weight * quantum_bytes` to the queue's
//!   deficit and sends head packets while they fit. Unlike packet-count WRR, the shares are in
//!   bytes, whatever the packet sizes; each backlogged queue is served at least once per
//!   round, so no WRR queue starves. A queue that empties loses its deficit.
//! * Each queue is a fixed-capacity ring allocated at construction; a full queue tail-drops
//!   (the packet is handed back to the caller to free) and counts the drop per queue.
//! * The enqueue time is written to each packet's [`PacketMeta::enqueue_ns`]; a dequeue
//!   reports the sojourn time and stamps it in [`PacketMeta::sojourn_ns`], so post-dequeue
//!   taps read it with the rest of the record (`Meta::timestamp_ns` stays the arrival time).
//! * An optional token-bucket shaper limits the port's total rate, so queues build up when the
//!   offered load exceeds it. Time is passed in everywhere.
//! * Packets a UPF shaped (`qos::pacer`: [`flags::SHAPED`], the
//!   departure time in `enqueue_ns`) wait on a timing wheel (`qos::wheel`) until their
//!   departure time, then join their queue. A queue's depth counts the packets waiting for
//!   it on the wheel, so a released packet always finds room.
//!
//! Nothing allocates after construction.

use super::trtcm::{QosConfigError, TokenBucket};
use super::wheel::Wheel;
use crate::buffer::PacketBuf;
use crate::meta::flags;
#[cfg(doc)]
use crate::meta::PacketMeta;

/// Number of egress queues per port.
pub const NUM_QUEUES: usize = 8;

/// Number of QFI values (6 bits, TS 38.415).
pub const NUM_QFI: usize = 64;

/// How a queue is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueClass {
    /// Strict priority: served before every WRR queue and every SP queue with a higher QID.
    StrictPriority,
    /// Deficit round robin with this weight (`>= 1`): quantum = `weight * quantum_bytes`.
    Wrr { weight: u32 },
}

/// One queue's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    pub class: QueueClass,
    /// Maximum packets held; the next one is tail-dropped.
    pub depth: usize,
}

/// Port shaper: a token bucket over all queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShaperConfig {
    /// Port rate in bytes/s.
    pub rate_bytes_per_s: u64,
    /// Burst in bytes; at least the largest packet, or that packet blocks the port.
    pub burst_bytes: u64,
}

/// Scheduler configuration for one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerConfig {
    pub queues: [QueueConfig; NUM_QUEUES],
    /// DRR quantum per unit of weight, in bytes. At least the MTU keeps each visit O(1).
    pub quantum_bytes: u32,
    /// Optional port shaper; `None` sends as fast as `dequeue` is called.
    pub shaper: Option<ShaperConfig>,
}

/// Default queue depth in packets.
pub const DEFAULT_DEPTH: usize = 1024;

/// Default DRR quantum: one Ethernet MTU frame.
pub const DEFAULT_QUANTUM: u32 = 1514;

impl Default for SchedulerConfig {
    /// QID 0 and 1 strict priority (signalling and conversational voice in the default
    /// [`QfiMap`]); QID 2..7 DRR with weights 8, 6, 4, 3, 2, 1; depth 1024; no shaper.
    fn default() -> Self {
        let weights = [0, 0, 8, 6, 4, 3, 2, 1];
        let mut queues = [QueueConfig {
            class: QueueClass::StrictPriority,
            depth: DEFAULT_DEPTH,
        }; NUM_QUEUES];
        for (q, &w) in queues.iter_mut().zip(&weights) {
            if w > 0 {
                q.class = QueueClass::Wrr { weight: w };
            }
        }
        SchedulerConfig {
            queues,
            quantum_bytes: DEFAULT_QUANTUM,
            shaper: None,
        }
    }
}

/// QFI → QID mapping (one byte per QFI, values `< NUM_QUEUES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QfiMap([u8; NUM_QFI]);

impl Default for QfiMap {
    /// Standardized 5QIs used as QFIs (TS 23.501 Table 5.7.4-1), ordered by their priority
    /// level: 5 (IMS signalling) → 0, 1 (voice) → 1, 2 and 3 (conversational video,
    /// real-time gaming) → 2, 4 → 3, 6 → 4, 7 → 5, 8 → 6; 9 (default bearer) and every
    /// other QFI, including 0 (none) → 7.
    fn default() -> Self {
        let mut m = [7u8; NUM_QFI];
        for &(qfi, qid) in &[
            (5, 0),
            (1, 1),
            (2, 2),
            (3, 2),
            (4, 3),
            (6, 4),
            (7, 5),
            (8, 6),
        ] {
            m[qfi] = qid;
        }
        QfiMap(m)
    }
}

impl QfiMap {
    /// A map from a table; QIDs `>= NUM_QUEUES` are clamped to the last queue.
    pub fn new(table: [u8; NUM_QFI]) -> QfiMap {
        let mut t = table;
        for q in &mut t {
            *q = (*q).min(NUM_QUEUES as u8 - 1);
        }
        QfiMap(t)
    }

    /// The queue for `qfi` (only its low 6 bits are used).
    #[inline]
    pub fn qid(&self, qfi: u8) -> u8 {
        self.0[usize::from(qfi & 0x3f)]
    }

    /// Map `qfi` to `qid` (clamped to the last queue).
    pub fn set(&mut self, qfi: u8, qid: u8) {
        self.0[usize::from(qfi & 0x3f)] = qid.min(NUM_QUEUES as u8 - 1);
    }

    /// The table.
    pub fn table(&self) -> &[u8; NUM_QFI] {
        &self.0
    }
}

/// Per-queue counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub enq_pkts: u64,
    pub enq_bytes: u64,
    pub deq_pkts: u64,
    pub deq_bytes: u64,
    /// Tail drops (queue full).
    pub drop_pkts: u64,
    pub drop_bytes: u64,
}

/// A dequeued packet with its queue and the time it spent queued.
#[derive(Debug)]
pub struct Dequeued<B> {
    pub pkt: B,
    pub qid: u8,
    /// `dequeue time - enqueue time` (0 if the clock went backwards); also stamped,
    /// saturated to 32 bits, in the packet's `PacketMeta::sojourn_ns`.
    pub sojourn_ns: u64,
}

#[derive(Debug)]
struct Entry<B> {
    pkt: B,
    len: u64,
}

/// Fixed-capacity FIFO ring.
#[derive(Debug)]
struct Ring<B> {
    slots: Box<[Option<Entry<B>>]>,
    head: usize,
    len: usize,
}

impl<B> Ring<B> {
    fn new(cap: usize) -> Ring<B> {
        Ring {
            slots: (0..cap).map(|_| None).collect(),
            head: 0,
            len: 0,
        }
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    #[inline]
    fn push(&mut self, e: Entry<B>) {
        debug_assert!(!self.is_full());
        let mut i = self.head + self.len;
        if i >= self.slots.len() {
            i -= self.slots.len();
        }
        self.slots[i] = Some(e);
        self.len += 1;
    }

    #[inline]
    fn front(&self) -> Option<&Entry<B>> {
        if self.len == 0 {
            None
        } else {
            self.slots[self.head].as_ref()
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<Entry<B>> {
        if self.len == 0 {
            return None;
        }
        let e = self.slots[self.head].take();
        self.head += 1;
        if self.head == self.slots.len() {
            self.head = 0;
        }
        self.len -= 1;
        e
    }
}

/// The egress scheduler of one port. Generic over the buffer type.
#[derive(Debug)]
pub struct Scheduler<B> {
    rings: [Ring<B>; NUM_QUEUES],
    stats: [QueueStats; NUM_QUEUES],
    /// Queued bytes per queue.
    bytes: [u64; NUM_QUEUES],
    /// SP QIDs in service order.
    sp: arrayvec::ArrayVec<u8, NUM_QUEUES>,
    /// WRR QIDs in round order.
    wrr: arrayvec::ArrayVec<u8, NUM_QUEUES>,
    /// DRR quantum per queue in bytes.
    quantum: [u64; NUM_QUEUES],
    deficit: [u64; NUM_QUEUES],
    /// Index into `wrr` of the queue being served.
    cur: usize,
    /// Whether `wrr[cur]` already got its quantum for this visit.
    credited: bool,
    shaper: Option<TokenBucket>,
    /// Packets queued in all queues (not counting the wheel).
    total: usize,
    /// Shaped packets waiting for their departure time, and how many of them per queue.
    wheel: Wheel<B>,
    held: [usize; NUM_QUEUES],
}

impl<B: PacketBuf> Scheduler<B> {
    /// Build a scheduler, allocating every ring. `now_ns` starts the shaper's clock (its
    /// bucket starts full).
    pub fn new(cfg: &SchedulerConfig, now_ns: u64) -> Result<Scheduler<B>, QosConfigError> {
        if cfg.quantum_bytes == 0 {
            return Err(QosConfigError::ZeroQuantum);
        }
        let mut sp = arrayvec::ArrayVec::new();
        let mut wrr = arrayvec::ArrayVec::new();
        let mut quantum = [0u64; NUM_QUEUES];
        for (qid, q) in cfg.queues.iter().enumerate() {
            let qid8 = qid as u8;
            if q.depth == 0 {
                return Err(QosConfigError::ZeroDepth { qid: qid8 });
            }
            match q.class {
                QueueClass::StrictPriority => sp.push(qid8),
                QueueClass::Wrr { weight: 0 } => {
                    return Err(QosConfigError::ZeroWeight { qid: qid8 })
                }
                QueueClass::Wrr { weight } => {
                    wrr.push(qid8);
                    quantum[qid] = u64::from(weight) * u64::from(cfg.quantum_bytes);
                }
            }
        }
        Ok(Scheduler {
            rings: std::array::from_fn(|q| Ring::new(cfg.queues[q].depth)),
            stats: [QueueStats::default(); NUM_QUEUES],
            bytes: [0; NUM_QUEUES],
            sp,
            wrr,
            quantum,
            deficit: [0; NUM_QUEUES],
            cur: 0,
            credited: false,
            shaper: cfg
                .shaper
                .map(|s| TokenBucket::new(s.rate_bytes_per_s, s.burst_bytes, now_ns)),
            total: 0,
            wheel: Wheel::new(cfg.queues.iter().map(|q| q.depth).sum(), now_ns),
            held: [0; NUM_QUEUES],
        })
    }

    /// Move the shaped packets due at `now_ns` from the wheel to their queues (each has its
    /// place reserved in `held`).
    #[inline]
    fn advance(&mut self, now_ns: u64) {
        let (wheel, rings, held) = (&mut self.wheel, &mut self.rings, &mut self.held);
        let (bytes, total) = (&mut self.bytes, &mut self.total);
        wheel.advance(now_ns, |pkt, qid| {
            let q = usize::from(qid);
            held[q] -= 1;
            let len = pkt.len() as u64;
            rings[q].push(Entry { pkt, len });
            bytes[q] += len;
            *total += 1;
        });
    }

    /// Queue `pkt` on `qid` (values `>= NUM_QUEUES` use the last queue) at `now_ns`. A full
    /// queue hands the packet back (tail drop, counted) for the caller to free.
    #[inline]
    pub fn enqueue(&mut self, mut pkt: B, qid: u8, now_ns: u64) -> Result<(), B> {
        let q = usize::from(qid).min(NUM_QUEUES - 1);
        let len = pkt.len() as u64;
        if !self.wheel.is_empty() {
            self.advance(now_ns);
        }
        let st = &mut self.stats[q];
        if self.rings[q].len + self.held[q] >= self.rings[q].slots.len() {
            st.drop_pkts += 1;
            st.drop_bytes += len;
            return Err(pkt);
        }
        let m = pkt.pkt_meta_mut();
        let depart = if m.flags & flags::SHAPED != 0 {
            m.flags &= !flags::SHAPED;
            m.enqueue_ns
        } else {
            0
        };
        m.enqueue_ns = now_ns;
        if depart > now_ns && self.wheel.is_empty() {
            // An empty wheel's clock is not advanced; bring it to the present first, or a
            // departure after an idle spell would be clamped to the stale horizon and leave
            // at once. (Empty: nothing is released.)
            self.wheel.advance(now_ns, |_, _| {});
        }
        if depart > now_ns && !self.wheel.is_due(depart) {
            self.wheel.insert(pkt, q as u8, depart)?;
            st.enq_pkts += 1;
            st.enq_bytes += len;
            self.held[q] += 1;
            return Ok(());
        }
        st.enq_pkts += 1;
        st.enq_bytes += len;
        self.rings[q].push(Entry { pkt, len });
        self.bytes[q] += len;
        self.total += 1;
        Ok(())
    }

    /// Whether the shaper lets `len` bytes out now.
    #[inline]
    fn shaper_allows(&self, len: u64) -> bool {
        self.shaper.as_ref().is_none_or(|s| s.has(len))
    }

    #[inline]
    fn take(&mut self, q: usize, now_ns: u64) -> Dequeued<B> {
        let mut e = self.rings[q].pop().expect("selected queue is non-empty");
        let len = e.len;
        let m = e.pkt.pkt_meta_mut();
        let sojourn_ns = now_ns.saturating_sub(m.enqueue_ns);
        m.set_sojourn(sojourn_ns);
        if let Some(s) = self.shaper.as_mut() {
            s.take(len);
        }
        self.bytes[q] -= len;
        self.total -= 1;
        let st = &mut self.stats[q];
        st.deq_pkts += 1;
        st.deq_bytes += len;
        Dequeued {
            pkt: e.pkt,
            qid: q as u8,
            sojourn_ns,
        }
    }

    /// The next packet to send at `now_ns`, or `None` if every queue is empty or the shaper
    /// holds the next packet back.
    pub fn dequeue(&mut self, now_ns: u64) -> Option<Dequeued<B>> {
        if !self.wheel.is_empty() {
            self.advance(now_ns);
        }
        if self.total == 0 {
            return None;
        }
        if let Some(s) = self.shaper.as_mut() {
            s.refill(now_ns);
        }
        // Strict priority.
        for i in 0..self.sp.len() {
            let q = usize::from(self.sp[i]);
            if let Some(e) = self.rings[q].front() {
                if !self.shaper_allows(e.len) {
                    return None;
                }
                return Some(self.take(q, now_ns));
            }
        }
        // Deficit round robin. Terminates: some WRR queue is non-empty (total > 0 and every
        // SP queue is empty) and each full round adds its quantum (>= 1) to its deficit.
        let n = self.wrr.len();
        loop {
            let q = usize::from(self.wrr[self.cur]);
            let Some(e) = self.rings[q].front() else {
                self.deficit[q] = 0;
                self.credited = false;
                self.cur = if self.cur + 1 == n { 0 } else { self.cur + 1 };
                continue;
            };
            if !self.credited {
                self.deficit[q] = self.deficit[q].saturating_add(self.quantum[q]);
                self.credited = true;
            }
            let len = e.len;
            if len <= self.deficit[q] {
                if !self.shaper_allows(e.len) {
                    // Stay on this queue with its credit; it goes first when tokens arrive.
                    return None;
                }
                self.deficit[q] -= len;
                let d = self.take(q, now_ns);
                if self.rings[q].front().is_none() {
                    self.deficit[q] = 0;
                }
                return Some(d);
            }
            self.credited = false;
            self.cur = if self.cur + 1 == n { 0 } else { self.cur + 1 };
        }
    }

    /// Dequeue up to `max` packets at `now_ns`, handing each to `f`; returns how many.
    pub fn dequeue_burst(
        &mut self,
        now_ns: u64,
        max: usize,
        mut f: impl FnMut(Dequeued<B>),
    ) -> usize {
        let mut n = 0;
        while n < max {
            match self.dequeue(now_ns) {
                Some(d) => {
                    f(d);
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// Dequeue up to `max` packets at `now_ns` in scheduling order but ignoring the shaper
    /// (shutdown: what is queued goes out as fast as the port takes it). The shaper's tokens
    /// are left as they were. Counted as dequeues, with sojourn times.
    pub fn flush_burst(&mut self, now_ns: u64, max: usize, f: impl FnMut(Dequeued<B>)) -> usize {
        let (wheel, rings, held) = (&mut self.wheel, &mut self.rings, &mut self.held);
        let (bytes, total) = (&mut self.bytes, &mut self.total);
        wheel.release_all(|pkt, qid| {
            let q = usize::from(qid);
            held[q] -= 1;
            let len = pkt.len() as u64;
            rings[q].push(Entry { pkt, len });
            bytes[q] += len;
            *total += 1;
        });
        let shaper = self.shaper.take();
        let n = self.dequeue_burst(now_ns, max, f);
        self.shaper = shaper;
        n
    }

    /// Packets queued on `qid`.
    pub fn queue_len(&self, qid: u8) -> usize {
        self.rings[usize::from(qid).min(NUM_QUEUES - 1)].len
    }

    /// Bytes queued on `qid`.
    pub fn queue_bytes(&self, qid: u8) -> u64 {
        self.bytes[usize::from(qid).min(NUM_QUEUES - 1)]
    }

    /// Packets queued in all queues, including shaped packets waiting on the wheel.
    pub fn len(&self) -> usize {
        self.total + self.wheel.len()
    }

    /// Whether every queue and the wheel are empty.
    pub fn is_empty(&self) -> bool {
        self.total == 0 && self.wheel.is_empty()
    }

    /// Shaped packets waiting for their departure time.
    pub fn shaped_waiting(&self) -> usize {
        self.wheel.len()
    }

    /// Counters of `qid`.
    pub fn stats(&self, qid: u8) -> QueueStats {
        self.stats[usize::from(qid).min(NUM_QUEUES - 1)]
    }

    /// Counters of every queue.
    pub fn all_stats(&self) -> &[QueueStats; NUM_QUEUES] {
        &self.stats
    }

    /// Remove every queued packet (e.g. on port stop), handing each to `f` to free.
    pub fn drain(&mut self, mut f: impl FnMut(B)) {
        self.wheel.release_all(|pkt, _| f(pkt));
        self.held = [0; NUM_QUEUES];
        for q in 0..NUM_QUEUES {
            while let Some(e) = self.rings[q].pop() {
                f(e.pkt);
            }
            self.bytes[q] = 0;
            self.deficit[q] = 0;
        }
        self.total = 0;
        self.credited = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::OwnedBuf;

    fn pkt(len: usize) -> OwnedBuf {
        OwnedBuf::from_slice(&vec![0u8; len])
    }

    #[test]
    fn qos_empty_scheduler() {
        let mut s: Scheduler<OwnedBuf> = Scheduler::new(&SchedulerConfig::default(), 0).unwrap();
        assert!(s.is_empty());
        assert!(s.dequeue(0).is_none());
        assert!(s.dequeue(u64::MAX).is_none());
        assert_eq!(s.dequeue_burst(5, 32, |_| panic!("nothing queued")), 0);
        // Queue then empty again: DRR state survives.
        s.enqueue(pkt(100), 7, 1).unwrap();
        assert_eq!(s.dequeue(2).unwrap().qid, 7);
        assert!(s.dequeue(3).is_none());
    }

    #[test]
    fn qos_ring_wraps() {
        let mut r: Ring<u32> = Ring::new(3);
        for round in 0..10u32 {
            for i in 0..3 {
                r.push(Entry {
                    pkt: round * 10 + i,
                    len: 1,
                });
            }
            assert!(r.is_full());
            for i in 0..3 {
                assert_eq!(r.pop().unwrap().pkt, round * 10 + i);
            }
            assert!(r.pop().is_none());
        }
    }

    #[test]
    fn qos_config_errors() {
        let mut c = SchedulerConfig::default();
        c.queues[3].class = QueueClass::Wrr { weight: 0 };
        assert_eq!(
            Scheduler::<OwnedBuf>::new(&c, 0).unwrap_err(),
            QosConfigError::ZeroWeight { qid: 3 }
        );
        let mut c = SchedulerConfig::default();
        c.queues[0].depth = 0;
        assert_eq!(
            Scheduler::<OwnedBuf>::new(&c, 0).unwrap_err(),
            QosConfigError::ZeroDepth { qid: 0 }
        );
        let c = SchedulerConfig {
            quantum_bytes: 0,
            ..SchedulerConfig::default()
        };
        assert_eq!(
            Scheduler::<OwnedBuf>::new(&c, 0).unwrap_err(),
            QosConfigError::ZeroQuantum
        );
    }

    #[test]
    fn qos_qfi_map() {
        let m = QfiMap::default();
        assert_eq!(m.qid(5), 0);
        assert_eq!(m.qid(1), 1);
        assert_eq!(m.qid(9), 7);
        assert_eq!(m.qid(0), 7);
        assert_eq!(m.qid(63), 7);
        assert_eq!(m.qid(64 + 5), 0, "only 6 bits");
        let mut m = QfiMap::new([200; NUM_QFI]);
        assert_eq!(m.qid(10), 7);
        m.set(10, 3);
        assert_eq!(m.qid(10), 3);
        assert_eq!(m.table()[10], 3);
    }
}
