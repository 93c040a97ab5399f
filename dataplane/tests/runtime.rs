//! The worker runtime end to end over the in-memory backend: real threads, real pipelines.

use peregrine_dataplane::io::memory::{MemBackend, MemPort};
use peregrine_dataplane::runtime::{
    self, Batch, Context, Disposition, DropReason, Pipeline, Reasons, RuntimeConfig, Stage,
};
use peregrine_dataplane::stages::xconnect::XConnect;
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use std::time::Duration;

fn frames(n: usize, tag: u8) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut f = vec![tag; 64];
            f[0..8].copy_from_slice(&(i as u64).to_be_bytes());
            f
        })
        .collect()
}

fn cfg(workers: usize, backend: &MemBackend) -> RuntimeConfig {
    peregrine_testkit::runtime::mem_config(workers, backend)
}

#[test]
fn xconnect_forwards_everything_in_order() {
    let mut be = MemBackend::new(
        vec![
            MemPort {
                name: "a".into(),
                rx: frames(1000, 0xaa),
                ..Default::default()
            },
            MemPort {
                name: "b".into(),
                rx: frames(700, 0xbb),
                ..Default::default()
            },
        ],
        1,
    );
    let (la, lb) = (be.tx_log(0), be.tx_log(1));
    let c = cfg(1, &be);
    let run = runtime::start(
        &mut be,
        &|_w: usize, r: &mut Reasons| {
            Pipeline::<OwnedBuf>::new(vec![Box::new(XConnect::new(&[(0, 1)], r))])
        },
        &c,
    )
    .unwrap();
    let total = run.join();
    assert_eq!(total.rx_pkts, vec![1000, 700]);
    assert_eq!(total.tx_pkts, vec![700, 1000]);
    assert_eq!(total.total_drops(), 0);
    assert_eq!(
        *lb.lock().unwrap(),
        frames(1000, 0xaa),
        "a -> b byte-identical and in order"
    );
    assert_eq!(*la.lock().unwrap(), frames(700, 0xbb));
}

/// Drops every packet whose first byte is odd (by reason), sends byte 0x42 to control.
struct Sieve {
    odd: DropReason,
}

impl<B: PacketBuf> Stage<B> for Sieve {
    fn name(&self) -> &'static str {
        "sieve"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        let odd = self.odd;
        batch.for_each_active(|p| match p.data()[7] {
            0x42 => Disposition::TO_CONTROL,
            x if x % 2 == 1 => Disposition::drop_as(odd),
            _ => Disposition::CONTINUE,
        });
    }
}

/// Leaves packets with byte 7 == 0x10 undecided: the runtime must count them, not lose them.
struct Forgetful;

impl<B: PacketBuf> Stage<B> for Forgetful {
    fn name(&self) -> &'static str {
        "forgetful"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        batch.for_each_active(|p| {
            if p.data()[7] == 0x10 {
                Disposition::CONTINUE
            } else {
                Disposition::tx(1)
            }
        });
    }
}

#[test]
fn every_packet_is_accounted_for_across_two_workers() {
    let n = 4096;
    let mut be = MemBackend::new(
        vec![
            MemPort {
                name: "in0".into(),
                rx: frames(n, 1),
                ..Default::default()
            },
            MemPort {
                name: "out".into(),
                rx: vec![],
                ..Default::default()
            },
            MemPort {
                name: "in2".into(),
                rx: frames(n, 2),
                ..Default::default()
            },
        ],
        2,
    );
    let out = be.tx_log(1);
    let c = cfg(2, &be);
    let run = runtime::start(
        &mut be,
        &|_w: usize, r: &mut Reasons| {
            Pipeline::<OwnedBuf>::new(vec![
                Box::new(Sieve {
                    odd: r.register("odd"),
                }),
                Box::new(Forgetful),
            ])
        },
        &c,
    )
    .unwrap();
    let mut ctl = 0;
    while !run.finished() || run.control_backlog() > 0 {
        if let Some(p) = run.recv_control(Duration::from_millis(10)) {
            assert_eq!(p.data[7], 0x42);
            assert_eq!(p.len, 64);
            ctl += 1;
        }
    }
    let reasons = run.reasons().clone();
    let total = run.join();
    // Byte 7 is the low byte of the frame index.
    let per_port = |pred: &dyn Fn(u8) -> bool| (0..n).filter(|i| pred(*i as u8)).count() as u64 * 2;
    let odd = per_port(&|b| b != 0x42 && b % 2 == 1);
    let to_ctl = per_port(&|b| b == 0x42);
    let undecided = per_port(&|b| b == 0x10);
    let odd_id = reasons.names().iter().position(|n| *n == "odd").unwrap();
    assert_eq!(total.total_rx(), 2 * n as u64);
    assert_eq!(total.drops[odd_id], odd);
    assert_eq!(total.drops[Reasons::NO_DISPOSITION.0 as usize], undecided);
    assert_eq!(total.to_control, to_ctl);
    assert_eq!(ctl, to_ctl);
    assert_eq!(total.tx_pkts[1], 2 * n as u64 - odd - to_ctl - undecided);
    assert_eq!(out.lock().unwrap().len() as u64, total.tx_pkts[1]);
    assert_eq!(
        total.total_rx(),
        total.total_tx() + total.total_drops() + total.to_control
    );
}

#[test]
fn stop_flag_ends_idle_workers() {
    let mut be = MemBackend::new(
        vec![MemPort {
            name: "a".into(),
            live: true,
            ..Default::default()
        }],
        1,
    );
    let mut c = cfg(1, &be);
    c.stop_after_idle = Some(Duration::from_secs(60));
    let run = runtime::start(
        &mut be,
        &|_w: usize, r: &mut Reasons| {
            Pipeline::<OwnedBuf>::new(vec![Box::new(XConnect::new(&[(0, 0)], r))])
        },
        &c,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(!run.finished(), "a live port keeps its worker polling");
    run.request_stop();
    let t0 = std::time::Instant::now();
    run.join();
    // A hang guard (join returned, so this only reports one that took past it).
    assert!(t0.elapsed() < peregrine_testkit::tools::STOP_GUARD);
}

#[test]
fn idle_timeout_ends_live_workers() {
    let mut be = MemBackend::new(
        vec![MemPort {
            name: "a".into(),
            live: true,
            rx: frames(10, 0),
            ..Default::default()
        }],
        1,
    );
    let mut c = cfg(1, &be);
    c.stop_after_idle = Some(Duration::from_millis(30));
    let run = runtime::start(
        &mut be,
        &|_w: usize, r: &mut Reasons| {
            Pipeline::<OwnedBuf>::new(vec![Box::new(XConnect::new(&[(0, 0)], r))])
        },
        &c,
    )
    .unwrap();
    let total = run.join();
    assert_eq!(total.rx_pkts[0], 10);
    assert_eq!(total.tx_pkts[0], 10);
}

/// A worker with no traffic still passes through quiescent states: its stages refresh their
/// snapshot readers on idle polls, so a publisher waiting for every worker (a PFCP message
/// waiting for its rules to be in force) is not held up until the next packet.
#[test]
fn idle_workers_pick_up_new_snapshots() {
    use peregrine_dataplane::runtime::{Publisher, Reader};
    struct Reads(Reader<u64>);
    impl<B: PacketBuf> Stage<B> for Reads {
        fn name(&self) -> &'static str {
            "reads"
        }
        fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
            self.0.get();
            batch.set_active(Disposition::tx(0));
        }
        fn idle(&mut self) {
            self.0.get();
        }
    }
    let mut be = MemBackend::new(
        vec![MemPort {
            name: "a".into(),
            live: true,
            ..Default::default()
        }],
        2,
    );
    let p = Publisher::new(0u64);
    let c = cfg(2, &be);
    let run = runtime::start(
        &mut be,
        &|_w: usize, _r: &mut Reasons| Pipeline::<OwnedBuf>::new(vec![Box::new(Reads(p.reader()))]),
        &c,
    )
    .unwrap();
    for v in 1..=20 {
        let g = p.publish(v);
        assert!(
            p.wait_seen(g, Duration::from_secs(5)).is_some(),
            "generation {g} never seen by the idle workers"
        );
        p.reclaim();
    }
    assert_eq!(
        p.retired_len(),
        0,
        "idle workers released every old version"
    );
    run.request_stop();
    run.join();
}
