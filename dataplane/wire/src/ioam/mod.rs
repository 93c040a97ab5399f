//! In situ OAM (IOAM) data fields (RFC 9197) and their IPv6 encapsulation (RFC 9486).
//!
//! An IOAM option travels as an IPv6 option TLV (RFC 9486 section 3), type
//! [`IOAM_HBH`](crate::ipv6option::option_type::IOAM_HBH) (0x31) in a Hop-by-Hop header or
//! [`IOAM_DEST`](crate::ipv6option::option_type::IOAM_DEST) (0x11) in a Destination Options
//! header. Its option data starts with Reserved (8 bits) and the IOAM Option-Type (8 bits,
//! [`option_type`]), followed by the *body*, the IOAM option proper:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Option Type  |  Opt Data Len |   Reserved    |   IOAM-OPT    |  RFC 9486 section 3
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Namespace-ID          |NodeLen  | Flags | RemainingLen|  RFC 9197 section 4.4
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               IOAM-Trace-Type                 |  Reserved     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |            node data list (pre-allocated or incremental)      |
//! ```
//!
//! The IOAM option must be 4n-aligned in its extension header (RFC 9486 section 3; Linux
//! drops it otherwise): [`emit_hbh_with_trace`] puts a 2-byte PadN before it.
//!
//! * [`TraceOption`] / [`TraceRepr`]: the Pre-allocated and Incremental Trace Options
//!   (RFC 9197 section 4.4), with [`TraceOption::entries`] over the filled node data and
//!   [`TraceOption::fill_next`] for a transit node.
//! * [`NodeData`]: one node's data decoded per [`TraceType`] (section 4.4.2).
//! * [`E2eOption`] / [`E2eRepr`]: the Edge-to-Edge Option (section 4.6).
//!
//! The Proof of Transit option (section 4.5) is recognised by its type only.
//!
//! Files: `encap` (the RFC 9486 IPv6 option and header helpers), `node` (trace type and
//! one node's data), `trace` (the trace options), `e2e` (the Edge-to-Edge option).

use crate::ipv6ext::OptionsHeader;
use crate::ipv6option::{self, option_type as ipv6_option_type, MAX_DATA_LEN};
use crate::{be16, be32, put16, put32, Error, Result};
use core::iter::FusedIterator;
use core::ops::Range;

mod e2e;
mod encap;
mod node;
mod trace;

pub use e2e::*;
pub use encap::*;
pub use node::*;
pub use trace::*;

/// IOAM Option-Type values (RFC 9197 section 7.1, "IOAM Option-Type" registry).
pub mod option_type {
    /// Pre-allocated Trace Option (RFC 9197 section 4.4).
    pub const PRE_ALLOCATED_TRACE: u8 = 0;
    /// Incremental Trace Option (RFC 9197 section 4.4).
    pub const INCREMENTAL_TRACE: u8 = 1;
    /// Proof of Transit Option (RFC 9197 section 4.5).
    pub const POT: u8 = 2;
    /// Edge-to-Edge Option (RFC 9197 section 4.6).
    pub const E2E: u8 = 3;
}

/// Bytes before the IOAM body in the IPv6 option: Option Type, Opt Data Len, Reserved,
/// IOAM Option-Type (RFC 9486 section 3).
pub const IPV6_OPTION_HEADER_LEN: usize = 4;

/// Longest IOAM body one IPv6 option can carry (Opt Data Len 255 minus Reserved and
/// IOAM Option-Type).
pub const MAX_BODY_LEN: usize = MAX_DATA_LEN - 2;

/// Length of the trace option header before the node data list (RFC 9197 section 4.4).
pub const TRACE_HEADER_LEN: usize = 8;

/// Length of the E2E option header before its data (RFC 9197 section 4.6).
pub const E2E_HEADER_LEN: usize = 4;

fn be64(b: &[u8]) -> u64 {
    ((be32(b) as u64) << 32) | be32(&b[4..]) as u64
}

fn put64(b: &mut [u8], v: u64) {
    put32(b, (v >> 32) as u32);
    put32(&mut b[4..], v as u32);
}

mod field {
    use core::ops::{Range, RangeFrom};
    // IPv6 option data (RFC 9486 section 3).
    pub const RESERVED: usize = 0;
    pub const OPT_TYPE: usize = 1;
    pub const BODY: RangeFrom<usize> = 2..;
    // Trace option (RFC 9197 section 4.4).
    pub const NAMESPACE: Range<usize> = 0..2;
    pub const LENS_FLAGS: Range<usize> = 2..4;
    pub const TRACE_TYPE: Range<usize> = 4..7;
    pub const TRACE_RESERVED: usize = 7;
    pub const NODE_DATA: RangeFrom<usize> = 8..;
    // E2E option (RFC 9197 section 4.6).
    pub const E2E_TYPE: Range<usize> = 2..4;
    pub const E2E_DATA: RangeFrom<usize> = 4..;
}

// ---------------------------------------------------------------------------------------
// Fuzzing

/// Fuzz entry: `data` as an IOAM option data, a trace body, a node entry, an E2E body and
/// an options header; parse, iterate, fill and round-trip. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    const MAX: usize = 1024;
    if let Ok(o) = IoamOption::new_checked(data) {
        let _ = (o.reserved(), o.ioam_type(), o.body().len());
    }
    if let Some(h) = find_in_header(data, ipv6_option_type::IOAM_HBH)
        .ok()
        .flatten()
    {
        assert!(h.body.end <= data.len() && h.offset < h.body.start);
        let _ = (h.is_aligned(), h.ioam_type);
    }
    if let Ok(t) = TraceOption::new_checked(data) {
        let _ = (
            t.namespace_id(),
            t.overflow(),
            t.loopback(),
            t.active(),
            t.reserved(),
            t.node_len_from_type(),
            t.node_data_len(),
            t.free_space().map(<[u8]>::len),
            t.trace_type().has_undefined(),
        );
        let mut errors = 0;
        for it in [t.entries(), t.entries_incremental()] {
            for e in it.take(MAX) {
                match e {
                    Ok(d) => {
                        let _ = d.available();
                    }
                    Err(_) => errors += 1,
                }
            }
        }
        assert!(errors <= 2);
        let r = TraceRepr::parse(&t).expect("checked trace parses");
        let mut out = [0u8; MAX];
        if r.buffer_len() <= MAX {
            r.emit(&mut out).expect("parsed repr re-emits");
            assert_eq!(&out[..4], &data[..4]);
            assert_eq!(&out[4..7], &data[4..7]);
            let back = TraceRepr::parse(&TraceOption::new_checked(&out[..r.buffer_len()]).unwrap());
            assert_eq!(back, Ok(r));
            // Fill the next entry with the first filled one (or nothing), then read it back.
            out[..data.len()].copy_from_slice(data);
            let node = t.entries().next().and_then(|e| e.ok()).unwrap_or_default();
            let mut w = TraceOption::new_unchecked(&mut out[..data.len()]);
            let before = w.remaining_len();
            match w.fill_next(&node) {
                Ok(()) => {
                    let used = node.entry_len(t.trace_type()) / 4;
                    assert_eq!(w.remaining_len() as usize + used, before as usize);
                    let first = w.entries().next().expect("an entry").expect("parses");
                    let mut a = [0u8; MAX];
                    let mut b = [0u8; MAX];
                    let na = first.emit(t.trace_type(), &mut a).expect("emits");
                    let nb = node.emit(t.trace_type(), &mut b).expect("emits");
                    assert_eq!(&a[..na], &b[..nb]);
                }
                Err(Error::BufferTooSmall) => assert!(w.overflow()),
                Err(_) => assert_eq!(w.remaining_len(), before),
            }
        }
    }
    if data.len() >= 3 {
        let tt = TraceType(u32::from_be_bytes([0, data[0], data[1], data[2]]));
        if let Ok((d, n)) = NodeData::parse(&data[3..], tt) {
            let mut out = [0u8; MAX];
            assert_eq!(n, d.entry_len(tt));
            if n <= MAX {
                assert_eq!(d.emit(tt, &mut out), Ok(n));
                let again = NodeData::parse(&out[..n], tt).expect("re-parses").0;
                assert_eq!(again, d);
                if !tt.has_undefined() {
                    assert_eq!(&out[..n], &data[3..3 + n]);
                }
            }
        }
    }
    if let Ok(o) = E2eOption::new_checked(data) {
        if let Ok(r) = E2eRepr::parse(&o) {
            let mut out = [0u8; 32];
            r.emit(&mut out).expect("fits");
            assert_eq!(&out[..r.buffer_len()], &data[..r.buffer_len()]);
        }
    }
}

#[cfg(test)]
mod tests;
