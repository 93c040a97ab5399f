//! Every pipeline kind serves the daemon's Prometheus page: `peregrine run` on `xconnect`,
//! `l3fwd`, `int` and `upf` (pcap backend, replaying forever), scraped while it runs.

use peregrine_testkit::daemon::{sample, ue_routes, write_dl};
use peregrine_testkit::tools::{free_tcp_port, Guard, START_GUARD};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn scrape(port: u16) -> Option<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    Some(s)
}

const PORTS: &str = r#"
[backend]
kind = "pcap"
loops = 0
replay = "timed"
speed = 20.0

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
tx = "n3-out.pcap"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
rx = "dl.pcap"
tx = "n6-out.pcap"
"#;

/// The `[pipeline]` and feature sections of each kind.
fn kinds() -> Vec<(&'static str, String)> {
    let (rules, reports) = (free_tcp_port(), free_tcp_port());
    let routes = ue_routes();
    vec![
        (
            "xconnect",
            "[pipeline]\nkind = \"xconnect\"\npairs = [[\"n6\", \"n3\"]]\n".to_string(),
        ),
        (
            "l3fwd",
            format!("[pipeline]\nkind = \"l3fwd\"\npromiscuous = true\n{routes}"),
        ),
        (
            "int",
            format!(
                "[pipeline]\nkind = \"int\"\npromiscuous = true\n{routes}\n[int]\nnode_id = 3\n\
                 roles = [\"sink\", \"transit\"]\nrules = \"tcp://127.0.0.1:{rules}\"\n\
                 reports = \"tcp://127.0.0.1:{reports}\"\n"
            ),
        ),
        (
            "upf",
            format!(
                "[pipeline]\nkind = \"upf\"\npromiscuous = true\n{routes}\n[upf]\n\
                 node_id = \"192.0.2.1\"\nn3 = [\"192.0.2.1\"]\n\
                 [[upf.egress]]\nport = \"n3\"\n"
            ),
        ),
    ]
}

#[test]
fn every_pipeline_kind_serves_the_platform_metrics() {
    for (kind, pipeline) in kinds() {
        let dir = tempfile::tempdir().unwrap();
        write_dl(&dir.path().join("dl.pcap"), 200);
        let port = free_tcp_port();
        let cfg = format!("{PORTS}\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n{pipeline}");
        let path = dir.path().join("p.toml");
        std::fs::write(&path, cfg).unwrap();
        let mut guard = Guard(Some(
            Command::new(env!("CARGO_BIN_EXE_peregrine"))
                .args(["run", "--config"])
                .arg(&path)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ));
        // Wait for a page on which the workers' counters have moved.
        let t0 = Instant::now();
        let page = loop {
            let p = scrape(port).unwrap_or_default();
            if sample(&p, "peregrine_port_rx_packets_total{port=\"n6\"}").is_some_and(|v| v > 0.0) {
                break p;
            }
            if let Ok(Some(st)) = guard.child().try_wait() {
                let mut err = String::new();
                let _ = guard
                    .child()
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err);
                panic!("{kind}: peregrine exited ({st}) before serving metrics: {err}");
            }
            assert!(
                t0.elapsed() < START_GUARD,
                "{kind}: no page with traffic: {p}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            page.contains("Content-Type: application/openmetrics-text"),
            "{kind}: {page}"
        );
        assert!(page.trim_end().ends_with("# EOF"), "{kind}: {page}");
        // The daemon's families, for every kind.
        for family in [
            "# TYPE peregrine_port_rx_packets counter",
            "# TYPE peregrine_port_tx_packets counter",
            "# TYPE peregrine_port_missed counter",
            "# TYPE peregrine_port_rx_nombuf counter",
            "# TYPE peregrine_drops counter",
            "# TYPE peregrine_worker_bursts counter",
            "# TYPE peregrine_worker_idle_polls counter",
            "# TYPE peregrine_uptime_seconds gauge",
        ] {
            assert!(page.contains(family), "{kind}: no `{family}`:\n{page}");
        }
        assert_eq!(sample(&page, "peregrine_workers"), Some(1.0), "{kind}");
        assert!(
            sample(&page, "peregrine_worker_bursts_total{worker=\"0\"}").is_some_and(|v| v > 0.0),
            "{kind}: {page}"
        );
        assert!(
            sample(&page, "peregrine_drops_total{reason=\"no_disposition\"}").is_some(),
            "{kind}: {page}"
        );
        // Each feature's families, only where it is enabled.
        let has = |f: &str| page.contains(&format!("# TYPE {f} "));
        assert_eq!(has("peregrine_upf_sessions"), kind == "upf", "{kind}");
        assert_eq!(has("peregrine_qfi_packets"), kind == "upf", "{kind}");
        assert_eq!(has("peregrine_int_reports"), kind == "int", "{kind}");
        // The shared classifier runs where a feature reads its record (the UPF, INT).
        let classifies = kind == "upf" || kind == "int";
        assert_eq!(has("peregrine_classify_packets"), classifies, "{kind}");
        if classifies {
            let t0 = Instant::now();
            // Its counters are copied out every 64 batches or when idle: wait for them.
            while !scrape(port)
                .and_then(|p| {
                    sample(
                        &p,
                        "peregrine_classify_packets_total{result=\"classified\"}",
                    )
                })
                .is_some_and(|v| v > 0.0)
            {
                assert!(
                    t0.elapsed() < START_GUARD,
                    "{kind}: classifier counters never moved"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // INT's elements report their own counters: this node is sink and transit only.
        assert_eq!(has("peregrine_int_sink_events"), kind == "int", "{kind}");
        assert_eq!(has("peregrine_int_transit_events"), kind == "int", "{kind}");
        assert!(!has("peregrine_int_source_events"), "{kind}");
        if kind == "int" {
            assert!(
                sample(
                    &page,
                    "peregrine_int_transit_events_total{event=\"hops_added\"}"
                )
                .is_some(),
                "{page}"
            );
        }
        assert_eq!(
            has("peregrine_int_manager_installs"),
            kind == "int",
            "{kind}"
        );
        // Egress queues where a scheduler runs (the UPF's [[upf.egress]]).
        assert_eq!(
            page.contains("peregrine_egress_enqueued_packets_total{port=\"n3\",qid=\"0\"}"),
            kind == "upf",
            "{kind}: {page}"
        );
        match kind {
            // Patched through unchanged: everything received goes out.
            "xconnect" | "l3fwd" | "int" => assert!(
                sample(&page, "peregrine_port_tx_packets_total{port=\"n3\"}")
                    .is_some_and(|v| v > 0.0),
                "{kind}: {page}"
            ),
            // No sessions: every downlink packet is dropped by a named reason.
            _ => assert!(
                page.lines()
                    .any(|l| l.starts_with("peregrine_drops_total{") && !l.ends_with(" 0")),
                "{kind}: {page}"
            ),
        }
        let st = guard.term().expect("exit status");
        assert!(st.success(), "{kind}: {st}");
    }
}
