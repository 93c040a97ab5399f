//! N4 end to end: the real `peregrine` daemon (pcap backend, looping timed replay through
//! static sessions so the workers are busy) driven over UDP by the Scapy-based SMF simulator
//! (`smf/smf_sim.py`) and MBR enforcement measured on the daemon's output capture.
//!
//! Python with Scapy and tshark are test tools: outside CI (`CI` unset) a test whose tool is
//! missing says so and returns; in CI a missing tool fails it.

mod n4_daemon;

use n4_daemon::*;
use peregrine_testkit::mbr::{assert_windows_at_mbr, inner_lengths, offered_windows, qfi_row};
use peregrine_testkit::pcap::Record;
use peregrine_testkit::pfcp::header_in_frame;
use peregrine_testkit::tools::wait_value;
use peregrine_testkit::tshark::LiveCapture;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tshark capture of `udp port P` on `lo`; `None` (skip with a message) when not root or
/// tshark is missing outside CI.
struct Capture {
    live: LiveCapture,
    port: u16,
}

impl Capture {
    fn start(dir: &Path, port: u16) -> Option<Capture> {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
        if !root {
            assert!(!in_ci(), "CI runs the capture as root");
            eprintln!("skipping the N4 capture: capturing on lo needs root");
            return None;
        }
        // Returns once dumpcap captures (it wrote the file header).
        match LiveCapture::start("lo", &format!("udp port {port}"), &dir.join("n4.pcap")) {
            Ok(live) => Some(Capture { live, port }),
            Err(e) if !in_ci() => {
                eprintln!("skipping the N4 capture: tshark not found ({e})");
                None
            }
            Err(e) => panic!("tshark is required in CI: {e}"),
        }
    }

    /// Wait until the file holds at least `want` messages of each (PFCP type, count), stop
    /// (SIGINT: tshark closes the file) and decode, with the N4 port decoded as PFCP
    /// (tshark dissects PFCP on 8805 only): (UDP source port, PFCP message type) of every
    /// datagram, and the frames tshark flags (malformed or any expert info), with who sent
    /// them.
    fn finish(self, want: &[(u8, u64)]) -> (Vec<(u16, String)>, Vec<String>) {
        let what = format!("the N4 messages (type, at least) {want:?}");
        self.live.wait_records(&what, |records| {
            want.iter().all(|&(t, n)| {
                let is = |r: &&Record| header_in_frame(&r.data).is_some_and(|h| h.0 == t);
                records.iter().filter(is).count() as u64 >= n
            })
        });
        let file = self.live.file.clone();
        self.live.stop();
        let decode_as = format!("udp.port=={},pfcp", self.port);
        let fields = |filter: &str, fields: &[&str]| -> Vec<String> {
            let mut c = Command::new("tshark");
            c.arg("-r")
                .arg(&file)
                .args(["-d", &decode_as, "-Y", filter, "-T", "fields"]);
            for f in fields {
                c.args(["-e", f]);
            }
            let o = c.output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        };
        let all = fields("udp", &["udp.srcport", "pfcp.msg_type"])
            .into_iter()
            .map(|l| {
                let (port, ty) = l.split_once('\t').unwrap_or((&l, ""));
                (port.parse().unwrap_or(0), ty.to_string())
            })
            .collect();
        let bad = fields(
            "_ws.malformed || _ws.expert",
            &[
                "frame.number",
                "udp.srcport",
                "pfcp.msg_type",
                "_ws.expert.message",
            ],
        );
        (all, bad)
    }
}

/// 1,000 sessions from the SMF simulator against a daemon that is forwarding: association,
/// heartbeats both ways, establishments with unique TEIDs, modifications, periodic (1 s)
/// usage reports, deletions with final usage reports; every N4 datagram decodes in tshark;
/// the Prometheus page counts messages by type and cause, sessions and publish latency.
///
/// Kept fast enough for the default run: the simulator builds each request kind with Scapy
/// once and patches SEIDs, sequence numbers, UE addresses and TEIDs (every 25th request is
/// also built by Scapy and must be byte-identical; every 25th response and report is
/// decoded by Scapy, the rest by a TLV walk), and the sessions live ~1.5 s (one or two 1 s
/// periods each) before they are deleted.
#[test]
fn smf_at_scale_1000_sessions() {
    let _turn = heavy();
    let dir = tempfile::tempdir().unwrap();
    let traffic = repo().join("examples/traffic");
    // The bundled quickstart traffic through its 64 static sessions, looped, at ~5 kpps.
    let d = Daemon::start(
        dir.path(),
        "replay = \"timed\"\nspeed = 0.005\nloops = 0",
        &traffic.join("quickstart-ul.pcap"),
        &traffic.join("quickstart-dl.pcap"),
        "n3 = [\"192.0.2.1\", \"2001:db8:3::1\"]\nmax_sessions = 2048\nheartbeat_interval_s = 1\n\
         usage_interval_ms = 250\n\n[upf.synthetic]\nsessions = 64\nseed = 1\nqfis = [1, 5, 9]\ngnbs = 4\n",
    );
    let cap = Capture::start(dir.path(), d.pfcp.port());
    let t0 = Instant::now();
    let Some(r) = python(
        "smf_sim.py",
        &[
            format!("--upf={}", d.pfcp),
            "--sessions=1000".into(),
            "--period=1".into(),
            "--report-wait=1.5".into(),
            "--scapy-every=25".into(),
        ],
    ) else {
        return;
    };
    eprintln!("smf_sim: {:.1} s: {r}", t0.elapsed().as_secs_f64());
    assert_eq!(r["error_count"], 0, "{r}");
    assert_eq!(r["established"], 1000);
    assert_eq!(r["teids_unique"], true);
    assert_eq!(r["ftup"], true);
    assert!(r["heartbeats_answered_by_upf"].as_u64().unwrap() >= 2);
    // heartbeat_interval_s = 1: the UPF's own Heartbeat Requests, answered by the simulator.
    assert!(
        r["upf_heartbeat_requests"].as_u64().unwrap() as f64
            >= t0.elapsed().as_secs_f64() * 0.5 - 2.0,
        "{r}"
    );
    // Periodic reports: at least one per session (they live >= 2.5 s with a 1 s period).
    let perio = r["usage_report_triggers"]["PERIO"].as_u64().unwrap();
    assert!(perio >= 1000, "{r}");
    assert_eq!(r["usage_reports"].as_u64().unwrap(), perio);
    assert_eq!(r["deletion_usage_reports"], 1000);
    assert_eq!(r["usage_report_triggers"]["TERMR"], 1000);

    // The page refreshes once a second: wait for it to show the deletions.
    let page = wait_value(
        "the metrics page counting 1,000 Session Deletion Requests",
        Duration::from_millis(100),
        || {
            let p = scrape(d.metrics).unwrap_or_default();
            let deletions = metric(
                &p,
                "peregrine_pfcp_messages_received_total",
                &[("type", "54")],
            );
            if deletions == Some(1000.0) {
                Ok(p)
            } else {
                Err(p)
            }
        },
    );
    let rx = |t: &str| {
        metric(
            &page,
            "peregrine_pfcp_messages_received_total",
            &[("type", t)],
        )
    };
    let resp = |t: &str, c: &str| {
        metric(
            &page,
            "peregrine_pfcp_responses_total",
            &[("type", t), ("cause", c)],
        )
    };
    // Establishment / Modification / Deletion Requests (50, 52, 54), all accepted.
    for (req, rsp) in [("50", "51"), ("52", "53"), ("54", "55")] {
        assert_eq!(rx(req), Some(1000.0), "requests of type {req}\n{page}");
        assert_eq!(resp(rsp, "1"), Some(1000.0), "accepted {rsp}\n{page}");
    }
    assert_eq!(resp("6", "1"), Some(1.0), "one Association Setup accepted");
    // Session Report Responses received = Session Report Requests the simulator answered.
    let reports_sent = metric(&page, "peregrine_pfcp_reports_sent_total", &[]).unwrap();
    assert!(reports_sent >= perio as f64, "{page}");
    assert!(rx("57").unwrap() >= perio as f64);
    assert!(rx("2").unwrap() >= 1.0, "Heartbeat Responses from the SMF");
    assert_eq!(metric(&page, "peregrine_pfcp_sessions", &[]), Some(0.0));
    assert_eq!(metric(&page, "peregrine_pfcp_associations", &[]), Some(1.0));
    assert_eq!(metric(&page, "peregrine_upf_sessions", &[]), Some(64.0));
    // Publish latency quantiles: present, ordered, below a second.
    let q: Vec<f64> = ["0.5", "0.99", "1"]
        .iter()
        .map(|x| {
            metric(
                &page,
                "peregrine_rule_publish_latency_seconds",
                &[("quantile", x)],
            )
            .unwrap_or_else(|| panic!("quantile {x} missing\n{page}"))
        })
        .collect();
    assert!(
        q[0] > 0.0 && q[0] <= q[1] && q[1] <= q[2] && q[2] < 1.0,
        "{q:?}"
    );
    let publishes = metric(&page, "peregrine_rule_publishes_total", &[]).unwrap();
    assert!(
        (1.0..=3000.0).contains(&publishes),
        "one publish per burst: {publishes}"
    );
    // The workers forwarded the static sessions' traffic all along.
    assert!(metric(&page, "peregrine_port_tx_packets_total", &[("port", "n6")]).unwrap() > 0.0);

    if let Some(cap) = cap {
        // Every message the counts below need; the daemon's last ones are a moment behind.
        let (msgs, bad) = cap.finish(&[(50, 1000), (51, 1000), (55, 1000), (56, perio), (1, 2)]);
        // Both directions: what the daemon sent and what Scapy sent.
        assert!(bad.is_empty(), "tshark flags frames {bad:?}");
        let undecoded: Vec<_> = msgs.iter().filter(|m| m.1.is_empty()).collect();
        assert!(
            undecoded.is_empty(),
            "every datagram on the N4 port decodes as PFCP: {undecoded:?}"
        );
        let ours = msgs.iter().filter(|m| m.0 == d.pfcp.port()).count();
        let count = |t: &str| msgs.iter().filter(|m| m.1 == t).count();
        // Retransmitted requests (T1 on a loaded machine) appear twice; answers of every one.
        assert!(count("50") >= 1000 && count("51") >= 1000 && count("55") >= 1000);
        assert!(count("56") as u64 >= perio && count("1") >= 2);
        eprintln!(
            "tshark decoded {} PFCP messages, {ours} sent by the daemon",
            msgs.len()
        );
    }
    let (stdout, s) = d.stop();
    assert!(stdout.contains("pfcp: "), "{stdout}");
    assert_eq!(s["upf"]["sessions"], 64);
}

/// MBR end to end (TS 29.244 section 5.4.2, QER MBR; TS 23.501 section 5.7.2.5): a session
/// with an MBR of 3,840 kbit/s (480,000 bytes/s) per direction is offered about twice that
/// in each direction (1,000-byte frames at 1,000 pps per direction, 4.1 s of trace time)
/// from the first packet after the session exists. In every full 1 s window of the output
/// captures, the first included, the delivered inner bytes are within 5 % of the MBR; the
/// summary's per-QFI table counts the excess red and dropped (`mbr_exceeded`), the rest
/// forwarded.
///
/// The replay runs on its recorded clock (`replay = "recorded"`): as fast as the worker
/// polls, with the worker's clock (which the meters read) following the capture
/// timestamps, and the output pcap writer stamps each packet with its capture timestamp, so
/// the windows are the trace's seconds and the result does not depend on the machine's
/// load. (A timed replay on a loaded 2-core machine delivers late, bunched packets that a
/// 10 ms bucket rightly marks red.)
/// The policer this test was written for (10 ms bursts, red dropped): `[upf.qos]` now
/// defaults to shaping with 100 ms bursts (docs/upf.md, "MBR enforcement").
const LEGACY_POLICING: &str = "[upf.qos]\nmbr_enforcement = \"policing\"\npbs = \"10ms\"\n\
                               cbs = \"10ms\"\nmin_burst_bytes = 3200\n";

#[test]
fn mbr_is_enforced_per_second_from_the_first_second() {
    let _turn = heavy();
    const MBR_KBPS: u64 = 3840;
    const MBR_BYTES: u64 = MBR_KBPS * 1000 / 8;
    let dir = tempfile::tempdir().unwrap();
    let (ul, dl) = small_traffic(dir.path(), 1, 8200, 2000.0, 1000);
    let offered_ul = inner_lengths(&ul, true);
    let offered_dl = inner_lengths(&dl, false);
    let total_in = (offered_ul.len() + offered_dl.len()) as f64;
    let windows = 4;
    let t0 = offered_windows(&offered_ul, &offered_dl, windows, MBR_BYTES);

    let d = Daemon::spawn(
        dir.path(),
        "replay = \"recorded\"\nloops = 1",
        &ul,
        &dl,
        &format!(
            "n3 = [\"192.0.2.1\"]\n\n[upf.synthetic]\nsessions = 1\nseed = 1\nqfis = [9]\n\
             gnbs = 1\nouter = \"v4\"\nmbr_kbps = {MBR_KBPS}\n{LEGACY_POLICING}"
        ),
    );
    // The replay plays each file once; the daemon stops when both are done.
    let s = d.wait_exit(START_GUARD);
    assert_eq!(
        s["packets_in"].as_f64(),
        Some(total_in),
        "every input packet was received: {s}"
    );

    let delivered_ul = inner_lengths(&dir.path().join("n6-tx.pcap"), false);
    let delivered_dl = inner_lengths(&dir.path().join("n3-tx.pcap"), true);
    for (name, o, dlv) in [
        ("uplink", &offered_ul, &delivered_ul),
        ("downlink", &offered_dl, &delivered_dl),
    ] {
        assert_windows_at_mbr(name, dlv, t0, windows, MBR_BYTES);
        // The summary's colours: red = the excess, dropped; green + yellow = forwarded.
        let row = qfi_row(&s, name, 9);
        let n = |k: &str| row[k].as_u64().unwrap();
        assert_eq!(n("packets"), dlv.len() as u64, "{row}");
        assert_eq!(n("bytes"), dlv.iter().map(|p| p.1).sum::<u64>(), "{row}");
        assert_eq!(n("packets") + n("drops"), o.len() as u64, "{row}");
        assert_eq!(n("red"), n("drops"), "{row}");
        assert_eq!(n("green") + n("yellow"), n("packets"), "{row}");
        // About half the offered packets are over the MBR.
        let red = n("red") as f64 / o.len() as f64;
        assert!((0.4..=0.6).contains(&red), "red share {red:.3}: {row}");
    }
    let mbr_drops = s["drops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d[0] == "mbr_exceeded")
        .and_then(|d| d[1].as_u64());
    let red_total: u64 = s["upf"]["qfi"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["red"].as_u64().unwrap())
        .sum();
    assert_eq!(mbr_drops, Some(red_total), "{s}");
}
