//! Per-gNB GTP-U path delay through the daemon (issue 12): an `l3fwd` router between the
//! core and the RAN replays, on its recorded clock, GTP-U Echo Requests from a UPF to three
//! gNBs and their Echo Responses 2, 7 and 20 ms later. Two `gtp_echo` slices keyed by gNB
//! (`peers`) and a catch-all slice report each gNB's delay as its own distribution in the
//! summary.

use peregrine_testkit::daemon;
use peregrine_testkit::frames::{eth, ip_packet, DST_MAC, SRC_MAC};
use peregrine_testkit::pcap::PcapWriter;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

const UPF: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));

fn gnb(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10 + i))
}

/// A GTP-U Echo Request (`ty` 1) or Response (2) with sequence number `seq`.
fn echo(src: IpAddr, dst: IpAddr, ty: u8, seq: u16) -> Vec<u8> {
    let mut ip = ip_packet(src, dst, 17, (2152, 2152), 12, 64);
    ip[26..28].copy_from_slice(&[0, 0]); // no UDP checksum (IPv4)
    let s = seq.to_be_bytes();
    ip[28..40].copy_from_slice(&[0x32, ty, 0, 4, 0, 0, 0, 0, s[0], s[1], 0, 0]);
    eth(DST_MAC, SRC_MAC, &ip)
}

#[test]
fn gtp_echo_delay_per_gnb_in_its_own_slice() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (mut core, mut ran) = (
        PcapWriter::create(d.join("core.pcap")).unwrap(),
        PcapWriter::create(d.join("ran.pcap")).unwrap(),
    );
    const DELAYS: [u64; 3] = [2_000_000, 7_000_000, 20_000_000];
    let mut responses = Vec::new();
    for seq in 0..20u16 {
        let t = 1_000_000_000 + u64::from(seq) * 50_000_000;
        for (i, delay) in DELAYS.iter().enumerate() {
            let t = t + i as u64 * 1_000;
            core.write(t, &echo(UPF, gnb(i as u8), 1, seq)).unwrap();
            responses.push((t + delay, echo(gnb(i as u8), UPF, 2, seq)));
        }
    }
    responses.sort_by_key(|r| r.0);
    for (t, f) in responses {
        ran.write(t, &f).unwrap();
    }
    core.flush().unwrap();
    ran.flush().unwrap();
    let cfg = r#"
[workers]
count = 1

[backend]
kind = "pcap"
replay = "recorded"

[[port]]
name = "core"
mac = "02:00:00:00:00:01"
rx = "core.pcap"
tx = "core-tx.pcap"

[[port]]
name = "ran"
mac = "02:00:00:00:00:02"
rx = "ran.pcap"
tx = "ran-tx.pcap"

[pipeline]
kind = "l3fwd"
promiscuous = true

[[route]]
prefix = "192.0.2.0/24"
port = "ran"
next_hop_mac = "02:00:00:00:03:01"

[[route]]
prefix = "198.51.100.0/24"
port = "core"
next_hop_mac = "02:00:00:00:06:01"

[fridge]
uplink_ports = ["ran"]

[[fridge.slice]]
name = "gnb-a"
kind = "gtp_echo"
vantage = "n3"
peers = ["192.0.2.10"]
m = 64
p = 1.0

[[fridge.slice]]
name = "gnb-b"
kind = "gtp_echo"
vantage = "n3"
peers = ["192.0.2.11", "2001:db8:3::11"]
m = 64
p = 1.0

[[fridge.slice]]
name = "other-gnbs"
kind = "gtp_echo"
vantage = "n3"
m = 64
p = 1.0
"#;
    let (stdout, sum) = daemon::run_to_end(
        env!("CARGO_BIN_EXE_peregrine"),
        d,
        cfg,
        Duration::from_secs(60),
    );
    eprintln!("{stdout}");
    let f = &sum["fridge"];
    for (name, delay) in [
        ("gnb-a", DELAYS[0]),
        ("gnb-b", DELAYS[1]),
        ("other-gnbs", DELAYS[2]),
    ] {
        let s = f["slices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["slice"] == name)
            .unwrap_or_else(|| panic!("no slice {name}: {f}"));
        assert_eq!(s["samples"].as_u64(), Some(20), "{name}: {f}");
        let med = s["quantiles_ns"]["0.5"].as_f64().unwrap();
        assert!(
            (med / delay as f64 - 1.0).abs() < 0.02,
            "{name}: median {med} vs {delay}: {f}"
        );
    }
}
