//! MBR shaping in virtual time: the per-session pacer (`qos::pacer`) stamps departure times,
//! the egress scheduler's timing wheel (`qos::wheel`) holds packets until then. Time is
//! passed in, so every run repeats bit for bit.

use peregrine_dataplane::buffer::{OwnedBuf, PacketBuf};
use peregrine_dataplane::meta::flags;
use peregrine_dataplane::qos::wheel::SLOT_SHIFT;
use peregrine_dataplane::qos::{Pace, Pacer, PacerConfig, Scheduler, SchedulerConfig};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
/// The scheduler is served every 50 us, as a polling worker would.
const TICK: u64 = 50_000;

/// 20 Mbit/s, 2 ms shaping burst, 100 ms queue: the daemon's defaults at that MBR.
fn cfg() -> PacerConfig {
    PacerConfig {
        rate_bytes_per_s: 2_500_000,
        burst_bytes: 5_000,
        queue_ns: 100 * MS as u32,
    }
}

/// What came out: (dequeue time, bytes) per packet, and the drops.
#[derive(Default)]
struct Run {
    out: Vec<(u64, u64)>,
    offered: u64,
    pacer_drops: u64,
    sched_drops: u64,
    max_waiting_bytes: u64,
}

/// Offer `arrivals` (time, bytes), sorted, through a pacer into a scheduler; serve it every
/// `TICK` until `end`.
fn run(pc: PacerConfig, arrivals: &[(u64, u64)], end: u64) -> Run {
    let mut pacer = Pacer::new(pc, 0);
    let mut sched: Scheduler<OwnedBuf> = Scheduler::new(&SchedulerConfig::default(), 0).unwrap();
    let mut r = Run::default();
    let mut waiting_bytes = 0u64;
    let mut next = arrivals.iter().peekable();
    let mut t = 0;
    while t <= end {
        while let Some(&&(at, len)) = next.peek() {
            if at > t {
                break;
            }
            next.next();
            r.offered += len;
            let mut p = OwnedBuf::from_slice(&vec![0u8; len as usize]);
            match pacer.pace(at, len) {
                Pace::Full => {
                    r.pacer_drops += 1;
                    continue;
                }
                Pace::Now => {}
                Pace::At(d) => {
                    let m = p.pkt_meta_mut();
                    m.enqueue_ns = d;
                    m.flags |= flags::SHAPED;
                }
            }
            match sched.enqueue(p, 4, at) {
                Ok(()) => waiting_bytes += len,
                Err(_) => r.sched_drops += 1,
            }
        }
        r.max_waiting_bytes = r.max_waiting_bytes.max(waiting_bytes);
        while let Some(d) = sched.dequeue(t) {
            assert_eq!(d.pkt.pkt_meta().flags & flags::SHAPED, 0, "flag cleared");
            let len = d.pkt.len() as u64;
            waiting_bytes -= len;
            r.out.push((t, len));
        }
        t += TICK;
    }
    assert!(sched.is_empty(), "everything left by the end");
    r
}

fn bytes_between(out: &[(u64, u64)], from: u64, to: u64) -> u64 {
    out.iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .map(|(_, l)| l)
        .sum()
}

/// A UDP flow at twice the MBR for 10 s leaves at the MBR (+-1 %, every second), the queue
/// never holds more than its bound, and what does not fit is dropped and counted.
#[test]
fn shaping_holds_2x_mbr_udp_to_the_mbr() {
    let pc = cfg();
    let len = 1200u64;
    let gap = len * S / (2 * pc.rate_bytes_per_s);
    let arrivals: Vec<(u64, u64)> = (0..)
        .map(|i| (i * gap, len))
        .take_while(|a| a.0 < 10 * S)
        .collect();
    let r = run(pc, &arrivals, 11 * S);
    for sec in 1..10 {
        let b = bytes_between(&r.out, sec * S, (sec + 1) * S) as f64;
        let want = pc.rate_bytes_per_s as f64;
        assert!(
            (b - want).abs() <= want * 0.01,
            "second {sec}: {b} bytes, want {want}"
        );
    }
    // The queue bound: the delay bound at the rate, plus the burst and a packet.
    let bound = pc.rate_bytes_per_s * u64::from(pc.queue_ns) / S + u64::from(pc.burst_bytes) + len;
    assert!(
        r.max_waiting_bytes <= bound,
        "{} > {bound}",
        r.max_waiting_bytes
    );
    let full = pc.rate_bytes_per_s * u64::from(pc.queue_ns) / S - 2 * len;
    assert!(
        r.max_waiting_bytes >= full,
        "the queue filled up: {}",
        r.max_waiting_bytes
    );
    // About half the offered bytes are dropped by the pacer (queue full), none by the
    // scheduler, and the rest all left.
    let sent: u64 = r.out.iter().map(|o| o.1).sum();
    assert_eq!(r.sched_drops, 0);
    assert_eq!(sent + r.pacer_drops * len, r.offered);
    let frac = (r.pacer_drops * len) as f64 / r.offered as f64;
    assert!((0.44..0.5).contains(&frac), "dropped fraction {frac}");
}

/// An on-off source (3x the MBR for 40 ms, silent for 80 ms: the MBR on average) is
/// smoothed: no 10 ms window carries more than the MBR's 10 ms plus the burst and a slot's
/// early release, and nothing is dropped.
#[test]
fn shaping_smooths_a_bursty_source() {
    let pc = cfg();
    let len = 1000u64;
    let gap = len * S / (3 * pc.rate_bytes_per_s);
    let mut arrivals = Vec::new();
    for period in 0..40u64 {
        let start = period * 120 * MS;
        let mut t = start;
        while t < start + 40 * MS {
            arrivals.push((t, len));
            t += gap;
        }
    }
    let r = run(pc, &arrivals, 6 * S);
    assert_eq!(
        (r.pacer_drops, r.sched_drops),
        (0, 0),
        "the queue absorbs each burst"
    );
    let sent: u64 = r.out.iter().map(|o| o.1).sum();
    assert_eq!(sent, r.offered);
    let slot = 1u64 << SLOT_SHIFT;
    let cap = pc.rate_bytes_per_s * (10 * MS + slot + TICK) / S + u64::from(pc.burst_bytes) + len;
    let mut w = 0;
    while w + 10 * MS < 4800 * MS {
        let b = bytes_between(&r.out, w, w + 10 * MS);
        assert!(b <= cap, "window at {w} ns: {b} > {cap} bytes");
        w += MS;
    }
    // Unshaped, the same windows carry 3x the MBR.
    let raw: u64 = arrivals.iter().filter(|a| a.0 < 10 * MS).map(|a| a.1).sum();
    assert!(raw > 2 * cap, "{raw}");
}

/// A shaped packet that waits keeps its enqueue time: the sojourn time includes the wait.
#[test]
fn shaping_wait_counts_as_sojourn() {
    let mut sched: Scheduler<OwnedBuf> = Scheduler::new(&SchedulerConfig::default(), 0).unwrap();
    let mut p = OwnedBuf::from_slice(&[0u8; 100]);
    p.pkt_meta_mut().enqueue_ns = 5 * MS;
    p.pkt_meta_mut().flags |= flags::SHAPED;
    sched.enqueue(p, 3, MS).unwrap();
    assert_eq!((sched.len(), sched.shaped_waiting()), (1, 1));
    assert!(sched.dequeue(4 * MS).is_none(), "not yet");
    let d = sched.dequeue(5 * MS + 40_000).expect("due");
    assert_eq!(d.sojourn_ns, 4 * MS + 40_000);
    assert!(sched.is_empty());
}
