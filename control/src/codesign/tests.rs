//! The merge rule against the real gate: packets go through a [`FlowGate`]; those it judges
//! small "carry INT" and reach the merger as reports, closed windows as the daemon exports
//! them (through CBOR).

use super::*;
use peregrine_int::gate::{FlowGate, GateConfig};

const MS: u64 = 1_000_000;

fn key(n: u16) -> FlowKey {
    FlowKey {
        src: Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, n),
        dst: Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1),
        proto: 17,
        sport: 4000 + n,
        dport: 5000,
    }
}

struct Rig {
    gate: FlowGate,
    merger: Merger,
    reports: u64,
}

impl Rig {
    fn new(width: u32, rows: u8) -> Rig {
        let mut c = GateConfig::with_thresholds(8, 4);
        c.window_ms = 10;
        c.width = width;
        c.rows = rows;
        Rig {
            gate: FlowGate::new(c).unwrap(),
            merger: Merger::new(),
            reports: 0,
        }
    }

    fn export(&mut self) {
        let c = self.gate.config().clone();
        if let Some((w, recs)) = self.gate.take_closed() {
            let m = GateWindowMsg {
                v: GATE_EXPORT_VERSION,
                node_id: 1,
                worker: 0,
                start_ns: w.start_ns,
                window_ns: c.window_ms * MS,
                unit: GateWindowMsg::unit_of(c.unit).into(),
                large: c.large,
                small: c.small,
                packets: w.packets,
                overflow: w.overflow,
                lost: 0,
                flows: recs
                    .iter()
                    .map(|r| [r.hash, r.at_switch, r.at_end])
                    .collect(),
            };
            let back = GateWindowMsg::decode(&m.encode()).unwrap();
            assert_eq!(back, m);
            self.merger.on_window(&back);
        }
    }

    fn packet(&mut self, k: FlowKey, now: u64) {
        let v = self.gate.observe(k.hash(), 100, now);
        if !v.large {
            self.merger.on_report(k, 86);
            self.reports += 1;
        }
        self.export();
    }

    fn burst(&mut self, k: FlowKey, n: u64, t0: u64) {
        for i in 0..n {
            self.packet(k, t0 + i);
        }
    }

    fn finish(&mut self) {
        self.gate.flush();
        self.export();
    }
}

#[test]
fn small_then_large_then_small_again_is_counted_once() {
    let mut r = Rig::new(1024, 3);
    let a = key(1);
    // Window 0: 3 (small, INT); 1: 30 (INT for 8, then the sketch); 2: 20 (large from the
    // first packet: hysteresis); 3: 2 (still large: 20 >= T_lo); 4: 3 (small again).
    for (w, n) in [(0, 3), (1, 30), (2, 20), (3, 2), (4, 3)] {
        r.burst(a, n, w * 10 * MS);
    }
    r.finish();
    let f = *r.merger.get(&a).unwrap();
    assert_eq!(f.key, Some(a));
    assert_eq!(f.int_packets, 3 + 8 + 3);
    assert_eq!(f.sketch, 22 + 20 + 2);
    assert_eq!(f.large_windows, 3);
    assert_eq!(f.total(GateUnit::Packets), 58);
    assert_eq!(f.int_bytes, 14 * 86);
    assert_eq!(f.total(GateUnit::Bytes), 14 * 100 + 44);
    assert_eq!(r.merger.windows, 5);
}

#[test]
fn a_flow_that_never_switches_is_all_int() {
    let mut r = Rig::new(1024, 3);
    let b = key(2);
    // Below T_lo in every window (T_lo <= n < T_hi would keep it large in the next window:
    // the hysteresis has no per-flow state, docs/codesign.md).
    for w in 0..4 {
        r.burst(b, 3, w * 10 * MS);
    }
    r.finish();
    let f = *r.merger.get(&b).unwrap();
    assert_eq!((f.int_packets, f.sketch, f.large_windows), (12, 0, 0));
    assert_eq!(f.total(GateUnit::Packets), 12);
    assert_eq!(r.reports, 12);
    // Between T_lo and T_hi: large in the next window, still counted once.
    let c = key(3);
    for w in 4..7 {
        r.burst(c, 7, w * 10 * MS);
    }
    r.finish();
    let f = *r.merger.get(&c).unwrap();
    assert_eq!((f.int_packets, f.sketch), (7, 14));
}

#[test]
fn a_small_flow_colliding_with_a_large_one_is_misjudged_and_overcounted() {
    // One row of 64 counters: find a small flow sharing the large flow's counter.
    let mut r = Rig::new(64, 1);
    let big = key(1);
    r.burst(big, 100, 0);
    let small = (2..200)
        .map(key)
        .find(|k| r.gate.estimate(k.hash()) >= 100)
        .expect("a colliding 5-tuple among 200");
    let alone = (2..200)
        .map(key)
        .find(|k| r.gate.estimate(k.hash()) == 0)
        .unwrap();
    // Interleaved: the small flow's 3 packets between the large flow's.
    for i in 0..3 {
        r.packet(small, 200 + 10 * i);
        r.burst(big, 5, 201 + 10 * i);
        r.packet(alone, 205 + 10 * i);
    }
    r.finish();
    let s = *r.merger.get(&small).unwrap_or(&MergedFlow::default());
    // Misclassified: no INT at all, and the shared counter's growth while it was "large"
    // includes the large flow's packets.
    assert_eq!(s.int_packets, 0);
    assert!(s.key.is_none(), "known by hash only: {s:?}");
    assert_eq!(s.total(GateUnit::Packets), 3 + 3 * 5);
    // The large flow never under-counts; the lone small flow is exact.
    let b = *r.merger.get(&big).unwrap();
    assert!(b.total(GateUnit::Packets) >= 115, "{b:?}");
    let l = *r.merger.get(&alone).unwrap();
    assert_eq!((l.int_packets, l.sketch), (3, 0));
}

#[test]
fn bad_exports_are_refused_with_the_reason() {
    let mut m = GateWindowMsg {
        v: 1,
        node_id: 1,
        worker: 0,
        start_ns: 0,
        window_ns: 1,
        unit: "packets".into(),
        large: 8,
        small: 4,
        packets: 3,
        overflow: 0,
        lost: 0,
        flows: vec![[7, 9, 8]],
    };
    let e = GateWindowMsg::decode(&m.encode()).unwrap_err();
    assert!(e.contains("below its switch point"), "{e}");
    m.flows.clear();
    m.v = 2;
    assert!(GateWindowMsg::decode(&m.encode())
        .unwrap_err()
        .contains("version 2"));
    m.v = 1;
    m.unit = "flows".into();
    assert!(GateWindowMsg::decode(&m.encode())
        .unwrap_err()
        .contains("unit"));
    assert!(GateWindowMsg::decode(b"\xa1\x61x\x01").is_err());
    assert!(GateWindowMsg::decode(b"").is_err());
    // A window in another unit than the first is not merged.
    let mut g = Merger::new();
    m.unit = "packets".into();
    g.on_window(&m);
    m.unit = "bytes".into();
    g.on_window(&m);
    assert_eq!((g.windows, g.unit_mismatch), (1, 1));
}
