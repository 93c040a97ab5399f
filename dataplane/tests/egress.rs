//! Per-port egress scheduling in the worker runtime, end to end over the in-memory backend:
//! strict priority and DRR shares under a shaper, tail drops per QID and under
//! `egress_queue_full`, sojourn times, unscheduled ports, and the stop flush.
//!
//! Test frames: bytes 0..8 the frame index (big-endian), byte 8 the QID the marking stage
//! asks for (`DEFAULT` = none, i.e. `Disposition::tx`), byte 9 the output port.

use peregrine_dataplane::io::memory::{MemBackend, MemPort, MemWorkerIo};
use peregrine_dataplane::io::{Backend, PortId, PortInfo, PortStats};
use peregrine_dataplane::qos::{QueueClass, QueueConfig, SchedulerConfig, ShaperConfig};
use peregrine_dataplane::runtime::{
    self, Batch, Context, Counters, Disposition, EgressConfig, Pipeline, QidCounters, Reasons,
    RuntimeConfig, Stage, WorkerSpec, SOJOURN_BIN_EDGES_US,
};
use peregrine_dataplane::stages::xconnect::XConnect;
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use std::time::Duration;

const DEFAULT: u8 = 0xff;

/// Marks each packet for the QID and port written in it.
struct MarkQid;

impl<B: PacketBuf> Stage<B> for MarkQid {
    fn name(&self) -> &'static str {
        "mark_qid"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        batch.for_each_active(|p| {
            let (qid, port) = (p.data()[8], PortId::from(p.data()[9]));
            if qid == DEFAULT {
                Disposition::tx(port)
            } else {
                Disposition::tx_queue(port, qid)
            }
        });
    }
}

fn frame(i: usize, qid: u8, port: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(64)];
    f[0..8].copy_from_slice(&(i as u64).to_be_bytes());
    f[8] = qid;
    f[9] = port;
    f
}

fn index(f: &[u8]) -> usize {
    u64::from_be_bytes(f[0..8].try_into().unwrap()) as usize
}

fn ports(rx: Vec<Vec<u8>>, outputs: usize, live: bool) -> Vec<MemPort> {
    let mut v = vec![MemPort {
        name: "in".into(),
        rx,
        live,
        ..Default::default()
    }];
    for i in 0..outputs {
        v.push(MemPort {
            name: format!("out{i}"),
            ..Default::default()
        });
    }
    v
}

fn cfg(backend: &MemBackend, egress: Vec<Option<EgressConfig>>) -> RuntimeConfig {
    RuntimeConfig {
        workers: vec![WorkerSpec {
            id: 0,
            core: None,
            rx_queues: backend.rx_queues_of(0),
            tx_queue: 0,
        }],
        burst: 32,
        stop_after_idle: None,
        control_queue: 16,
        egress,
    }
}

fn mark_pipeline(_w: usize, _r: &mut Reasons) -> Pipeline<OwnedBuf> {
    Pipeline::new(vec![Box::new(MarkQid)])
}

fn shaped(sched: SchedulerConfig, rate: u64, burst: u64) -> EgressConfig {
    EgressConfig::new(SchedulerConfig {
        shaper: Some(ShaperConfig {
            rate_bytes_per_s: rate,
            burst_bytes: burst,
        }),
        ..sched
    })
}

/// Every packet received was sent or dropped under a named reason, and the egress counters
/// agree with the worker's: enqueued = dequeued (queues empty at the end), tail drops =
/// `egress_queue_full`.
fn assert_accounted(total: &Counters) {
    assert_eq!(
        total.total_rx(),
        total.total_tx() + total.total_drops() + total.to_control,
        "{total:?}"
    );
    let mut tail = 0;
    for e in &total.egress {
        for (qid, q) in e.queues.iter().enumerate() {
            assert_eq!(q.enq_pkts, q.deq_pkts, "port {} qid {qid}", e.port);
            assert_eq!(q.enq_bytes, q.deq_bytes);
            assert_eq!((q.depth_pkts, q.depth_bytes), (0, 0));
            assert_eq!(q.sojourn_count, q.deq_pkts);
            assert_eq!(q.sojourn_hist.iter().sum::<u64>(), q.deq_pkts);
            tail += q.drop_pkts;
        }
    }
    assert_eq!(total.drops[Reasons::EGRESS_QUEUE_FULL.0 as usize], tail);
}

/// A backlogged low-priority (DRR) queue waits while the strict-priority queue has packets:
/// 100 frames for QID 7 arrive first, then 100 for QID 0, and the 1 ms-per-packet shaper
/// lets QID 0 overtake all but the few QID 7 frames sent before it arrived.
#[test]
fn strict_priority_overtakes_a_backlogged_low_queue() {
    let len = 1000;
    let rx: Vec<_> = (0..200)
        .map(|i| frame(i, if i < 100 { 7 } else { 0 }, 1, len))
        .collect();
    let mut be = MemBackend::new(ports(rx, 1, false), 1);
    let out = be.tx_log(1);
    // 1 MB/s with 1000-byte frames: one packet per ms, a burst of two.
    let c = cfg(
        &be,
        vec![
            None,
            Some(shaped(SchedulerConfig::default(), 1_000_000, 2000)),
        ],
    );
    let total = runtime::start(&mut be, &mark_pipeline, &c).unwrap().join();
    assert_accounted(&total);
    assert_eq!(total.tx_pkts[1], 200);
    let sent: Vec<u8> = out.lock().unwrap().iter().map(|f| f[8]).collect();
    let last_high = sent.iter().rposition(|&q| q == 0).unwrap();
    let low_before = sent[..last_high].iter().filter(|&&q| q == 7).count();
    assert!(
        low_before <= 8,
        "{low_before} QID 7 packets went out before the last QID 0 one: {sent:?}"
    );
    let e = total.egress_of(1).unwrap();
    assert_eq!(e.queues[0].deq_pkts, 100);
    assert_eq!(e.queues[7].deq_pkts, 100);
    let (hi, lo) = (
        e.queues[0].mean_sojourn_ns().unwrap(),
        e.queues[7].mean_sojourn_ns().unwrap(),
    );
    assert!(
        lo > hi * 2,
        "QID 7 waited {lo} ns on average, QID 0 {hi} ns"
    );
}

/// Three backlogged DRR queues with weights 4:2:1 and packet sizes that do not follow the
/// weights (900, 1500, 450 bytes; offered round robin, one packet each, so FIFO service
/// would give 32:53:16) share the shaped port 4:2:1 in bytes, within 4%, measured over the
/// first 700 kB while all three are backlogged.
#[test]
fn drr_byte_shares_under_a_shaper() {
    let mut sched = SchedulerConfig::default();
    for (qid, w) in [(2, 4), (3, 2), (4, 1)] {
        sched.queues[qid] = QueueConfig {
            class: QueueClass::Wrr { weight: w },
            depth: 512,
        };
    }
    // (qid, frame size, frames): enough of each to stay backlogged through the window.
    let offered = [(2u8, 900usize, 480usize), (3, 1500, 150), (4, 450, 245)];
    let mut rx = Vec::new();
    for round in 0..480 {
        for &(qid, len, count) in &offered {
            if round < count {
                rx.push(frame(rx.len(), qid, 1, len));
            }
        }
    }
    let mut be = MemBackend::new(ports(rx, 1, false), 1);
    let out = be.tx_log(1);
    let c = cfg(&be, vec![None, Some(shaped(sched, 4_000_000, 3000))]);
    let total = runtime::start(&mut be, &mark_pipeline, &c).unwrap().join();
    assert_accounted(&total);
    assert_eq!(total.tx_pkts[1], 875);
    let log = out.lock().unwrap();
    let mut bytes = [0f64; 8];
    let mut seen = 0;
    for f in log.iter().take_while(|f| {
        seen += f.len();
        seen <= 700_000
    }) {
        bytes[f[8] as usize] += f.len() as f64;
    }
    let sum = bytes[2] + bytes[3] + bytes[4];
    for (qid, want) in [(2, 4.0 / 7.0), (3, 2.0 / 7.0), (4, 1.0 / 7.0)] {
        let got = bytes[qid] / sum;
        assert!(
            (got - want).abs() <= want * 0.04,
            "QID {qid}: {got:.4} of the bytes, want {want:.4} ({bytes:?})"
        );
    }
}

/// Queues of depth 16 behind a slow shaper tail-drop the excess: counted per QID (packets
/// and bytes) and under `egress_queue_full`; other queues and the default queue are fine.
#[test]
fn tail_drops_are_counted_per_qid_and_by_reason() {
    let mut sched = SchedulerConfig::default();
    sched.queues[5].depth = 16;
    sched.queues[6].depth = 16;
    let mut rx = Vec::new();
    for i in 0..100 {
        rx.push(frame(i, 5, 1, 64));
    }
    for i in 100..150 {
        rx.push(frame(i, 6, 1, 64));
    }
    for i in 150..160 {
        rx.push(frame(i, DEFAULT, 1, 64));
    }
    let mut be = MemBackend::new(ports(rx, 1, false), 1);
    let out = be.tx_log(1);
    // 64 kB/s: one 64-byte packet per ms.
    let c = cfg(&be, vec![None, Some(shaped(sched, 64_000, 128))]);
    let run = runtime::start(&mut be, &mark_pipeline, &c).unwrap();
    let names = run.reasons().names().to_vec();
    let total = run.join();
    assert_eq!(
        names[Reasons::EGRESS_QUEUE_FULL.0 as usize],
        "egress_queue_full"
    );
    assert_accounted(&total);
    let e = total.egress_of(1).unwrap();
    let q5 = e.queues[5];
    let q6 = e.queues[6];
    assert_eq!(q5.enq_pkts + q5.drop_pkts, 100);
    assert_eq!(q6.enq_pkts + q6.drop_pkts, 50);
    assert!(q5.drop_pkts >= 70, "{q5:?}");
    assert!(q6.drop_pkts >= 20, "{q6:?}");
    assert_eq!(q5.drop_bytes, 64 * q5.drop_pkts);
    // Default queue (QFI 9's, 7): room for all ten.
    assert_eq!(e.queues[7].enq_pkts, 10);
    assert_eq!(e.queues[7].drop_pkts, 0);
    assert_eq!(
        total.drops[Reasons::EGRESS_QUEUE_FULL.0 as usize],
        q5.drop_pkts + q6.drop_pkts
    );
    assert_eq!(total.total_drops(), q5.drop_pkts + q6.drop_pkts);
    assert_eq!(out.lock().unwrap().len() as u64, total.tx_pkts[1]);
}

/// 50 packets of 500 bytes at once into one queue behind a 500 kB/s shaper (a departure
/// rate of one per ms, a burst of two). The bounds hold however loaded the machine is: the
/// sojourn times are wall-clock, so descheduling the worker can only lengthen them.
/// - All 50 arrive in one rx burst and are queued before the first departure, and the
///   shaper's bucket holds at most 1000 bytes then, so packet k (0-based) leaves at least
///   (k - 1) ms after it was queued ((k + 1) * 500 bytes may leave only once
///   burst + rate * t covers them). Allowing one packet of slack: sojourn_k >= (k - 2) ms, so
///   at most ceil(e + 2) packets wait less than e ms (checked at every histogram edge), the
///   maximum is >= 47 ms and the mean >= (1 + ... + 47) / 50 ms = 22.56 ms.
/// - No sojourn exceeds the run's wall-clock time, and FIFO order holds.
#[test]
fn sojourn_times_follow_the_shaper_rate() {
    let rx: Vec<_> = (0..50).map(|i| frame(i, 4, 1, 500)).collect();
    let mut be = MemBackend::new(ports(rx, 1, false), 1);
    let out = be.tx_log(1);
    let mut c = cfg(
        &be,
        vec![
            None,
            Some(shaped(SchedulerConfig::default(), 500_000, 1000)),
        ],
    );
    // One rx burst takes all 50, so they are all queued before any leaves.
    c.burst = 64;
    let t0 = std::time::Instant::now();
    let total = runtime::start(&mut be, &mark_pipeline, &c).unwrap().join();
    let elapsed = t0.elapsed();
    assert_accounted(&total);
    assert!(elapsed >= Duration::from_millis(47), "shaped: {elapsed:?}");
    let idx: Vec<_> = out.lock().unwrap().iter().map(|f| index(f)).collect();
    assert_eq!(idx, (0..50).collect::<Vec<_>>(), "FIFO");
    let q: QidCounters = total.egress_of(1).unwrap().queues[4];
    assert_eq!(q.sojourn_count, 50);
    let mean = q.mean_sojourn_ns().unwrap();
    let max = q.sojourn_max_ns;
    let lower_sum_ms: u64 = (0..50u64).map(|k| k.saturating_sub(2)).sum();
    assert!(
        mean >= lower_sum_ms * 1_000_000 / 50,
        "mean sojourn {mean} ns below the shaper's bound"
    );
    assert!(max >= 47_000_000, "max sojourn {max} ns");
    assert!(mean <= max, "mean {mean} > max {max}");
    assert!(
        max <= elapsed.as_nanos() as u64,
        "max sojourn {max} ns longer than the run ({elapsed:?})"
    );
    // Sojourn grows with queue position: few packets below each bin edge.
    let mut below = 0;
    for (i, edge_us) in SOJOURN_BIN_EDGES_US.iter().enumerate() {
        below += q.sojourn_hist[i];
        let allowed = (edge_us.div_ceil(1000) + 2).min(50);
        assert!(
            below <= allowed,
            "{below} packets waited < {edge_us} us (at most {allowed}): {:?}",
            q.sojourn_hist
        );
    }
}

/// A port without a scheduler is untouched (in order, no egress counters), while a
/// whole-batch `Tx` to a scheduled port (a cross-connect: no QID named) is queued on the
/// port's default QID.
#[test]
fn unscheduled_ports_unchanged_and_uniform_batches_use_the_default_qid() {
    // Split: port 1 scheduled (no shaper), port 2 not.
    let n = 2000;
    let rx: Vec<_> = (0..n)
        .map(|i| frame(i, (i % 8) as u8, 1 + (i % 2) as u8, 64))
        .collect();
    let mut be = MemBackend::new(ports(rx, 2, false), 1);
    let (o1, o2) = (be.tx_log(1), be.tx_log(2));
    let c = cfg(&be, vec![None, Some(EgressConfig::default()), None]);
    let total = runtime::start(&mut be, &mark_pipeline, &c).unwrap().join();
    assert_accounted(&total);
    assert_eq!(total.tx_pkts, vec![0, n as u64 / 2, n as u64 / 2]);
    assert!(total.egress_of(2).is_none() && total.egress_of(0).is_none());
    let idx2: Vec<_> = o2.lock().unwrap().iter().map(|f| index(f)).collect();
    assert_eq!(idx2, (0..n).filter(|i| i % 2 == 1).collect::<Vec<_>>());
    // FIFO within each queue of the scheduled port.
    let log1 = o1.lock().unwrap();
    for qid in 0..8u8 {
        let idx: Vec<_> = log1
            .iter()
            .filter(|f| f[8] == qid)
            .map(|f| index(f))
            .collect();
        assert!(idx.windows(2).all(|w| w[0] < w[1]), "QID {qid} reordered");
        assert_eq!(
            total.egress_of(1).unwrap().queues[usize::from(qid)].deq_pkts,
            idx.len() as u64
        );
    }

    // A cross-connect to a scheduled port: uniform batches, default QID 7.
    let mut be = MemBackend::new(
        ports((0..500).map(|i| frame(i, 0, 0, 64)).collect(), 1, false),
        1,
    );
    let o1 = be.tx_log(1);
    let c = cfg(&be, vec![None, Some(EgressConfig::default())]);
    let total = runtime::start(
        &mut be,
        &|_w: usize, r: &mut Reasons| {
            Pipeline::<OwnedBuf>::new(vec![Box::new(XConnect::new(&[(0, 1)], r))])
        },
        &c,
    )
    .unwrap()
    .join();
    assert_accounted(&total);
    let e = total.egress_of(1).unwrap();
    assert_eq!(e.queues[7].enq_pkts, 500);
    assert_eq!(e.total().enq_pkts, 500);
    let idx: Vec<_> = o1.lock().unwrap().iter().map(|f| index(f)).collect();
    assert_eq!(idx, (0..500).collect::<Vec<_>>());
}

/// Hands the runtime a memory I/O whose tx accepts only `tx_limit` packets per burst.
struct Limited(MemBackend, usize);

impl Backend for Limited {
    type Io = MemWorkerIo;
    fn ports(&self) -> &[PortInfo] {
        self.0.ports()
    }
    fn worker_io(&mut self, w: usize) -> MemWorkerIo {
        let mut io = self.0.worker_io(w);
        io.tx_limit = self.1;
        io
    }
    fn port_stats(&self, p: PortId) -> PortStats {
        self.0.port_stats(p)
    }
}

/// Stop with hundreds of packets queued behind a very slow shaper: the flush sends them
/// without the shaper, the driver takes 8 per burst, the rest is counted `tx_full`, and
/// in = out + counted drops holds exactly.
#[test]
fn stop_flushes_the_queues_and_counts_what_the_driver_refuses() {
    let rx: Vec<_> = (0..600)
        .map(|i| frame(i, (i % 3) as u8 + 4, 1, 100))
        .collect();
    let be = MemBackend::new(ports(rx, 1, true), 1);
    let out = be.tx_log(1);
    let mut lim = Limited(be, 8);
    // 1 kB/s: ten 100-byte packets per second after a burst of two.
    let c = cfg(
        &lim.0,
        vec![None, Some(shaped(SchedulerConfig::default(), 1_000, 200))],
    );
    let run = runtime::start(&mut lim, &mark_pipeline, &c).unwrap();
    // Wait until every frame is in and published.
    let t0 = std::time::Instant::now();
    while run.counters().total_rx() < 600 {
        assert!(t0.elapsed() < Duration::from_secs(20), "rx stalled");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(20));
    let mid = run.egress();
    let queued: u64 = mid[0].queues.iter().map(|q| q.depth_pkts).sum();
    assert!(queued > 500, "only {queued} queued before stop");
    run.request_stop();
    let total = run.join();
    assert_accounted(&total);
    assert_eq!(total.total_rx(), 600);
    assert_eq!(out.lock().unwrap().len() as u64, total.tx_pkts[1]);
    assert!(
        total.drops[Reasons::TX_FULL.0 as usize] > 0,
        "the driver refused part of the flush"
    );
    assert_eq!(
        total.tx_pkts[1] + total.drops[Reasons::TX_FULL.0 as usize],
        600
    );
}

/// Bad egress configuration is refused before any worker starts.
#[test]
fn bad_egress_config_is_refused() {
    let mut be = MemBackend::new(ports(vec![], 1, false), 1);
    let c = cfg(&be, vec![None, None, Some(EgressConfig::default())]);
    let e = runtime::start(&mut be, &mark_pipeline, &c).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let bad = EgressConfig {
        default_qid: 8,
        ..EgressConfig::default()
    };
    let c = cfg(&be, vec![None, Some(bad)]);
    assert!(runtime::start(&mut be, &mark_pipeline, &c).is_err());
    let mut bad = EgressConfig::default();
    bad.scheduler.queues[2].class = QueueClass::Wrr { weight: 0 };
    let c = cfg(&be, vec![Some(bad)]);
    assert!(runtime::start(&mut be, &mark_pipeline, &c).is_err());
}
