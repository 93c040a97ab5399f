//! Store + collector together through a real mapped file.

use crate::*;
use peregrine_wire::dta::{Primitive, Repr, Variant};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn region(sizes: Sizes) -> (tempfile::TempDir, Arc<Region>) {
    let dir = tempfile::tempdir().unwrap();
    let r = Region::create(dir.path().join("dta.region"), sizes).unwrap();
    (dir, Arc::new(r))
}

fn payload(p: Primitive, seq: u8, retransmittable: bool) -> Vec<u8> {
    let r = Repr {
        seqnum: seq,
        retransmittable,
        ..Repr::new(Variant::Tracked, p)
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b).unwrap();
    b
}

#[test]
fn key_write_query_through_a_second_mapping() {
    let (dir, r) = region(Sizes::default());
    let mut t = Translator::new(Store::new(r), Config::default());
    for k in 0..1000u32 {
        let p = payload(Primitive::key_write(2, k, &[k * 3]).unwrap(), 0, false);
        t.handle(&p).unwrap();
    }
    assert_eq!(t.counters.key_write, 1000);
    assert_eq!(t.counters.region_writes, 2000);
    // Attach as a collector would: a fresh mapping of the same file.
    let c = Collector::attach(dir.path().join("dta.region")).unwrap();
    for k in 0..1000u32 {
        match c.key_write(k, Some(2), 1).unwrap() {
            KwAnswer::Found { data, .. } => assert_eq!(data, vec![k * 3]),
            a => panic!("key {k}: {a:?}"),
        }
    }
    // A key never written: empty (with ~2^20 slots and 32-bit checksums).
    assert_eq!(c.key_write(5_000_000, None, 1).unwrap(), KwAnswer::Empty);
    // min_agree 2: both copies agree for a written key.
    assert!(matches!(
        c.key_write(7, Some(2), 2).unwrap(),
        KwAnswer::Found { votes: 2, .. }
    ));
}

#[test]
fn key_write_slot_is_the_formula() {
    let sizes = Sizes {
        kw_slots: 1001,
        ..Sizes::default()
    };
    let (_d, r) = region(sizes);
    let s = Store::new(r.clone());
    s.key_write(3, 0xdead_beef, &[42]).unwrap();
    let slots = r.u64s(r.layout().kw_offset, 1001);
    for n in 0..3u8 {
        let kb = 0xdead_beefu32.to_le_bytes();
        let idx = crc32fast::hash(&[kb[0], kb[1], kb[2], kb[3], n]) % 1001;
        let w = slots[idx as usize].load(Ordering::Relaxed);
        assert_eq!(w as u32, crc32fast::hash(&kb));
        assert_eq!((w >> 32) as u32, 42);
    }
}

#[test]
fn multi_word_slots_never_tear() {
    let sizes = Sizes {
        kw_slots: 5,
        kw_words: 7,
        ..Sizes::default()
    };
    let (_d, r) = region(sizes);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (s, stop) = (Store::new(r.clone()), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                // Keys 0 and 1 alternate over the same 5 slots with self-describing data.
                let k = i & 1;
                let _ = s.key_write(4, k, &[k * 1000 + (i >> 1) % 1000; 7]);
                i = i.wrapping_add(1);
            }
        })
    };
    let c = Collector::new(r);
    for _ in 0..20_000 {
        for k in 0..2u32 {
            if let KwAnswer::Found { data, .. } = c.key_write(k, Some(4), 1).unwrap() {
                assert!(data.iter().all(|d| *d == data[0]), "torn slot {data:?}");
                assert_eq!(data[0] / 1000, k, "another key's data under {k}'s checksum");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}

#[test]
fn key_increment_min_over_n() {
    let sizes = Sizes {
        ki_slots: 61,
        ..Sizes::default()
    };
    let (_d, r) = region(sizes);
    let mut t = Translator::new(Store::new(r.clone()), Config::default());
    for k in 0..200u32 {
        for _ in 0..3 {
            t.handle(&payload(
                Primitive::KeyIncrement {
                    redundancy: 4,
                    key: k,
                    counter: 10,
                },
                0,
                false,
            ))
            .unwrap();
        }
    }
    let c = Collector::new(r);
    // Count-Min: never below the truth; with 200 keys in 61 counters, overestimates happen.
    let mut exact = 0;
    for k in 0..200u32 {
        let v = c.key_increment(k, Some(4)).unwrap();
        assert!(v >= 30);
        exact += (v == 30) as u32;
    }
    assert!(exact < 200, "200 keys in 61 counters cannot all be exact");
}

#[test]
fn append_follow_batches_and_wrap() {
    let sizes = Sizes {
        ap_lists: 2,
        ap_batch: 4,
        ap_list_len: 16,
        ..Sizes::default()
    };
    let (_d, r) = region(sizes);
    let mut t = Translator::new(Store::new(r.clone()), Config::default());
    let c = Collector::new(r);
    let mut f = c.follow(1).unwrap();
    let ap = |d: u32| payload(Primitive::Append { list: 1, data: d }, 0, false);
    for d in 0..3 {
        t.handle(&ap(d)).unwrap();
    }
    // A partial batch is staged, not written.
    assert_eq!(f.poll(100).entries, Vec::<u32>::new());
    t.handle(&ap(3)).unwrap();
    assert_eq!(f.poll(100).entries, vec![0, 1, 2, 3]);
    // Wrap: 8 more entries (ring of 16, position 4 -> 12) read in order.
    for d in 4..12 {
        t.handle(&ap(d)).unwrap();
    }
    let p = f.poll(100);
    assert_eq!((p.first, p.entries, p.lost), (4, (4..12).collect(), 0));
    for d in 12..20 {
        t.handle(&ap(d)).unwrap();
    }
    assert_eq!(f.poll(100).entries, (12..20).collect::<Vec<_>>());
    // Fall far behind: 40 entries with a 16-entry ring. The newest ring-minus-a-batch (12)
    // are readable; the rest are counted lost, none silently.
    for d in 20..60 {
        t.handle(&ap(d)).unwrap();
    }
    let p = f.poll(100);
    assert_eq!(p.entries, (48..60).collect::<Vec<_>>());
    assert_eq!(p.lost, 28);
    // flush writes the partial batch.
    t.handle(&ap(60)).unwrap();
    t.flush();
    assert_eq!(f.poll(100).entries, vec![60]);
    // Unknown lists: refused by the translator, an error for the collector.
    let e = t.handle(&payload(Primitive::Append { list: 2, data: 0 }, 9, true));
    assert_eq!(
        e,
        Err(Refused {
            why: Refusal::UnknownList,
            nack: Some(9)
        })
    );
    assert!(c
        .follow(2)
        .unwrap_err()
        .to_string()
        .contains("unknown list 2"));
}

#[test]
fn append_follower_under_a_concurrent_writer() {
    let sizes = Sizes {
        ap_lists: 1,
        ap_batch: 4,
        ap_list_len: 64,
        ..Sizes::default()
    };
    let (_d, r) = region(sizes);
    let total = 200_000u32;
    let writer = {
        let mut s = Store::new(r.clone());
        std::thread::spawn(move || {
            let mut a = store::Appender::new(s.layout());
            for d in 0..total {
                a.append(&mut s, 0, d).unwrap();
            }
        })
    };
    let c = Collector::new(r);
    let mut f = c.follow_from(0, 0).unwrap();
    let (mut next, mut seen, mut lost) = (0u64, 0u64, 0u64);
    while next < total as u64 {
        // Whether the writer was done *before* this poll: then an empty poll is the end.
        let done = writer.is_finished();
        let before = f.position();
        let p = f.poll(32);
        assert_eq!(
            f.position() - before,
            p.entries.len() as u64 + p.lost,
            "poll accounts for every index it moves over: {p:?}"
        );
        lost += p.lost;
        for (i, e) in p.entries.iter().enumerate() {
            // Every entry we are given is the one at its index: nothing torn or stale.
            assert_eq!(*e as u64, p.first + i as u64);
        }
        seen += p.entries.len() as u64;
        next = f.position();
        if done && p.entries.is_empty() && p.lost == 0 {
            break;
        }
    }
    writer.join().unwrap();
    assert_eq!(
        seen + lost,
        total as u64,
        "every entry read or counted lost"
    );
}

#[test]
fn postcarding_paths_blanks_and_eviction() {
    let sizes = Sizes {
        pc_chunks: 1021,
        pc_redundancy: 2,
        pc_value_bits: 18,
        ..Sizes::default()
    };
    let (_d, r) = region(sizes);
    let cfg = Config {
        pc_cache_slots: 8,
        ..Config::default()
    };
    let mut t = Translator::new(Store::new(r.clone()), cfg);
    let pc =
        |key: u32, hop: u8, data: u32| payload(Primitive::Postcard { key, hop, data }, 0, false);
    for hop in 0..5u8 {
        t.handle(&pc(77, hop, 1000 + hop as u32)).unwrap();
    }
    assert_eq!(t.counters.postcard_paths_complete, 1);
    let c = Collector::new(r);
    assert_eq!(
        c.path(77).unwrap(),
        PathAnswer::Found {
            hops: vec![1000, 1001, 1002, 1003, 1004],
            valid_chunks: 2
        }
    );
    // A 3-hop path is written at flush with blanks for hops 3 and 4: still valid.
    for hop in 0..3u8 {
        t.handle(&pc(5, hop, 7)).unwrap();
    }
    assert_eq!(c.path(5).unwrap(), PathAnswer::Empty);
    t.flush();
    assert!(matches!(c.path(5).unwrap(), PathAnswer::Found { ref hops, .. } if hops == &[7, 7, 7]));
    // Never-written key: empty region words decode to nothing valid.
    assert_eq!(c.path(123_456).unwrap(), PathAnswer::Empty);
    // Bad input: hop 5 with B = 5, a value outside V.
    assert_eq!(
        t.handle(&pc(1, 5, 0)).unwrap_err().why,
        Refusal::HopOutOfRange
    );
    assert_eq!(
        t.handle(&pc(1, 0, 1 << 18)).unwrap_err().why,
        Refusal::ValueOutOfRange
    );
}

#[test]
fn postcarding_raw_mode() {
    let sizes = Sizes {
        pc_chunks: 61,
        pc_mode: PostcardMode::Raw,
        ..Sizes::default()
    };
    let (_d, r) = region(sizes);
    let mut t = Translator::new(Store::new(r.clone()), Config::default());
    for hop in 0..5u8 {
        t.handle(&payload(
            Primitive::Postcard {
                key: 9,
                hop,
                data: u32::MAX - hop as u32,
            },
            0,
            false,
        ))
        .unwrap();
    }
    let words = (0..5).map(|h| u32::MAX - h).collect();
    assert_eq!(
        Collector::new(r).path(9).unwrap(),
        PathAnswer::Raw { words }
    );
}

#[test]
fn bad_reports_are_refused_by_reason_and_nacked_when_retransmittable() {
    let sizes = Sizes {
        kw_max_redundancy: 2,
        ..Sizes::default()
    };
    let (_d, r) = region(sizes);
    let mut t = Translator::new(Store::new(r), Config::default());
    let kw = |n: u8, seq: u8, rt: bool| payload(Primitive::key_write(n, 1, &[1]).unwrap(), seq, rt);
    assert_eq!(
        t.handle(&kw(0, 4, true)),
        Err(Refused {
            why: Refusal::RedundancyZero,
            nack: Some(4)
        })
    );
    assert_eq!(
        t.handle(&kw(3, 5, false)).unwrap_err(),
        Refused {
            why: Refusal::RedundancyTooHigh,
            nack: None
        }
    );
    let good = kw(1, 6, true);
    let mut long = good.clone();
    long.push(0);
    assert_eq!(t.handle(&long).unwrap_err().why, Refusal::Malformed);
    assert_eq!(t.handle(&good[..5]).unwrap_err().why, Refusal::Truncated);
    assert_eq!(t.handle(&good[..5]).unwrap_err().nack, Some(6));
    let mut unknown = good.clone();
    unknown[0] = 9;
    assert_eq!(t.handle(&unknown).unwrap_err().why, Refusal::UnknownOpcode);
    // Three data words into a K = 1 region.
    let three = payload(Primitive::key_write(1, 1, &[1, 2, 3]).unwrap(), 0, false);
    assert_eq!(t.handle(&three).unwrap_err().why, Refusal::DataWords);
    assert_eq!(t.counters.refused_total(), 7);
    assert_eq!(t.counters.refused[Refusal::Truncated.index()], 2);
    // And the translator still works.
    t.handle(&good).unwrap();
    assert_eq!(t.counters.key_write, 1);
}

#[test]
fn corrupt_or_foreign_regions_are_refused_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r");
    Region::create(&p, Sizes::default()).unwrap();
    let good = std::fs::read(&p).unwrap();
    let msg = |bytes: &[u8]| {
        std::fs::write(&p, bytes).unwrap();
        Collector::attach(&p).unwrap_err().to_string()
    };
    assert!(msg(&good[..good.len() - 4096]).contains("bytes but the file has"));
    assert!(msg(&good[..100]).contains("shorter than the 4096-byte header"));
    assert!(msg(&vec![0u8; good.len()]).contains("bad magic"));
    let mut v = good.clone();
    v[8] = 7;
    assert!(msg(&v).contains("version 7"));
    let mut c = good.clone();
    c[40] ^= 1;
    assert!(msg(&c).contains("checksum mismatch"));
    assert!(Collector::attach(dir.path().join("missing"))
        .unwrap_err()
        .to_string()
        .contains("missing"));
    // Garbage in the data sections is data: queries answer, nothing panics.
    let mut g = good.clone();
    let mut x = 0x9e37_79b9u32;
    for b in g[4096..].iter_mut() {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        *b = (x >> 24) as u8;
    }
    std::fs::write(&p, &g).unwrap();
    let c = Collector::attach(&p).unwrap();
    for k in 0..1000 {
        let _ = c.key_write(k, None, 1).unwrap();
        let _ = c.key_increment(k, None).unwrap();
        let _ = c.path(k).unwrap();
    }
    let mut f = c.follow_from(0, 0).unwrap();
    let _ = f.poll(10);
}

#[test]
fn even_slot_counts_with_redundancy_are_refused() {
    let e = Layout::new(Sizes {
        kw_slots: 1 << 20,
        ..Sizes::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("kw_slots") && e.contains("odd"), "{e}");
    // Redundancy 1 has no copies to correlate.
    Layout::new(Sizes {
        pc_chunks: 1 << 16,
        pc_redundancy: 1,
        ..Sizes::default()
    })
    .unwrap();
}

#[test]
fn rate_limiter_refills() {
    let mut rl = RateLimiter::new(1000.0, 2.0, 16);
    assert!(rl.allow(1, 0) && rl.allow(1, 0));
    assert!(!rl.allow(1, 0));
    assert!(rl.allow(2, 0), "another source has its own bucket");
    assert!(rl.allow(1, 1_000_000), "1 ms at 1000/s refills one");
    assert!(!rl.allow(1, 1_000_000));
}

/// One-word Key-Write and Key-Increment pass their checks with one compare when the
/// redundancy is in range; every other case is refused by the checks in their order: no
/// slots first, then redundancy 0, then too high, then (Key-Write) the region's word count.
#[test]
fn one_word_refusals_keep_their_order() {
    let kw = |n: u8| payload(Primitive::key_write(n, 7, &[1]).unwrap(), 0, false);
    let ki = |n: u8| {
        payload(
            Primitive::KeyIncrement {
                redundancy: n,
                key: 7,
                counter: 1,
            },
            0,
            false,
        )
    };
    let why = |t: &mut Translator, p: Vec<u8>| t.handle(&p).err().map(|r| r.why);
    // No Key-Write or Key-Increment slots: disabled, whatever the redundancy.
    let (_d, r) = region(Sizes {
        kw_slots: 0,
        ki_slots: 0,
        ..Sizes::default()
    });
    let mut t = Translator::new(Store::new(r), Config::default());
    for n in [0, 1, 4, 5, 255] {
        assert_eq!(
            why(&mut t, kw(n)),
            Some(Refusal::PrimitiveDisabled),
            "kw {n}"
        );
        assert_eq!(
            why(&mut t, ki(n)),
            Some(Refusal::PrimitiveDisabled),
            "ki {n}"
        );
    }
    // Three-word Key-Write slots: a one-word report is refused for its redundancy first.
    let (_d, r) = region(Sizes {
        kw_words: 3,
        ..Sizes::default()
    });
    let mut t = Translator::new(Store::new(r), Config::default());
    assert_eq!(why(&mut t, kw(0)), Some(Refusal::RedundancyZero));
    assert_eq!(why(&mut t, kw(5)), Some(Refusal::RedundancyTooHigh));
    for n in 1..=4 {
        assert_eq!(why(&mut t, kw(n)), Some(Refusal::DataWords), "kw {n}");
        assert_eq!(why(&mut t, ki(n)), None, "ki {n}");
    }
    assert_eq!(why(&mut t, ki(0)), Some(Refusal::RedundancyZero));
    assert_eq!(why(&mut t, ki(5)), Some(Refusal::RedundancyTooHigh));
    // The default region: 1..=4 stored, at the formula's slots.
    let (_d, r) = region(Sizes::default());
    let mut t = Translator::new(Store::new(r), Config::default());
    for n in 1..=4 {
        assert_eq!(why(&mut t, kw(n)), None, "kw {n}");
    }
    assert_eq!(why(&mut t, kw(0)), Some(Refusal::RedundancyZero));
    assert_eq!(why(&mut t, kw(5)), Some(Refusal::RedundancyTooHigh));
    assert_eq!(t.counters.key_write, 4);
    assert_eq!(t.counters.region_writes, 1 + 2 + 3 + 4);
}

/// Postcarding's cache paths: a new hop of the cached key, a duplicate hop (counted, the
/// later value wins), an evicted partial path (written early), and
/// the refusals' order when the region has no Postcarding section (disabled before the hop
/// and value checks).
#[test]
fn postcarding_duplicate_eviction_and_refusal_order() {
    let sizes = Sizes {
        pc_chunks: 61,
        pc_value_bits: 16,
        ..Sizes::default()
    };
    let (_d, r) = region(sizes);
    let cfg = Config {
        pc_cache_slots: 1,
        ..Config::default()
    };
    let mut t = Translator::new(Store::new(r.clone()), cfg);
    let pc =
        |key: u32, hop: u8, data: u32| payload(Primitive::Postcard { key, hop, data }, 0, false);
    t.handle(&pc(9, 0, 1)).unwrap();
    t.handle(&pc(9, 0, 2)).unwrap();
    assert_eq!(t.counters.postcard_duplicate_hop, 1);
    t.handle(&pc(9, 1, 3)).unwrap();
    // One cache entry: key 10 evicts key 9's partial path.
    t.handle(&pc(10, 1, 4)).unwrap();
    assert_eq!(t.counters.postcard_early_flush, 1);
    let c = Collector::new(r);
    assert!(
        matches!(c.path(9).unwrap(), PathAnswer::Found { ref hops, .. } if hops == &[2, 3]),
        "{:?}",
        c.path(9)
    );
    for hop in [0, 2, 3, 4] {
        t.handle(&pc(10, hop, 5)).unwrap();
    }
    assert_eq!(t.counters.postcard_paths_complete, 1);
    assert!(
        matches!(c.path(10).unwrap(), PathAnswer::Found { ref hops, .. } if hops == &[5, 4, 5, 5, 5])
    );
    assert_eq!(t.counters.postcard, 8);
    assert_eq!(
        t.handle(&pc(10, 0, 1 << 16)).unwrap_err().why,
        Refusal::ValueOutOfRange
    );
    assert_eq!(
        t.handle(&pc(10, 5, 1 << 16)).unwrap_err().why,
        Refusal::HopOutOfRange
    );
    let (_d, r) = region(Sizes {
        pc_chunks: 0,
        ..Sizes::default()
    });
    let mut t = Translator::new(Store::new(r), Config::default());
    for (hop, v) in [(0, 0), (5, 0), (0, 1 << 30), (255, u32::MAX)] {
        assert_eq!(
            t.handle(&pc(1, hop, v)).unwrap_err().why,
            Refusal::PrimitiveDisabled
        );
    }
    assert_eq!(t.counters.refused_total(), 4);
}
