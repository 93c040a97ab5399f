//! Kernel TCP and UDP through the real `peregrine` daemon in network namespaces, for the MBR
//! tests (`control/tests/tcp_mbr.rs`) and the goodput experiment (`pg-tcp-mbr`).
//!
//! ```text
//!  netns gnb                                   root namespace                     netns dn
//!  UE 10.45.0.2 on TUN <-> GtpGnb [ g ]=veth=[ n3 ]-net_af_packet0 peregrine net_af_packet1-[ n6 ]=veth=[ d ]
//!                          192.0.2.10        N3 192.0.2.1          N6 198.51.100.254      198.51.100.10
//! ```
//!
//! One static session (UE 10.45.0.2, MBR both ways); the UE's sockets run in the gNB's
//! namespace, bound to the UE address, so the kernel routes them through the TUN device and
//! the gNB ([`crate::gnb`]) carries them in GTP-U. The data network is plain kernel TCP/UDP.
//!
//! With [`RigConfig::dn_impair`], a second `peregrine` process of pipeline kind `impair`
//! sits between the UPF's n6 and the data network in its own namespace (`n6 = h6 [impair] h7 = d`,
//! [`crate::netns::gnb_dn_via`]): the server side's delay, loss or rate, made by our own
//! impairment stage since `tc netem` is not available.

use crate::daemon::Live;
use crate::gnb::{in_netns, GnbConfig, GtpGnb};
use crate::netns::{RigSide, Topology};
use crate::tools::{run, Guard};
use nix::sys::socket::{
    bind, connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use crate::netns::{DN_MAC, GNB_MAC, N3_MAC, N6_MAC};
pub const N3: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
pub const GNB: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
pub const N6: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 254);
pub const DN: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);
pub const UE: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 2);
const UL_TEID: u32 = 0x100;
const DL_TEID: u32 = 0x200;
/// The UE's MTU: a full inner packet plus GTP-U (16), UDP and IPv4 fits 1500 on N3.
pub const UE_MTU: u16 = 1400;
/// Receivers measure from this long after the first byte (slow start, the shaper's burst).
pub const WARMUP: Duration = Duration::from_secs(1);

/// What differs between runs.
#[derive(Debug, Clone)]
pub struct RigConfig {
    /// The `peregrine` binary.
    pub daemon: PathBuf,
    /// The session's MBR, both directions.
    pub mbr_kbps: u64,
    /// Lines of `[upf.qos]` (empty: the defaults).
    pub qos: String,
    /// How the veths' checksum offload is dealt with.
    pub offload: Offload,
    /// Sections appended to the daemon's config (e.g. `[fridge]`); empty: none.
    pub extra: String,
    /// One-way delay the gNB adds to uplink packets (a radio leg); zero: none.
    pub ul_delay: Duration,
    /// The link sections (`[pipeline.forward]` towards the data network,
    /// `[pipeline.reverse]` back) of an `impair` daemon put between the UPF's n6 and the data
    /// network; `None`: n6 is wired to the data network directly.
    pub dn_impair: Option<String>,
}

impl RigConfig {
    /// `daemon` with one session at `mbr_kbps` both ways, default `[upf.qos]`, veth
    /// offloads off, nothing extra and no radio delay.
    pub fn new(daemon: PathBuf, mbr_kbps: u64) -> RigConfig {
        RigConfig {
            daemon,
            mbr_kbps,
            qos: String::new(),
            offload: Offload::Off,
            extra: String::new(),
            ul_delay: Duration::ZERO,
            dn_impair: None,
        }
    }
}

/// The median of measured durations in nanoseconds (the upper one of an even count; `v` not
/// empty): what the live tests compare the fridge's quantiles with.
pub fn median_ns(v: &[Duration]) -> f64 {
    let mut ns: Vec<f64> = v.iter().map(|d| d.as_nanos() as f64).collect();
    ns.sort_by(f64::total_cmp);
    ns[ns.len() / 2]
}

/// Why the rig cannot be built on this machine (root, `ip netns`, ethtool, /dev/net/tun), or
/// `None` when it can.
pub fn missing_prerequisite() -> Option<&'static str> {
    if !crate::tools::is_root() {
        return Some("not root");
    }
    if run(&["ip", "netns", "list"]).is_err() {
        return Some("no `ip netns`");
    }
    if run(&["ethtool", "--version"]).is_err() {
        return Some("no ethtool (scripts/deps.sh --test installs it)");
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun");
    }
    None
}

/// Veth offloads (docs/upf.md, "Checksum offload on veths").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// `ethtool -K <dev> tx off rx off` on all four veth ends (the README's advice).
    Off,
    /// Checksum offload left on; the DN's veth only stops segmentation offload
    /// (`tso off gso off`: `net_af_packet` truncates 64 kB GSO frames, `ipv4_truncated`) and
    /// the UPF completes the partial checksums on n6 (`fix_l4_checksums`).
    FixInUpf,
}

/// The rig: namespaces, daemon, gNB. Dropping it tears everything down.
#[derive(Debug)]
pub struct Rig {
    // Field order is drop order: the gNB and the daemons go before the namespaces.
    gnb: GtpGnb,
    daemon: Guard,
    /// The `impair` daemon between n6 and the data network, if any.
    hop: Option<Live>,
    topo: Topology,
    dir: PathBuf,
}

/// Uplink (UE to DN) or downlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Ul,
    Dl,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::Ul => "UL",
            Dir::Dl => "DL",
        }
    }
}

/// A transfer's result at the receiver.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Payload bytes per second after [`WARMUP`].
    pub goodput: f64,
    /// The same as IP bytes (headers included): what the MBR counts.
    pub ip_rate: f64,
    /// Payload bytes received in all.
    pub bytes: u64,
}

/// The UE `ue` on the gNB's TUN device `tun` in namespace `gnb_ns` ([`GtpGnb`]): its
/// address there, and the data network (198.51.100.0/24) routed into the tunnel from it.
pub fn ue_on_tun(t: &Topology, gnb_ns: &str, tun: &str, ue: Ipv4Addr) -> Result<(), String> {
    t.ip(gnb_ns, &["addr", "add", &format!("{ue}/32"), "dev", tun])?;
    t.ip(
        gnb_ns,
        &[
            "route",
            "add",
            "198.51.100.0/24",
            "dev",
            tun,
            "src",
            &ue.to_string(),
        ],
    )?;
    Ok(())
}

fn setup(t: &mut Topology, hop: bool) -> Result<(), String> {
    let (gnb, dn) = (format!("{GNB}/24"), format!("{DN}/24"));
    let (n3, n6) = (N3.to_string(), N6.to_string());
    crate::netns::gnb_dn_via(
        t,
        RigSide {
            addrs: &[&gnb],
            upf: &[&n3],
        },
        RigSide {
            addrs: &[&dn],
            upf: &[&n6],
        },
        hop,
    )?;
    t.ip(&t.ns("dn"), &["route", "add", "10.45.0.0/16", "via", &n6])?;
    Ok(())
}

fn config(t: &Topology, cfg: &RigConfig) -> String {
    let fix = match cfg.offload {
        Offload::Off => "",
        Offload::FixInUpf => "fix_l4_checksums = [\"n6\"]",
    };
    let backend =
        crate::netns::gnb_dn_backend(t, ["net_af_packet", "net_af_packet"], 1024, 8191, 256);
    format!(
        r#"{backend}
[pipeline]
kind = "upf"

[upf]
node_id = "127.0.0.1"
n3 = ["{N3}"]
n6 = ["{N6}"]
max_sessions = 16
{fix}

[upf.qos]
{qos}

[[upf.session]]
seid = 1
ue_ipv4 = "{UE}"
ul_teid = {UL_TEID}
gnb = "{GNB}"
dl_teid = {DL_TEID}
qfi = 9
mbr_ul_kbps = {mbr}
mbr_dl_kbps = {mbr}

[[route]]
prefix = "192.0.2.0/24"
port = "n3"
next_hop_mac = "{GNB_MAC}"

[[route]]
prefix = "198.51.100.0/24"
port = "n6"
next_hop_mac = "{DN_MAC}"

{extra}
"#,
        qos = cfg.qos,
        mbr = cfg.mbr_kbps,
        extra = cfg.extra,
    )
}

/// A TCP connection from address `src` (any port) to `dst`, with congestion control `cc`
/// if given: the stream and how long `connect` took (SYN sent to SYN-ACK received).
fn connect_from(
    src: Ipv4Addr,
    dst: SocketAddrV4,
    cc: Option<&str>,
) -> std::io::Result<(TcpStream, Duration)> {
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )?;
    if let Some(cc) = cc {
        setsockopt(&fd, sockopt::TcpCongestion, &OsString::from(cc))?;
    }
    bind(fd.as_raw_fd(), &SockaddrIn::from(SocketAddrV4::new(src, 0)))?;
    let t = Instant::now();
    connect(fd.as_raw_fd(), &SockaddrIn::from(dst))?;
    Ok((TcpStream::from(fd), t.elapsed()))
}

impl Rig {
    /// Build the namespaces, start the daemon (wait until it forwards) and the gNB. `dir`
    /// holds the config, the log and the summary.
    pub fn start(cfg: &RigConfig, tag: &str, dir: &Path) -> Result<Rig, String> {
        let mut topo = Topology::new(Topology::unique_prefix(tag));
        setup(&mut topo, cfg.dn_impair.is_some())?;
        let (gnb, dn) = (topo.ns("gnb"), topo.ns("dn"));
        let ends = match cfg.offload {
            Offload::Off => vec![
                (None, topo.dev("n3"), "tx off rx off"),
                (None, topo.dev("n6"), "tx off rx off"),
                (Some(&gnb), topo.dev("g"), "tx off rx off"),
                (Some(&dn), topo.dev("d"), "tx off rx off"),
            ],
            Offload::FixInUpf => vec![(Some(&dn), topo.dev("d"), "tso off gso off")],
        };
        let mut ends = ends;
        let hop_ns = topo.ns("hop");
        if cfg.dn_impair.is_some() {
            for h in ["h6", "h7"] {
                ends.push((Some(&hop_ns), topo.dev(h), "tx off rx off"));
            }
        }
        for (ns, dev, what) in ends {
            let mut args = vec![];
            if let Some(ns) = ns {
                args.extend(["ip", "netns", "exec", ns.as_str()]);
            }
            args.extend(["ethtool", "-K", dev.as_str()]);
            args.extend(what.split(' '));
            run(&args)?;
        }
        // The hop first: the readiness probe below crosses it too.
        let hop = match &cfg.dn_impair {
            Some(links) => {
                let hop_dir = dir.join("impair");
                std::fs::create_dir_all(&hop_dir).map_err(|e| e.to_string())?;
                let conf = format!(
                    "{}\n[pipeline]\nkind = \"impair\"\nports = [\"up\", \"down\"]\n\n{links}\n",
                    crate::netns::gnb_dn_hop_backend(&topo)
                );
                let bin = cfg.daemon.to_str().ok_or("daemon path is not UTF-8")?;
                Some(Live::start_in(
                    Some(&hop_ns),
                    bin,
                    &hop_dir,
                    "impair",
                    &conf,
                ))
            }
            None => None,
        };
        let cfg_path = dir.join("tcp-mbr.toml");
        std::fs::write(&cfg_path, config(&topo, cfg)).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("daemon.log")).map_err(|e| e.to_string())?;
        let daemon = Guard(Some(
            Command::new(&cfg.daemon)
                .args(["run", "--config"])
                .arg(&cfg_path)
                .arg("--summary-json")
                .arg(dir.join("summary.json"))
                .stdout(log.try_clone().map_err(|e| e.to_string())?)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("start {}: {e}", cfg.daemon.display()))?,
        ));
        let gnb_ns = topo.ns("gnb");
        let tun = topo.dev("tun");
        let gnb = GtpGnb::start(
            GnbConfig {
                netns: gnb_ns.clone(),
                tun: tun.clone(),
                local: SocketAddrV4::new(GNB, 2152),
                upf: SocketAddrV4::new(N3, 2152),
                ul_teid: UL_TEID,
                dl_teid: DL_TEID,
                qfi: 9,
                ul_delay: cfg.ul_delay,
            },
            UE_MTU,
        )
        .map_err(|e| format!("gNB: {e}"))?;
        ue_on_tun(&topo, &gnb_ns, &tun, UE)?;
        let mut rig = Rig {
            gnb,
            daemon,
            hop,
            topo,
            dir: dir.to_path_buf(),
        };
        // Ready when a datagram crosses the UPF (the daemon takes a moment to open ports).
        let got = in_netns(&rig.topo.ns("dn"), || {
            let s = UdpSocket::bind(SocketAddrV4::new(DN, 5299))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            let mut b = [0u8; 64];
            s.recv(&mut b)
        });
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let halt = stop.clone();
        let probe = in_netns(&gnb_ns, move || {
            let s = UdpSocket::bind(SocketAddrV4::new(UE, 0))?;
            while !halt.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = s.send_to(b"ready?", SocketAddrV4::new(DN, 5299));
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(())
        });
        let ready = got.join();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = probe.join();
        if !matches!(ready, Ok(Ok(_))) {
            if let Ok(Some(st)) = rig.daemon.child().try_wait() {
                return Err(format!("peregrine exited ({st}):\n{}", rig.log()));
            }
            if let Some(h) = &rig.hop {
                return Err(format!(
                    "nothing crossed the UPF and the impair hop in 30 s:\n{}\nimpair hop:\n{}",
                    rig.log(),
                    h.log()
                ));
            }
            return Err(format!("nothing crossed the UPF in 30 s:\n{}", rig.log()));
        }
        Ok(rig)
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    /// Stop the daemon and return its summary (JSON).
    pub fn finish(self) -> Result<serde_json::Value, String> {
        self.finish_all().map(|(upf, _)| upf)
    }

    /// Stop the UPF daemon, then the impair hop if there is one, and return their summaries.
    pub fn finish_all(mut self) -> Result<(serde_json::Value, Option<serde_json::Value>), String> {
        self.gnb.stop();
        let st = self.daemon.term().ok_or("daemon not running")?;
        if !st.success() {
            return Err(format!("peregrine: {st}\n{}", self.log()));
        }
        let read = |p: &Path| -> Result<serde_json::Value, String> {
            let s = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            serde_json::from_str(&s).map_err(|e| e.to_string())
        };
        let upf = read(&self.dir.join("summary.json"))?;
        let hop = match self.hop.as_mut() {
            Some(h) => {
                let st = h.term().ok_or("impair hop not running")?;
                if !st.success() {
                    return Err(format!("impair hop: {st}\n{}", h.log()));
                }
                Some(read(&self.dir.join("impair").join("summary.json"))?)
            }
            None => None,
        };
        Ok((upf, hop))
    }

    fn ends(&self, dir: Dir) -> (String, String, Ipv4Addr, Ipv4Addr) {
        let (gnb, dn) = (self.topo.ns("gnb"), self.topo.ns("dn"));
        match dir {
            Dir::Ul => (gnb, dn, UE, DN),
            Dir::Dl => (dn, gnb, DN, UE),
        }
    }

    /// One TCP connection with congestion control `cc` sending for `secs` in direction `dir`.
    pub fn tcp(&self, dir: Dir, cc: &str, secs: f64) -> Result<Measured, String> {
        let (src_ns, dst_ns, src, dst) = self.ends(dir);
        let port = 5201;
        let (ready_tx, ready_rx) = mpsc::channel();
        let sink = in_netns(&dst_ns, move || {
            let l = TcpListener::bind(SocketAddrV4::new(dst, port))?;
            let _ = ready_tx.send(());
            let (mut s, _) = l.accept()?;
            let mut buf = vec![0u8; 1 << 16];
            let mut got = Vec::new();
            let mut t0 = None;
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                let t = *t0.get_or_insert_with(Instant::now);
                got.push((t.elapsed(), n as u64));
            }
            Ok(got)
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "TCP sink did not start".to_string())?;
        let cc = cc.to_string();
        let dur = Duration::from_secs_f64(secs);
        let source = in_netns(&src_ns, move || {
            let (mut s, _) = connect_from(src, SocketAddrV4::new(dst, port), Some(&cc))?;
            let buf = vec![0x5au8; 1 << 16];
            let t0 = Instant::now();
            while t0.elapsed() < dur {
                s.write_all(&buf)?;
            }
            s.shutdown(std::net::Shutdown::Write)?;
            Ok(())
        });
        let sent = source.join().map_err(|_| "TCP source panicked")?;
        let got = sink
            .join()
            .map_err(|_| "TCP sink panicked")?
            .map_err(|e| format!("TCP sink: {e}"))?;
        sent.map_err(|e| format!("TCP source: {e}"))?;
        // Payload per segment at the UE MTU with timestamps: MTU - 52.
        let mss = f64::from(UE_MTU - 52);
        Ok(measure(&got, dur, f64::from(UE_MTU) / mss))
    }

    /// `n` TCP connections opened one after another from the `dir` source to its destination
    /// on `port` (connect, then close): the client's connect times (SYN sent to SYN-ACK
    /// received), the truth a passive handshake measurement is compared with.
    pub fn handshakes(&self, dir: Dir, n: usize, port: u16) -> Result<Vec<Duration>, String> {
        let (src_ns, dst_ns, src, dst) = self.ends(dir);
        let (ready_tx, ready_rx) = mpsc::channel();
        let server = in_netns(&dst_ns, move || {
            let l = TcpListener::bind(SocketAddrV4::new(dst, port))?;
            let _ = ready_tx.send(());
            for _ in 0..n {
                drop(l.accept()?);
            }
            Ok(())
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "TCP server did not start".to_string())?;
        let client = in_netns(&src_ns, move || {
            let mut times = Vec::with_capacity(n);
            for _ in 0..n {
                times.push(connect_from(src, SocketAddrV4::new(dst, port), None)?.1);
            }
            Ok(times)
        });
        let times = client
            .join()
            .map_err(|_| "TCP client panicked")?
            .map_err(|e| format!("TCP client: {e}"))?;
        server
            .join()
            .map_err(|_| "TCP server panicked")?
            .map_err(|e| format!("TCP server: {e}"))?;
        Ok(times)
    }

    /// UDP datagrams of `size` payload bytes at `rate` IP bytes/s for `secs`.
    pub fn udp(&self, dir: Dir, rate: u64, size: usize, secs: f64) -> Result<Measured, String> {
        let (src_ns, dst_ns, src, dst) = self.ends(dir);
        let port = 5202;
        let (ready_tx, ready_rx) = mpsc::channel();
        let dur = Duration::from_secs_f64(secs);
        let sink = in_netns(&dst_ns, move || {
            let s = UdpSocket::bind(SocketAddrV4::new(dst, port))?;
            s.set_read_timeout(Some(Duration::from_millis(200)))?;
            let _ = ready_tx.send(());
            let mut buf = vec![0u8; 1 << 16];
            let mut got = Vec::new();
            let mut t0: Option<Instant> = None;
            let start = Instant::now();
            loop {
                match s.recv(&mut buf) {
                    Ok(n) => {
                        let t = *t0.get_or_insert_with(Instant::now);
                        got.push((t.elapsed(), n as u64));
                    }
                    Err(_) if start.elapsed() > dur + Duration::from_secs(2) => break,
                    Err(_) => {}
                }
            }
            Ok(got)
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "UDP sink did not start".to_string())?;
        let source = in_netns(&src_ns, move || {
            let s = UdpSocket::bind(SocketAddrV4::new(src, 0))?;
            s.connect(SocketAddrV4::new(dst, port))?;
            let buf = vec![0xa5u8; size];
            let per = (size + 28) as f64;
            let t0 = Instant::now();
            let mut sent = 0u64;
            while t0.elapsed() < dur {
                // Keep the sent IP bytes on the rate line, 1 ms at a time.
                let due = (t0.elapsed().as_secs_f64() * rate as f64 / per) as u64;
                while sent < due {
                    let _ = s.send(&buf);
                    sent += 1;
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            Ok(sent)
        });
        source
            .join()
            .map_err(|_| "UDP source panicked")?
            .map_err(|e| format!("UDP source: {e}"))?;
        let got = sink
            .join()
            .map_err(|_| "UDP sink panicked")?
            .map_err(|e| format!("UDP sink: {e}"))?;
        Ok(measure(&got, dur, (size + 28) as f64 / size as f64))
    }
}

/// Payload rate after the warm-up until `dur`, and the IP rate (`ip_per_payload` x).
fn measure(got: &[(Duration, u64)], dur: Duration, ip_per_payload: f64) -> Measured {
    let bytes: u64 = got.iter().map(|g| g.1).sum();
    let window: u64 = got
        .iter()
        .filter(|g| g.0 >= WARMUP && g.0 < dur)
        .map(|g| g.1)
        .sum();
    let secs = (dur - WARMUP).as_secs_f64();
    let goodput = window as f64 / secs;
    Measured {
        goodput,
        ip_rate: goodput * ip_per_payload,
        bytes,
    }
}
