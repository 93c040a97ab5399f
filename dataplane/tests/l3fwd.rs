//! The l3fwd stage on real frames built with the wire crate: what leaves is a correctly
//! forwarded packet (TTL/hop limit, checksum, MACs), and every other case has its reason.

use peregrine_dataplane::runtime::{Batch, Context, Disposition, Publisher, Reasons, Stage};
use peregrine_dataplane::stages::l3fwd::{L3Fwd, NextHop, RouteTable};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_wire::ethernet::{self, ethertype, Address as Mac};
use peregrine_wire::{ipv4, ipv6, udp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const PORT0_MAC: Mac = Mac([2, 0, 0, 0, 0, 3]);
const PORT1_MAC: Mac = Mac([2, 0, 0, 0, 0, 6]);
const NH_MAC: Mac = Mac([2, 0, 0, 0, 6, 1]);

fn v4_frame(dst_mac: Mac, dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    let payload = 18;
    let mut f = vec![0u8; 14 + 20 + 8 + payload];
    ethernet::Repr {
        src: Mac([2, 0, 0, 0, 3, 1]),
        dst: dst_mac,
        ethertype: ethertype::IPV4,
    }
    .emit(&mut f)
    .unwrap();
    let ip = ipv4::Repr {
        src: Ipv4Addr::new(192, 0, 2, 10),
        dst,
        protocol: ipv4::ip_protocol::UDP,
        payload_len: 8 + payload,
        ttl,
        dscp_ecn: 0,
        ident: 7,
        dont_frag: true,
    };
    ip.emit(&mut f[14..]).unwrap();
    udp::Repr {
        src_port: 1000,
        dst_port: 2000,
        payload_len: payload,
    }
    .emit(&mut f[34..])
    .unwrap();
    udp::Packet::new_unchecked(&mut f[34..]).fill_checksum_v4(ip.src, dst);
    f
}

fn v6_frame(dst: Ipv6Addr, hop_limit: u8) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40 + 8];
    ethernet::Repr {
        src: Mac([2, 0, 0, 0, 3, 1]),
        dst: PORT0_MAC,
        ethertype: ethertype::IPV6,
    }
    .emit(&mut f)
    .unwrap();
    ipv6::Repr {
        src: "2001:db8:3::10".parse().unwrap(),
        dst,
        next_header: ipv6::ip_protocol::UDP,
        payload_len: 8,
        hop_limit,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut f[14..])
    .unwrap();
    udp::Repr {
        src_port: 1,
        dst_port: 2,
        payload_len: 0,
    }
    .emit(&mut f[54..])
    .unwrap();
    f
}

struct Fixture {
    stage: L3Fwd,
    reasons: Reasons,
}

fn fixture() -> Fixture {
    let mut t = RouteTable::default();
    let nh = NextHop {
        port: 1,
        mac: NH_MAC,
    };
    t.insert(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)), 24, nh);
    t.insert(IpAddr::V6("2001:db8:6::".parse().unwrap()), 48, nh);
    let p = Publisher::new(t);
    let mut reasons = Reasons::new();
    let stage = L3Fwd::new(p.reader(), vec![PORT0_MAC, PORT1_MAC], false, &mut reasons);
    Fixture { stage, reasons }
}

fn run(fx: &mut Fixture, frames: &[Vec<u8>]) -> (Vec<Disposition>, Vec<Vec<u8>>) {
    let mut b: Batch<OwnedBuf> = Batch::new();
    for f in frames {
        b.pkts.push(OwnedBuf::from_slice(f));
    }
    b.rx_port = 0;
    b.reset_dispositions();
    fx.stage.process(&mut b, &Context::fixed(0, 0));
    (
        b.dispositions().collect(),
        b.pkts.iter().map(|p| p.data().to_vec()).collect(),
    )
}

fn reason(fx: &mut Fixture, name: &'static str) -> Disposition {
    Disposition::drop_as(fx.reasons.register(name))
}

#[test]
fn forwards_ipv4_with_ttl_checksum_and_macs_rewritten() {
    let mut fx = fixture();
    let input = v4_frame(PORT0_MAC, Ipv4Addr::new(198, 51, 100, 7), 64);
    let (d, out) = run(&mut fx, std::slice::from_ref(&input));
    assert_eq!(d[0], Disposition::tx(1));
    let eth = ethernet::Frame::new_checked(&out[0][..]).unwrap();
    assert_eq!(eth.dst_addr(), NH_MAC);
    assert_eq!(eth.src_addr(), PORT1_MAC);
    let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
    assert_eq!(ip.ttl(), 63);
    assert!(ip.verify_checksum(), "incremental checksum update is valid");
    let u = udp::Packet::new_checked(ip.payload()).unwrap();
    assert!(
        u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()),
        "L4 untouched and still valid"
    );
    assert_eq!(&out[0][34..], &input[34..], "payload untouched");
}

#[test]
fn forwards_ipv6_and_decrements_hop_limit() {
    let mut fx = fixture();
    let (d, out) = run(&mut fx, &[v6_frame("2001:db8:6::99".parse().unwrap(), 2)]);
    assert_eq!(d[0], Disposition::tx(1));
    let ip = ipv6::Packet::new_checked(&out[0][14..]).unwrap();
    assert_eq!(ip.hop_limit(), 1);
}

#[test]
fn every_bad_case_has_its_reason() {
    let mut fx = fixture();
    let good = v4_frame(PORT0_MAC, Ipv4Addr::new(198, 51, 100, 7), 64);
    let mut bad_csum = good.clone();
    bad_csum[24] ^= 0x01;
    let mut bad_ver = good.clone();
    bad_ver[14] = 0x55;
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
    let mut lldp = good.clone();
    lldp[12..14].copy_from_slice(&0x88ccu16.to_be_bytes());
    let cases = vec![
        (good[..10].to_vec(), reason(&mut fx, "l2_truncated")),
        (
            v4_frame(Mac([2, 9, 9, 9, 9, 9]), Ipv4Addr::new(198, 51, 100, 7), 64),
            reason(&mut fx, "l2_not_for_us"),
        ),
        (good[..14 + 12].to_vec(), reason(&mut fx, "ipv4_truncated")),
        (bad_ver, reason(&mut fx, "ipv4_malformed")),
        (bad_csum, reason(&mut fx, "ipv4_bad_checksum")),
        (
            v4_frame(PORT0_MAC, Ipv4Addr::new(198, 51, 100, 7), 1),
            reason(&mut fx, "ttl_exceeded"),
        ),
        (
            v4_frame(PORT0_MAC, Ipv4Addr::new(203, 0, 113, 1), 64),
            reason(&mut fx, "no_route"),
        ),
        (
            v6_frame("2001:db8:7::1".parse().unwrap(), 64),
            reason(&mut fx, "no_route"),
        ),
        (
            v6_frame("2001:db8:6::1".parse().unwrap(), 1),
            reason(&mut fx, "ttl_exceeded"),
        ),
        (
            v6_frame("2001:db8:6::1".parse().unwrap(), 64)[..14 + 30].to_vec(),
            reason(&mut fx, "ipv6_truncated"),
        ),
        (lldp, reason(&mut fx, "unsupported_ethertype")),
        (arp, Disposition::TO_CONTROL),
        (
            v4_frame(Mac::BROADCAST, Ipv4Addr::new(198, 51, 100, 7), 64),
            Disposition::TO_CONTROL,
        ),
        (
            v6_frame("ff02::1:ff00:1".parse().unwrap(), 255),
            Disposition::TO_CONTROL,
        ),
    ];
    let frames: Vec<_> = cases.iter().map(|(f, _)| f.clone()).collect();
    let (d, _) = run(&mut fx, &frames);
    for (i, (_, want)) in cases.iter().enumerate() {
        assert_eq!(d[i], *want, "case {i}");
    }
}

#[test]
fn route_updates_reach_the_stage_by_snapshot() {
    let mut t = RouteTable::default();
    t.insert(
        IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)),
        24,
        NextHop {
            port: 1,
            mac: NH_MAC,
        },
    );
    let p = Publisher::new(t.clone());
    let mut reasons = Reasons::new();
    let mut fx = Fixture {
        stage: L3Fwd::new(p.reader(), vec![PORT0_MAC, PORT1_MAC], false, &mut reasons),
        reasons,
    };
    let f = v4_frame(PORT0_MAC, Ipv4Addr::new(203, 0, 113, 5), 64);
    let no_route = reason(&mut fx, "no_route");
    assert_eq!(run(&mut fx, std::slice::from_ref(&f)).0[0], no_route);
    t.insert(
        IpAddr::V4(Ipv4Addr::new(203, 0, 113, 0)),
        24,
        NextHop {
            port: 0,
            mac: NH_MAC,
        },
    );
    let g = p.publish(t);
    assert_eq!(run(&mut fx, &[f]).0[0], Disposition::tx(0));
    assert!(p.all_seen(g));
}

/// A route whose gateway is not resolved yet drops as `next_hop_unresolved`, frame intact;
/// once the control side publishes the MAC the same route forwards to it.
#[test]
fn unresolved_next_hop_drops_with_its_reason_until_the_mac_is_published() {
    let mut t = RouteTable::default();
    let net = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0));
    let unresolved = NextHop {
        port: 1,
        mac: NextHop::UNRESOLVED,
    };
    assert!(!unresolved.is_resolved());
    t.insert(net, 24, unresolved);
    let p = Publisher::new(t.clone());
    let mut reasons = Reasons::new();
    let mut fx = Fixture {
        stage: L3Fwd::new(p.reader(), vec![PORT0_MAC, PORT1_MAC], false, &mut reasons),
        reasons,
    };
    let f = v4_frame(PORT0_MAC, Ipv4Addr::new(198, 51, 100, 7), 64);
    let want = reason(&mut fx, "next_hop_unresolved");
    let (d, out) = run(&mut fx, std::slice::from_ref(&f));
    assert_eq!(d[0], want);
    assert_eq!(out[0], f);
    t.insert(
        net,
        24,
        NextHop {
            port: 1,
            mac: NH_MAC,
        },
    );
    p.publish(t);
    let (d, out) = run(&mut fx, &[f]);
    assert_eq!(d[0], Disposition::tx(1));
    assert_eq!(&out[0][..6], &NH_MAC.0);
}
