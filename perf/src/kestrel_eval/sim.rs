//! The in-process driver: a [`Plan`]'s packets, as uplink G-PDUs, through the real UPF
//! stage (PDRs per (TEID, QFI), a TrTCM QER on the gaming QFI), the egress scheduler of the
//! N6 port (8 queues, SP + DRR, a shaper so queues build) and the Kestrel tap (sketches,
//! 3GPP-PM counters and Delta-SMP postcards), in virtual time: the clock is the packets'
//! send times, passed in; nothing reads the wall clock, so a run repeats bit for bit.

use super::scenario::{
    advance, Plan, BACKHAUL_TEID0, BACKHAUL_TEIDS, PORT_BPS, QFI_BACKHAUL, QFI_GAMING, S, TEID0,
    UES, US,
};
use peregrine_control::kestrel::binning::{
    Action as DriftAction, Drift, DriftCounts, DriftRule, Strategy,
};
use peregrine_dataplane::buffer::{OwnedBuf, PacketBuf};
use peregrine_dataplane::qos::{ColourMode, Scheduler, SchedulerConfig, ShaperConfig, TrTcmConfig};
use peregrine_dataplane::runtime::{Action, Context, Disposition, Publisher, Tap};
use peregrine_dataplane::telemetry::kestrel::{
    tap_pair, Aggregator, Deltas, EdgeSet, EdgeTable, Layout, Postcard, Window, BINS, DIRS,
    FINE_BINS, MAX_QIDS,
};
use peregrine_dataplane::upf::UpfConfig;
use peregrine_testkit::frames::udp4;
use peregrine_testkit::rng::seeded;
use peregrine_testkit::upf::{cfg, qer, server_v4, ue_v4, ul, ul_frame, Key, Rig, TableBuilder};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// How a run is instrumented.
#[derive(Debug, Clone)]
pub struct RunCfg {
    pub window_ns: u64,
    pub layout: Layout,
    pub edges: EdgeSet,
    pub deltas: Deltas,
    /// Simulation step: packets due within a step form one rx batch.
    pub tick_ns: u64,
    /// Drift re-binning during the run (the collector's rule, Kestrel section IV-C, with
    /// the daemon's `[kestrel]` drift keys): per QID, target occupancy, re-calibrated after
    /// `m` consecutive tested windows significantly above rho.
    pub drift: Option<DriftRule>,
}

/// The drift controllers of a run and the edge table they publish to the tap.
struct Rebinner {
    drift: Vec<Drift>,
    table: Publisher<EdgeTable>,
}

impl Rebinner {
    /// One closed window: every QID's occupancy and fine histograms to its controller; a
    /// calibration or new edges are published with a new version, from two windows ahead
    /// (as the collector does), counted and logged.
    fn window(&mut self, w: &Window, st: &mut RunStats) {
        if w.late {
            return;
        }
        for q in 0..self.drift.len() {
            let (mut packets, mut diag) = (0u64, (0u64, 0u64));
            let mut lat = vec![0u64; FINE_BINS];
            let mut iat = vec![0u64; FINE_BINS];
            for d in 0..DIRS {
                let r = w.row_sum(d, q, 0);
                packets += r.packets;
                diag.0 += r.lat[BINS - 1];
                diag.1 += r.iat[0];
                let (fl, fi) = w.fine_of(d, q);
                lat.iter_mut().zip(fl).for_each(|(a, b)| *a += b);
                iat.iter_mut().zip(fi).for_each(|(a, b)| *a += b);
            }
            let Some(action) = self.drift[q].window(q, packets, diag, (&lat, &iat)) else {
                continue;
            };
            let cur = *self.table.current();
            let mut next = cur.current;
            next.version += 1;
            match action {
                DriftAction::Calibrate { qid, reason } => {
                    next.calibrating[qid] = true;
                    st.calibrations += 1;
                    eprintln!(
                        "kestrel eval: window {}: QID {qid} re-calibrating ({reason})",
                        w.seq
                    );
                }
                DriftAction::Rebin { qid, edges } => {
                    next.qids[qid] = edges;
                    next.calibrating[qid] = false;
                    st.rebinnings += 1;
                    st.first_rebin[qid].get_or_insert(w.seq);
                    eprintln!(
                        "kestrel eval: window {}: QID {qid} re-binned, version {}, lat {:?}",
                        w.seq, next.version, edges.lat
                    );
                }
            }
            self.table.publish(cur.next(next, w.seq + 2));
            self.table.reclaim();
        }
    }
}

/// What a finished window hands the collector.
#[allow(missing_debug_implementations)]
pub struct WindowOut<'a> {
    pub window: &'a Window,
    /// This window's postcards (dequeue time inside the window).
    pub postcards: &'a [Postcard],
    /// The (TEID, QFI) keys of the UEs (not the backhaul) that sent at least one packet
    /// in the window (arrival time), sorted: the ground truth of the per-key unit.
    pub active: &'a [(u32, u8)],
}

/// Counters of a run.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct RunStats {
    pub offered: u64,
    pub forwarded: u64,
    pub upf_drops: u64,
    pub queue_drops: u64,
    pub offered_bytes: u64,
    pub postcards: u64,
    pub postcards_dropped: u64,
    /// Drift: calibration periods started and re-binnings pushed.
    pub calibrations: u64,
    pub rebinnings: u64,
    /// Drift: what the rule saw of each QID's steady windows.
    pub drift: [DriftCounts; MAX_QIDS],
    /// Drift: the window in which each QID was first re-binned.
    pub first_rebin: [Option<u64>; MAX_QIDS],
}

/// The run's rule tables: its "PFCP sessions" (a PDR per (UE TEID, QFI), the backhaul TEIDs).
pub fn tables(plan: &Plan) -> peregrine_dataplane::upf::UpfTables {
    let mut tb = TableBuilder::default();
    // The gaming QER: GBR 6 Mbit/s, MBR 9 Mbit/s (scaled), bursts of two or three frames.
    let gbr = 6e6 / 8.0 * plan.scale;
    let mbr = 9e6 / 8.0 * plan.scale;
    let meter = TrTcmConfig {
        cir: gbr as u64,
        cbs: 36_000,
        pir: mbr as u64,
        pbs: 54_000,
        mode: ColourMode::Blind,
    };
    for ue in 0..UES {
        let mut ps = Vec::new();
        for qfi in [1u8, QFI_GAMING, 6, 8, 9] {
            let mut p = ul(Some(qfi));
            if qfi == QFI_GAMING {
                p.qers = vec![qer(Some(qfi), true, Some((meter, ue + 1, 1)))];
            } else {
                p.qers = vec![qer(Some(qfi), true, None)];
            }
            ps.push(p);
        }
        tb.add(Key::Teid(TEID0 + ue), &ps);
    }
    for b in 0..BACKHAUL_TEIDS {
        let mut p = ul(Some(QFI_BACKHAUL));
        p.qers = vec![qer(Some(QFI_BACKHAUL), true, None)];
        tb.add(Key::Teid(BACKHAUL_TEID0 + b), &[p]);
    }
    tb.build()
}

/// One G-PDU frame per (TEID, QFI, size), made once.
fn frame(teid: u32, qfi: u8, size: u32) -> Vec<u8> {
    let ue = ue_v4(teid & 0xfff);
    let inner = udp4(ue, server_v4(), 5000 + u16::from(qfi), size as usize - 28);
    ul_frame(false, teid, Some(qfi), &inner)
}

/// Run `plan` and call `on_window` for every finished window, in order.
pub fn run(plan: &Plan, rc: &RunCfg, seed: u64, mut on_window: impl FnMut(WindowOut)) -> RunStats {
    let mut rig = Rig::new(
        tables(plan),
        UpfConfig {
            max_meter_slots: 256,
            ..cfg()
        },
    );
    let port_bps = PORT_BPS * plan.scale;
    let sc = SchedulerConfig {
        shaper: Some(ShaperConfig {
            rate_bytes_per_s: (port_bps / 8.0) as u64,
            burst_bytes: 3_000,
        }),
        ..SchedulerConfig::default()
    };
    let mut sched: Scheduler<OwnedBuf> = Scheduler::new(&sc, 0).expect("valid scheduler");
    let table = Publisher::new(EdgeTable {
        from_seq: 0,
        current: rc.edges,
        previous: rc.edges,
    });
    let (mut tap, ends) = tap_pair(0, &rc.layout, rc.window_ns, table.reader(), Some(rc.deltas));
    let mut rebin = rc.drift.map(|d| Rebinner {
        drift: (0..rc.layout.qids)
            .map(|_| Drift::with_rule(Strategy::Target, d).expect("a checked drift rule"))
            .collect(),
        table,
    });
    let mut agg = Aggregator::new(rc.layout.clone(), rc.window_ns);
    agg.add_source(ends);

    let mut flows = plan.flows.clone();
    let frames: Vec<Vec<u8>> = flows.iter().map(|f| frame(f.teid, f.qfi, f.size)).collect();
    let mut r = seeded(seed ^ 0x5349_4d00);
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = flows
        .iter()
        .enumerate()
        .map(|(i, f)| Reverse((f.next_ns, i)))
        .collect();
    let mut st = RunStats::default();
    let mut rx: Vec<OwnedBuf> = Vec::with_capacity(64);
    let mut out: Vec<OwnedBuf> = Vec::with_capacity(256);
    let mut pcs: Vec<Postcard> = Vec::new();
    let mut pending_pcs: Vec<Postcard> = Vec::new();
    let mut t = 0u64;
    let mut seq = 0u64;
    // Active keys per window: per flow, the last window it was marked in.
    let mut marked: Vec<u64> = vec![u64::MAX; flows.len()];
    let mut active: BTreeMap<u64, Vec<(u32, u8)>> = BTreeMap::new();
    let flush = |ws: Vec<Window>,
                 pcs: &mut Vec<Postcard>,
                 active: &mut BTreeMap<u64, Vec<(u32, u8)>>,
                 rebin: &mut Option<Rebinner>,
                 st: &mut RunStats,
                 on_window: &mut dyn FnMut(WindowOut)| {
        for w in ws {
            if let Some(r) = rebin.as_mut() {
                r.window(&w, st);
            }
            let end = (w.seq + 1) * rc.window_ns;
            let (mine, rest): (Vec<Postcard>, Vec<Postcard>) =
                pcs.drain(..).partition(|p| p.t_ns < end);
            *pcs = rest;
            let mut keys = active.remove(&w.seq).unwrap_or_default();
            keys.sort_unstable();
            keys.dedup();
            on_window(WindowOut {
                window: &w,
                postcards: &mine,
                active: &keys,
            });
        }
    };
    while t < plan.duration_ns {
        let t_end = t + rc.tick_ns;
        // Packets due in [t, t_end) form one batch, received at t_end.
        while let Some(&Reverse((due, i))) = heap.peek() {
            if due >= t_end {
                break;
            }
            heap.pop();
            if due < plan.duration_ns {
                rx.push(OwnedBuf::from_slice(&frames[i]));
                let ws = due / rc.window_ns;
                if marked[i] != ws && flows[i].teid < BACKHAUL_TEID0 {
                    marked[i] = ws;
                    active
                        .entry(ws)
                        .or_default()
                        .push((flows[i].teid, flows[i].qfi));
                }
                st.offered += 1;
                st.offered_bytes += u64::from(flows[i].size);
            }
            if advance(&mut flows[i], &mut r, plan.scale) {
                heap.push(Reverse((flows[i].next_ns, i)));
            }
            if rx.len() == 32 {
                process(&mut rig, &mut rx, &mut sched, t_end, &mut st);
            }
        }
        process(&mut rig, &mut rx, &mut sched, t_end, &mut st);
        // Dequeue what the shaper lets out by t_end, as one burst to the tap.
        sched.dequeue_burst(t_end, 256, |d| out.push(d.pkt));
        if !out.is_empty() {
            st.forwarded += out.len() as u64;
            tap.on_burst(1, &mut out, &Context::fixed(t_end, 0));
            out.clear();
        }
        let (_, dropped, _) = agg.drain_postcards(&mut pcs);
        st.postcards_dropped = dropped;
        st.postcards += pcs.len() as u64;
        pending_pcs.append(&mut pcs);
        if t_end / rc.window_ns > seq {
            seq = t_end / rc.window_ns;
            flush(
                agg.poll(t_end),
                &mut pending_pcs,
                &mut active,
                &mut rebin,
                &mut st,
                &mut on_window,
            );
        }
        // Skip empty time: nothing queued and nothing due before the next tick.
        t = t_end;
        if sched.is_empty() {
            if let Some(&Reverse((due, _))) = heap.peek() {
                let next = due / rc.tick_ns * rc.tick_ns;
                if next > t {
                    // Do not jump over a window edge without polling.
                    t = next.min((t / rc.window_ns + 1) * rc.window_ns);
                }
            }
        }
    }
    // Drain the queues for one more window, then stop: the tap hands its last bank over.
    let stop = plan.duration_ns + S;
    while t < stop && !sched.is_empty() {
        t += rc.tick_ns;
        sched.dequeue_burst(t, 256, |d| out.push(d.pkt));
        if !out.is_empty() {
            st.forwarded += out.len() as u64;
            tap.on_burst(1, &mut out, &Context::fixed(t, 0));
            out.clear();
        }
    }
    drop(tap);
    agg.drain_postcards(&mut pcs);
    st.postcards += pcs.len() as u64;
    pending_pcs.append(&mut pcs);
    flush(
        agg.flush(stop + 2 * S),
        &mut pending_pcs,
        &mut active,
        &mut rebin,
        &mut st,
        &mut on_window,
    );
    let _ = US;
    if let Some(r) = &rebin {
        for (s, d) in st.drift.iter_mut().zip(&r.drift) {
            *s = d.counts;
        }
    }
    st
}

/// The UPF on `rx` at `now`; forwarded packets into the scheduler.
fn process(
    rig: &mut Rig,
    rx: &mut Vec<OwnedBuf>,
    sched: &mut Scheduler<OwnedBuf>,
    now: u64,
    st: &mut RunStats,
) {
    if rx.is_empty() {
        return;
    }
    rig.batch.rx_port = 0;
    for b in rx.drain(..) {
        let _ = rig.batch.push(b, Disposition::CONTINUE);
    }
    for _ in 0..rig.batch.spares_missing() {
        let _ = rig.batch.give_spare(OwnedBuf::new());
    }
    rig.pipe.run(&mut rig.batch, &Context::fixed(now, 0));
    for (b, d) in rig.batch.drain() {
        match d.action() {
            Action::Tx(_) => {
                let qid = b.pkt_meta().qid;
                if sched.enqueue(b, qid, now).is_err() {
                    st.queue_drops += 1;
                }
            }
            _ => st.upf_drops += 1,
        }
    }
}
