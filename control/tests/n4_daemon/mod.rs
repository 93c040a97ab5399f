//! The `peregrine` daemon as the N4 end-to-end tests run it (pcap backend, a looping timed
//! replay through static sessions so the workers are busy), and the tools around it: the
//! Prometheus page, the Scapy scripts in `smf/`, a small workload. Shared by `n4.rs` and
//! `n4_hostile.rs`; each uses part of it.
#![allow(dead_code)]

use peregrine_testkit::traffic::{self, IpMix, Sizes, TrafficSpec};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tests of this file take turns: on a 2-core machine the 1,000-session run (daemon,
/// Scapy, tshark) or the hostile suite starves the MBR test's timed replay, whose late,
/// bunched packets then find the meter's 10 ms bucket full and are dropped as red.
pub static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub use peregrine_testkit::tools::{
    free_tcp_port as free_tcp, free_udp_port as free_udp, in_ci, START_GUARD,
};

/// The gNBs (192.0.2.0/24, 2001:db8:3::/48, 192.168.1.0/24) out of n3, the data network
/// (198.51.100.0/24, 2001:db8:6::/48) out of n6.
pub fn routes() -> String {
    peregrine_testkit::netns::gnb_dn_routes(
        &["192.0.2.0/24", "2001:db8:3::/48", "192.168.1.0/24"],
        &["198.51.100.0/24", "2001:db8:6::/48"],
    )
}

/// A `peregrine run` child; SIGTERM on drop.
pub struct Daemon {
    child: Option<Child>,
    dir: PathBuf,
    pub pfcp: SocketAddr,
    pub metrics: SocketAddr,
}

impl Daemon {
    /// Start the UPF with `backend` (the `[backend]` body), ports replaying `ul`/`dl`, and
    /// `upf` appended to the `[upf]` section; waits for the first metrics page with the N4
    /// counters (the daemon serves it once N4 and the ports are up). The wall clock is only
    /// a hang guard ([`START_GUARD`]); a daemon that exits, or passes it, fails the test with
    /// what it printed.
    pub fn start(dir: &Path, backend: &str, ul: &Path, dl: &Path, upf: &str) -> Daemon {
        let mut d = Daemon::spawn(dir, backend, ul, dl, upf);
        let t0 = Instant::now();
        while scrape(d.metrics).is_none_or(|p| !p.contains("peregrine_pfcp_sessions")) {
            let exited = d.child.as_mut().unwrap().try_wait().unwrap();
            if exited.is_some() || t0.elapsed() > START_GUARD {
                let mut c = d.child.take().unwrap();
                let _ = c.kill();
                let out = c.wait_with_output().unwrap();
                panic!(
                    "the daemon's metrics page http://{}/metrics did not show \
                     peregrine_pfcp_sessions ({}); it printed:\n{}\n{}",
                    d.metrics,
                    exited.map_or(format!("hang guard {START_GUARD:?} passed"), |st| {
                        format!("it exited: {st}")
                    }),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    /// [`Daemon::start`] without waiting for it (a short replay may be over at once).
    pub fn spawn(dir: &Path, backend: &str, ul: &Path, dl: &Path, upf: &str) -> Daemon {
        let pfcp: SocketAddr = format!("127.0.0.1:{}", free_udp()).parse().unwrap();
        let metrics: SocketAddr = format!("127.0.0.1:{}", free_tcp()).parse().unwrap();
        let cfg = format!(
            r#"
[workers]
count = 1

[backend]
kind = "pcap"
{backend}

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
rx = "{}"
tx = "n3-tx.pcap"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
rx = "{}"
tx = "n6-tx.pcap"

[pipeline]
kind = "upf"
{routes}
[upf]
node_id = "127.0.0.1"
n6 = ["198.51.100.254", "2001:db8:6::fe"]
pfcp = ["{pfcp}"]
metrics = "{metrics}"
{upf}
"#,
            ul.display(),
            dl.display(),
            routes = routes(),
        );
        let path = dir.join("upf.toml");
        std::fs::write(&path, cfg).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_peregrine"))
            .args(["run", "--config"])
            .arg(&path)
            .arg("--summary-json")
            .arg(dir.join("summary.json"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Daemon {
            child: Some(child),
            dir: dir.to_path_buf(),
            pfcp,
            metrics,
        }
    }

    /// SIGTERM, wait; stdout and the JSON summary.
    pub fn stop(mut self) -> (String, serde_json::Value) {
        let child = self.child.take().unwrap();
        let st = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("summary.json")).unwrap())
                .unwrap();
        (stdout, s)
    }
}

impl Daemon {
    /// Wait for a daemon whose replay ends (`loops = 1`) to exit by itself; the JSON summary.
    /// `timeout` is a hang guard (pass [`START_GUARD`]), not a run-time budget.
    pub fn wait_exit(mut self, timeout: Duration) -> serde_json::Value {
        let mut child = self.child.take().unwrap();
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if t0.elapsed() > timeout {
                let _ = child.kill();
                panic!("the daemon did not stop after its replay ({timeout:?})");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        assert!(
            status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&std::fs::read_to_string(self.dir.join("summary.json")).unwrap())
            .unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `GET /metrics`; `None` while nothing listens.
pub fn scrape(addr: SocketAddr) -> Option<String> {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    let (_, body) = s.split_once("\r\n\r\n")?;
    Some(body.to_string())
}

/// The sample of `name` whose labels include every `labels` pair.
pub fn metric(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    page.lines().find_map(|l| {
        let (head, v) = l.rsplit_once(' ')?;
        let (n, rest) = head.split_once('{').unwrap_or((head, ""));
        if n != name {
            return None;
        }
        labels
            .iter()
            .all(|(k, want)| rest.contains(&format!("{k}=\"{want}\"")))
            .then(|| v.parse().ok())?
    })
}

/// Run a helper script from `smf/`; its JSON output. `None` (skip) when python3 or Scapy is
/// missing outside CI (the scripts exit 3 without Scapy).
pub fn python(script: &str, args: &[String]) -> Option<serde_json::Value> {
    let out = match Command::new("python3")
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/smf")
                .join(script),
        )
        .args(args)
        .output()
    {
        Ok(o) => o,
        Err(e) if !in_ci() => {
            eprintln!("skipping: python3 not found ({e})");
            return None;
        }
        Err(e) => panic!("python3 is required in CI: {e}"),
    };
    if out.status.code() == Some(3) {
        assert!(!in_ci(), "Scapy is required in CI");
        eprintln!("skipping: Scapy not installed");
        return None;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{script}: no JSON ({e}):\n{stdout}\n{stderr}"));
    Some(v)
}

/// A small pg-gen workload (IPv4 only, no anomalies) for `ues` UEs, replayed in real time.
pub fn small_traffic(
    dir: &Path,
    ues: u32,
    packets: u64,
    rate_pps: f64,
    size: u16,
) -> (PathBuf, PathBuf) {
    let spec = TrafficSpec {
        ues,
        packets,
        sizes: Sizes::Fixed(vec![size]),
        ul_ratio: 0.5,
        inner: IpMix::V4,
        outer: IpMix::V4,
        qfis: vec![9],
        gnbs: 1,
        anomalies: 0,
        rate_pps: Some(rate_pps),
        ..TrafficSpec::default()
    };
    let (ul, dl) = (dir.join("ul.pcap"), dir.join("dl.pcap"));
    traffic::write_pcaps(&spec, &ul, &dl).unwrap();
    (ul, dl)
}
