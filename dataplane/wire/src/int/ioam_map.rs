//! The seed's fields in RFC 9197 IOAM: trace type, timestamps (RFC 9197 section 5) and
//! node entries.

use super::*;

// ---------------------------------------------------------------------------------------
// IOAM mapping

/// The RFC 9197 trace type for the HbH half of a seed trace type: bit 0 (Hop_Lim, node_id)
/// always; seed bit 17 (timestamp) -> bits 2 and 3 (seconds, nanoseconds); seed bit 16
/// (TX/RX packets, 16 bits each) -> bit 5 (namespace data, short); seed bit 18 (TX/RX
/// bytes, 32 bits each), or E2E bits 2-3 (the source's TX packets and bytes, carried in the
/// source's own entry) -> bit 10 (namespace data, wide). Linux fills all of these.
pub fn ioam_trace_type(tt: TraceType) -> ioam::TraceType {
    use ioam::TraceType as T;
    let h = tt.hbh();
    let mut v = T::HOP_LIM_NODE_ID;
    if h & HBH_TS != 0 {
        v |= T::TIMESTAMP_SECS | T::TIMESTAMP_FRAC;
    }
    if h & HBH_PKTS != 0 {
        v |= T::NAMESPACE_DATA;
    }
    // The source's own entry carries the E2E TX counters in the wide data (docs/int.md).
    if h & HBH_BYTES != 0 || tt.e2e() & (E2E_TXP | E2E_TXB) != 0 {
        v |= T::NAMESPACE_DATA_WIDE;
    }
    ioam::TraceType(v)
}

/// Seconds and nanoseconds of a ns timestamp (RFC 9197 section 5 PTP truncated format).
pub const fn ts_split(ns: u64) -> (u32, u32) {
    ((ns / 1_000_000_000) as u32, (ns % 1_000_000_000) as u32)
}

/// Inverse of [`ts_split`]; a fraction of a second or more is `None`.
pub fn ts_join(secs: u32, frac: u32) -> Option<u64> {
    (frac < 1_000_000_000).then(|| secs as u64 * 1_000_000_000 + frac as u64)
}

/// What the IOAM timestamp fraction field counts (RFC 9197 sections 4.4.2.3 and 5: the
/// format is a property of the IOAM namespace). Seconds are the same in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TsFormat {
    /// PTP truncated (RFC 9197 5.1): nanoseconds.
    #[default]
    Ptp,
    /// POSIX (RFC 9197 5.3): microseconds. What the Linux kernel writes
    /// (`net/ipv6/ioam6.c`: `tv_nsec / NSEC_PER_USEC`), so mixed paths agree.
    Posix,
}

impl TsFormat {
    /// Seconds and fraction of a ns timestamp in this format.
    pub const fn split(self, ns: u64) -> (u32, u32) {
        match self {
            TsFormat::Ptp => ts_split(ns),
            TsFormat::Posix => (
                (ns / 1_000_000_000) as u32,
                ((ns % 1_000_000_000) / 1_000) as u32,
            ),
        }
    }

    /// Inverse of [`TsFormat::split`] (to the format's resolution); a fraction of a second
    /// or more is `None`.
    pub fn join(self, secs: u32, frac: u32) -> Option<u64> {
        match self {
            TsFormat::Ptp => ts_join(secs, frac),
            TsFormat::Posix => {
                (frac < 1_000_000).then(|| secs as u64 * 1_000_000_000 + frac as u64 * 1_000)
            }
        }
    }
}

/// A hop's data as an RFC 9197 node entry for trace type `tt`: fields the hop did not
/// collect stay `None`, which [`NodeData::emit`] writes as all-ones (RFC 9197 section
/// 4.4.2; this replaces the seed's per-hop entry trace type).
pub fn hop_to_node_data(h: &SeedHopRepr, hop_limit: u8, tt: ioam::TraceType) -> NodeData<'static> {
    hop_to_node_data_in(h, hop_limit, tt, TsFormat::Ptp)
}

/// [`hop_to_node_data`] with the namespace's timestamp format.
pub fn hop_to_node_data_in(
    h: &SeedHopRepr,
    hop_limit: u8,
    tt: ioam::TraceType,
    fmt: TsFormat,
) -> NodeData<'static> {
    use ioam::TraceType as T;
    let mut d = NodeData::default();
    if tt.has(T::HOP_LIM_NODE_ID) {
        d.hop_limit = Some(hop_limit);
        d.node_id = Some(h.node_id as u32);
    }
    if let Some(ts) = h.timestamp_ns {
        let (s, f) = fmt.split(ts);
        d.timestamp_secs = tt.has(T::TIMESTAMP_SECS).then_some(s);
        d.timestamp_frac = tt.has(T::TIMESTAMP_FRAC).then_some(f);
    }
    if let Some((tx, rx)) = h.packets {
        d.namespace_data = tt
            .has(T::NAMESPACE_DATA)
            .then_some((tx as u32) << 16 | rx as u32);
    }
    if let Some((tx, rx)) = h.bytes {
        d.namespace_data_wide = tt
            .has(T::NAMESPACE_DATA_WIDE)
            .then_some((tx as u64) << 32 | rx as u64);
    }
    d
}

/// An RFC 9197 node entry as a report hop: all-ones fields are "not collected".
pub fn node_data_to_hop(d: &NodeData<'_>) -> HopData {
    node_data_to_hop_in(d, TsFormat::Ptp)
}

/// [`node_data_to_hop`] with the namespace's timestamp format.
pub fn node_data_to_hop_in(d: &NodeData<'_>, fmt: TsFormat) -> HopData {
    let a = d.available();
    let timestamp_ns = match (a.timestamp_secs, a.timestamp_frac) {
        (Some(s), Some(f)) => fmt.join(s, f),
        (Some(s), None) => Some(s as u64 * 1_000_000_000),
        _ => None,
    };
    let mut h = HopData {
        node_id: a.node_id.unwrap_or(0),
        timestamp_ns,
        tx_packets: a.namespace_data.map(|v| (v >> 16) as u16),
        rx_packets: a.namespace_data.map(|v| v as u16),
        tx_bytes: a.namespace_data_wide.map(|v| (v >> 32) as u32),
        rx_bytes: a.namespace_data_wide.map(|v| v as u32),
        entry_trace_type: 0,
        hop_limit: a.hop_limit,
    };
    if h.timestamp_ns.is_some() {
        h.entry_trace_type |= HBH_TS;
    }
    if h.tx_packets.is_some() {
        h.entry_trace_type |= HBH_PKTS;
    }
    if h.tx_bytes.is_some() {
        h.entry_trace_type |= HBH_BYTES;
    }
    h
}
