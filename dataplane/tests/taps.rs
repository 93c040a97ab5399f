//! Post-dequeue taps in the worker runtime, over the in-memory backend: a tap sees every
//! packet sent on its port exactly once, before tx, with the packet metadata stages wrote and
//! the sojourn time the egress scheduler stamped; taps on one port run in order and may edit
//! bytes; ports without a scheduler (per-packet and whole-batch dispatch) have taps too.
//!
//! Test frames: bytes 0..8 the frame index (big-endian), byte 8 the QID the marking stage asks
//! for, byte 9 the output port.

use peregrine_dataplane::io::memory::{MemBackend, MemPort};
use peregrine_dataplane::io::PortId;
use peregrine_dataplane::meta::{flags, PacketMeta};
use peregrine_dataplane::qos::{SchedulerConfig, ShaperConfig};
use peregrine_dataplane::runtime::{
    self, Batch, Context, Disposition, EgressConfig, Pipeline, Reasons, RuntimeConfig, Stage, Tap,
    WorkerSpec,
};
use peregrine_dataplane::stages::xconnect::XConnect;
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Marks each packet for the QID and port written in it and fills some metadata from the
/// frame index, as a classifier and the UPF would.
struct MarkAndFill;

impl<B: PacketBuf> Stage<B> for MarkAndFill {
    fn name(&self) -> &'static str {
        "mark_and_fill"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        batch.for_each_active(|p| {
            let (qid, port) = (p.data()[8], PortId::from(p.data()[9]));
            let i = index(p.data()) as u32;
            let m = p.pkt_meta_mut();
            *m = PacketMeta::EMPTY;
            m.teid = 0x1000 + i;
            m.flow_hash = i.wrapping_mul(2_654_435_761);
            m.flags = flags::CLASSIFIED;
            m.qid = qid;
            m.color = (i % 3) as u8;
            Disposition::tx_queue(port, qid)
        });
    }
}

/// What a tap saw of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    port: PortId,
    index: usize,
    meta: PacketMeta,
    byte10: u8,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// Records every packet and writes `mark` into byte 10 (so the next tap and the wire see it).
struct Recorder {
    log: Log,
    mark: u8,
    idles: Arc<AtomicUsize>,
    bursts: Arc<AtomicUsize>,
}

impl Tap<OwnedBuf> for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn on_burst(&mut self, port: PortId, pkts: &mut [OwnedBuf], _cx: &Context) {
        assert!(!pkts.is_empty(), "no empty bursts");
        self.bursts.fetch_add(1, Ordering::Relaxed);
        let mut log = self.log.lock().unwrap();
        for p in pkts.iter_mut() {
            log.push(Seen {
                port,
                index: index(p.data()),
                meta: *p.pkt_meta(),
                byte10: p.data()[10],
            });
            p.data_mut()[10] = self.mark;
        }
    }
    fn idle(&mut self) {
        self.idles.fetch_add(1, Ordering::Relaxed);
    }
}

fn recorder(mark: u8) -> (Recorder, Log, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let log = Log::default();
    let idles = Arc::new(AtomicUsize::new(0));
    let bursts = Arc::new(AtomicUsize::new(0));
    (
        Recorder {
            log: log.clone(),
            mark,
            idles: idles.clone(),
            bursts: bursts.clone(),
        },
        log,
        idles,
        bursts,
    )
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

fn backend(rx: Vec<Vec<u8>>, outputs: usize) -> MemBackend {
    let mut v = vec![MemPort {
        name: "in".into(),
        rx,
        ..Default::default()
    }];
    for i in 0..outputs {
        v.push(MemPort {
            name: format!("out{i}"),
            ..Default::default()
        });
    }
    MemBackend::new(v, 1)
}

fn cfg(be: &MemBackend, egress: Vec<Option<EgressConfig>>) -> RuntimeConfig {
    RuntimeConfig {
        workers: vec![WorkerSpec {
            id: 0,
            core: None,
            rx_queues: be.rx_queues_of(0),
            tx_queue: 0,
        }],
        burst: 32,
        stop_after_idle: None,
        control_queue: 16,
        egress,
    }
}

/// A shaped port: every packet of a 300-frame burst waits in the scheduler; the tap sees
/// each one once, in wire order, before tx, with the stage's metadata intact and the sojourn
/// the scheduler measured (its per-queue sum agrees with the tap's); packets to the other,
/// unscheduled port are not shown to it but to that port's own tap.
#[test]
fn tap_sees_dequeued_bursts_with_sojourn_and_metadata() {
    let n = 300;
    // Ports 1 (scheduled, QIDs 2 and 7) and 2 (no scheduler) alternate.
    let rx: Vec<_> = (0..n)
        .map(|i| {
            let port = if i % 3 == 2 { 2 } else { 1 };
            frame(i, if i % 2 == 0 { 2 } else { 7 }, port, 500)
        })
        .collect();
    let mut be = backend(rx, 2);
    let out1 = be.tx_log(1);
    let out2 = be.tx_log(2);
    let sched = SchedulerConfig {
        // 5 MB/s of 500-byte frames: 0.1 ms per packet, so queues build up.
        shaper: Some(ShaperConfig {
            rate_bytes_per_s: 5_000_000,
            burst_bytes: 1000,
        }),
        ..SchedulerConfig::default()
    };
    let c = cfg(&be, vec![None, Some(EgressConfig::new(sched)), None]);
    let (t1, log1, idles, bursts) = recorder(0xa1);
    let (t2, log2, _, _) = recorder(0xa2);
    let slot = Mutex::new(Some((t1, t2)));
    let factory = move |_w: usize, _r: &mut Reasons| {
        let (t1, t2) = slot.lock().unwrap().take().expect("one worker");
        Pipeline::new(vec![Box::new(MarkAndFill)])
            .with_tap(1, Box::new(t1))
            .with_tap(2, Box::new(t2))
    };
    let running = runtime::start(&mut be, &factory, &c).unwrap();
    let total = running.join();
    assert_eq!(total.total_tx(), n as u64, "{total:?}");

    let seen1 = log1.lock().unwrap().clone();
    let seen2 = log2.lock().unwrap().clone();
    assert_eq!(seen1.len(), 200);
    assert_eq!(seen2.len(), 100);
    assert!(seen1.iter().all(|s| s.port == 1));
    assert!(seen2.iter().all(|s| s.port == 2));
    // Wire order is tap order, and the tap's edit reached the wire.
    let wire1 = out1.lock().unwrap();
    assert_eq!(wire1.len(), 200);
    for (s, f) in seen1.iter().zip(wire1.iter()) {
        assert_eq!(s.index, index(f));
        assert_eq!(f[10], 0xa1);
        assert_eq!(s.byte10, 0, "seen before the tap wrote it");
    }
    assert!(out2.lock().unwrap().iter().all(|f| f[10] == 0xa2));
    // Each packet once; metadata as the stage left it, plus the scheduler's stamps.
    let mut idx: Vec<usize> = seen1.iter().map(|s| s.index).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), 200);
    for s in &seen1 {
        let i = s.index as u32;
        assert_eq!(s.meta.teid, 0x1000 + i);
        assert_eq!(s.meta.flow_hash, i.wrapping_mul(2_654_435_761));
        assert_eq!(s.meta.color, (i % 3) as u8);
        assert_eq!(s.meta.qid, if i.is_multiple_of(2) { 2 } else { 7 });
        assert!(s.meta.is_classified());
        assert!(s.meta.enqueue_ns > 0, "enqueue stamped: {s:?}");
    }
    let e = total.egress_of(1).unwrap();
    for qid in [2u8, 7] {
        let q = &e.queues[usize::from(qid)];
        let tap_sum: u64 = seen1
            .iter()
            .filter(|s| s.meta.qid == qid)
            .map(|s| u64::from(s.meta.sojourn_ns))
            .sum();
        assert_eq!(q.deq_pkts, 100);
        assert_eq!(tap_sum, q.sojourn_sum_ns, "qid {qid}");
    }
    // The shaper held most packets for a while.
    let waited = seen1.iter().filter(|s| s.meta.sojourn_ns > 50_000).count();
    assert!(waited > 150, "only {waited} packets waited > 50 us");
    // Unscheduled port: nothing stamped by a scheduler.
    assert!(seen2
        .iter()
        .all(|s| s.meta.sojourn_ns == 0 && s.meta.enqueue_ns == 0));
    assert!(bursts.load(Ordering::Relaxed) >= 200 / 32);
    assert!(idles.load(Ordering::Relaxed) > 0, "taps get idle calls");
}

/// Two taps on one port run in the order added (the second sees the first's edit), on the
/// whole-batch fast path of an unscheduled port (a cross-connect).
#[test]
fn taps_run_in_order_on_the_whole_batch_path() {
    let n = 100;
    let rx: Vec<_> = (0..n).map(|i| frame(i, 0, 1, 64)).collect();
    let mut be = backend(rx, 1);
    let out = be.tx_log(1);
    let c = cfg(&be, vec![]);
    let (a, log_a, _, bursts_a) = recorder(0x11);
    let (b, log_b, _, bursts_b) = recorder(0x22);
    let slot = Mutex::new(Some((a, b)));
    let factory = move |_w: usize, r: &mut Reasons| {
        let (a, b) = slot.lock().unwrap().take().expect("one worker");
        let p: Pipeline<OwnedBuf> = Pipeline::new(vec![Box::new(XConnect::new(&[(0, 1)], r))])
            .with_tap(1, Box::new(a))
            .with_tap(1, Box::new(b));
        assert_eq!(p.tap_names(), vec![(1, "recorder"), (1, "recorder")]);
        p
    };
    let total = runtime::start(&mut be, &factory, &c).unwrap().join();
    assert_eq!(total.tx_pkts[1], n as u64);
    let (a, b) = (log_a.lock().unwrap(), log_b.lock().unwrap());
    assert_eq!(a.len(), n);
    assert_eq!(b.len(), n);
    assert!(a.iter().all(|s| s.byte10 == 0));
    assert!(
        b.iter().all(|s| s.byte10 == 0x11),
        "second tap after the first"
    );
    let order: Vec<usize> = b.iter().map(|s| s.index).collect();
    assert_eq!(order, (0..n).collect::<Vec<_>>());
    assert!(out.lock().unwrap().iter().all(|f| f[10] == 0x22));
    // One call per burst, not per packet.
    assert_eq!(bursts_a.load(Ordering::Relaxed), n.div_ceil(32));
    assert_eq!(bursts_b.load(Ordering::Relaxed), n.div_ceil(32));
}
