//! INT options on the wire (Miranda et al., "A Flexible In-band Network Telemetry Framework" section III-A, Fig. 2 and Fig. 3), smoltcp style, and the
//! mapping of the seed's fields onto RFC 9197 IOAM in the RFC 9486 encapsulation.
//!
//! Two encodings (docs/int.md has the byte diagrams):
//!
//! * **Seed** (per rule): one Hop-by-Hop header, byte for byte the seed's Fig. 2:
//!
//!   ```text
//!    0                   1                   2                   3
//!    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  Next Header  |  Hdr Ext Len  |  PadN (0x01)  |       0       |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  0x31         |  Opt Len      |          Namespace            |  main header
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |        Trace Type (E2E half 31..16 | HbH half 15..0)          |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |           Node ID             |     HbH entry trace type      |  newest hop
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  entry data: bit 16 TX pkts(16) RX pkts(16); bit 17 ts(64);   |
//!   |              bit 18 TX bytes(32) RX bytes(32)                 |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  ... older hops ...                                           |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  0x11         |  Opt Len      |        E2E trace type         |  E2E entry header
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  E2E data: bit 0 INT counter(32); bit 1 ts(64); bit 2 TX      |
//!   |            pkts(32); bit 3 TX bytes(32)                       |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  Pad1 / PadN to a multiple of 8                               |
//!   ```
//!
//!   The leading PadN puts the 0x31 option on a 4n boundary (RFC 9486 section 3; Linux drops
//!   it otherwise) and every entry is 4n long, so the 0x11 option is 4n-aligned too. A hop
//!   stacks its entry right after the main header (III-D).
//! * **IOAM** (default): the per-hop data in an RFC 9197 Pre-allocated Trace in the
//!   Hop-by-Hop header, the E2E data in an RFC 9197 E2E option in a Destination Options
//!   header, both built with `peregrine_wire::ioam`; see [`ioam_trace_type`] and
//!   [`hop_to_node_data`] for the field mapping.
//!
//! The in-band INT Request (seed Fig. 3, option 0x32, CBOR payload) and piggy-backed report
//! (option 0x33) are **experimental** option types: IANA has not assigned them. Both have
//! action bits 00 (skip if unknown, RFC 8200 section 4.2) and the "may change" bit set
//! (0x20), so nodes that do not know them forward the packet.

//!
//! Files: `seed` (the seed layout: hop entries, 0x31 main header, 0x11 E2E entry, the
//! Hop-by-Hop header), `inband` (0x32 / 0x33), `ioam_map` (seed fields onto RFC 9197).

use crate::ioam::{self, NodeData};
use crate::ipv6ext::OptionsHeader;
use crate::ipv6option::{self, Kind, MAX_DATA_LEN};
use crate::{be16, be32, Error, Result};
use core::iter::FusedIterator;

mod inband;
mod ioam_map;
mod seed;

pub use inband::*;
pub use ioam_map::*;
pub use seed::*;

/// IPv6 option types used by INT.
pub mod option_type {
    /// The seed's main header / IOAM in Hop-by-Hop (RFC 9486).
    pub const TRACE: u8 = 0x31;
    /// The seed's E2E entry / IOAM in Destination Options (RFC 9486).
    pub const E2E: u8 = 0x11;
    /// INT Request, CBOR rule (seed Fig. 3). Experimental, unassigned.
    pub const REQUEST: u8 = 0x32;
    /// Piggy-backed INT report (seed III-B). Experimental, unassigned.
    pub const REPORT: u8 = 0x33;
}

/// Bytes of the seed main header in the 0x31 option data: Namespace (16), Trace Type (32).
pub const SEED_MAIN_LEN: usize = 6;
/// Bytes of a seed hop entry header: Node ID (16), HbH entry trace type (16).
pub const SEED_HOP_HEADER_LEN: usize = 4;
/// Bytes of the seed E2E trace type in the 0x11 option data.
pub const SEED_E2E_HEADER_LEN: usize = 2;
/// Longest payload of a 0x32 / 0x33 option.
pub const MAX_INBAND_PAYLOAD: usize = MAX_DATA_LEN;

const HBH_KNOWN: u16 = TraceType::KNOWN as u16;
const E2E_KNOWN: u16 = (TraceType::KNOWN >> 16) as u16;
const HBH_PKTS: u16 = TraceType::HBH_TXRX_COUNTER as u16;
const HBH_TS: u16 = TraceType::HBH_TIMESTAMP as u16;
const HBH_BYTES: u16 = TraceType::HBH_TXRX_BYTES as u16;
const E2E_CNT: u16 = (TraceType::E2E_INT_COUNTER >> 16) as u16;
const E2E_TS: u16 = (TraceType::E2E_TIMESTAMP >> 16) as u16;
const E2E_TXP: u16 = (TraceType::E2E_TX_COUNTER >> 16) as u16;
const E2E_TXB: u16 = (TraceType::E2E_TX_BYTES >> 16) as u16;

fn be64(b: &[u8]) -> u64 {
    ((be32(b) as u64) << 32) | be32(&b[4..]) as u64
}

/// Bytes of hop entry data for an HbH entry trace type (Table I bits 16-18).
pub const fn hop_data_len(entry_trace_type: u16) -> usize {
    let mut n = 0;
    if entry_trace_type & HBH_PKTS != 0 {
        n += 4;
    }
    if entry_trace_type & HBH_TS != 0 {
        n += 8;
    }
    if entry_trace_type & HBH_BYTES != 0 {
        n += 8;
    }
    n
}

/// Bytes of E2E data for an E2E trace type (Table I bits 0-3, as the upper 16 bits).
pub const fn e2e_data_len(e2e_trace_type: u16) -> usize {
    let mut n = 0;
    if e2e_trace_type & E2E_CNT != 0 {
        n += 4;
    }
    if e2e_trace_type & E2E_TS != 0 {
        n += 8;
    }
    if e2e_trace_type & E2E_TXP != 0 {
        n += 4;
    }
    if e2e_trace_type & E2E_TXB != 0 {
        n += 4;
    }
    n
}

/// Trace type (seed section III-A, Table I): 32 bits, the most significant 16 for the E2E part,
/// the least significant 16 for the HbH part. Bit numbers follow Table I (bit 0 = MSB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TraceType(pub u32);

impl TraceType {
    /// Bit 0: E2E INT packet counter (debugging).
    pub const E2E_INT_COUNTER: u32 = 0x8000_0000;
    /// Bit 1: E2E 64-bit source timestamp.
    pub const E2E_TIMESTAMP: u32 = 0x4000_0000;
    /// Bit 2: E2E 32-bit transmitted packet counter.
    pub const E2E_TX_COUNTER: u32 = 0x2000_0000;
    /// Bit 3: E2E 32-bit transmitted byte counter.
    pub const E2E_TX_BYTES: u32 = 0x1000_0000;
    /// Bit 16: HbH 16-bit TX and RX packet counters.
    pub const HBH_TXRX_COUNTER: u32 = 0x0000_8000;
    /// Bit 17: HbH 64-bit timestamp.
    pub const HBH_TIMESTAMP: u32 = 0x0000_4000;
    /// Bit 18: HbH 32-bit TX and RX byte counters.
    pub const HBH_TXRX_BYTES: u32 = 0x0000_2000;
    /// All bits Table I allocates; the rest ("not allocated") are rejected.
    pub const KNOWN: u32 = 0xF000_E000;
    /// The trace type of the seed's experiments (section IV-A): E2E bits 1-3, HbH bits 16-18.
    pub const SEED_EXPERIMENTS: TraceType = TraceType(0x7000_E000);

    /// E2E half (most significant 16 bits).
    pub fn e2e(self) -> u16 {
        (self.0 >> 16) as u16
    }
    /// HbH half (least significant 16 bits).
    pub fn hbh(self) -> u16 {
        self.0 as u16
    }
}

/// One intermediate hop's data (seed Fig. 2 HbH entry; Table I bits 16-18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HopData {
    /// Node ID (16 bits in the seed encoding, 24 in IOAM).
    pub node_id: u32,
    /// The hop's entry trace type (seed encoding: which HbH bits it filled; IOAM: derived
    /// from the fields that were not all-ones).
    pub entry_trace_type: u16,
    /// Bit 17: the hop's timestamp, ns.
    pub timestamp_ns: Option<u64>,
    /// Bit 16: TX packets for the namespace (16-bit, wrapping).
    pub tx_packets: Option<u16>,
    /// Bit 16: RX packets for the namespace (16-bit, wrapping).
    pub rx_packets: Option<u16>,
    /// Bit 18: TX bytes (32-bit, wrapping).
    pub tx_bytes: Option<u32>,
    /// Bit 18: RX bytes (32-bit, wrapping).
    pub rx_bytes: Option<u32>,
    /// IOAM only (RFC 9197 4.4.2.1): the Hop_Lim the node wrote; not in the seed layout
    /// nor in the compact (0x33) encoding.
    pub hop_limit: Option<u8>,
}

// ---------------------------------------------------------------------------------------
// Fuzzing

/// Fuzz entry: `data` as a seed header, seed option data, hop entry, E2E data and in-band
/// header; parse, iterate and round-trip. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let mut out = [0u8; 2048];
    if let Ok(h) = parse_seed_header(data) {
        let hops: usize = h
            .trace
            .hops()
            .map_while(|r| r.ok())
            .map(|x| x.buffer_len())
            .sum();
        let area = h.trace.hop_area();
        if hops == area.len() {
            let n = emit_seed_header(
                h.next_header,
                h.trace.namespace(),
                h.trace.trace_type(),
                None,
                area,
                h.e2e.as_ref(),
                &mut out,
            );
            if let Ok(n) = n {
                let again = parse_seed_header(&out[..n]).expect("re-parse");
                assert_eq!(again.trace.hop_area(), area);
                assert_eq!(again.e2e, h.e2e);
            }
        }
    }
    if let Ok(t) = SeedTrace::new_checked(data) {
        for hop in t.hops().flatten() {
            let n = hop.emit(&mut out).expect("emit");
            assert_eq!(SeedHopRepr::parse(&out[..n]), Ok((hop, n)));
        }
    }
    if let Ok(e) = SeedE2eRepr::parse(data) {
        let n = e.emit(&mut out).expect("emit");
        assert_eq!(SeedE2eRepr::parse(&out[..n]), Ok(e));
    }
    if let Ok(Some(r)) = find_inband(data) {
        let n = emit_inband_header(0, &r, &mut out).expect("emit");
        assert_eq!(find_inband(&out[..n]), Ok(Some(r)));
    }
    if let Ok((d, _)) = NodeData::parse(data, ioam_trace_type(TraceType(0xffff_ffff))) {
        let _ = node_data_to_hop(&d);
    }
}

#[cfg(test)]
mod tests;
