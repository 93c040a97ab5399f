use super::*;
use peregrine_wire::{arp, ethernet, icmpv6, ipv6};

const OURS: Mac = Mac([2, 0, 0, 0, 0, 3]);
const GW: Mac = Mac([2, 0, 0, 0, 3, 1]);
const GW2: Mac = Mac([2, 0, 0, 0, 3, 2]);

fn timers() -> NeighbourSection {
    NeighbourSection {
        reachable_ms: 100,
        delay_ms: 10,
        retrans_ms: 5,
        max_multicast_solicit: 3,
        max_unicast_solicit: 2,
        failed_retry_ms: 50,
    }
}

fn gw4() -> IpAddr {
    "192.0.2.10".parse().unwrap()
}
fn gw6() -> IpAddr {
    "2001:db8:3::10".parse().unwrap()
}

fn route(prefix: &str, len: u8, via: Option<IpAddr>, mac: Mac) -> ParsedRoute {
    ParsedRoute {
        addr: prefix.parse().unwrap(),
        len,
        port: 0,
        next_hop: mac,
        via,
    }
}

fn resolver() -> Resolver {
    let routes = [
        route("192.0.2.0", 24, Some(gw4()), NextHop::UNRESOLVED),
        route("2001:db8:3::", 48, Some(gw6()), NextHop::UNRESOLVED),
        route("198.51.100.0", 24, None, GW2),
    ];
    let local: Vec<IpAddr> = ["198.51.100.254", "192.0.2.1", "2001:db8:3::1"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    Resolver::new(&routes, &local, vec![OURS], timers(), 0)
}

fn lookup4(t: &RouteTable, a: &str) -> NextHop {
    t.v4.lookup(u32::from(a.parse::<Ipv4Addr>().unwrap()))
        .unwrap()
}

fn answer(ip: IpAddr, mac: Mac) -> Heard {
    Heard {
        ip,
        mac: Some(mac),
        confirmed: true,
    }
}

#[test]
fn unresolved_at_start_then_broadcast_arp_and_multicast_ns() {
    let mut r = resolver();
    let t = r.take_table().unwrap();
    assert!(!lookup4(&t, "192.0.2.99").is_resolved());
    assert_eq!(lookup4(&t, "198.51.100.1").mac, GW2);
    let out = r.poll(0);
    assert_eq!(out.len(), 2);
    // ARP: broadcast, from our MAC and our address on the gateway's subnet.
    let eth = ethernet::Frame::new_checked(&out[0].frame[..]).unwrap();
    assert_eq!((eth.dst_addr(), eth.src_addr()), (Mac::BROADCAST, OURS));
    let a = arp::Repr::parse(&arp::Packet::new_checked(eth.payload()).unwrap()).unwrap();
    assert_eq!(a.operation, arp::Operation::Request);
    assert_eq!(
        a.sender_protocol_addr,
        "192.0.2.1".parse::<Ipv4Addr>().unwrap()
    );
    assert_eq!(IpAddr::V4(a.target_protocol_addr), gw4());
    // NS: to the solicited-node address ff02::1:ff00:10 at 33:33:ff:00:00:10.
    let eth = ethernet::Frame::new_checked(&out[1].frame[..]).unwrap();
    assert_eq!(eth.dst_addr(), Mac([0x33, 0x33, 0xff, 0, 0, 0x10]));
    let ip = ipv6::Packet::new_checked(eth.payload()).unwrap();
    assert_eq!(
        ip.dst_addr(),
        "ff02::1:ff00:10".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(ip.src_addr(), "2001:db8:3::1".parse::<Ipv6Addr>().unwrap());
    let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(ip.src_addr(), ip.dst_addr()));
    assert_eq!(icmp.msg_type(), icmpv6::msg_type::NEIGHBOR_SOLICIT);
    // Nothing more until the retransmission timer.
    assert!(r.poll(4_999_999).is_empty());
    assert_eq!(r.poll(5_000_000).len(), 2);
    assert_eq!(r.stats().solicits_multicast, 4);
    assert!(r.take_table().is_none());
}

#[test]
fn answer_resolves_and_republishes_then_stale_probe_and_confirm() {
    let mut r = resolver();
    r.take_table();
    r.poll(0);
    r.heard(MS, 0, answer(gw4(), GW));
    let e = *r.entry(gw4(), 0).unwrap();
    assert_eq!((e.state, e.mac), (State::Reachable, Some(GW)));
    let t = r.take_table().expect("republished");
    assert_eq!(lookup4(&t, "192.0.2.99"), NextHop { port: 0, mac: GW });
    // The same answer again changes nothing the workers see.
    r.heard(2 * MS, 0, answer(gw4(), GW));
    assert!(r.take_table().is_none());
    // REACHABLE for 100 ms (from the last confirmation at 2 ms), then STALE, MAC kept.
    r.poll(101 * MS);
    assert_eq!(r.entry(gw4(), 0).unwrap().state, State::Reachable);
    r.poll(102 * MS);
    assert_eq!(r.entry(gw4(), 0).unwrap().state, State::Stale);
    assert!(r.take_table().is_none());
    // STALE for 10 ms, then a unicast probe to the known MAC.
    let out: Vec<_> = r
        .poll(112 * MS)
        .into_iter()
        .filter(|s| s.frame[12..14] == [8, 6])
        .collect();
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0].frame[..6], &GW.0);
    assert_eq!(r.entry(gw4(), 0).unwrap().state, State::Probe { sent: 1 });
    r.heard(113 * MS, 0, answer(gw4(), GW));
    assert_eq!(r.entry(gw4(), 0).unwrap().state, State::Reachable);
    assert_eq!(r.stats().solicits_unicast, 1);
    assert!(r.take_table().is_none());
}

#[test]
fn unanswered_probes_age_out_and_a_new_mac_is_picked_up() {
    let mut r = resolver();
    r.poll(0);
    r.heard(0, 0, answer(gw4(), GW));
    r.take_table();
    // Reachable until 100 ms, stale until 110, probes at 110 and 115, withdrawn at 120.
    for ms in [100, 110, 115] {
        r.poll(ms * MS);
    }
    assert!(r.entry(gw4(), 0).unwrap().mac.is_some());
    let out = r.poll(120 * MS);
    let e = *r.entry(gw4(), 0).unwrap();
    assert_eq!((e.state, e.mac), (State::Incomplete { sent: 1 }, None));
    assert_eq!(r.stats().aged_out, 1);
    // Withdrawn: the workers drop again; resolution restarts with a broadcast at once.
    let t = r.take_table().unwrap();
    assert!(!lookup4(&t, "192.0.2.99").is_resolved());
    assert!(out.iter().any(|s| s.frame[..6] == Mac::BROADCAST.0));
    // The gateway answers from a new MAC.
    r.heard(121 * MS, 0, answer(gw4(), GW2));
    assert_eq!(lookup4(&r.take_table().unwrap(), "192.0.2.99").mac, GW2);
}

#[test]
fn unsolicited_new_mac_is_stale_and_used_an_incomplete_entry_fails_and_retries() {
    let mut r = resolver();
    r.poll(0);
    r.take_table();
    // An ARP request from the gateway (not an answer) teaches its MAC: STALE, in use.
    let req = Heard {
        ip: gw4(),
        mac: Some(GW),
        confirmed: false,
    };
    r.heard(MS, 0, req);
    assert_eq!(r.entry(gw4(), 0).unwrap().state, State::Stale);
    assert_eq!(lookup4(&r.take_table().unwrap(), "192.0.2.9").mac, GW);
    // A solicited NA without a MAC for an entry without one is ignored (section 7.2.5).
    let bare = Heard {
        ip: gw6(),
        mac: None,
        confirmed: true,
    };
    r.heard(MS, 0, bare);
    assert_eq!(r.entry(gw6(), 0).unwrap().mac, None);
    // Heard on another port: not this entry.
    r.heard(MS, 1, answer(gw6(), GW));
    assert_eq!(r.entry(gw6(), 0).unwrap().mac, None);
    // 3 multicast solicitations (0, 5, 10 ms), FAILED at 15 ms, retried at 65 ms.
    for ms in [5, 10, 15] {
        r.poll(ms * MS);
    }
    assert_eq!(r.entry(gw6(), 0).unwrap().state, State::Failed);
    assert_eq!(r.stats().failed, 1);
    let out = r.poll(65 * MS);
    assert!(out.iter().any(|s| s.frame[12..14] == [0x86, 0xdd]));
    assert_eq!(
        r.entry(gw6(), 0).unwrap().state,
        State::Incomplete { sent: 1 }
    );
    // A solicited NA without a MAC confirms an entry that has one.
    r.heard(66 * MS, 0, answer(gw6(), GW));
    r.heard(200 * MS, 0, bare);
    let e = r.entry(gw6(), 0).unwrap();
    assert_eq!((e.state, e.deadline), (State::Reachable, 300 * MS));
}

#[test]
fn reload_keeps_known_gateways_and_forgets_others() {
    let mut r = resolver();
    r.poll(0);
    r.heard(0, 0, answer(gw4(), GW));
    r.set_routes(
        &[
            route("192.0.2.0", 24, Some(gw4()), NextHop::UNRESOLVED),
            route(
                "203.0.113.0",
                24,
                Some("192.0.2.20".parse().unwrap()),
                NextHop::UNRESOLVED,
            ),
        ],
        MS,
    );
    assert_eq!(r.entry(gw4(), 0).unwrap().mac, Some(GW));
    assert!(r.entry(gw6(), 0).is_none());
    let e = r.entry("192.0.2.20".parse().unwrap(), 0).unwrap();
    assert_eq!(e.state, State::Incomplete { sent: 0 });
    let t = r.take_table().unwrap();
    assert_eq!(lookup4(&t, "192.0.2.1").mac, GW);
    assert!(!lookup4(&t, "203.0.113.1").is_resolved());
    assert!(t
        .v4
        .lookup(u32::from(Ipv4Addr::new(198, 51, 100, 1)))
        .is_none());
}
