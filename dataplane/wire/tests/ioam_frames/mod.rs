//! The IOAM test frames `oracle_ioam.rs` (tshark, Scapy) and `ioam_linux.rs` (the kernel's
//! IOAM transit) send: Ethernet / IPv6 / Hop-by-Hop with a Pre-allocated Trace / UDP, built
//! only with our emitters.

use peregrine_wire::ethernet::{self, ethertype, Address};
use peregrine_wire::ioam::{self, NodeData, TraceOption, TraceRepr, TraceType};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::ipv6option::option_type::IOAM_HBH;
use peregrine_wire::{ipv6, udp};
use std::net::{IpAddr, Ipv6Addr};

/// The trace's IOAM namespace.
pub const NAMESPACE: u16 = 123;
/// Trace type bits 0-3: hop limit and node ID, interface IDs, timestamp seconds and
/// fraction.
pub const TRACE_TYPE: TraceType = TraceType(
    TraceType::HOP_LIM_NODE_ID
        | TraceType::IF_IDS
        | TraceType::TIMESTAMP_SECS
        | TraceType::TIMESTAMP_FRAC,
);

/// A Hop-by-Hop header (next header UDP) with the trace ([`NAMESPACE`], [`TRACE_TYPE`], 4
/// entries pre-allocated, 8-octet aligned), `hops` filled by `fill_next` in order.
pub fn hbh(hops: &[NodeData<'_>]) -> Vec<u8> {
    let repr = TraceRepr::pre_allocated(NAMESPACE, TRACE_TYPE, 4).expect("repr");
    let mut b = vec![0u8; ioam::hbh_with_trace_len(&repr)];
    let n = ioam::emit_hbh_with_trace(ip_protocol::UDP, &repr, &mut b).expect("emit");
    assert_eq!(n, b.len());
    let found = ioam::find_in_header(&b, IOAM_HBH)
        .expect("parses")
        .expect("has IOAM");
    assert!(found.is_aligned());
    let mut t = TraceOption::new_checked(&mut b[found.body]).expect("trace");
    for h in hops {
        t.fill_next(h).expect("room");
    }
    b
}

/// Ethernet `macs` (source, destination) / IPv6 `src` -> `dst`, hop limit 64 / `ext` /
/// UDP 40000 -> `dport` with `payload`, its checksum filled.
pub fn frame(
    macs: (Address, Address),
    src: Ipv6Addr,
    dst: Ipv6Addr,
    ext: &[u8],
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let u = udp::Repr {
        src_port: 40000,
        dst_port: dport,
        payload_len: payload.len(),
    };
    let mut l4 = vec![0u8; u.buffer_len()];
    u.emit(&mut l4).expect("udp emit");
    l4[udp::HEADER_LEN..].copy_from_slice(payload);
    udp::Packet::new_checked(&mut l4[..])
        .expect("udp")
        .fill_checksum(IpAddr::V6(src), IpAddr::V6(dst))
        .expect("same family");
    let ip = ipv6::Repr {
        src,
        dst,
        next_header: ip_protocol::HOPOPT,
        payload_len: ext.len() + l4.len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    };
    let e = ethernet::Repr {
        src: macs.0,
        dst: macs.1,
        ethertype: ethertype::IPV6,
    };
    let mut f = vec![0u8; ethernet::HEADER_LEN + ip.buffer_len()];
    e.emit(&mut f).expect("ethernet emit");
    ip.emit(&mut f[ethernet::HEADER_LEN..]).expect("ipv6 emit");
    let p = ethernet::HEADER_LEN + ipv6::HEADER_LEN;
    f[p..p + ext.len()].copy_from_slice(ext);
    f[p + ext.len()..].copy_from_slice(&l4);
    f
}
