//! Helpers of the DTA end-to-end tests: pick the reports out of a reporter's output, and run
//! a real `dta-translator` daemon on them (pcap replay) into a region a collector attaches.

#![allow(dead_code)]

use peregrine_control::config::Config;
use peregrine_control::daemon::{self, RunOptions};
use peregrine_control::dta::DtaTranslatorStats;
use peregrine_dataplane::io::pcapfile::{PcapWriter, Resolution};
use peregrine_dta::Collector;
use peregrine_wire::dta::{self, Repr, Variant};
use peregrine_wire::{ethernet, ipv4, udp};
use std::net::Ipv4Addr;
use std::path::Path;

/// The collector of the reporter tests (MAC 02:00:00:00:00:51).
pub const COLLECTOR: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 51);

/// The head of a reporter's `[dta]` section: out of `port` to [`COLLECTOR`], from 10.0.0.1;
/// the caller adds its options and feeds.
pub fn dta_head(port: &str) -> String {
    format!(
        "[dta]\nport = \"{port}\"\ncollector_ip = \"{COLLECTOR}\"\n\
         collector_mac = \"02:00:00:00:00:51\"\nsource_ip = \"10.0.0.1\"\n"
    )
}

/// An l3fwd pipeline routing 10.2.0.0/16 out of port `p` to 02:00:00:00:00:02, with a
/// reporter on `p` ([`dta_head`]).
pub fn l3fwd_reporter() -> String {
    format!(
        "[pipeline]\nkind = \"l3fwd\"\n[[route]]\nprefix = \"10.2.0.0/16\"\nport = \"p\"\n\
         next_hop_mac = \"02:00:00:00:00:02\"\n{}",
        dta_head("p")
    )
}

/// A config parsed with `dir` as its directory.
pub fn parse(text: &str, dir: &Path) -> Config {
    let mut c = Config::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    c.base_dir = dir.to_path_buf();
    c
}

/// The frames toward `collector` (UDP 40040, valid checksum), each with its report decoded
/// by our parser (tracked variant).
pub fn reports(frames: &[Vec<u8>], collector: Ipv4Addr) -> Vec<(Vec<u8>, Repr)> {
    let mut out = Vec::new();
    for f in frames {
        let Ok(e) = ethernet::Frame::new_checked(&f[..]) else {
            continue;
        };
        let Ok(ip) = ipv4::Packet::new_checked(e.payload()) else {
            continue;
        };
        if ip.dst_addr() != collector {
            continue;
        }
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(u.dst_port(), dta::UDP_PORT);
        assert!(u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
        let r =
            Repr::parse(&dta::Packet::new_checked(u.payload(), Variant::Tracked).unwrap()).unwrap();
        out.push((f.clone(), r));
    }
    out
}

/// Replay `frames` into a `dta-translator` daemon whose region is `dir/region`, with
/// `sizes` as its `[dta_translator.sizes]` body; its summary and a collector on the region.
pub fn translate(dir: &Path, frames: &[Vec<u8>], sizes: &str) -> (DtaTranslatorStats, Collector) {
    let mut w = PcapWriter::create(dir.join("reports.pcap"), Resolution::Nano).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_000_000_000 + i as u64 * 1000, f).unwrap();
    }
    w.flush().unwrap();
    let translator = parse(
        &format!(
            r#"
[backend]
kind = "pcap"

[[port]]
name = "c"
mac = "02:00:00:00:00:51"
rx = "reports.pcap"
tx = "nacks.pcap"

[pipeline]
kind = "dta-translator"

[dta_translator]
region = "region"

[dta_translator.sizes]
{sizes}
"#
        ),
        dir,
    );
    let summary = daemon::run(&translator, &RunOptions::default()).expect("translator run");
    let ts: DtaTranslatorStats = summary.feature("dta_translator").unwrap();
    (ts, Collector::attach(dir.join("region")).unwrap())
}
