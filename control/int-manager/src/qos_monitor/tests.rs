//! Unit tests of the monitor's internals; `tests/qos_monitor.rs` drives it end to end.

use super::*;

#[test]
fn unwrap_16_and_32() {
    let mut u = Unwrap::default();
    assert_eq!(u.update(0xfffe, CounterWidth::Bits16), (0xfffe, false));
    assert_eq!(u.update(0x0001, CounterWidth::Bits16), (0x1_0001, false));
    assert_eq!(u.update(0xffff, CounterWidth::Bits16), (0x1_0001, true)); // older: ignored
    let mut u = Unwrap::default();
    u.update(u32::MAX - 1, CounterWidth::Bits32);
    assert_eq!(
        u.update(3, CounterWidth::Bits32),
        (u32::MAX as u64 + 4, false)
    );
}

#[test]
fn seq_tracker_gaps_and_reorder() {
    let w = CounterWidth::Bits16;
    let mut s = SeqTracker::default();
    assert_eq!(s.on_seq(10, w), SeqOutcome::New { lost: 0 });
    assert_eq!(s.on_seq(12, w), SeqOutcome::New { lost: 0 });
    assert_eq!(s.on_seq(11, w), SeqOutcome::Filled);
    assert_eq!(s.on_seq(11, w), SeqOutcome::Duplicate);
    assert_eq!(s.on_seq(14, w), SeqOutcome::New { lost: 0 }); // 13 pending
                                                              // Advance far enough for 13 to leave the window: declared lost once.
    assert_eq!(s.on_seq(14 + 64, w), SeqOutcome::New { lost: 1 });
    assert_eq!(s.on_seq(13, w), SeqOutcome::Late);
    // Jump of 200: 199 skipped, 63 still pending in window, 136 lost now.
    let mut s = SeqTracker::default();
    s.on_seq(0, w);
    assert_eq!(s.on_seq(200, w), SeqOutcome::New { lost: 136 });
    assert_eq!(s.on_seq(400, w), SeqOutcome::New { lost: 63 + 136 });
}

#[test]
fn histogram_buckets_are_monotone_and_tight() {
    let h = delay_histogram();
    let mut prev = 0;
    for v in [
        0u64,
        1,
        15,
        16,
        17,
        31,
        32,
        1000,
        1 << 20,
        u64::MAX / 3,
        u64::MAX,
    ] {
        // A value's bucket, by its lowest equivalent value: never below the previous one's.
        let b = h.lowest_equivalent(v);
        assert!(b >= prev && b <= v);
        prev = b;
        let mid = h.median_equivalent(v) as f64;
        assert!(
            (mid - v as f64).abs() <= v as f64 / 16.0 + 1.0,
            "{v} -> {mid}"
        );
    }
}

/// Quantiles are the middle of their bucket, clamped to the window's min/max.
#[test]
fn percentiles_are_bucket_middles_within_min_max() {
    let mut b = Bucket::new();
    assert_eq!(b.percentile(0.5), 0);
    for d in [1000i64, 1000, 1000] {
        b.delay_min = b.delay_min.min(d);
        b.delay_max = b.delay_max.max(d);
        b.hist.saturating_record(d as u64);
    }
    assert_eq!((b.percentile(0.5), b.percentile(0.99)), (1000, 1000));
    for d in 1..=100i64 {
        b.delay_max = b.delay_max.max(d * 10_000);
        b.hist.saturating_record(d as u64 * 10_000);
    }
    b.delay_min = -5;
    b.hist.saturating_record(0);
    let p99 = b.percentile(0.99) as f64;
    assert!((p99 - 990_000.0).abs() <= 990_000.0 / 16.0, "{p99}");
    let max = b.percentile(1.0);
    assert!(
        (1_000_000 - 1_000_000 / 16..=1_000_000).contains(&max),
        "{max}"
    );
}

/// Moved from `peregrine_int::report` with the conversion.
#[test]
fn int_report_hops_become_raw_hops() {
    use peregrine_int::report::{HopData, IntReport, MAX_HOPS};
    let mut r = IntReport::default();
    for i in 0..MAX_HOPS as u32 + 2 {
        let ok = r.push_hop(HopData {
            node_id: i + 1,
            ..Default::default()
        });
        assert_eq!(ok, (i as usize) < MAX_HOPS);
    }
    let raw = RawReport::from(&r);
    assert_eq!(raw.hops.len(), MAX_HOPS);
    assert_eq!(raw.hops[3].node_id, 4);
}
