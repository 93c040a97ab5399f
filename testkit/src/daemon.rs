//! Running the real daemon from an end-to-end test: write its config, start `peregrine run`
//! with a JSON summary, wait for a replay that ends to make it exit, and hand back what it
//! printed and summarised ([`run_to_end`]); or keep it running beside live traffic until the
//! test stops it ([`Live`]), reading its metrics page ([`scrape`], [`sample`]).

use crate::tools::Guard;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The `[[route]]` tables of most UPF daemon tests: 192.0.2.0/24 (the gNBs) out of port
/// `n3` and 198.51.100.0/24 (the data network) out of port `n6`, to the next hops of the
/// [`gnb_dn`](crate::netns::gnb_dn) rig ([`crate::netns::gnb_dn_routes`]).
pub fn n3_n6_routes() -> String {
    crate::netns::gnb_dn_routes(&["192.0.2.0/24"], &["198.51.100.0/24"])
}

/// The `[[route]]` tables that send the generated traffic's downlink ([`crate::traffic`]'s
/// UEs: 10.45.0.0/16 and 2001:db8::/32) out of port `n3` to the gNB's next hop
/// ([`crate::netns::GNB_MAC`]).
pub fn ue_routes() -> String {
    crate::netns::gnb_dn_routes(&["10.45.0.0/16", "2001:db8::/32"], &[])
}

/// Write the downlink half of a generated workload of `packets` packets with no anomalies
/// (every packet routable by [`ue_routes`]) to the pcap file `path`; how many it wrote.
pub fn write_dl(path: &Path, packets: u64) -> usize {
    let spec = crate::traffic::TrafficSpec {
        packets,
        ul_ratio: 0.0,
        anomalies: 0,
        ..crate::traffic::TrafficSpec::default()
    };
    let mut w = crate::pcap::PcapWriter::create(path).expect("create the downlink pcap");
    let mut n = 0;
    for p in crate::traffic::generate(&spec) {
        w.write(p.ts_ns, &p.frame).expect("write the downlink pcap");
        n += 1;
    }
    w.flush().expect("write the downlink pcap");
    n
}

/// A pcap backend replaying in recorded time with one port `p` (`in.pcap` -> `out.pcap` in
/// the config's directory): the head of most single-port daemon configs in tests.
pub const PCAP_ONE_PORT: &str = r#"
[backend]
kind = "pcap"
replay = "timed"

[[port]]
name = "p"
mac = "02:00:00:00:00:01"
rx = "in.pcap"
tx = "out.pcap"
"#;

/// A pcap backend (`replay` "timed" or "recorded", one pass) with the UPF's two ports: `n3`
/// (MAC `02:00:00:00:00:03`) replaying `ul`, `n6` (`02:00:00:00:00:06`) replaying `dl`, what
/// they send in `n3-tx.pcap` / `n6-tx.pcap` in the config's directory.
pub fn pcap_n3_n6(replay: &str, ul: &Path, dl: &Path) -> String {
    let (ul, dl) = (ul.display(), dl.display());
    format!(
        r#"
[backend]
kind = "pcap"
replay = "{replay}"
loops = 1

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
rx = "{ul}"
tx = "n3-tx.pcap"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
rx = "{dl}"
tx = "n6-tx.pcap"
"#
    )
}

/// The UPF sections most one-session UPF daemon tests use (append to a config): node
/// 127.0.0.1, N3 192.0.2.1, N6 198.51.100.254, one synthetic session (seed 1, QFI 9, one
/// gNB, IPv4 outer header).
pub const UPF_ONE_SESSION: &str = r#"
[upf]
node_id = "127.0.0.1"
n3 = ["192.0.2.1"]
n6 = ["198.51.100.254"]

[upf.synthetic]
sessions = 1
seed = 1
qfis = [9]
gnbs = 1
outer = "v4"
"#;

/// A daemon running in the background (`peregrine run --config dir/<name>.toml --summary-json
/// dir/summary.json`), its stdout and stderr in `dir/daemon.log`; stopped with SIGTERM when
/// dropped.
#[derive(Debug)]
pub struct Live {
    guard: Guard,
    log: PathBuf,
}

impl Live {
    /// Write `cfg` to `dir/<name>.toml` and start `bin` on it (`bin`: the test's
    /// `env!("CARGO_BIN_EXE_peregrine")`).
    pub fn start(bin: &str, dir: &Path, name: &str, cfg: &str) -> Live {
        Live::start_in(None, bin, dir, name, cfg)
    }

    /// [`start`](Self::start) inside network namespace `netns` (`ip netns exec`), if given.
    pub fn start_in(netns: Option<&str>, bin: &str, dir: &Path, name: &str, cfg: &str) -> Live {
        let cfg_path = dir.join(format!("{name}.toml"));
        std::fs::write(&cfg_path, cfg).expect("write the config");
        let log = dir.join("daemon.log");
        let out = std::fs::File::create(&log).expect("create daemon.log");
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, bin]);
                c
            }
            None => Command::new(bin),
        };
        let child = cmd
            .args(["run", "--config"])
            .arg(&cfg_path)
            .arg("--summary-json")
            .arg(dir.join("summary.json"))
            .stdout(out.try_clone().expect("clone the log handle"))
            .stderr(out)
            .spawn()
            .expect("start peregrine");
        Live {
            guard: Guard(Some(child)),
            log,
        }
    }

    /// What the daemon printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the metrics endpoint on `127.0.0.1:port` answers (the daemon binds it after
    /// N4 and the ports); panics with the log if the daemon exits or `timeout` passes first
    /// (a hang guard: [`crate::tools::START_GUARD`] unless the test has a reason).
    pub fn wait_metrics(&mut self, port: u16, timeout: Duration) {
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(st)) = self.guard.child().try_wait() {
                panic!("peregrine exited early ({st}):\n{}", self.log());
            }
            assert!(
                t0.elapsed() < timeout,
                "peregrine did not start:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stop the daemon (SIGTERM, then SIGKILL after [`crate::tools::STOP_GUARD`]) and return
    /// its exit status.
    pub fn term(&mut self) -> Option<ExitStatus> {
        self.guard.term()
    }
}

/// GET /metrics from `127.0.0.1:port`.
pub fn scrape(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect metrics");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read metrics");
    out
}

/// The value of one Prometheus sample (`name{labels}` exactly as rendered), if present.
pub fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l[series.len()..].trim().parse().ok())
}

/// Write `cfg` to `dir/upf.toml`, run `bin run --config dir/upf.toml --summary-json
/// dir/summary.json` in `dir` (`bin`: the test's `env!("CARGO_BIN_EXE_peregrine")`) until it
/// exits by itself, at most `timeout` (then it is killed and the test fails). Panics with
/// the daemon's output if it fails. Returns its stdout and the parsed summary.
pub fn run_to_end(
    bin: &str,
    dir: &Path,
    cfg: &str,
    timeout: Duration,
) -> (String, serde_json::Value) {
    let path = dir.join("upf.toml");
    std::fs::write(&path, cfg).expect("write the config");
    let mut child = Command::new(bin)
        .current_dir(dir)
        .args(["run", "--config"])
        .arg(&path)
        .arg("--summary-json")
        .arg(dir.join("summary.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the daemon");
    let t0 = Instant::now();
    while child.try_wait().expect("poll the daemon").is_none() {
        if t0.elapsed() > timeout {
            let _ = child.kill();
            panic!("the daemon did not stop after its replay");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("the daemon's output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = std::fs::read_to_string(dir.join("summary.json")).expect("the summary");
    (
        stdout,
        serde_json::from_str(&summary).expect("a JSON summary"),
    )
}
