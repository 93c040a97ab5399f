use super::*;
use peregrine_wire::ipv6ext::FragmentRepr;
use std::net::{Ipv4Addr, Ipv6Addr};

const SRC4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const DST4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const S: u64 = 1_000_000_000;

fn src6(i: u16) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 0x10 + i)
}

/// A UDP-looking payload of `n` bytes (an 8-byte header, then a pattern).
fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 13 + i / 255) as u8).collect()
}

/// The IPv4 packet whose fragments the tests send.
fn whole4(data: &[u8], ident: u16) -> Vec<u8> {
    let mut v = vec![0u8; 20 + data.len()];
    ipv4::Repr {
        src: SRC4,
        dst: DST4,
        protocol: ip_protocol::UDP,
        payload_len: data.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident,
        dont_frag: false,
    }
    .emit(&mut v)
    .unwrap();
    v[20..].copy_from_slice(data);
    v
}

fn frag4(src: Ipv4Addr, ident: u16, data: &[u8], off: usize, len: usize, more: bool) -> Vec<u8> {
    let mut v = whole4(&data[off..off + len], ident);
    let mut ip = ipv4::Packet::new_unchecked(&mut v[..]);
    ip.set_src_addr(src);
    ip.set_frag_offset(off as u16);
    ip.set_more_frags(more);
    ip.fill_checksum();
    v
}

/// IPv6 from `src` with a Destination Options header (8 bytes of PadN) before the
/// fragmentable part when `opts`, then `body` (the payload after the chain).
fn whole6(src: Ipv6Addr, opts: bool, body_nh: u8, body: &[u8]) -> Vec<u8> {
    let ext = if opts { 8 } else { 0 };
    let mut v = vec![0u8; 40 + ext + body.len()];
    ipv6::Repr {
        src,
        dst: Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1),
        next_header: if opts {
            ip_protocol::IPV6_OPTS
        } else {
            body_nh
        },
        payload_len: ext + body.len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut v)
    .unwrap();
    if opts {
        v[40..48].copy_from_slice(&[body_nh, 0, 1, 4, 0, 0, 0, 0]);
    }
    v[40 + ext..].copy_from_slice(body);
    v
}

fn frag6(
    src: Ipv6Addr,
    opts: bool,
    ident: u32,
    data: &[u8],
    off: usize,
    len: usize,
    more: bool,
) -> Vec<u8> {
    let mut body = vec![0u8; 8 + len];
    FragmentRepr {
        next_header: ip_protocol::UDP,
        frag_offset: off as u16,
        more_frags: more,
        ident,
    }
    .emit(&mut body)
    .unwrap();
    body[8..].copy_from_slice(&data[off..off + len]);
    whole6(src, opts, ip_protocol::IPV6_FRAG, &body)
}

fn finish(r: &mut Reassembler, o: Outcome) -> Vec<u8> {
    let Outcome::Complete { slot, len } = o else {
        panic!("not complete: {o:?}")
    };
    let mut out = vec![0u8; len];
    r.finish(slot, &mut out);
    out
}

#[test]
fn ipv4_out_of_order_gives_the_datagram_back() {
    let mut r = Reassembler::new(ReasmConfig::default());
    let d = payload(1000);
    let fr = [
        frag4(SRC4, 7, &d, 800, 200, false),
        frag4(SRC4, 7, &d, 0, 400, true),
        frag4(SRC4, 7, &d, 400, 400, true),
    ];
    assert_eq!(r.insert(&fr[0], 0), Ok(Outcome::Held));
    assert_eq!(r.insert(&fr[1], 1), Ok(Outcome::Held));
    let o = r.insert(&fr[2], 2).unwrap();
    let out = finish(&mut r, o);
    assert_eq!(out, whole4(&d, 7));
    assert!(ipv4::Packet::new_checked(&out[..])
        .unwrap()
        .verify_checksum());
    assert_eq!((r.in_flight(), r.held_bytes()), (0, 0));
}

#[test]
fn ipv6_with_an_unfragmentable_header_gives_the_packet_back() {
    for opts in [false, true] {
        let mut r = Reassembler::new(ReasmConfig::default());
        let d = payload(1500);
        let fr = [
            frag6(src6(0), opts, 9, &d, 1232, 268, false),
            frag6(src6(0), opts, 9, &d, 0, 1232, true),
        ];
        assert_eq!(r.insert(&fr[0], 0), Ok(Outcome::Held));
        let o = r.insert(&fr[1], 0).unwrap();
        let out = finish(&mut r, o);
        assert_eq!(
            out,
            whole6(src6(0), opts, ip_protocol::UDP, &d),
            "opts {opts}"
        );
    }
}

#[test]
fn exact_duplicates_are_dropped_alone() {
    for v6 in [false, true] {
        let mut r = Reassembler::new(ReasmConfig::default());
        let d = payload(64);
        let (a, b) = if v6 {
            (
                frag6(src6(0), false, 1, &d, 0, 32, true),
                frag6(src6(0), false, 1, &d, 32, 32, false),
            )
        } else {
            (
                frag4(SRC4, 1, &d, 0, 32, true),
                frag4(SRC4, 1, &d, 32, 32, false),
            )
        };
        assert_eq!(r.insert(&a, 0), Ok(Outcome::Held));
        assert_eq!(r.insert(&a, 0), Err(Refusal::Duplicate));
        assert!(matches!(r.insert(&b, 0), Ok(Outcome::Complete { .. })));
    }
}

#[test]
fn ipv6_overlap_discards_the_datagram_and_its_later_fragments() {
    let cfg = ReasmConfig {
        timeout_ns: S,
        ..ReasmConfig::default()
    };
    let mut r = Reassembler::new(cfg);
    let d = payload(64);
    assert_eq!(
        r.insert(&frag6(src6(0), false, 1, &d, 0, 32, true), 0),
        Ok(Outcome::Held)
    );
    // 24..56 overlaps 0..32: RFC 5722.
    assert_eq!(
        r.insert(&frag6(src6(0), false, 1, &d, 24, 32, true), 0),
        Err(Refusal::Overlap)
    );
    assert_eq!(r.held_bytes(), 0);
    // Same extent, other bytes: not a duplicate, an overlap; the datagram is gone anyway.
    assert_eq!(
        r.insert(&frag6(src6(0), false, 1, &d, 32, 32, false), 1),
        Err(Refusal::Discarded)
    );
    // After the timeout the key starts afresh, and a discarded datagram is no timeout.
    assert_eq!(r.expire(S), 0);
    assert_eq!(r.in_flight(), 0);
    assert_eq!(
        r.insert(&frag6(src6(0), false, 1, &d, 32, 32, false), S),
        Ok(Outcome::Held)
    );
}

#[test]
fn ipv4_overlap_is_copied_over_as_rfc_791_does() {
    let mut r = Reassembler::new(ReasmConfig::default());
    let d = payload(64);
    let mut other = d.clone();
    other[24..32].fill(0xee);
    assert_eq!(
        r.insert(&frag4(SRC4, 2, &d, 0, 32, true), 0),
        Ok(Outcome::Held)
    );
    assert_eq!(
        r.insert(&frag4(SRC4, 2, &other, 24, 16, true), 0),
        Ok(Outcome::Held)
    );
    let o = r.insert(&frag4(SRC4, 2, &d, 40, 24, false), 0).unwrap();
    let out = finish(&mut r, o);
    assert_eq!(out[20..], other[..]);
    assert_eq!(r.overlaps, 1);
}

#[test]
fn malformed_and_tiny_fragments_are_refused() {
    let mut r = Reassembler::new(ReasmConfig::default());
    let d = payload(64);
    // A first fragment without the whole UDP header (RFC 1858 / RFC 7112).
    assert_eq!(
        r.insert(&frag4(SRC4, 3, &d, 0, 4, true), 0),
        Err(Refusal::Tiny)
    );
    assert_eq!(
        r.insert(&frag6(src6(0), false, 3, &d, 0, 4, true), 0),
        Err(Refusal::Tiny)
    );
    // A non-last fragment that is not a multiple of 8 bytes.
    assert_eq!(
        r.insert(&frag4(SRC4, 3, &d, 8, 12, true), 0),
        Err(Refusal::Malformed)
    );
    // Not a fragment, truncated, not IP, IPv6 without a Fragment header, empty data.
    assert_eq!(r.insert(&whole4(&d, 3), 0), Err(Refusal::Malformed));
    assert_eq!(
        r.insert(&frag4(SRC4, 3, &d, 0, 32, true)[..30], 0),
        Err(Refusal::Malformed)
    );
    assert_eq!(r.insert(&[0x50; 40], 0), Err(Refusal::Malformed));
    assert_eq!(r.insert(&[], 0), Err(Refusal::Malformed));
    assert_eq!(
        r.insert(&whole6(src6(0), true, ip_protocol::UDP, &d), 0),
        Err(Refusal::Malformed)
    );
    assert_eq!(
        r.insert(&frag4(SRC4, 3, &d, 8, 0, false), 0),
        Err(Refusal::Malformed)
    );
    // Nothing was held by any of them.
    assert_eq!((r.in_flight(), r.held_bytes()), (0, 0));
}

#[test]
fn timeout_gives_up_an_incomplete_datagram() {
    let mut r = Reassembler::new(ReasmConfig {
        timeout_ns: 2 * S,
        ..ReasmConfig::default()
    });
    let d = payload(64);
    assert_eq!(
        r.insert(&frag4(SRC4, 4, &d, 0, 32, true), 0),
        Ok(Outcome::Held)
    );
    assert_eq!(r.expire(2 * S - 1), 0);
    assert_eq!(r.expire(2 * S), 1);
    assert_eq!((r.in_flight(), r.held_bytes()), (0, 0));
    // The rest arrives too late: held as a new datagram, never completed.
    assert_eq!(
        r.insert(&frag4(SRC4, 4, &d, 32, 32, false), 2 * S),
        Ok(Outcome::Held)
    );
}

#[test]
fn limits_refuse_by_name() {
    let cfg = ReasmConfig {
        max_datagrams: 3,
        max_datagram: 256,
        max_bytes: 200,
        max_per_source: 2,
        timeout_ns: S,
    };
    let d = payload(256);
    let mut r = Reassembler::new(cfg);
    // Per source: the third datagram of one source is refused, another source is not.
    assert_eq!(
        r.insert(&frag4(SRC4, 1, &d, 0, 32, true), 0),
        Ok(Outcome::Held)
    );
    assert_eq!(
        r.insert(&frag4(SRC4, 2, &d, 0, 32, true), 0),
        Ok(Outcome::Held)
    );
    assert_eq!(
        r.insert(&frag4(SRC4, 3, &d, 0, 32, true), 0),
        Err(Refusal::SourceLimit)
    );
    let other = Ipv4Addr::new(192, 0, 2, 11);
    assert_eq!(
        r.insert(&frag4(other, 1, &d, 0, 32, true), 0),
        Ok(Outcome::Held)
    );
    // Every slot busy.
    let third = Ipv4Addr::new(192, 0, 2, 12);
    assert_eq!(
        r.insert(&frag4(third, 1, &d, 0, 32, true), 0),
        Err(Refusal::TableFull)
    );
    // Bytes: 96 held, 200 allowed.
    assert_eq!(
        r.insert(&frag4(other, 1, &d, 32, 104, true), 0),
        Ok(Outcome::Held)
    );
    assert_eq!(
        r.insert(&frag4(other, 1, &d, 136, 8, true), 0),
        Err(Refusal::MemoryFull)
    );
    assert_eq!(r.held_bytes(), 200);
    // Past max_datagram.
    let mut big = frag4(SRC4, 1, &d, 0, 8, false);
    {
        let mut ip = ipv4::Packet::new_unchecked(&mut big[..]);
        ip.set_frag_offset(256);
        ip.fill_checksum();
    }
    assert_eq!(r.insert(&big, 0), Err(Refusal::TooBig));
    // Timeout frees everything.
    assert_eq!(r.expire(S), 3);
    assert_eq!((r.in_flight(), r.held_bytes()), (0, 0));
}

#[test]
fn a_second_different_end_discards_the_datagram() {
    let mut r = Reassembler::new(ReasmConfig::default());
    let d = payload(128);
    assert_eq!(
        r.insert(&frag4(SRC4, 5, &d, 64, 64, false), 0),
        Ok(Outcome::Held)
    );
    assert_eq!(
        r.insert(&frag4(SRC4, 5, &d, 64, 32, false), 0),
        Err(Refusal::TooBig)
    );
    assert_eq!(
        r.insert(&frag4(SRC4, 5, &d, 0, 64, true), 0),
        Err(Refusal::Discarded)
    );
    // Data past an end already known, and an end before data already held.
    let mut r = Reassembler::new(ReasmConfig::default());
    assert_eq!(
        r.insert(&frag4(SRC4, 6, &d, 64, 32, false), 0),
        Ok(Outcome::Held)
    );
    assert_eq!(
        r.insert(&frag4(SRC4, 6, &d, 96, 32, true), 0),
        Err(Refusal::TooBig)
    );
    assert_eq!(
        r.insert(&frag4(SRC4, 7, &d, 64, 32, true), 0),
        Ok(Outcome::Held)
    );
    assert_eq!(
        r.insert(&frag4(SRC4, 7, &d, 32, 8, false), 0),
        Err(Refusal::TooBig)
    );
}

#[test]
fn too_many_fragments_discard_the_datagram() {
    let mut r = Reassembler::new(ReasmConfig::default());
    let d = payload(8 * (MAX_FRAGMENTS + 2));
    for k in 0..MAX_FRAGMENTS {
        assert_eq!(
            r.insert(&frag4(SRC4, 8, &d, 8 * k, 8, true), 0),
            Ok(Outcome::Held)
        );
    }
    assert_eq!(
        r.insert(&frag4(SRC4, 8, &d, 8 * MAX_FRAGMENTS, 8, true), 0),
        Err(Refusal::TooManyFragments)
    );
    assert_eq!(r.held_bytes(), 0);
}

#[test]
fn fuzz_entry_survives_streams() {
    let d = payload(512);
    let mut stream = Vec::new();
    for f in [
        frag4(SRC4, 1, &d, 0, 256, true),
        frag6(src6(1), true, 1, &d, 256, 256, false),
        frag4(SRC4, 1, &d, 256, 256, false),
        frag6(src6(1), true, 1, &d, 0, 256, true),
    ] {
        stream.extend_from_slice(&(f.len() as u16).to_be_bytes());
        stream.push(3);
        stream.extend_from_slice(&f);
    }
    fuzz(&stream);
    let mut rng = 0x1234_5678_u64;
    for _ in 0..2000 {
        let mut v = stream.clone();
        for _ in 0..4 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (rng >> 33) as usize % v.len();
            v[i] = (rng >> 13) as u8;
        }
        fuzz(&v);
    }
}
