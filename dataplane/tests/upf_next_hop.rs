//! The UPF stage with next hops the control side has not resolved (routes by gateway
//! address, `NextHop::UNRESOLVED`): uplink and downlink packets are dropped as
//! `next_hop_unresolved`, distinct from `no_route`, and forwarded to the MAC as soon as
//! a table carrying it is published.

use peregrine_dataplane::runtime::Disposition;
use peregrine_dataplane::stages::l3fwd::{NextHop, RouteTable};
use peregrine_testkit::upf::*;
use peregrine_wire::ethernet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const TEID: u32 = 0x0100_0001;
const DL_TEID: u32 = 0x0200_0001;
const NEW_GNB_MAC: ethernet::Address = ethernet::Address([2, 0, 0, 0, 3, 9]);

/// The testkit's routes with the N3 and N6 next hops at `gnb` / `n6` MACs.
fn routes_with(gnb: ethernet::Address, n6: ethernet::Address) -> RouteTable {
    let mut t = RouteTable::default();
    let (g, r) = (NextHop { port: 0, mac: gnb }, NextHop { port: 1, mac: n6 });
    t.insert(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 0)), 24, g);
    t.insert(IpAddr::V6("2001:db8:3::".parse().unwrap()), 48, g);
    t.insert(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, r);
    t.insert(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0, r);
    t
}

#[test]
fn unresolved_next_hops_drop_with_their_reason_until_published() {
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(TEID), &[ul(Some(9))]);
    tb.add(Key::Ue4(ue_v4(3)), &[dl(DL_TEID, IpAddr::V4(gnb_v4()))]);
    let mut rig = Rig::new(tb.build(), cfg());
    rig.routes
        .publish(routes_with(NextHop::UNRESOLVED, NextHop::UNRESOLVED));
    let up = || ul_frame(false, TEID, Some(9), &udp4(ue_v4(0), server_v4(), 53, 100));
    let down = || dl_frame(&udp4(server_v4(), ue_v4(3), 4000, 300));
    assert_eq!(rig.why(up(), 0, 1), "next_hop_unresolved");
    assert_eq!(rig.why(down(), 1, 2), "next_hop_unresolved");
    // Resolved (the gNB at a new MAC): both directions leave at once.
    rig.routes.publish(routes_with(NEW_GNB_MAC, ROUTER_MAC));
    let (out, d) = rig.one(up(), 0, 3);
    assert_eq!(d, Disposition::tx_queue(1, 7));
    assert_eq!(
        ethernet::Frame::new_checked(&out[..]).unwrap().dst_addr(),
        ROUTER_MAC
    );
    let (out, d) = rig.one(down(), 1, 4);
    assert_eq!(rig.reason(d), "");
    assert_eq!(
        ethernet::Frame::new_checked(&out[..]).unwrap().dst_addr(),
        NEW_GNB_MAC
    );
    // A destination no route covers is still `no_route`.
    let mut t = RouteTable::default();
    t.insert(
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 0)),
        24,
        NextHop {
            port: 0,
            mac: GNB_MAC,
        },
    );
    rig.routes.publish(t);
    assert_eq!(rig.why(up(), 0, 5), "no_route");
}
