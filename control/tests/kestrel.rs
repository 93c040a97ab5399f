//! Kestrel end to end (issue 10 "Must show", exactness): synthetic GTP-U traffic with known
//! per-key ground truth through the daemon (the real UPF stage and egress scheduler, pcap
//! replay on its recorded clock) with 1 and 2 workers; the windows it writes are read back
//! and every row's sum of each field equals the queue's exact total, every per-key estimate
//! is at least the truth and equals it when the key has a row to itself, and the sum over
//! windows is the packets dequeued.

use peregrine_control::kestrel::export::{read_file, Msg, SketchMsg};
use peregrine_dataplane::telemetry::kestrel::{Layout, BINS};
use peregrine_testkit::daemon;
use peregrine_testkit::pcap::read_records;
use peregrine_testkit::traffic::{self, parse, IpMix, Sizes, TrafficSpec};
use peregrine_wire::pdu_session;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// (dir, teid, qfi) -> (packets, inner bytes).
type Truth = HashMap<(usize, u32, u8), (u64, u64)>;

fn ip_len(ip: &[u8]) -> u64 {
    match ip.first().map(|b| b >> 4) {
        Some(4) => u64::from(u16::from_be_bytes([ip[2], ip[3]])),
        Some(6) => u64::from(u16::from_be_bytes([ip[4], ip[5]])) + 40,
        _ => panic!("not IP"),
    }
}

/// G-PDUs of an N3 capture by (TEID, QFI).
fn n3_truth(pcap: &Path, dir: usize, t: &mut Truth) -> u64 {
    let mut n = 0;
    for r in read_records(pcap).unwrap() {
        let Ok((_, h)) = parse::n3_gtpu(&r.data) else {
            continue;
        };
        let qfi = match h.pdu_session() {
            Ok(Some(pdu_session::Repr::Ul { qfi, .. }))
            | Ok(Some(pdu_session::Repr::Dl { qfi, .. })) => qfi,
            _ => 0,
        };
        let e = t.entry((dir, h.teid(), qfi)).or_default();
        e.0 += 1;
        e.1 += ip_len(h.payload());
        n += 1;
    }
    n
}

fn count(pcap: &Path) -> u64 {
    read_records(pcap).map(|r| r.len() as u64).unwrap_or(0)
}

fn run(dir: &Path, workers: usize, ul: &Path, dl: &Path) -> serde_json::Value {
    let cfg = format!(
        r#"
[workers]
count = {workers}
{backend}
[pipeline]
kind = "upf"

{routes}
[upf]
node_id = "127.0.0.1"
n3 = ["192.0.2.1"]
n6 = ["198.51.100.254"]

[upf.synthetic]
sessions = 40
seed = 1
qfis = [1, 5, 9]
gnbs = 1
outer = "v4"

[kestrel]
window_ms = 1000
width = 64
publish = ""
api = ""
windows_file = "windows.cbor"
strategy = "static"

[kestrel.postcards]
sojourn_ns = 0
iat_ns = 0
"#,
        backend = daemon::pcap_n3_n6("recorded", ul, dl),
        routes = peregrine_testkit::daemon::n3_n6_routes(),
    );
    let bin = env!("CARGO_BIN_EXE_peregrine");
    let (text, summary) = daemon::run_to_end(bin, dir, &cfg, Duration::from_secs(60));
    assert!(text.contains("kestrel qid"), "a per-QID summary: {text}");
    summary
}

fn exact(workers: usize) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = TrafficSpec {
        ues: 40,
        packets: 6000,
        sizes: Sizes::Fixed(vec![100, 700, 1400]),
        ul_ratio: 0.5,
        inner: IpMix::V4,
        outer: IpMix::V4,
        qfis: vec![1, 5, 9],
        gnbs: 1,
        anomalies: 0,
        rate_pps: Some(2000.0),
        ..TrafficSpec::default()
    };
    let (ul, dl) = (d.join("ul.pcap"), d.join("dl.pcap"));
    traffic::write_pcaps(&spec, &ul, &dl).unwrap();
    let summary = run(d, workers, &ul, &dl);

    let mut truth = Truth::new();
    let ul_in = n3_truth(&ul, 0, &mut truth);
    let dl_out = n3_truth(&d.join("n3-tx.pcap"), 1, &mut truth);
    let ul_out = count(&d.join("n6-tx.pcap"));
    assert_eq!(
        ul_out, ul_in,
        "no uplink drop (the uplink truth is the input's)"
    );
    assert!(dl_out > 2000 && ul_in > 2000, "{dl_out} {ul_in}");

    let msgs = read_file(&std::fs::read(d.join("windows.cbor")).unwrap()).unwrap();
    let (mut pm_packets, mut postcards) = (0, 0);
    let mut windows: Vec<SketchMsg> = Vec::new();
    for m in msgs {
        match m {
            Msg::Sketch(s) => windows.push(s),
            Msg::Pm(p) => pm_packets += p.qfis.iter().map(|q| q.packets).sum::<u64>(),
            Msg::Postcards(p) => postcards += p.validate().unwrap() as u64,
        }
    }
    assert!(windows.len() >= 3, "{} windows", windows.len());
    // On the recorded clock the workers wait for spare banks (`Tap::ready`): no window edge
    // found none, so no two windows were merged, and each second's window is its own.
    assert_eq!(summary["kestrel"]["bank_stalls"], 0, "{summary}");
    let mut seqs: Vec<u64> = windows
        .iter()
        .filter(|w| !w.h.late)
        .map(|w| w.h.seq)
        .collect();
    seqs.dedup();
    let span = seqs.last().unwrap() - seqs.first().unwrap() + 1;
    assert_eq!(seqs.len() as u64, span, "one window per second: {seqs:?}");
    let layout: Layout = windows[0].layout.layout().unwrap();
    assert_eq!((layout.rows, layout.width, layout.qids), (3, 64, 8));

    // Sum over windows = packets dequeued.
    let total: u64 = windows.iter().map(|w| w.packets).sum();
    assert_eq!(total, ul_out + dl_out, "{summary}");
    assert!(windows.iter().all(|w| w.h.workers == workers as u32));
    // The baselines on the same channel: PM per QFI and full postcards (delta 0) count the
    // same packets.
    assert_eq!(pm_packets, total);
    assert_eq!(postcards, total);

    // Rows: each row of each sketch sums to the same queue totals in every window.
    let mut per_dir = [0u64; 2];
    for w in &windows {
        for s in &w.sketches {
            let n = layout.width;
            let sums: Vec<[u64; 5]> = (0..layout.rows)
                .map(|r| {
                    let row = r * n..(r + 1) * n;
                    let hist = |v: &[u64]| v[row.start * BINS..row.end * BINS].iter().sum::<u64>();
                    [
                        s.packets[row.clone()].iter().sum(),
                        s.bytes[row.clone()].iter().sum(),
                        s.green[row.clone()].iter().sum::<u64>()
                            + s.yellow[row.clone()].iter().sum::<u64>()
                            + s.red[row.clone()].iter().sum::<u64>(),
                        hist(&s.lat),
                        hist(&s.iat),
                    ]
                })
                .collect();
            for r in &sums {
                assert_eq!(
                    r[..4],
                    [sums[0][0], sums[0][1], sums[0][0], sums[0][0]],
                    "window {} dir {} qid {}",
                    w.h.seq,
                    s.dir,
                    s.qid
                );
                // A bucket's first packet ever has no gap: rows differ by their occupied buckets.
                assert!(r[4] <= r[0]);
            }
            per_dir[s.dir] += sums[0][0];
        }
    }
    assert_eq!(per_dir, [ul_out, dl_out]);

    // Keys: the estimate summed over windows is >= the truth, == with a row to itself.
    let qid_of = |qfi: u8| match qfi {
        5 => 0,
        1 => 1,
        _ => 7,
    };
    let mut exact_keys = 0;
    for (&(dir, teid, qfi), &(p, b)) in &truth {
        let qid = qid_of(qfi);
        let (ep, eb) = windows.iter().fold((0, 0), |a, w| {
            let e = w.query(dir, qid, teid, qfi).unwrap();
            (a.0 + e.packets, a.1 + e.bytes)
        });
        assert!(
            ep >= p && eb >= b,
            "key {teid:#x}/{qfi} dir {dir}: {ep} < {p} or {eb} < {b}"
        );
        let mut mine = [0; 8];
        layout.columns(qid, teid, qfi, &mut mine);
        let alone = (0..layout.rows).any(|r| {
            truth.keys().all(|&(d2, t2, q2)| {
                let mut c = [0; 8];
                layout.columns(qid_of(q2), t2, q2, &mut c);
                (d2, t2, q2) == (dir, teid, qfi)
                    || d2 != dir
                    || qid_of(q2) != qid
                    || c[r] != mine[r]
            })
        });
        if alone {
            assert_eq!(
                (ep, eb),
                (p, b),
                "key {teid:#x}/{qfi} dir {dir} has a row to itself"
            );
            exact_keys += 1;
        }
    }
    assert!(
        exact_keys > 10,
        "{exact_keys} keys without collision of {}",
        truth.len()
    );
    assert_eq!(
        summary["kestrel"]["packets"],
        serde_json::json!(ul_out + dl_out)
    );
}

#[test]
fn sketches_are_exact_with_one_worker() {
    exact(1);
}

#[test]
fn sketches_are_exact_with_two_workers() {
    exact(2);
}
