//! QoS behaviour over long virtual-time runs: TrTCM rates, scheduler order, DRR shares, tail
//! drops, sojourn times and shaping.

use peregrine_dataplane::buffer::{OwnedBuf, PacketBuf};
use peregrine_dataplane::qos::{
    Colour, ColourMode, QueueClass, QueueConfig, Scheduler, SchedulerConfig, ShaperConfig, TrTcm,
    TrTcmConfig, NUM_QUEUES,
};
use peregrine_testkit::rng::{self, Xoshiro256PlusPlus};

const S: u64 = 1_000_000_000;

/// Deterministic packet sizes in 64..=1500 (the test kit's seeded PRNG).
struct Sizes(Xoshiro256PlusPlus);

impl Sizes {
    fn new(seed: u64) -> Sizes {
        Sizes(rng::seeded(seed))
    }
    fn next(&mut self) -> u64 {
        64 + rng::below(&mut self.0, 1437)
    }
}

fn pkt(len: usize) -> OwnedBuf {
    OwnedBuf::from_slice(&vec![0u8; len])
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= want * tol
}

/// A flow offered at 2x PIR for 10 s of virtual time gets exactly PIR of non-red bytes
/// (±0.1%, plus at most the initial PBS), and about CIR of green bytes.
#[test]
fn qos_trtcm_long_run_rates() {
    let (cir, pir) = (250_000u64, 1_000_000u64);
    for mode in [ColourMode::Blind, ColourMode::Aware] {
        let mut m = TrTcm::new(
            TrTcmConfig {
                cir,
                cbs: 3_000,
                pir,
                pbs: 3_000,
                mode,
            },
            0,
        )
        .unwrap();
        let mut sizes = Sizes::new(0x9e37_79b9_7f4a_7c15);
        let offered_rate = 2 * pir;
        let (mut t, mut bytes) = (0u64, [0u64; 3]);
        let mut offered = 0u64;
        while t < 10 * S {
            let len = sizes.next();
            bytes[m.mark(t, len, Colour::Green).index()] += len;
            offered += len;
            // Next packet when the offered bytes so far are due at 2x PIR.
            t = (u128::from(offered) * 1_000_000_000 / u128::from(offered_rate)) as u64;
        }
        let non_red = (bytes[0] + bytes[1]) as f64;
        let secs = t as f64 / S as f64;
        assert!(
            within(non_red, pir as f64 * secs, 0.001),
            "{mode:?}: non-red {non_red} over {secs} s"
        );
        assert!(within(bytes[2] as f64, pir as f64 * secs, 0.002));
        assert!(
            within(bytes[0] as f64, cir as f64 * secs, 0.02),
            "{mode:?}: green {} vs CIR {}",
            bytes[0],
            cir as f64 * secs
        );
    }
}

/// At 100x PIR with tiny packets the marked rate is still exact: the fractional tokens are
/// kept, not rounded away per packet.
#[test]
fn qos_trtcm_no_drift_with_tiny_intervals() {
    let mut m = TrTcm::new(
        TrTcmConfig {
            cir: 333,
            cbs: 64,
            pir: 777,
            pbs: 64,
            mode: ColourMode::Blind,
        },
        0,
    )
    .unwrap();
    let mut non_red = 0u64;
    let mut t = 0;
    // One 1-byte packet every 13 us for 100 s: 7.7 M packets offered at ~77 kB/s.
    while t < 100 * S {
        if m.mark(t, 1, Colour::Green) != Colour::Red {
            non_red += 1;
        }
        t += 13_000;
    }
    // Exactly PIR * T + PBS, to within one byte (the last partial token).
    let want = 777 * 100 + 64;
    assert!(
        non_red.abs_diff(want) <= 1,
        "non-red {non_red}, want {want}"
    );
}

fn all_sp() -> SchedulerConfig {
    let mut c = SchedulerConfig::default();
    for q in &mut c.queues {
        q.class = QueueClass::StrictPriority;
    }
    c
}

#[test]
fn qos_strict_priority_order() {
    let mut s: Scheduler<OwnedBuf> = Scheduler::new(&all_sp(), 0).unwrap();
    // Enqueue lowest priority first, three packets each.
    for qid in (0..NUM_QUEUES as u8).rev() {
        for i in 0..3 {
            s.enqueue(pkt(100 + usize::from(qid) * 10 + i), qid, 0)
                .unwrap();
        }
    }
    let mut order = Vec::new();
    while let Some(d) = s.dequeue(1) {
        order.push((d.qid, d.pkt.len()));
    }
    let want: Vec<(u8, usize)> = (0..NUM_QUEUES as u8)
        .flat_map(|q| (0..3).map(move |i| (q, 100 + usize::from(q) * 10 + i)))
        .collect();
    assert_eq!(order, want, "QID 0 first, FIFO within a queue");
}

#[test]
fn qos_sp_before_wrr() {
    let mut s: Scheduler<OwnedBuf> = Scheduler::new(&SchedulerConfig::default(), 0).unwrap();
    s.enqueue(pkt(100), 7, 0).unwrap();
    s.enqueue(pkt(100), 2, 0).unwrap();
    s.enqueue(pkt(100), 1, 0).unwrap();
    s.enqueue(pkt(100), 0, 0).unwrap();
    let q: Vec<u8> = std::iter::from_fn(|| s.dequeue(0).map(|d| d.qid)).collect();
    assert_eq!(&q[..2], &[0, 1]);
    // A new SP packet pre-empts the remaining WRR ones.
    s.enqueue(pkt(100), 2, 0).unwrap();
    s.enqueue(pkt(100), 1, 0).unwrap();
    assert_eq!(s.dequeue(0).unwrap().qid, 1);
}

fn wrr_config(weights: [u32; NUM_QUEUES], depth: usize) -> SchedulerConfig {
    let mut c = SchedulerConfig::default();
    for (q, &w) in c.queues.iter_mut().zip(&weights) {
        *q = QueueConfig {
            class: QueueClass::Wrr { weight: w },
            depth,
        };
    }
    c
}

/// With every queue backlogged, DRR byte shares match the weights within 2%, whatever the
/// packet sizes per queue.
#[test]
fn qos_drr_weight_ratios() {
    let weights = [1, 2, 3, 4, 5, 6, 7, 8];
    let mut s: Scheduler<OwnedBuf> = Scheduler::new(&wrr_config(weights, 64), 0).unwrap();
    let mut sizes = Sizes::new(12345);
    let mut served = [0u64; NUM_QUEUES];
    // Keep every queue backlogged; queue 0 sends only 1500-byte packets, queue 7 only 64.
    let size_of = |q: usize, sizes: &mut Sizes| match q {
        0 => 1500,
        7 => 64,
        _ => sizes.next() as usize,
    };
    for q in 0..NUM_QUEUES {
        for _ in 0..64 {
            s.enqueue(pkt(size_of(q, &mut sizes)), q as u8, 0).unwrap();
        }
    }
    for _ in 0..200_000 {
        let d = s.dequeue(0).unwrap();
        served[usize::from(d.qid)] += d.pkt.len() as u64;
        s.enqueue(pkt(size_of(usize::from(d.qid), &mut sizes)), d.qid, 0)
            .unwrap();
    }
    let total: u64 = served.iter().sum();
    let wsum: u32 = weights.iter().sum();
    for q in 0..NUM_QUEUES {
        let share = served[q] as f64 / total as f64;
        let want = f64::from(weights[q]) / f64::from(wsum);
        assert!(
            within(share, want, 0.02),
            "queue {q}: share {share:.4}, want {want:.4}"
        );
    }
}

/// Weight 1 next to weight 1000: the light queue is still served once per round.
#[test]
fn qos_drr_no_starvation() {
    let mut w = [1000; NUM_QUEUES];
    w[5] = 1;
    let mut s: Scheduler<OwnedBuf> = Scheduler::new(&wrr_config(w, 4096), 0).unwrap();
    for q in 0..NUM_QUEUES as u8 {
        for _ in 0..4096 {
            s.enqueue(pkt(1500), q, 0).unwrap();
        }
    }
    // One round: 7 heavy queues x 1000 quanta of 1514 bytes ~ 7 x 1009 packets, then queue 5.
    let mut first5 = None;
    for i in 0..10_000 {
        if s.dequeue(0).unwrap().qid == 5 {
            first5 = Some(i);
            break;
        }
    }
    assert!(first5.is_some(), "queue 5 starved");
    // And every queue keeps being served while all are backlogged.
    let mut seen = [0u32; NUM_QUEUES];
    for _ in 0..20_000 {
        let d = s.dequeue(0).unwrap();
        seen[usize::from(d.qid)] += 1;
        s.enqueue(d.pkt, d.qid, 0).unwrap();
    }
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}

#[test]
fn qos_tail_drop_counters() {
    let mut c = SchedulerConfig::default();
    c.queues[3].depth = 4;
    c.queues[6].depth = 1;
    let mut s: Scheduler<OwnedBuf> = Scheduler::new(&c, 0).unwrap();
    let mut dropped = 0;
    for i in 0..10 {
        if let Err(p) = s.enqueue(pkt(100 + i), 3, 0) {
            assert_eq!(p.len(), 100 + i, "the dropped packet is handed back");
            dropped += 1;
        }
    }
    assert_eq!(dropped, 6);
    assert!(s.enqueue(pkt(50), 6, 0).is_ok());
    assert!(s.enqueue(pkt(50), 6, 0).is_err());
    let st = s.stats(3);
    assert_eq!((st.enq_pkts, st.drop_pkts), (4, 6));
    assert_eq!(st.enq_bytes, 100 + 101 + 102 + 103);
    assert_eq!(st.drop_bytes, (104..110).sum::<u64>());
    assert_eq!((s.stats(6).enq_pkts, s.stats(6).drop_pkts), (1, 1));
    assert_eq!(s.stats(0), Default::default());
    assert_eq!((s.queue_len(3), s.queue_bytes(3), s.len()), (4, 406, 5));
    // Room again after a dequeue; the FIFO keeps the first four.
    let lens: Vec<usize> = std::iter::from_fn(|| s.dequeue(0))
        .filter(|d| d.qid == 3)
        .map(|d| d.pkt.len())
        .collect();
    assert_eq!(lens, [100, 101, 102, 103]);
    assert!(s.enqueue(pkt(1), 3, 0).is_ok());
    assert_eq!(s.stats(3).deq_pkts, 4);
    assert_eq!(s.stats(3).deq_bytes, 406);
}

#[test]
fn qos_sojourn_time_exact() {
    let mut s: Scheduler<OwnedBuf> = Scheduler::new(&all_sp(), 0).unwrap();
    s.enqueue(pkt(64), 2, 1_000).unwrap();
    s.enqueue(pkt(64), 2, 1_500).unwrap();
    s.enqueue(pkt(64), 0, 2_000).unwrap();
    let d = s.dequeue(10_000).unwrap();
    assert_eq!((d.qid, d.sojourn_ns), (0, 8_000));
    assert_eq!(
        d.pkt.pkt_meta().enqueue_ns,
        2_000,
        "enqueue time in the meta"
    );
    assert_eq!(
        d.pkt.pkt_meta().sojourn_ns,
        8_000,
        "sojourn stamped at dequeue"
    );
    assert_eq!(d.pkt.meta().timestamp_ns, 0, "arrival time left alone");
    let d = s.dequeue(10_001).unwrap();
    assert_eq!((d.qid, d.sojourn_ns), (2, 9_001));
    // A clock that went backwards gives 0, not a wrapped value.
    let d = s.dequeue(1_000).unwrap();
    assert_eq!(d.sojourn_ns, 0);
    assert!(s.dequeue(20_000).is_none());
}

/// The shaper limits the port to its rate: queues build up, and the bytes sent over a long
/// run equal rate * time + burst.
#[test]
fn qos_shaper_rate_and_backlog() {
    let rate = 1_250_000; // 10 Mbit/s
    let burst = 3_000;
    let mut c = wrr_config([1; NUM_QUEUES], 10_000);
    c.shaper = Some(ShaperConfig {
        rate_bytes_per_s: rate,
        burst_bytes: burst,
    });
    let mut s: Scheduler<OwnedBuf> = Scheduler::new(&c, 0).unwrap();
    let mut sent = 0u64;
    let mut max_sojourn = 0;
    let mut max_backlog = 0;
    // Offer 1000-byte packets at 2x the rate for 2 s; poll every 100 us.
    let mut t = 0;
    let mut next_arrival = 0;
    let mut i = 0u64;
    while t <= 2 * S {
        while next_arrival <= t {
            s.enqueue(pkt(1000), (i % 8) as u8, next_arrival).unwrap();
            i += 1;
            next_arrival += 400_000; // 1000 B per 400 us = 2.5 MB/s
        }
        max_backlog = max_backlog.max(s.len());
        s.dequeue_burst(t, 32, |d| {
            sent += d.pkt.len() as u64;
            max_sojourn = max_sojourn.max(d.sojourn_ns);
        });
        t += 100_000;
    }
    let want = rate * 2 + burst;
    assert!(
        sent <= want && want - sent < 1000,
        "sent {sent}, want {want}"
    );
    assert!(max_backlog > 2000, "backlog {max_backlog}");
    assert!(max_sojourn > S / 2, "sojourn {max_sojourn}");
    // Shaper holds back even with packets queued.
    assert!(!s.is_empty());
    assert!(s.dequeue(t).is_none());
    let mut freed = 0;
    s.drain(|_| freed += 1);
    assert!(freed > 0 && s.is_empty());
}
