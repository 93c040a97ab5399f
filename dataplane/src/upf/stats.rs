//! Per-worker UPF counters shared with the control core: usage per URR slot (the volume and
//! time measurements of TS 29.244 section 5.2.2), per direction x QFI packet/byte/drop and
//! TrTCM colour counts (the 3GPP-PM style per-QFI view, TS 28.552 section 5.4), and totals of
//! the GTP-U path-management events (TS 29.281 section 7).
//!
//! One writer (the worker that owns the [`UpfStats`]) and any number of readers. The writer
//! updates each `AtomicU64` with a relaxed `load` then `store` (never a read-modify-write:
//! with a single writer that is exact, and on x86 it compiles to plain moves); readers see
//! each counter atomically, though not a consistent snapshot across counters.

use crate::qos::{Colour, NUM_QFI};
use crate::upf::tables::Direction;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[inline(always)]
fn add(a: &AtomicU64, v: u64) {
    a.store(a.load(Relaxed).wrapping_add(v), Relaxed);
}

/// Usage of one URR slot, as read by the control core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UrrUsage {
    pub ul_bytes: u64,
    pub ul_pkts: u64,
    pub dl_bytes: u64,
    pub dl_pkts: u64,
    /// Worker time of the first counted packet (0 if none yet).
    pub first_pkt_ns: u64,
    /// Worker time of the last counted packet.
    pub last_pkt_ns: u64,
}

/// Counters of one direction x QFI. `pkts`/`bytes` count packets sent on (inner IP
/// length); `drops` every drop once the QFI was known; the colours every metered packet
/// (a packet through no meter is not coloured).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QfiUsage {
    pub pkts: u64,
    pub bytes: u64,
    pub drops: u64,
    pub green: u64,
    pub yellow: u64,
    pub red: u64,
}

/// Totals over the worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpfTotals {
    pub echo_replies: u64,
    pub error_indications_sent: u64,
    pub error_indications_received: u64,
    pub end_markers_received: u64,
    /// Packets handed to the control core by a FAR with BUFF.
    pub buffered: u64,
    /// ICMP Packet Too Big / Fragmentation Needed sent.
    pub icmp_errors_sent: u64,
    /// Error Indications or ICMP errors not sent because of the rate limit.
    pub replies_rate_limited: u64,
    /// Packets whose URR slot is beyond `max_urr_slots` (not counted in any slot).
    pub urr_slots_exceeded: u64,
    /// Packets whose meter slot is beyond the worker's meter array (passed unmetered).
    pub meter_slots_exceeded: u64,
    /// TCP/UDP checksums completed in software (`[upf] fix_l4_checksums`): they arrived
    /// partial or wrong.
    pub l4_checksums_fixed: u64,
    /// IPv4 packets without DF fragmented to fit the MTU, and the fragments made of them.
    pub packets_fragmented: u64,
    pub fragments_made: u64,
    /// Outer IPv4 / IPv6 fragments addressed to our N3/N9 addresses, the datagrams
    /// reassembled from them, and the datagrams given up at the reassembly timeout.
    pub fragments_received: u64,
    pub datagrams_reassembled: u64,
    pub reassembly_timeouts: u64,
}

/// One cache line per slot, so a packet's usage update touches one line. Bytes and packets
/// by [`Direction`] (`as usize`), so the update picks its pair by index, not by a branch.
#[derive(Debug, Default)]
#[repr(align(64))]
struct UrrCell {
    bytes: [AtomicU64; 2],
    pkts: [AtomicU64; 2],
    first: AtomicU64,
    last: AtomicU64,
}

/// One direction x QFI's counters ([`qfi_cell`]): a cache line each (48 bytes of
/// counters), so a cell's address is its index shifted, not multiplied.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct QfiCell {
    pkts: AtomicU64,
    bytes: AtomicU64,
    drops: AtomicU64,
    colours: [AtomicU64; 3],
}

impl QfiCell {
    /// As [`UpfStats::qfi_colour`].
    #[inline]
    pub(crate) fn colour(&self, c: Colour) {
        add(&self.colours[c.index()], 1);
    }

    /// As [`UpfStats::qfi_sent`].
    #[inline]
    pub(crate) fn sent(&self, bytes: u64) {
        add(&self.pkts, 1);
        add(&self.bytes, bytes);
    }
}

#[derive(Debug, Default)]
struct Totals {
    echo_replies: AtomicU64,
    error_indications_sent: AtomicU64,
    error_indications_received: AtomicU64,
    end_markers_received: AtomicU64,
    buffered: AtomicU64,
    icmp_errors_sent: AtomicU64,
    replies_rate_limited: AtomicU64,
    urr_slots_exceeded: AtomicU64,
    meter_slots_exceeded: AtomicU64,
    l4_checksums_fixed: AtomicU64,
    packets_fragmented: AtomicU64,
    fragments_made: AtomicU64,
    fragments_received: AtomicU64,
    datagrams_reassembled: AtomicU64,
    reassembly_timeouts: AtomicU64,
}

/// A total the worker counts (see [`UpfTotals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Total {
    EchoReplies,
    ErrorIndicationsSent,
    ErrorIndicationsReceived,
    EndMarkersReceived,
    Buffered,
    IcmpErrorsSent,
    RepliesRateLimited,
    MeterSlotsExceeded,
    L4ChecksumsFixed,
    PacketsFragmented,
    FragmentsMade,
    FragmentsReceived,
    DatagramsReassembled,
    ReassemblyTimeouts,
}

/// The direction x QFI counters, by [`Direction`] (`as usize`) and QFI.
pub(crate) type QfiCells = [[QfiCell; NUM_QFI]; 2];

/// One worker's UPF counters. See the module docs.
#[derive(Debug)]
pub struct UpfStats {
    urr: Box<[UrrCell]>,
    qfi: Box<QfiCells>,
    totals: Totals,
}

impl UpfStats {
    /// Counters for URR slots `0..max_urr_slots`, allocated once.
    pub fn new(max_urr_slots: u32) -> Self {
        UpfStats {
            urr: (0..max_urr_slots).map(|_| UrrCell::default()).collect(),
            qfi: Box::new(std::array::from_fn(|_| {
                std::array::from_fn(|_| QfiCell::default())
            })),
            totals: Totals::default(),
        }
    }

    /// Number of URR slots counted.
    pub fn max_urr_slots(&self) -> u32 {
        self.urr.len() as u32
    }

    /// Usage of URR slot `slot` (zero for a slot beyond the capacity).
    pub fn urr(&self, slot: u32) -> UrrUsage {
        let Some(c) = self.urr.get(slot as usize) else {
            return UrrUsage::default();
        };
        UrrUsage {
            ul_bytes: c.bytes[Direction::Uplink as usize].load(Relaxed),
            ul_pkts: c.pkts[Direction::Uplink as usize].load(Relaxed),
            dl_bytes: c.bytes[Direction::Downlink as usize].load(Relaxed),
            dl_pkts: c.pkts[Direction::Downlink as usize].load(Relaxed),
            first_pkt_ns: c.first.load(Relaxed),
            last_pkt_ns: c.last.load(Relaxed),
        }
    }

    /// Counters of direction `dir` and QFI `qfi` (low 6 bits).
    pub fn qfi(&self, dir: Direction, qfi: u8) -> QfiUsage {
        let c = &self.qfi[dir as usize][usize::from(qfi & 0x3f)];
        QfiUsage {
            pkts: c.pkts.load(Relaxed),
            bytes: c.bytes.load(Relaxed),
            drops: c.drops.load(Relaxed),
            green: c.colours[0].load(Relaxed),
            yellow: c.colours[1].load(Relaxed),
            red: c.colours[2].load(Relaxed),
        }
    }

    pub fn totals(&self) -> UpfTotals {
        let t = &self.totals;
        UpfTotals {
            echo_replies: t.echo_replies.load(Relaxed),
            error_indications_sent: t.error_indications_sent.load(Relaxed),
            error_indications_received: t.error_indications_received.load(Relaxed),
            end_markers_received: t.end_markers_received.load(Relaxed),
            buffered: t.buffered.load(Relaxed),
            icmp_errors_sent: t.icmp_errors_sent.load(Relaxed),
            replies_rate_limited: t.replies_rate_limited.load(Relaxed),
            urr_slots_exceeded: t.urr_slots_exceeded.load(Relaxed),
            meter_slots_exceeded: t.meter_slots_exceeded.load(Relaxed),
            l4_checksums_fixed: t.l4_checksums_fixed.load(Relaxed),
            packets_fragmented: t.packets_fragmented.load(Relaxed),
            fragments_made: t.fragments_made.load(Relaxed),
            fragments_received: t.fragments_received.load(Relaxed),
            datagrams_reassembled: t.datagrams_reassembled.load(Relaxed),
            reassembly_timeouts: t.reassembly_timeouts.load(Relaxed),
        }
    }

    // ---- writer side (the owning worker only) ----

    #[inline]
    pub(crate) fn count(&self, t: Total) {
        self.count_n(t, 1);
    }

    /// Add `n` to a total.
    #[inline]
    pub(crate) fn count_n(&self, t: Total, n: u64) {
        let s = &self.totals;
        add(
            match t {
                Total::EchoReplies => &s.echo_replies,
                Total::ErrorIndicationsSent => &s.error_indications_sent,
                Total::ErrorIndicationsReceived => &s.error_indications_received,
                Total::EndMarkersReceived => &s.end_markers_received,
                Total::Buffered => &s.buffered,
                Total::IcmpErrorsSent => &s.icmp_errors_sent,
                Total::RepliesRateLimited => &s.replies_rate_limited,
                Total::MeterSlotsExceeded => &s.meter_slots_exceeded,
                Total::L4ChecksumsFixed => &s.l4_checksums_fixed,
                Total::PacketsFragmented => &s.packets_fragmented,
                Total::FragmentsMade => &s.fragments_made,
                Total::FragmentsReceived => &s.fragments_received,
                Total::DatagramsReassembled => &s.datagrams_reassembled,
                Total::ReassemblyTimeouts => &s.reassembly_timeouts,
            },
            n,
        );
    }

    /// Start loading slot `slot`'s counter line (a hint, before [`Self::urr_add`]).
    #[inline]
    pub(crate) fn urr_prefetch(&self, slot: u32) {
        // No bounds check: a hint never faults, and a slot past the capacity is rare (it is
        // counted in `urr_slots_exceeded` by the update).
        let c = self.urr.as_ptr().wrapping_add(slot as usize);
        crate::upf::prefetch::prefetch_addr(c.cast());
    }

    /// Add one packet of `bytes` to URR slot `slot` at `now_ns`.
    #[inline]
    pub(crate) fn urr_add(&self, slot: u32, dir: Direction, bytes: u64, now_ns: u64) {
        let Some(c) = self.urr.get(slot as usize) else {
            add(&self.totals.urr_slots_exceeded, 1);
            return;
        };
        let d = dir as usize;
        let n = c.pkts[d].load(Relaxed);
        if n == 0 && c.pkts[d ^ 1].load(Relaxed) == 0 {
            c.first.store(now_ns, Relaxed);
        }
        c.last.store(now_ns, Relaxed);
        c.pkts[d].store(n.wrapping_add(1), Relaxed);
        add(&c.bytes[d], bytes);
    }

    /// Every direction x QFI cell, for a batch's [`qfi_cell`] without the way through
    /// `self`.
    #[inline]
    pub(crate) fn qfi_cells(&self) -> &QfiCells {
        &self.qfi
    }

    #[inline]
    pub(crate) fn qfi_sent(&self, dir: Direction, qfi: u8, bytes: u64) {
        let c = &self.qfi[dir as usize][usize::from(qfi & 0x3f)];
        add(&c.pkts, 1);
        add(&c.bytes, bytes);
    }

    #[inline]
    pub(crate) fn qfi_drop(&self, dir: Direction, qfi: u8) {
        add(&self.qfi[dir as usize][usize::from(qfi & 0x3f)].drops, 1);
    }

    #[inline]
    pub(crate) fn qfi_colour(&self, dir: Direction, qfi: u8, c: Colour) {
        add(
            &self.qfi[dir as usize][usize::from(qfi & 0x3f)].colours[c.index()],
            1,
        );
    }
}

/// The counters of `dir` x `qfi` (low 6 bits) in `cells` ([`UpfStats::qfi_cells`]), for a
/// packet that counts into them more than once (the fast path: its colour, then its
/// bytes), addressed once.
#[inline(always)]
pub(crate) fn qfi_cell(cells: &QfiCells, dir: Direction, qfi: u8) -> &QfiCell {
    &cells[dir as usize][usize::from(qfi & 0x3f)]
}

const _: () = assert!(std::mem::size_of::<QfiCell>() == 64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_and_read_back() {
        let s = UpfStats::new(4);
        s.urr_add(1, Direction::Uplink, 100, 7);
        s.urr_add(1, Direction::Downlink, 50, 9);
        s.urr_add(4, Direction::Uplink, 1, 9);
        assert_eq!(
            s.urr(1),
            UrrUsage {
                ul_bytes: 100,
                ul_pkts: 1,
                dl_bytes: 50,
                dl_pkts: 1,
                first_pkt_ns: 7,
                last_pkt_ns: 9
            }
        );
        assert_eq!(s.urr(4), UrrUsage::default());
        assert_eq!(s.totals().urr_slots_exceeded, 1);
        s.qfi_sent(Direction::Downlink, 9, 10);
        s.qfi_drop(Direction::Downlink, 9);
        s.qfi_colour(Direction::Downlink, 9, Colour::Yellow);
        let q = s.qfi(Direction::Downlink, 9);
        assert_eq!(
            (q.pkts, q.bytes, q.drops, q.yellow, q.red),
            (1, 10, 1, 1, 0)
        );
        assert_eq!(s.qfi(Direction::Uplink, 9), QfiUsage::default());
        s.count(Total::Buffered);
        assert_eq!(s.totals().buffered, 1);
    }
}
