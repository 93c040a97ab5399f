//! The INT elements as worker pipeline stages (Miranda et al., sections III-C to III-E): [`IntSource`]
//! (INTSource), [`IntTransit`] (INTInter) and [`IntSink`] (INTSink), over both wire encodings
//! ([`peregrine_wire::int`]).
//!
//! Files: [`source`], [`transit`], [`sink`], and [`flow`] (the packet's flow from its
//! [`PacketMeta`](peregrine_dataplane::meta::PacketMeta), the rule index, per-namespace
//! state). The flow comes from the shared classifier (`peregrine_dataplane::classify`): read
//! from the packet's record when a `Classify` stage (or the UPF) filled it and the stage was
//! built `after_classifier()`, else classified by the stage itself; no stage parses the
//! packet on its own. Where the IPv6 header is: [`L3Offset::Ethernet`] (N6 and stand-alone
//! transit pipelines: after an Ethernet header with VLAN tags) or [`L3Offset::Raw`] (the
//! buffer starts with IPv6); the INT headers go after the outer IPv6 header. Headers are inserted right after the fixed IPv6 header by moving the bytes in
//! front of them into the headroom ([`PacketBuf::prepend`]) and removed the same way
//! ([`PacketBuf::adj`]), so the payload never moves.
//!
//! Per packet: no allocation, no locks. Rules come from a
//! [`TableSnapshot`](crate::namespace::TableSnapshot) read once per batch; reports and in-band
//! requests leave through a bounded channel of fixed-size [`IntEvent`]s (array-backed, no
//! allocation per message); piggy-back reports arrive the same way. Time is `cx.now_ns()`.

use crate::namespace::DEFAULT_RESEND_INTERVAL_NS;
use crate::report::{Encoding, IntReport};
use crate::request::TraceType;
use peregrine_dataplane::buffer::{BufError, PacketBuf};
use peregrine_dataplane::classify::shift_offsets;
use peregrine_dataplane::runtime::DropReason;
use peregrine_wire::int::{find_inband, InBandKind, TsFormat, MAX_INBAND_PAYLOAD};
use peregrine_wire::ioam;
use peregrine_wire::ipv6::{self, ip_protocol};
use peregrine_wire::ipv6ext::OptionsHeader;
use peregrine_wire::ipv6option::option_type as ipv6_opt;
use std::net::Ipv6Addr;

/// `Debug` of an INT stage: its config and counters (all three stages).
macro_rules! stage_debug {
    ($t:ident) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("cfg", &self.cfg)
                    .field("stats", &self.stats)
                    .finish_non_exhaustive()
            }
        }
    };
}

/// `Debug` (config and counters) and `Stage` of an INT stage whose batch is: the rule table
/// read once, the rule index and the per-flow counters re-synced when it changed, the
/// clock read once, then `process_one(b, now)` on every active packet ([`IntTransit`],
/// [`IntSink`]; [`IntSource`] also filters by rx port and expires its gate when idle, so it
/// keeps its own). One definition for both, expanded in each stage's file: the same code as
/// each wrote before.
macro_rules! table_stage {
    ($t:ident, $name:literal) => {
        stage_debug!($t);

        impl<B: peregrine_dataplane::buffer::PacketBuf> peregrine_dataplane::runtime::Stage<B>
            for $t
        {
            fn name(&self) -> &'static str {
                $name
            }

            fn idle(&mut self) {
                self.table.get();
            }

            fn process(
                &mut self,
                batch: &mut peregrine_dataplane::runtime::Batch<B>,
                cx: &peregrine_dataplane::runtime::Context,
            ) {
                let table = self.table.get();
                if self.index.sync(table) {
                    self.counters
                        .sync(table, $crate::stages::FlowCounters::default());
                }
                let now = self.clock.now(cx.now_ns());
                batch.for_each_active(|b| self.process_one(b, now));
            }
        }
    };
}

pub mod flow;
pub mod sink;
pub mod source;
pub mod transit;

pub use flow::FlowCounters;
pub use sink::{IntSink, SinkStats};
pub use source::{IntSource, SourceStats};
pub use transit::{IntTransit, TransitStats};

/// Where the IPv6 header starts in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum L3Offset {
    /// After an Ethernet header (one 802.1Q tag allowed).
    #[default]
    Ethernet,
    /// At offset 0.
    Raw,
}

impl L3Offset {
    /// The IPv6 header's offset by two loads, for the skip checks that come before any
    /// classification (a single 802.1Q tag; anything else goes to the classifier).
    pub(crate) fn find(self, d: &[u8]) -> Option<usize> {
        match self {
            L3Offset::Raw => Some(0),
            L3Offset::Ethernet => match d.get(12..14)? {
                [0x86, 0xdd] => Some(14),
                [0x81, 0x00] if d.get(16..18)? == [0x86, 0xdd] => Some(18),
                _ => None,
            },
        }
    }
}

/// Configuration shared by the three elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntConfig {
    /// This node's ID (seed: 16 bits; IOAM node_id is 24 bits and gets the same value).
    pub node_id: u16,
    /// Largest IPv6 packet (header included) the egress link carries; INT is skipped for a
    /// packet it would push over (III-C, III-D).
    pub mtu: usize,
    pub l3: L3Offset,
    /// Namespaces whose rule uses the seed encoding (sorted); all others use IOAM. (The rule
    /// JSON has no encoding field yet; the manager passes this list.)
    pub seed_namespaces: Vec<u16>,
    /// IOAM: pre-allocated trace entries for transit hops (the source adds one for itself).
    pub ioam_hops: u8,
    /// In-band request re-send interval (III-B.2; the namespace table's default).
    pub resend_interval_ns: u64,
    /// HbH fields (Table I bits 16-18, low half) this node can fill as a transit.
    pub supported_hbh: u16,
    /// Seed of the per-worker PRNG of the probability mode (mixed with the worker index).
    pub prng_seed: u64,
    /// What the IOAM timestamp fraction counts (RFC 9197 4.4.2.3). Linux writes POSIX
    /// (microseconds); a path with Linux hops needs [`TsFormat::Posix`] everywhere.
    pub ioam_timestamp: TsFormat,
    /// Timestamps are wall-clock time (ns since the Unix epoch, as Linux and other nodes
    /// write them) rather than the worker clock; needed when nodes are compared.
    pub wall_clock: bool,
    /// The source instruments only packets received on these ports (the edge facing the
    /// hosts); empty: every port. A node that is also a sink must not re-instrument the
    /// packets it just stripped.
    pub source_ports: Vec<u16>,
    /// The IOAM Hop_Lim written is the hop limit the packet leaves with (received - 1), as
    /// a Linux transit writes it (`ioam6_fill_trace_data` on input); set when the stages
    /// run before the routing stage that decrements it. Off: the hop limit as seen.
    pub hop_limit_after_forward: bool,
    /// The sketch-INT co-design gate at the source: INT only for small flows
    /// (`docs/codesign.md`). Needs the classifier's flow hash (`after_classifier`).
    pub gate: Option<crate::gate::GateConfig>,
}

impl Default for IntConfig {
    fn default() -> Self {
        IntConfig {
            node_id: 0,
            mtu: 1500,
            l3: L3Offset::Ethernet,
            seed_namespaces: Vec::new(),
            ioam_hops: 5,
            resend_interval_ns: DEFAULT_RESEND_INTERVAL_NS,
            supported_hbh: (TraceType::HBH_TXRX_COUNTER
                | TraceType::HBH_TIMESTAMP
                | TraceType::HBH_TXRX_BYTES) as u16,
            prng_seed: 0x9e37_79b9_7f4a_7c15,
            ioam_timestamp: TsFormat::Ptp,
            wall_clock: false,
            source_ports: Vec::new(),
            hop_limit_after_forward: false,
            gate: None,
        }
    }
}

impl IntConfig {
    /// Encoding of a namespace's rule.
    pub fn encoding(&self, ns: u16) -> Encoding {
        if self.seed_namespaces.binary_search(&ns).is_ok() {
            Encoding::Seed
        } else {
            Encoding::Ioam
        }
    }
}

/// Longest in-band payload, as a fixed buffer.
pub type InBandBytes = [u8; MAX_INBAND_PAYLOAD];

/// What the elements hand to the control core. Fixed size, `Copy`.
// Unboxed on purpose: a boxed report would allocate per packet.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy)]
pub enum IntEvent {
    /// A raw report from the sink, with what the namespace says to do with it.
    Report {
        report: IntReport,
        transmit: bool,
        piggyback: bool,
    },
    /// An in-band INT Request (0x32) seen by a transit or sink: CBOR rule bytes.
    Request {
        from: Ipv6Addr,
        len: u8,
        cbor: InBandBytes,
    },
    /// A piggy-backed report (0x33) extracted by a transit or received by a sink.
    InBandReport {
        from: Ipv6Addr,
        len: u8,
        bytes: InBandBytes,
    },
    /// The co-design gate closed a window: one `GateFlow` per switch record, then this.
    GateWindow {
        worker: u16,
        window: crate::gate::ClosedWindow,
        /// The window's switch records that could not be sent (a full channel).
        lost: u32,
    },
    /// One flow judged large in the window that starts at `start_ns` (`docs/codesign.md`).
    GateFlow {
        worker: u16,
        start_ns: u64,
        record: crate::gate::SwitchRecord,
    },
}

/// A piggy-back report for the source to send in-band towards `dst` (III-B).
#[derive(Debug, Clone, Copy)]
pub struct Piggyback {
    pub dst: Ipv6Addr,
    pub len: u8,
    pub bytes: InBandBytes,
}

impl Piggyback {
    /// Wrap a report's compact encoding for `dst` (the report's flow source).
    pub fn new(dst: Ipv6Addr, report: &IntReport) -> Piggyback {
        let mut bytes = [0u8; MAX_INBAND_PAYLOAD];
        let len = report.encode_compact(&mut bytes).unwrap_or(0) as u8;
        Piggyback { dst, len, bytes }
    }
}

/// A stage's timestamp clock: the worker clock, or wall-clock time derived from it by an
/// offset re-read once a second (one vDSO `clock_gettime` per second, not per packet).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StageClock {
    wall: bool,
    offset: u64,
    calibrated_at: Option<u64>,
}

const CLOCK_RECALIBRATE_NS: u64 = 1_000_000_000;

impl StageClock {
    pub(crate) fn new(wall: bool) -> StageClock {
        StageClock {
            wall,
            ..Default::default()
        }
    }

    pub(crate) fn now(&mut self, worker_ns: u64) -> u64 {
        if !self.wall {
            return worker_ns;
        }
        let stale = self
            .calibrated_at
            .is_none_or(|t| worker_ns.saturating_sub(t) >= CLOCK_RECALIBRATE_NS);
        if stale {
            let unix = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            self.offset = unix.saturating_sub(worker_ns);
            self.calibrated_at = Some(worker_ns);
        }
        worker_ns + self.offset
    }
}

// ---------------------------------------------------------------------------------------
// Packet helpers

/// Grow or shrink the `old`-byte region at `at` to `new` bytes by moving the `at` bytes in
/// front of it. Afterwards `[at, at + new)` is the region (contents unspecified), and the
/// packet's metadata offsets behind it have moved with it.
pub(crate) fn resize_at<B: PacketBuf>(
    b: &mut B,
    at: usize,
    old: usize,
    new: usize,
) -> Result<(), BufError> {
    if new > old {
        let d = new - old;
        if b.headroom() >= d {
            // Usually only the L2 and IPv6 headers move.
            b.prepend(d)?;
            b.data_mut().copy_within(d..d + at, 0);
        } else {
            // Not enough headroom (a long request or report option): move the rest back.
            let len = b.len();
            b.append(d)?;
            b.data_mut().copy_within(at + old..len, at + new);
        }
    } else if old > new {
        let d = old - new;
        b.data_mut().copy_within(0..at, d);
        b.adj(d)?;
    }
    shift_offsets(b.pkt_meta_mut(), at, new as isize - old as isize);
    Ok(())
}

/// Set the IPv6 Next Header and add `delta` to Payload Length.
pub(crate) fn fix_ipv6(d: &mut [u8], off: usize, next_header: u8, delta: isize) {
    let mut ip = ipv6::Packet::new_unchecked(&mut d[off..]);
    let len = ip.payload_len() as isize + delta;
    ip.set_payload_len(len as u16);
    ip.set_next_header(next_header);
}

// ---------------------------------------------------------------------------------------
// Which INT header a packet carries

#[derive(Debug)]
pub(crate) enum Carried {
    None,
    InBand(InBandKind, u16),
    Seed,
    Ioam,
}

/// What `b` carries ([`carried`]) in the hop-by-hop header right after the IPv6 header of
/// `flow`, or [`Carried::None`] when none follows it: the transit's and the sink's first
/// look at a located packet.
#[inline(always)]
pub(crate) fn carried_after<B: PacketBuf>(
    cfg: &IntConfig,
    b: &B,
    flow: &flow::Flow,
) -> Result<Carried, peregrine_wire::Error> {
    if flow.next_header == ip_protocol::HOPOPT {
        carried(cfg, &b.data()[flow.off + ipv6::HEADER_LEN..])
    } else {
        Ok(Carried::None)
    }
}

pub(crate) fn carried(cfg: &IntConfig, hdr: &[u8]) -> Result<Carried, peregrine_wire::Error> {
    if let Some(r) = find_inband(hdr)? {
        let ns = match r.kind {
            InBandKind::Report if r.payload.len() >= 2 => {
                u16::from_be_bytes([r.payload[0], r.payload[1]])
            }
            _ => 0,
        };
        return Ok(Carried::InBand(r.kind, ns));
    }
    let Some(f) = ioam::find_in_header(hdr, ipv6_opt::IOAM_HBH)? else {
        return Ok(Carried::None);
    };
    // The seed's namespace sits where IOAM has Reserved and IOAM-Option-Type; the rule's
    // encoding decides (docs/int.md).
    let data = &hdr[f.body.start - 2..f.body.end];
    let seed_ns = u16::from_be_bytes([data[0], data[1]]);
    if cfg.encoding(seed_ns) == Encoding::Seed {
        Ok(Carried::Seed)
    } else if f.ioam_type == ioam::option_type::PRE_ALLOCATED_TRACE {
        Ok(Carried::Ioam)
    } else {
        Ok(Carried::None)
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Drops {
    pub malformed: DropReason,
}

/// Length of the INT headers at the start of `hdr`: the Hop-by-Hop header, plus a
/// Destination Options header right after it that holds an IOAM E2E option.
pub(crate) fn int_headers_len(hdr: &[u8]) -> usize {
    let Ok(h) = OptionsHeader::new_checked(hdr) else {
        return 0;
    };
    let len = h.header_len();
    if h.next_header() == ip_protocol::IPV6_OPTS {
        if let Some(rest) = hdr.get(len..) {
            if let Ok(Some(_)) = ioam::find_in_header(rest, ipv6_opt::IOAM_DEST) {
                if let Ok(d) = OptionsHeader::new_checked(rest) {
                    return len + d.header_len();
                }
            }
        }
    }
    len
}

pub(crate) fn inband_event(hdr: &[u8], from: Ipv6Addr, kind: InBandKind) -> Option<IntEvent> {
    let r = find_inband(hdr).ok()??;
    let mut bytes = [0u8; MAX_INBAND_PAYLOAD];
    bytes[..r.payload.len()].copy_from_slice(r.payload);
    let len = r.payload.len() as u8;
    Some(match kind {
        InBandKind::Request => IntEvent::Request {
            from,
            len,
            cbor: bytes,
        },
        InBandKind::Report => IntEvent::InBandReport { from, len, bytes },
    })
}

/// Remove the first extension header after the IPv6 header at `off`.
pub(crate) fn strip_first<B: PacketBuf>(b: &mut B, off: usize) -> Result<(), ()> {
    let at = off + ipv6::HEADER_LEN;
    let h = OptionsHeader::new_checked(&b.data()[at..]).map_err(|_| ())?;
    let (len, nh) = (h.header_len(), h.next_header());
    resize_at(b, at, len, 0).map_err(|_| ())?;
    fix_ipv6(b.data_mut(), off, nh, -(len as isize));
    Ok(())
}

/// Whether the IPv6 header at `off` is followed by a Hop-by-Hop Options header, where
/// every INT encoding starts (RFC 8200 4.1: it must come first). Bounds-checked loads
/// only; a truncated header is not INT here and the full parse deals with it.
#[inline]
pub(crate) fn has_hbh(d: &[u8], off: usize) -> bool {
    d.get(off + 6) == Some(&ip_protocol::HOPOPT)
}

/// The IPv6 header's offset for a skip check: the record's when a classifier filled it
/// (`trust`), else [`L3Offset::find`]'s two loads. `None`: no IPv6 header found that way.
#[inline]
pub(crate) fn l3_quick<B: PacketBuf>(l3: L3Offset, trust: bool, b: &B) -> Option<usize> {
    let m = b.pkt_meta();
    if trust && m.is_classified() {
        return m
            .has(peregrine_dataplane::meta::flags::OUTER_V6)
            .then_some(usize::from(m.l3_off));
    }
    l3.find(b.data())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hbh_check_is_bounds_checked() {
        let mut d = [0u8; 60];
        d[14 + 6] = ip_protocol::UDP;
        assert!(!has_hbh(&d, 14));
        d[14 + 6] = ip_protocol::HOPOPT;
        assert!(has_hbh(&d, 14));
        assert!(!has_hbh(&d[..20], 14));
        assert!(!has_hbh(&[], 0));
    }
}
