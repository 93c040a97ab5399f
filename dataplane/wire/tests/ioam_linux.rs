//! The Linux kernel as an independent IOAM transit node (RFC 9197 / RFC 9486).
//!
//! Three network namespaces, src - rtr - dst, joined by veth pairs. `rtr` forwards IPv6 and
//! has IOAM enabled on its ingress interface (`net.ipv6.conf.IF.ioam6_enabled=1`, node ID
//! `net.ipv6.ioam6_id`, interface IDs `ioam6_id`, `ip ioam namespace add 123`). From src
//! we send an Ethernet frame built only with our emitters: IPv6 + Hop-by-Hop (PadN + IOAM
//! Pre-allocated Trace, namespace 123, trace type bits 0-3, 4 entries, the first filled by
//! our `fill_next`) + UDP, written with an AF_PACKET socket from Python. In dst a Python
//! AF_PACKET receiver captures it; we parse it and check that Linux filled the next entry:
//! RemainingLen down by NodeLen, Hop_Lim = 63, node_id = rtr's ioam6_id, interface IDs,
//! timestamps set, and our entry intact behind it.
//!
//! Needs root, `ip` with `ip ioam`, python3 and a kernel with IOAM; otherwise it prints why
//! and passes (also under `CI`: a kernel without IOAM is not a test failure).

mod ioam_frames;

use ioam_frames::{NAMESPACE, TRACE_TYPE};
use peregrine_testkit::netns::Topology;
use peregrine_testkit::tools::{is_root, run};
use peregrine_wire::ethernet::{self, Address};
use peregrine_wire::ioam::{self, NodeData, TraceOption};
use peregrine_wire::ipv6;
use peregrine_wire::ipv6option::option_type::IOAM_HBH;
use std::io::{BufRead, BufReader, Read};
use std::net::Ipv6Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const RTR_NODE_ID: u32 = 0x42;
const RTR_IN_IF_ID: u16 = 11;
const RTR_OUT_IF_ID: u16 = 22;
const MAC_SRC: Address = Address([0x02, 0, 0, 0, 1, 1]);
const MAC_RTR_IN: Address = Address([0x02, 0, 0, 0, 1, 2]);
const MAC_RTR_OUT: &str = "02:00:00:00:02:02";
const MAC_DST: &str = "02:00:00:00:02:01";
const SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1);
const DPORT: u16 = 5001;

/// The entry our own "source" hop fills before sending.
fn our_hop() -> NodeData<'static> {
    NodeData {
        hop_limit: Some(64),
        node_id: Some(0x00_0001),
        ingress_if_id: Some(1),
        egress_if_id: Some(2),
        timestamp_secs: Some(0x1111_1111),
        timestamp_frac: Some(0x2222),
        ..NodeData::default()
    }
}

fn frame() -> Vec<u8> {
    let ext = ioam_frames::hbh(&[our_hop()]);
    let macs = (MAC_SRC, MAC_RTR_IN);
    ioam_frames::frame(macs, SRC, DST, &ext, DPORT, b"peregrine ioam transit")
}

fn skip(why: &str) {
    eprintln!("skipping Linux IOAM transit test: {why}");
}

/// Three namespaces, src - rtr - dst, and their veths (removed by the guard on drop, also
/// when the test fails).
fn setup(t: &mut Topology) -> Result<(), String> {
    let (src, rtr, dst) = (t.add_ns("src")?, t.add_ns("rtr")?, t.add_ns("dst")?);
    let (s, r1, r2, d) = (t.dev("s"), t.dev("r1"), t.dev("r2"), t.dev("d"));
    t.add_veth(&s, &MAC_SRC.to_string(), &r1, &MAC_RTR_IN.to_string())?;
    t.add_veth(&r2, MAC_RTR_OUT, &d, MAC_DST)?;
    for (dev, ns) in [(&s, &src), (&r1, &rtr), (&r2, &rtr), (&d, &dst)] {
        t.move_to(dev, ns)?;
    }
    for (ns, dev, addr) in [
        (&src, &s, "fd00:1::1/64"),
        (&rtr, &r1, "fd00:1::2/64"),
        (&rtr, &r2, "fd00:2::2/64"),
        (&dst, &d, "fd00:2::1/64"),
    ] {
        t.addr_up(ns, dev, &[addr])?;
    }
    t.ip(&dst, &["-6", "route", "add", "default", "via", "fd00:2::2"])?;
    t.neigh(&rtr, "fd00:2::1", MAC_DST, &r2)?;
    t.sysctl(&rtr, "net.ipv6.conf.all.forwarding", "1")?;
    t.sysctl(&rtr, "net.ipv6.ioam6_id", &RTR_NODE_ID.to_string())?;
    t.sysctl(&rtr, &format!("net.ipv6.conf.{r1}.ioam6_enabled"), "1")?;
    t.sysctl(
        &rtr,
        &format!("net.ipv6.conf.{r1}.ioam6_id"),
        &RTR_IN_IF_ID.to_string(),
    )?;
    t.sysctl(
        &rtr,
        &format!("net.ipv6.conf.{r2}.ioam6_id"),
        &RTR_OUT_IF_ID.to_string(),
    )?;
    t.ip(&rtr, &["ioam", "namespace", "add", &NAMESPACE.to_string()])?;
    Ok(())
}

const RECEIVER: &str = r#"
import select, socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86dd))
s.bind((sys.argv[1], 0))
print("ready", flush=True)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    r, _, _ = select.select([s], [], [], max(0.0, end - time.time()))
    if not r:
        break
    f, addr = s.recvfrom(65535)
    if addr[2] == socket.PACKET_OUTGOING or len(f) < 62 or f[20] != 0:
        continue
    l4 = 54 + (f[55] + 1) * 8
    if f[54] == 17 and len(f) >= l4 + 4 and int.from_bytes(f[l4 + 2:l4 + 4], "big") == int(sys.argv[3]):
        print(f.hex(), flush=True)
        sys.exit(0)
sys.exit(3)
"#;

const SENDER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
s.send(bytes.fromhex(sys.argv[2]))
"#;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn linux_transit_fills_our_preallocated_trace() {
    if !is_root() {
        return skip("not root");
    }
    if let Err(e) =
        run(&["ip", "ioam", "help"]).or_else(|_| run(&["ip", "ioam", "namespace", "show"]))
    {
        return skip(&format!("no `ip ioam` ({e})"));
    }
    if !std::path::Path::new("/proc/sys/net/ipv6/ioam6_id").exists() {
        return skip("kernel without IOAM (no net.ipv6.ioam6_id)");
    }
    if run(&["python3", "-c", "import socket; socket.AF_PACKET"]).is_err() {
        return skip("python3 with AF_PACKET not available");
    }
    let mut topo = Topology::new(Topology::unique_prefix("pio"));
    if let Err(e) = setup(&mut topo) {
        return skip(&format!("cannot build the namespaces: {e}"));
    }

    let sent = frame();
    let mut rx = Command::new("ip")
        .args(["netns", "exec", &topo.ns("dst"), "python3", "-c", RECEIVER])
        .args([topo.dev("d"), "5".into(), DPORT.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start receiver");
    let mut out = BufReader::new(rx.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read receiver");
    assert_eq!(line.trim(), "ready", "receiver did not start");
    run(&[
        "ip",
        "netns",
        "exec",
        &topo.ns("src"),
        "python3",
        "-c",
        SENDER,
        &topo.dev("s"),
        &hex(&sent),
    ])
    .expect("send");
    let mut got = String::new();
    out.read_to_string(&mut got).expect("read receiver");
    let status = rx.wait().expect("receiver exits");
    let mut err = String::new();
    if let Some(mut e) = rx.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(
        status.success(),
        "nothing arrived at dst (rc {status}): {err}; Linux dropped our IOAM packet?"
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    let rcvd = unhex(got.trim());

    let ip = ipv6::Packet::new_checked(&rcvd[ethernet::HEADER_LEN..]).expect("ipv6");
    assert_eq!(ip.hop_limit(), 63, "rtr forwarded it");
    let ext = &rcvd[ethernet::HEADER_LEN + ipv6::HEADER_LEN..];
    let found = ioam::find_in_header(ext, IOAM_HBH)
        .expect("parses")
        .expect("IOAM still there");
    let t = TraceOption::new_checked(&ext[found.body.clone()]).expect("trace");
    assert_eq!(t.namespace_id(), NAMESPACE);
    assert_eq!(t.trace_type(), TRACE_TYPE);
    assert_eq!(t.node_len(), 4);
    assert!(!t.overflow());
    assert_eq!(
        t.remaining_len(),
        16 - 2 * 4,
        "RemainingLen: 16 allocated, minus our entry and Linux's"
    );
    let entries: Vec<NodeData> = t.entries().collect::<Result<_, _>>().expect("entries");
    assert_eq!(entries.len(), 2, "{entries:?}");
    let linux = entries[0];
    assert_eq!(entries[1], our_hop(), "our entry is intact");
    assert_eq!(linux.hop_limit, Some(63), "Hop_Lim after decrement");
    assert_eq!(linux.node_id, Some(RTR_NODE_ID));
    assert_eq!(linux.ingress_if_id, Some(RTR_IN_IF_ID));
    assert_eq!(linux.egress_if_id, Some(RTR_OUT_IF_ID));
    let secs = u64::from(linux.timestamp_secs.expect("seconds"));
    assert!(secs.abs_diff(now) < 60, "timestamp {secs} vs now {now}");
    let frac = linux.timestamp_frac.expect("fraction");
    assert!(frac < 1_000_000, "Linux writes microseconds: {frac}");
    // Nothing else changed: free space still zero, headers before it identical.
    assert!(t.free_space().expect("free").iter().all(|&b| b == 0));
    let sent_ext = &sent[ethernet::HEADER_LEN + ipv6::HEADER_LEN..];
    assert_eq!(&ext[..found.body.start], &sent_ext[..found.body.start]);
    eprintln!(
        "Linux filled our trace: node_id {:#x}, hop_lim {}, if {}/{}, ts {}.{:06}",
        RTR_NODE_ID, 63, RTR_IN_IF_ID, RTR_OUT_IF_ID, secs, frac
    );
}
