use super::sparse::{RecOut, SketchOut};
use super::*;
use peregrine_dataplane::runtime::Publisher;
use peregrine_dataplane::telemetry::kestrel::{tap_pair, Aggregator, EdgeTable, Sample};

fn header(kind: &str) -> Header {
    Header {
        v: VERSION,
        kind: kind.into(),
        seq: 4,
        window_ns: 1_000,
        workers: 1,
        sources: vec![0],
        late: false,
    }
}

fn window() -> Window {
    let l = Layout::new(2, 3, 16, layout::default_seeds(2)).unwrap();
    let t = Publisher::new(EdgeTable::default());
    let (mut tap, ends) = tap_pair(0, &l, 1_000, t.reader(), None);
    let mut a = Aggregator::new(l, 1_000);
    a.add_source(ends);
    for i in 0..50u32 {
        tap.record(&Sample {
            dir: 1,
            qid: 1,
            teid: i % 7,
            qfi: 9,
            len: 100 + i,
            colour: (i % 3) as u8,
            sojourn_ns: i * 100,
            t_ns: u64::from(i) * 10,
        });
    }
    drop(tap);
    a.flush(0).remove(0)
}

/// `m` encoded and decoded, which must give a sketch message back.
fn sketch_round_trip(m: &SketchMsg) -> SketchMsg {
    let Msg::Sketch(back) = decode(&encode(m)).unwrap() else {
        panic!("a sketch message decodes as another kind")
    };
    back
}

#[test]
fn sketch_messages_round_trip_and_answer_queries_like_the_window() {
    let w = window();
    let m = SketchMsg::of(&w, header("kestrel"), vec![]);
    let back = sketch_round_trip(&m);
    assert_eq!(back, m);
    assert_eq!(back.sketches.len(), 1, "empty sketches are left out");
    for teid in 0..7 {
        assert_eq!(back.query(1, 1, teid, 9), Some(w.query(1, 1, teid, 9)));
    }
    let pm = PmMsg::of(&w, header("pm"));
    assert_eq!(pm.qfis.len(), 1);
    assert_eq!(pm.qfis[0].packets, 50);
    assert_eq!(decode(&encode(&pm)).unwrap(), Msg::Pm(pm));
}

#[test]
fn per_key_features_of_the_message_equal_the_window_s() {
    // The per-key unit's features (Count-Min estimate, per-row packet counts, bin
    // percentiles) read the same numbers from a decoded export as from the window.
    use super::super::features::{self as f, SketchView};
    let w = window();
    let m = SketchMsg::of(&w, header("kestrel"), vec![]);
    let back = sketch_round_trip(&m);
    let v = f::MsgView::new(&back).unwrap();
    assert_eq!((v.rows(), SketchView::rows(&w)), (3, 3));
    let port = f::port_context(&w, 1);
    let q = f::qfi_base(&w, 1, 1, 9, &[0, 1, 2, 3, 4, 5, 6], &port);
    assert_eq!(q, f::qfi_base(&v, 1, 1, 9, &[0, 1, 2, 3, 4, 5, 6], &port));
    for teid in 0..9 {
        assert_eq!(v.row_packets(1, 1, teid, 9), w.row_packets(1, 1, teid, 9));
        let rows = w.row_packets(1, 1, teid, 9);
        assert_eq!(
            rows[..3].iter().min(),
            Some(&w.query(1, 1, teid, 9).packets)
        );
        let k = f::key_base(&w, 1, 1, teid, 9, &q);
        assert_eq!(k.len(), f::KEY_NAMES.len());
        assert_eq!(k, f::key_base(&v, 1, 1, teid, 9, &q), "teid {teid}");
    }
    // Keys 0..7 sent 7 or 8 packets each, with latencies up the bins.
    let k = f::key_base(&w, 1, 1, 0, 9, &q);
    assert!(k[0] >= 7.0 && k[12] > 0.0 && k[12] <= 8.0, "{k:?}");
}

#[test]
fn counts_near_2_pow_64_give_features_not_an_overflow() {
    // Found by the kestrel_export fuzz target: a decoded message's counters summed with
    // `+` in the detectors' features overflowed (a panic in a debug build).
    let mut m = SketchMsg::of(&window(), header("kestrel"), vec![]);
    for s in &mut m.sketches {
        for f in [
            &mut s.packets,
            &mut s.bytes,
            &mut s.green,
            &mut s.lat,
            &mut s.iat,
        ] {
            f.iter_mut().for_each(|x| *x = u64::MAX - 1);
        }
    }
    let v = super::super::features::MsgView::new(&m).unwrap();
    let port = super::super::features::port_context(&v, 1);
    assert_eq!(port[0], u64::MAX as f32);
    let f = super::super::features::qfi_base(&v, 1, 1, 9, &[0, 1, 2], &port);
    assert!(f.iter().all(|x| x.is_finite()), "{f:?}");
    let k = super::super::features::key_base(&v, 1, 1, 0, 9, &f);
    assert!(k.iter().all(|x| x.is_finite()), "{k:?}");
}

#[test]
fn crc32_layouts_travel_with_their_hash_name() {
    let l = Layout::new(2, 3, 16, layout::default_crc_seeds(2))
        .unwrap()
        .with_hash(IndexHash::Crc32)
        .unwrap();
    let rec = LayoutRec::of(&l);
    assert_eq!(rec.hash, "crc32-be-v1");
    assert_eq!(rec.layout(), Ok(l.clone()));
    let mut wide = rec.clone();
    wide.seeds[0] = 1 << 40;
    assert!(wide.layout().unwrap_err().contains("32-bit seed"));
    let t = Publisher::new(EdgeTable::default());
    let (mut tap, ends) = tap_pair(0, &l, 1_000, t.reader(), None);
    let mut a = Aggregator::new(l, 1_000);
    a.add_source(ends);
    for i in 0..20u32 {
        tap.record(&Sample {
            dir: 0,
            qid: 1,
            teid: i % 5,
            qfi: 9,
            len: 100,
            colour: 0,
            sojourn_ns: 10,
            t_ns: u64::from(i) * 10,
        });
    }
    drop(tap);
    let w = a.flush(0).remove(0);
    let m = SketchMsg::of(&w, header("kestrel"), vec![]);
    let back = sketch_round_trip(&m);
    for teid in 0..5 {
        assert_eq!(back.query(0, 1, teid, 9), Some(w.query(0, 1, teid, 9)));
        assert_eq!(w.query(0, 1, teid, 9).packets, 4);
    }
}

#[test]
fn bad_messages_are_refused_by_name() {
    assert!(decode(&[0xff, 0x00]).unwrap_err().contains("not CBOR"));
    let mut m = SketchMsg::of(&window(), header("kestrel"), vec![]);
    m.h.v = 9;
    assert!(decode(&encode(&m)).unwrap_err().contains("version"));
    // Version 1 (dense): a field of the wrong length is refused by name.
    m.h.v = 1;
    m.sketches[0].lat.pop();
    assert!(decode(&encode(&m)).unwrap_err().contains("`lat` has"));
    m.sketches[0].qid = 5;
    assert!(decode(&encode(&m))
        .unwrap_err()
        .contains("outside the layout"));
    let mut m = SketchMsg::of(&window(), header("falcon"), vec![]);
    assert!(decode(&encode(&m))
        .unwrap_err()
        .contains("unknown message kind"));
    m.h.kind = "kestrel".into();
    m.layout.hash = "crc32".into();
    assert!(decode(&encode(&m)).unwrap_err().contains("unknown hash"));
    let mut p = PostcardMsg::of(header("postcards"), &[Postcard::default(); 3]);
    assert_eq!(p.validate(), Ok(3));
    p.len.pop();
    assert!(decode(&encode(&p))
        .unwrap_err()
        .contains("different lengths"));
    // A file: messages in turn, the bad one named by its index.
    let good = encode(&SketchMsg::of(&window(), header("kestrel"), vec![]));
    let mut file = good.clone();
    file.extend_from_slice(&good);
    assert_eq!(read_file(&file).unwrap().len(), 2);
    file.extend_from_slice(&[0xa1]);
    assert!(read_file(&file).unwrap_err().starts_with("message 2"));
}

#[test]
fn version_2_sends_the_non_empty_buckets_and_decodes_to_the_dense_window() {
    let m = SketchMsg::of(&window(), header("kestrel"), vec![]);
    assert_eq!(m.h.v, 2);
    let sparse = encode(&m);
    let dense = encode(&SketchMsg {
        h: Header {
            v: 1,
            ..m.h.clone()
        },
        ..m.clone()
    });
    assert!(
        sparse.len() * 3 < dense.len() * 2,
        "{} vs {}",
        sparse.len(),
        dense.len()
    );
    let Msg::Sketch(a) = decode(&sparse).unwrap() else {
        panic!("kind")
    };
    let Msg::Sketch(b) = decode(&dense).unwrap() else {
        panic!("kind")
    };
    assert_eq!(a.sketches, m.sketches);
    assert_eq!(b.sketches, m.sketches);
    assert_eq!(a.h.v, 2);
}

#[test]
fn hostile_sparse_sketches_are_refused_by_name() {
    let m = SketchMsg::of(&window(), header("kestrel"), vec![]);
    let r = m.sketches[0].sparse();
    assert!(r.gaps.len() >= 2);
    let n = m.layout.rows * m.layout.width;
    let wire = |f: &dyn Fn(&mut SparseSketchMsg)| {
        let mut w = SparseSketchMsg {
            h: m.h.clone(),
            layout: m.layout.clone(),
            edges_version: m.edges_version.clone(),
            edges: m.edges.clone(),
            packets: m.packets,
            skipped: m.skipped,
            sketches: vec![r.clone()],
        };
        f(&mut w);
        let out = SketchOut {
            h: &w.h,
            layout: &w.layout,
            edges_version: &w.edges_version,
            edges: &w.edges,
            packets: w.packets,
            skipped: w.skipped,
            sketches: w.sketches.into_iter().map(RecOut::Sparse).collect(),
        };
        decode(&encode(&out)).unwrap_err()
    };
    let e = wire(&|w| w.sketches[0].gaps[1] = 0);
    assert!(e.contains("gap 1 is 0"), "{e}");
    let e = wire(&|w| w.sketches[0].gaps[0] = n as u32);
    assert!(e.contains("beyond the layout"), "{e}");
    let e = wire(&|w| {
        w.sketches[0].gaps[1] = u32::MAX;
    });
    assert!(e.contains("beyond the layout"), "{e}");
    let e = wire(&|w| {
        w.sketches[0].lat.pop();
    });
    assert!(e.contains("`lat` has"), "{e}");
    let e = wire(&|w| w.sketches = vec![r.clone(); 2 * w.layout.qids + 1]);
    assert!(e.contains("sketches, the layout has"), "{e}");
    let e = wire(&|w| {
        w.layout.width = 65536;
        w.layout.rows = 4;
        w.layout.qids = 8;
        w.layout.seeds = layout::default_seeds(8);
        w.sketches = vec![r.clone(); 2 * w.layout.qids];
        for (i, s) in w.sketches.iter_mut().enumerate() {
            (s.dir, s.qid) = (i % 2, i / 2);
        }
    });
    assert!(e.contains("buckets: more than"), "{e}");
    // Two records of one (direction, QID) are refused as in version 1.
    let e = wire(&|w| w.sketches = vec![r.clone(), r.clone()]);
    assert!(e.contains("two sketches"), "{e}");
}
