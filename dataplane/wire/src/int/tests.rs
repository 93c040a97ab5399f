//! Tests of the INT option formats.

use super::*;
use std::vec;
use std::vec::Vec;

#[test]
fn posix_timestamps_are_microseconds_as_linux_writes_them() {
    let ns = 1_700_000_000_123_456_789u64;
    assert_eq!(TsFormat::Posix.split(ns), (1_700_000_000, 123_456));
    assert_eq!(TsFormat::Ptp.split(ns), (1_700_000_000, 123_456_789));
    assert_eq!(
        TsFormat::Posix.join(1_700_000_000, 123_456),
        Some(1_700_000_000_123_456_000)
    );
    // A POSIX fraction is below 10^6; a PTP one below 10^9.
    assert_eq!(TsFormat::Posix.join(1, 1_000_000), None);
    assert_eq!(TsFormat::Ptp.join(1, 1_000_000), Some(1_001_000_000));
    // A Linux hop's entry read in its format lands in the same microsecond.
    let d = NodeData {
        hop_limit: Some(62),
        node_id: Some(0x42),
        timestamp_secs: Some(1_700_000_000),
        timestamp_frac: Some(123_456),
        ..NodeData::default()
    };
    let h = node_data_to_hop_in(&d, TsFormat::Posix);
    assert_eq!(h.timestamp_ns, Some(1_700_000_000_123_456_000));
    assert_eq!(h.hop_limit, Some(62));
    assert_eq!(h.node_id, 0x42);
    let hop = SeedHopRepr {
        node_id: 7,
        timestamp_ns: Some(ns),
        ..Default::default()
    };
    let tt = ioam::TraceType(
        ioam::TraceType::HOP_LIM_NODE_ID
            | ioam::TraceType::TIMESTAMP_SECS
            | ioam::TraceType::TIMESTAMP_FRAC,
    );
    let back = hop_to_node_data_in(&hop, 9, tt, TsFormat::Posix);
    assert_eq!(back.timestamp_frac, Some(123_456));
}

/// Fig. 2 with the seed experiments' trace type (0x7000E000), one hop, E2E bits 1-3.
#[test]
fn seed_header_vector() {
    let hop = SeedHopRepr {
        node_id: 0x0102,
        packets: Some((0x1111, 0x2222)),
        timestamp_ns: Some(0x0102_0304_0506_0708),
        bytes: Some((0xaabb_ccdd, 0x1122_3344)),
    };
    let e2e = SeedE2eRepr {
        int_counter: None,
        timestamp_ns: Some(0x1000),
        tx_packets: Some(7),
        tx_bytes: Some(0x0500),
    };
    let mut b = [0u8; 64];
    let n = emit_seed_header(
        17,
        0x00ab,
        TraceType::SEED_EXPERIMENTS,
        Some(&hop),
        &[],
        Some(&e2e),
        &mut b,
    )
    .unwrap();
    #[rustfmt::skip]
    let want: &[u8] = &[
        17, 6, 0x01, 0x00,
        0x31, 30, 0x00, 0xab,
        0x70, 0x00, 0xe0, 0x00,
        0x01, 0x02, 0xe0, 0x00,
        0x11, 0x11, 0x22, 0x22,
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
        0xaa, 0xbb, 0xcc, 0xdd, 0x11, 0x22, 0x33, 0x44,
        0x11, 18, 0x70, 0x00,
        0, 0, 0, 0, 0, 0, 0x10, 0x00,
        0, 0, 0, 7, 0, 0, 0x05, 0x00,
    ];
    assert_eq!(&b[..n], want);
    assert_eq!(n % 8, 0);
    // Linux: the 0x31 option must be 4n-aligned.
    assert_eq!(b.iter().position(|&x| x == 0x31), Some(4));
    let h = parse_seed_header(&b[..n]).unwrap();
    assert_eq!(h.next_header, 17);
    assert_eq!(h.trace.namespace(), 0xab);
    assert_eq!(h.trace.trace_type(), TraceType::SEED_EXPERIMENTS);
    let hops: Vec<_> = h.trace.hops().collect();
    assert_eq!(hops, vec![Ok(hop)]);
    assert_eq!(h.e2e, Some(e2e));
}

#[test]
fn stacking_puts_the_new_hop_first_and_keeps_alignment() {
    let a = SeedHopRepr {
        node_id: 1,
        timestamp_ns: Some(5),
        ..Default::default()
    };
    let b_ = SeedHopRepr {
        node_id: 2,
        packets: Some((1, 2)),
        ..Default::default()
    };
    let mut one = [0u8; 64];
    let n1 = emit_seed_header(6, 9, TraceType(0x4000_C000), Some(&a), &[], None, &mut one).unwrap();
    let h1 = parse_seed_header(&one[..n1]).unwrap();
    let mut two = [0u8; 64];
    let n2 = emit_seed_header(
        6,
        9,
        h1.trace.trace_type(),
        Some(&b_),
        h1.trace.hop_area(),
        None,
        &mut two,
    )
    .unwrap();
    let h2 = parse_seed_header(&two[..n2]).unwrap();
    let hops: Vec<_> = h2.trace.hops().map(|h| h.unwrap().node_id).collect();
    assert_eq!(hops, vec![2, 1]);
    assert_eq!(n2 % 8, 0);
}

#[test]
fn malformed_seed_options_are_typed_errors() {
    // Entry trace type with an unallocated bit.
    assert_eq!(
        SeedHopRepr::parse(&[0, 1, 0x10, 0]),
        Err(Error::Unsupported)
    );
    assert_eq!(SeedHopRepr::parse(&[0, 1, 0x80]), Err(Error::Truncated));
    assert_eq!(
        SeedHopRepr::parse(&[0, 1, 0x80, 0, 1]),
        Err(Error::Truncated)
    );
    assert_eq!(SeedE2eRepr::parse(&[0x08, 0]), Err(Error::Unsupported));
    assert_eq!(SeedE2eRepr::parse(&[0x40, 0, 1]), Err(Error::Truncated));
    assert_eq!(SeedE2eRepr::parse(&[0, 0, 1]), Err(Error::Malformed));
    // Header without a 0x31 option.
    assert_eq!(
        parse_seed_header(&[6, 0, 1, 4, 0, 0, 0, 0]).unwrap_err(),
        Error::Malformed
    );
    // Two 0x31 options.
    let two = [6, 1, 0x31, 6, 0, 1, 0, 0, 0, 0, 0x31, 2, 0, 0, 1, 0];
    assert!(parse_seed_header(&two).is_err());
    // Hops too long for one option.
    let hop = SeedHopRepr {
        node_id: 1,
        packets: Some((1, 1)),
        timestamp_ns: Some(1),
        bytes: Some((1, 1)),
    };
    let old = [0u8; 240];
    let mut b = [0u8; 512];
    assert_eq!(
        emit_seed_header(6, 1, TraceType(0xe000), Some(&hop), &old, None, &mut b),
        Err(Error::BufferTooSmall)
    );
}

#[test]
fn inband_request_vector() {
    let payload = [0xa1, 0x61, 0x61, 0x01];
    let r = InBandRepr {
        kind: InBandKind::Request,
        payload: &payload,
    };
    let mut b = [0u8; 16];
    let n = emit_inband_header(17, &r, &mut b).unwrap();
    assert_eq!(&b[..n], &[17, 0, 0x32, 4, 0xa1, 0x61, 0x61, 0x01]);
    assert_eq!(find_inband(&b[..n]), Ok(Some(r)));
    assert_eq!(
        find_inband(&[17, 0, 0x33, 0, 1, 2, 0, 0]),
        Err(Error::Malformed)
    );
    assert_eq!(find_inband(&[17, 0, 1, 4, 0, 0, 0, 0]), Ok(None));
}

#[test]
fn ioam_mapping_round_trips_and_marks_missing_fields_all_ones() {
    let tt = ioam_trace_type(TraceType::SEED_EXPERIMENTS);
    assert_eq!(tt.node_len(), 6);
    let hop = SeedHopRepr {
        node_id: 42,
        packets: Some((3, 4)),
        timestamp_ns: Some(12_000_000_007),
        bytes: Some((100, 200)),
    };
    let mut b = [0u8; 24];
    let d = hop_to_node_data(&hop, 63, tt);
    assert_eq!(d.emit(tt, &mut b).unwrap(), 24);
    let (back, _) = NodeData::parse(&b, tt).unwrap();
    assert_eq!(back.hop_limit, Some(63));
    // IOAM also carries the Hop_Lim, which the seed layout has no field for.
    assert_eq!(
        node_data_to_hop(&back),
        HopData {
            hop_limit: Some(63),
            ..hop.to_hop()
        }
    );
    // A hop that only has its node ID: the rest is all-ones on the wire.
    let bare = SeedHopRepr {
        node_id: 7,
        ..Default::default()
    };
    hop_to_node_data(&bare, 1, tt).emit(tt, &mut b).unwrap();
    assert!(b[4..].iter().all(|&x| x == 0xff));
    let h = node_data_to_hop(&NodeData::parse(&b, tt).unwrap().0);
    assert_eq!(h.node_id, 7);
    assert_eq!(h.entry_trace_type, 0);
    assert_eq!(h.timestamp_ns, None);
}

#[test]
fn fuzz_entry_survives_mutations() {
    let mut b = [0u8; 64];
    let n = emit_seed_header(
        17,
        1,
        TraceType(0xf000_e000),
        Some(&SeedHopRepr {
            node_id: 3,
            packets: Some((1, 2)),
            timestamp_ns: Some(3),
            bytes: Some((4, 5)),
        }),
        &[],
        Some(&SeedE2eRepr {
            int_counter: Some(1),
            timestamp_ns: Some(2),
            tx_packets: Some(3),
            tx_bytes: Some(4),
        }),
        &mut b,
    )
    .unwrap();
    for i in 0..n {
        for v in [0u8, 1, 0x7f, 0x80, 0xff] {
            let mut m = b;
            m[i] = v;
            for end in [n, i + 1, n.saturating_sub(3)] {
                fuzz(&m[..end.min(n)]);
            }
        }
    }
}
