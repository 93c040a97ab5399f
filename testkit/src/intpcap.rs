//! A one-port INT node on the pcap backend (no root needed): what the tests that replay
//! pcap files through `peregrine run`'s `int` pipeline (control/tests int_pcap.rs,
//! dta_int_feed.rs) share: the node's config and the IPv6/UDP frames they replay.

use crate::daemon::PCAP_ONE_PORT;
use crate::frames::ipv6_udp;
use std::net::Ipv6Addr;

/// The node's port MAC (the frames' destination).
pub const PORT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
/// The frames' source MAC.
pub const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 9, 9];

/// The node's config: [`PCAP_ONE_PORT`] with port `p` replaying `rx` (timed) into `tx`,
/// pipeline `int` (promiscuous), `fd00::/16` routed back out of `p`; `int` is the `[int]`
/// section's lines and `extra` anything after them (e.g. a `[dta]` section).
pub fn config(rx: &str, tx: &str, int: &str, extra: &str) -> String {
    let ports = PCAP_ONE_PORT
        .replace("\"in.pcap\"", &format!("\"{rx}\""))
        .replace("\"out.pcap\"", &format!("\"{tx}\""));
    format!(
        r#"{ports}
[pipeline]
kind = "int"
promiscuous = true

[[route]]
prefix = "fd00::/16"
port = "p"
next_hop_mac = "02:00:00:00:00:02"

[int]
{int}
{extra}
"#
    )
}

/// Ethernet (to [`PORT_MAC`]) / IPv6 (hop limit 64) / UDP from port 4000 with a valid
/// checksum (RFC 8200 8.1) and 40 payload bytes patterned by `seq`.
pub fn frame(src: Ipv6Addr, dst: Ipv6Addr, dport: u16, seq: u16) -> Vec<u8> {
    let payload: Vec<u8> = (0..40u16).map(|i| (i ^ seq) as u8).collect();
    let mut f = PORT_MAC.to_vec();
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend(ipv6_udp(src, dst, 4000, dport, &payload));
    f
}
