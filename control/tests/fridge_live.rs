//! Fridges on live kernel TCP through the real `peregrine` daemon in network namespaces
//! (`peregrine_testkit::tcp_rig`: the daemon on `net_af_packet` ports over veths, a gNB
//! carrying the kernel's own packets in GTP-U from a TUN device). The gNB holds every uplink
//! packet for 20 ms, a radio leg we know (`tc netem` is not available here), so:
//!
//! - handshakes the data network opens towards the UE, measured at the N3 vantage (SYN going
//!   down, SYN-ACK coming up), take the radio leg;
//! - handshakes the UE opens, at the N6 vantage (SYN out, SYN-ACK back from the DN), take only
//!   the wired leg;
//! - data-to-ACK at N3 (the UE-opened connections' SYN-ACK -> ACK, FIN -> ACK) takes the
//!   radio leg again.
//!
//! The bounds checked hold for every single pair, whatever the load on the machine (a timing
//! tolerance would not: under load the gNB's 20 ms sleep and both kernels run late), so they
//! hold for the medians, up to the histogram's bin width (1/64, hence the 2 %):
//! - N3 handshake: at least the 20 ms the gNB held the SYN-ACK, and at most the DN client's
//!   `connect` time (the UPF sees the SYN leave after the client sent it and the SYN-ACK
//!   arrive before the client gets it);
//! - N6 handshake: at most the UE's `connect` time minus the 20 ms its SYN was held;
//! - N3 data-to-ACK: at least 20 ms.
//!
//! The window reports also go out on ZeroMQ (`zmq_pub`): a subscriber started before the
//! daemon receives every slice's finished windows and the end-of-run report, whose samples and
//! median are the summary's.
//!
//! Every handshake is matched (p = 1, M = 1024 slots, one in flight at a time). Needs root,
//! `ip netns`, ethtool and /dev/net/tun; outside CI it prints why and passes when they are
//! missing, under `CI` it fails.

use peregrine_control::fridge::{WindowReport, CBOR_VERSION};
use peregrine_testkit::tcp_rig::{median_ns as median, missing_prerequisite, Dir, Rig, RigConfig};
use peregrine_testkit::tools::{skip, wait_until};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const RADIO: Duration = Duration::from_millis(20);
const HANDSHAKES: usize = 60;
/// The slices of [`FRIDGE`].
const SLICES: [&str; 3] = ["n3-handshake", "n6-handshake", "n3-data"];
/// A median read from the histogram is within one bin (1/64) of the samples' median.
const BIN: f64 = 1.02;

const FRIDGE: &str = r#"
[fridge]
window_ms = 1000
zmq_pub = "tcp://127.0.0.1:5689"

[[fridge.slice]]
name = "n3-handshake"
kind = "tcp_handshake"
vantage = "n3"
m = 1024
p = 1.0

[[fridge.slice]]
name = "n6-handshake"
kind = "tcp_handshake"
vantage = "n6"
m = 1024
p = 1.0

[[fridge.slice]]
name = "n3-data"
kind = "tcp_data"
vantage = "n3"
m = 1024
p = 1.0
"#;

/// Reports received so far, with their topics.
type Received = Arc<Mutex<Vec<(String, WindowReport)>>>;

/// Every report published on `endpoint` until `stop`, with its topic, as it arrives.
fn subscribe(endpoint: &'static str, stop: Arc<AtomicBool>) -> (JoinHandle<()>, Received) {
    let ctx = zmq::Context::new();
    let sub = ctx.socket(zmq::SUB).expect("SUB socket");
    sub.set_subscribe(b"fridge.").unwrap();
    sub.set_rcvtimeo(200).unwrap();
    sub.connect(endpoint).unwrap();
    let got = Received::default();
    let out = got.clone();
    let h = std::thread::spawn(move || {
        let _ctx = ctx;
        while !stop.load(Relaxed) {
            let Ok(parts) = sub.recv_multipart(0) else {
                continue;
            };
            let [topic, body] = &parts[..] else {
                panic!("a report of {} frames", parts.len());
            };
            let r: WindowReport = ciborium::from_reader(&body[..]).expect("CBOR window report");
            got.lock()
                .unwrap()
                .push((String::from_utf8_lossy(topic).into_owned(), r));
        }
    });
    (h, out)
}

/// Whether every slice has a report in `got` that `is` takes.
fn every_slice(got: &Received, is: impl Fn(&WindowReport) -> bool) -> bool {
    let got = got.lock().unwrap();
    SLICES.iter().all(|n| {
        got.iter()
            .any(|(t, r)| *t == format!("fridge.{n}") && is(r))
    })
}

fn q50_of(s: &serde_json::Value) -> f64 {
    s["quantiles_ns"]["0.5"].as_f64().unwrap()
}

#[test]
fn handshake_and_data_delays_from_kernel_tcp_at_both_vantages() {
    let what = "the netns fridge test";
    if let Some(why) = missing_prerequisite() {
        return skip(what, why);
    }
    let dir = tempfile::tempdir().unwrap();
    // Connected before the daemon binds: ZeroMQ reconnects, so no window is missed.
    let stop = Arc::new(AtomicBool::new(false));
    let (subscriber, received) = subscribe("tcp://127.0.0.1:5689", stop.clone());
    let cfg = RigConfig {
        extra: FRIDGE.into(),
        ul_delay: RADIO,
        ..RigConfig::new(PathBuf::from(env!("CARGO_BIN_EXE_peregrine")), 100_000)
    };
    let rig = match Rig::start(&cfg, "frl", dir.path()) {
        Ok(r) => r,
        Err(e) => return skip(what, &format!("cannot build the rig: {e}")),
    };
    let from_dn = rig
        .handshakes(Dir::Dl, HANDSHAKES, 8080)
        .unwrap_or_else(|e| panic!("DN -> UE handshakes: {e}\n{}", rig.log()));
    let from_ue = rig
        .handshakes(Dir::Ul, HANDSHAKES, 443)
        .unwrap_or_else(|e| panic!("UE -> DN handshakes: {e}\n{}", rig.log()));
    // The handshakes spanned windows: wait until the control thread merged and exported a
    // finished window of every slice.
    wait_until("a finished window of every slice on ZeroMQ", || {
        every_slice(&received, |r| r.window_start_ns != u64::MAX)
    });
    let sum = rig.finish().expect("daemon summary");
    // The end-of-run report leaves as the daemon stops.
    wait_until("the end-of-run report of every slice on ZeroMQ", || {
        every_slice(&received, |r| r.window_start_ns == u64::MAX)
    });
    stop.store(true, Relaxed);
    subscriber.join().expect("subscriber");
    let reports = std::mem::take(&mut *received.lock().unwrap());
    let f = &sum["fridge"];
    let slice = |n: &str| {
        f["slices"]
            .as_array()
            .unwrap_or_else(|| panic!("no fridge slices: {sum}"))
            .iter()
            .find(|s| s["slice"] == n)
            .unwrap_or_else(|| panic!("no slice {n}: {f}"))
            .clone()
    };
    let radio = RADIO.as_nanos() as f64;
    let (dn_client, ue_client) = (median(&from_dn), median(&from_ue));
    eprintln!(
        "clients' connect medians: DN -> UE {:.2} ms, UE -> DN {:.2} ms",
        dn_client / 1e6,
        ue_client / 1e6
    );
    for n in ["n3-handshake", "n6-handshake", "n3-data"] {
        let s = slice(n);
        eprintln!(
            "{n}: events {} quantiles_ns {}",
            s["events"], s["quantiles_ns"]
        );
    }

    let n3 = slice("n3-handshake");
    let ev = |s: &serde_json::Value, k: &str| s["events"][k].as_u64().unwrap();
    let q50 = q50_of;
    assert_eq!(ev(&n3, "matched"), HANDSHAKES as u64, "{n3}");
    let med = q50(&n3);
    assert!(
        med >= radio && med <= dn_client * BIN,
        "N3 handshake median {med} ns outside [{radio}, {dn_client}] (radio leg, DN client's connect): {n3}"
    );

    let n6 = slice("n6-handshake");
    assert_eq!(ev(&n6, "matched"), HANDSHAKES as u64, "{n6}");
    let med = q50(&n6);
    assert!(
        med <= (ue_client - radio) * BIN,
        "N6 handshake median {med} ns above the UE's connect median {ue_client} ns less the radio leg: {n6}"
    );

    let data = slice("n3-data");
    assert!(ev(&data, "matched") >= HANDSHAKES as u64, "{data}");
    let med = q50(&data);
    assert!(
        med >= radio,
        "N3 data-to-ACK median {med} ns below the radio leg {radio} ns: {data}"
    );

    // ZeroMQ: every slice's windows, their samples adding up to the summary's, and the
    // end-of-run report (window_start_ns = 2^64 - 1) with the summary's median.
    for n in SLICES {
        let s = slice(n);
        let mine: Vec<&WindowReport> = reports
            .iter()
            .filter(|(t, r)| *t == format!("fridge.{n}") && r.slice == n)
            .map(|(_, r)| r)
            .collect();
        assert!(mine.iter().all(|r| r.v == CBOR_VERSION), "{mine:?}");
        let windows: u64 = mine
            .iter()
            .filter(|r| r.window_start_ns != u64::MAX)
            .map(|r| r.samples)
            .sum();
        let total = mine
            .iter()
            .find(|r| r.window_start_ns == u64::MAX)
            .unwrap_or_else(|| panic!("{n}: no end-of-run report on ZeroMQ: {mine:?}"));
        assert_eq!(
            total.samples,
            s["samples"].as_u64().unwrap(),
            "{n}: {total:?}"
        );
        // A window is published when a packet of the next one arrives: the last window's
        // samples (no packet after it) are only in the end-of-run report.
        assert!(
            windows > 0 && windows <= total.samples,
            "{n}: windows {windows}, run {}: {mine:?}",
            total.samples
        );
        let q50 = total.quantiles.iter().find(|(q, _)| *q == 0.5).unwrap().1;
        assert_eq!(q50, q50_of(&s), "{n}: {total:?}");
    }
}
