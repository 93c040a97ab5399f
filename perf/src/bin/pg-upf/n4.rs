//! `pg-upf --n4 N`: session establishments through the real N4 endpoint under traffic,
//! request round-trip and publish latency, memory per session.

use super::*;

/// The `q` quantile of `v` (nearest rank; sorts `v`), 0 when empty.
fn quantile(v: &mut [u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// Pool of the IPv6 UEs of the load: UE `k` gets `::1` in the `k`-th /64 above it; disjoint
/// from the static sessions' pool (2001:db8:4500::/40 onwards, `params_sessions`).
const UE_POOL_V6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0x80, 0, 0, 0, 0, 0);

/// A Session Establishment Request for UE `k` of the load: UL PDR (F-TEID CHOOSE, the UPF
/// allocates), DL PDR on the UE's own address (IPv4 for even `k`, an IPv6 /64 for odd `k`),
/// N6 and N3 FARs, a QER with MBR and a volume URR (TS 29.244 section 7.5.2).
pub(crate) fn est_request(seq: u32, k: u32) -> Vec<u8> {
    use peregrine_pfcp::ie::{ie_type as t, FTeid, Ie, OuterHeaderRemoval, UeIpAddress};
    // A pool disjoint from the static synthetic sessions (10.45/16 onwards).
    let v4 = std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(10, 128, 0, 0)) + k);
    let ue = |sd: bool| {
        if k.is_multiple_of(2) {
            UeIpAddress {
                sd,
                ipv4: Some(v4),
                ..Default::default()
            }
        } else {
            UeIpAddress {
                sd,
                ipv6: Some(peregrine_rules::static_sessions::ue_v6(UE_POOL_V6, k)),
                ..Default::default()
            }
        }
    };
    let pdi_ul = pfcp_msgs::g(
        t::PDI,
        vec![
            Ie::SourceInterface(0),
            Ie::FTeid(FTeid::Choose {
                v4: true,
                v6: false,
                choose_id: Some(1),
            }),
            Ie::UeIpAddress(ue(false)),
            Ie::Qfi(9),
        ],
    );
    let ul = pfcp_msgs::g(
        t::CREATE_PDR,
        vec![
            Ie::PdrId(1),
            Ie::Precedence(200),
            Ie::Grouped(pdi_ul),
            Ie::OuterHeaderRemoval(OuterHeaderRemoval {
                description: 0,
                ext_header_deletion: None,
            }),
            Ie::FarId(1),
            Ie::UrrId(1),
            Ie::QerId(1),
        ],
    );
    let pdi_dl = pfcp_msgs::g(
        t::PDI,
        vec![Ie::SourceInterface(1), Ie::UeIpAddress(ue(true))],
    );
    let dl = pfcp_msgs::g(
        t::CREATE_PDR,
        vec![
            Ie::PdrId(2),
            Ie::Precedence(100),
            Ie::Grouped(pdi_dl),
            Ie::FarId(2),
            Ie::UrrId(1),
            Ie::QerId(1),
        ],
    );
    let r = peregrine_pfcp::message::SessionEstablishmentRequest {
        create_pdr: vec![ul, dl],
        create_far: vec![pfcp_msgs::far_n6(1), pfcp_msgs::far_n3(2, 0x0300_0000 | k)],
        // A periodic URR (an armed timer per session) with an hour's period, as SMFs use:
        // a 60 s period made the 1M run's first sessions report while the last were being
        // established, and that run then measured 1M Session Report Requests.
        create_urr: vec![pfcp_msgs::urr_with(
            1,
            peregrine_pfcp::ie::reporting_triggers::PERIO,
            vec![Ie::MeasurementPeriod(3600)],
        )],
        ..pfcp_msgs::est(u64::from(k) + 1)
    };
    pfcp_msgs::est_bytes(seq, r)
}

/// (sequence number, cause) of a Session Establishment Response, if `d` is one.
fn est_answer(d: &[u8]) -> Option<(u32, u8)> {
    let m = peregrine_pfcp::Message::parse(d).ok()?;
    match m.body {
        peregrine_pfcp::message::Body::SessionEstablishmentResponse(r) => Some((m.seq, r.cause)),
        _ => None,
    }
}

/// Bytes per session of the N4 node alone, and of the compiler + one published table
/// version alone, for `n` sessions established in-process (no UDP, no traffic).
fn memory_breakdown(a: &Args, n: usize) -> (f64, f64, usize, peregrine_rules::CompilerStats) {
    let cfg = n4_node(n + 16);
    let peer: std::net::SocketAddr = "127.0.0.1:8805".parse().expect("addr");
    let reqs: Vec<Vec<u8>> = (0..n as u32).map(|k| est_request(k + 2, k)).collect();
    let l0 = GLOBAL.live();
    let mut node = peregrine_n4::Node::new(cfg);
    drop(node.handle(0, peer, &pfcp_msgs::setup_req(1, 1000)));
    for r in &reqs {
        drop(node.handle(1, peer, r));
    }
    // Responses are cached for retransmissions for a while (TS 29.244 section 6.4); let the
    // cache expire so only the sessions remain.
    drop(node.poll_timers(3_600_000_000_000));
    let l1 = GLOBAL.live();
    let sessions: Vec<peregrine_n4::Session> = node.sessions().collect();
    let l2 = GLOBAL.live();
    let mut c = n4_compiler(
        a,
        Compiler::new(CompilerConfig {
            local_v4: vec![upf_support::upf_v4()],
            local_v6: vec![],
            max_meter_slots: 4 * n as u32,
            max_urr_slots: 4 * n as u32,
            qos: peregrine_dataplane::qos::QosPolicies::new(
                peregrine_dataplane::qos::QerPolicy::legacy_policing(),
            ),
        }),
    );
    for s in &sessions {
        c.upsert(s).expect("compiles");
    }
    let t = c.build();
    let l3 = GLOBAL.live();
    let st = c.stats();
    drop((t, c, sessions));
    let cached = node.cached_responses();
    drop(node);
    (
        (l1 - l0) as f64 / n as f64,
        (l3 - l2) as f64 / n as f64,
        cached,
        st,
    )
}

/// Session establishment rate, publish latency and memory per session, under traffic.
pub(crate) fn n4_mode(a: &Args, n: usize) {
    let (node_b, compiler_b, cached, cst) = memory_breakdown(a, n);
    let (meter_slots, urr_slots) = (cst.meter_slots_used, cst.urr_slots_used);
    eprintln!("node {node_b:.0} B/session (cached responses left {cached}), compiler + tables {compiler_b:.0} B/session");
    use peregrine_control::n4::{N4Config, N4Endpoint};
    use peregrine_control::upf::DaemonRules;
    use std::net::UdpSocket;
    let statics = a.sessions.first().copied().unwrap_or(10_000);
    let size = a.sizes.first().copied().unwrap_or(64);
    let slots = u32::try_from(4 * (statics + n)).expect("slots");
    // Compiler holding the static sessions the traffic belongs to; as the daemon does,
    // static SEIDs never collide with the ones N4 hands out.
    let mut compiler = n4_compiler(
        a,
        compiler(statics, slots, peregrine_control::upf::STATIC_SEID_BIT),
    );
    let publisher = Arc::new(Publisher::new(compiler.build()));
    let stats = Arc::new(UpfStats::new(slots));
    let routes = Publisher::new(upf_support::routes());
    let ucfg = upf_config(slots);

    // One worker forwarding uplink traffic of the static sessions (as the forwarding test).
    let fr = frames(Dir::Ul, size, statics);
    // At most one of each frame in flight, as many as `--inject` allows.
    let mut pre = Preloaded::inject(child_backend(1), &fr, fr.len().min(a.fwd.inject));
    let fr = Frames::new(fr, a.feed);
    let cfg = net_ring::one_worker(a.fwd.core, a.fwd.burst, false);
    let run = runtime::start(
        &mut pre,
        &|w: usize, r: &mut Reasons| {
            let feed = Feed::new(&fr, w, r);
            Pipeline::new(vec![
                Box::new(feed),
                Box::new(Upf::new(
                    publisher.reader(),
                    routes.reader(),
                    PORT_MACS.to_vec(),
                    ucfg.clone(),
                    stats.clone(),
                    r,
                )),
            ])
        },
        &cfg,
    )
    .expect("start worker");
    std::thread::sleep(Duration::from_millis(500));
    // The generator and the N4 thread (which inherits this affinity) stay off the worker's
    // core, as the daemon's control core would.
    if let Some(c) = (0..2).find(|c| *c != a.fwd.core) {
        // This thread and every other but the worker: EAL's interrupt thread starts on the
        // cores outside its lcore list (`-l 0`), the worker's core.
        if let Err(e) = peregrine_control::pinning::pin_non_workers(&[c]) {
            eprintln!("threads not pinned: {e}");
        }
    }

    let node = n4_node(n + 16);
    let rules = DaemonRules::new(compiler, publisher.clone(), vec![stats.clone()]);
    let ep = N4Endpoint::start(
        N4Config {
            listen: vec!["127.0.0.1:0".parse().expect("addr")],
            node,
            usage_interval: Duration::from_secs(1),
        },
        rules,
    )
    .expect("N4 endpoint");
    let threads = thread_cores();
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    // The SMF's side of a pipelined window needs room for its answers as the N4 socket does
    // for the requests.
    let client_rcvbuf = peregrine_control::n4::grow_rcvbuf(&sock);
    sock.connect(ep.local_addrs()[0]).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let mut buf = vec![0u8; 65536];
    sock.send(&pfcp_msgs::setup_req(1, 1000)).expect("send");
    sock.recv(&mut buf).expect("association setup response");
    // Pre-build the requests so the generator measures the endpoint, not itself.
    let reqs: Vec<Vec<u8>> = (0..n as u32).map(|k| est_request(k + 2, k)).collect();

    let live0 = GLOBAL.live();
    let sched0 = thread_sched("pg-worker-0");
    let (r0, t0) = (pre.rx_packets(), Instant::now());
    let (mut sent, mut ok, mut rejected, mut got) = (0usize, 0usize, 0usize, 0usize);
    let (mut answered, mut retransmits, mut quiet) = (vec![false; n], 0usize, 0u32);
    // Request -> response time as the client sees it, from the first send of each request
    // (with `--window 1`: a lone request, as an SMF waiting for each answer sees it).
    let mut sent_at: Vec<Option<Instant>> = vec![None; n];
    // When the answers reached each tenth of the run: establishments/s per tenth.
    let tenth = n.div_ceil(10).max(1);
    let mut tenth_at: Vec<Instant> = Vec::with_capacity(10);
    let mut rtt_us: Vec<u64> = Vec::with_capacity(n);
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    while got < n {
        while sent < n && sent - got < a.window {
            sent_at[sent] = Some(Instant::now());
            sock.send(&reqs[sent]).expect("send");
            sent += 1;
        }
        match sock.recv(&mut buf) {
            Ok(len) => {
                let Some((seq, cause)) = est_answer(&buf[..len]) else {
                    continue;
                };
                let k = seq.wrapping_sub(2) as usize;
                if k >= n || answered[k] {
                    continue;
                }
                answered[k] = true;
                if let Some(t) = sent_at[k] {
                    rtt_us.push(t.elapsed().as_micros() as u64);
                }
                got += 1;
                if got.is_multiple_of(tenth) || got == n {
                    tenth_at.push(Instant::now());
                }
                quiet = 0;
                if cause == 1 {
                    ok += 1;
                } else {
                    rejected += 1;
                }
            }
            // UDP may lose a request or a response under a full window: retransmit what is
            // unanswered, as an SMF does on T1 expiry (the node answers duplicates from its
            // response cache, TS 29.244 section 6.4).
            Err(_) => {
                quiet += 1;
                if quiet > 10 {
                    fail(&format!("N4 endpoint stopped answering after {got}"));
                }
                for k in (0..sent).filter(|k| !answered[*k]) {
                    sock.send(&reqs[k]).expect("send");
                    retransmits += 1;
                }
            }
        }
    }
    let elapsed = t0.elapsed();
    let (r1, t1) = (pre.rx_packets(), Instant::now());
    let sched1 = thread_sched("pg-worker-0");
    // How long the worker was runnable but not running (another task held its core).
    let worker_sched = match (sched0, sched1) {
        (Some(a), Some(b)) => serde_json::json!({
            "run_s": (b.0 - a.0) as f64 / 1e9,
            "runnable_waiting_s": (b.1 - a.1) as f64 / 1e9,
            "involuntary_switches": b.2 - a.2,
            "from": "/proc/self/task/<pg-worker-0>/schedstat and status, over the load",
        }),
        _ => serde_json::Value::Null,
    };
    // Before the pre-built requests go: they were allocated before `live0` too.
    let live1 = GLOBAL.live();
    drop(reqs);
    let st = ep.status();
    let per_tenth: Vec<f64> = {
        let mut prev = (t0, 0usize);
        tenth_at
            .iter()
            .enumerate()
            .map(|(i, &at)| {
                let upto = ((i + 1) * tenth).min(n);
                let r = (upto - prev.1) as f64 / at.duration_since(prev.0).as_secs_f64();
                prev = (at, upto);
                r
            })
            .collect()
    };
    // The N4 thread idle with every session installed (usage poll and timers running).
    let idle_cpu = n4_thread_cpu(Duration::from_secs(3));
    eprintln!("per tenth: {per_tenth:.0?}; idle N4 thread: {idle_cpu:?} of a core");
    plot_tenths(&a.n4_out, a.n4_before.as_deref(), n, &per_tenth);
    std::thread::sleep(Duration::from_millis(200));
    run.request_stop();
    let names: Vec<&'static str> = run.reasons().names().to_vec();
    let c = run.join();
    let drops = drops_by_reason(&names, &c.drops);

    // Per-worker state the new sessions need: their URR counters and meter slots (the
    // counts the compiler allocated for them).
    let per_worker = {
        let (urr, meters) = (urr_slots, meter_slots);
        let before = GLOBAL.live();
        let mut reasons = Reasons::new();
        let st = Arc::new(UpfStats::new(urr));
        let stage = Upf::new(
            publisher.reader(),
            routes.reader(),
            PORT_MACS.to_vec(),
            UpfConfig {
                max_meter_slots: meters,
                ..UpfConfig::default()
            },
            st,
            &mut reasons,
        );
        let b = GLOBAL.live() - before;
        drop(stage);
        b
    };
    let n4_bytes = live1 - live0;
    let mut result = serde_json::json!({
        "what": "PFCP Session Establishment through the real N4 endpoint (UDP, pipelined) while one worker forwards uplink traffic",
        "sessions_established": ok,
        "rejected": rejected,
        "window": a.window,
        "retransmissions": retransmits,
        "client_rcvbuf_bytes": client_rcvbuf,
        "seconds": elapsed.as_secs_f64(),
        "establishments_per_second": ok as f64 / elapsed.as_secs_f64(),
        "establishments_per_second_per_tenth": per_tenth,
        "tenth_max_over_min": per_tenth.iter().cloned().fold(0.0, f64::max)
            / per_tenth.iter().cloned().fold(f64::MAX, f64::min),
        "ue_families": "IPv4 for even k, IPv6 /64 for odd k",
        "idle_n4_thread_core_fraction": idle_cpu,
        "urr_timers_armed_and_watched": "one periodic URR (3600 s) per session: armed timers, none polled for volume",
        "goal_establishments_per_second": 20000,
        "publishes": st.counts.publishes,
        "window": a.window,
        "request_rtt_us_p50": quantile(&mut rtt_us, 0.5),
        "request_rtt_us_p99": quantile(&mut rtt_us, 0.99),
        "request_rtt_us_max": quantile(&mut rtt_us, 1.0),
        "goal_lone_request_rtt_us": {"p50": 200, "p99": 1000, "with": "--window 1"},
        "publish_latency_us_p50": st.publish_latency_quantile(0.5),
        "publish_latency_us_p99": st.publish_latency_quantile(0.99),
        "publish_latency_us_max": st.publish_latency_quantile(1.0),
        "publish_latency_samples": st.publish_latency_us.len(),
        "goal_publish_latency_us_p99": 1000,
        "traffic": format!("uplink, {size} B inner, {statics} static synthetic sessions, one worker on core {}", a.fwd.core),
        "traffic_mpps_during_load": (r1 - r0) as f64 / (t1 - t0).as_secs_f64() / 1e6,
        "traffic_drops_by_reason": drops,
        "memory": {
            "n4_node_compiler_tables_bytes": n4_bytes,
            "per_worker_state_bytes": per_worker,
            "workers": 1,
            "meter_slots_per_session": f64::from(meter_slots) / n as f64,
            "urr_slots_per_session": f64::from(urr_slots) / n as f64,
            "breakdown_node_only_bytes_per_session": node_b,
            "breakdown_compiler_and_tables_bytes_per_session": compiler_b,
            "compiler_estimate_bytes_per_session": {
                "compiled_sessions": cst.compiled_bytes as f64 / n as f64,
                "shards": cst.shard_bytes as f64 / n as f64,
                "key_owner_and_membership_index": cst.index_bytes as f64 / n as f64,
            },
            "bytes_per_session": (n4_bytes + per_worker) as f64 / n as f64,
            "bytes_per_session_node_compiler_tables_only": n4_bytes as f64 / n as f64,
            "per_worker_bytes_per_session": per_worker as f64 / n as f64,
            "goal_bytes_per_session": 1536,
        },
        "machine": report::machine(),
    });
    // Beside the rest (one `json!` of everything exceeds the macro's recursion limit).
    let extra = serde_json::json!({
        "publish_build_us_p50": st.publish_build_quantile(0.5),
        "publish_build_us_p99": st.publish_build_quantile(0.99),
        "publish_build_us_max": st.publish_build_quantile(1.0),
        "publish_build_what": "the N4 thread's own part of a publish: compile the burst's changes and swap the snapshot in, before any worker is involved",
        "worker_scheduling_during_load": worker_sched,
        "threads_allowed_cores": threads,
    });
    if let (Some(r), serde_json::Value::Object(e)) = (result.as_object_mut(), extra) {
        r.extend(e);
    }
    let text = serde_json::to_string_pretty(&result).expect("json");
    println!("{text}");
    if let Err(e) = std::fs::write(&a.n4_out, text) {
        eprintln!("cannot write {}: {e}", a.n4_out);
    }
    drop(ep);
}

/// Every thread of this process with the cores it may run on (`Cpus_allowed_list`).
fn thread_cores() -> serde_json::Value {
    let mut v = serde_json::Map::new();
    for e in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = e.path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        let st = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        let cores = st
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or("?")
            .trim()
            .to_string();
        v.insert(comm.trim().to_string(), cores.into());
    }
    v.into()
}

/// (run ns, runnable-but-waiting ns, involuntary context switches) so far of this process's
/// thread named `name`, from `/proc/self/task/*/schedstat` and `status`.
fn thread_sched(name: &str) -> Option<(u64, u64, u64)> {
    let task = std::fs::read_dir("/proc/self/task").ok()?.find_map(|e| {
        let p = e.ok()?.path();
        let comm = std::fs::read_to_string(p.join("comm")).ok()?;
        (comm.trim() == name).then_some(p)
    })?;
    let ss = std::fs::read_to_string(task.join("schedstat")).ok()?;
    let mut f = ss.split_whitespace().map(|x| x.parse::<u64>().ok());
    let (run, wait) = (f.next()??, f.next()??);
    let st = std::fs::read_to_string(task.join("status")).ok()?;
    let nonvol = st
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()?;
    Some((run, wait, nonvol))
}

/// The fraction of a core the N4 thread (`pg-n4`) uses over `d`, from its
/// `/proc/self/task/*/stat` CPU times; `None` if the thread is not found.
fn n4_thread_cpu(d: Duration) -> Option<f64> {
    let task = std::fs::read_dir("/proc/self/task").ok()?.find_map(|e| {
        let p = e.ok()?.path();
        let comm = std::fs::read_to_string(p.join("comm")).ok()?;
        (comm.trim() == "pg-n4").then_some(p)
    })?;
    // utime + stime (fields 14 and 15, in clock ticks of 10 ms), after the command name.
    let ticks = || -> Option<u64> {
        let s = std::fs::read_to_string(task.join("stat")).ok()?;
        let rest = &s[s.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
    };
    let (c0, t0) = (ticks()?, Instant::now());
    std::thread::sleep(d);
    let c1 = ticks()?;
    Some((c1 - c0) as f64 * 0.01 / t0.elapsed().as_secs_f64())
}

/// `--n4-replot`: the plot of `--n4-out` (and `--n4-before`) from the JSON files alone.
pub(crate) fn replot(a: &Args) {
    let Some((n, tenths)) = read_tenths(&a.n4_out) else {
        fail(&format!(
            "{}: no establishments_per_second_per_tenth",
            a.n4_out
        ));
    };
    plot_tenths(&a.n4_out, a.n4_before.as_deref(), n, &tenths);
}

/// (sessions, establishments/s per tenth) of a `--n4` JSON output.
fn read_tenths(path: &str) -> Option<(usize, Vec<f64>)> {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let n = v.get("sessions_established")?.as_u64()? as usize;
    let t = v
        .get("establishments_per_second_per_tenth")?
        .as_array()?
        .iter()
        .map(|x| x.as_f64())
        .collect::<Option<Vec<f64>>>()?;
    Some((n, t))
}

/// Establishments/s per tenth of the run, as an SVG beside the JSON output; with `before`
/// (an earlier run's JSON), that run's per-tenth rates beside them.
fn plot_tenths(json_out: &str, before: Option<&str>, n: usize, per_tenth: &[f64]) {
    use peregrine_perf::fridge_eval::plot::{lines, Series};
    let path = std::path::Path::new(json_out).with_extension("svg");
    let series = |name: &str, n: usize, t: &[f64]| Series {
        name: name.into(),
        points: t
            .iter()
            .enumerate()
            .map(|(i, &r)| ((i + 1) as f64 * n as f64 / 10.0, r))
            .collect(),
        spread: None,
    };
    let mut s = vec![series("establishments/s", n, per_tenth)];
    if let Some(b) = before {
        match read_tenths(b) {
            Some((bn, bt)) => {
                s[0].name = "establishments/s (this run)".into();
                s.push(series("before", bn, &bt));
            }
            None => eprintln!("{b}: no establishments_per_second_per_tenth, not plotted"),
        }
    }
    let title = format!("PFCP establishments/s per tenth of {n} sessions (under traffic)");
    if let Err(e) = lines(
        &path,
        &title,
        "sessions established",
        "establishments/s",
        &s,
    ) {
        eprintln!("cannot plot {}: {e}", path.display());
    }
}

/// The N4 node of the harness: node ID 127.0.0.1, room for `max_sessions`, heartbeats an hour
/// apart (none during a run).
pub(crate) fn n4_node(max_sessions: usize) -> peregrine_n4::NodeConfig {
    let mut node = peregrine_n4::NodeConfig::new(
        peregrine_pfcp::ie::NodeId::Ipv4(std::net::Ipv4Addr::LOCALHOST),
        0xe6f0_0001,
        Some(upf_support::upf_v4()),
    );
    node.max_sessions = max_sessions;
    node.heartbeat_interval = Duration::from_secs(3600);
    node
}
