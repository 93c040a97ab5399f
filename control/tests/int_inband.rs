//! In-band installation end to end (issue 13 item 4; seed III-B "INT Request", III-D): the rule
//! is installed only at the source, over ZeroMQ; the transit and the sink learn the namespace
//! from the 0x32 option in the flow's first packet.
//!
//! ```text
//!  netns src       root: peregrine p1    root: peregrine p2    root: peregrine p3      netns dst
//!  [s0]=veth=[sa | source | 1b]=veth=[2a | transit | 2b]=veth=[3a | sink | 3b]=veth=[d0]
//!  fd00:1::1       node 1                 node 2                node 3                 fd00:2::1
//! ```
//!
//! Each node is a `peregrine run` process (pipeline `int`, DPDK `net_af_packet` ports on root
//! veths), as in int_multihop.rs. Checked: before any traffic p2 and p3 have no rule; after the
//! first packets both list namespace 7 (learned in-band) and p3's reports carry p2's hop; a
//! changed rule at the source (`int mod --setting 5`) is re-sent at once and replaces the rule
//! learned at p3, and p3's report rate follows it. The second test switches a Linux router's
//! route between two transits and times the new hop's arrival in the sink's reports against
//! the source's re-send interval (docs/int.md "In-band installation").
//!
//! Needs root, `ip netns` and python3; outside CI it prints why and passes when they are
//! missing, under `CI` it fails.

use peregrine_testkit::frames::ipv6_udp;
use peregrine_testkit::netns::Topology;
use peregrine_testkit::tools::{free_tcp_port, is_root, run, skip, Guard};
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv6Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1);
const MAC_SRC: &str = "02:00:00:00:10:01";
const MAC_DST: &str = "02:00:00:00:20:01";
fn mac(n: u8, side: char) -> String {
    format!("02:00:00:00:0{n}:0{side}")
}

fn setup(t: &mut Topology) -> Result<(), String> {
    let (src, dst) = (t.add_ns("src")?, t.add_ns("dst")?);
    let links: [(String, String, &str, String, String, &str); 4] = [
        (
            t.dev("s0"),
            MAC_SRC.into(),
            &src,
            t.dev("sa"),
            mac(1, 'a'),
            "",
        ),
        (t.dev("1b"), mac(1, 'b'), "", t.dev("2a"), mac(2, 'a'), ""),
        (t.dev("2b"), mac(2, 'b'), "", t.dev("3a"), mac(3, 'a'), ""),
        (
            t.dev("3b"),
            mac(3, 'b'),
            "",
            t.dev("d0"),
            MAC_DST.into(),
            &dst,
        ),
    ];
    for (a, ma, na, b, mb, nb) in &links {
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
    for (n, dev, addr, via, prefix, gw_mac) in [
        (
            &src,
            t.dev("s0"),
            "fd00:1::1/64",
            "fd00:1::fe",
            "fd00:2::/64",
            mac(1, 'a'),
        ),
        (
            &dst,
            t.dev("d0"),
            "fd00:2::1/64",
            "fd00:2::fe",
            "fd00:1::/64",
            mac(3, 'b'),
        ),
    ] {
        t.quiet(n, &dev)?;
        t.addr_up(n, &dev, &[addr])?;
        t.neigh(n, via, &gw_mac, &dev)?;
        t.ip(n, &["-6", "route", "add", prefix, "via", via])?;
    }
    Ok(())
}

fn frame(seq: u16) -> Vec<u8> {
    let m = |s: &str| -> Vec<u8> {
        s.split(':')
            .map(|x| u8::from_str_radix(x, 16).unwrap())
            .collect()
    };
    let mut payload = seq.to_be_bytes().to_vec();
    payload.extend((0..48u16).map(|i| (i.wrapping_mul(7) ^ seq) as u8));
    let mut f = m(&mac(1, 'a'));
    f.extend(m(MAC_SRC));
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend(ipv6_udp(SRC, DST, 4000, 5000, &payload));
    f
}

fn send(ns: &str, dev: &str, frames: &[Vec<u8>], gap_ms: u64) {
    let script = format!(
        "import socket,sys,time\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('{dev}',0))\nfor l in sys.stdin:\n    s.send(bytes.fromhex(l.strip()))\n    time.sleep({})\n",
        gap_ms as f64 / 1000.0
    );
    let mut c = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .expect("python3");
    let input: String = frames
        .iter()
        .map(|f| f.iter().map(|x| format!("{x:02x}")).collect::<String>() + "\n")
        .collect();
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success(), "sender failed");
}

type Lines = Arc<Mutex<Vec<String>>>;

fn collect(mut c: Child) -> (Guard, Lines) {
    let out = c.stdout.take().unwrap();
    let lines: Lines = Arc::default();
    let l = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            l.lock().unwrap().push(line);
        }
    });
    (Guard(Some(c)), lines)
}

fn ctl() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("debug/peregrinectl")
}

fn ctl_run(rules: u16, args: &[&str]) -> Result<String, String> {
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

fn watch(reports: u16) -> (Guard, Lines) {
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

fn reports(lines: &Lines) -> Vec<serde_json::Value> {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["report"].clone())
        .collect()
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn hop_ids(r: &serde_json::Value) -> Vec<u64> {
    r["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["node_id"].as_u64().unwrap())
        .collect()
}

fn node_config(
    t: &Topology,
    id: u8,
    rules: u16,
    reports: u16,
    roles: &str,
    w: &str,
    e: &str,
) -> String {
    let a = if id == 1 {
        t.dev("sa")
    } else {
        t.dev(&format!("{id}a"))
    };
    let b = t.dev(&format!("{id}b"));
    config(
        t,
        id,
        &[('a', a), ('b', b)],
        &[("fd00:1::/64", 'a', w), ("fd00:2::/64", 'b', e)],
        &format!("roles = [{roles}]\nrules = \"tcp://127.0.0.1:{rules}\"\nreports = \"tcp://127.0.0.1:{reports}\"\n"),
    )
}

/// A node's config: `ports` are (name, veth) with MAC `mac(id, name)`, `routes` are (prefix,
/// port, next-hop MAC), `int` the `[int]` lines after `node_id`.
fn config(
    t: &Topology,
    id: u8,
    ports: &[(char, String)],
    routes: &[(&str, char, &str)],
    int: &str,
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

#[test]
fn a_rule_installed_only_at_the_source_reaches_transit_and_sink() {
    let what = "the in-band installation test";
    if !is_root() {
        return skip(what, "not root");
    }
    if run(&["ip", "netns", "list"]).is_err() {
        return skip(what, "no `ip netns`");
    }
    if !ctl().exists() {
        return skip(
            what,
            "peregrinectl not built (cargo build -p peregrine-ctl)",
        );
    }
    let mut topo = Topology::new(Topology::unique_prefix("ib"));
    if let Err(e) = setup(&mut topo) {
        return skip(what, &format!("cannot build the namespaces: {e}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_tcp_port(), free_tcp_port())).collect();
    let cfgs = [
        node_config(
            &topo,
            1,
            ports[0].0,
            ports[0].1,
            "\"source\"",
            MAC_SRC,
            &mac(2, 'a'),
        ),
        node_config(
            &topo,
            2,
            ports[1].0,
            ports[1].1,
            "\"transit\"",
            &mac(1, 'b'),
            &mac(3, 'a'),
        ),
        node_config(
            &topo,
            3,
            ports[2].0,
            ports[2].1,
            "\"sink\"",
            &mac(2, 'b'),
            MAC_DST,
        ),
    ];
    let start = |i: usize| -> Guard {
        let path = dir.path().join(format!("n{}.toml", i + 1));
        std::fs::write(&path, &cfgs[i]).unwrap();
        let log = std::fs::File::create(dir.path().join(format!("n{}.log", i + 1))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_peregrine"))
            .args(["run", "--config"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start peregrine");
        Guard(Some(child))
    };
    let mut daemons: Vec<Guard> = (0..3).map(start).collect();
    let logs = || -> String {
        (1..=3)
            .map(|i| {
                std::fs::read_to_string(dir.path().join(format!("n{i}.log"))).unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    // Every node answers (restarting one that lost the af_packet fanout race, as in
    // int_multihop.rs); only p1 gets the rule.
    for (i, (rules, _)) in ports.iter().enumerate() {
        let t0 = Instant::now();
        let args: &[&str] = if i == 0 {
            &[
                "add",
                "--ns",
                "7",
                "--app",
                "1",
                "--src",
                "fd00:1::1",
                "--dst",
                "fd00:2::1",
                "--proto",
                "udp",
                "--dport",
                "5000",
                "--trace-type",
                "0x7000E000",
                "--mode",
                "count",
                "--setting",
                "1",
            ]
        } else {
            &["list"]
        };
        loop {
            match ctl_run(*rules, args) {
                Ok(out) => {
                    if i > 0 {
                        assert!(!out.contains("\"ns_id\""), "node {}: {out}", i + 1);
                    }
                    break;
                }
                Err(e) => {
                    let d = &mut daemons[i];
                    if d.0
                        .as_mut()
                        .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))))
                    {
                        eprintln!("node {} exited at start; restarting it", i + 1);
                        *d = start(i);
                    }
                    assert!(
                        t0.elapsed() < Duration::from_secs(30),
                        "node {}: {e}\n{}",
                        i + 1,
                        logs()
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
    let (_w3, sink_lines) = watch(ports[2].1);
    std::thread::sleep(Duration::from_millis(1500));
    let (src_ns, s0) = (topo.ns("src"), topo.dev("s0"));

    // The first packet carries the request; both downstream nodes learn namespace 7.
    send(&src_ns, &s0, &(0..3).map(frame).collect::<Vec<_>>(), 20);
    for (i, (rules, _)) in ports.iter().enumerate().skip(1) {
        wait_for(
            &format!("node {} to learn ns 7", i + 1),
            Duration::from_secs(10),
            || ctl_run(*rules, &["list"]).is_ok_and(|o| o.contains("\"ns_id\":7")),
        );
    }
    let before = reports(&sink_lines).len();
    send(&src_ns, &s0, &(100..120).map(frame).collect::<Vec<_>>(), 20);
    wait_for("20 reports at p3", Duration::from_secs(10), || {
        reports(&sink_lines).len() >= before + 20
    });
    let r1 = reports(&sink_lines)[before..].to_vec();
    for r in &r1 {
        assert_eq!(
            (r["ns_id"].as_u64(), r["sink_node_id"].as_u64()),
            (Some(7), Some(3)),
            "{r}"
        );
        assert_eq!(hop_ids(r), vec![2], "p2 filled its hop: {r}");
    }

    // A changed rule at the source is re-sent at once and replaces the learned one at p3.
    ctl_run(ports[0].0, &["mod", "--ns", "7", "--setting", "5"]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    send(&src_ns, &s0, &(200..202).map(frame).collect::<Vec<_>>(), 20);
    for (rules, _) in &ports[1..] {
        wait_for(
            "the changed rule downstream",
            Duration::from_secs(10),
            || ctl_run(*rules, &["list"]).is_ok_and(|o| o.contains("\"mode_setting\":5")),
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = reports(&sink_lines).len();
    send(&src_ns, &s0, &(300..340).map(frame).collect::<Vec<_>>(), 10);
    std::thread::sleep(Duration::from_millis(1500));
    let n2 = reports(&sink_lines).len() - before;
    assert!(
        (7..=9).contains(&n2),
        "count 5 over 40 packets: {n2} reports"
    );
    eprintln!(
        "in-band installation: {} reports with p2's hop, then {n2} at count 5",
        r1.len()
    );
    for d in &mut daemons {
        let st = d.term();
        assert!(
            st.is_some_and(|s| s.success()),
            "daemon exit: {st:?}\n{}",
            logs()
        );
    }
}

/// Route change (issue 13 must-show): two paths from p1 to the sink p4 through a Linux router
/// `r` whose route is switched at run time; the rule is installed only at p1, with a 2 s
/// re-send interval.
///
/// ```text
///  src =[sa| p1 source |1b]= [ra  r (Linux)  rb]=[2a| p2 transit |2b]=[4a|          |
///                                            rc]=[3a| p3 transit |3b]=[4c| p4 sink  |4b]= dst
/// ```
fn setup_two_paths(t: &mut Topology) -> Result<(), String> {
    let (src, r, dst) = (t.add_ns("src")?, t.add_ns("r")?, t.add_ns("dst")?);
    let links: [(String, String, &str, String, String, &str); 7] = [
        (
            t.dev("s0"),
            MAC_SRC.into(),
            &src,
            t.dev("sa"),
            mac(1, 'a'),
            "",
        ),
        (t.dev("1b"), mac(1, 'b'), "", t.dev("ra"), MAC_RA.into(), &r),
        (t.dev("rb"), MAC_RB.into(), &r, t.dev("2a"), mac(2, 'a'), ""),
        (t.dev("rc"), MAC_RC.into(), &r, t.dev("3a"), mac(3, 'a'), ""),
        (t.dev("2b"), mac(2, 'b'), "", t.dev("4a"), mac(4, 'a'), ""),
        (t.dev("3b"), mac(3, 'b'), "", t.dev("4c"), mac(4, 'c'), ""),
        (
            t.dev("4b"),
            mac(4, 'b'),
            "",
            t.dev("d0"),
            MAC_DST.into(),
            &dst,
        ),
    ];
    for (a, ma, na, b, mb, nb) in &links {
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
    for (n, dev, addr, via, prefix, gw_mac) in [
        (
            &src,
            t.dev("s0"),
            "fd00:1::1/64",
            "fd00:1::fe",
            "fd00:2::/64",
            mac(1, 'a'),
        ),
        (
            &dst,
            t.dev("d0"),
            "fd00:2::1/64",
            "fd00:2::fe",
            "fd00:1::/64",
            mac(4, 'b'),
        ),
    ] {
        t.quiet(n, &dev)?;
        t.addr_up(n, &dev, &[addr])?;
        t.neigh(n, via, &gw_mac, &dev)?;
        t.ip(n, &["-6", "route", "add", prefix, "via", via])?;
    }
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
    Ok(())
}

const MAC_RA: &str = "02:00:00:00:42:0a";
const MAC_RB: &str = "02:00:00:00:42:0b";
const MAC_RC: &str = "02:00:00:00:42:0c";
/// The source's re-send interval in the route-change test.
const RESEND_MS: u64 = 2000;

#[test]
fn after_a_route_change_the_new_hop_appears_within_one_resend_interval() {
    let what = "the in-band route-change test";
    if !is_root() {
        return skip(what, "not root");
    }
    if run(&["ip", "netns", "list"]).is_err() {
        return skip(what, "no `ip netns`");
    }
    if !ctl().exists() {
        return skip(
            what,
            "peregrinectl not built (cargo build -p peregrine-ctl)",
        );
    }
    let mut topo = Topology::new(Topology::unique_prefix("ir"));
    if let Err(e) = setup_two_paths(&mut topo) {
        return skip(what, &format!("cannot build the namespaces: {e}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<(u16, u16)> = (0..4).map(|_| (free_tcp_port(), free_tcp_port())).collect();
    let int = |i: usize, roles: &str| {
        format!(
            "roles = [{roles}]\nrules = \"tcp://127.0.0.1:{}\"\nreports = \"tcp://127.0.0.1:{}\"\nresend_interval_ms = {RESEND_MS}\n",
            ports[i].0, ports[i].1
        )
    };
    let d = |n: &str| topo.dev(n);
    let (m2b, m4a, m4c) = (mac(2, 'b'), mac(4, 'a'), mac(4, 'c'));
    let cfgs = [
        config(
            &topo,
            1,
            &[('a', d("sa")), ('b', d("1b"))],
            &[("fd00:1::/64", 'a', MAC_SRC), ("fd00:2::/64", 'b', MAC_RA)],
            &int(0, "\"source\""),
        ),
        config(
            &topo,
            2,
            &[('a', d("2a")), ('b', d("2b"))],
            &[("fd00:1::/64", 'a', MAC_RB), ("fd00:2::/64", 'b', &m4a)],
            &int(1, "\"transit\""),
        ),
        config(
            &topo,
            3,
            &[('a', d("3a")), ('b', d("3b"))],
            &[("fd00:1::/64", 'a', MAC_RC), ("fd00:2::/64", 'b', &m4c)],
            &int(2, "\"transit\""),
        ),
        config(
            &topo,
            4,
            &[('a', d("4a")), ('b', d("4b")), ('c', d("4c"))],
            &[("fd00:1::/64", 'a', &m2b), ("fd00:2::/64", 'b', MAC_DST)],
            &int(3, "\"sink\""),
        ),
    ];
    let start = |i: usize| -> Guard {
        let path = dir.path().join(format!("n{}.toml", i + 1));
        std::fs::write(&path, &cfgs[i]).unwrap();
        let log = std::fs::File::create(dir.path().join(format!("n{}.log", i + 1))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_peregrine"))
            .args(["run", "--config"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start peregrine");
        Guard(Some(child))
    };
    let mut daemons: Vec<Guard> = (0..4).map(start).collect();
    let logs = || -> String {
        (1..=4)
            .map(|i| {
                std::fs::read_to_string(dir.path().join(format!("n{i}.log"))).unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    for (i, (rules, _)) in ports.iter().enumerate() {
        let t0 = Instant::now();
        let args: &[&str] = if i == 0 {
            &[
                "add",
                "--ns",
                "7",
                "--app",
                "1",
                "--src",
                "fd00:1::1",
                "--dst",
                "fd00:2::1",
                "--proto",
                "udp",
                "--dport",
                "5000",
                "--trace-type",
                "0x7000E000",
                "--mode",
                "count",
                "--setting",
                "1",
            ]
        } else {
            &["list"]
        };
        while let Err(e) = ctl_run(*rules, args) {
            let dm = &mut daemons[i];
            if dm
                .0
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))))
            {
                eprintln!("node {} exited at start; restarting it", i + 1);
                *dm = start(i);
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "node {}: {e}\n{}",
                i + 1,
                logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let (_w4, sink_lines) = watch(ports[3].1);
    std::thread::sleep(Duration::from_millis(1500));
    let (src_ns, s0) = (topo.ns("src"), topo.dev("s0"));

    // Path 1 (via p2): p2 and p4 learn the namespace, p3 does not see the flow.
    send(&src_ns, &s0, &(0..20).map(frame).collect::<Vec<_>>(), 20);
    wait_for("reports with p2's hop", Duration::from_secs(10), || {
        reports(&sink_lines).iter().any(|r| hop_ids(r) == [2])
    });
    let p3_list = ctl_run(ports[2].0, &["list"]).unwrap();
    assert!(
        !p3_list.contains("\"ns_id\""),
        "p3 is off the path: {p3_list}"
    );

    // Switch the route to p3; keep the flow going for two re-send intervals.
    topo.ip(
        &topo.ns("r"),
        &["-6", "route", "replace", "fd00:2::/64", "via", "fd00:c::1"],
    )
    .unwrap();
    let switched = Instant::now();
    let before = reports(&sink_lines).len();
    let (ns2, dev2) = (src_ns.clone(), s0.clone());
    let n = (2 * RESEND_MS / 20) as u16;
    let sender = std::thread::spawn(move || {
        send(
            &ns2,
            &dev2,
            &(1000..1000 + n).map(frame).collect::<Vec<_>>(),
            20,
        )
    });
    let mut first_p3 = None;
    while first_p3.is_none() && switched.elapsed() < Duration::from_millis(3 * RESEND_MS) {
        if reports(&sink_lines)[before..]
            .iter()
            .any(|r| hop_ids(r) == [3])
        {
            first_p3 = Some(switched.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    sender.join().unwrap();
    let after = reports(&sink_lines)[before..].to_vec();
    let seen = first_p3.unwrap_or_else(|| panic!("p3's hop never appeared: {after:?}"));
    // Polling and a loaded 2-core machine: half a second of slack over one interval.
    assert!(
        seen <= Duration::from_millis(RESEND_MS + 500),
        "p3's hop after {seen:?}, re-send interval {RESEND_MS} ms"
    );
    assert!(
        after
            .iter()
            .all(|r| hop_ids(r).is_empty() || hop_ids(r) == [3]),
        "after the switch only the new path's hop (or none, before p3 learns): {after:?}"
    );
    let p3_list = ctl_run(ports[2].0, &["list"]).unwrap();
    assert!(p3_list.contains("\"ns_id\":7"), "p3 learned it: {p3_list}");
    eprintln!(
        "route change: p3's hop in the sink's reports {:.2} s after the switch (re-send {} s), {} reports without a hop before",
        seen.as_secs_f64(),
        RESEND_MS as f64 / 1000.0,
        after.iter().filter(|r| hop_ids(r).is_empty()).count()
    );
    for dm in &mut daemons {
        let st = dm.term();
        assert!(
            st.is_some_and(|s| s.success()),
            "daemon exit: {st:?}\n{}",
            logs()
        );
    }
}
