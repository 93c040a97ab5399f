//! The `dta-translator` pipeline end to end on the pcap backend: DTA reports (every
//! primitive, plus bad ones) are replayed into the daemon; afterwards a collector attaches to
//! the region file the daemon created and finds what was reported; the refused
//! retransmittable reports came back as NACKs on the tx side; every refusal is counted by
//! reason and the translator kept going.

use peregrine_control::config::Config;
use peregrine_control::daemon::{self, RunOptions};
use peregrine_control::dta::DtaTranslatorStats;
use peregrine_dataplane::io::pcapfile::{PcapWriter, Resolution};
use peregrine_dta::{Collector, KwAnswer, PathAnswer};
use peregrine_testkit::pcap::read_pcap;
use peregrine_wire::dta::{self, AckRepr, FrameAddrs, Primitive, Repr, Variant};
use peregrine_wire::ethernet::Address;
use peregrine_wire::{ethernet, ipv4, udp};
use std::net::Ipv4Addr;
use std::path::Path;

const PORT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const REPORTER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];
const REPORTER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 200);

fn frame(p: Primitive, seq: u8, retransmittable: bool) -> Vec<u8> {
    let r = Repr {
        seqnum: seq,
        retransmittable,
        ..Repr::new(Variant::Tracked, p)
    };
    let mut b = vec![0u8; 128];
    let n = r.emit(&mut b[dta::FRAME_OVERHEAD..]).unwrap();
    let len = dta::emit_frame(&mut b, &addrs(), n).unwrap();
    b.truncate(len);
    b
}

fn addrs() -> FrameAddrs {
    FrameAddrs {
        eth_src: Address(REPORTER_MAC),
        eth_dst: Address(PORT_MAC),
        ip_src: REPORTER,
        ip_dst: Ipv4Addr::new(10, 0, 0, 51),
        src_port: 40041,
        dst_port: dta::UDP_PORT,
    }
}

/// A frame with a raw (possibly bad) DTA payload.
fn raw(payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 128];
    b[dta::FRAME_OVERHEAD..dta::FRAME_OVERHEAD + payload.len()].copy_from_slice(payload);
    let len = dta::emit_frame(&mut b, &addrs(), payload.len()).unwrap();
    b.truncate(len);
    b
}

/// The pcap backend, or DPDK with a `net_pcap` vdev reading and writing the same files.
fn backend(dir: &Path, dpdk: bool) -> String {
    if !dpdk {
        return r#"
[backend]
kind = "pcap"

[[port]]
name = "p"
mac = "02:00:00:00:00:01"
rx = "in.pcap"
tx = "out.pcap"
"#
        .into();
    }
    format!(
        r#"
[backend]
kind = "dpdk"
eal_args = ["--no-huge", "--no-pci", "-m", "256", "--no-shconf", "--no-telemetry", "-l", "0",
            "--vdev=net_pcap0,rx_pcap={},tx_pcap={}"]
mbufs_per_worker = 4095
mbuf_cache = 128

[[port]]
name = "p"
mac = "02:00:00:00:00:01"
device = "net_pcap0"
"#,
        dir.join("in.pcap").display(),
        dir.join("out.pcap").display()
    )
}

fn config(dir: &Path, workers: usize, dpdk: bool) -> Config {
    let b = backend(dir, dpdk);
    let idle = if dpdk { "stop_after_idle_ms = 300" } else { "" };
    let text = format!(
        r#"
[workers]
count = {workers}
{idle}
{b}
[pipeline]
kind = "dta-translator"

[dta_translator]
region = "region"

[dta_translator.sizes]
kw_slots = 10007
ki_slots = 1009
pc_chunks = 100003
pc_redundancy = 2
pc_value_bits = 18
ap_lists = 4
ap_batch = 4
ap_list_len = 64
"#
    );
    let mut c = Config::parse(&text).unwrap();
    c.base_dir = dir.to_path_buf();
    c
}

fn run(workers: usize, dpdk: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut frames = Vec::new();
    for k in 0..200u32 {
        frames.push(frame(
            Primitive::key_write(2, k, &[k + 1]).unwrap(),
            0,
            false,
        ));
    }
    for k in 0..50u32 {
        for _ in 0..3 {
            frames.push(frame(
                Primitive::KeyIncrement {
                    redundancy: 2,
                    key: k,
                    counter: 5,
                },
                0,
                false,
            ));
        }
    }
    for d in 0..10u32 {
        frames.push(frame(
            Primitive::Append {
                list: 2,
                data: 100 + d,
            },
            0,
            false,
        ));
    }
    for f in 0..20u32 {
        for hop in 0..5u8 {
            frames.push(frame(
                Primitive::Postcard {
                    key: 1000 + f,
                    hop,
                    data: f * 10 + hop as u32,
                },
                0,
                false,
            ));
        }
    }
    // Bad input: each refused, the retransmittable ones NACKed.
    frames.push(frame(Primitive::key_write(0, 1, &[1]).unwrap(), 11, true)); // redundancy 0
    frames.push(frame(Primitive::key_write(9, 1, &[1]).unwrap(), 12, true)); // > max (4)
    frames.push(frame(Primitive::Append { list: 4, data: 0 }, 13, true)); // unknown list
    frames.push(frame(
        Primitive::Postcard {
            key: 1,
            hop: 7,
            data: 0,
        },
        0,
        false,
    )); // hop
    frames.push(raw(&[0x09, 14, 0x40, 0, 0, 0, 0, 0, 0])); // unknown opcode, retransmittable
    frames.push(raw(&[0x01, 0, 0, 2, 0])); // truncated Key-Write
                                           // Not a report: UDP to another port.
    let mut other = raw(&[1, 2, 3, 4]);
    other[36] = 0x13; // UDP destination port 40040 -> 4904
    let mut u = udp::Packet::new_unchecked(&mut other[34..]);
    u.fill_checksum_v4(REPORTER, Ipv4Addr::new(10, 0, 0, 51));
    frames.push(other);

    let mut w = PcapWriter::create(dir.path().join("in.pcap"), Resolution::Nano).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_000_000_000 + i as u64 * 1000, f).unwrap();
    }
    w.flush().unwrap();

    let summary =
        daemon::run(&config(dir.path(), workers, dpdk), &RunOptions::default()).expect("run");
    let s: DtaTranslatorStats = summary.feature("dta_translator").expect("summary");
    eprintln!("{s:?}");
    assert_eq!(s.key_write, 200);
    assert_eq!(s.key_increment, 150);
    assert_eq!(s.append, 10);
    assert_eq!(s.postcard, 100);
    assert_eq!(s.postcard_paths_complete, 20);
    for (r, n) in [
        ("redundancy_zero", 1),
        ("redundancy_too_high", 1),
        ("unknown_list", 1),
        ("hop_out_of_range", 1),
        ("unknown_opcode", 1),
        ("truncated", 1),
    ] {
        assert_eq!(s.refused[r], n, "{r}");
    }
    assert_eq!(s.nacks, 4);

    // The collector attaches to the file the daemon made.
    let c = Collector::attach(dir.path().join("region")).unwrap();
    for k in 0..200u32 {
        assert!(
            matches!(c.key_write(k, Some(2), 1).unwrap(), KwAnswer::Found { ref data, .. } if data == &[k + 1]),
            "key {k}"
        );
    }
    for k in 0..50u32 {
        assert!(c.key_increment(k, Some(2)).unwrap() >= 15);
    }
    let mut f = c.follow_from(2, 0).unwrap();
    // 8 in two full batches, the last 2 written at the worker's last idle point.
    assert_eq!(f.poll(100).entries, (100..110).collect::<Vec<_>>());
    for fl in 0..20u32 {
        let want: Vec<u32> = (0..5).map(|h| fl * 10 + h).collect();
        assert!(
            matches!(c.path(1000 + fl).unwrap(), PathAnswer::Found { ref hops, .. } if *hops == want),
            "path of flow {fl}"
        );
    }

    // NACKs: back to the reporter, UDP 40040 -> 40044, the refused reports' seqnums.
    let out = read_pcap(dir.path().join("out.pcap"));
    let mut seqs: Vec<u8> = out
        .iter()
        .map(|f| {
            let e = ethernet::Frame::new_checked(&f[..]).unwrap();
            assert_eq!(e.dst_addr(), Address(REPORTER_MAC));
            let ip = ipv4::Packet::new_checked(e.payload()).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(ip.dst_addr(), REPORTER);
            let u = udp::Packet::new_checked(ip.payload()).unwrap();
            assert!(u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
            assert_eq!(u.dst_port(), dta::ACK_UDP_PORT);
            let a = AckRepr::parse(u.payload()).unwrap();
            assert!(a.nack);
            a.seqnum
        })
        .collect();
    seqs.sort();
    assert_eq!(seqs, vec![11, 12, 13, 14]);
}

#[test]
fn translator_pipeline_one_worker() {
    run(1, false);
}

#[test]
fn translator_pipeline_two_workers_steer_lists_and_keys() {
    run(2, false);
}

/// The real DPDK ethdev path: reports in through a `net_pcap` vdev, NACKs out of it. (One
/// DPDK test per test binary: EAL initialises once per process.)
#[test]
fn translator_pipeline_on_a_dpdk_net_pcap_vdev() {
    run(1, true);
}

/// `examples/dta-translator.toml` as shipped (region and NACK paths moved to a temp dir):
/// the Scapy-built reports land where the example's comments say.
#[test]
fn the_example_config_runs_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let region = dir.path().join("region");
    let text = std::fs::read_to_string(examples.join("dta-translator.toml"))
        .unwrap()
        .replace("/dev/shm/peregrine-dta-example", region.to_str().unwrap())
        .replace(
            "/tmp/peregrine-dta-example-nacks.pcap",
            dir.path().join("nacks.pcap").to_str().unwrap(),
        );
    let mut cfg = Config::parse(&text).unwrap();
    cfg.base_dir = examples;
    let summary = daemon::run(&cfg, &RunOptions::default()).expect("run");
    let s: DtaTranslatorStats = summary.feature("dta_translator").unwrap();
    assert_eq!(
        (s.key_write, s.key_increment, s.append, s.postcard),
        (8, 9, 16, 5)
    );
    assert_eq!((s.refused["redundancy_zero"], s.nacks), (1, 1));
    let c = Collector::attach(&region).unwrap();
    for k in 1..=8u32 {
        assert!(
            matches!(c.key_write(k, Some(2), 1).unwrap(), KwAnswer::Found { ref data, .. } if data == &[k * 100])
        );
    }
    assert_eq!(c.key_increment(2, Some(2)).unwrap(), 30);
    assert_eq!(
        c.follow_from(1, 0).unwrap().poll(100).entries,
        (1000..1016).collect::<Vec<u32>>()
    );
    assert!(
        matches!(c.path(77).unwrap(), PathAnswer::Found { ref hops, .. } if hops == &[10, 11, 12, 13, 14])
    );
}
