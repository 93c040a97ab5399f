use super::*;
use peregrine_testkit::frames::gpdu;
use peregrine_wire::checksum;
use peregrine_wire::ethernet::Address as Mac;
use std::net::{Ipv4Addr, Ipv6Addr};

const A4: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 7);
const B4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 9);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 9);

fn eth(et: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    ethernet::Repr {
        src: Mac([2, 0, 0, 0, 0, 1]),
        dst: Mac([2, 0, 0, 0, 0, 2]),
        ethertype: et,
    }
    .emit(&mut f)
    .unwrap();
    f.extend_from_slice(payload);
    f
}

/// UDP (or TCP with a 20-byte header) over IPv4 with `n` payload bytes.
fn v4(proto: u8, sport: u16, dport: u16, body: &[u8]) -> Vec<u8> {
    let l4h = if proto == ip_protocol::TCP { 20 } else { 8 };
    let mut v = vec![0u8; 20 + l4h + body.len()];
    ipv4::Repr {
        src: A4,
        dst: B4,
        protocol: proto,
        payload_len: l4h + body.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident: 1,
        dont_frag: true,
    }
    .emit(&mut v)
    .unwrap();
    ports(&mut v[20..], proto, sport, dport, body);
    v
}

fn ports(l4: &mut [u8], proto: u8, sport: u16, dport: u16, body: &[u8]) {
    l4[0..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&dport.to_be_bytes());
    if proto == ip_protocol::UDP {
        let n = l4.len() as u16;
        l4[4..6].copy_from_slice(&n.to_be_bytes());
        l4[8..].copy_from_slice(body);
    } else if proto == ip_protocol::TCP {
        l4[12] = 5 << 4;
        l4[20..].copy_from_slice(body);
    }
}

/// IPv6 with the extension bytes `ext` (first next header `nh`) before an L4 header.
fn v6(nh: u8, ext: &[u8], proto: u8, sport: u16, dport: u16, body: &[u8]) -> Vec<u8> {
    let l4h = if proto == ip_protocol::TCP { 20 } else { 8 };
    let mut v = vec![0u8; 40 + ext.len() + l4h + body.len()];
    ipv6::Repr {
        src: A6,
        dst: B6,
        next_header: nh,
        payload_len: ext.len() + l4h + body.len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut v)
    .unwrap();
    v[40..40 + ext.len()].copy_from_slice(ext);
    ports(&mut v[40 + ext.len()..], proto, sport, dport, body);
    v
}

/// An IPv6 Fragment header (next header `nh`) with `offset` in 8-byte units.
fn frag_hdr(nh: u8, offset: u16, more: bool) -> [u8; 8] {
    let om = offset << 3 | u16::from(more);
    let [a, b] = om.to_be_bytes();
    [nh, 0, a, b, 0, 0, 0, 42]
}

fn ok(frame: &[u8]) -> PacketMeta {
    let mut m = PacketMeta::EMPTY;
    m.session = 5; // stale: must be reset
    classify(frame, &mut m).expect("classifies");
    m
}

fn err(frame: &[u8]) -> ClassifyError {
    let mut m = PacketMeta::EMPTY;
    let e = classify(frame, &mut m).expect_err("must not classify");
    assert_eq!(m, PacketMeta::EMPTY, "an error leaves the record reset");
    e
}

#[test]
fn ipv4_udp_offsets_flags_and_hash() {
    let f = eth(ethertype::IPV4, &v4(ip_protocol::UDP, 1234, 80, &[0; 10]));
    let m = ok(&f);
    assert_eq!((m.l3_off, m.l4_off), (14, 34));
    assert_eq!((m.inner_l3_off, m.inner_l4_off), (14, 34));
    assert_eq!(m.flags, flags::CLASSIFIED | flags::L4);
    assert_eq!(m.proto, ip_protocol::UDP);
    assert_eq!(m.session, PacketMeta::NO_SESSION);
    let h = flow_hash(
        u128::from(u32::from(A4)),
        u128::from(u32::from(B4)),
        1234,
        80,
        17,
    );
    assert_eq!(m.flow_hash, h);
    assert_ne!(h, 0);
    // Another port, another hash.
    let g = eth(ethertype::IPV4, &v4(ip_protocol::UDP, 1235, 80, &[0; 10]));
    assert_ne!(ok(&g).flow_hash, h);
}

#[test]
fn vlan_tagged_ipv6_tcp_with_extension_headers() {
    // Destination Options (8 bytes of PadN) before TCP.
    let ext = [ip_protocol::TCP, 0, 1, 4, 0, 0, 0, 0];
    let ip = v6(
        ip_protocol::IPV6_OPTS,
        &ext,
        ip_protocol::TCP,
        443,
        5555,
        &[1; 4],
    );
    let mut tagged = vec![0x00, 0x07]; // TCI
    tagged.extend_from_slice(&ethertype::IPV6.to_be_bytes());
    tagged.extend_from_slice(&ip);
    let f = eth(ethertype::VLAN, &tagged);
    let m = ok(&f);
    assert_eq!((m.l3_off, m.l4_off), (18, 18 + 40 + 8));
    assert_eq!(
        m.flags,
        flags::CLASSIFIED | flags::L4 | flags::OUTER_V6 | flags::INNER_V6
    );
    assert_eq!(m.proto, ip_protocol::TCP);
    assert_eq!(
        m.flow_hash,
        flow_hash(u128::from(A6), u128::from(B6), 443, 5555, 6)
    );
}

#[test]
fn gpdu_inner_flow_teid_and_qfi() {
    let inner = v6(ip_protocol::UDP, &[], ip_protocol::UDP, 999, 53, &[7; 20]);
    let g = gpdu(0xabcd, Some(9), &inner);
    let outer = v4(ip_protocol::UDP, 2152, 2152, &g);
    let f = eth(ethertype::IPV4, &outer);
    let m = ok(&f);
    assert!(m.has(flags::CLASSIFIED | flags::GPDU | flags::INNER_V6 | flags::L4 | HAS_QFI));
    assert!(!m.has(flags::OUTER_V6));
    assert_eq!((m.teid, m.qfi), (0xabcd, 9));
    assert_eq!((m.l3_off, m.l4_off), (14, 34));
    // Outer UDP 8, GTP-U 12 with the 4-byte container.
    assert_eq!(m.inner_l3_off, 34 + 8 + 16);
    assert_eq!(m.inner_l4_off, m.inner_l3_off + 40);
    assert_eq!(m.proto, ip_protocol::UDP);
    assert_eq!(
        m.flow_hash,
        flow_hash(u128::from(A6), u128::from(B6), 999, 53, 17)
    );
    // Without a container: no QFI.
    let f = eth(
        ethertype::IPV4,
        &v4(ip_protocol::UDP, 2152, 2152, &gpdu(1, None, &inner)),
    );
    let m = ok(&f);
    assert!(m.has(flags::GPDU) && !m.has(HAS_QFI));
    assert_eq!((m.teid, m.qfi, m.inner_l3_off), (1, 0, 34 + 8 + 8));
}

#[test]
fn gpdu_with_bad_inner_is_the_outer_udp_packet() {
    let g = gpdu(7, None, &[0x45, 0, 0]);
    let f = eth(ethertype::IPV4, &v4(ip_protocol::UDP, 2152, 2152, &g));
    let m = ok(&f);
    assert!(!m.has(flags::GPDU));
    assert_eq!((m.teid, m.inner_l3_off, m.inner_l4_off), (0, 14, 34));
    // An Echo Request is no G-PDU either.
    let mut echo = gpdu(0, None, &[]);
    echo[1] = gtpu::msg_type::ECHO_REQUEST;
    let f = eth(ethertype::IPV4, &v4(ip_protocol::UDP, 2152, 2152, &echo));
    assert!(!ok(&f).has(flags::GPDU));
}

#[test]
fn non_first_fragments_have_no_ports() {
    // IPv6: the bytes after the Fragment header look like ports 1234 -> 80.
    let ip = v6(
        ip_protocol::IPV6_FRAG,
        &frag_hdr(ip_protocol::UDP, 3, false),
        ip_protocol::UDP,
        1234,
        80,
        &[0; 8],
    );
    let m = ok(&eth(ethertype::IPV6, &ip));
    assert!(m.has(flags::FRAGMENT));
    assert!(!m.has(flags::L4) && !m.has(FIRST_FRAGMENT));
    assert_eq!((m.l4_off, m.inner_l4_off), (0, 0));
    assert_eq!(m.proto, ip_protocol::UDP);
    assert_eq!(
        m.flow_hash,
        flow_hash(u128::from(A6), u128::from(B6), 0, 0, 17)
    );
    // The first fragment keeps its ports.
    let ip = v6(
        ip_protocol::IPV6_FRAG,
        &frag_hdr(ip_protocol::UDP, 0, true),
        ip_protocol::UDP,
        1234,
        80,
        &[0; 8],
    );
    let m = ok(&eth(ethertype::IPV6, &ip));
    assert!(m.has(flags::L4 | FIRST_FRAGMENT) && !m.has(flags::FRAGMENT));
    assert_eq!(m.l4_off, 14 + 40 + 8);
    // IPv4 offset != 0.
    let mut ip = v4(ip_protocol::UDP, 1234, 80, &[0; 8]);
    ip[6..8].copy_from_slice(&(0x0002u16).to_be_bytes());
    ipv4::Packet::new_unchecked(&mut ip[..]).fill_checksum();
    let m = ok(&eth(ethertype::IPV4, &ip));
    assert!(m.has(flags::FRAGMENT) && !m.has(flags::L4));
    assert_eq!(m.l4_off, 0);
}

#[test]
fn errors_name_the_upf_reasons() {
    assert_eq!(err(&[0; 10]), ClassifyError::L2Truncated);
    assert_eq!(
        err(&eth(ethertype::ARP, &[0; 28])),
        ClassifyError::UnsupportedEthertype(ethertype::ARP)
    );
    let ip = v4(ip_protocol::UDP, 1, 2, &[0; 4]);
    assert_eq!(
        err(&eth(ethertype::IPV4, &ip[..10])),
        ClassifyError::Ipv4Truncated
    );
    let mut bad = ip.clone();
    bad[8] ^= 1; // TTL: checksum no longer matches
    assert_eq!(
        err(&eth(ethertype::IPV4, &bad)),
        ClassifyError::Ipv4BadChecksum
    );
    let mut bad = ip.clone();
    bad[24..26].copy_from_slice(&3u16.to_be_bytes()); // UDP length 3
    assert_eq!(err(&eth(ethertype::IPV4, &bad)), ClassifyError::L4Malformed);
    assert_eq!(
        err(&eth(ethertype::IPV6, &[0x60, 0, 0])),
        ClassifyError::Ipv6Truncated
    );
    // A Hop-by-Hop header that runs past the payload.
    let ip = v6(0, &[ip_protocol::UDP, 9, 0, 0, 0, 0, 0, 0], 17, 1, 2, &[]);
    assert_eq!(
        err(&eth(ethertype::IPV6, &ip)),
        ClassifyError::Ipv6Malformed
    );
    assert_eq!(ClassifyError::L4Malformed.reason_name(), "l4_malformed");
}

#[test]
fn never_panics_on_prefixes_and_bit_flips() {
    let inner = v4(ip_protocol::TCP, 1, 2, &[3; 30]);
    let frames = [
        eth(
            ethertype::IPV6,
            &v6(
                ip_protocol::UDP,
                &[],
                17,
                2152,
                2152,
                &gpdu(5, Some(1), &inner),
            ),
        ),
        eth(
            ethertype::IPV6,
            &v6(44, &frag_hdr(6, 0, true), 6, 1, 2, &[0; 3]),
        ),
    ];
    let mut m = PacketMeta::EMPTY;
    for f in &frames {
        for n in 0..=f.len() {
            let _ = classify(&f[..n], &mut m);
        }
        for i in 0..f.len() {
            for b in 0..8 {
                let mut g = f.clone();
                g[i] ^= 1 << b;
                if classify(&g, &mut m).is_ok() {
                    let end = g.len() as u16;
                    assert!(m.l4_off <= end && m.inner_l4_off <= end);
                    assert!(m.inner_l3_off >= m.l3_off);
                }
            }
        }
    }
}

#[test]
fn shift_moves_offsets_behind_the_insertion_point() {
    let mut m = PacketMeta {
        l3_off: 14,
        l4_off: 54,
        inner_l3_off: 14,
        inner_l4_off: 54,
        ..PacketMeta::EMPTY
    };
    shift_offsets(&mut m, 54, 24);
    assert_eq!(
        (m.l3_off, m.l4_off, m.inner_l3_off, m.inner_l4_off),
        (14, 78, 14, 78)
    );
    shift_offsets(&mut m, 54, -24);
    assert_eq!((m.l4_off, m.inner_l4_off), (54, 54));
    // 0 means "absent" and stays.
    m.l4_off = 0;
    shift_offsets(&mut m, 0, 8);
    assert_eq!((m.l3_off, m.l4_off), (22, 0));
}

/// Moved from the UPF's own IP parser.
#[test]
fn parse_ip_never_panics_on_prefixes() {
    let mut b = [0u8; 60];
    b[0] = 0x45;
    b[3] = 60;
    b[9] = 17;
    b[24] = 0; // UDP length 0: malformed
    let mut m = PacketMeta::EMPTY;
    for n in 0..b.len() {
        let _ = classify_at(&b[..n], 0, false, &mut m);
        let _ = classify_at(&b[..n], 0, true, &mut m);
    }
}

/// The fast path's templates: every shape it takes, each a frame it must accept.
pub(crate) fn fast_shapes() -> Vec<Vec<u8>> {
    let in4 = v4(ip_protocol::TCP, 40000, 443, &[7; 26]);
    let in6 = v6(ip_protocol::UDP, &[], ip_protocol::UDP, 5353, 53, &[9; 12]);
    let mut icmp4 = v4(ip_protocol::UDP, 0, 0, &[0; 8]);
    icmp4[9] = ip_protocol::ICMP;
    icmp4[10..12].fill(0);
    let c = !checksum::fold(checksum::sum(&icmp4[..20]));
    icmp4[10..12].copy_from_slice(&c.to_be_bytes());
    let icmp6 = v6(
        ip_protocol::IPV6_ICMP,
        &[],
        ip_protocol::IPV6_ICMP,
        0x8000,
        0,
        &[1; 8],
    );
    let mut dl_psc = gpdu(77, Some(5), &in4);
    dl_psc[13] = 0x00; // PDU type 0: DL PDU SESSION INFORMATION
    let mut out = vec![
        eth(ethertype::IPV4, &v4(ip_protocol::UDP, 1000, 2000, &[1; 20])),
        eth(ethertype::IPV4, &in4),
        eth(ethertype::IPV4, &icmp4),
        eth(ethertype::IPV6, &in6),
        eth(ethertype::IPV6, &icmp6),
    ];
    for outer6 in [false, true] {
        for g in [
            gpdu(0x0102_0304, None, &in4),
            gpdu(0x0a0b_0c0d, Some(9), &in6),
            gpdu(5, Some(1), &in4),
            dl_psc.clone(),
        ] {
            out.push(if outer6 {
                eth(
                    ethertype::IPV6,
                    &v6(ip_protocol::UDP, &[], ip_protocol::UDP, 2152, 2152, &g),
                )
            } else {
                eth(ethertype::IPV4, &v4(ip_protocol::UDP, 2152, 2152, &g))
            });
        }
    }
    out
}

/// Every prefix, every single-bit flip and 2,000 seeded random mutations (1-3 bytes set,
/// then up to 3 cut off) of each of [`fast_shapes`], handed to `f`: the frames a fast path
/// must either take and decide as the general path does, or hand over.
pub(crate) fn each_fast_shape_mutation(seed: u64, f: &mut impl FnMut(&[u8])) {
    use peregrine_testkit::rng::{below, seeded};
    let mut rng = seeded(seed);
    for s in fast_shapes() {
        for n in 0..=s.len() {
            f(&s[..n]);
        }
        for i in 0..s.len() {
            for bit in 0..8 {
                let mut g = s.clone();
                g[i] ^= 1 << bit;
                f(&g);
            }
        }
        for _ in 0..2000 {
            let mut g = s.clone();
            for _ in 0..1 + below(&mut rng, 3) {
                let i = below(&mut rng, g.len() as u64) as usize;
                g[i] = below(&mut rng, 256) as u8;
            }
            let cut = g.len() - below(&mut rng, 4) as usize;
            f(&g[..cut]);
        }
    }
}

fn both(
    f: &[u8],
) -> (
    Result<(), ClassifyError>,
    PacketMeta,
    Result<(), ClassifyError>,
    PacketMeta,
) {
    let mut a = PacketMeta {
        session: 3,
        ..PacketMeta::EMPTY
    };
    let mut b = a;
    let ra = classify(f, &mut a);
    let rb = classify_general(f, &mut b);
    (ra, a, rb, b)
}

#[test]
fn fast_path_takes_every_template_shape() {
    for (i, f) in fast_shapes().iter().enumerate() {
        let mut m = PacketMeta::EMPTY;
        assert!(
            fast::classify_fast(f, &mut m),
            "template {i} not on the fast path"
        );
        let (ra, a, rb, b) = both(f);
        assert_eq!((ra, a), (rb, b), "template {i}");
    }
}

/// The fast path gives the general parser's result on every prefix, every single bit flip
/// and seeded random multi-byte mutations of its templates (what it cannot take it hands
/// over; it must never take a frame and decide differently).
#[test]
fn fast_path_agrees_with_general() {
    let mut checked = 0u32;
    let mut fast = 0u32;
    let mut check = |g: &[u8]| {
        let (ra, a, rb, b) = both(g);
        assert_eq!((ra, a), (rb, b), "frame {g:02x?}");
        checked += 1;
        let mut t = PacketMeta::EMPTY;
        fast += u32::from(fast::classify_fast(g, &mut t));
    };
    each_fast_shape_mutation(0x5eed_fa57, &mut check);
    // The comparison is only worth something if both paths ran.
    assert!(
        fast > checked / 20 && fast < checked,
        "fast {fast} of {checked}"
    );
}
