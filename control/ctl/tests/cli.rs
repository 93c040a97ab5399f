//! `peregrinectl int ...` end to end against an in-process INT manager on ephemeral ports.

use peregrine_int_manager::qos_monitor::{QosReport, RawReport};
use peregrine_int_manager::{Encoding, IntManager, ManagerConfig};
use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEC: u64 = 1_000_000_000;

struct Mgr {
    mgr: IntManager,
    reports: SyncSender<RawReport>,
    clock: Arc<AtomicU64>,
}

fn manager() -> Mgr {
    let cfg = ManagerConfig {
        rules_endpoint: "tcp://127.0.0.1:*".into(),
        reports_endpoint: "tcp://127.0.0.1:*".into(),
        report_encoding: Encoding::Json,
        qos_grace: Duration::ZERO,
        ..ManagerConfig::default()
    };
    let (tx, rx) = mpsc::sync_channel(4096);
    let clock = Arc::new(AtomicU64::new(SEC / 2));
    let c = Arc::clone(&clock);
    let mgr = IntManager::spawn(
        cfg,
        rx,
        Box::new(|_| {}),
        Box::new(move || c.load(Ordering::Relaxed)),
    )
    .unwrap();
    Mgr {
        mgr,
        reports: tx,
        clock,
    }
}

fn ctl(m: &Mgr, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_peregrinectl"));
    c.args(["--rules", m.mgr.rules_endpoint()])
        .args(["--reports", m.mgr.reports_endpoint()])
        .args(["--timeout-ms", "5000"])
        .args(args);
    c
}

fn run(m: &Mgr, args: &[&str]) -> (i32, String, String) {
    let o: Output = ctl(m, args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const ADD7: &[&str] = &[
    "int",
    "add",
    "--ns",
    "7",
    "--app",
    "1",
    "--src",
    "2001:db8::1",
    "--dst",
    "2001:db8::2",
    "--proto",
    "udp",
    "--sport",
    "0",
    "--dport",
    "5000",
    "--trace-type",
    "0x7000E000",
    "--mode",
    "count",
    "--setting",
    "100",
    "--piggyback",
];

#[test]
fn add_list_mod_stats_del() {
    let m = manager();
    let (code, out, err) = run(&m, ADD7);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "installed namespace 7");

    let (code, out, _) = run(&m, &["int", "list"]);
    assert_eq!(code, 0);
    let line = out.lines().nth(1).expect("one rule line");
    for want in [
        "2001:db8::1",
        "2001:db8::2",
        "udp",
        "5000",
        "0x7000E000",
        "count 100",
        "transmit,piggyback,hops",
    ] {
        assert!(line.contains(want), "{want:?} not in {line:?}");
    }

    let (code, out, err) = run(
        &m,
        &[
            "int",
            "mod",
            "--ns",
            "7",
            "--mode",
            "probability",
            "--setting",
            "5",
        ],
    );
    assert_eq!((code, out.trim()), (0, "modified namespace 7"), "{err}");
    let (code, _, err) = run(
        &m,
        &["--cbor", "int", "mod", "--ns", "7", "--disable-hop", "3"],
    );
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run(&m, &["--json", "int", "list"]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let rule = &v["ok"]["list"]["rules"][0];
    assert_eq!(rule["mode"], "probability");
    assert_eq!(rule["mode_setting"], 5.0);
    assert_eq!(rule["piggyback_report"], true);

    let (code, out, _) = run(&m, &["int", "stats", "--ns", "7"]);
    assert_eq!(code, 0);
    assert!(out.lines().nth(1).unwrap().trim_start().starts_with("7 "));

    let (code, out, _) = run(&m, &["int", "del", "--ns", "7"]);
    assert_eq!((code, out.trim()), (0, "removed namespace 7"));
    let (code, _, err) = run(&m, &["int", "del", "--ns", "7"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("error 404") && err.contains("not installed"),
        "{err}"
    );
    let (code, out, _) = run(&m, &["int", "list"]);
    assert_eq!((code, out.lines().count()), (0, 1), "header only: {out}");
}

#[test]
fn cbor_add_and_manager_errors_exit_1() {
    let m = manager();
    let mut args = vec!["--cbor"];
    args.extend_from_slice(ADD7);
    let (code, out, err) = run(&m, &args);
    assert_eq!((code, out.trim()), (0, "installed namespace 7"), "{err}");
    let (code, _, err) = run(&m, ADD7);
    assert_eq!(code, 1);
    assert!(err.contains("error 409"), "{err}");
    // Bit 4 is not allocated in Table I: the manager names the field.
    let mut bad: Vec<&str> = ADD7.to_vec();
    bad[3] = "8";
    bad[17] = "0x0800E000";
    let (code, _, err) = run(&m, &bad);
    assert_eq!(code, 1);
    assert!(err.contains("trace_type"), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    let m = manager();
    let (code, _, _) = run(&m, &["int", "del"]);
    assert_eq!(code, 2);
    let (code, _, err) = run(&m, &["int", "mod", "--ns", "7"]);
    assert_eq!(code, 2);
    assert!(err.contains("nothing to change"));
    let mut bad: Vec<&str> = ADD7.to_vec();
    bad[21] = "0"; // count 0
    let (code, _, err) = run(&m, &bad);
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = run(&m, &["int", "add", "--ns", "7"]);
    assert_eq!(code, 2);
}

fn list_with_timeout(ep: &str) -> (Option<i32>, String, Duration) {
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_peregrinectl"))
        .args(["--rules", ep, "--timeout-ms", "300", "int", "list"])
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        t.elapsed(),
    )
}

#[test]
fn dead_manager_times_out_with_exit_3() {
    // The manager has stopped: nothing listens on its port any more.
    let ep = {
        let m = manager();
        m.mgr.rules_endpoint().to_owned()
    };
    let (code, err, took) = list_with_timeout(&ep);
    assert_eq!(code, Some(3));
    assert!(err.contains("no reply from the INT manager"), "{err}");
    assert!(took < Duration::from_secs(5));

    // A peer that takes the request and never answers.
    let ctx = zmq::Context::new();
    let mute = ctx.socket(zmq::ROUTER).unwrap();
    mute.bind("tcp://127.0.0.1:*").unwrap();
    let ep = mute.get_last_endpoint().unwrap().unwrap();
    let (code, err, took) = list_with_timeout(&ep);
    assert_eq!(code, Some(3));
    assert!(err.contains("within 300 ms"), "{err}");
    assert!(took < Duration::from_secs(5));
    let got = mute
        .recv_multipart(zmq::DONTWAIT)
        .expect("the request arrived");
    assert_eq!(got.last().unwrap().as_slice(), br#"{"int_list":{}}"#);
}

/// Runs `peregrinectl` with `args` while `pump` feeds the manager, until it exits (10 s max).
fn watch(m: &Mgr, args: &[&str], mut pump: impl FnMut()) -> (i32, String) {
    let mut child = ctl(m, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("peregrinectl watch did not finish");
        }
        pump();
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (status.code().unwrap_or(-1), out)
}

fn install(m: &Mgr, ns: &str, app: &str) {
    let mut a: Vec<&str> = ADD7.to_vec();
    a[3] = ns;
    a[5] = app;
    assert_eq!(run(m, &a).0, 0);
}

#[test]
fn watch_raw_filters_by_app_and_namespace() {
    let m = manager();
    install(&m, "7", "1");
    install(&m, "70", "1");
    install(&m, "8", "2");
    let mut seq = 0u32;
    let tx = m.reports.clone();
    let pump = || {
        for ns in [7, 70, 8] {
            let t = SEC / 2 + seq as u64;
            let _ = tx.try_send(RawReport::new(ns, seq, t - 2000, t, 120));
        }
        seq += 1;
    };
    let (code, out) = watch(
        &m,
        &[
            "int", "watch", "--app", "1", "--ns", "7", "--raw", "--count", "3",
        ],
        pump,
    );
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    for l in &lines {
        assert!(l.starts_with("raw app=1 ns=7 "), "{l}");
        assert!(
            l.contains("packet_len=120") && l.contains("hops=[0]"),
            "{l}"
        );
    }

    let mut seq = 1000u32;
    let pump = || {
        for ns in [7, 8] {
            let t = SEC / 2 + seq as u64;
            let _ = tx.try_send(RawReport::new(ns, seq, t - 2000, t, 64));
        }
        seq += 1;
    };
    let (code, out) = watch(
        &m,
        &["--json", "int", "watch", "--app", "2", "--count", "2"],
        pump,
    );
    assert_eq!(code, 0);
    for l in out.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["topic"], "raw/2/8");
        assert_eq!(v["report"]["namespace"], 8);
    }
    assert_eq!(out.lines().count(), 2);
}

/// Each step fills one second of the sink clock with 10 reports (1 ms one-way delay) and moves
/// the clock to the next second, closing a 1 s window.
fn qos_pump(m: &Mgr) -> impl FnMut() {
    let tx = m.reports.clone();
    let clock = Arc::clone(&m.clock);
    let mut seq = 0u32;
    move || {
        let sec = clock.load(Ordering::Relaxed) / SEC;
        for k in 0..10u64 {
            let t = sec * SEC + 100_000_000 + k * 50_000_000;
            let _ = tx.try_send(RawReport::new(7, seq, t - 1_000_000, t, 1000));
            seq += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
        clock.store((sec + 1) * SEC, Ordering::Relaxed);
    }
}

#[test]
fn watch_qos_prints_window_reports() {
    let m = manager();
    install(&m, "7", "1");
    let (code, out) = watch(&m, &["int", "watch", "--qos", "--count", "1"], qos_pump(&m));
    assert_eq!(code, 0);
    let l = out.lines().next().expect("one QoS line");
    assert!(l.starts_with("qos app=1 ns=7 win=1s "), "{l}");
    assert!(l.contains("reports=10 "), "{l}");
    assert!(l.contains("delay=1000.000us"), "{l}");
    assert!(l.contains("loss=0.000%"), "{l}");

    // The JSON form carries the whole report.
    let (code, out) = watch(
        &m,
        &[
            "--json", "int", "watch", "--qos", "--app", "1", "--ns", "7", "--count", "1",
        ],
        qos_pump(&m),
    );
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["topic"], "qos/1/7");
    let r: QosReport = serde_json::from_value(v["report"].clone()).unwrap();
    assert_eq!((r.namespace, r.reports), (7, 10));
    assert_eq!(r.delay_ns.mean, 1e6);
}

#[test]
fn watch_duration_ends_quietly_without_reports() {
    let m = manager();
    let t = Instant::now();
    let (code, out) = watch(&m, &["int", "watch", "--duration-ms", "300"], || {});
    assert_eq!((code, out.as_str()), (0, ""));
    assert!(t.elapsed() >= Duration::from_millis(300));
}
