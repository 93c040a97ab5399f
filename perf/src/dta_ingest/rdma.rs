//! RoCEv2 output modes (`rdma-*`): the same translator stage making each report's RDMA
//! requests in the worker, sent to a `net_null` port (the stand-in for an RDMA NIC's link).

use super::{callgrind, frames, payloads, sizes, Args, RDMA_MODES};
use crate::harness::net_ring::{self, Preloaded};
use crate::harness::stats::{median, pair_ratios};
use peregrine_control::dta::translator_stage::{Loopback, Shared, TranslatorStage};
use peregrine_dataplane::runtime::{self, Pipeline, Reasons, Stage};
use peregrine_dta::{Config, Region, Store, Translator};
use peregrine_testkit::alloc::CountingAlloc;
use peregrine_wire::dta::{self, FrameAddrs, Repr, Variant};
use peregrine_wire::ethernet::Address;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

/// Where the RDMA requests go: the NIC's addresses behind the `net_null` port, RoCEv2's UDP
/// port (the same in the measured loop and in the callgrind child).
fn rdma_addrs() -> FrameAddrs {
    FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 1]),
        eth_dst: Address([2, 0, 0, 0, 0, 0x99]),
        ip_src: Ipv4Addr::new(10, 0, 0, 1),
        ip_dst: Ipv4Addr::new(10, 0, 0, 99),
        src_port: 49152,
        dst_port: peregrine_wire::roce::UDP_PORT,
    }
}

/// One RoCEv2-mode measurement: (RDMA frames/s, allocations, reports/s).
pub fn rdma(mode: &str, a: &Args, alloc: &CountingAlloc) -> (f64, u64, f64) {
    use peregrine_control::dta::translator_stage::RdmaOut;
    use peregrine_dta::rdma::{Qp, Target};
    let prim = mode.trim_start_matches("rdma-").to_string();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let s = sizes(&prim);
    let region = Arc::new(Region::create(dir.path().join("r"), s).expect("region"));
    let layout = *region.layout();
    let mut pre = Preloaded::inject(
        net_ring::backend_with(512, 1, &[("nic", "net_null0")]),
        &frames(&prim, 2 * a.fwd.inject, &a.loopback()),
        a.fwd.inject,
    );
    let shared = Arc::new(Shared::new(1));
    let addrs = rdma_addrs();
    let run = runtime::start(
        &mut pre,
        &|w: usize, r: &mut Reasons| {
            let t = Translator::new(Store::new(region.clone()), Config::default());
            let qp = Qp::new(
                Target {
                    qp: 0x42,
                    local_qp: 0x100,
                    rkey: 7,
                    base_va: 0x7f00_0000_0000,
                },
                layout,
                addrs,
                0,
                Config::default().pc_cache_slots,
            );
            let out = RdmaOut::new(qp, 2, vec![0x100].into(), r);
            let stage: Box<dyn Stage<_>> = Box::new(
                TranslatorStage::new(t, Variant::Tracked, None, 1, w, shared.clone(), r)
                    .with_loopback(a.loopback())
                    .with_rdma(out),
            );
            Pipeline::new(vec![stage])
        },
        &net_ring::one_worker(a.fwd.core, a.fwd.burst, false),
    )
    .expect("start worker");
    std::thread::sleep(Duration::from_secs(1));
    let sent = || shared.totals_rdma().3.sent;
    let (s0, w) = (sent(), net_ring::Window::open(&pre, alloc));
    std::thread::sleep(Duration::from_secs_f64(a.seconds));
    let (s1, secs) = (sent(), w.elapsed().as_secs_f64());
    let (rps, allocs) = w.close(&pre, alloc);
    run.request_stop();
    run.join();
    let (_, _, _, r) = shared.totals_rdma();
    assert_eq!(r.no_buffer, 0, "every report's frames found buffers");
    ((s1 - s0) as f64 / secs, allocs, rps)
}

/// The RoCEv2 modes' I/O-free part for callgrind: parse, check, and the queue pair making
/// the requests (each copied out, as into an mbuf), as the stage does per report.
pub fn count_child(prim: &str, count: u64, lb: &Loopback) {
    use peregrine_dta::rdma::{check, Qp, Target};
    let mut payloads = payloads(prim, 64, lb);
    let layout = peregrine_dta::Layout::new(sizes(prim)).unwrap();
    let addrs = rdma_addrs();
    let t = Target {
        qp: 0x42,
        local_qp: 0x100,
        rkey: 7,
        base_va: 0x7f00_0000_0000,
    };
    let mut qp = Qp::new(t, layout, addrs, 0, Config::default().pc_cache_slots);
    let mut out = [0u8; peregrine_dta::rdma::MAX_FRAME];
    let mut done = 0u64;
    while done < count {
        for p in payloads.iter_mut().take((count - done) as usize) {
            // As the stage: the one-word fast decode, else the full parse; one check.
            let prim = dta::parse_one_word(&p[..], Variant::Tracked)
                .map(|(prim, _)| prim)
                .unwrap_or_else(|| {
                    dta::Packet::new_checked(&p[..], Variant::Tracked)
                        .and_then(|x| Repr::parse(&x))
                        .expect("valid report")
                        .primitive
                });
            if check(&layout, &prim).is_ok() {
                let _ = qp.handle_checked(&prim, |f| {
                    out[..f.len()].copy_from_slice(f);
                    std::hint::black_box(&out);
                });
            }
            lb.advance(p);
            done += 1;
        }
    }
}

/// RoCEv2 rows: mode, RDMA frames/s and reports/s per round.
pub type RdmaRow = (String, Vec<f64>, Vec<f64>);

pub fn rdma_rows() -> Vec<RdmaRow> {
    RDMA_MODES
        .iter()
        .map(|m| (m.to_string(), Vec::new(), Vec::new()))
        .collect()
}

/// The RoCEv2 table (markdown) and its JSON rows.
pub fn rdma_table(
    rows: &[RdmaRow],
    tpmd: &[f64],
    cg: bool,
    keys: u32,
) -> (String, Vec<serde_json::Value>) {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## RoCEv2 output, made in the worker\n\n\
         Reports as above; each becomes its RDMA requests in the worker (spare buffers from \
         its mbuf pool) sent to a `net_null` port, the report looping back. Same core, same \
         session, alternating with testpmd.\n\n\
         | mode | RDMA frames/s (M) | reports/s (M) | frames per report | frames/s / testpmd pps (median of rounds) | instr, D1 miss, LL miss per report (callgrind: parse, check, requests) |\n\
         |---|---|---|---|---|---|"
    );
    let mut json = Vec::new();
    for (m, f, r) in rows {
        let (fm, rm) = (median(f), median(r));
        let ratio = median(&pair_ratios(f, tpmd));
        let c = cg.then(|| callgrind(m, keys)).flatten();
        let _ = writeln!(
            md,
            "| {m} | {:.2} | {:.2} | {:.3} | {:.2} | {} |",
            fm / 1e6,
            rm / 1e6,
            fm / rm.max(1.0),
            ratio,
            c.map(|v| format!("{:.0}, {:.2}, {:.2}", v[0], v[1], v[2]))
                .unwrap_or_else(|| "-".into())
        );
        json.push(serde_json::json!({
            "mode": m, "rdma_frames_per_s": f, "reports_per_s": r,
            "frames_median": fm, "reports_median": rm, "frames_vs_testpmd_median_of_pairs": ratio,
            "callgrind_per_report_ir_d1miss_llmiss": c,
        }));
    }
    (md, json)
}
