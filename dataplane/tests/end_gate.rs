//! The end of a run (`runtime::end`): a runtime from `start_held` keeps its workers at their
//! end, after their taps handed over what they hold, and sends what the control side injects
//! until it releases them.

use peregrine_dataplane::io::memory::{MemBackend, MemPort};
use peregrine_dataplane::io::PortId;
use peregrine_dataplane::runtime::{
    self, Batch, Context, Disposition, Pipeline, Reasons, Stage, Tap,
};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_testkit::runtime::mem_config;
use peregrine_testkit::tools::wait_until;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Hands every packet to the control side (none arrive here).
struct ToControl;

impl<B: PacketBuf> Stage<B> for ToControl {
    fn name(&self) -> &'static str {
        "to_control"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        batch.set_active(Disposition::TO_CONTROL);
    }
}

/// Holds something until its third `end` call (a bank whose spare is not back yet).
struct Holding(Arc<AtomicUsize>);

impl<B: PacketBuf> Tap<B> for Holding {
    fn name(&self) -> &'static str {
        "holding"
    }
    fn on_burst(&mut self, _port: PortId, _pkts: &mut [B], _cx: &Context) {}
    fn end(&mut self) -> bool {
        self.0.fetch_add(1, Ordering::SeqCst) >= 2
    }
}

#[test]
fn held_workers_hand_over_then_send_what_is_injected_until_released() {
    let ports = ["n3", "n6"]
        .iter()
        .map(|n| MemPort {
            name: n.to_string(),
            live: true,
            ..Default::default()
        })
        .collect();
    let mut be = MemBackend::new(ports, 2);
    let log = be.tx_log(1);
    let calls: Vec<Arc<AtomicUsize>> = (0..2).map(|_| Arc::default()).collect();
    let cfg = mem_config(2, &be);
    let c = calls.clone();
    let run = runtime::start_held(
        &mut be,
        &move |w: usize, _r: &mut Reasons| {
            Pipeline::<OwnedBuf>::new(vec![Box::new(ToControl)])
                .with_tap(1, Box::new(Holding(c[w].clone())))
        },
        &cfg,
    )
    .unwrap();
    assert!(run.holds_end());
    assert!(!run.all_ended());
    run.request_stop();
    wait_until("every worker at its end", || run.all_ended());
    // Each tap was asked until it had handed everything over.
    for c in &calls {
        assert_eq!(c.load(Ordering::SeqCst), 3);
    }
    // Held: still there, still sending what is injected.
    std::thread::sleep(Duration::from_millis(20));
    assert!(!run.finished(), "held until released");
    let inj = run.injector();
    inj.inject(0, 1, &[0xaa; 60]).unwrap();
    inj.inject(1, 1, &[0xbb; 60]).unwrap();
    wait_until("both injected frames sent", || {
        log.lock().unwrap().len() == 2
    });
    run.release_end();
    wait_until("workers returned", || run.finished());
    let total = run.join();
    assert_eq!(total.injected, 2);
}

#[test]
fn unheld_workers_return_at_once() {
    let mut be = MemBackend::new(
        vec![MemPort {
            name: "p".into(),
            live: true,
            ..Default::default()
        }],
        1,
    );
    let cfg = mem_config(1, &be);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let run = runtime::start(
        &mut be,
        &move |_w: usize, _r: &mut Reasons| {
            Pipeline::<OwnedBuf>::new(vec![Box::new(ToControl)])
                .with_tap(0, Box::new(Holding(c.clone())))
        },
        &cfg,
    )
    .unwrap();
    assert!(!run.holds_end());
    run.request_stop();
    wait_until("worker returned", || run.finished());
    run.join();
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no end gate, no hand-over");
}
