//! Tests of the IOAM module against hand-built headers (RFC 9197, RFC 9486).

use super::*;
use crate::ipv6option::option_type::{IOAM_DEST, IOAM_HBH};
use std::vec::Vec;

const TT_0_3: TraceType = TraceType(
    TraceType::HOP_LIM_NODE_ID
        | TraceType::IF_IDS
        | TraceType::TIMESTAMP_SECS
        | TraceType::TIMESTAMP_FRAC,
);

/// A Hop-by-Hop header built by hand, field by field, from RFC 8200 / RFC 9486 section
/// 3 / RFC 9197 section 4.4: next header UDP, PadN(0), IOAM 0x31 pre-allocated trace,
/// namespace 123, NodeLen 4, flags O, RemainingLen 8 of 16, trace type bits 0-3, and
/// two of four entries filled.
#[rustfmt::skip]
static HBH: [u8; 80] = [
    17, 9,                   // Next Header UDP, Hdr Ext Len 9 (80 bytes)
    0x01, 0x00,              // PadN, 0 data bytes: the IOAM option starts at 4
    0x31, 74,                // IOAM (HbH), Opt Data Len 74
    0x00, 0x00,              // Reserved, IOAM Option-Type 0 (pre-allocated trace)
    0x00, 0x7b,              // Namespace-ID 123
    0b0010_0100, 0b0000_1000,// NodeLen 4 (00100) | Flags 1000 (O) | RemainingLen 8
    0xf0, 0x00, 0x00,        // IOAM-Trace-Type: bits 0, 1, 2, 3
    0x00,                    // Reserved
    // 32 free bytes (RemainingLen 8 units).
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    // Entry of the most recent hop: Hop_Lim 62, node_id 0x0a0b0d; if 0x0102 / 0x0304;
    // seconds 0x11223345; fraction all-ones (not available).
    62, 0x0a, 0x0b, 0x0d, 0x01, 0x02, 0x03, 0x04,
    0x11, 0x22, 0x33, 0x45, 0xff, 0xff, 0xff, 0xff,
    // First hop: Hop_Lim 63, node_id 0x0a0b0c; if 0x0005 / 0x0006; 0x11223344 s,
    // fraction 0x55667788.
    63, 0x0a, 0x0b, 0x0c, 0x00, 0x05, 0x00, 0x06,
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
];

fn hop(hl: u8, id: u32, i: u16, e: u16, s: u32, f: Option<u32>) -> NodeData<'static> {
    NodeData {
        hop_limit: Some(hl),
        node_id: Some(id),
        ingress_if_id: Some(i),
        egress_if_id: Some(e),
        timestamp_secs: Some(s),
        timestamp_frac: f,
        ..NodeData::default()
    }
}

#[test]
fn trace_type_bits_and_node_len() {
    assert_eq!(TraceType::HOP_LIM_NODE_ID, 0x80_0000);
    assert_eq!(TraceType::TIMESTAMP_FRAC, 0x10_0000);
    assert_eq!(TraceType::CHECKSUM_COMPLEMENT, 0x01_0000);
    assert_eq!(TraceType::HOP_LIM_NODE_ID_WIDE, 0x00_8000);
    assert_eq!(TraceType::BUFFER_OCCUPANCY, 0x00_1000);
    assert_eq!(TraceType::OPAQUE_STATE_SNAPSHOT, 0x00_0002);
    assert_eq!(TraceType::RESERVED, 0x00_0001);
    assert_eq!(TraceType::bit(24), 0);
    assert_eq!(TT_0_3.node_len(), 4);
    // Each short field 1 unit, each wide field 2.
    for b in 0..8 {
        assert_eq!(TraceType(TraceType::bit(b)).node_len(), 1, "bit {b}");
    }
    for b in 8..11 {
        assert_eq!(TraceType(TraceType::bit(b)).node_len(), 2, "bit {b}");
    }
    assert_eq!(TraceType(TraceType::bit(11)).node_len(), 1);
    for b in 12..22 {
        assert_eq!(TraceType(TraceType::bit(b)).node_len(), 1, "bit {b}");
        assert!(TraceType(TraceType::bit(b)).has_undefined());
    }
    assert_eq!(TraceType(TraceType::OPAQUE_STATE_SNAPSHOT).node_len(), 0);
    // All defined fixed fields: 9 short + 3 wide.
    assert_eq!(TraceType(0xff_f000).node_len(), 15);
    assert!(!TraceType(0xff_f000).has_undefined());
    assert!(!TT_0_3.has(0));
}

#[test]
fn parse_hand_built_header() {
    let f = find_in_header(&HBH, IOAM_HBH).unwrap().unwrap();
    assert_eq!(
        f,
        Found {
            offset: 4,
            ipv6_option_type: IOAM_HBH,
            ioam_type: option_type::PRE_ALLOCATED_TRACE,
            body: 8..80
        }
    );
    assert!(f.is_aligned());
    assert_eq!(find_in_header(&HBH, IOAM_DEST), Ok(None));
    let o = IoamOption::new_checked(&HBH[6..]).unwrap();
    assert_eq!((o.reserved(), o.ioam_type(), o.body().len()), (0, 0, 72));

    let t = TraceOption::new_checked(&HBH[f.body.clone()]).unwrap();
    assert_eq!(t.namespace_id(), 123);
    assert_eq!(t.node_len(), 4);
    assert_eq!(t.node_len_from_type(), 4);
    assert_eq!(t.node_data_len(), 16);
    assert_eq!(t.flags(), flags::OVERFLOW);
    assert!(t.overflow() && !t.loopback() && !t.active());
    assert_eq!(t.remaining_len(), 8);
    assert_eq!(t.trace_type(), TT_0_3);
    assert_eq!(t.reserved(), 0);
    assert_eq!(t.node_data().len(), 64);
    assert_eq!(t.free_space().unwrap().len(), 32);
    let e: Vec<_> = t.entries().collect::<Result<_>>().unwrap();
    assert_eq!(
        e,
        [
            hop(62, 0x0a0b0d, 0x0102, 0x0304, 0x11223345, Some(u32::MAX)),
            hop(63, 0x0a0b0c, 5, 6, 0x11223344, Some(0x55667788)),
        ]
    );
    assert_eq!(e[0].available().timestamp_frac, None);
    assert_eq!(e[0].available().hop_limit, Some(62));
    assert_eq!(e[1].available(), e[1]);
    // Incremental reading sees the 32 zero bytes as two entries too.
    assert_eq!(t.entries_incremental().count(), 4);

    let r = TraceRepr::parse(&t).unwrap();
    assert_eq!(
        r,
        TraceRepr {
            namespace_id: 123,
            node_len: 4,
            flags: flags::OVERFLOW,
            remaining_len: 8,
            trace_type: TT_0_3,
            data_len: 64
        }
    );
}

#[test]
fn flag_and_length_bit_positions() {
    let mut t = TraceOption::new_unchecked([0u8; 8]);
    t.set_node_len(0x1f);
    assert_eq!(t.clone().into_inner()[2..4], [0xf8, 0x00]);
    t.set_flags(flags::OVERFLOW);
    assert_eq!(t.clone().into_inner()[2..4], [0xfc, 0x00]);
    t.set_flags(flags::LOOPBACK);
    assert_eq!(t.clone().into_inner()[2..4], [0xfa, 0x00]);
    t.set_flags(flags::ACTIVE);
    assert_eq!(t.clone().into_inner()[2..4], [0xf9, 0x00]);
    t.set_flags(0x1);
    assert_eq!(t.clone().into_inner()[2..4], [0xf8, 0x80]);
    t.set_remaining_len(0x7f);
    assert_eq!(t.clone().into_inner()[2..4], [0xf8, 0xff]);
    assert_eq!((t.node_len(), t.flags(), t.remaining_len()), (31, 1, 127));
    t.set_node_len(0);
    t.set_flags(0);
    assert_eq!(t.clone().into_inner()[2..4], [0x00, 0x7f]);
    t.set_overflow(true);
    assert!(t.overflow());
    t.set_overflow(false);
    t.set_remaining_len(0);
    t.set_trace_type(TraceType(0x12_3456));
    t.set_namespace_id(0xabcd);
    assert_eq!(t.into_inner(), [0xab, 0xcd, 0, 0, 0x12, 0x34, 0x56, 0]);
}

#[test]
fn emit_and_fill_reproduce_hand_built_header() {
    let mut r = TraceRepr::pre_allocated(123, TT_0_3, 4).unwrap();
    assert_eq!((r.node_len, r.remaining_len, r.data_len), (4, 16, 64));
    r.flags = flags::OVERFLOW;
    assert_eq!(hbh_with_trace_len(&r), 80);
    let mut buf = [0xeeu8; 96];
    assert_eq!(emit_hbh_with_trace(17, &r, &mut buf), Ok(80));
    assert_eq!(buf[80], 0xee);
    let mut t = TraceOption::new_checked(&mut buf[8..80]).unwrap();
    assert_eq!(t.entries().count(), 0);
    t.fill_next(&hop(63, 0x0a0b0c, 5, 6, 0x11223344, Some(0x55667788)))
        .unwrap();
    assert_eq!(t.remaining_len(), 12);
    t.fill_next(&hop(62, 0x0a0b0d, 0x0102, 0x0304, 0x11223345, None))
        .unwrap();
    assert_eq!(t.remaining_len(), 8);
    assert_eq!(&buf[..80], &HBH[..]);

    // Two more fit; the fifth overflows, leaving everything but the O flag alone.
    let mut t = TraceOption::new_checked(&mut buf[8..80]).unwrap();
    t.set_flags(0);
    t.fill_next(&NodeData::default()).unwrap();
    t.fill_next(&NodeData::default()).unwrap();
    assert_eq!(t.remaining_len(), 0);
    assert!(!t.overflow());
    assert_eq!(&t.node_data()[..16], &[0xff; 16]);
    let before: Vec<u8> = t.node_data().to_vec();
    assert_eq!(
        t.fill_next(&NodeData::default()),
        Err(Error::BufferTooSmall)
    );
    assert!(t.overflow());
    assert_eq!(t.node_data(), &before[..]);
    assert_eq!(t.entries().count(), 4);
}

#[test]
fn fill_rejects_inconsistent_headers() {
    let r = TraceRepr::pre_allocated(1, TT_0_3, 2).unwrap();
    let mut b = [0u8; 40];
    r.emit(&mut b).unwrap();
    let mut t = TraceOption::new_checked(&mut b[..]).unwrap();
    t.set_node_len(3);
    assert_eq!(t.fill_next(&NodeData::default()), Err(Error::Malformed));
    assert_eq!(t.entries().next(), Some(Err(Error::Malformed)));
    t.set_node_len(4);
    t.set_remaining_len(9); // 36 bytes, but there are 32
    assert_eq!(t.fill_next(&NodeData::default()), Err(Error::Malformed));
    assert_eq!(t.free_space(), Err(Error::Malformed));
    assert_eq!(t.entries().collect::<Vec<_>>(), [Err(Error::Malformed)]);
    t.set_remaining_len(8);
    let wide = NodeData {
        node_id: Some(0x100_0000),
        ..NodeData::default()
    };
    assert_eq!(t.fill_next(&wide), Err(Error::Malformed));
    assert_eq!(t.remaining_len(), 8);
    // Trailing bytes that are not a whole entry.
    t.set_remaining_len(1);
    assert_eq!(
        t.entries().collect::<Vec<_>>().last(),
        Some(&Err(Error::Truncated))
    );
    assert_eq!(
        TraceOption::new_checked(&[0u8; 7][..]).unwrap_err(),
        Error::Truncated
    );
}

#[test]
fn repr_builders_reject_bad_sizes() {
    assert_eq!(
        TraceRepr::pre_allocated(1, TraceType(0), 1),
        Err(Error::Malformed)
    );
    assert_eq!(
        TraceRepr::pre_allocated(
            1,
            TraceType(TraceType::OPAQUE_STATE_SNAPSHOT | 0x80_0000),
            1
        ),
        Err(Error::Unsupported)
    );
    // 61 units of data plus the 8-byte header passes 253 bytes.
    assert_eq!(
        TraceRepr::pre_allocated(1, TraceType(0x80_0000), 62),
        Err(Error::Malformed)
    );
    assert!(TraceRepr::pre_allocated(1, TraceType(0x80_0000), 61).is_ok());
    assert_eq!(TraceRepr::incremental(1, TT_0_3, 32), Err(Error::Malformed));
    let inc = TraceRepr::incremental(1, TT_0_3, 31).unwrap();
    assert_eq!((inc.remaining_len, inc.data_len), (124, 0));
    let mut bad = inc;
    bad.flags = 0x10;
    assert_eq!(bad.emit(&mut [0u8; 8]), Err(Error::Malformed));
    assert_eq!(inc.emit(&mut [0u8; 7]), Err(Error::BufferTooSmall));
}

#[test]
fn node_data_every_field() {
    let tt = TraceType(0xff_f000 | TraceType::bit(12) | TraceType::OPAQUE_STATE_SNAPSHOT);
    let opaque = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let d = NodeData {
        hop_limit: Some(1),
        node_id: Some(0x02_0304),
        ingress_if_id: Some(0x0506),
        egress_if_id: Some(0x0708),
        timestamp_secs: Some(0x090a_0b0c),
        timestamp_frac: Some(0x0d0e_0f10),
        transit_delay: Some(0x1112_1314),
        namespace_data: Some(0x1516_1718),
        queue_depth: Some(0x191a_1b1c),
        checksum_complement: Some(0x1d1e_1f20),
        hop_limit_wide: Some(0x21),
        node_id_wide: Some(0x22_2324_2526_2728),
        ingress_if_id_wide: Some(0x292a_2b2c),
        egress_if_id_wide: Some(0x2d2e_2f30),
        namespace_data_wide: Some(0x3132_3334_3536_3738),
        buffer_occupancy: Some(0x393a_3b3c),
        opaque: Some(OpaqueSnapshot {
            schema_id: 0x3d3e3f,
            data: &opaque,
        }),
    };
    // 16 units of fixed fields (15 + one undefined bit), then 4 + 8 bytes of snapshot.
    assert_eq!(d.entry_len(tt), 64 + 12);
    let mut b = [0u8; 76];
    assert_eq!(d.emit(tt, &mut b), Ok(76));
    let mut want: Vec<u8> = (1u8..=0x3c).collect();
    want.extend_from_slice(&[0xff; 4]); // undefined bit 12
    want.extend_from_slice(&[2, 0x3d, 0x3e, 0x3f]); // Length 2, Schema ID
    want.extend_from_slice(&opaque);
    assert_eq!(&b[..], &want[..]);
    assert_eq!(NodeData::parse(&b, tt), Ok((d, 76)));
    assert_eq!(NodeData::parse(&b[..75], tt), Err(Error::Truncated));
    assert_eq!(NodeData::parse(&b[..63], tt), Err(Error::Truncated));
    assert_eq!(d.emit(tt, &mut [0u8; 75]), Err(Error::BufferTooSmall));

    // Nothing set: all-ones everywhere, and an empty snapshot with schema all-ones.
    let none = NodeData::default();
    let mut n = [0u8; 68];
    assert_eq!(none.emit(tt, &mut n), Ok(68));
    assert_eq!(&n[..64], &[0xff; 64]);
    assert_eq!(&n[64..], &[0, 0xff, 0xff, 0xff]);
    let (p, _) = NodeData::parse(&n, tt).unwrap();
    assert_eq!(p.hop_limit, Some(0xff));
    assert_eq!(p.node_id_wide, Some(unavailable::U56));
    assert_eq!(p.available(), NodeData::default());

    let bad = NodeData {
        opaque: Some(OpaqueSnapshot {
            schema_id: 1,
            data: &[1, 2, 3],
        }),
        ..NodeData::default()
    };
    assert_eq!(bad.emit(tt, &mut [0u8; 128]), Err(Error::Malformed));
}

#[test]
fn e2e_option() {
    #[rustfmt::skip]
    let body = [
        0x00, 0x7b,             // Namespace-ID 123
        0b1011_0000, 0x00,      // IOAM-E2E-Type: 64-bit seq, ts seconds, ts fraction
        1, 2, 3, 4, 5, 6, 7, 8, // sequence number
        0, 0, 0, 9,             // seconds
        0, 0, 0, 10,            // fraction
    ];
    let o = E2eOption::new_checked(&body[..]).unwrap();
    assert_eq!((o.namespace_id(), o.e2e_type()), (123, 0xb000));
    let r = E2eRepr::parse(&o).unwrap();
    assert_eq!(
        r,
        E2eRepr {
            namespace_id: 123,
            seq_num_64: Some(0x0102_0304_0506_0708),
            seq_num_32: None,
            timestamp_secs: Some(9),
            timestamp_frac: Some(10),
        }
    );
    assert_eq!(r.buffer_len(), 20);
    let mut out = [0u8; 20];
    r.emit(&mut out).unwrap();
    assert_eq!(out, body);
    assert_eq!(r.emit(&mut [0u8; 19]), Err(Error::BufferTooSmall));
    let o = E2eOption::new_checked(&body[..19]).unwrap();
    assert_eq!(E2eRepr::parse(&o), Err(Error::Truncated));
    let mut odd = body;
    odd[3] = 1;
    let o = E2eOption::new_checked(&odd[..]).unwrap();
    assert_eq!(E2eRepr::parse(&o), Err(Error::Unsupported));
    let seq32 = E2eRepr {
        namespace_id: 7,
        seq_num_32: Some(0xdead_beef),
        ..E2eRepr::default()
    };
    let mut b = [0u8; 8];
    seq32.emit(&mut b).unwrap();
    assert_eq!(b, [0, 7, 0x40, 0, 0xde, 0xad, 0xbe, 0xef]);
    assert!(E2eOption::new_checked(&b[..3]).is_err());
}

#[test]
fn destination_options_with_e2e() {
    let r = E2eRepr {
        namespace_id: 5,
        seq_num_32: Some(77),
        ..E2eRepr::default()
    };
    let mut buf = [0u8; 32];
    let (len, body) =
        emit_header_with_ioam(6, IOAM_DEST, option_type::E2E, r.buffer_len(), &mut buf).unwrap();
    r.emit(&mut buf[body.clone()]).unwrap();
    assert_eq!(len, 16);
    assert_eq!(&buf[..8], &[6, 1, 1, 0, 0x11, 10, 0, 3]);
    let f = find_in_header(&buf[..len], IOAM_DEST).unwrap().unwrap();
    assert_eq!(
        (f.offset, f.ioam_type, &f.body),
        (4, option_type::E2E, &body)
    );
    let back = E2eRepr::parse(&E2eOption::new_checked(&buf[body]).unwrap());
    assert_eq!(back, Ok(r));
    assert_eq!(
        emit_header_with_ioam(6, IOAM_DEST, 3, 254, &mut [0u8; 300]),
        Err(Error::Malformed)
    );
    assert_eq!(
        emit_option_header(IOAM_HBH, 0, 10, &mut [0u8; 3]),
        Err(Error::BufferTooSmall)
    );
}

#[test]
fn find_rejects_short_ioam_option() {
    // IOAM option with 1 data byte, then padding.
    let h = [59, 0, 0x31, 1, 0, 0x01, 0x00, 0x00];
    assert_eq!(find_in_header(&h, IOAM_HBH), Err(Error::Malformed));
    assert_eq!(find_in_header(&h[..7], IOAM_HBH), Err(Error::Truncated));
    // Unaligned IOAM option (Linux drops these).
    let h = [59, 0, 0x31, 4, 0, 0, 0, 0];
    let f = find_in_header(&h, IOAM_HBH).unwrap().unwrap();
    assert!(!f.is_aligned());
    assert_eq!(f.body, 6..8);
}

#[test]
fn fuzz_smoke() {
    let body = &HBH[8..];
    for n in 0..=HBH.len() {
        fuzz(&HBH[..n]);
        fuzz(&HBH[n..]);
    }
    for n in 0..=body.len() {
        fuzz(&body[..n]);
    }
    let mut b = body.to_vec();
    for v in [0u8, 0xff, 0x55] {
        for i in 2..8 {
            b[i] = v;
            fuzz(&b);
        }
    }
    fuzz(&[0xff; 300]);
    fuzz(&[0x00; 300]);
}
