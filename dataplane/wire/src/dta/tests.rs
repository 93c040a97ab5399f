//! Hand-assembled vectors, field by field from the prototype's header definitions.

use super::*;

/// Key-Write, tracked base: opcode 1, seqnum 5, retransmittable, N = 2, key 0xdeadbeef,
/// one data word 0x01020304.
const KW: [u8; 12] = [
    0x01, 0x05, 0x40, 0x02, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04,
];
/// Key-Increment, tracked base: immediate, N = 4, key 7, counter 0x0000_0001_0000_0002.
const KI: [u8; 16] = [
    0x03, 0x00, 0x80, 0x04, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
];
/// Append, plain base: list 3, data 0xcafef00d.
const AP_PLAIN: [u8; 10] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x03, 0xca, 0xfe, 0xf0, 0x0d];
/// Postcarding, tracked base: key 0x11223344, hop 2, data 42.
const PC: [u8; 12] = [
    0x04, 0x09, 0x00, 0x11, 0x22, 0x33, 0x44, 0x02, 0x00, 0x00, 0x00, 0x2a,
];

fn roundtrip(bytes: &[u8], v: Variant) -> Repr {
    let p = Packet::new_checked(bytes, v).expect("checks");
    let r = Repr::parse(&p).expect("parses");
    let mut out = [0u8; 64];
    let n = r.emit(&mut out).expect("emits");
    assert_eq!(&out[..n], bytes);
    r
}

#[test]
fn key_write_vector() {
    let r = roundtrip(&KW, Variant::Tracked);
    assert_eq!(r.seqnum, 5);
    assert!(r.retransmittable && !r.immediate);
    assert_eq!(
        r.primitive,
        Primitive::key_write(2, 0xdead_beef, &[0x0102_0304]).unwrap()
    );
}

#[test]
fn key_write_three_and_seven_words() {
    for k in [3usize, 7] {
        let data: std::vec::Vec<u32> = (1..=k as u32).collect();
        let r = Repr::new(Variant::Tracked, Primitive::key_write(1, 9, &data).unwrap());
        let mut out = [0u8; 64];
        let n = r.emit(&mut out).unwrap();
        assert_eq!(n, 3 + 5 + 4 * k);
        assert_eq!(roundtrip(&out[..n], Variant::Tracked), r);
    }
    assert_eq!(Primitive::key_write(1, 9, &[1, 2]), Err(Error::Malformed));
}

#[test]
fn key_increment_vector() {
    let r = roundtrip(&KI, Variant::Tracked);
    assert!(r.immediate);
    assert_eq!(
        r.primitive,
        Primitive::KeyIncrement {
            redundancy: 4,
            key: 7,
            counter: (1 << 32) | 2
        }
    );
}

#[test]
fn append_plain_vector() {
    let r = roundtrip(&AP_PLAIN, Variant::Plain);
    assert_eq!(
        r.primitive,
        Primitive::Append {
            list: 3,
            data: 0xcafe_f00d
        }
    );
    assert!(!r.retransmittable);
    // The same bytes are no tracked report (one byte short of the sub-header).
    assert_eq!(
        Packet::new_checked(&AP_PLAIN[..], Variant::Tracked).err(),
        Some(Error::Truncated)
    );
}

#[test]
fn postcard_vector() {
    let r = roundtrip(&PC, Variant::Tracked);
    assert_eq!(r.seqnum, 9);
    assert_eq!(
        r.primitive,
        Primitive::Postcard {
            key: 0x1122_3344,
            hop: 2,
            data: 42
        }
    );
}

#[test]
fn bad_lengths_and_opcodes() {
    for n in 0..KW.len() {
        assert_eq!(
            Packet::new_checked(&KW[..n], Variant::Tracked).err(),
            Some(Error::Truncated),
            "len {n}"
        );
    }
    // Two data words: no Key-Write size.
    let mut two = [0u8; 16];
    two[..12].copy_from_slice(&KW);
    assert_eq!(
        Packet::new_checked(&two[..], Variant::Tracked).err(),
        Some(Error::Malformed)
    );
    // Trailing byte after an Append.
    let mut ap = [0u8; 11];
    ap[..10].copy_from_slice(&AP_PLAIN);
    assert_eq!(
        Packet::new_checked(&ap[..], Variant::Plain).err(),
        Some(Error::Malformed)
    );
    for op in [0u8, 5, 0xff] {
        let mut b = PC;
        b[0] = op;
        assert_eq!(
            Packet::new_checked(&b[..], Variant::Tracked).err(),
            Some(Error::Unsupported)
        );
    }
}

#[test]
fn plain_cannot_carry_retransmittable() {
    let r = Repr {
        retransmittable: true,
        ..Repr::new(Variant::Plain, Primitive::Append { list: 0, data: 0 })
    };
    assert_eq!(r.emit(&mut [0u8; 16]), Err(Error::Malformed));
}

#[test]
fn ack_vector() {
    let a = AckRepr::parse(&[0x07, 0x80]).unwrap();
    assert_eq!(
        a,
        AckRepr {
            seqnum: 7,
            nack: true
        }
    );
    let mut out = [0u8; 2];
    AckRepr {
        seqnum: 9,
        nack: false,
    }
    .emit(&mut out)
    .unwrap();
    assert_eq!(out, [9, 0]);
    assert_eq!(AckRepr::parse(&[1]), Err(Error::Truncated));
    assert_eq!(AckRepr::parse(&[1, 0, 0]), Err(Error::Malformed));
}

#[test]
fn frame_checksums_verify() {
    use crate::{ipv4, udp};
    let mut buf = [0u8; 128];
    buf[FRAME_OVERHEAD..FRAME_OVERHEAD + KW.len()].copy_from_slice(&KW);
    let a = FrameAddrs {
        eth_src: crate::ethernet::Address([2, 0, 0, 0, 0, 1]),
        eth_dst: crate::ethernet::Address([2, 0, 0, 0, 0, 2]),
        ip_src: core::net::Ipv4Addr::new(10, 0, 0, 1),
        ip_dst: core::net::Ipv4Addr::new(10, 0, 0, 2),
        src_port: 40041,
        dst_port: UDP_PORT,
    };
    let n = emit_frame(&mut buf, &a, KW.len()).unwrap();
    assert_eq!(n, 14 + 20 + 8 + 12);
    let ip = ipv4::Packet::new_checked(&buf[14..n]).unwrap();
    assert!(ip.verify_checksum());
    let u = udp::Packet::new_checked(&buf[34..n]).unwrap();
    assert!(u.verify_checksum_v4(a.ip_src, a.ip_dst));
    assert_eq!(u.payload(), &KW);
}

#[test]
fn fuzz_vectors() {
    for v in [&KW[..], &KI[..], &AP_PLAIN[..], &PC[..]] {
        for n in 0..=v.len() {
            fuzz(&v[..n]);
        }
    }
}

/// The one-word fast decode agrees with the full parse wherever it answers, and answers
/// for exactly the one-word Key-Write and Key-Increment of either base header.
#[test]
fn parse_one_word_equals_the_full_parse() {
    let plain_kw = [
        0x01, 0x00, 0x03, 0x00, 0x00, 0x00, 0x09, 0xff, 0xff, 0xff, 0xff,
    ];
    let cases: [(&[u8], Variant, bool); 7] = [
        (&KW, Variant::Tracked, true),
        (&KI, Variant::Tracked, true),
        (&plain_kw, Variant::Plain, true),
        (&AP_PLAIN, Variant::Plain, false),
        (&PC, Variant::Tracked, false),
        (&KW[..11], Variant::Tracked, false),
        (&KI[..15], Variant::Tracked, false),
    ];
    for (bytes, v, fast) in cases {
        let got = parse_one_word(bytes, v);
        assert_eq!(got.is_some(), fast, "{bytes:02x?}");
        if let Some((p, nack)) = got {
            let r = Repr::parse(&Packet::new_checked(bytes, v).unwrap()).unwrap();
            assert_eq!(p, r.primitive);
            assert_eq!(nack, r.retransmittable.then_some(r.seqnum));
        }
    }
    assert_eq!(parse_one_word(&[], Variant::Tracked), None);
    assert_eq!(parse_one_word(&KW[..2], Variant::Tracked), None);
}

/// [`decode_fast`] agrees with the full parse wherever it answers, and answers for exactly
/// the one-word Key-Write, Key-Increment, Append and Postcarding of either base header.
#[test]
fn decode_fast_equals_the_full_parse() {
    let kw3 = [
        0x01, 0x00, 0x00, 0x02, 0, 0, 0, 9, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
    ];
    let cases: [(&[u8], Variant, bool); 9] = [
        (&KW, Variant::Tracked, true),
        (&KI, Variant::Tracked, true),
        (&AP_PLAIN, Variant::Plain, true),
        (&PC, Variant::Tracked, true),
        (&kw3, Variant::Tracked, false),
        (&KW[..11], Variant::Tracked, false),
        (&KI[..15], Variant::Tracked, false),
        (&PC[..11], Variant::Tracked, false),
        (
            &[0x05, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            Variant::Tracked,
            false,
        ),
    ];
    for (bytes, v, fast) in cases {
        let got = decode_fast(bytes, v.base_len());
        assert_eq!(got.is_some(), fast, "{bytes:02x?}");
        let Some(f) = got else { continue };
        let r = Repr::parse(&Packet::new_checked(bytes, v).unwrap()).unwrap();
        assert!(
            !matches!(r.primitive, Primitive::KeyWrite { words, .. } if words != 1),
            "{bytes:02x?}"
        );
        let want = Fast::first_word(&r.primitive);
        assert_eq!(f, want, "{bytes:02x?}");
    }
    assert_eq!(decode_fast(&[], 3), None);
}
