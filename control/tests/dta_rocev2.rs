//! The translator's RoCEv2 output on the pcap backend: Key-Write and Key-Increment reports
//! come in, RDMA WRITE / FETCH_ADD requests go out toward the collector's NIC (valid ICRC,
//! the layout's addresses, consecutive PSNs); a PSN-sequence NAK from the collector moves
//! the PSN of the requests that follow.

use peregrine_control::config::Config;
use peregrine_control::daemon::{self, RunOptions};
use peregrine_control::dta::DtaTranslatorStats;
use peregrine_dataplane::io::pcapfile::{PcapWriter, Resolution};
use peregrine_dta::hash;
use peregrine_dta::{Layout, Sizes};
use peregrine_testkit::daemon::PCAP_ONE_PORT;
use peregrine_testkit::pcap::read_pcap;
use peregrine_testkit::tools::tool_present;
use peregrine_wire::dta::{self, FrameAddrs, Primitive, Repr, Variant};
use peregrine_wire::ethernet::Address;
use peregrine_wire::roce::{self, opcode, Aeth, AtomicEth, Bth, Reth};
use std::net::Ipv4Addr;
use std::sync::Arc;

const QP: u32 = 0x42;
/// Our queue pair (worker 0's: `local_qp`'s default).
const LOCAL_QP: u32 = 0x100;
const BASE: u64 = 0x7f00_0000_0000;
const NIC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 99);
/// The collector lines every test's `[dta_translator.rocev2]` carries (`NIC`, rkey 7, `BASE`).
fn rocev2_target() -> String {
    format!(
        "collector_ip = \"{NIC}\"\ncollector_mac = \"02:00:00:00:00:99\"\nsource_ip = \"10.0.0.1\"\nrkey = 7\nbase_va = {BASE}\n"
    )
}

fn report(p: Primitive) -> Vec<u8> {
    let r = Repr::new(Variant::Tracked, p);
    let mut b = vec![0u8; 96];
    let n = r.emit(&mut b[dta::FRAME_OVERHEAD..]).unwrap();
    let a = FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 9]),
        eth_dst: Address([2, 0, 0, 0, 0, 1]),
        ip_src: Ipv4Addr::new(10, 0, 0, 200),
        ip_dst: Ipv4Addr::new(10, 0, 0, 1),
        src_port: 40041,
        dst_port: dta::UDP_PORT,
    };
    let len = dta::emit_frame(&mut b, &a, n).unwrap();
    b.truncate(len);
    b
}

/// The collector NIC's NAK: PSN sequence error, expecting `psn`.
fn nak(psn: u32) -> Vec<u8> {
    let mut b = vec![0u8; 96];
    let at = dta::FRAME_OVERHEAD;
    Bth {
        opcode: opcode::RC_ACK,
        solicited: false,
        pad_count: 0,
        pkey: roce::DEFAULT_PKEY,
        dest_qp: LOCAL_QP,
        ack_req: false,
        psn,
    }
    .emit(&mut b[at..])
    .unwrap();
    Aeth {
        syndrome: 0x60,
        msn: 0,
    }
    .emit(&mut b[at + roce::BTH_LEN..])
    .unwrap();
    let a = FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 0x99]),
        eth_dst: Address([2, 0, 0, 0, 0, 1]),
        ip_src: NIC,
        ip_dst: Ipv4Addr::new(10, 0, 0, 1),
        src_port: 49999,
        dst_port: roce::UDP_PORT,
    };
    let len = dta::emit_frame(&mut b, &a, roce::BTH_LEN + roce::AETH_LEN + roce::ICRC_LEN).unwrap();
    b.truncate(len);
    roce::fill_icrc_v4(&mut b[14..]).unwrap();
    b
}

#[test]
fn rocev2_requests_out_and_nak_resync() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = PcapWriter::create(dir.path().join("in.pcap"), Resolution::Nano).unwrap();
    let mut t = 1_000_000_000u64;
    let mut step = |w: &mut PcapWriter<_>, f: &[u8]| {
        w.write(t, f).unwrap();
        t += 100_000_000; // 100 ms apart
    };
    for k in 1..=3u32 {
        step(
            &mut w,
            &report(Primitive::key_write(2, k, &[k * 10]).unwrap()),
        );
    }
    step(
        &mut w,
        &report(Primitive::KeyIncrement {
            redundancy: 1,
            key: 9,
            counter: 5,
        }),
    );
    step(&mut w, &nak(0x100));
    for k in 4..=5u32 {
        step(
            &mut w,
            &report(Primitive::key_write(2, k, &[k * 10]).unwrap()),
        );
    }
    step(&mut w, &report(Primitive::key_write(0, 1, &[1]).unwrap())); // refused
    for _ in 0..3 {
        step(&mut w, &[0u8; 60]); // a quiet tail (not reports)
    }
    w.flush().unwrap();
    let target = rocev2_target();
    let text = format!(
        r#"{PCAP_ONE_PORT}
[pipeline]
kind = "dta-translator"

[dta_translator]
region = "region"

[dta_translator.sizes]
kw_slots = 1001
ki_slots = 101

[dta_translator.rocev2]
port = "p"
{target}qp = {QP}
first_psn = 16777214
"#
    );
    let mut cfg = Config::parse(&text).unwrap();
    cfg.base_dir = dir.path().to_path_buf();
    let summary = daemon::run(&cfg, &RunOptions::default()).expect("run");
    let s: DtaTranslatorStats = summary.feature("dta_translator").unwrap();
    eprintln!("{s:?}");
    assert_eq!((s.key_write, s.key_increment), (5, 1));
    assert_eq!(s.refused["redundancy_zero"], 1);
    assert_eq!((s.rdma_sent, s.rdma_no_buffer, s.rdma_resyncs), (11, 0, 1));

    let l = Layout::new(Sizes {
        kw_slots: 1001,
        ki_slots: 101,
        ..Sizes::default()
    })
    .unwrap();
    let out = read_pcap(dir.path().join("out.pcap"));
    let mut psns = Vec::new();
    let (mut writes, mut adds) = (0, 0);
    for f in &out {
        let ip = &f[14..];
        assert!(roce::verify_icrc_v4(ip), "ICRC");
        assert_eq!(&ip[16..20], &NIC.octets());
        let bth = Bth::parse(&ip[28..]).unwrap();
        assert_eq!(bth.dest_qp, QP);
        psns.push(bth.psn);
        match bth.opcode {
            opcode::RC_RDMA_WRITE_ONLY => {
                let reth = Reth::parse(&ip[40..]).unwrap();
                let data = u32::from_le_bytes(ip[60..64].try_into().unwrap());
                let key = data / 10;
                let slots: Vec<u64> = (0..2)
                    .map(|n| BASE + l.kw_offset + 8 * hash::slot(key, n, 1001))
                    .collect();
                assert!(slots.contains(&reth.va), "key {key}: va {:#x}", reth.va);
                assert_eq!(reth.rkey, 7);
                assert_eq!(&ip[56..60], &hash::kw_checksum(key, 32).to_le_bytes());
                writes += 1;
            }
            opcode::RC_FETCH_ADD => {
                let a = AtomicEth::parse(&ip[40..]).unwrap();
                assert_eq!(a.va, BASE + l.ki_offset + 8 * hash::slot(9, 0, 101));
                assert_eq!(a.swap_add, 5);
                adds += 1;
            }
            o => panic!("opcode {o}"),
        }
    }
    assert_eq!((writes, adds), (10, 1));
    // PSNs: 2^24 - 2 on, wrapping, then from the NAK's 0x100.
    assert_eq!(
        psns,
        vec![0xff_fffe, 0xff_ffff, 0, 1, 2, 3, 4, 0x100, 0x101, 0x102, 0x103]
    );
}

/// The independent responder (`tests/oracle/rdma_apply.py`: Scapy checks each ICRC, the
/// script applies WRITEs and FETCH_ADDs to a memory image).
const APPLY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/rdma_apply.py");

fn scapy_roce() -> bool {
    tool_present("python3", &["-c", "import scapy.contrib.roce"])
}

fn sizes(k: u32) -> Sizes {
    Sizes {
        kw_slots: 1001,
        kw_words: k,
        ki_slots: 101,
        pc_chunks: 211,
        pc_redundancy: 2,
        ap_lists: 2,
        ap_batch: 4,
        ap_list_len: 8,
        ..Sizes::default()
    }
}

/// Every primitive: Key-Writes with N = 1..3 (one key overwritten), Key-Increments twice,
/// Appends that wrap list 0's ring of 8 and leave partial batches, postcards of five keys
/// interleaved hop by hop through a 4-entry cache (evictions), one partial path and one
/// whole path in a row, and
/// one Append to a list that does not exist.
fn primitives(k: u32) -> Vec<Primitive> {
    let kw = |key: u32, n: u8, d: u32| {
        Primitive::key_write(n, key, &[d, d + 1, d + 2][..k as usize]).unwrap()
    };
    let mut v = Vec::new();
    for key in 1..=12u32 {
        v.push(kw(key, 1 + (key % 3) as u8, key * 10));
    }
    v.push(kw(5, 3, 999));
    for _ in 0..2 {
        for key in 1..=8u32 {
            v.push(Primitive::KeyIncrement {
                redundancy: 1 + (key % 3) as u8,
                key,
                counter: key as u64 * 3,
            });
        }
    }
    for i in 0..11u32 {
        v.push(Primitive::Append {
            list: 0,
            data: 1000 + i,
        });
        if i % 4 == 1 {
            v.push(Primitive::Append {
                list: 1,
                data: 2000 + i,
            });
        }
    }
    v.push(Primitive::Append { list: 5, data: 1 });
    for hop in 0..5u8 {
        for key in 100..=104u32 {
            v.push(Primitive::Postcard {
                key,
                hop,
                data: key * 16 + hop as u32,
            });
        }
        if hop < 3 {
            v.push(Primitive::Postcard {
                key: 200,
                hop,
                data: 7 + hop as u32,
            });
        }
    }
    for hop in 0..5u8 {
        v.push(Primitive::Postcard {
            key: 300,
            hop,
            data: 300 + hop as u32,
        });
    }
    v
}

fn payload(p: Primitive) -> Vec<u8> {
    let f = report(p);
    f[dta::FRAME_OVERHEAD..].to_vec()
}

/// Wireshark's InfiniBand dissector decodes every request we sent to the BTH / RETH /
/// AtomicETH fields our own parser reads, with no malformed or error items.
fn tshark_agrees(pcap: &std::path::Path) {
    use peregrine_testkit::tshark::{flatten, has, tshark_json};
    let Some(json) = tshark_json(pcap) else {
        return;
    };
    let frames = read_pcap(pcap);
    let pkts = json.as_array().unwrap();
    assert_eq!(pkts.len(), frames.len());
    for (p, f) in pkts.iter().zip(&frames) {
        let mut m = std::collections::BTreeMap::new();
        flatten(&p["_source"]["layers"], &mut m);
        // The dissector reads a WRITE payload starting 08 00 (an Append head of 8, say) as
        // an EtherType and hands the rest to IPv4, which then complains: errors are only
        // allowed from such a protocol after `infiniband`, never in our headers.
        let protos = m["frame.protocols"][0].clone();
        let after_ib = protos
            .split(":infiniband")
            .nth(1)
            .is_some_and(|r| !r.is_empty());
        assert!(after_ib || !m.contains_key("_ws.malformed"), "{m:?}");
        if let Some(sev) = m.get("_ws.expert.severity") {
            let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
            assert!(
                after_ib || !sev.iter().any(|s| s == "8388608"),
                "{hex} {protos} {:?}",
                m.get("_ws.expert.message")
            );
        }
        let ip = &f[14..];
        let bth = Bth::parse(&ip[28..]).unwrap();
        assert!(
            has(&m, "infiniband.bth.opcode", &bth.opcode.to_string()),
            "{m:?}"
        );
        assert!(has(&m, "infiniband.bth.psn", &bth.psn.to_string()), "{m:?}");
        if bth.opcode == opcode::RC_RDMA_WRITE_ONLY {
            let reth = Reth::parse(&ip[40..]).unwrap();
            assert!(
                has(&m, "infiniband.reth.va", &format!("0x{:016x}", reth.va)),
                "{m:?}"
            );
            assert!(
                has(&m, "infiniband.reth.dmalen", &reth.dma_len.to_string()),
                "{m:?}"
            );
        } else {
            let a = AtomicEth::parse(&ip[40..]).unwrap();
            // (this dissector shows no AtomicETH VA field; the applier checks it)
            assert!(
                has(&m, "infiniband.atomiceth.swapdt", &a.swap_add.to_string()),
                "{m:?}"
            );
        }
    }
}

/// Append and Postcarding as RDMA WRITEs, Key-Write with K = 1 and 3 and N up to 3: the
/// frames the daemon sends, applied by an independent responder to the collector's memory
/// image, read back by the collector library exactly as the shared-memory translator's
/// region for the same reports.
#[test]
fn rocev2_writes_applied_read_as_the_region_translator_stores() {
    use peregrine_dta::{Collector, Config as TConfig, Region, Store, Translator};
    if !scapy_roce() {
        return;
    }
    for k in [1u32, 3] {
        let dir = tempfile::tempdir().unwrap();
        let prims = primitives(k);
        let mut w = PcapWriter::create(dir.path().join("in.pcap"), Resolution::Nano).unwrap();
        let mut t = 1_000_000_000u64;
        for p in &prims {
            // One report per 2 ms (a batch has 64 spare buffers: a stalled worker must not
            // find many 9-frame Key-Writes in one batch), but the postcards in one burst:
            // the worker writes its cached partial paths when it goes idle, and the
            // reference below only at the end, so no idle spell may split a key's postcards.
            if !matches!(p, Primitive::Postcard { .. }) {
                t += 2_000_000;
            }
            w.write(t, &report(*p)).unwrap();
        }
        for _ in 0..3 {
            t += 100_000_000;
            w.write(t, &[0u8; 60]).unwrap(); // after idle spells: staged batches / chunks go out
        }
        w.flush().unwrap();
        let s = sizes(k);
        let target = rocev2_target();
        let text = format!(
            r#"{PCAP_ONE_PORT}
[pipeline]
kind = "dta-translator"

[dta_translator]
region = "region"
pc_cache_slots = 4

[dta_translator.sizes]
kw_slots = {}
kw_words = {}
ki_slots = {}
pc_chunks = {}
pc_redundancy = {}
ap_lists = {}
ap_batch = {}
ap_list_len = {}

[dta_translator.rocev2]
port = "p"
{target}qp = {QP}
"#,
            s.kw_slots,
            s.kw_words,
            s.ki_slots,
            s.pc_chunks,
            s.pc_redundancy,
            s.ap_lists,
            s.ap_batch,
            s.ap_list_len
        );
        let mut cfg = Config::parse(&text).unwrap();
        cfg.base_dir = dir.path().to_path_buf();
        let summary = daemon::run(&cfg, &RunOptions::default()).expect("run");
        let st: DtaTranslatorStats = summary.feature("dta_translator").unwrap();
        eprintln!("K = {k}: {st:?}");
        assert_eq!(st.refused["unknown_list"], 1);
        assert_eq!(st.refused.values().sum::<u64>(), 1);
        assert_eq!(st.rdma_no_buffer, 0);
        assert_eq!(st.append, 14);
        assert_eq!(st.postcard, 33);
        assert!(st.postcard_paths_complete >= 1 && st.postcard_early_flush >= 1);

        // The collector's memory as registered (a fresh region), then the responder.
        let image = dir.path().join("image");
        drop(Region::create(&image, s).unwrap());
        let out = std::process::Command::new("python3")
            .args([
                APPLY,
                dir.path().join("out.pcap").to_str().unwrap(),
                image.to_str().unwrap(),
                &BASE.to_string(),
                &QP.to_string(),
                "7",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let applied = String::from_utf8_lossy(&out.stdout).to_string();
        eprintln!("applied: {applied}");
        let a: serde_json::Value = serde_json::from_str(&applied).unwrap();
        assert_eq!(
            a["writes"].as_u64().unwrap() + a["fetch_adds"].as_u64().unwrap(),
            st.rdma_sent
        );

        tshark_agrees(&dir.path().join("out.pcap"));

        // The shared-memory translator, same reports.
        let reference = dir.path().join("reference");
        let r = Arc::new(Region::create(&reference, s).unwrap());
        let mut tr = Translator::new(
            Store::new(r.clone()),
            TConfig {
                variant: Variant::Tracked,
                pc_cache_slots: 4,
            },
        );
        for p in &prims {
            let _ = tr.handle(&payload(*p));
        }
        tr.flush();
        let want = Collector::new(r);
        let got = Collector::attach(&image).unwrap();

        for key in 1..=12u32 {
            let (g, w) = (
                got.key_write(key, Some(3), 1),
                want.key_write(key, Some(3), 1),
            );
            assert_eq!(g.unwrap(), w.unwrap(), "K = {k}, Key-Write {key}");
        }
        let d: Vec<u32> = [999, 1000, 1001][..k as usize].to_vec();
        assert!(matches!(got.key_write(5, Some(3), 1).unwrap(),
            peregrine_dta::KwAnswer::Found { ref data, .. } if *data == d));
        for key in 1..=8u32 {
            let g = got.key_increment(key, Some(1 + key % 3)).unwrap();
            assert_eq!(g, want.key_increment(key, Some(1 + key % 3)).unwrap());
            assert!(g >= key as u64 * 6, "Key-Increment {key}: {g}");
        }
        for key in (100..=104u32).chain([200, 300]) {
            assert_eq!(
                got.path(key).unwrap(),
                want.path(key).unwrap(),
                "path {key}"
            );
        }
        assert_eq!(
            got.path(300).unwrap(),
            peregrine_dta::PathAnswer::Found {
                hops: (300..305).collect(),
                valid_chunks: 2
            }
        );
        for list in 0..2 {
            let g = got.follow_from(list, 0).unwrap().poll(64);
            assert_eq!(
                g,
                want.follow_from(list, 0).unwrap().poll(64),
                "list {list}"
            );
            if list == 0 {
                assert_eq!(g.lost + g.entries.len() as u64, 11);
                assert_eq!(g.entries.last(), Some(&1010));
            }
        }
    }
}

/// Two workers, each on its own queue pair (the collector's 0x42 and 0x43, ours 0x100 and
/// 0x101): each QP's PSNs run on by themselves; a NAK for worker 1's QP that arrives on
/// worker 0's port is handed to worker 1 and moves only that QP's PSN.
#[test]
fn rocev2_one_queue_pair_per_worker_and_naks_reach_their_worker() {
    let dir = tempfile::tempdir().unwrap();
    let ms = 1_000_000u64;
    let base = 1_000_000_000u64;
    // Port a (index 0) is worker 0's, port b (index 1) worker 1's (pcap backend: port i is
    // polled by worker i mod workers).
    let mut a = PcapWriter::create(dir.path().join("a.pcap"), Resolution::Nano).unwrap();
    let mut b = PcapWriter::create(dir.path().join("b.pcap"), Resolution::Nano).unwrap();
    let kw = |k: u32| report(Primitive::key_write(2, k, &[k * 10]).unwrap());
    for k in 1..=3u32 {
        a.write(base + k as u64 * 100 * ms, &kw(k)).unwrap();
    }
    for k in 11..=12u32 {
        b.write(base + (k as u64 - 10) * 100 * ms, &kw(k)).unwrap();
    }
    let mut n = nak(0x500);
    // To worker 1's queue pair, arriving on worker 0's port.
    n[42 + 5..42 + 8].copy_from_slice(&(LOCAL_QP + 1).to_be_bytes()[1..]);
    roce::fill_icrc_v4(&mut n[14..]).unwrap();
    a.write(base + 500 * ms, &n).unwrap();
    for k in 4..=5u32 {
        a.write(base + (k as u64 + 4) * 100 * ms, &kw(k)).unwrap();
    }
    for k in 13..=14u32 {
        b.write(base + (k as u64 - 5) * 100 * ms, &kw(k)).unwrap();
    }
    for i in 0..2 {
        a.write(base + (11 + i) * 100 * ms, &[0u8; 60]).unwrap();
        b.write(base + (11 + i) * 100 * ms, &[0u8; 60]).unwrap();
    }
    a.flush().unwrap();
    b.flush().unwrap();
    let target = rocev2_target();
    let text = format!(
        r#"
[workers]
count = 2

[backend]
kind = "pcap"
replay = "timed"

[[port]]
name = "a"
mac = "02:00:00:00:00:01"
rx = "a.pcap"
tx = "out.pcap"

[[port]]
name = "b"
mac = "02:00:00:00:00:02"
rx = "b.pcap"

[pipeline]
kind = "dta-translator"

[dta_translator]
region = "region"

[dta_translator.sizes]
kw_slots = 1001

[dta_translator.rocev2]
port = "a"
{target}qp = [{QP}, {}]
"#,
        QP + 1
    );
    let mut cfg = Config::parse(&text).unwrap();
    cfg.base_dir = dir.path().to_path_buf();
    let summary = daemon::run(&cfg, &RunOptions::default()).expect("run");
    let s: DtaTranslatorStats = summary.feature("dta_translator").unwrap();
    eprintln!("{s:?}");
    assert_eq!((s.key_write, s.rdma_sent, s.rdma_resyncs), (9, 18, 1));
    assert!(s.handed_off >= 1, "the NAK went to worker 1");
    let mut psns: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for f in read_pcap(dir.path().join("out.pcap")) {
        assert!(roce::verify_icrc_v4(&f[14..]));
        let bth = Bth::parse(&f[42..]).unwrap();
        psns.entry(bth.dest_qp).or_default().push(bth.psn);
    }
    assert_eq!(psns[&QP], (0..10).collect::<Vec<_>>());
    assert_eq!(
        psns[&(QP + 1)],
        vec![0, 1, 2, 3, 0x500, 0x501, 0x502, 0x503]
    );

    // One queue pair for two workers is refused, naming the key.
    let one = text.replace(&format!("qp = [{QP}, {}]", QP + 1), &format!("qp = {QP}"));
    let e = Config::parse(&one).unwrap_err().to_string();
    assert!(e.contains("dta_translator.rocev2.qp"), "{e}");
}
