//! INT around the UPF on N6, against the UPF alone, in paired alternating rounds (issue 8:
//! INT source + sink at 1/100 sampling reading the packet metadata must keep >= 0.95 of the
//! UPF alone's packet rate).
//!
//! Pipelines over the same traffic (10k sessions; each iteration one 32-packet downlink
//! batch on N6, IPv6 server -> UE, encapsulated over IPv4, and one 32-packet uplink batch on
//! N3, IPv6 UE -> server, decapsulated and routed on N6):
//! * `upf`: the UPF alone, classifying every packet itself;
//! * `classify+upf`: the `Classify` stage, then the UPF reading its metadata;
//! * `classify+int+upf`: as the daemon's UPF pipeline with `[int]` places them (docs/int.md):
//!   `Classify`, the INT sink on N6 ingress (`OnIngress`: counts the monitored downlink
//!   flows, strips INT when present), the UPF, the INT source on N6 egress (`OnEgress`: the
//!   decapsulated uplink, 1 in 100 packets of each monitored flow instrumented with an IOAM
//!   trace); every stage reads the metadata. 64 rules: one per flow in the traffic.
//! * `classify+int+gate+upf`: the same with the sketch-INT co-design gate at the source
//!   (`docs/codesign.md`: d = 3, w = 4096, T_hi = 64 packets), which counts every uplink
//!   packet; the flows turn large within the first iterations, so their INT stops.
//!
//! Each round runs every pipeline for `--ms` (default 300) in an order that alternates
//! between rounds, so load from other processes hits every side alike; the figure is the
//! median over rounds of ns per packet and of the per-round ratios. Run with
//! `cargo bench -p peregrine-perf --bench upf_int -- [--rounds N] [--ms M] [--exact]`.

use crossbeam_channel::bounded;
use peregrine_dataplane::classify::Classify;
use peregrine_dataplane::qos::{ColourMode, TrTcmConfig};
use peregrine_dataplane::runtime::{
    Action, Batch, Context, Disposition, OnEgress, OnIngress, Pipeline, Publisher, Reasons, Stage,
};
use peregrine_dataplane::upf::{Upf, UpfStats, UpfTables};
use peregrine_dataplane::OwnedBuf;
use peregrine_int::gate::{FlowGate, GateConfig, GateUnit};
use peregrine_int::namespace::NamespaceTable;
use peregrine_int::request::{Flags, Mode, Protocol, Rule, TraceType};
use peregrine_int::stages::{IntConfig, IntSink, IntSource};
use peregrine_testkit::upf::*;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

const BATCH: u32 = 32;
const SESSIONS: u32 = 10_000;
const UL_PORT: u16 = 0;
const DL_PORT: u16 = 1;

fn tables() -> UpfTables {
    let meter = TrTcmConfig {
        cir: 0,
        cbs: 0,
        pir: 1 << 40,
        pbs: 1 << 24,
        mode: ColourMode::Blind,
    };
    let mut tb = TableBuilder::default();
    for i in 0..SESSIONS {
        let mut u = ul(Some(9));
        u.qers = vec![qer(None, true, Some((meter, 2 * i, 1)))];
        let mut d6 = dl(0x3000_0000 + i, IpAddr::V4(gnb_v4()));
        d6.qers = vec![qer(Some(9), true, Some((meter, 2 * i + 1, 1)))];
        tb.add(Key::Teid(0x1000_0000 + i), &[u])
            .add(Key::Ue6(ue_v6(i)), &[d6]);
    }
    tb.build()
}

fn sess(k: u32) -> u32 {
    k * (SESSIONS / BATCH)
}

/// A rule for the flow `src` -> `dst`:`dport` (UDP); `sport` 0 = any source port.
fn int_rule(
    ns: u16,
    src: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
    sport: u16,
    dport: u16,
) -> Rule {
    Rule {
        ns_id: ns,
        app_id: 1,
        src_ip: src,
        dst_ip: dst,
        src_port: sport,
        dst_port: dport,
        protocol: Protocol::Udp,
        trace_type: TraceType(0xf000_e000),
        mode: Mode::Count(100),
        flags: Flags::default(),
    }
}

/// One pipeline under test with the publishers its stages read.
struct Side {
    name: &'static str,
    pipe: Pipeline<OwnedBuf>,
    batch: Batch<OwnedBuf>,
    _keep: Box<dyn std::any::Any>,
}

fn side(name: &'static str, classify: bool, int: bool, gate: bool, sport: u16) -> Side {
    let tables = Publisher::new(tables());
    let routes = Publisher::new(routes());
    let mut reasons = Reasons::new();
    let upf = Upf::new(
        tables.reader(),
        routes.reader(),
        vec![N3_MAC, N6_MAC, N9_MAC],
        peregrine_dataplane::upf::UpfConfig {
            max_meter_slots: 2 * SESSIONS,
            ..cfg()
        },
        Arc::new(UpfStats::new(16)),
        &mut reasons,
    );
    let mut stages: Vec<Box<dyn Stage<OwnedBuf>>> = Vec::new();
    let mut ns_table = NamespaceTable::default();
    for k in 0..BATCH {
        let ue = ue_v6(sess(k));
        ns_table
            .install(int_rule(1 + k as u16, server_v6(), ue, sport, 80))
            .unwrap();
        ns_table
            .install(int_rule(100 + k as u16, ue, server_v6(), sport, 53))
            .unwrap();
    }
    let int_tables = Publisher::new((*ns_table.snapshot()).clone());
    let (tx, rx) = bounded(1 << 16);
    if classify {
        stages.push(Box::new(Classify::new()));
    }
    if int {
        let sink_cfg = IntConfig {
            node_id: 2,
            ..IntConfig::default()
        };
        let sink = IntSink::new(sink_cfg, int_tables.reader(), tx, &mut reasons);
        stages.push(Box::new(OnIngress::new(
            &[DL_PORT],
            sink.after_classifier(),
        )));
    }
    stages.push(Box::new(if classify {
        upf.after_classifier()
    } else {
        upf
    }));
    if int {
        let src_cfg = IntConfig {
            node_id: 1,
            hop_limit_after_forward: false,
            ..IntConfig::default()
        };
        let mut source = IntSource::new(src_cfg, int_tables.reader());
        if gate {
            source = source.with_gate(
                FlowGate::new(GateConfig {
                    window_ms: 1000,
                    rows: 3,
                    width: 4096,
                    unit: GateUnit::Packets,
                    large: 64,
                    small: 16,
                    export: None,
                    export_flows: 4096,
                })
                .expect("valid gate"),
            );
        }
        stages.push(Box::new(OnEgress::new(
            &[DL_PORT],
            source.after_classifier(),
        )));
    }
    Side {
        name,
        pipe: Pipeline::new(stages),
        batch: Batch::new(),
        _keep: Box::new((tables, routes, int_tables, rx)),
    }
}

/// The two batches of one iteration: (rx port, frames).
fn traffic() -> [(u16, Vec<Vec<u8>>); 2] {
    let dl = (0..BATCH)
        .map(|k| dl_frame(&udp6(server_v6(), ue_v6(sess(k)), 80, 64 - 48)))
        .collect();
    let ul = (0..BATCH)
        .map(|k| {
            let inner = udp6(ue_v6(sess(k)), server_v6(), 53, 64 - 48);
            ul_frame(false, 0x1000_0000 + sess(k), Some(9), &inner)
        })
        .collect();
    [(DL_PORT, dl), (UL_PORT, ul)]
}

impl Side {
    /// Run `iters` iterations from time `now`; returns packets forwarded.
    fn run(
        &mut self,
        bufs: &mut Vec<OwnedBuf>,
        tr: &[(u16, Vec<Vec<u8>>)],
        now: &mut u64,
        iters: u32,
    ) -> u64 {
        let mut sent = 0;
        for _ in 0..iters {
            for (port, frames) in tr {
                *now += 1_000_000;
                let cx = Context::fixed(*now, 0);
                self.batch.rx_port = *port;
                for (mut b, f) in bufs.drain(..).zip(frames) {
                    b.set_data(f).unwrap();
                    let _ = self.batch.push(b, Disposition::CONTINUE);
                }
                // As the worker presents a received batch (`Worker::process`).
                self.batch.reset_dispositions();
                self.pipe.run(&mut self.batch, &cx);
                for (b, d) in self.batch.drain() {
                    sent += matches!(d.action(), Action::Tx(_)) as u64;
                    bufs.push(b);
                }
            }
        }
        sent
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let rounds = arg("--rounds", 15) as usize;
    let ms = arg("--ms", 300);
    // `--exact`: rules name the source port too (the index then probes with the flow hash
    // the classifier computed); default: source port 0 = any (the hash is recomputed).
    let sport = if std::env::args().any(|a| a == "--exact") {
        40000 // what `udp6` sends from
    } else {
        0
    };
    let tr = traffic();
    let mut sides = [
        side("upf", false, false, false, sport),
        side("classify+upf", true, false, false, sport),
        side("classify+int+upf", true, true, false, sport),
        side("classify+int+gate+upf", true, true, true, sport),
    ];
    let mut bufs: Vec<Vec<OwnedBuf>> = (0..sides.len())
        .map(|_| {
            (0..BATCH)
                .map(|_| OwnedBuf::from_slice(&tr[0].1[0]))
                .collect()
        })
        .collect();
    let mut now = vec![0u64; sides.len()];
    // Warm up, and check that everything is forwarded.
    for (i, s) in sides.iter_mut().enumerate() {
        let sent = s.run(&mut bufs[i], &tr, &mut now[i], 200);
        assert_eq!(
            sent,
            200 * 2 * u64::from(BATCH),
            "{}: all forwarded",
            s.name
        );
    }
    let mut ns = vec![Vec::new(); sides.len()];
    for r in 0..rounds {
        let order: Vec<usize> = if r % 2 == 0 {
            (0..sides.len()).collect()
        } else {
            (0..sides.len()).rev().collect()
        };
        for i in order {
            let s = &mut sides[i];
            let t0 = Instant::now();
            let mut pkts = 0u64;
            while t0.elapsed().as_millis() < u128::from(ms) {
                pkts += 100 * 2 * u64::from(BATCH);
                s.run(&mut bufs[i], &tr, &mut now[i], 100);
            }
            ns[i].push(t0.elapsed().as_nanos() as f64 / pkts as f64);
        }
    }
    println!(
        "{rounds} paired rounds of {ms} ms per side, 64 B inner IPv6, {SESSIONS} sessions, \
         rules with source port {sport}"
    );
    for (i, s) in sides.iter().enumerate() {
        let mut v = ns[i].clone();
        println!(
            "{:>18}: {:6.1} ns/pkt  {:5.2} Mpps",
            s.name,
            median(&mut v),
            1e3 / median(&mut v)
        );
    }
    for (a, b) in [(0, 2), (1, 2), (0, 1), (2, 3)] {
        let mut ratio: Vec<f64> = ns[a].iter().zip(&ns[b]).map(|(x, y)| x / y).collect();
        println!(
            "rate {} / {}: {:.3} (median of per-round ratios)",
            sides[b].name,
            sides[a].name,
            median(&mut ratio)
        );
    }
}
