//! The kernel and the bank exchange without the runtime: exactness of rows and queries,
//! windows, last-seen across windows, edge versions by window.

use super::*;
use crate::meta::PacketMeta;
use crate::runtime::{Context, Publisher, Tap};
use crate::{OwnedBuf, PacketBuf};
use std::collections::HashMap;

fn small() -> Layout {
    Layout::new(2, 3, 16, layout::default_seeds(2)).unwrap()
}

/// A packet with an IPv4 inner header of `len` bytes at offset 14.
fn pkt(dir: u8, qid: u8, teid: u32, qfi: u8, len: u16, colour: u8, sojourn: u32) -> OwnedBuf {
    let mut f = vec![0u8; 14 + 20];
    f[14] = 0x45;
    f[16..18].copy_from_slice(&len.to_be_bytes());
    let mut b = OwnedBuf::from_slice(&f);
    let m = b.pkt_meta_mut();
    *m = PacketMeta::EMPTY;
    m.dir = dir;
    m.qid = qid;
    m.teid = teid;
    m.qfi = qfi;
    m.color = colour;
    m.sojourn_ns = sojourn;
    m.inner_l3_off = 14;
    b
}

type Truth = HashMap<(usize, usize, u32, u8), (u64, u64)>;

fn check_window(w: &Window, truth: &Truth) {
    for dir in 0..DIRS {
        for qid in 0..w.layout.qids {
            let keys: Vec<_> = truth
                .iter()
                .filter(|(k, _)| k.0 == dir && k.1 == qid)
                .collect();
            let (p, b) = keys.iter().fold((0, 0), |a, (_, v)| (a.0 + v.0, a.1 + v.1));
            for row in 0..w.layout.rows {
                let s = w.row_sum(dir, qid, row);
                assert_eq!(
                    (s.packets, s.bytes),
                    (p, b),
                    "dir {dir} qid {qid} row {row}"
                );
                assert_eq!(s.colour.iter().sum::<u64>(), p);
                assert_eq!(s.lat.iter().sum::<u64>(), p);
            }
            for (k, v) in &keys {
                let e = w.query(dir, qid, k.2, k.3);
                assert!(e.packets >= v.0 && e.bytes >= v.1, "{k:?}");
                let mut mine = [0; 8];
                w.layout.columns(qid, k.2, k.3, &mut mine);
                let collides = keys.iter().any(|(o, _)| {
                    o != k && {
                        let mut c = [0; 8];
                        w.layout.columns(qid, o.2, o.3, &mut c);
                        (0..w.layout.rows).all(|r| c[r] == mine[r])
                    }
                });
                let alone_somewhere = (0..w.layout.rows).any(|r| {
                    !keys.iter().any(|(o, _)| {
                        o != k && {
                            let mut c = [0; 8];
                            w.layout.columns(qid, o.2, o.3, &mut c);
                            c[r] == mine[r]
                        }
                    })
                });
                if alone_somewhere {
                    assert_eq!((e.packets, e.bytes), **v, "{k:?} has a row to itself");
                }
                let _ = collides;
            }
        }
    }
}

#[test]
fn rows_sum_to_queue_totals_and_queries_bound_the_truth() {
    let layout = small();
    let table = Publisher::new(EdgeTable::default());
    let (mut tap, ends) = tap_pair(0, &layout, 1_000_000_000, table.reader(), None);
    let mut agg = Aggregator::new(layout.clone(), 1_000_000_000);
    agg.add_source(ends);
    let mut truth = Truth::new();
    let mut x = 7u64;
    let mut burst = Vec::new();
    for i in 0..5000u32 {
        x = layout::mix(x);
        let (dir, qid, teid, qfi) = (
            (x & 1) as u8 + 1,
            (x >> 1 & 1) as u8,
            (x >> 8) as u32 % 40,
            (x >> 40) as u8 % 3,
        );
        let len = 40 + (x >> 20) as u16 % 1400;
        burst.push(pkt(
            dir,
            qid,
            teid,
            qfi,
            len,
            (x >> 50) as u8 % 3,
            (x >> 30) as u32 % 5_000_000,
        ));
        let e = truth
            .entry((dir as usize - 1, qid as usize, teid, qfi))
            .or_default();
        e.0 += 1;
        e.1 += u64::from(len);
        if burst.len() == 32 || i == 4999 {
            tap.on_burst(
                0,
                &mut burst,
                &Context::fixed(1_000 + u64::from(i) * 1000, 0),
            );
            burst.clear();
        }
    }
    drop(tap);
    let ws = agg.flush(0);
    assert_eq!(ws.len(), 1);
    assert_eq!(ws[0].packets, 5000);
    check_window(&ws[0], &truth);
}

#[test]
fn windows_split_at_bursts_and_nothing_is_lost() {
    let layout = small();
    let table = Publisher::new(EdgeTable::default());
    let (mut tap, ends) = tap_pair(3, &layout, 1_000, table.reader(), None);
    let mut agg = Aggregator::new(layout, 1_000);
    agg.add_source(ends);
    let mut got = Vec::new();
    let mut sent = 0u64;
    for t in 0..50u64 {
        let mut b: Vec<OwnedBuf> = (0..(t % 5 + 1))
            .map(|i| pkt(1, 0, i as u32, 1, 100, 0, 10))
            .collect();
        sent += b.len() as u64;
        tap.on_burst(0, &mut b, &Context::fixed(t * 300, 0));
        // The control side polls now and then (every third burst).
        if t % 3 == 0 {
            got.extend(agg.poll(t * 300));
        }
    }
    drop(tap);
    got.extend(agg.flush(u64::MAX / 2));
    let total: u64 = got.iter().map(|w| w.packets).sum();
    assert_eq!(total, sent);
    let seqs: Vec<u64> = got.iter().map(|w| w.seq).collect();
    assert!(seqs.windows(2).all(|p| p[0] < p[1]), "{seqs:?}");
    assert!(got.iter().all(|w| w.sources == vec![3] && !w.late));
    for w in &got {
        // Bursts at t*300 ns: window seq holds the bursts with t*300/1000 == seq.
        let expect: u64 = (0..50u64)
            .filter(|t| t * 300 / 1000 == w.seq)
            .map(|t| t % 5 + 1)
            .sum();
        assert_eq!(w.packets, expect, "window {}", w.seq);
    }
}

#[test]
fn last_seen_outlives_windows_and_first_packet_has_no_gap() {
    let layout = small();
    let table = Publisher::new(EdgeTable::default());
    let (mut tap, ends) = tap_pair(0, &layout, 1_000_000, table.reader(), None);
    let mut agg = Aggregator::new(layout, 1_000_000);
    agg.add_source(ends);
    // One key: packets at 0.5 ms, 0.9 ms (gap 400 us), 1.2 ms (next window, gap 300 us).
    for t in [500_000u64, 900_000, 1_200_000] {
        tap.on_burst(
            0,
            &mut [pkt(2, 1, 9, 5, 60, 1, 2_000)],
            &Context::fixed(t, 0),
        );
    }
    drop(tap);
    let ws = agg.flush(0);
    assert_eq!(ws.len(), 2);
    let a = ws[0].query(1, 1, 9, 5);
    let b = ws[1].query(1, 1, 9, 5);
    assert_eq!(a.packets, 2);
    assert_eq!(a.iat.iter().sum::<u64>(), 1, "the first packet has no gap");
    let e = QidEdges::DEFAULT.iat;
    assert_eq!(a.iat[layout::bin(&e, 400_000)], 1);
    assert_eq!(
        b.iat[layout::bin(&e, 300_000)],
        1,
        "last-seen kept across the edge"
    );
    assert_eq!(a.colour, [0, 2, 0]);
    assert_eq!(a.lat[layout::bin(&QidEdges::DEFAULT.lat, 2_000)], 2);
}

#[test]
fn new_edges_apply_from_their_window_with_their_version() {
    let layout = small();
    let table = Publisher::new(EdgeTable::default());
    let (mut tap, ends) = tap_pair(0, &layout, 1_000, table.reader(), None);
    let mut agg = Aggregator::new(layout, 1_000);
    agg.add_source(ends);
    let mut next = EdgeSet {
        version: 2,
        ..EdgeSet::default()
    };
    next.qids[0].lat = [1, 2, 3, 4, 5, 6, 7];
    table.publish(table.current().next(next, 3));
    let mut ws = Vec::new();
    for t in 0..6u64 {
        tap.on_burst(
            0,
            &mut [pkt(1, 0, 1, 1, 60, 0, 100)],
            &Context::fixed(t * 1000 + 10, 0),
        );
        ws.extend(agg.poll(0));
    }
    drop(tap);
    ws.extend(agg.flush(0));
    assert_eq!(ws.len(), 6);
    for w in &ws {
        let v = if w.seq >= 3 { 2 } else { 1 };
        assert_eq!(w.edges_versions, vec![v], "window {}", w.seq);
        let bin = if v == 2 {
            7
        } else {
            layout::bin(&QidEdges::DEFAULT.lat, 100)
        };
        assert_eq!(w.query(0, 0, 1, 1).lat[bin], 1);
    }
}

#[test]
fn unknown_direction_and_queue_are_skipped_and_counted() {
    let layout = small();
    let table = Publisher::new(EdgeTable::default());
    let (mut tap, ends) = tap_pair(0, &layout, 1_000, table.reader(), None);
    let mut agg = Aggregator::new(layout, 1_000);
    agg.add_source(ends);
    tap.on_burst(
        0,
        &mut [
            pkt(0, 0, 1, 1, 60, 0, 1),
            pkt(1, 5, 1, 1, 60, 0, 1),
            pkt(1, 1, 1, 1, 60, 0, 1),
        ],
        &Context::fixed(5, 0),
    );
    drop(tap);
    let ws = agg.flush(0);
    assert_eq!((ws[0].packets, ws[0].skipped), (1, 2));
}

#[test]
fn calibrating_queues_fill_the_fine_histograms() {
    let layout = small();
    let mut set = EdgeSet::default();
    set.calibrating[1] = true;
    let table = Publisher::new(EdgeTable {
        from_seq: 0,
        current: set,
        previous: set,
    });
    let (mut tap, ends) = tap_pair(0, &layout, 1_000_000_000, table.reader(), None);
    let mut agg = Aggregator::new(layout, 1_000_000_000);
    agg.add_source(ends);
    for t in 0..10u64 {
        tap.on_burst(
            0,
            &mut [pkt(1, 1, 1, 1, 60, 0, 5000), pkt(1, 0, 1, 1, 60, 0, 5000)],
            &Context::fixed(t * 1000 + 1, 0),
        );
    }
    drop(tap);
    let w = &agg.flush(0)[0];
    let (lat, iat) = w.fine_of(0, 1);
    assert_eq!(lat.iter().sum::<u64>(), 10);
    assert_eq!(lat[edges::fine_bin(5000)], 10);
    assert_eq!(iat.iter().sum::<u64>(), 9);
    let (lat0, _) = w.fine_of(0, 0);
    assert_eq!(lat0.iter().sum::<u64>(), 0, "QID 0 is not calibrating");
}

#[test]
fn a_stalled_control_side_loses_nothing() {
    let layout = small();
    let table = Publisher::new(EdgeTable::default());
    let (mut tap, ends) = tap_pair(0, &layout, 1_000, table.reader(), None);
    let mut agg = Aggregator::new(layout, 1_000);
    agg.add_source(ends);
    // Ten windows and no poll: the spares run out after two edges.
    for t in 0..10u64 {
        tap.on_burst(
            0,
            &mut [pkt(1, 0, 1, 1, 60, 0, 100)],
            &Context::fixed(t * 1000, 0),
        );
    }
    drop(tap);
    let ws = agg.flush(0);
    assert_eq!(ws.iter().map(|w| w.packets).sum::<u64>(), 10);
    assert_eq!(agg.tap_stats().1, 7, "stalled edges counted");
}

#[test]
fn the_crc32_index_hash_puts_a_key_in_the_columns_the_layout_names() {
    let l = Layout::new(2, 3, 512, layout::default_crc_seeds(2))
        .unwrap()
        .with_hash(IndexHash::Crc32)
        .unwrap();
    let mut sk = Sketcher::new(&l);
    let mut bank = Bank::new(&l);
    let edges = EdgeSet::default();
    let s = Sample {
        dir: 1,
        qid: 1,
        teid: 0x11,
        qfi: 9,
        len: 100,
        colour: 0,
        sojourn_ns: 5_000,
        t_ns: 1,
    };
    sk.record(&mut bank, &edges, &s);
    let mut cols = [0; layout::MAX_ROWS];
    l.columns(1, 0x11, 9, &mut cols);
    let h = layout::crc32_key(l.seeds[1] as u32, 0x11, 9);
    for (row, &c) in cols.iter().enumerate().take(3) {
        assert_eq!(c as u32, (h >> (9 * row)) & 511);
        let b = &bank.buckets[l.sketch_base(1, 1) + row * 512 + c];
        assert_eq!((b.packets, b.bytes, b.lat[2]), (1, 100, 1), "row {row}");
    }
}

/// Samples over `keys` keys of 2 QIDs, both directions (and a few with no direction or an
/// unknown QID), gaps of 0 ns to ~5 s (past the u32 clamp), all colours.
fn mixed_samples(n: usize, keys: u32, seed: u64) -> Vec<Sample> {
    let mut x = seed;
    let mut t = 1u64;
    (0..n)
        .map(|_| {
            x = layout::mix(x);
            t += if x >> 60 == 0 {
                x % 5_000_000_000
            } else {
                x % 3_000
            };
            let k = (x >> 8) as u32 % keys;
            Sample {
                dir: if x >> 56 == 0 {
                    usize::MAX
                } else {
                    (x & 1) as usize
                },
                qid: if x >> 57 == 1 {
                    5
                } else {
                    (x >> 1 & 1) as usize
                },
                teid: k,
                qfi: (k % 3) as u8,
                len: 40 + (x >> 20) as u32 % 1400,
                colour: (x >> 50) as u8 % 4,
                sojourn_ns: (x >> 30) as u32 % 5_000_000,
                t_ns: t,
            }
        })
        .collect()
}

fn assert_same_bank(a: &Bank, b: &Bank) {
    assert_eq!(a.hot.len(), b.hot.len());
    for i in 0..a.hot.len() {
        assert_eq!(a.bucket(i), b.bucket(i), "bucket {i}");
        assert_eq!(a.hot[i].last_seen, b.hot[i].last_seen, "last-seen {i}");
    }
    assert_eq!(a.pm, b.pm);
    assert_eq!(a.fine, b.fine);
    assert_eq!(
        (a.packets, a.skipped, a.dirty),
        (b.packets, b.skipped, b.dirty)
    );
}

#[test]
fn the_burst_update_equals_the_reference_update() {
    let layout = small();
    let mut edges = EdgeSet::default();
    edges.calibrating[1] = true;
    edges.qids[0].lat = [1_000, 2_000, 5_000, 10_000, 100_000, 1_000_000, 4_000_000];
    let s = mixed_samples(20_000, 60, 11);
    let (mut one, mut burst) = (Sketcher::new(&layout), Sketcher::new(&layout));
    let (mut a, mut b) = (Bank::new(&layout), Bank::new(&layout));
    for x in &s {
        one.record(&mut a, &edges, x);
    }
    // Bursts of 1 to 70 samples: chunk boundaries fall anywhere, a key repeats in a chunk.
    let mut rest = &s[..];
    let mut k = 0;
    while !rest.is_empty() {
        k = (k * 7 + 5) % 70 + 1;
        let (now, later) = rest.split_at(k.min(rest.len()));
        burst.record_burst(&mut b, &edges, now);
        rest = later;
    }
    assert!(a.skipped > 0 && a.packets > 0);
    assert_same_bank(&a, &b);
}

#[test]
fn hot_buckets_spill_before_they_wrap() {
    // One key, 3 x 65 535 + 1000 packets: every hot counter of its buckets spills three
    // times; the window still holds the exact values.
    let layout = small();
    let edges = EdgeSet::default();
    let n = 3 * usize::from(SPILL_AT) + 1000;
    let s: Vec<Sample> = (0..n as u64)
        .map(|i| Sample {
            dir: 1,
            qid: 1,
            teid: 9,
            qfi: 1,
            len: 1500,
            colour: (i % 3) as u8,
            sojourn_ns: 10,
            t_ns: 1 + i * 10,
        })
        .collect();
    let (mut one, mut burst) = (Sketcher::new(&layout), Sketcher::new(&layout));
    let (mut a, mut b) = (Bank::new(&layout), Bank::new(&layout));
    for x in &s {
        one.record(&mut a, &edges, x);
    }
    for c in s.chunks(32) {
        burst.record_burst(&mut b, &edges, c);
    }
    assert_same_bank(&a, &b);
    let mut cols = [0; layout::MAX_ROWS];
    layout.columns(1, 9, 1, &mut cols);
    for (row, &c) in cols.iter().enumerate().take(3) {
        let i = layout.sketch_base(1, 1) + row * layout.width + c;
        let w = b.bucket(i);
        assert_eq!(w.packets as usize, n);
        assert_eq!(w.bytes, n as u64 * 1500);
        assert_eq!(w.colour.iter().map(|&x| x as usize).sum::<usize>(), n);
        assert_eq!(w.iat.iter().map(|&x| x as usize).sum::<usize>(), n - 1);
        assert_eq!(
            b.buckets[i].packets,
            3 * u32::from(SPILL_AT),
            "spilled 3 times"
        );
        assert_eq!(usize::from(b.hot[i].packets), 1000);
    }
}

/// [`the_burst_update_equals_the_reference_update`] for each path of the burst update: the
/// d = 3 kernel with bin tables (w = 512 specialised and not; no QID calibrating; the crc32
/// index hash), the compare search when edges are too close for tables, and other depths.
#[test]
fn every_burst_path_equals_the_reference_update() {
    let close = QidEdges {
        lat: [1_000, 1_100, 1_200, 5_000, 6_000, 7_000, 9_000],
        iat: QidEdges::DEFAULT.iat,
    };
    let custom = QidEdges {
        lat: [0, 1, 3_000, 70_000, 1 << 31, (1 << 31) + 5, u32::MAX],
        iat: [10, 20, 500, 900, 1_500, 1_800, 2_100],
    };
    let crc = Layout::new(2, 3, 512, layout::default_crc_seeds(2))
        .unwrap()
        .with_hash(IndexHash::Crc32)
        .unwrap();
    let cases: Vec<(&str, Layout, [QidEdges; 2], bool)> = vec![
        ("w16", small(), [QidEdges::DEFAULT, custom], false),
        (
            "w512",
            Layout::new(2, 3, 512, layout::default_seeds(2)).unwrap(),
            [custom, QidEdges::DEFAULT],
            false,
        ),
        (
            "w512 calibrating",
            Layout::new(2, 3, 512, layout::default_seeds(2)).unwrap(),
            [custom, custom],
            true,
        ),
        ("crc32", crc, [custom, QidEdges::DEFAULT], false),
        ("close edges", small(), [close, custom], false),
        (
            "d=2",
            Layout::new(2, 2, 16, layout::default_seeds(2)).unwrap(),
            [custom, custom],
            false,
        ),
    ];
    for (name, layout, qe, cal) in cases {
        let mut edges = EdgeSet::default();
        edges.qids[..2].copy_from_slice(&qe);
        edges.calibrating[0] = cal;
        let s = mixed_samples(20_000, 300, 5);
        let (mut one, mut burst) = (Sketcher::new(&layout), Sketcher::new(&layout));
        let (mut a, mut b) = (Bank::new(&layout), Bank::new(&layout));
        for x in &s {
            one.record(&mut a, &edges, x);
        }
        // The edges change half-way (the tables are rebuilt): the defaults for QID 1.
        let mut later = edges;
        later.qids[1] = QidEdges::DEFAULT;
        later.version += 1;
        let mut rest = &s[..];
        let mut k = 0;
        while !rest.is_empty() {
            k = (k * 7 + 5) % 70 + 1;
            let (now, tail) = rest.split_at(k.min(rest.len()));
            burst.record_burst(&mut b, &edges, now);
            rest = tail;
        }
        for x in &s[..1000] {
            one.record(&mut a, &later, x);
        }
        burst.record_burst(&mut b, &later, &s[..1000]);
        assert!(a.skipped > 0 && a.packets > 0, "{name}");
        assert_same_bank(&a, &b);
    }
}

/// The kernel's one-compare path (w = 512, edges a factor of two or more apart, as the
/// defaults, no QID calibrating) equals the reference update, then the two-compare path
/// after an edge change puts two edges in one octave.
#[test]
fn the_one_compare_burst_path_equals_the_reference_update() {
    let layout = Layout::new(2, 3, 512, layout::default_seeds(2)).unwrap();
    let mut edges = EdgeSet::default();
    edges.qids[1].iat = [10, 20, 500, 1_000, 4_000, 8_000, 2_000_000];
    let mut two = edges;
    two.qids[1].iat = [10, 20, 500, 900, 1_500, 1_800, 2_100];
    two.version += 1;
    let s = mixed_samples(20_000, 300, 7);
    let (mut one, mut burst) = (Sketcher::new(&layout), Sketcher::new(&layout));
    let (mut a, mut b) = (Bank::new(&layout), Bank::new(&layout));
    for (i, x) in s.iter().enumerate() {
        one.record(&mut a, if i < 15_000 { &edges } else { &two }, x);
    }
    let mut k = 0;
    let mut done = 0;
    while done < s.len() {
        k = (k * 7 + 5) % 70 + 1;
        let end = (done + k)
            .min(s.len())
            .min(if done < 15_000 { 15_000 } else { s.len() });
        burst.record_burst(
            &mut b,
            if done < 15_000 { &edges } else { &two },
            &s[done..end],
        );
        done = end;
    }
    assert!(a.skipped > 0 && a.packets > 0);
    assert_same_bank(&a, &b);
}

/// The burst update spills a sketch's hot buckets when the sketch has counted 65 535 packets
/// since its last spill (kernel round 6): with many keys in one sketch, across several such
/// spills, cut chunks at any place, and an edge change to edges without bin tables (the
/// compare-search path, which keeps the same count) and back, the bank equals the
/// reference update's.
#[test]
fn sketch_spills_equal_the_reference_update() {
    let close = QidEdges {
        lat: [1_000, 1_100, 1_200, 5_000, 6_000, 7_000, 9_000],
        iat: QidEdges::DEFAULT.iat,
    };
    for layout in [
        small(),
        Layout::new(2, 3, 512, layout::default_seeds(2)).unwrap(),
    ] {
        let n = 2 * usize::from(SPILL_AT) + 30_000;
        let mut s = mixed_samples(n, 40, 13);
        // Most packets in one sketch, so it fills several times.
        for (i, x) in s.iter_mut().enumerate() {
            if i % 5 != 0 && x.dir < 2 {
                (x.dir, x.qid) = (0, 1);
            }
        }
        let plain = EdgeSet::default();
        let mut compare = plain;
        compare.qids[1] = close;
        compare.version += 1;
        let edges_at = |i: usize| {
            if (70_000..90_000).contains(&i) {
                &compare
            } else {
                &plain
            }
        };
        let (mut one, mut burst) = (Sketcher::new(&layout), Sketcher::new(&layout));
        let (mut a, mut b) = (Bank::new(&layout), Bank::new(&layout));
        for (i, x) in s.iter().enumerate() {
            one.record(&mut a, edges_at(i), x);
        }
        let (mut done, mut k) = (0, 0);
        while done < n {
            k = (k * 7 + 5) % 70 + 1;
            let mut end = (done + k).min(n);
            for cut in [70_000, 90_000] {
                if done < cut && end > cut {
                    end = cut;
                }
            }
            burst.record_burst(&mut b, edges_at(done), &s[done..end]);
            done = end;
        }
        assert!(b.buckets.iter().any(|w| w.packets > 0), "something spilled");
        assert!(b.hot.iter().all(|h| h.packets < SPILL_AT));
        assert_same_bank(&a, &b);
    }
}

/// The kernel's path for the paper's layout (8 QIDs, w = 512, one-compare edges: the QID
/// count a constant in pass 1, round 16) equals the reference update, over every QID, the
/// skipped ones (no direction, QIDs 8 and 9), bursts cut anywhere, and the spills of the
/// last sketch (downlink, QID 7), which most packets fill several times.
#[test]
fn the_paper_layout_burst_path_equals_the_reference_update() {
    let layout = Layout::paper();
    let mut edges = EdgeSet::default();
    edges.qids[3].iat = [10, 20, 500, 1_000, 4_000, 8_000, 2_000_000];
    let n = 2 * usize::from(SPILL_AT) + 20_000;
    let mut s = mixed_samples(n, 300, 17);
    for (i, x) in s.iter_mut().enumerate() {
        let q = layout::mix(i as u64) % 10;
        x.qid = q as usize;
        if i % 5 != 0 && x.dir < 2 {
            (x.dir, x.qid) = (1, 7);
        }
    }
    let (mut one, mut burst) = (Sketcher::new(&layout), Sketcher::new(&layout));
    let (mut a, mut b) = (Bank::new(&layout), Bank::new(&layout));
    for x in &s {
        one.record(&mut a, &edges, x);
    }
    let (mut done, mut k) = (0, 0);
    while done < n {
        k = (k * 7 + 5) % 70 + 1;
        let end = (done + k).min(n);
        burst.record_burst(&mut b, &edges, &s[done..end]);
        done = end;
    }
    assert!(a.skipped > 0 && a.packets > 0);
    assert!(b.buckets.iter().any(|w| w.packets > 0), "something spilled");
    assert_same_bank(&a, &b);
}
