//! The sketch-INT co-design emulation (issue 13 item 3; `docs/codesign.md` "Emulation"): four
//! `peregrine run` processes and a Linux router in network namespaces, two paths, the gate
//! on at the source, real packets with Zipf flow sizes. Run by
//! `control/tests/codesign_emulation.rs` (a few hundred flows) and `pg-codesign-emu` in
//! `perf/` (thousands).
//!
//! ```text
//!  src =[sa| p1 source+gate |1b]= [ra  r (Linux)  rb]=[2a| p2 transit |2b]=[4a|          |
//!                                                rc]=[3a| p3 transit |3b]=[4c| p4 sink  |4b]= dst
//!   fd00:2::1 (namespace 7) goes via p2, fd00:2::8000:0:0:1 (namespace 8) via p3
//! ```
//!
//! Rules are installed only at p1 (the transits and the sink learn them in-band). The run:
//! warm-up (one flow per path, so every node knows its namespace), then the traffic with
//! `peregrinectl codesign collect` merging the sink's reports with p1's gate exports; then p1
//! restarts without the gate and the same frames go again. INT bytes are measured on the wire
//! (the router's receive byte counter on the p1 link, minus the frames' own bytes).

use crate::intnet::*;
use crate::netns::Topology;
use crate::rng::{seeded, unit_f64};
use crate::tools::{free_tcp_port, Guard};
use std::net::Ipv6Addr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The source's in-band request re-send interval, ms.
const RESEND_MS: u64 = 2000;

/// The second path's destination (routed by the router's /65 via p3).
pub const DST_P3: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0x8000, 0, 0, 1);

/// What to run.
#[derive(Debug, Clone)]
pub struct EmuParams {
    /// The `peregrine` binary.
    pub peregrine: PathBuf,
    /// Flows, their Zipf exponent and the size of the largest (rank 1): rank r sends
    /// max(1, round(max_packets / r^s)) packets.
    pub flows: usize,
    pub zipf_s: f64,
    pub max_packets: u32,
    /// `[int.gate]`: T_hi, T_lo, window, rows, width.
    pub large: u32,
    pub small: u32,
    pub window_ms: u64,
    pub rows: u8,
    pub width: u32,
    /// Frames sent per millisecond (the sender pauses 1 ms after each burst).
    pub burst: usize,
    pub seed: u64,
    /// Name prefix tag of the namespaces (3 bytes).
    pub tag: String,
}

/// One flow's truth and its merged record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowOutcome {
    pub rank: usize,
    pub dst: Ipv6Addr,
    pub sport: u16,
    pub sent: u64,
    /// From the collector: INT reports, the sketch's large phase, their sum.
    pub int_packets: u64,
    pub sketch: u64,
    pub merged: u64,
}

impl FlowOutcome {
    pub fn rel_err(&self) -> f64 {
        (self.merged as f64 - self.sent as f64).abs() / self.sent as f64
    }
}

/// Sink reports of one path after the warm-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathReports {
    pub reports: u64,
    /// Reports whose hop list is exactly this path's transit.
    pub with_hop: u64,
}

/// Everything one emulation measured.
#[derive(Debug, Clone)]
pub struct EmuResult {
    pub flows: Vec<FlowOutcome>,
    /// Frames and their bytes (the same traffic in both runs).
    pub frames: u64,
    pub frame_bytes: u64,
    /// Bytes the router received from p1 during the traffic: with and without the gate.
    pub wire_bytes_gate: u64,
    pub wire_bytes_plain: u64,
    /// Frames the destination received (both runs).
    pub delivered_gate: u64,
    pub delivered_plain: u64,
    /// p1's counters (metrics page): INT added with and without the gate; the gate's.
    pub int_added_gate: u64,
    pub int_added_plain: u64,
    pub gate_switched: u64,
    pub gate_skipped: u64,
    pub gate_bytes_saved: u64,
    /// Reports by path: via p2 (namespace 7), via p3 (namespace 8).
    pub paths: [PathReports; 2],
    /// The collector's summary (windows, overflow, lost, refused).
    pub collector: serde_json::Value,
    pub seconds: f64,
}

impl EmuResult {
    /// Fraction of flows whose merged count is within `tol` (relative) of what was sent.
    pub fn within(&self, tol: f64) -> f64 {
        let n = self.flows.iter().filter(|f| f.rel_err() <= tol).count();
        n as f64 / self.flows.len().max(1) as f64
    }

    /// Mean relative error of flows that sent fewer than `t` packets.
    pub fn small_are(&self, t: u32) -> f64 {
        let v: Vec<f64> = self
            .flows
            .iter()
            .filter(|f| f.sent < u64::from(t))
            .map(FlowOutcome::rel_err)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }

    /// INT bytes on the p1 -> router link: with the gate, without.
    pub fn int_bytes(&self) -> (u64, u64) {
        (
            self.wire_bytes_gate.saturating_sub(self.frame_bytes),
            self.wire_bytes_plain.saturating_sub(self.frame_bytes),
        )
    }
}

/// Packets per flow by rank (1-based).
pub fn zipf_sizes(p: &EmuParams) -> Vec<u64> {
    (1..=p.flows)
        .map(|r| ((f64::from(p.max_packets) / (r as f64).powf(p.zipf_s)).round() as u64).max(1))
        .collect()
}

fn flow_of(rank: usize) -> (Ipv6Addr, u16) {
    let dst = if rank % 2 == 1 { DST } else { DST_P3 };
    (dst, 10_000 + rank as u16)
}

fn sys_counter(ns: &str, dev: &str, what: &str) -> Result<u64, String> {
    let out = crate::tools::run(&[
        "ip",
        "netns",
        "exec",
        ns,
        "cat",
        &format!("/sys/class/net/{dev}/statistics/{what}"),
    ])?;
    out.trim().parse().map_err(|e| format!("{dev} {what}: {e}"))
}

fn source_counter(page: &str, event: &str) -> u64 {
    metric(
        page,
        &format!("peregrine_int_source_events_total{{event=\"{event}\"}}"),
    )
    .unwrap_or(0.0) as u64
}

/// Run the emulation. Needs root, `ip netns`, python3 and a built `peregrinectl`; errors
/// name what failed (the caller decides whether that is a skip).
pub fn run(p: &EmuParams) -> Result<EmuResult, String> {
    let t_start = Instant::now();
    let mut topo = Topology::new(Topology::unique_prefix(&p.tag));
    two_paths(&mut topo, Some("fd00:2:0:0:8000::/65"))
        .map_err(|e| format!("cannot build the namespaces: {e}"))?;
    let ports: Vec<(u16, u16)> = (0..4).map(|_| (free_tcp_port(), free_tcp_port())).collect();
    let (gate_ep, metrics) = (free_tcp_port(), free_tcp_port());
    let d = |n: &str| topo.dev(n);
    let (m2b, m4a, m4c) = (mac(2, 'b'), mac(4, 'a'), mac(4, 'c'));
    let p1 = |gate: bool| {
        // Re-send the in-band request every RESEND_MS: a node that missed the first one (its
        // port still coming up on a loaded machine) learns the rule within one interval.
        let mut int = int_lines("\"source\"", ports[0].0, ports[0].1)
            + &format!("resend_interval_ms = {RESEND_MS}\n");
        if gate {
            int += &format!(
                "[int.gate]\nlarge = {}\nsmall = {}\nwindow_ms = {}\nrows = {}\nwidth = {}\nexport = \"tcp://127.0.0.1:{gate_ep}\"\n",
                p.large, p.small, p.window_ms, p.rows, p.width
            );
        }
        node_config(
            &topo,
            1,
            &[('a', d("sa")), ('b', d("1b"))],
            &[("fd00:1::/64", 'a', MAC_SRC), ("fd00:2::/64", 'b', MAC_RA)],
            &int,
            &format!("[metrics]\nlisten = \"127.0.0.1:{metrics}\"\n"),
        )
    };
    let cfgs = vec![
        p1(true),
        node_config(
            &topo,
            2,
            &[('a', d("2a")), ('b', d("2b"))],
            &[("fd00:1::/64", 'a', MAC_RB), ("fd00:2::/64", 'b', &m4a)],
            &int_lines("\"transit\"", ports[1].0, ports[1].1),
            "",
        ),
        node_config(
            &topo,
            3,
            &[('a', d("3a")), ('b', d("3b"))],
            &[("fd00:1::/64", 'a', MAC_RC), ("fd00:2::/64", 'b', &m4c)],
            &int_lines("\"transit\"", ports[2].0, ports[2].1),
            "",
        ),
        node_config(
            &topo,
            4,
            &[('a', d("4a")), ('b', d("4b")), ('c', d("4c"))],
            &[("fd00:1::/64", 'a', &m2b), ("fd00:2::/64", 'b', MAC_DST)],
            &int_lines("\"sink\"", ports[3].0, ports[3].1),
            "",
        ),
    ];
    let mut daemons = Daemons::start(&p.peregrine, cfgs);
    let rules = [
        rule_args("7", &DST.to_string(), "1"),
        rule_args("8", &DST_P3.to_string(), "1"),
    ];
    let install = |daemons: &mut Daemons| {
        for r in &rules {
            let r: Vec<&str> = r.iter().map(String::as_str).collect();
            daemons.until_up(0, ports[0].0, &r);
        }
    };
    install(&mut daemons);
    for (i, (r, _)) in ports.iter().enumerate().skip(1) {
        daemons.until_up(i, *r, &["list"]);
    }
    let (_w, sink_lines) = watch(ports[3].1);
    std::thread::sleep(Duration::from_millis(1500));
    let (src_ns, s0) = (topo.ns("src"), topo.dev("s0"));
    let (r_ns, ra) = (topo.ns("r"), topo.dev("ra"));
    let (dst_ns, d0) = (topo.ns("dst"), topo.dev("d0"));
    let frame = |dst: Ipv6Addr, sport: u16, seq: u16| {
        udp_frame(MAC_SRC, &mac(1, 'a'), SRC, dst, sport, 5000, seq, 48)
    };
    // Warm-up: a flow per path; the first packet of each namespace carries the request.
    let warm: Vec<Vec<u8>> = (0..3)
        .flat_map(|i| [frame(DST, 1, i), frame(DST_P3, 1, i)])
        .collect();
    let warm_up = |lines: &Lines| -> Result<(), String> {
        let from = reports(lines).len();
        let t0 = Instant::now();
        let mut sent_at: Option<Instant> = None;
        loop {
            if sent_at.is_none_or(|t| t.elapsed() > Duration::from_millis(RESEND_MS + 500)) {
                send(&src_ns, &s0, &warm, 20);
                sent_at = Some(Instant::now());
            }
            let r = reports(lines);
            let seen = |hop: u64| r[from..].iter().any(|x| hop_ids(x) == [hop]);
            if seen(2) && seen(3) {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(format!(
                    "warm-up: no reports with both transits: {:?}",
                    &r[from..]
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    warm_up(&sink_lines)?;

    // The traffic: every flow's packets, shuffled (seeded).
    let sizes = zipf_sizes(p);
    let mut order: Vec<usize> = sizes
        .iter()
        .enumerate()
        .flat_map(|(i, &n)| std::iter::repeat_n(i, n as usize))
        .collect();
    let mut rng = seeded(p.seed);
    for i in (1..order.len()).rev() {
        let j = (unit_f64(&mut rng) * (i + 1) as f64) as usize;
        order.swap(i, j.min(i));
    }
    let mut seq = vec![0u16; sizes.len()];
    let frames: Vec<Vec<u8>> = order
        .iter()
        .map(|&i| {
            let (dst, sport) = flow_of(i + 1);
            seq[i] = seq[i].wrapping_add(1);
            frame(dst, sport, seq[i])
        })
        .collect();
    let frame_bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();

    // Run 1: with the gate, the collector merging.
    let before_reports = reports(&sink_lines).len();
    let collector = Command::new(ctl())
        .args([
            "codesign",
            "collect",
            "--int-reports",
            &format!("tcp://127.0.0.1:{}", ports[3].1),
            "--gate",
            &format!("tcp://127.0.0.1:{gate_ep}"),
            "--duration-ms",
            &(60_000 + 3 * frames.len() as u64 / p.burst.max(1) as u64).to_string(),
            "--idle-ms",
            &(p.window_ms + 4000).to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("peregrinectl: {e}"))?;
    let mut collector = Guard(Some(collector));
    std::thread::sleep(Duration::from_millis(1500));
    let b0 = sys_counter(&r_ns, &ra, "rx_bytes")?;
    let d0_0 = sys_counter(&dst_ns, &d0, "rx_packets")?;
    send_paced(&src_ns, &s0, &frames, p.burst);
    let child = collector.0.take().unwrap();
    let out = child
        .wait_with_output()
        .map_err(|e| format!("collector: {e}"))?;
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("collector output: {e}: {:?}", out.stdout))?;
    let b1 = sys_counter(&r_ns, &ra, "rx_bytes")?;
    let d0_1 = sys_counter(&dst_ns, &d0, "rx_packets")?;
    let page = scrape(metrics);
    let mut paths = [PathReports::default(); 2];
    for r in &reports(&sink_lines)[before_reports..] {
        let (i, hop) = match r["ns_id"].as_u64() {
            Some(7) => (0, 2),
            Some(8) => (1, 3),
            _ => continue,
        };
        paths[i].reports += 1;
        paths[i].with_hop += u64::from(hop_ids(r) == [hop]);
    }
    let mut flows: Vec<FlowOutcome> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let (dst, sport) = flow_of(i + 1);
            FlowOutcome {
                rank: i + 1,
                dst,
                sport,
                sent: n,
                int_packets: 0,
                sketch: 0,
                merged: 0,
            }
        })
        .collect();
    for f in merged["flows"].as_array().into_iter().flatten() {
        let (Some(dst), Some(sport)) = (
            f["dst"].as_str().and_then(|s| s.parse::<Ipv6Addr>().ok()),
            f["sport"].as_u64(),
        ) else {
            continue;
        };
        if sport < 10_001 || sport as usize > 10_000 + flows.len() {
            continue;
        }
        let o = &mut flows[sport as usize - 10_001];
        if o.dst == dst {
            o.int_packets = f["int_packets"].as_u64().unwrap_or(0);
            o.sketch = f["sketch"].as_u64().unwrap_or(0);
            o.merged = f["total"].as_u64().unwrap_or(0);
        }
    }
    let mut summary = merged.clone();
    if let Some(o) = summary.as_object_mut() {
        o.remove("flows");
    }

    // Run 2: the same frames, p1 without the gate.
    daemons.replace(0, p1(false));
    install(&mut daemons);
    std::thread::sleep(Duration::from_millis(1000));
    warm_up(&sink_lines)?;
    std::thread::sleep(Duration::from_millis(500));
    let b2 = sys_counter(&r_ns, &ra, "rx_bytes")?;
    let d0_2 = sys_counter(&dst_ns, &d0, "rx_packets")?;
    send_paced(&src_ns, &s0, &frames, p.burst);
    std::thread::sleep(Duration::from_millis(2500));
    let b3 = sys_counter(&r_ns, &ra, "rx_bytes")?;
    let d0_3 = sys_counter(&dst_ns, &d0, "rx_packets")?;
    let page2 = scrape(metrics);
    daemons.stop_all();
    Ok(EmuResult {
        flows,
        frames: frames.len() as u64,
        frame_bytes,
        wire_bytes_gate: b1 - b0,
        wire_bytes_plain: b3 - b2,
        delivered_gate: d0_1 - d0_0,
        delivered_plain: d0_3 - d0_2,
        int_added_gate: source_counter(&page, "int_added"),
        int_added_plain: source_counter(&page2, "int_added"),
        gate_switched: source_counter(&page, "gate_switched"),
        gate_skipped: source_counter(&page, "gate_skipped"),
        gate_bytes_saved: source_counter(&page, "gate_bytes_saved"),
        paths,
        collector: summary,
        seconds: t_start.elapsed().as_secs_f64(),
    })
}
