//! `peregrinectl kestrel` against a running daemon (in-process, pcap replay in real time):
//! it reads windows live, reads the edges and sets them at run time; bad edge requests are
//! refused with a message naming the problem and change nothing. The windows file then shows
//! the re-binnings under traffic (target-occupancy calibration, the API's set) carried by the
//! following windows' edge versions, and no packet lost: the sum over windows is the packets
//! dequeued.

use peregrine_control::config::Config;
use peregrine_control::daemon::{self, RunOptions};
use peregrine_control::kestrel::export::{read_file, Msg, SketchMsg};
use peregrine_testkit::pcap::read_records;
use peregrine_testkit::tools::START_GUARD;
use peregrine_testkit::traffic::{self, IpMix, Sizes, TrafficSpec};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

fn ctl(publish: &str, api: &str, args: &[&str]) -> (i32, Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_peregrinectl"))
        .args([
            "kestrel",
            "--publish",
            publish,
            "--api",
            api,
            "--wait-ms",
            "1200",
        ])
        .args(args)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    (
        o.status.code().unwrap_or(-1),
        serde_json::from_str(&out).unwrap_or(Value::Null),
        err,
    )
}

#[test]
fn live_windows_edges_and_rebinning_under_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = TrafficSpec {
        ues: 16,
        packets: 8000,
        sizes: Sizes::Fixed(vec![200, 1200]),
        ul_ratio: 0.5,
        inner: IpMix::V4,
        outer: IpMix::V4,
        qfis: vec![1, 9],
        gnbs: 1,
        anomalies: 0,
        rate_pps: Some(2000.0),
        ..TrafficSpec::default()
    };
    let (ul, dl) = (d.join("ul.pcap"), d.join("dl.pcap"));
    traffic::write_pcaps(&spec, &ul, &dl).unwrap();
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    let publish = format!("tcp://127.0.0.1:{port}");
    let api = format!("tcp://127.0.0.1:{}", port + 1);
    let cfg = format!(
        r#"
[workers]
count = 1
{backend}[pipeline]
kind = "upf"
{routes}[upf]
node_id = "127.0.0.1"
n3 = ["192.0.2.1"]
n6 = ["198.51.100.254"]
[upf.synthetic]
sessions = 16
seed = 1
qfis = [1, 9]
gnbs = 1
outer = "v4"
[kestrel]
window_ms = 200
width = 128
publish = "{publish}"
api = "{api}"
windows_file = "windows.cbor"
strategy = "target"
calibration_windows = 1
"#,
        backend = peregrine_testkit::daemon::pcap_n3_n6("timed", &ul, &dl),
        routes = peregrine_testkit::daemon::n3_n6_routes(),
    );
    let path = d.join("k.toml");
    std::fs::write(&path, cfg).unwrap();
    let config = Config::load(&path).unwrap();
    let run = std::thread::spawn(move || {
        daemon::run(
            &config,
            &RunOptions {
                duration: Some(Duration::from_secs(20)),
                ..RunOptions::default()
            },
        )
    });

    // Live windows, once the daemon publishes them: asked again until it does (each ask
    // waits up to `--wait-ms`), the wall clock only a hang guard, not a start-up budget.
    let t0 = Instant::now();
    loop {
        let (code, w, err) = ctl(&publish, &api, &["windows"]);
        if code == 0 && w.as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        assert!(
            t0.elapsed() < START_GUARD,
            "no live window in {START_GUARD:?}: exit {code}, {w}, {err}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Keys from the sessions (what a PFCP peer knows): downlink TEID, QFI 9 (QID 7).
    let keys: Vec<String> = spec
        .sessions()
        .iter()
        .map(|s| format!("{:#x}:9", s.dl_teid))
        .collect();
    let mut args = vec!["top", "--qid", "7", "--dir", "dl", "--by", "bytes"];
    for k in &keys {
        args.extend(["--key", k.as_str()]);
    }
    let (code, top, err) = ctl(&publish, &api, &args);
    assert_eq!(code, 0, "{err}");
    assert!(
        top["top"].as_array().is_some_and(|a| !a.is_empty()),
        "{top}"
    );

    // Bad edge requests: refused by name, nothing changed.
    let (code, before, err) = ctl(&publish, &api, &["edges"]);
    assert_eq!(code, 0, "{err}");
    let lat = "500,6300,82000,200000,400000,800000,1600000";
    for (args, why) in [
        (
            vec!["--qid", "3", "--lat", "5,4,3,2,1,0,9", "--iat", lat],
            "increase",
        ),
        (vec!["--qid", "3", "--lat", "1,2,3", "--iat", lat], "7"),
        (
            vec!["--qid", "3", "--lat", "1,2,NaN,4,5,6,7", "--iat", lat],
            "not a number",
        ),
        (
            vec!["--qid", "9", "--lat", lat, "--iat", lat],
            "not configured",
        ),
        (
            vec!["--qid", "3", "--lat", lat, "--iat", "-5,2,3,4,5,6,7"],
            "negative",
        ),
    ] {
        let mut a = vec!["set-edges"];
        a.extend(args);
        let (code, _, err) = ctl(&publish, &api, &a);
        assert_eq!(code, 1, "{a:?}: {err}");
        assert!(err.contains(why), "{a:?}: {err}");
    }
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::REQ).unwrap();
    s.set_rcvtimeo(2000).unwrap();
    s.connect(&api).unwrap();
    s.send(vec![b' '; 20_000], 0).unwrap();
    let r: Value = serde_json::from_slice(&s.recv_bytes(0).unwrap()).unwrap();
    assert!(r["error"].as_str().unwrap().contains("at most"), "{r}");
    let (_, after, _) = ctl(&publish, &api, &["edges"]);
    // QID 3 has no traffic (no drift can move it): the refused requests left it alone.
    assert_eq!(
        before["edges"][3], after["edges"][3],
        "refusals change nothing"
    );

    // A good set, under traffic.
    let (code, set, err) = ctl(
        &publish,
        &api,
        &["set-edges", "--qid", "7", "--lat", lat, "--iat", lat],
    );
    assert_eq!(code, 0, "{err}");
    let (version, from) = (
        set["version"].as_u64().unwrap(),
        set["from_seq"].as_u64().unwrap(),
    );

    let summary = run.join().unwrap().unwrap();
    let k = summary.features["kestrel"].clone();
    assert!(
        k["rebinnings"].as_u64().unwrap() >= 1,
        "calibration re-binned: {k}"
    );

    let windows: Vec<SketchMsg> = read_file(&std::fs::read(d.join("windows.cbor")).unwrap())
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            Msg::Sketch(s) => Some(s),
            _ => None,
        })
        .collect();
    let dequeued = read_records(d.join("n3-tx.pcap")).unwrap().len()
        + read_records(d.join("n6-tx.pcap")).unwrap().len();
    assert_eq!(
        windows.iter().map(|w| w.packets).sum::<u64>(),
        dequeued as u64,
        "no packet lost"
    );
    let mut saw_new = false;
    for w in windows.iter().filter(|w| !w.h.late) {
        let v = *w.edges_version.iter().max().unwrap();
        if w.h.seq >= from {
            assert!(
                v >= version,
                "window {} after the set has version {v}",
                w.h.seq
            );
            saw_new |= w.sketch(1, 7).is_some();
            let e = w.edges.iter().find(|e| e.qid == 7).unwrap();
            if w.edges_version == vec![version] {
                assert_eq!(
                    e.lat,
                    vec![500, 6300, 82000, 200000, 400000, 800000, 1600000]
                );
            }
        } else {
            assert!(
                v < version,
                "window {} before the set has version {v}",
                w.h.seq
            );
        }
    }
    assert!(saw_new, "traffic in QID 7 after the new edges");
}
