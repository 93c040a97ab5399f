//! The reporter's feeds from our own telemetry, end to end through real daemons (pcap
//! backend): a UPF with `[kestrel]`, `[fridge]` and `[dta.kestrel]` / `[dta.fridge]` replays
//! TCP handshakes of a session (SYNs uplink on N3, SYN-ACKs downlink on N6 30 ms later);
//! its reports leave on N6; a `dta-translator` daemon replays them into its region; the
//! collector then finds
//!
//! - under the session's downlink (TEID, QFI) key, as the Key-Increment minimum over N, the
//!   sum of the packets Kestrel's exported windows give that key (the Count-Min query of
//!   each window's sketch, read back from its windows file);
//! - in the Append list, in order, exactly the fridge's raw samples (its raw CSV file) in
//!   microseconds.

mod dta_common;
mod one_session;

use dta_common::{dta_head, parse, reports, translate, COLLECTOR};
use one_session::one_session;
use peregrine_control::daemon::{self, RunOptions};
use peregrine_control::dta::feeds::{kestrel_key, FridgeEncoding};
use peregrine_control::dta::reporter::DtaReporterStats;
use peregrine_control::kestrel::export::{read_file, Msg};
use peregrine_dataplane::qos::QfiMap;
use peregrine_testkit::frames::tcp_segment as tcp;
use peregrine_testkit::pcap::{read_pcap, PcapWriter};
use peregrine_testkit::upf as upf_support;
use peregrine_wire::dta::Primitive;

const FLOWS: u32 = 60;
const DELAY_NS: u64 = 30_000_000;

#[test]
fn kestrel_counts_and_fridge_samples_reach_the_collector() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (s, ue, server) = one_session();
    let mut n3 = PcapWriter::create(d.join("n3.pcap")).unwrap();
    let mut n6 = PcapWriter::create(d.join("n6.pcap")).unwrap();
    let mut dl = Vec::new();
    let at = |i: u32| 1_000_000_000 + u64::from(i) * 20_000_000;
    for i in 0..FLOWS {
        let t = at(i);
        let port = 40_000 + i as u16;
        let isn = 1_000 * i;
        let syn = tcp(ue, server, (port, 443), isn, 0, 0x02);
        n3.write(t, &upf_support::ul_frame(false, s.ul_teid, Some(9), &syn))
            .unwrap();
        let jitter = u64::from(i % 7) * 1_000_000;
        let sa = tcp(server, ue, (443, port), 7, isn + 1, 0x12);
        dl.push((t + DELAY_NS + jitter, upf_support::dl_frame(&sa)));
    }
    // A tail of G-PDUs of no session (dropped: neither Kestrel nor the fridge sees them).
    // The last windows' reports leave at the end of the run, when the daemon drains its
    // features before it releases the workers (`runtime::end`).
    let t = at(FLOWS - 1);
    for k in 1..=12u64 {
        let syn = tcp(ue, server, (9, 443), 0, 0, 0x02);
        n3.write(
            t + 100_000_000 * k,
            &upf_support::ul_frame(false, 0x77, Some(9), &syn),
        )
        .unwrap();
    }
    // Each port's replay starts at its file's first timestamp: a downlink packet for no
    // UE (dropped) at the first SYN's time keeps the two files aligned.
    let stray = tcp(server, "10.255.0.1".parse().unwrap(), (443, 9), 0, 0, 0x12);
    n6.write(at(0), &upf_support::dl_frame(&stray)).unwrap();
    // The 100 ms Kestrel windows holding a SYN-ACK (the downlink key's windows).
    let mut dl_windows: Vec<u64> = dl.iter().map(|(t, _)| t / 100_000_000).collect();
    dl_windows.dedup();
    for (t, f) in dl {
        n6.write(t, &f).unwrap();
    }
    n3.flush().unwrap();
    n6.flush().unwrap();

    let cfg = format!(
        r#"
[backend]
kind = "pcap"
replay = "recorded"

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
rx = "n3.pcap"
tx = "n3-tx.pcap"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
rx = "n6.pcap"
tx = "n6-tx.pcap"

[pipeline]
kind = "upf"
promiscuous = true

{routes}
{upf}

[kestrel]
window_ms = 100
qids = 8
publish = ""
api = ""
windows_file = "windows.cbor"
strategy = "static"

[fridge]
window_ms = 1000
raw_file = "raw.csv"

[[fridge.slice]]
name = "https"
kind = "tcp_handshake"
vantage = "n6"
ports = [443]
m = 1024
p = 1.0

{dta}sojourn = false

[dta.kestrel]
count = "packets"
redundancy = 3

[dta.fridge]
list = 2
encoding = "us"
"#,
        dta = dta_head("n6"),
        routes = peregrine_testkit::daemon::n3_n6_routes(),
        upf = peregrine_testkit::daemon::UPF_ONE_SESSION,
    );
    let summary = daemon::run(&parse(&cfg, d), &RunOptions::default()).expect("reporter run");
    let rs: DtaReporterStats = summary.feature("dta").expect("reporter summary");
    eprintln!("{rs:?}");
    assert_eq!((rs.rate_limited, rs.ring_full, rs.inject_failed), (0, 0, 0));
    // One record per window of the key: the recorded clock waits for Kestrel's spare banks
    // (`Tap::ready`) instead of merging windows.
    assert_eq!(rs.kestrel_records as usize, dl_windows.len());

    // Kestrel's own export: the downlink key of the session, window by window.
    let qid = usize::from(QfiMap::default().qid(9));
    let mut exported = 0u64;
    for m in read_file(&std::fs::read(d.join("windows.cbor")).unwrap()).unwrap() {
        if let Msg::Sketch(w) = m {
            exported += w.query(1, qid, s.dl_teid, 9).unwrap().packets;
        }
    }
    assert_eq!(exported, u64::from(FLOWS), "every SYN-ACK went downlink");
    // The fridge's raw samples, in order (one worker).
    let raw = std::fs::read_to_string(d.join("raw.csv")).unwrap();
    let samples: Vec<u64> = raw
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(4).unwrap().parse().unwrap())
        .collect();
    let fridge: serde_json::Value = summary.feature("fridge").unwrap();
    assert_eq!(
        Some(samples.len() as u64),
        fridge["slices"][0]["samples"].as_u64(),
        "{fridge}"
    );
    assert!(samples.len() as u32 > FLOWS / 2, "{fridge}");

    let out = read_pcap(d.join("n6-tx.pcap"));
    let reps = reports(&out, COLLECTOR);
    let key = kestrel_key(1, s.dl_teid, 9);
    let (mut incs, mut appends) = (0u64, 0usize);
    for (_, r) in &reps {
        match r.primitive {
            Primitive::KeyIncrement {
                key: k,
                redundancy,
                counter,
            } => {
                assert_eq!((k, redundancy), (key, 3), "only the installed key");
                incs += counter;
            }
            Primitive::Append { list, .. } => {
                assert_eq!(list, 2);
                appends += 1;
            }
            p => panic!("no other feed configured: {p:?}"),
        }
    }
    assert_eq!(incs, exported, "every window's count was reported");
    assert_eq!(appends, samples.len());
    assert_eq!(rs.kestrel_records as usize + appends, reps.len());

    let frames: Vec<Vec<u8>> = reps.into_iter().map(|(f, _)| f).collect();
    let (ts, c) = translate(d, &frames, "ap_lists = 4\nap_batch = 4");
    assert_eq!(ts.refused.values().sum::<u64>(), 0, "{ts:?}");
    assert_eq!(c.key_increment(key, Some(3)).unwrap(), exported);
    let entries = c.follow_from(2, 0).unwrap().poll(10_000).entries;
    let want: Vec<u32> = samples
        .iter()
        .map(|&ns| peregrine_control::dta::feeds::fridge_data(0, ns, FridgeEncoding::Us))
        .collect();
    assert_eq!(entries, want);
    // 30-36 ms apart in the files, and the recorded clock replays them as recorded.
    assert!(
        want.iter().all(|&us| (30_000..=36_000).contains(&us)),
        "{want:?}"
    );
}
