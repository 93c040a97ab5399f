use super::*;
use crate::classify::classify;
use peregrine_testkit::frames::{eth, gpdu, ip_packet, ip_udp, DST_MAC, SRC_MAC};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const ALL: u8 = 0x1f;
const UE: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const SRV: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9));

/// An Ethernet/IP/TCP frame with `payload` bytes.
fn tcp(
    src: IpAddr,
    dst: IpAddr,
    ports: (u16, u16),
    seq: u32,
    ack: u32,
    fl: u8,
    payload: usize,
) -> Vec<u8> {
    let mut ip = ip_packet(src, dst, 6, ports, payload, 64);
    let l4 = if src.is_ipv4() { 20 } else { 40 };
    ip[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
    ip[l4 + 8..l4 + 12].copy_from_slice(&ack.to_be_bytes());
    ip[l4 + 13] = fl;
    eth(DST_MAC, SRC_MAC, &ip)
}

fn look(f: &[u8]) -> Result<Vec<Role>, Skip> {
    let mut m = PacketMeta::EMPTY;
    let _ = classify(f, &mut m);
    roles(f, &m, ALL).map(|r| r.iter().collect())
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

#[test]
fn syn_pairs_with_syn_ack_only_on_seq_plus_one() {
    let syn = look(&tcp(UE, SRV, (40000, 443), 1000, 0, SYN, 0)).unwrap();
    assert_eq!(syn.len(), 1);
    assert_eq!((syn[0].kind, syn[0].request), (Kind::TcpHandshake, true));
    let sa = look(&tcp(SRV, UE, (443, 40000), 5000, 1001, SYN | ACK, 0)).unwrap();
    let hs: Vec<_> = sa.iter().filter(|r| r.kind == Kind::TcpHandshake).collect();
    assert_eq!(hs.len(), 1);
    assert!(!hs[0].request);
    assert_eq!(hs[0].id, syn[0].id);
    // The SYN-ACK is also a tcp_data request (its SYN takes one sequence number): the UE's
    // ACK 5001 answers it (the handshake leg towards the UE).
    let d: Vec<_> = sa.iter().filter(|r| r.kind == Kind::TcpData).collect();
    assert!(d[0].request);
    let ack = look(&tcp(UE, SRV, (40000, 443), 1001, 5001, ACK, 0)).unwrap();
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].id, d[0].id);
    // A SYN-ACK for another sequence, or other ports, pairs with nothing.
    let wrong = look(&tcp(SRV, UE, (443, 40000), 5000, 1002, SYN | ACK, 0)).unwrap();
    assert_ne!(wrong[0].id, syn[0].id);
    let other = look(&tcp(SRV, UE, (443, 40001), 5000, 1001, SYN | ACK, 0)).unwrap();
    assert_ne!(other[0].id, syn[0].id);
    assert_eq!(syn[0].ports, [40000, 443]);
    assert_eq!(hs[0].ports, [443, 40000]);
}

#[test]
fn cumulative_ack_matches_the_latest_covered_segment_only() {
    let s1 = look(&tcp(SRV, UE, (443, 40000), 100, 7, ACK | PSH, 1000)).unwrap();
    let s2 = look(&tcp(SRV, UE, (443, 40000), 1100, 7, ACK | PSH, 500)).unwrap();
    let req = |v: &[Role]| v.iter().find(|r| r.request).copied().unwrap();
    let ack = look(&tcp(UE, SRV, (40000, 443), 7, 1600, ACK, 0)).unwrap();
    assert_eq!(ack.len(), 1);
    assert!(!ack[0].request);
    assert_eq!(ack[0].id, req(&s2).id, "ACK 1600 = 1100 + 500");
    assert_ne!(ack[0].id, req(&s1).id, "the first segment stays unanswered");
    // A data segment with an ACK plays both roles.
    assert_eq!(s1.len(), 2);
    assert!(!s1[1].request);
    // A pure ACK requests nothing; a RST plays no role.
    assert!(look(&tcp(UE, SRV, (1, 2), 0, 0, 0x04, 0)).is_err());
}

#[test]
fn uplink_gpdu_request_pairs_with_plain_downlink_response() {
    let inner = ip_packet(UE, SRV, 6, (40000, 443), 0, 64);
    let mut syn_ip = inner.clone();
    syn_ip[20 + 4..20 + 8].copy_from_slice(&99u32.to_be_bytes());
    syn_ip[20 + 13] = SYN;
    let g = gpdu(0x1234, Some(9), &syn_ip);
    let gnb = IpAddr::V4(Ipv4Addr::new(172, 16, 0, 2));
    let upf = IpAddr::V4(Ipv4Addr::new(172, 16, 0, 1));
    let frame = eth(DST_MAC, SRC_MAC, &ip_udp(gnb, upf, 2152, 2152, &g));
    let up = look(&frame).unwrap();
    let down = look(&tcp(SRV, UE, (443, 40000), 1, 100, SYN | ACK, 0)).unwrap();
    assert!(up[0].request);
    assert_eq!(up[0].id, down[0].id);
}

fn dns(src: IpAddr, dst: IpAddr, ports: (u16, u16), id: u16, qr: bool, len: usize) -> Vec<u8> {
    let mut body = vec![0u8; len];
    if len >= 3 {
        body[..2].copy_from_slice(&id.to_be_bytes());
        body[2] = if qr { 0x81 } else { 0x01 };
    }
    eth(DST_MAC, SRC_MAC, &ip_udp(src, dst, ports.0, ports.1, &body))
}

#[test]
fn dns_query_pairs_with_response_by_id_v6() {
    let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let r = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 53));
    let q = look(&dns(a, r, (5353, 53), 0xbeef, false, 30)).unwrap();
    let resp = look(&dns(r, a, (53, 5353), 0xbeef, true, 60)).unwrap();
    assert_eq!(
        (q[0].kind, q[0].request, resp[0].request),
        (Kind::Dns, true, false)
    );
    assert_eq!(q[0].id, resp[0].id);
    let other = look(&dns(r, a, (53, 5353), 0xbeee, true, 60)).unwrap();
    assert_ne!(other[0].id, q[0].id);
    assert_eq!(
        look(&dns(a, r, (5353, 53), 1, false, 11)),
        Err(Skip::TruncatedDns)
    );
    // A "response" to port 53 is no pair.
    assert_eq!(look(&dns(a, r, (5353, 53), 1, true, 30)), Err(Skip::Other));
}

#[test]
fn icmp_echo_pairs_by_ident_and_sequence() {
    let mut req = ip_packet(UE, SRV, 1, (0, 0), 8, 64);
    req[20] = 8;
    req[24..28].copy_from_slice(&[0x12, 0x34, 0, 7]);
    let mut rep = ip_packet(SRV, UE, 1, (0, 0), 8, 64);
    rep[20] = 0;
    rep[24..28].copy_from_slice(&[0x12, 0x34, 0, 7]);
    let a = look(&eth(DST_MAC, SRC_MAC, &req)).unwrap();
    let b = look(&eth(DST_MAC, SRC_MAC, &rep)).unwrap();
    assert_eq!(
        (a[0].kind, a[0].request, b[0].request),
        (Kind::IcmpEcho, true, false)
    );
    assert_eq!(a[0].id, b[0].id);
}

#[test]
fn gtp_echo_pairs_per_peer_by_sequence() {
    let gnb = IpAddr::V4(Ipv4Addr::new(172, 16, 0, 2));
    let upf = IpAddr::V4(Ipv4Addr::new(172, 16, 0, 1));
    let echo = |src, dst, ty: u8, seq: u16| {
        // Flags 0x32: version 1, PT, S. Length 4 (seq, N-PDU, next ext), TEID 0.
        let mut g = vec![0x32, ty, 0, 4, 0, 0, 0, 0];
        g.extend_from_slice(&seq.to_be_bytes());
        g.extend_from_slice(&[0, 0]);
        eth(DST_MAC, SRC_MAC, &ip_udp(src, dst, 2152, 2152, &g))
    };
    let a = look(&echo(upf, gnb, 1, 77)).unwrap();
    let b = look(&echo(gnb, upf, 2, 77)).unwrap();
    assert_eq!(
        (a[0].kind, a[0].request, b[0].request),
        (Kind::GtpEcho, true, false)
    );
    assert_eq!(a[0].id, b[0].id);
    let other_peer = IpAddr::V4(Ipv4Addr::new(172, 16, 0, 3));
    assert_ne!(look(&echo(other_peer, upf, 2, 77)).unwrap()[0].id, a[0].id);
    let mut cut = echo(upf, gnb, 1, 77);
    cut.truncate(cut.len() - 4);
    // The GTP-U header is cut before its sequence number.
    let mut m = PacketMeta::EMPTY;
    let _ = classify(&cut, &mut m);
    assert!(roles(&cut, &m, ALL).is_err());
}

#[test]
fn truncated_and_odd_packets_are_named() {
    let mut f = tcp(UE, SRV, (1, 2), 0, 0, SYN, 0);
    f.truncate(14 + 20 + 10);
    assert_eq!(look(&f), Err(Skip::TruncatedTcp));
    assert_eq!(look(&[0u8; 10]), Err(Skip::Unclassified));
    // Kinds not enabled: other.
    let syn = tcp(UE, SRV, (40000, 443), 1000, 0, SYN, 0);
    let mut m = PacketMeta::EMPTY;
    classify(&syn, &mut m).unwrap();
    assert_eq!(roles(&syn, &m, Kind::Dns.bit()), Err(Skip::Other));
    // An unclassified record: no parse of stale offsets, only a look at the IP protocol.
    let udp = eth(DST_MAC, SRC_MAC, &ip_udp(UE, SRV, 1, 2, &[0; 4]));
    assert_eq!(
        roles(&udp, &PacketMeta::EMPTY, ALL),
        Err(Skip::Unclassified)
    );
    // Garbage at every length never panics.
    for n in 0..syn.len() {
        let mut m = PacketMeta::EMPTY;
        let _ = classify(&syn[..n], &mut m);
        let _ = roles(&syn[..n], &m, ALL);
    }
}

#[test]
fn pair_ids_separate_every_field() {
    let base = pair_id(Kind::Dns, 1, 2, 3, 4);
    let variants = [
        pair_id(Kind::IcmpEcho, 1, 2, 3, 4),
        pair_id(Kind::Dns, 2, 1, 3, 4),
        pair_id(Kind::Dns, 1 << 64 | 1, 2, 3, 4),
        pair_id(Kind::Dns, 1, 2 | 1 << 100, 3, 4),
        pair_id(Kind::Dns, 1, 2, 3 << 16, 4),
        pair_id(Kind::Dns, 1, 2, 3, 5),
    ];
    for v in variants {
        assert_ne!(v, base);
    }
    // No collisions over a few hundred thousand neighbouring DNS IDs and ports.
    let mut seen = std::collections::HashSet::new();
    for port in 0..64u32 {
        for id in 0..4096u64 {
            assert!(seen.insert(pair_id(
                Kind::Dns,
                0x0a00_0001,
                0xc000_0209,
                port << 16 | 53,
                id
            )));
        }
    }
}

/// `plain_dns` is `single_role` (DNS among the kinds, no GTP-U echo) on every record of the
/// two shapes it is called for: queries, responses, other ports, DNS headers cut short, IP
/// lengths short of the DNS header behind a padded frame, and every prefix of those frames.
#[test]
fn plain_dns_is_single_role_on_its_shapes() {
    let gnb = IpAddr::V4(Ipv4Addr::new(172, 16, 0, 2));
    let upf = IpAddr::V4(Ipv4Addr::new(172, 16, 0, 1));
    let mut frames = Vec::new();
    for (ports, qr) in [
        ((40000, 53), false),
        ((53, 40000), true),
        ((40000, 53), true),
        ((53, 40000), false),
        ((53, 53), true),
        ((53, 53), false),
        ((40000, 5353), false),
        ((1, 2), true),
    ] {
        for len in [0, 3, 11, 12, 30] {
            let up = dns(UE, SRV, ports, 0xbeef, qr, len);
            // The IP length short of the DNS header, the frame padded past it.
            let mut short = up.clone();
            let tot = u16::from_be_bytes([short[16], short[17]]);
            short[16..18].copy_from_slice(&(tot.saturating_sub(4)).to_be_bytes());
            // Downlink: the same datagram in a G-PDU with a PDU Session Container.
            let inner = up[14..].to_vec();
            let down = eth(
                DST_MAC,
                SRC_MAC,
                &ip_udp(upf, gnb, 2152, 2152, &gpdu(7, Some(9), &inner)),
            );
            let mut down_short = down.clone();
            let at = GTPU_L3 + 2;
            let tot = u16::from_be_bytes([down_short[at], down_short[at + 1]]);
            down_short[at..at + 2].copy_from_slice(&(tot.saturating_sub(4)).to_be_bytes());
            frames.extend([up, short, down, down_short]);
        }
    }
    let (mut hits, mut roles_seen) = ([0usize; 2], 0usize);
    for f in &frames {
        for n in 0..=f.len() {
            let d = &f[..n];
            let mut m = PacketMeta::EMPTY;
            let _ = classify(d, &mut m);
            for (down, dir, word) in [
                (false, crate::meta::Direction::Uplink, PLAIN_UPLINK_UDP),
                (true, crate::meta::Direction::Downlink, GTPU_DOWNLINK_UDP),
            ] {
                m.dir = dir as u8;
                if record_word(&m) != word {
                    continue;
                }
                hits[usize::from(down)] += 1;
                let (mut a, mut b) = (Roles::default(), Roles::default());
                let general = single_role(d, &m, Kind::Dns.bit(), &mut a);
                let plain = plain_dns(d, down, &mut b);
                assert_eq!(
                    general.map(|_| ()),
                    plain,
                    "frame of {n} bytes, down {down}"
                );
                assert_eq!(a, b, "frame of {n} bytes, down {down}");
                roles_seen += a.len();
            }
        }
    }
    // Both shapes were met: every whole uplink frame, short IP length too; every whole
    // downlink frame (the classifier refuses a G-PDU whose inner IP length is short of the
    // GTP-U payload, so those never have the shape); and some of them played a role.
    assert_eq!(hits, [80, 40]);
    assert!(roles_seen > 0);
}

/// The record words are the fields side by side, as `record_word` reads them.
#[test]
fn record_word_layout() {
    let m = PacketMeta {
        inner_l3_off: 0x0102,
        inner_l4_off: 0x0304,
        flags: 0x0506,
        proto: 0x07,
        dir: 0x08,
        ..PacketMeta::EMPTY
    };
    assert_eq!(record_word(&m), 0x0807_0506_0304_0102);
}
