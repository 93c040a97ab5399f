//! Fuzz a whole frame the way the dataplane reads one: Ethernet, VLAN tags, IPv4/IPv6 and
//! the IPv6 extension chain, UDP/TCP/ICMP, GTP-U with its extension chain and PDU Session
//! Container, then the inner IPv4/IPv6 packet and its L4 header (see `peregrine_wire::fuzz::walk`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine_wire::fuzz::walk::frame(data));
