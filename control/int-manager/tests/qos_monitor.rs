//! Synthetic-traffic tests of the QoS monitor with known ground truth.

use peregrine_int_manager::qos_monitor::{
    compose, CapPolicy, CounterWidth, HopEntry, IngestError, LinkMetrics, QosConfig, QosMonitor,
    QosReport, RawReport, Window, MAX_SAMPLES,
};

use peregrine_testkit::rng::{unit_f64, RngCore, SeedableRng, SplitMix64};

const SEC: u64 = 1_000_000_000;

/// splitmix64 (the test kit's `rand_xoshiro`): tiny deterministic PRNG.
struct Rng(SplitMix64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64::seed_from_u64(seed))
    }
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in [0, 1).
    fn f(&mut self) -> f64 {
        unit_f64(&mut self.0)
    }
    /// Uniform integer in [-a, a].
    fn sym(&mut self, a: u64) -> i64 {
        (self.next() % (2 * a + 1)) as i64 - a as i64
    }
}

struct Flow {
    ns: u32,
    pps: u64,
    len: u32,
    delay: u64,
    jitter_a: u64,
    loss: f64,
    seq0: u32,
    width: CounterWidth,
}

impl Flow {
    fn new(ns: u32) -> Self {
        Flow {
            ns,
            pps: 10_000,
            len: 500,
            delay: 2_000_000,
            jitter_a: 0,
            loss: 0.0,
            seq0: 0,
            width: CounterWidth::Bits32,
        }
    }

    /// Feed packets sent in [t0, t1) into `m`; source TX counter = packets sent (32-bit).
    fn run(&self, m: &mut QosMonitor, rng: &mut Rng, t0: u64, t1: u64) {
        let gap = SEC / self.pps;
        let mut i = t0 / gap;
        while i * gap < t1 {
            let src = i * gap;
            let seq = self.seq0.wrapping_add(i as u32) & mask(self.width);
            i += 1;
            if rng.f() < self.loss {
                continue;
            }
            let j = if self.jitter_a > 0 {
                rng.sym(self.jitter_a)
            } else {
                0
            };
            let d = (self.delay as i64 + j) as u64;
            let r = RawReport {
                seq,
                seq_width: self.width,
                src_tx_packets: Some(i as u32),
                ..RawReport::new(self.ns, seq, src, src + d, self.len)
            };
            m.ingest(&r).unwrap();
        }
    }
}

fn mask(w: CounterWidth) -> u32 {
    match w {
        CounterWidth::Bits16 => 0xffff,
        CounterWidth::Bits32 => u32::MAX,
    }
}

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

#[test]
fn constant_rate_fixed_delay() {
    let mut m = QosMonitor::default();
    let f = Flow::new(1);
    f.run(&mut m, &mut Rng::new(1), 0, 2 * SEC + 5_000_000);
    let r = m
        .report(1, Window::OneSecond, 2 * SEC + 5 * 1_000_000)
        .unwrap();
    assert_eq!((r.window_start_ns, r.window_end_ns), (SEC, 2 * SEC));
    // 10 kpps * 500 B = 40 Mbit/s.
    assert!(
        rel(r.throughput_bps.unwrap(), 40e6) < 0.005,
        "{:?}",
        r.throughput_bps
    );
    assert_eq!(r.delay_ns.mean, 2_000_000.0);
    assert_eq!(
        (
            r.delay_ns.p50,
            r.delay_ns.p99,
            r.delay_ns.min,
            r.delay_ns.max
        ),
        (2_000_000, 2_000_000, 2_000_000, 2_000_000)
    );
    assert_eq!(r.jitter_ns, Some(0.0));
    assert_eq!(r.loss_ratio, Some(0.0));
    assert_eq!(r.loss_ratio_counters, Some(0.0));
    assert_eq!(r.reports, 10_000);
    // Source -> sink is one link; the composition equals it.
    assert_eq!(r.per_hop.len(), 1);
    assert_eq!(r.composed.delay_ns, Some(2_000_000.0));
}

#[test]
fn uniform_jitter_matches_analytical_value() {
    // D = 1 ms + U[-a, a]; E|D_k - D_{k-1}| = 2a/3 for iid uniform (seed III-F jitter definition).
    let a = 20_000u64;
    let mut m = QosMonitor::default();
    let f = Flow {
        jitter_a: a,
        delay: 1_000_000,
        ..Flow::new(1)
    };
    f.run(&mut m, &mut Rng::new(7), 0, 11 * SEC);
    let r = m.report(1, Window::TenSeconds, 10 * SEC).unwrap();
    let expect = 2.0 * a as f64 / 3.0;
    assert!(
        rel(r.jitter_ns.unwrap(), expect) < 0.02,
        "{:?} vs {expect}",
        r.jitter_ns
    );
    assert!(rel(r.jitter_rfc3550_ns.unwrap(), expect) < 0.5);
    assert!((r.delay_ns.mean - 1e6).abs() < 200.0);
    assert!(r.delay_ns.min >= 1_000_000 - a as i64 && r.delay_ns.max <= 1_000_000 + a as i64);
    // Uniform: p50 near the centre, p99 near the top (histogram resolution 6.25 %).
    assert!(rel(r.delay_ns.p50 as f64, 1e6) < 0.07);
    assert!(
        r.delay_ns.p99 as f64 > 1e6 && rel(r.delay_ns.p99 as f64, 1e6 + 0.98 * a as f64) < 0.07
    );
}

#[test]
fn bernoulli_loss_within_tolerance() {
    let p = 0.05;
    let mut m = QosMonitor::default();
    let f = Flow {
        loss: p,
        ..Flow::new(1)
    };
    let mut rng = Rng::new(42);
    // Feed one second at a time and read the 1 s window that just closed (2 ms path delay).
    for s in 1..=10 {
        f.run(&mut m, &mut rng, (s - 1) * SEC, s * SEC);
        if s >= 2 {
            let r = m.report(1, Window::OneSecond, s * SEC + 2_000_000).unwrap();
            assert_eq!(r.window_start_ns, (s - 1) * SEC);
            assert!(
                (r.loss_ratio.unwrap() - p).abs() < 0.015,
                "window {s}: {:?}",
                r.loss_ratio
            );
        }
    }
    f.run(&mut m, &mut rng, 10 * SEC, 10 * SEC + SEC / 10);
    let r = m.report(1, Window::TenSeconds, 10 * SEC).unwrap();
    assert!(
        (r.loss_ratio.unwrap() - p).abs() < 0.004,
        "{:?}",
        r.loss_ratio
    );
    assert!(
        (r.loss_ratio_counters.unwrap() - p).abs() < 0.004,
        "{:?}",
        r.loss_ratio_counters
    );
    // Throughput counts delivered bytes: 40 Mbit/s * (1 - p).
    assert!(rel(r.throughput_bps.unwrap(), 40e6 * (1.0 - p)) < 0.01);
}

#[test]
fn sequence_wrap_16_and_32_no_spurious_loss() {
    for (width, seq0) in [
        (CounterWidth::Bits16, 0xffff - 2_000),
        (CounterWidth::Bits32, u32::MAX - 2_000),
    ] {
        let mut m = QosMonitor::default();
        let f = Flow {
            width,
            seq0,
            ..Flow::new(3)
        };
        // Both cross their wrap 0.2 s in, inside the first 1 s window.
        let mut rng = Rng::new(1);
        for s in 1..=3 {
            f.run(&mut m, &mut rng, (s - 1) * SEC, s * SEC);
            let r = m.report(3, Window::OneSecond, s * SEC + 2_000_000).unwrap();
            assert_eq!(r.loss_ratio, Some(0.0), "{width:?} window {s}");
        }
        let r = m.report(3, Window::TenSeconds, 10 * SEC).unwrap();
        assert_eq!((r.reports, r.loss_ratio), (30_000, Some(0.0)));
        assert_eq!(r.loss_ratio_counters, Some(0.0));
        let st = m.stats();
        assert_eq!(
            (st.late_seq, st.duplicate_seq, st.stale_counters),
            (0, 0, 0)
        );
    }
}

#[test]
fn reordering_is_not_loss() {
    let mut m = QosMonitor::default();
    let mut rng = Rng::new(5);
    let n = 30_000u64;
    let mut order: Vec<u64> = (0..n).collect();
    // Local shuffles: swap neighbours, and move every 50th packet back by up to 20 positions.
    for i in (0..n as usize - 1).step_by(7) {
        order.swap(i, i + 1);
    }
    for i in (25..n as usize).step_by(50) {
        let k = (rng.next() % 20) as usize + 1;
        let x = order.remove(i);
        order.insert(i + k.min(n as usize - 1 - i), x);
    }
    for (pos, &i) in order.iter().enumerate() {
        let sink = pos as u64 * 100_000 + 1_000_000;
        let seq = (i as u32).wrapping_add(0xffff - 100) & 0xffff;
        let r = RawReport {
            seq_width: CounterWidth::Bits16,
            ..RawReport::new(9, seq, i * 100_000, sink, 100)
        };
        m.ingest(&r).unwrap();
    }
    let r = m.report(9, Window::OneSecond, 3 * SEC + 5_000_000).unwrap();
    assert_eq!((r.window_start_ns, r.loss_ratio), (2 * SEC, Some(0.0)));
    assert!(r.jitter_ns.unwrap() > 0.0);
    let r = m.report(9, Window::TenSeconds, 10 * SEC).unwrap();
    assert_eq!((r.reports, r.loss_ratio), (n, Some(0.0)));
    let st = m.stats();
    assert_eq!((st.late_seq, st.duplicate_seq), (0, 0));
}

#[test]
fn windows_roll_over_at_1_10_60_s() {
    let mut m = QosMonitor::default();
    let mut rng = Rng::new(1);
    // 1000 pps in [0, 1 s), 2000 pps in [1 s, 2 s), then 100 pps up to 61 s.
    // Zero delay so window membership (sink clock) equals send time.
    Flow {
        pps: 1000,
        delay: 0,
        ..Flow::new(1)
    }
    .run(&mut m, &mut rng, 0, SEC);
    Flow {
        pps: 2000,
        delay: 0,
        ..Flow::new(1)
    }
    .run(&mut m, &mut rng, SEC, 2 * SEC);
    assert!(m.report(1, Window::OneSecond, SEC - 1).is_none()); // no complete window yet
    let r0 = m.report(1, Window::OneSecond, SEC + SEC / 2).unwrap();
    assert_eq!((r0.window_start_ns, r0.reports), (0, 1000));
    assert!(rel(r0.throughput_bps.unwrap(), 1000.0 * 500.0 * 8.0) < 0.005);
    // The open window [1 s, 2 s) closes once `now` reaches 2 s, even with no later packet.
    let r1 = m.report(1, Window::OneSecond, 2 * SEC).unwrap();
    assert_eq!((r1.window_start_ns, r1.reports), (SEC, 2000));
    assert!(rel(r1.throughput_bps.unwrap(), 2000.0 * 500.0 * 8.0) < 0.005);
    let mut m = QosMonitor::default();
    Flow {
        pps: 100,
        delay: 0,
        ..Flow::new(1)
    }
    .run(&mut m, &mut rng, 0, 61 * SEC);
    let r = m.report(1, Window::OneMinute, 60 * SEC).unwrap();
    assert_eq!(
        (r.window_start_ns, r.window_end_ns, r.reports),
        (0, 60 * SEC, 6000)
    );
    let r = m.report(1, Window::TenSeconds, 60 * SEC).unwrap();
    assert_eq!((r.window_start_ns, r.reports), (50 * SEC, 1000));
    // Only the open and the last closed window are kept: [40 s, 50 s) is gone once 60 s is open.
    assert!(m.report(1, Window::TenSeconds, 59 * SEC).is_none());
    let r = m.report(1, Window::OneSecond, 61 * SEC).unwrap();
    assert_eq!((r.window_start_ns, r.reports), (60 * SEC, 100));
    assert!(rel(r.throughput_bps.unwrap(), 100.0 * 500.0 * 8.0) < 0.005);
    // [60 s, 120 s) is not complete before 120 s; the last complete minute is still [0, 60 s).
    assert_eq!(
        m.report(1, Window::OneMinute, 90 * SEC)
            .unwrap()
            .window_start_ns,
        0
    );
    assert_eq!(
        m.report(1, Window::OneMinute, 120 * SEC).unwrap().reports,
        100
    );
    // No traffic in [61 s, 62 s) and beyond.
    assert!(m.report(1, Window::OneSecond, 62 * SEC + 1).is_none());
    assert!(m.report(1, Window::OneSecond, 70 * SEC).is_none());
    assert!(m.report(2, Window::OneSecond, 70 * SEC).is_none());
}

#[test]
fn memory_bound_with_a_million_packets() {
    let mut m = QosMonitor::default();
    let mut r = RawReport::new(1, 0, 0, 0, 64);
    for i in 0..1_000_000u64 {
        r.seq = i as u32;
        r.src_ts_ns = i * 1_000;
        r.sink_ts_ns = i * 1_000 + 10_000;
        m.ingest(&r).unwrap();
    }
    let s = m.samples(1).unwrap();
    assert_eq!(s.len(), MAX_SAMPLES);
    assert!(s.capacity() < 2 * MAX_SAMPLES);
    assert_eq!(s.back().unwrap().seq, 999_999);
    // 1 Mpps * 64 B = 512 Mbit/s.
    let rep = m.report(1, Window::OneSecond, SEC).unwrap();
    assert_eq!(rep.reports, 1_000_000 - 10);
    assert!(rel(rep.throughput_bps.unwrap(), 512e6) < 0.005);
}

#[test]
fn namespace_cap_refuse_and_evict() {
    let cfg = QosConfig {
        max_namespaces: 2,
        cap_policy: CapPolicy::Refuse,
    };
    let mut m = QosMonitor::new(cfg);
    m.ingest(&RawReport::new(1, 0, 0, 10, 1)).unwrap();
    m.ingest(&RawReport::new(2, 0, 0, 20, 1)).unwrap();
    assert_eq!(
        m.ingest(&RawReport::new(3, 0, 0, 30, 1)),
        Err(IngestError::NamespaceLimit)
    );
    m.ingest(&RawReport::new(1, 1, 0, 40, 1)).unwrap(); // known namespace still accepted
    assert_eq!((m.stats().refused, m.namespace_count()), (1, 2));

    let mut m = QosMonitor::new(QosConfig {
        cap_policy: CapPolicy::EvictLeastRecent,
        ..cfg
    });
    m.ingest(&RawReport::new(1, 0, 0, 50, 1)).unwrap();
    m.ingest(&RawReport::new(2, 0, 0, 20, 1)).unwrap();
    m.ingest(&RawReport::new(3, 0, 0, 60, 1)).unwrap();
    assert_eq!((m.stats().evicted, m.namespace_count()), (1, 2));
    assert!(m.samples(2).is_none() && m.samples(1).is_some() && m.samples(3).is_some());

    let many = RawReport {
        hops: vec![HopEntry::default(); 17],
        ..RawReport::new(1, 0, 0, 0, 1)
    };
    assert_eq!(m.ingest(&many), Err(IngestError::TooManyHops));
    assert_eq!(m.stats().too_many_hops, 1);
}

/// A 3-hop path (4 links) with per-link fixed delay, jitter on one link and Bernoulli loss; hops
/// keep 16-bit packet counters (starting near the wrap) and 32-bit byte counters (likewise).
fn run_path(m: &mut QosMonitor, secs: u64) -> ([u64; 4], [f64; 4], u64) {
    let delays = [1_000_000u64, 3_000_000, 500_000, 2_000_000];
    let losses = [0.02, 0.05, 0.0, 0.1];
    let jitter_link = 1;
    let jitter_a = 50_000u64;
    let ids = [0u32, 11, 12, 13, 99];
    let len = 1000u32;
    let mut rng = Rng::new(99);
    // Per hop: rx/tx packets (16-bit), rx bytes (32-bit).
    let mut rx = [0xff00u32; 3];
    let mut tx = [0xff00u32; 3];
    let mut rxb = [u32::MAX - 5_000_000; 3];
    let pps = 5_000u64;
    let gap = SEC / pps;
    for i in 0..secs * pps {
        let src = i * gap;
        let mut t = src;
        let mut hops = Vec::with_capacity(3);
        let mut lost = false;
        for l in 0..4 {
            if rng.f() < losses[l] {
                lost = true;
                break;
            }
            t += delays[l];
            if l == jitter_link {
                t = (t as i64 + rng.sym(jitter_a)) as u64;
            }
            if l < 3 {
                rx[l] = rx[l].wrapping_add(1) & 0xffff;
                rxb[l] = rxb[l].wrapping_add(len);
                tx[l] = tx[l].wrapping_add(1) & 0xffff;
                hops.push(HopEntry {
                    node_id: ids[l + 1],
                    ingress_ts_ns: Some(t),
                    egress_ts_ns: Some(t + 10),
                    packet_counter_width: CounterWidth::Bits16,
                    rx_packets: Some(rx[l]),
                    tx_packets: Some(tx[l]),
                    rx_bytes: Some(rxb[l]),
                    tx_bytes: Some(rxb[l]),
                });
            }
        }
        if lost {
            continue;
        }
        let r = RawReport {
            source_node_id: ids[0],
            sink_node_id: ids[4],
            src_tx_packets: Some((i + 1) as u32),
            hops,
            ..RawReport::new(7, i as u32, src, t, len)
        };
        m.ingest(&r).unwrap();
    }
    (delays, losses, gap)
}

#[test]
fn path_composition_matches_end_to_end() {
    let mut m = QosMonitor::default();
    let (delays, losses, _) = run_path(&mut m, 11);
    let r: QosReport = m.report(7, Window::TenSeconds, 10 * SEC).unwrap();
    assert_eq!(r.per_hop.len(), 4);
    let pairs: Vec<(u32, u32)> = r.per_hop.iter().map(|h| (h.from_node, h.to_node)).collect();
    assert_eq!(pairs, vec![(0, 11), (11, 12), (12, 13), (13, 99)]);
    for (l, h) in r.per_hop.iter().enumerate() {
        let d = h.metrics.delay_ns.unwrap();
        assert!(
            (d - delays[l] as f64).abs() < if l == 1 { 1_000.0 } else { 1e-6 },
            "link {l} delay {d}"
        );
        assert!(
            (h.metrics.loss_ratio.unwrap() - losses[l]).abs() < 0.008,
            "link {l}: {:?}",
            h.metrics.loss_ratio
        );
    }
    // Eq. (2): delay sums telescope exactly to the end-to-end mean.
    assert!((r.composed.delay_ns.unwrap() - r.delay_ns.mean).abs() < 1e-3);
    // Eq. (2) for jitter: only link 1 jitters, so its jitter equals the end-to-end one.
    assert!(rel(r.composed.jitter_ns.unwrap(), r.jitter_ns.unwrap()) < 1e-9);
    // Eq. (3): loss composes multiplicatively; compare with the end-to-end measurements.
    let expect = 1.0 - losses.iter().map(|l| 1.0 - l).product::<f64>();
    let composed = r.composed.loss_ratio.unwrap();
    assert!(
        (composed - r.loss_ratio.unwrap()).abs() < 0.01,
        "{composed} vs {:?}",
        r.loss_ratio
    );
    assert!((composed - r.loss_ratio_counters.unwrap()).abs() < 0.005);
    assert!((composed - expect).abs() < 0.01);
    // Eq. (1): path throughput is the last (most lossy downstream) link's = end to end.
    assert!(
        rel(
            r.composed.throughput_bps.unwrap(),
            r.throughput_bps.unwrap()
        ) < 0.005
    );
    let delivered = 5_000.0 * 1000.0 * 8.0 * (1.0 - expect);
    assert!(rel(r.throughput_bps.unwrap(), delivered) < 0.01);
    assert_eq!(m.stats().stale_counters, 0);
    // Serialisable for the INT manager's PUB socket.
    let js = serde_json::to_string(&r).unwrap();
    let back: QosReport = serde_json::from_str(&js).unwrap();
    assert_eq!(
        (
            back.namespace,
            back.window,
            back.reports,
            back.per_hop.len()
        ),
        (7, Window::TenSeconds, r.reports, 4)
    );
    assert!(rel(back.throughput_bps.unwrap(), r.throughput_bps.unwrap()) < 1e-12);
}

#[test]
fn compose_rules() {
    let l = |t, d, j, p| LinkMetrics {
        throughput_bps: Some(t),
        delay_ns: Some(d),
        jitter_ns: Some(j),
        loss_ratio: Some(p),
    };
    let p = compose(&[
        l(100e6, 10.0, 2.0, 0.1),
        l(40e6, 5.0, 1.0, 0.2),
        l(20e6, 5.0, 1.0, 0.5),
    ]);
    assert_eq!(p.throughput_bps, Some(20e6));
    assert_eq!(p.delay_ns, Some(20.0));
    assert_eq!(p.jitter_ns, Some(4.0));
    assert!((p.loss_ratio.unwrap() - (1.0 - 0.9 * 0.8 * 0.5)).abs() < 1e-12);
    assert_eq!(compose(&[]).delay_ns, None);
    let partial = compose(&[l(1.0, 1.0, 1.0, 0.0), LinkMetrics::default()]);
    assert_eq!(partial.throughput_bps, None);
}

#[test]
fn path_change_is_counted() {
    let mut m = QosMonitor::default();
    let hop = |id| HopEntry {
        node_id: id,
        ingress_ts_ns: Some(5),
        ..Default::default()
    };
    m.ingest(&RawReport {
        hops: vec![hop(1)],
        ..RawReport::new(1, 0, 0, 10, 1)
    })
    .unwrap();
    m.ingest(&RawReport {
        hops: vec![hop(1)],
        ..RawReport::new(1, 1, 1, 11, 1)
    })
    .unwrap();
    m.ingest(&RawReport {
        hops: vec![hop(2)],
        ..RawReport::new(1, 2, 2, 12, 1)
    })
    .unwrap();
    assert_eq!(m.stats().path_changes, 1);
    let r = m.report(1, Window::OneSecond, SEC).unwrap();
    assert_eq!(r.per_hop[0].to_node, 2);
    assert_eq!(r.reports, 3);
}
