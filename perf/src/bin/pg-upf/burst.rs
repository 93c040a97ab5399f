//! `pg-upf --n4-burst N`: what one N4 burst costs the N4 thread as the session table grows,
//! in-process (no UDP, no worker thread), so that what grows with the table can be seen
//! phase by phase and counted under callgrind.
//!
//! The same sessions, node and compiler as `--n4` (`est_request`, 4 slots per session, the
//! static sessions first). The table is filled in large bursts up to each checkpoint
//! (`N / 10, 2 N / 10, ..., N`); at each checkpoint `--n4-burst-count` bursts of 128
//! establishments are run as the N4 loop runs them (node, compiler staging, build, publish,
//! the simulated worker's pick-up, reclaim of the retired snapshot), and each phase is timed.
//! Under callgrind, `--toggle-collect='*burst::measured*'` counts only those bursts.

use super::n4::est_request;
use super::*;
use peregrine_control::n4::SessionRules;
use peregrine_control::upf::DaemonRules;
use peregrine_n4::usage::{Usage, UsageSource};
use peregrine_n4::{Event, Node, Output};

/// Establishments per measured burst (about what the UDP run's bursts carry).
const BURST: usize = 128;

struct Env<'a>(&'a mut DaemonRules);

impl UsageSource for Env<'_> {
    fn usage(&mut self, up_seid: u64, urr_id: u32) -> Option<Usage> {
        self.0.usage(up_seid, urr_id)
    }
    fn check_rules(&mut self, s: &peregrine_n4::Session) -> Result<(), peregrine_n4::Reject> {
        self.0.check(s)
    }
}

/// Nanoseconds per phase, summed over the measured bursts.
#[derive(Debug, Default, Clone, Copy)]
struct Phases {
    node: u64,
    stage: u64,
    publish: u64,
    pickup_reclaim: u64,
}

struct Probe {
    node: Node,
    rules: DaemonRules,
    reader: peregrine_dataplane::runtime::Reader<peregrine_dataplane::upf::UpfTables>,
    peer: std::net::SocketAddr,
    created: Vec<u64>,
}

impl Probe {
    /// Handle requests `reqs` as one burst; returns the phase times.
    fn burst(&mut self, reqs: &[Vec<u8>]) -> Phases {
        let t0 = Instant::now();
        self.created.clear();
        for r in reqs {
            let out = self
                .node
                .handle_with(1, self.peer, r, &mut Env(&mut self.rules));
            for o in out {
                if let Output::Event(Event::SessionCreated { seid }) = o {
                    self.created.push(seid);
                }
            }
        }
        let t1 = Instant::now();
        for &seid in &self.created {
            let s = self.node.session(seid).expect("created session");
            self.rules.upsert(&s).expect("compiles");
        }
        let t2 = Instant::now();
        // The N4 thread's publish: build, swap, reclaim what no reader holds.
        let g = self.rules.publish();
        let t3 = Instant::now();
        // The worker's pick-up (drops its reference to the previous snapshot), then the
        // next publish's reclaim frees it: here at once, to time it apart.
        let _ = self.reader.get();
        self.rules.publisher.reclaim();
        let t4 = Instant::now();
        assert!(self.rules.seen(g).is_some());
        let ns = |a: Instant, b: Instant| (b - a).as_nanos() as u64;
        Phases {
            node: ns(t0, t1),
            stage: ns(t1, t2),
            publish: ns(t2, t3),
            pickup_reclaim: ns(t3, t4),
        }
    }
}

/// The measured bursts (a symbol of its own for `--toggle-collect`).
#[inline(never)]
fn measured(p: &mut Probe, reqs: &[Vec<u8>]) -> Phases {
    let mut sum = Phases::default();
    for b in reqs.chunks(BURST) {
        let ph = p.burst(b);
        sum.node += ph.node;
        sum.stage += ph.stage;
        sum.publish += ph.publish;
        sum.pickup_reclaim += ph.pickup_reclaim;
    }
    sum
}

pub(crate) fn burst_mode(a: &Args, n: usize) {
    let statics = a.sessions.first().copied().unwrap_or(10_000);
    let count = a.n4_burst_count;
    let measured_per_point = count * BURST;
    let total = n + 10 * measured_per_point;
    let slots = u32::try_from(4 * (statics + n)).expect("slots");
    let mut compiler = n4_compiler(
        a,
        compiler(statics, slots, peregrine_control::upf::STATIC_SEID_BIT),
    );
    let publisher = Arc::new(Publisher::new(compiler.build()));
    let reader = publisher.reader();
    let cfg = super::n4::n4_node(total + 16);
    let peer: std::net::SocketAddr = "127.0.0.1:8805".parse().expect("addr");
    let mut p = Probe {
        node: Node::new(cfg),
        rules: DaemonRules::new(compiler, publisher, vec![]),
        reader,
        peer,
        created: Vec::new(),
    };
    drop(p.node.handle(0, peer, &pfcp_msgs::setup_req(1, 1000)));
    let reqs: Vec<Vec<u8>> = (0..total as u32).map(|k| est_request(k + 2, k)).collect();
    let mut at = 0usize;
    let mut rows = Vec::new();
    println!("sessions  node_us  stage_us  publish_us  pickup_reclaim_us  total_us  (per burst of {BURST})");
    let first = 11 - a.n4_burst_points.clamp(1, 10);
    for point in first..=10usize {
        // Fill up to the checkpoint in bursts of 8,192 (one publish each).
        let upto = point * n / 10 + (point - first) * measured_per_point;
        while at < upto {
            let e = (at + 8192).min(upto);
            p.burst(&reqs[at..e]);
            at = e;
        }
        let sessions = p.node.session_count();
        // For a profiler attached now (`perf record -p`, `callgrind_control -i on`).
        eprintln!("filled {sessions}");
        if a.n4_burst_pause > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(a.n4_burst_pause));
        }
        let e = at + measured_per_point;
        let ph = measured(&mut p, &reqs[at..e]);
        at = e;
        let per = |x: u64| x as f64 / count as f64 / 1e3;
        let row = (
            sessions,
            per(ph.node),
            per(ph.stage),
            per(ph.publish),
            per(ph.pickup_reclaim),
        );
        println!(
            "{:>8}  {:>7.0}  {:>8.0}  {:>10.0}  {:>17.0}  {:>8.0}",
            row.0,
            row.1,
            row.2,
            row.3,
            row.4,
            row.1 + row.2 + row.3 + row.4
        );
        rows.push(serde_json::json!({
            "sessions": row.0, "node_us": row.1, "stage_us": row.2,
            "publish_us": row.3, "pickup_reclaim_us": row.4,
        }));
    }
    let out = serde_json::json!({
        "what": "in-process N4 bursts of 128 establishments at each tenth of the table (--n4-burst)",
        "burst": BURST,
        "bursts_per_point": count,
        "points": rows,
    });
    if let Err(e) = std::fs::write(&a.n4_out, serde_json::to_string_pretty(&out).expect("json")) {
        eprintln!("cannot write {}: {e}", a.n4_out);
    }
}
