//! The worker side: a post-dequeue [`Tap`] that records every dequeued packet in its active
//! bank, and at the window edge hands the bank to the control side through an SPSC ring and
//! takes a zeroed spare from another. No lock, no allocation, no atomic on the packet path.
//!
//! ```text
//!   worker (tap)                                  control (window::Aggregator)
//!   active bank --push at window edge--> full ring --> sum per seq, zero the bank
//!   active bank <--pop a zeroed spare---- spare ring <--------------'
//! ```
//!
//! A packet belongs to the window of its burst's time (`Context::now_ns`): the tap switches
//! banks between bursts, so no packet is lost or counted twice. If no spare is back (the
//! control side stalled for a whole window), the tap keeps filling the bank it has, which
//! keeps its older sequence number: those packets are exported in that window, never lost
//! (counted in [`TapStats::stalls`]). A tap that has seen no traffic for a while hands its
//! bank over early (`idle`); later packets of the same window go in a new bank with the same
//! sequence number, and the control side adds them (as a late part if it already exported).

use super::bank::{Bank, Sample, Sketcher, CHUNK};
use super::edges::{EdgeSet, EdgeTable};
use super::layout::{Layout, DIRS};
use super::postcard::{smp_pair, Deltas, Postcard, PostcardStats, Smp};
use crate::buffer::PacketBuf;
use crate::io::PortId;
use crate::meta::Direction;
use crate::runtime::{Context, Reader, Tap};
use rtrb::{Consumer, Producer, RingBuffer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Banks per tap: the active one and two spares, so the control side may hold one while it
/// sums and still have one back in the spare ring before the next edge.
pub const BANKS_PER_TAP: usize = 3;

/// Idle calls (every 64 empty polls) before a tap hands over a partly filled bank.
const IDLE_FLUSH_CALLS: u32 = 2048;

/// A tap's counters, written by the worker at window edges only, read by the control side.
#[derive(Debug, Default)]
pub struct TapStats {
    /// Banks handed over.
    pub banks: AtomicU64,
    /// Window edges with no spare bank back: the old bank kept filling.
    pub stalls: AtomicU64,
    /// Banks handed over early by an idle tap.
    pub idle_flushes: AtomicU64,
}

/// The control side's ends of one tap's rings.
#[derive(Debug)]
pub struct TapEnds {
    pub source: u32,
    pub full: Consumer<Box<Bank>>,
    pub spare: Producer<Box<Bank>>,
    pub stats: Arc<TapStats>,
    /// Delta-SMP postcards, when enabled.
    pub postcards: Option<(Consumer<Postcard>, Arc<PostcardStats>)>,
}

/// The Kestrel tap of one worker's egress port.
#[derive(Debug)]
pub struct KestrelTap {
    sketcher: Sketcher,
    active: Box<Bank>,
    edges: EdgeSet,
    table: Reader<EdgeTable>,
    window_ns: u64,
    seq: u64,
    /// Where window `seq + 1` starts: a burst compares its time with it instead of dividing.
    next_edge_ns: u64,
    full: Producer<Box<Bank>>,
    spare: Consumer<Box<Bank>>,
    stats: Arc<TapStats>,
    idle_calls: u32,
    smp: Option<Smp>,
    /// The samples of the chunk being recorded (kept here so a burst does not initialise
    /// a fresh array).
    buf: [Sample; CHUNK],
}

/// A tap and its control-side ends, with [`BANKS_PER_TAP`] banks allocated (control thread).
pub fn tap_pair(
    source: u32,
    layout: &Layout,
    window_ns: u64,
    table: Reader<EdgeTable>,
    postcards: Option<Deltas>,
) -> (KestrelTap, TapEnds) {
    let (full_tx, full_rx) = RingBuffer::new(BANKS_PER_TAP);
    let (mut spare_tx, spare_rx) = RingBuffer::new(BANKS_PER_TAP);
    for _ in 1..BANKS_PER_TAP {
        let mut b = Box::new(Bank::new(layout));
        b.source = source;
        spare_tx.push(b).expect("room for the spares");
    }
    let mut active = Box::new(Bank::new(layout));
    active.source = source;
    let stats = Arc::new(TapStats::default());
    let (smp, pc) = match postcards.map(smp_pair) {
        Some((smp, rx, st)) => (Some(smp), Some((rx, st))),
        None => (None, None),
    };
    let edges = *table.cached().for_seq(0);
    active.edges_version = edges.version;
    let mut sketcher = Sketcher::new(layout);
    sketcher.set_edges(&edges);
    let tap = KestrelTap {
        sketcher,
        active,
        edges,
        table,
        window_ns: window_ns.max(1),
        seq: 0,
        next_edge_ns: window_ns.max(1),
        full: full_tx,
        spare: spare_rx,
        stats: stats.clone(),
        idle_calls: 0,
        smp,
        buf: [Sample::EMPTY; CHUNK],
    };
    let ends = TapEnds {
        source,
        full: full_rx,
        spare: spare_tx,
        stats,
        postcards: pc,
    };
    (tap, ends)
}

impl KestrelTap {
    /// Record one packet's sample in the active bank, as a burst of one.
    #[inline]
    pub fn record(&mut self, s: &Sample) {
        self.record_burst(std::slice::from_ref(s));
    }

    /// Record a burst of samples in the active bank, as [`Tap::on_burst`] does (the
    /// benchmark's entry point).
    #[inline]
    pub fn record_burst(&mut self, s: &[Sample]) {
        self.sketcher.record_burst_own(&mut self.active, s);
    }

    /// Record one packet as a Delta-SMP postcard candidate (the benchmark's entry point).
    #[inline]
    pub fn record_postcard(&mut self, s: &Sample) {
        if let Some(smp) = &mut self.smp {
            record_smp(smp, s);
        }
    }

    /// A burst at `now` is past the current window's end: move to `now`'s window (the one
    /// 64-bit division of a window, not of a burst).
    #[cold]
    #[inline(never)]
    fn edge(&mut self, now: u64) {
        let seq = now / self.window_ns;
        if seq > self.seq {
            self.open_window(seq);
        }
        self.next_edge_ns = self.seq.saturating_add(1).saturating_mul(self.window_ns);
    }

    /// Move to window `seq` at `now` (a burst's time), handing the filled bank over.
    #[cold]
    fn open_window(&mut self, seq: u64) {
        if self.active.dirty && self.hand_over() {
            self.stats.banks.fetch_add(1, Ordering::Relaxed);
        } else if self.active.dirty {
            // No spare: keep filling this bank under its own (older) sequence number.
            self.stats.stalls.fetch_add(1, Ordering::Relaxed);
            self.seq = seq;
            return;
        }
        self.seq = seq;
        self.edges = *self.table.get().for_seq(seq);
        self.sketcher.set_edges(&self.edges);
        self.active.seq = seq;
        self.active.edges_version = self.edges.version;
    }

    /// Push the active bank and take a spare; false (nothing changed) when none is back.
    fn hand_over(&mut self) -> bool {
        // The full ring has room for every bank this tap owns, so this never refuses; it is
        // checked first so that a push below cannot fail and drop (free) a bank here.
        if self.full.is_full() {
            return false;
        }
        let Ok(mut next) = self.spare.pop() else {
            return false;
        };
        next.seq = self.active.seq;
        next.edges_version = self.active.edges_version;
        // Last-seen outlives the window: carry it into the zeroed bank (once per edge).
        for (n, o) in next.hot.iter_mut().zip(&self.active.hot) {
            n.last_seen = o.last_seen;
        }
        let full = std::mem::replace(&mut self.active, next);
        let pushed = self.full.push(full).is_ok();
        debug_assert!(pushed, "checked for room above");
        pushed
    }
}

/// The sample's direction is the metadata's direction byte less one (one instruction, not
/// a match on [`Direction`]): uplink 0, downlink 1, anything else outside `0..DIRS`.
const _DIR_BYTES: () = assert!(
    Direction::Uplink as usize == 1
        && Direction::Downlink as usize == 2
        && Direction::Unknown as usize == 0
        && DIRS == 2
);

impl Sample {
    /// The sample of packet `p` as it leaves its queue, from its metadata: direction, QID,
    /// key, inner length, colour, sojourn, and its dequeue time (enqueue + sojourn, or `now`
    /// for a packet that carries no enqueue stamp).
    #[inline(always)]
    pub fn of_packet<B: PacketBuf>(p: &B, now: u64) -> Sample {
        let m = p.pkt_meta();
        // Uplink 0, downlink 1; unknown (0) and out-of-range bytes land outside `0..DIRS`,
        // which the sketcher skips (see `_DIR_BYTES`).
        let dir = usize::from(m.dir).wrapping_sub(1);
        let t_ns = if m.enqueue_ns != 0 {
            m.enqueue_ns + u64::from(m.sojourn_ns)
        } else {
            now
        };
        Sample {
            dir,
            qid: usize::from(m.qid),
            teid: m.teid,
            qfi: m.qfi,
            len: inner_len(p.data(), usize::from(m.inner_l3_off)),
            colour: m.color,
            sojourn_ns: m.sojourn_ns,
            t_ns,
        }
    }
}

/// `s` as a Delta-SMP postcard candidate (`record_postcard` and the tap's bursts).
#[inline(always)]
fn record_smp(smp: &mut Smp, s: &Sample) {
    smp.record(
        s.dir as u8,
        s.qid as u8,
        s.teid,
        s.qfi,
        s.len,
        s.colour,
        s.sojourn_ns,
        s.t_ns,
    );
}

/// Inner IP packet length at `off` (IPv4 total length, IPv6 payload length + 40), or what
/// follows `off` when the header is not there.
#[inline]
fn inner_len(data: &[u8], off: usize) -> u32 {
    match data.get(off..off + 6) {
        Some(h) if h[0] >> 4 == 4 => u32::from(u16::from_be_bytes([h[2], h[3]])),
        Some(h) if h[0] >> 4 == 6 => u32::from(u16::from_be_bytes([h[4], h[5]])) + 40,
        _ => data.len().saturating_sub(off) as u32,
    }
}

impl<B: PacketBuf> Tap<B> for KestrelTap {
    fn name(&self) -> &'static str {
        "kestrel"
    }

    fn on_burst(&mut self, _port: PortId, pkts: &mut [B], cx: &Context) {
        let now = cx.now_ns();
        if now >= self.next_edge_ns {
            self.edge(now);
        }
        self.idle_calls = 0;
        for chunk in pkts.chunks(CHUNK) {
            for (p, s) in chunk.iter().zip(&mut self.buf) {
                *s = Sample::of_packet(p, now);
            }
            let samples = &self.buf[..chunk.len()];
            self.sketcher.record_burst_own(&mut self.active, samples);
            if let Some(smp) = &mut self.smp {
                for s in samples.iter().filter(|s| s.dir < 2) {
                    record_smp(smp, s);
                }
            }
        }
        if let Some(smp) = &self.smp {
            smp.publish();
        }
    }

    fn idle(&mut self) {
        self.idle_calls = self.idle_calls.saturating_add(1);
        if self.idle_calls == IDLE_FLUSH_CALLS && self.active.dirty && self.hand_over() {
            self.stats.banks.fetch_add(1, Ordering::Relaxed);
            self.stats.idle_flushes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The run is over: hand the partly filled bank over now, so the control side can close
    /// the last windows while the workers can still send what it makes of them.
    /// A spare bank is back: the next window edge can switch banks. A replay on its
    /// recorded clock waits for one (a live port cannot, and stalls instead).
    fn ready(&self) -> bool {
        !self.spare.is_empty()
    }

    /// Without a spare back yet, false: the worker asks again while the control side
    /// returns one.
    fn end(&mut self) -> bool {
        if !self.active.dirty {
            return true;
        }
        let handed = self.hand_over();
        if handed {
            self.stats.banks.fetch_add(1, Ordering::Relaxed);
        }
        handed
    }
}

impl Drop for KestrelTap {
    /// The worker stopped: hand over the last bank, so the control side's final flush has
    /// every packet.
    fn drop(&mut self) {
        if !self.active.dirty || self.full.is_full() {
            return;
        }
        // Off the packet path: a small placeholder may be allocated when no spare is back.
        let next = self.spare.pop().unwrap_or_else(|_| Box::new(Bank::empty()));
        let last = std::mem::replace(&mut self.active, next);
        if self.full.push(last).is_ok() {
            self.stats.banks.fetch_add(1, Ordering::Relaxed);
        }
    }
}
