//! Per-packet metadata: what stages learned about a packet, carried with it through the
//! pipeline, the egress scheduler's queues and the post-dequeue taps.
//!
//! One fixed-size record per buffer ([`PacketBuf::pkt_meta`](crate::PacketBuf::pkt_meta)):
//! `OwnedBuf` keeps it in its struct, a DPDK mbuf in its private area (behind the 128-byte
//! `rte_mbuf`, in the third cache line of the mbuf). The record is *stale* when a packet
//! arrives (buffers are recycled, nothing clears it on rx, which would cost a cache line per
//! packet): the classifier resets it (`*m = PacketMeta::EMPTY`, then fills it) for every packet
//! it sees, and stages that read it check [`flags::CLASSIFIED`] first.
//!
//! Who fills what (the table with offsets is in `docs/architecture.md`):
//! * the classifier: offsets, `flow_hash`, `proto`, `flags`, `teid` and `qfi` of a G-PDU;
//! * the UPF: `dir`, `teid` (downlink: the one it encapsulates with), `session`, `qfi`, `qid`,
//!   `color`;
//! * the egress scheduler: `enqueue_ns` at enqueue, `sojourn_ns` at dequeue (a UPF that shapes
//!   writes the departure time into `enqueue_ns` with [`flags::SHAPED`] set, for the scheduler).

/// What stages learned about a packet, filled once and read by later stages, the egress
/// scheduler and post-dequeue taps without re-parsing. 40 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct PacketMeta {
    /// Worker-clock ns at which the egress scheduler enqueued the packet (0: never queued).
    pub enqueue_ns: u64,
    /// Hash of the flow's 5-tuple (the inner packet's for a G-PDU); 0 = not computed.
    pub flow_hash: u32,
    /// N3 TEID: uplink the received one, downlink the one of the encapsulation; 0 = none.
    pub teid: u32,
    /// Session / URR slot in the UPF tables; `PacketMeta::NO_SESSION` (u32::MAX) = none.
    pub session: u32,
    /// Queue sojourn stamped at dequeue, ns, saturating at u32::MAX.
    pub sojourn_ns: u32,
    /// Offsets into the packet's current bytes (a stage that moves headers updates them):
    /// the outer IP header and its L4 header (0 when absent or a non-first fragment) ...
    pub l3_off: u16,
    pub l4_off: u16,
    /// ... and the IP/L4 headers of the flow: the inner packet of a G-PDU, else equal to
    /// l3_off / l4_off.
    pub inner_l3_off: u16,
    pub inner_l4_off: u16,
    /// `meta::flags::*` bits: CLASSIFIED, OUTER_V6, INNER_V6, GPDU, FRAGMENT (flow packet is
    /// a fragment: no L4 ports), L4 (inner L4 header present and complete), plus free bits.
    pub flags: u16,
    /// L4 protocol number of the flow (inner for a G-PDU).
    pub proto: u8,
    /// `Direction as u8`: 0 unknown, 1 uplink, 2 downlink.
    pub dir: u8,
    pub qfi: u8,
    /// Egress queue id 0..8 chosen by the UPF (or 0).
    pub qid: u8,
    /// TrTCM colour the UPF's meter gave: 0 green, 1 yellow, 2 red (see `qos::trtcm`).
    pub color: u8,
    pub _spare: u8,
}

/// Bits of [`PacketMeta::flags`].
pub mod flags {
    /// The classifier has filled the record for the packet's current bytes.
    pub const CLASSIFIED: u16 = 1 << 0;
    /// The outer IP header is IPv6 (else IPv4, when `l3_off != 0`).
    pub const OUTER_V6: u16 = 1 << 1;
    /// The flow's IP header (inner for a G-PDU) is IPv6.
    pub const INNER_V6: u16 = 1 << 2;
    /// The packet is a GTP-U G-PDU (UDP port 2152, message type 255) with an inner packet.
    pub const GPDU: u16 = 1 << 3;
    /// The flow packet is a fragment: its L4 ports are not known.
    pub const FRAGMENT: u16 = 1 << 4;
    /// The flow's L4 header is present and complete.
    pub const L4: u16 = 1 << 5;
    /// Shaped by the UPF (`qos::pacer`): `enqueue_ns` holds the departure time until the
    /// egress scheduler takes the packet (it then clears the bit and stamps the enqueue time).
    pub const SHAPED: u16 = 1 << 6;
    /// Bits assigned above; the others are free for features.
    pub const ASSIGNED: u16 = (1 << 7) - 1;
}

impl PacketMeta {
    /// `session` of a packet that matched no session.
    pub const NO_SESSION: u32 = u32::MAX;

    /// Nothing known: what the classifier resets the record to before filling it.
    pub const EMPTY: PacketMeta = PacketMeta {
        enqueue_ns: 0,
        flow_hash: 0,
        teid: 0,
        session: Self::NO_SESSION,
        sojourn_ns: 0,
        l3_off: 0,
        l4_off: 0,
        inner_l3_off: 0,
        inner_l4_off: 0,
        flags: 0,
        proto: 0,
        dir: Direction::Unknown as u8,
        qfi: 0,
        qid: 0,
        color: 0,
        _spare: 0,
    };

    /// Whether every bit of `f` is set in `flags`.
    #[inline]
    pub const fn has(&self, f: u16) -> bool {
        self.flags & f == f
    }

    /// Whether the classifier has filled the record.
    #[inline]
    pub const fn is_classified(&self) -> bool {
        self.has(flags::CLASSIFIED)
    }

    /// The direction; an out-of-range byte reads as `Unknown`.
    #[inline]
    pub const fn direction(&self) -> Direction {
        Direction::from_u8(self.dir)
    }

    /// Stamp the queue sojourn `ns`, saturating at `u32::MAX` (4.29 s).
    #[inline]
    pub fn set_sojourn(&mut self, ns: u64) {
        self.sojourn_ns = u32::try_from(ns).unwrap_or(u32::MAX);
    }
}

impl Default for PacketMeta {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// Direction of a packet through the UPF (TS 23.501 section 5.8: N3 to N6 is uplink).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Direction {
    Unknown = 0,
    Uplink = 1,
    Downlink = 2,
}

impl Direction {
    /// The direction a [`PacketMeta::dir`] byte names; anything else is `Unknown`.
    #[inline]
    pub const fn from_u8(v: u8) -> Direction {
        match v {
            1 => Direction::Uplink,
            2 => Direction::Downlink,
            _ => Direction::Unknown,
        }
    }
}

/// Bytes a buffer implementation reserves for the record (DPDK: the mbuf private area).
pub const PACKET_META_SIZE: usize = std::mem::size_of::<PacketMeta>();

const _: () = assert!(std::mem::size_of::<PacketMeta>() == 40);
const _: () = assert!(std::mem::align_of::<PacketMeta>() == 8);

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn size_alignment_and_layout() {
        assert_eq!(std::mem::size_of::<PacketMeta>(), 40);
        assert_eq!(PACKET_META_SIZE, 40);
        assert_eq!(std::mem::align_of::<PacketMeta>(), 8);
        // The offsets documented in docs/architecture.md.
        assert_eq!(offset_of!(PacketMeta, enqueue_ns), 0);
        assert_eq!(offset_of!(PacketMeta, flow_hash), 8);
        assert_eq!(offset_of!(PacketMeta, teid), 12);
        assert_eq!(offset_of!(PacketMeta, session), 16);
        assert_eq!(offset_of!(PacketMeta, sojourn_ns), 20);
        assert_eq!(offset_of!(PacketMeta, l3_off), 24);
        assert_eq!(offset_of!(PacketMeta, l4_off), 26);
        assert_eq!(offset_of!(PacketMeta, inner_l3_off), 28);
        assert_eq!(offset_of!(PacketMeta, inner_l4_off), 30);
        assert_eq!(offset_of!(PacketMeta, flags), 32);
        assert_eq!(offset_of!(PacketMeta, proto), 34);
        assert_eq!(offset_of!(PacketMeta, dir), 35);
        assert_eq!(offset_of!(PacketMeta, qfi), 36);
        assert_eq!(offset_of!(PacketMeta, qid), 37);
        assert_eq!(offset_of!(PacketMeta, color), 38);
        assert_eq!(offset_of!(PacketMeta, _spare), 39);
    }

    #[test]
    fn empty_knows_nothing() {
        let m = PacketMeta::EMPTY;
        assert_eq!(m.session, PacketMeta::NO_SESSION);
        assert_eq!(m.session, u32::MAX);
        assert_eq!(m.direction(), Direction::Unknown);
        assert_eq!(m.flags, 0);
        assert!(!m.is_classified());
        assert_eq!(
            (m.enqueue_ns, m.sojourn_ns, m.flow_hash, m.teid),
            (0, 0, 0, 0)
        );
        assert_eq!(
            (m.l3_off, m.l4_off, m.inner_l3_off, m.inner_l4_off),
            (0, 0, 0, 0)
        );
        assert_eq!((m.proto, m.qfi, m.qid, m.color), (0, 0, 0, 0));
        assert_eq!(PacketMeta::default(), m);
    }

    #[test]
    fn flags_are_distinct_bits() {
        let all = [
            flags::CLASSIFIED,
            flags::OUTER_V6,
            flags::INNER_V6,
            flags::GPDU,
            flags::FRAGMENT,
            flags::L4,
            flags::SHAPED,
        ];
        let mut seen = 0u16;
        for f in all {
            assert_eq!(f.count_ones(), 1, "{f:#x} is one bit");
            assert_eq!(seen & f, 0, "{f:#x} is not reused");
            seen |= f;
        }
        assert_eq!(seen, flags::ASSIGNED);
        let mut m = PacketMeta::EMPTY;
        m.flags = flags::CLASSIFIED | flags::GPDU;
        assert!(m.is_classified());
        assert!(m.has(flags::GPDU));
        assert!(m.has(flags::CLASSIFIED | flags::GPDU));
        assert!(!m.has(flags::GPDU | flags::L4));
        assert!(!m.has(flags::FRAGMENT));
    }

    #[test]
    fn direction_round_trips_and_rejects_unknown_bytes() {
        for d in [Direction::Unknown, Direction::Uplink, Direction::Downlink] {
            assert_eq!(Direction::from_u8(d as u8), d);
        }
        assert_eq!(Direction::Uplink as u8, 1);
        assert_eq!(Direction::Downlink as u8, 2);
        assert_eq!(Direction::from_u8(3), Direction::Unknown);
        assert_eq!(Direction::from_u8(255), Direction::Unknown);
    }

    #[test]
    fn sojourn_saturates() {
        let mut m = PacketMeta::EMPTY;
        m.set_sojourn(1_234);
        assert_eq!(m.sojourn_ns, 1_234);
        m.set_sojourn(u64::from(u32::MAX) + 1);
        assert_eq!(m.sojourn_ns, u32::MAX);
        m.set_sojourn(u64::MAX);
        assert_eq!(m.sojourn_ns, u32::MAX);
    }
}
