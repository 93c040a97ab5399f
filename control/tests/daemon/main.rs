//! End to end: the real `peregrine` binary on the pcap backend and on DPDK vdevs.

use peregrine_dataplane::io::pcapfile::{PcapReader, PcapWriter, Resolution};
use peregrine_testkit::tools::{collect_lines, wait_line};
use peregrine_testkit::traffic;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_peregrine"))
}

fn read_pcap(p: &Path) -> Vec<Vec<u8>> {
    let mut r = PcapReader::open(p).unwrap();
    let mut out = vec![];
    let mut buf = vec![];
    while r.next_packet(&mut buf).unwrap().is_some() {
        out.push(buf.clone());
    }
    out
}

/// The downlink half of a generated workload, with no anomalies: every packet is routable.
fn write_dl(dir: &Path, packets: u64) -> (PathBuf, usize) {
    let path = dir.join("dl.pcap");
    let n = peregrine_testkit::daemon::write_dl(&path, packets);
    (path, n)
}

/// The l3fwd pipeline with the routes of the generated downlink.
fn l3fwd_routes() -> String {
    format!(
        "\n[pipeline]\nkind = \"l3fwd\"\n{}",
        peregrine_testkit::daemon::ue_routes()
    )
}

/// Frames in `pcap` that tshark finds wrong: a bad IPv4/UDP/TCP checksum, malformed, or any
/// expert info (TCP sequence analysis is off: generated flows are not whole conversations).
/// `None` when tshark is missing outside CI.
fn tshark_problems(pcap: &Path) -> Option<usize> {
    let out = match Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE"])
        .args(["-o", "tcp.analyze_sequence_numbers:FALSE"])
        .args(["-Y", "ip.checksum.status == 0 || udp.checksum.status == 0 || tcp.checksum.status == 0 || _ws.malformed || _ws.expert"])
        .output()
    {
        Ok(o) => o,
        Err(_) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping tshark check: tshark not found");
            return None;
        }
        Err(e) => panic!("tshark is required in CI: {e}"),
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    if !text.trim().is_empty() {
        eprintln!("{text}");
    }
    Some(text.lines().filter(|l| !l.trim().is_empty()).count())
}

/// Run `peregrine run` on `config` to completion; returns stdout and the JSON summary.
fn run_to_end(config: &Path, dir: &Path) -> (String, serde_json::Value) {
    let json = dir.join("s.json");
    let out = bin()
        .args(["run", "--config"])
        .arg(config)
        .arg("--summary-json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(&json);
    (stdout, s)
}

fn summary(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn drop_count(s: &serde_json::Value, reason: &str) -> u64 {
    s["drops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d[0] == reason)
        .map(|d| d[1].as_u64().unwrap())
        .unwrap_or(0)
}

#[test]
fn pcap_backend_routes_generated_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let (dl, n) = write_dl(dir.path(), 2000);
    let cfg = format!(
        r#"
[workers]
count = 2

[backend]
kind = "pcap"

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
tx = "n3-out.pcap"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
rx = "{}"
{routes}"#,
        dl.display(),
        routes = l3fwd_routes(),
    );
    std::fs::write(dir.path().join("p.toml"), cfg).unwrap();
    let (stdout, s) = run_to_end(&dir.path().join("p.toml"), dir.path());
    assert!(
        stdout.contains(&format!(
            "packets: in {n}, out {n}, to control 0, dropped 0"
        )),
        "{stdout}"
    );
    assert_eq!(s["packets_in"], n as u64);
    let sent = read_pcap(&dir.path().join("n3-out.pcap"));
    assert_eq!(sent.len(), n);
    // An independent decoder agrees the forwarded packets are well formed (TTL decremented
    // with an incremental checksum update, MACs rewritten, L4 untouched).
    if let Some(n) = tshark_problems(&dir.path().join("n3-out.pcap")) {
        assert_eq!(n, 0, "tshark found problems in our output");
    }
    let input = read_pcap(&dl);
    for (a, b) in input.iter().zip(&sent) {
        assert_eq!(&b[0..6], &[2, 0, 0, 0, 3, 1], "dst MAC is the next hop");
        assert_eq!(&b[6..12], &[2, 0, 0, 0, 0, 3], "src MAC is n3");
        assert_eq!(a.len(), b.len());
    }
}

#[test]
fn bad_config_names_the_field_and_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[backend]\nkind = \"pcap\"\n[[port]]\nname = \"a\"\nmac = \"nope\"\nrx = \"x\"\n[pipeline]\nkind = \"xconnect\"\npairs = [[\"a\",\"a\"]]\n", "port[0].mac"),
        ("[workers]\ncount = 0\n[backend]\nkind = \"pcap\"\n[[port]]\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\nrx = \"x\"\n[pipeline]\nkind = \"xconnect\"\npairs = [[\"a\",\"a\"]]\n", "workers.count"),
        ("[backend]\nkind = \"pcap\"\n[[port]]\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\nrx = \"/nonexistent.pcap\"\n[pipeline]\nkind = \"xconnect\"\npairs = [[\"a\",\"a\"]]\n", "nonexistent"),
        ("this is not toml", "expected"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&p, text).unwrap();
        for sub in [&["check-config"][..], &["run", "--config"][..]] {
            let out = bin().args(sub).arg(&p).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(err.contains(want), "`{err}` should mention `{want}`");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    let out = bin()
        .args(["check-config", "/nonexistent/x.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // The bundled configs are valid (p4-telemetry.toml is also what `peregrine-p4 entries`
    // generates the TNA telemetry program's entries from).
    for example in ["quickstart.toml", "p4-telemetry.toml"] {
        let out = bin()
            .args(["check-config"])
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../examples")
                    .join(example),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{example}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn sigterm_stops_a_live_run_and_prints_final_counters() {
    let dir = tempfile::tempdir().unwrap();
    let (dl, _) = write_dl(dir.path(), 100);
    // loops = 0 replays forever: only the signal ends the run.
    let cfg = format!(
        "[backend]\nkind = \"pcap\"\nloops = 0\n[[port]]\nname = \"n3\"\nmac = \"02:00:00:00:00:03\"\ntx = \"o.pcap\"\n[[port]]\nname = \"n6\"\nmac = \"02:00:00:00:00:06\"\nrx = \"{}\"\n{routes}",
        dl.display(),
        routes = l3fwd_routes(),
    );
    std::fs::write(dir.path().join("p.toml"), cfg).unwrap();
    let mut child = bin()
        .args(["run", "--config"])
        .arg(dir.path().join("p.toml"))
        .args(["--stats-interval", "0.05"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The signal once the run has forwarded something (its counters say so), not after a
    // fixed pause: a daemon still loading its config under load would die of the default
    // SIGTERM action instead of stopping.
    let log = collect_lines(child.stderr.take().unwrap());
    wait_line(&log, 0, "with counters tx > 0", |l| counter(l, "tx") > 0);
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        log.lock().unwrap().join("\n")
    );
    assert!(stdout.contains("packets: in "), "{stdout}");
    assert!(
        !stdout.contains("packets: in 0,"),
        "it forwarded something before the signal: {stdout}"
    );
}

/// DPDK `net_pcap` vdevs: the real DPDK ethdev path (EAL, mempools, queues, mbufs) fed by a
/// pcap, without hugepages.
#[test]
fn dpdk_net_pcap_vdevs_route_generated_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let (dl, n) = write_dl(dir.path(), 3000);
    let out_pcap = dir.path().join("n3-out.pcap");
    let sink = dir.path().join("n6-out.pcap");
    let cfg = format!(
        r#"
[workers]
count = 1
stop_after_idle_ms = 300

[backend]
kind = "dpdk"
eal_args = ["--no-huge", "--no-pci", "-m", "256", "--no-shconf", "--no-telemetry", "-l", "0",
            "--vdev=net_pcap0,tx_pcap={}", "--vdev=net_pcap1,rx_pcap={},tx_pcap={}"]
rx_desc = 512
tx_desc = 512
mbufs_per_worker = 4095
mbuf_cache = 128

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
device = "net_pcap0"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
device = "net_pcap1"
{routes}"#,
        out_pcap.display(),
        dl.display(),
        sink.display(),
        routes = l3fwd_routes(),
    );
    std::fs::write(dir.path().join("d.toml"), cfg).unwrap();
    let (stdout, s) = run_to_end(&dir.path().join("d.toml"), dir.path());
    assert_eq!(s["packets_in"], n as u64, "{stdout}");
    assert_eq!(s["packets_out"], n as u64, "{stdout}");
    assert_eq!(
        s["ports"][1]["stats_ipackets"], n as u64,
        "rte_eth_stats agree"
    );
    assert_eq!(s["ports"][0]["driver"], "net_pcap");
    assert_eq!(drop_count(&s, "no_route"), 0);
    let sent = read_pcap(&out_pcap);
    assert_eq!(sent.len(), n);
    assert!(sent.iter().all(|f| f[0..6] == [2, 0, 0, 0, 3, 1]));
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The bundled traffic is exactly what `pg-gen --preset quickstart` makes.
#[test]
fn bundled_quickstart_traffic_is_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let spec = traffic::Preset::Quickstart.spec();
    traffic::write_pcaps(
        &spec,
        dir.path().join("ul.pcap"),
        dir.path().join("dl.pcap"),
    )
    .unwrap();
    for (ours, bundled) in [
        ("ul.pcap", "quickstart-ul.pcap"),
        ("dl.pcap", "quickstart-dl.pcap"),
    ] {
        let a = std::fs::read(dir.path().join(ours)).unwrap();
        let b = std::fs::read(repo().join("examples/traffic").join(bundled)).unwrap();
        assert!(a == b, "{bundled} differs from the generator's output: regenerate it (see examples/quickstart.toml)");
    }
}

/// The README's main job: the quickstart config, as shipped, accounts for every packet.
#[test]
fn quickstart_job_accounts_for_every_packet() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, s) = run_to_end(&repo().join("examples/quickstart.toml"), dir.path());
    assert!(stdout.contains("dropped by reason:"), "{stdout}");
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("examples/traffic/quickstart.json")).unwrap(),
    )
    .unwrap();
    let anomalies = &m["counts"]["anomalies"];
    let both =
        |k: &str| anomalies[k]["ul"].as_u64().unwrap() + anomalies[k]["dl"].as_u64().unwrap();
    assert_eq!(s["packets_in"], 10_000);
    assert_eq!(
        s["packets_in"].as_u64().unwrap(),
        s["packets_out"].as_u64().unwrap()
            + s["dropped"].as_u64().unwrap()
            + s["to_control"].as_u64().unwrap()
    );
    // The generator's labelled anomalies land on the named reasons.
    assert_eq!(
        drop_count(&s, "ipv4_bad_checksum"),
        both("bad_ipv4_checksum")
    );
    assert_eq!(
        drop_count(&s, "unsupported_ethertype"),
        both("unknown_ethertype")
    );
    assert_eq!(
        drop_count(&s, "ipv4_truncated") + drop_count(&s, "ipv6_truncated"),
        both("truncated")
    );
    assert_eq!(s["to_control"], both("arp_request"));
    // Every ARP request for our N3 address is answered (through a worker, before it stops).
    assert_eq!(s["injected"], both("arp_request"));
    // The UPF opens the tunnel: inner TTL-1 and no-route anomalies count in both directions.
    assert_eq!(drop_count(&s, "ttl_exceeded"), both("ttl1"));
    assert_eq!(
        drop_count(&s, "no_route"),
        anomalies["no_route"]["ul"].as_u64().unwrap()
    );
    // Downlink to an address that is no UE's has no session.
    assert_eq!(
        drop_count(&s, "downlink_no_session"),
        anomalies["no_route"]["dl"].as_u64().unwrap()
    );
    // Echo Requests are answered, unknown TEIDs get Error Indications (TS 29.281 7.2, 7.3).
    assert_eq!(s["upf"]["echo_replies"], both("echo_request"));
    assert_eq!(s["upf"]["error_indications_sent"], both("unknown_teid"));
    assert_eq!(s["upf"]["sessions"], 64);
    assert!(stdout.contains("per QFI"), "{stdout}");
    // Per-QFI counts add up to what was forwarded or dropped in sessions.
    let per_qfi: u64 = s["upf"]["qfi"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["packets"].as_u64().unwrap())
        .sum();
    let replies = both("echo_request") + both("unknown_teid");
    assert_eq!(per_qfi + replies, s["packets_out"].as_u64().unwrap());
    // tshark, an independent decoder, finds every byte we sent well-formed, and every
    // downlink G-PDU carries a PDU Session Container with a QFI.
    for f in ["n3-tx.pcap", "n6-tx.pcap"] {
        if let Some(n) = tshark_problems(&repo().join("out").join(f)) {
            assert_eq!(n, 0, "{f}: tshark found problems");
        }
    }
    if let Some(fields) = tshark_fields(
        &repo().join("out/n3-tx.pcap"),
        "gtp.message == 255",
        &["gtp.teid", "gtp.ext_hdr.pdu_ses_con.qos_flow_id"],
    ) {
        let dl = s["ports"][0]["tx"].as_u64().unwrap() - replies;
        assert_eq!(fields.len() as u64, dl);
        assert!(
            fields.iter().all(|r| r[0] != "0" && !r[1].is_empty()),
            "{fields:?}"
        );
    }
}

/// tshark's values of `fields` for the frames of `pcap` matching `filter`; `None` when tshark
/// is missing outside CI.
fn tshark_fields(pcap: &Path, filter: &str, fields: &[&str]) -> Option<Vec<Vec<String>>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(pcap).args(["-Y", filter, "-T", "fields"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(_) if std::env::var_os("CI").is_none() => return None,
        Err(e) => panic!("tshark is required in CI: {e}"),
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split('\t').map(str::to_string).collect())
            .collect(),
    )
}

/// The value of `key=N` in a daemon's `counters` log line (`--stats-interval`), 0 in any
/// other line.
fn counter(line: &str, key: &str) -> u64 {
    if !line.contains("counters") {
        return 0;
    }
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.trim_end_matches(',').parse().ok())
        .unwrap_or(0)
}

/// SIGHUP publishes a new route table to running workers (snapshot swap): traffic that had
/// no route starts flowing, nothing is lost in between, and a bad reload keeps the old table.
#[test]
fn sighup_publishes_new_routes_under_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let (dl, _) = write_dl(dir.path(), 500);
    let head = format!(
        "[backend]\nkind = \"pcap\"\nloops = 0\n[[port]]\nname = \"n3\"\nmac = \"02:00:00:00:00:03\"\ntx = \"o.pcap\"\n[[port]]\nname = \"n6\"\nmac = \"02:00:00:00:00:06\"\nrx = \"{}\"\n[pipeline]\nkind = \"l3fwd\"\n",
        dl.display()
    );
    let nowhere = "[[route]]\nprefix = \"203.0.113.0/24\"\nport = \"n3\"\nnext_hop_mac = \"02:00:00:00:03:01\"\n";
    let cfg = dir.path().join("p.toml");
    std::fs::write(&cfg, format!("{head}{nowhere}")).unwrap();
    let mut child = bin()
        .args(["run", "--config"])
        .arg(&cfg)
        .arg("--summary-json")
        .arg(dir.path().join("s.json"))
        .args(["--stats-interval", "0.05"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let signal = |sig: &str| {
        assert!(Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success())
    };
    // Each step waits for the daemon's log to show the state it needs (the wall clock only
    // a hang guard): traffic counted with no route, then each reload's outcome, then
    // packets forwarded.
    let log = collect_lines(child.stderr.take().unwrap());
    let mut at = wait_line(&log, 0, "with counters dropped > 0", |l| {
        counter(l, "dropped") > 0
    });
    // A broken file is refused; the running table stays.
    std::fs::write(&cfg, format!("{head}[[route]]\nprefix = \"10.45.0.0/99\"\nport = \"n3\"\nnext_hop_mac = \"02:00:00:00:03:01\"\n")).unwrap();
    signal("-HUP");
    at = wait_line(&log, at, "saying the reload was refused", |l| {
        l.contains("reload refused")
    });
    std::fs::write(
        &cfg,
        format!("{head}{nowhere}{}", peregrine_testkit::daemon::ue_routes()),
    )
    .unwrap();
    signal("-HUP");
    at = wait_line(&log, at, "saying the routes were published", |l| {
        l.contains("routes published")
    });
    wait_line(&log, at, "with counters tx > 0 after the reload", |l| {
        counter(l, "tx") > 0
    });
    signal("-TERM");
    let out = child.wait().unwrap();
    let stderr = log.lock().unwrap().join("\n");
    assert!(out.success(), "{stderr}");
    let s = summary(&dir.path().join("s.json"));
    let (pin, pout, dropped) = (
        s["packets_in"].as_u64().unwrap(),
        s["packets_out"].as_u64().unwrap(),
        s["dropped"].as_u64().unwrap(),
    );
    assert!(
        drop_count(&s, "no_route") > 0,
        "before the reload nothing routed"
    );
    assert!(pout > 0, "after the reload traffic flows: {s}");
    assert_eq!(pin, pout + dropped, "every packet accounted for");
    assert_eq!(
        dropped,
        drop_count(&s, "no_route"),
        "the only drops are the pre-reload no-routes"
    );
}

/// The README's claim: the same job on the DPDK ethdev path (net_pcap vdevs, no hugepages)
/// gives the same counts as the pure-Rust pcap backend.
#[test]
fn dpdk_pcap_example_matches_the_quickstart() {
    let dir = tempfile::tempdir().unwrap();
    // The quickstart config with its outputs in the temporary directory (the quickstart test
    // reads the repository's out/ files).
    let qs = std::fs::read_to_string(repo().join("examples/quickstart.toml"))
        .unwrap()
        .replace(
            "\"traffic/",
            &format!("\"{}/examples/traffic/", repo().display()),
        )
        .replace("\"../out/", &format!("\"{}/", dir.path().display()));
    std::fs::write(dir.path().join("q.toml"), qs).unwrap();
    let (_, pcap) = run_to_end(&dir.path().join("q.toml"), dir.path());
    // dpdk-pcap.toml's paths are relative to the repository root, where the README runs it
    // (after the quickstart, which makes out/; net_pcap does not create directories).
    std::fs::create_dir_all(repo().join("out")).unwrap();
    let json = dir.path().join("d.json");
    let out = bin()
        .current_dir(repo())
        .args([
            "run",
            "--config",
            "examples/dpdk-pcap.toml",
            "--summary-json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dpdk = summary(&json);
    for k in [
        "packets_in",
        "packets_out",
        "to_control",
        "dropped",
        "drops",
    ] {
        assert_eq!(pcap[k], dpdk[k], "{k}");
    }
    assert_eq!(pcap["upf"]["qfi"], dpdk["upf"]["qfi"]);
    assert_eq!(dpdk["ports"][0]["driver"], "net_pcap");
}

mod upf;
