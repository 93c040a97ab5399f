//! INT nodes in network namespaces: what the tests that run `peregrine run` processes as INT
//! nodes (control/tests int_inband.rs, int_multihop.rs, codesign_emulation.rs) and the
//! co-design emulation (`codesign_emu`, also run by `pg-codesign-emu`) share: addresses and
//! MACs, the veth plumbing and the end hosts, node configs, the daemons with their start-up
//! retry, frames sent from a namespace with an AF_PACKET socket (Python), `peregrinectl`
//! calls, report watchers and the metrics page. Linux, root, `ip netns`, python3.

use crate::frames::ipv6_udp;
use crate::netns::Topology;
pub use crate::tools::START_GUARD;
use crate::tools::{collect_lines, is_root, run, skip, Guard};
use std::io::Write;
use std::net::Ipv6Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
pub const DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1);
pub const MAC_SRC: &str = "02:00:00:00:10:01";
pub const MAC_DST: &str = "02:00:00:00:20:01";
/// The Linux router of [`two_paths`]: its ports towards p1, p2 and p3.
pub const MAC_RA: &str = "02:00:00:00:42:0a";
pub const MAC_RB: &str = "02:00:00:00:42:0b";
pub const MAC_RC: &str = "02:00:00:00:42:0c";

/// Port MAC of node n, port `side` ('a' west, 'b' east, ...).
pub fn mac(n: u8, side: char) -> String {
    format!("02:00:00:00:0{n}:0{side}")
}

/// Root, `ip netns` and a built `peregrinectl`; otherwise print why the test is skipped
/// (under `CI`, fail) and return false.
pub fn preflight(what: &str) -> bool {
    if !is_root() {
        skip(what, "not root");
        return false;
    }
    if run(&["ip", "netns", "list"]).is_err() {
        skip(what, "no `ip netns`");
        return false;
    }
    if !ctl().exists() {
        skip(
            what,
            "peregrinectl not built (cargo build -p peregrine-ctl)",
        );
        return false;
    }
    true
}

/// A veth pair: (end a, its MAC, its netns or "" for root, end b, MAC, netns).
pub type Link = (String, String, String, String, String, String);

/// The veth pair between `t`'s devices `a` (MAC `ma`, netns `na`, "" for root) and `b` (`mb`,
/// `nb`).
pub fn link(t: &Topology, a: &str, ma: &str, na: &str, b: &str, mb: &str, nb: &str) -> Link {
    let (a, b) = (t.dev(a), t.dev(b));
    (a, ma.into(), na.into(), b, mb.into(), nb.into())
}

/// Create the pairs; root-side ends lose IPv6 (they belong to DPDK: the root kernel stays
/// quiet on them) and come up, the others move to their namespace.
pub fn link_all(t: &mut Topology, links: &[Link]) -> Result<(), String> {
    for (a, ma, na, b, mb, nb) in links {
        t.add_veth(a, ma, b, mb)?;
        for (d, n) in [(a, na), (b, nb)] {
            if n.is_empty() {
                t.no_ipv6(d)?;
                t.up(d)?;
            } else {
                t.move_to(d, n)?;
            }
        }
    }
    Ok(())
}

/// The end hosts: `src` (fd00:1::1 on s0, gateway MAC `src_gw`) and `dst` (fd00:2::1 and
/// `dst_extra` addresses on d0, gateway MAC `dst_gw`), each routing the other's /64 via a
/// permanent neighbour.
pub fn hosts(t: &Topology, src_gw: &str, dst_gw: &str, dst_extra: &[&str]) -> Result<(), String> {
    let (src, dst) = (t.ns("src"), t.ns("dst"));
    let mut dst_addrs = vec!["fd00:2::1/64"];
    dst_addrs.extend_from_slice(dst_extra);
    for (n, dev, addrs, via, prefix, gw_mac) in [
        (
            &src,
            t.dev("s0"),
            vec!["fd00:1::1/64"],
            "fd00:1::fe",
            "fd00:2::/64",
            src_gw,
        ),
        (
            &dst,
            t.dev("d0"),
            dst_addrs,
            "fd00:2::fe",
            "fd00:1::/64",
            dst_gw,
        ),
    ] {
        t.quiet(n, &dev)?;
        t.addr_up(n, &dev, &addrs)?;
        t.neigh(n, via, gw_mac, &dev)?;
        t.ip(n, &["-6", "route", "add", prefix, "via", via])?;
    }
    Ok(())
}

/// Two paths from p1 to the sink p4 through a Linux router `r`: fd00:2::/64 via p2, and
/// `via_p3` (a more specific prefix, e.g. `fd00:2:0:0:8000::/65`; none: only by a route
/// change) via p3.
///
/// ```text
///  src =[sa| p1 |1b]= [ra  r (Linux)  rb]=[2a| p2 |2b]=[4a|    |
///                                    rc]=[3a| p3 |3b]=[4c| p4 |4b]= dst
/// ```
pub fn two_paths(t: &mut Topology, via_p3: Option<&str>) -> Result<(), String> {
    let (src, r, dst) = (t.add_ns("src")?, t.add_ns("r")?, t.add_ns("dst")?);
    let links = [
        link(t, "s0", MAC_SRC, &src, "sa", &mac(1, 'a'), ""),
        link(t, "1b", &mac(1, 'b'), "", "ra", MAC_RA, &r),
        link(t, "rb", MAC_RB, &r, "2a", &mac(2, 'a'), ""),
        link(t, "rc", MAC_RC, &r, "3a", &mac(3, 'a'), ""),
        link(t, "2b", &mac(2, 'b'), "", "4a", &mac(4, 'a'), ""),
        link(t, "3b", &mac(3, 'b'), "", "4c", &mac(4, 'c'), ""),
        link(t, "4b", &mac(4, 'b'), "", "d0", MAC_DST, &dst),
    ];
    link_all(t, &links)?;
    hosts(t, &mac(1, 'a'), &mac(4, 'b'), &[])?;
    t.sysctl(&r, "net.ipv6.conf.all.forwarding", "1")?;
    t.sysctl(&r, "net.ipv6.conf.all.accept_dad", "0")?;
    for (d, a, via, m) in [
        ("ra", "fd00:a::2/64", "fd00:a::1", mac(1, 'b')),
        ("rb", "fd00:b::2/64", "fd00:b::1", mac(2, 'a')),
        ("rc", "fd00:c::2/64", "fd00:c::1", mac(3, 'a')),
    ] {
        let d = t.dev(d);
        t.quiet(&r, &d)?;
        t.addr_up(&r, &d, &[a])?;
        t.neigh(&r, via, &m, &d)?;
    }
    t.ip(
        &r,
        &["-6", "route", "add", "fd00:1::/64", "via", "fd00:a::1"],
    )?;
    t.ip(
        &r,
        &["-6", "route", "add", "fd00:2::/64", "via", "fd00:b::1"],
    )?;
    if let Some(p) = via_p3 {
        t.ip(&r, &["-6", "route", "add", p, "via", "fd00:c::1"])?;
    }
    Ok(())
}

/// A node's config (pipeline `int`, one worker, DPDK `net_af_packet` ports): `ports` are
/// (name, veth) with MAC `mac(id, name)`, `routes` (prefix, port, next-hop MAC), `int` the
/// `[int]` lines after `node_id` (sub-tables such as `[int.gate]` last), `extra` any
/// top-level sections (e.g. `[metrics]`).
pub fn node_config(
    t: &Topology,
    id: u8,
    ports: &[(char, String)],
    routes: &[(&str, char, &str)],
    int: &str,
    extra: &str,
) -> String {
    let vdevs: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, (_, dev))| format!("\"--vdev=net_af_packet{i},iface={dev}\""))
        .collect();
    let mut c = format!(
        r#"
[workers]
count = 1
[backend]
kind = "dpdk"
eal_args = ["--no-huge", "--no-pci", "-m", "128", "--no-shconf", "--no-telemetry", "-l", "0",
            "--file-prefix={p}n{id}", "--log-level=lib.eal:error", {v}]
rx_desc = 256
tx_desc = 256
mbufs_per_worker = 2047
mbuf_cache = 64
[pipeline]
kind = "int"
{extra}
"#,
        p = t.prefix(),
        v = vdevs.join(", "),
    );
    for (i, (name, _)) in ports.iter().enumerate() {
        c += &format!(
            "[[port]]\nname = \"{name}\"\nmac = \"{}\"\ndevice = \"net_af_packet{i}\"\n",
            mac(id, *name)
        );
    }
    for (prefix, port, nh) in routes {
        c += &format!(
            "[[route]]\nprefix = \"{prefix}\"\nport = \"{port}\"\nnext_hop_mac = \"{nh}\"\n"
        );
    }
    c + &format!("[int]\nnode_id = {id}\n{int}")
}

/// `[int]` lines of a node with its own rule API and report endpoints.
pub fn int_lines(roles: &str, rules: u16, reports: u16) -> String {
    format!(
        "roles = [{roles}]\nrules = \"tcp://127.0.0.1:{rules}\"\nreports = \"tcp://127.0.0.1:{reports}\"\n"
    )
}

/// `peregrine run` processes, one per config, logs in a temporary directory; removed (and
/// stopped) on drop.
#[derive(Debug)]
pub struct Daemons {
    bin: PathBuf,
    dir: tempfile::TempDir,
    cfgs: Vec<String>,
    pub procs: Vec<Guard>,
}

impl Daemons {
    /// Start `bin` (the `peregrine` binary) once per config.
    pub fn start(bin: impl Into<PathBuf>, cfgs: Vec<String>) -> Daemons {
        let mut d = Daemons {
            bin: bin.into(),
            dir: tempfile::tempdir().unwrap(),
            cfgs,
            procs: Vec::new(),
        };
        d.procs = (0..d.cfgs.len()).map(|i| d.spawn(i)).collect();
        d
    }

    fn spawn(&self, i: usize) -> Guard {
        let path = self.dir.path().join(format!("n{}.toml", i + 1));
        std::fs::write(&path, &self.cfgs[i]).unwrap();
        // Appended across restarts, so a node that keeps exiting at start still shows why.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("n{}.log", i + 1)))
            .unwrap();
        let child = Command::new(&self.bin)
            .args(["run", "--config"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start peregrine");
        Guard(Some(child))
    }

    /// Stop node `i` (it must exit cleanly) and start it again with `cfg`.
    pub fn replace(&mut self, i: usize, cfg: String) {
        let st = self.procs[i].term();
        assert!(
            st.is_some_and(|s| s.success()),
            "node {} exit: {st:?}\n{}",
            i + 1,
            self.logs()
        );
        self.cfgs[i] = cfg;
        self.procs[i] = self.spawn(i);
    }

    pub fn logs(&self) -> String {
        (0..self.cfgs.len())
            .map(|i| self.log(i))
            .collect::<Vec<_>>()
            .join("\n---\n")
    }

    /// Call `peregrinectl int <args>` on node `i`'s rule API until it answers: the daemon
    /// binds it after its ports are up (its log then says "INT manager listening"), so an
    /// answer is its readiness signal. Restarts the node if it exited at start: DPDK 22.11's
    /// af_packet PMD names its PACKET_FANOUT group by pid ^ ifindex, and two processes can
    /// collide (EINVAL); a new process gets a new pid. A duplicate-rule error counts as an
    /// answer (a reply lost to the client timeout still installed the rule). The wall clock
    /// is only a hang guard ([`START_GUARD`]); past it the test fails saying what it waited
    /// for, the last answer and what the node printed.
    pub fn until_up(&mut self, i: usize, rules: u16, args: &[&str]) -> String {
        let t0 = Instant::now();
        let mut restarts = 0;
        loop {
            match ctl_run(rules, args) {
                Ok(out) => return out,
                Err(e) if e.contains("duplicate") || e.contains("exists") => return e,
                Err(e) => {
                    let exited = self.procs[i]
                        .0
                        .as_mut()
                        .and_then(|c| c.try_wait().ok().flatten());
                    if let Some(st) = exited {
                        eprintln!("node {} exited at start ({st}); restarting it", i + 1);
                        self.procs[i] = self.spawn(i);
                        restarts += 1;
                    }
                    assert!(
                        t0.elapsed() < START_GUARD,
                        "node {n}: its rule API tcp://127.0.0.1:{rules} did not answer \
                         `peregrinectl int {a}` in {START_GUARD:?} (the hang guard; {restarts} \
                         restart(s)); last error: {e}\nnode {n} printed (\"INT manager \
                         listening\" once its rule API is bound):\n{log}",
                        n = i + 1,
                        a = args.join(" "),
                        log = self.log(i),
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }

    /// What node `i` printed (every start of it).
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("n{}.log", i + 1))).unwrap_or_default()
    }

    /// Stop every node; each must exit cleanly.
    pub fn stop_all(&mut self) {
        for i in 0..self.procs.len() {
            let st = self.procs[i].term();
            assert!(
                st.is_some_and(|s| s.success()),
                "daemon exit: {st:?}\n{}",
                self.logs()
            );
        }
    }
}

/// `peregrinectl int add` arguments of a rule for UDP to `dst` port 5000 (any source port),
/// count mode `setting`, the seed's trace type.
pub fn rule_args(ns: &str, dst: &str, setting: &str) -> Vec<String> {
    [
        "add",
        "--ns",
        ns,
        "--app",
        "1",
        "--src",
        "fd00:1::1",
        "--dst",
        dst,
        "--proto",
        "udp",
        "--dport",
        "5000",
        "--trace-type",
        "0x7000E000",
        "--mode",
        "count",
        "--setting",
        setting,
    ]
    .map(String::from)
    .to_vec()
}

/// Ethernet / IPv6 (hop limit 64) / UDP with a valid checksum (RFC 8200 8.1); the payload
/// is `seq` then `extra` pattern bytes.
#[allow(clippy::too_many_arguments)]
pub fn udp_frame(
    smac: &str,
    dmac: &str,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    sport: u16,
    dport: u16,
    seq: u16,
    extra: u16,
) -> Vec<u8> {
    let m = |s: &str| -> Vec<u8> {
        s.split(':')
            .map(|x| u8::from_str_radix(x, 16).unwrap())
            .collect()
    };
    let mut payload = seq.to_be_bytes().to_vec();
    payload.extend((0..extra).map(|i| (i.wrapping_mul(7) ^ seq) as u8));
    let mut f = m(dmac);
    f.extend(m(smac));
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend(ipv6_udp(src, dst, sport, dport, &payload));
    f
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Send frames from `dev` in netns `ns` with an AF_PACKET socket, `gap_ms` apart.
pub fn send(ns: &str, dev: &str, frames: &[Vec<u8>], gap_ms: u64) {
    send_with(
        ns,
        dev,
        frames,
        &format!("    time.sleep({})\n", gap_ms as f64 / 1000.0),
    )
}

/// Send frames as [`send`] does, `burst` at a time with a 1 ms pause in between (so the
/// nodes' af_packet rings do not overflow on a loaded machine).
pub fn send_paced(ns: &str, dev: &str, frames: &[Vec<u8>], burst: usize) {
    send_with(
        ns,
        dev,
        frames,
        &format!("    n+=1\n    if n%{burst}==0: time.sleep(0.001)\n"),
    )
}

fn send_with(ns: &str, dev: &str, frames: &[Vec<u8>], pace: &str) {
    let script = format!(
        "import socket,sys,time\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('{dev}',0))\nn=0\nfor l in sys.stdin:\n    s.send(bytes.fromhex(l.strip()))\n{pace}"
    );
    let mut c = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut input = String::new();
    for f in frames {
        input.push_str(&hex(f));
        input.push('\n');
    }
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success(), "sender failed");
}

pub use crate::tools::Lines;

/// A child's stdout lines, collected in the background, and its guard.
pub fn collect(mut c: Child) -> (Guard, Lines) {
    let lines = collect_lines(c.stdout.take().unwrap());
    (Guard(Some(c)), lines)
}

/// Capture inbound IPv6/UDP frames on `dev` in `ns`; one hex line each ("ready" first).
pub fn capture(ns: &str, dev: &str) -> (Guard, Lines) {
    let script = format!(
        "import socket,sys\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x86dd))\ns.bind(('{dev}',0))\nprint('ready',flush=True)\nwhile True:\n    d,a=s.recvfrom(4096)\n    if a[2]!=4 and len(d)>54:\n        print(d.hex(),flush=True)\n"
    );
    let c = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-u", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    collect(c)
}

/// The workspace's target directory.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// The debug `peregrinectl` (`cargo build -p peregrine-ctl`).
pub fn ctl() -> PathBuf {
    target_dir().join("debug/peregrinectl")
}

/// `peregrinectl --json --rules tcp://127.0.0.1:<rules> int <args>`.
pub fn ctl_run(rules: u16, args: &[&str]) -> Result<String, String> {
    let ep = format!("tcp://127.0.0.1:{rules}");
    let c = ctl();
    let mut v = vec![
        c.to_str().unwrap(),
        "--json",
        "--rules",
        &ep,
        "--timeout-ms",
        "2000",
        "int",
    ];
    v.extend_from_slice(args);
    run(&v)
}

/// `peregrinectl int watch --json --raw` on a node's PUB socket.
pub fn watch(reports: u16) -> (Guard, Lines) {
    let c = Command::new(ctl())
        .args([
            "--reports",
            &format!("tcp://127.0.0.1:{reports}"),
            "int",
            "watch",
            "--raw",
            "--json",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("peregrinectl");
    collect(c)
}

pub fn reports(lines: &Lines) -> Vec<serde_json::Value> {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["report"].clone())
        .collect()
}

pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn hop_ids(r: &serde_json::Value) -> Vec<u64> {
    r["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["node_id"].as_u64().unwrap())
        .collect()
}

pub use crate::daemon::{sample as metric, scrape};
