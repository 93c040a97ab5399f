//! `pg-upf --stage dir,size,sessions`: the `Upf` stage alone in this process, without DPDK or
//! the feed: the forwarding cases' compiled tables and frames, 32-packet batches of owned
//! buffers cycling over every session (the whole table is the working set), refilled outside
//! the timed region (from the feed's frames, `--feed`: patched by default, `feed.rs`).
//! Prints ns per packet of the stage's `process` (clock read around each batch) and the batch
//! count, and is the driver for instruction profiles:
//!
//! ```text
//! valgrind --tool=callgrind \
//!   --toggle-collect='<peregrine_dataplane::upf::stage::Upf as peregrine_dataplane::runtime::stage::Stage<B>>::process' \
//!   target/release/pg-upf --stage ul,64,10000 --batches 20000
//! ```
//!
//! Instructions per packet = collected Ir / (batches x 32).
//!
//! `--stage ul+fridge,64,10000` adds the fridge stage after the UPF as `--fridge` and the
//! daemon place it (`fridge_spec`); collect on `<FridgeStage as Stage<B>>::process` as well
//! to count both stages.
//!
//! `--stage ul+kestrel,64,10000` hands each forwarded batch to a Kestrel tap on the tx port
//! (the paper's layout, 1 s windows, no control side, as `--kestrel-compare` runs it), timed
//! apart and printed as the tap's ns per packet. `on_burst` is inlined into its caller, so
//! the call goes through [`tap_burst`], a function of its own (one call per batch); collect
//! on it for the tap's instructions (sample building and sketch update):
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='pg_upf::stage::tap_burst' \
//!   target/release/pg-upf --stage ul+kestrel,64,10000 --batches 20000
//! ```
//!
//! or, without `--toggle-collect`, read `tap_burst`'s inclusive count.
//!
//! `--stage ul+tapnull,64,10000` and `--stage ul+cms,64,10000` put a diagnostic tap in its
//! place (`tapdiag`: the tap's sample building alone, and the same with a plain 3-row
//! Count-Min update), collected on `pg_upf::tapdiag::diag_burst`.
//!
//! `PG_UPF_STAGE_SPLIT=1` times each stage on its own (a clock read after each stage: each
//! figure includes one read per batch, about 0.6 ns a packet here, and the total grows by as
//! many) and prints `stages: A + B ns/packet` after the total: the fridge's time beside the
//! UPF's in the same run (perf/results/fridge-bench.md, round 11).
//!
//! `--alternate-rx` gives the batches the rx ports 0 and 1 in turn, as the forwarding modes
//! receive them (two looped ports polled in turn), instead of the direction's port for every
//! batch: a stage that keeps per-rx-port state pays for the switches there (the fridge's
//! direction table did, before round 8: perf/results/fridge-bench.md).

use super::feed::{write_next, FeedKind, Fill, Frames, WithFill};
use super::tapdiag::{diag_burst, Diag, DiagTap};
use super::{compiled, frames, fridge_spec, parse_case, upf_config, Dir, PORT_MACS};
use peregrine_dataplane::buffer::OwnedBuf;
use peregrine_dataplane::io::PortId;
use peregrine_dataplane::runtime::{
    Action, Batch, Context, Disposition, Pipeline, Publisher, Reasons, Stage, Tap,
};
use peregrine_dataplane::telemetry::fridge::stage::{FridgeStage, WorkerPub};
use peregrine_dataplane::telemetry::kestrel::{
    tap_pair, EdgeTable, KestrelTap, Layout as KestrelLayout,
};
use peregrine_dataplane::upf::{Upf, UpfStats};
use peregrine_perf::harness::fail;
use peregrine_testkit::upf as upf_support;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BATCH: usize = 32;

pub fn stage_mode(case: &str, batches: usize, alternate_rx: bool, feed: FeedKind) {
    let (dir, size, n) = parse_case(case);
    let Some(dir) = dir else {
        fail("--stage wants ul,SIZE,SESSIONS or dl,SIZE,SESSIONS")
    };
    let fr = Frames::new(frames(dir, size, n), feed);
    let count = fr.count();
    let (tables, slots) = compiled(n);
    let stats = Arc::new(UpfStats::new(slots));
    let routes = peregrine_dataplane::runtime::Publisher::new(upf_support::routes());
    let mut reasons = Reasons::new();
    let upf = Upf::new(
        tables.reader(),
        routes.reader(),
        PORT_MACS.to_vec(),
        upf_config(slots),
        stats,
        &mut reasons,
    );
    let mut stages: Vec<Box<dyn Stage<OwnedBuf>>> = vec![Box::new(upf)];
    if case
        .split(',')
        .next()
        .is_some_and(|d| d.ends_with("+fridge"))
    {
        let spec = fridge_spec();
        let publ = Arc::new(WorkerPub::new(&spec));
        stages.push(Box::new(
            FridgeStage::new(&spec, 0, publ).expect("valid spec"),
        ));
    }
    // The tap's control ends are kept but not polled, as in `--kestrel-compare`.
    let edge_table = Publisher::new(EdgeTable::default());
    let (mut tap, _ends) = tap_pair(
        0,
        &KestrelLayout::paper(),
        1_000_000_000,
        edge_table.reader(),
        None,
    );
    let kestrel = case
        .split(',')
        .next()
        .is_some_and(|d| d.ends_with("+kestrel"));
    // `+tapnull` / `+cms`: the diagnostic taps of `tapdiag` in the tap's place.
    let mut diag = Diag::from_case(case).map(DiagTap::new);
    let tx_port = if dir == Dir::Ul { 1 } else { 0 };
    let mut tap_spent = Duration::ZERO;
    // `PG_UPF_STAGE_SPLIT=1`: each stage timed on its own (a clock read between stages),
    // printed after the total; the stages run as `Pipeline::run` runs them, in order.
    let split = match std::env::var_os("PG_UPF_STAGE_SPLIT") {
        None => false,
        Some(v) if v == "0" || v == "1" => v == "1",
        Some(v) => {
            eprintln!("pg-upf: PG_UPF_STAGE_SPLIT={v:?}: 0 or 1");
            std::process::exit(2)
        }
    };
    let mut each = vec![Duration::ZERO; stages.len()];
    let mut pipe: Pipeline<OwnedBuf> =
        Pipeline::new(if split { vec![] } else { stages.split_off(0) });
    let mut batch: Batch<OwnedBuf> = Batch::new();
    let rx_port: PortId = if dir == Dir::Ul { 0 } else { 1 };
    let mut bufs: Vec<OwnedBuf> = (0..BATCH)
        .map(|_| OwnedBuf::with_capacity(128, 2048))
        .collect();
    let mut next = 0usize;
    let (mut spent, mut sent, mut pkts) = (Duration::ZERO, 0u64, 0u64);
    for i in 0..batches {
        // 1 ms of virtual time per batch (the meters' MBR is far above the offered rate).
        let cx = Context::fixed((i as u64 + 1) * 1_000_000, 0);
        batch.rx_port = rx_port ^ PortId::from(alternate_rx && i % 2 == 1);
        // As the forwarding modes' feed: addressed to the rx port.
        let mac = alternate_rx.then(|| PORT_MACS[usize::from(batch.rx_port) & 1]);
        fr.with_fill(Refill {
            bufs: &mut bufs,
            batch: &mut batch,
            next: &mut next,
            count,
            mac,
        });
        // As the worker presents a received batch (`Worker::process`): one uniform
        // disposition, not the per-packet ones `push` leaves.
        batch.reset_dispositions();
        let t0 = Instant::now();
        if split {
            let mut t = t0;
            for (s, e) in stages.iter_mut().zip(&mut each) {
                s.process(&mut batch, &cx);
                let t1 = Instant::now();
                *e += t1 - t;
                t = t1;
            }
        } else {
            pipe.run(&mut batch, &cx);
        }
        spent += t0.elapsed();
        for (b, d) in batch.drain() {
            sent += u64::from(matches!(d.action(), Action::Tx(_)));
            pkts += 1;
            bufs.push(b);
        }
        if kestrel {
            let t0 = Instant::now();
            tap_burst(&mut tap, tx_port, &mut bufs, &cx);
            tap_spent += t0.elapsed();
        } else if let Some(d) = &mut diag {
            let t0 = Instant::now();
            diag_burst(d, &bufs, &cx);
            tap_spent += t0.elapsed();
        }
    }
    eprintln!("feed: {}", fr.describe());
    if sent != pkts {
        fail(&format!("{} of {pkts} packets not forwarded", pkts - sent));
    }
    println!(
        "{case}: {:.1} ns/packet over {batches} batches of {BATCH} ({pkts} packets, all forwarded)",
        spent.as_nanos() as f64 / pkts as f64
    );
    if split {
        let ns: Vec<String> = each
            .iter()
            .map(|e| format!("{:.1}", e.as_nanos() as f64 / pkts as f64))
            .collect();
        println!("stages: {} ns/packet", ns.join(" + "));
    }
    if kestrel {
        println!(
            "kestrel tap: {:.1} ns/packet",
            tap_spent.as_nanos() as f64 / pkts as f64
        );
    }
    if let Some(d) = &diag {
        println!(
            "{:?} tap: {:.1} ns/packet ({} packets counted)",
            d.diag(),
            tap_spent.as_nanos() as f64 / pkts as f64,
            d.counted()
        );
    }
}

/// The Kestrel tap's `on_burst`, kept out of line so an instruction profile can name it
/// (see the module doc).
#[inline(never)]
fn tap_burst(tap: &mut KestrelTap, port: PortId, bufs: &mut [OwnedBuf], cx: &Context) {
    tap.on_burst(port, bufs, cx);
}

/// One batch's refill from the feed's frames, with the feed's writer as a type.
struct Refill<'a> {
    bufs: &'a mut Vec<OwnedBuf>,
    batch: &'a mut Batch<OwnedBuf>,
    next: &'a mut usize,
    count: usize,
    mac: Option<peregrine_wire::ethernet::Address>,
}

impl WithFill for Refill<'_> {
    fn run<F: Fill>(self, f: &F) {
        let mac = self.mac.as_ref().map(|m| &m.0);
        for mut b in self.bufs.drain(..) {
            write_next(f, self.next, self.count, &mut b, mac, OwnedBuf::set_data)
                .expect("frame fits");
            let _ = self.batch.push(b, Disposition::CONTINUE);
        }
    }
}
