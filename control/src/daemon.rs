//! `peregrine run`: build the backend and pipelines from configuration, start the workers,
//! run the control loop until the input ends or a signal arrives, report.

use crate::config::{BackendConfig, Config, ConfigError, PipelineConfig, ReplayMode};
use crate::int::{IntRuntime, Role};
use crate::summary::Summary;
use crate::upf::UpfRuntime;
use peregrine_dataplane::io::dpdk::{DpdkBackend, DpdkConfig, DpdkPortConfig};
use peregrine_dataplane::io::pcap::{PcapBackend, PcapConfig, PcapPortConfig, Replay};
use peregrine_dataplane::io::{Backend, PortId, WorkerIo};
use peregrine_dataplane::runtime::{
    self, OnEgress, OnIngress, Pipeline, Publisher, Reasons, RuntimeConfig, WorkerSpec,
};
use peregrine_dataplane::stages::l3fwd::{L3Fwd, RouteTable};
use peregrine_dataplane::stages::xconnect::XConnect;
use peregrine_dataplane::upf::Upf;
use peregrine_int::stages::{IntConfig, IntSink, IntSource, IntTransit};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("backend: {0}")]
    Backend(String),
    #[error("cannot start workers: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("INT manager: {0}")]
    IntManager(std::io::Error),
}

/// Options of `peregrine run` that are not in the config file.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop after this long even if input continues.
    pub duration: Option<Duration>,
    /// Log aggregate counters this often.
    pub stats_interval: Option<Duration>,
    /// Set to stop the run (signal handlers, tests).
    pub stop: Option<Arc<AtomicBool>>,
    /// Set to re-read the configuration file and publish its routes (SIGHUP).
    pub reload: Option<Arc<AtomicBool>>,
    /// The file to re-read on reload.
    pub config_path: Option<std::path::PathBuf>,
}

/// Run the daemon to completion and return its summary.
pub fn run(cfg: &Config, opts: &RunOptions) -> Result<Summary, RunError> {
    match &cfg.backend {
        BackendConfig::Pcap {
            replay,
            speed,
            loops,
            pool_size,
        } => {
            let pc = PcapConfig {
                ports: cfg
                    .ports
                    .iter()
                    .enumerate()
                    .map(|(i, p)| PcapPortConfig {
                        name: p.name.clone(),
                        rx: p.rx.as_deref().map(|f| cfg.resolve(f)),
                        tx: p.tx.as_deref().map(|f| cfg.resolve(f)),
                        mac: cfg.port_mac(i).0,
                    })
                    .collect(),
                workers: cfg.workers.count,
                replay: match replay {
                    ReplayMode::Fast => Replay::Fast,
                    ReplayMode::Timed => Replay::Timed { speed: *speed },
                    ReplayMode::Recorded => Replay::Recorded,
                },
                loops: *loops,
                pool_size: *pool_size,
            };
            // Output files go where the config says, directories included.
            for p in pc.ports.iter().filter_map(|p| p.tx.as_deref()) {
                if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        RunError::Backend(format!("cannot create {}: {e}", dir.display()))
                    })?;
                }
            }
            let backend = PcapBackend::new(pc).map_err(|e| RunError::Backend(e.to_string()))?;
            let specs = (0..cfg.workers.count)
                .map(|w| spec(cfg, w, backend.rx_queues_of(w)))
                .collect();
            run_on(backend, cfg, specs, opts)
        }
        BackendConfig::Dpdk {
            eal_args,
            rx_desc,
            tx_desc,
            mbufs_per_worker,
            mbuf_cache,
        } => {
            let dc = DpdkConfig {
                eal_args: eal_args.clone(),
                ports: cfg
                    .ports
                    .iter()
                    .map(|p| DpdkPortConfig {
                        name: p.name.clone(),
                        device: p.device.clone().unwrap_or_default(),
                        rx_desc: *rx_desc,
                        tx_desc: *tx_desc,
                        rss: p.rss,
                    })
                    .collect(),
                workers: cfg.workers.count,
                mbufs_per_worker: *mbufs_per_worker,
                mbuf_cache: *mbuf_cache,
                data_room: DpdkConfig::DEFAULT_DATA_ROOM,
            };
            let backend = DpdkBackend::new(dc).map_err(|e| RunError::Backend(e.to_string()))?;
            let nports = cfg.ports.len() as PortId;
            let specs = (0..cfg.workers.count)
                .map(|w| spec(cfg, w, (0..nports).map(|p| (p, w as u16)).collect()))
                .collect();
            run_on(backend, cfg, specs, opts)
        }
    }
}

/// Re-read the configuration and publish its route table to the workers without stopping
/// them. Only routes change at run time; ports, workers and backend need a restart, and a
/// file that changes them (or does not validate) is refused with the old table kept.
fn reload_routes(running_cfg: &Config, opts: &RunOptions, routes: &Publisher<RouteTable>) {
    let Some(path) = &opts.config_path else {
        return;
    };
    let new = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(%e, "reload refused, keeping the running routes");
            return;
        }
    };
    if new.ports != running_cfg.ports
        || new.workers != running_cfg.workers
        || new.backend != running_cfg.backend
    {
        tracing::error!("reload refused: only [[route]] may change at run time; restart for ports, workers or backend");
        return;
    }
    let table = match new.parsed_routes() {
        Ok(r) => RouteTable::from_routes(&r),
        Err(e) => {
            tracing::error!(%e, "reload refused, keeping the running routes");
            return;
        }
    };
    let t0 = Instant::now();
    let g = routes.publish(table);
    match routes.wait_seen(g, Duration::from_secs(1)) {
        Some(d) => tracing::info!(
            routes = new.routes.len(),
            generation = g,
            latency_us = d.as_micros() as u64,
            "routes published"
        ),
        None => tracing::warn!(
            generation = g,
            waited_ms = t0.elapsed().as_millis() as u64,
            "routes published; not every worker has picked them up yet"
        ),
    }
}

/// Answer an ARP request / Neighbour Solicitation on the port it came in on, through the
/// worker that received it, and log what was learnt.
fn on_neighbour_frame(
    nb: &mut crate::neighbour::Responder,
    injector: &runtime::Injector,
    t0: Instant,
    p: &runtime::ControlPacket,
) {
    let o = nb.handle(t0.elapsed().as_nanos() as u64, p.port, &p.data);
    if let Some((ip, mac)) = o.learned {
        tracing::info!(%ip, %mac, port = p.port, "neighbour learnt");
    }
    if let Some(reply) = o.reply {
        if let Err(e) = injector.inject(p.worker, p.port, &reply) {
            tracing::warn!(%e, port = p.port, "neighbour reply not sent");
        }
    }
}

fn int_sink(c: &IntConfig, ir: &IntRuntime, r: &mut Reasons) -> IntSink {
    IntSink::new(c.clone(), ir.tables.reader(), ir.events_tx.clone(), r)
}

fn int_source(c: &IntConfig, ir: &IntRuntime) -> IntSource {
    IntSource::new(c.clone(), ir.tables.reader()).with_piggyback(ir.piggyback_rx.clone())
}

fn int_transit(c: &IntConfig, ir: &IntRuntime, r: &mut Reasons) -> IntTransit {
    IntTransit::new(c.clone(), ir.tables.reader(), r).with_events(ir.events_tx.clone())
}

/// One of the three INT elements, to be wrapped in a port scope ([`OnIngress`] / [`OnEgress`]).
// Built once per worker and place; its size does not matter, an indirection per batch would.
#[allow(clippy::large_enum_variant)]
enum IntStage {
    Sink(IntSink),
    Transit(IntTransit),
    Source(IntSource),
}

impl<B: peregrine_dataplane::PacketBuf> runtime::Stage<B> for IntStage {
    fn name(&self) -> &'static str {
        match self {
            IntStage::Sink(s) => runtime::Stage::<B>::name(s),
            IntStage::Transit(s) => runtime::Stage::<B>::name(s),
            IntStage::Source(s) => runtime::Stage::<B>::name(s),
        }
    }

    fn process(&mut self, batch: &mut runtime::Batch<B>, cx: &runtime::Context) {
        match self {
            IntStage::Sink(s) => s.process(batch, cx),
            IntStage::Transit(s) => s.process(batch, cx),
            IntStage::Source(s) => s.process(batch, cx),
        }
    }

    fn idle(&mut self) {
        match self {
            IntStage::Sink(s) => runtime::Stage::<B>::idle(s),
            IntStage::Transit(s) => runtime::Stage::<B>::idle(s),
            IntStage::Source(s) => runtime::Stage::<B>::idle(s),
        }
    }
}

/// The INT elements `roles` names, in that order (`IntSection::n6_in_roles` sorts them).
fn int_stages(roles: &[Role], c: &IntConfig, ir: &IntRuntime, r: &mut Reasons) -> Vec<IntStage> {
    roles
        .iter()
        .map(|role| match role {
            Role::Sink => IntStage::Sink(int_sink(c, ir, r)),
            Role::Transit => IntStage::Transit(int_transit(c, ir, r)),
            Role::Source => IntStage::Source(int_source(c, ir)),
        })
        .collect()
}

fn spec(cfg: &Config, w: usize, rx_queues: Vec<(PortId, u16)>) -> WorkerSpec {
    WorkerSpec {
        id: w,
        core: cfg.workers.cores.get(w).copied(),
        rx_queues,
        tx_queue: w as u16,
    }
}

fn run_on<Bk>(
    mut backend: Bk,
    cfg: &Config,
    workers: Vec<WorkerSpec>,
    opts: &RunOptions,
) -> Result<Summary, RunError>
where
    Bk: Backend,
    Bk::Io: 'static,
{
    let rcfg = RuntimeConfig {
        workers,
        burst: cfg.workers.burst,
        stop_after_idle: (cfg.workers.stop_after_idle_ms > 0)
            .then(|| Duration::from_millis(cfg.workers.stop_after_idle_ms)),
        control_queue: 1024,
        egress: vec![None; cfg.ports.len()],
    };
    for p in backend.ports() {
        match backend.link(p.id) {
            Some(l) => {
                tracing::info!(port = %p.name, driver = %p.driver, up = l.up, speed_mbps = l.speed_mbps, full_duplex = l.full_duplex, "link")
            }
            None => tracing::info!(port = %p.name, driver = %p.driver, "port ready"),
        }
    }
    let macs: Vec<_> = (0..cfg.ports.len()).map(|i| cfg.port_mac(i)).collect();
    // Rules are published as snapshots; the control thread keeps the publisher.
    let routes = Publisher::new(RouteTable::from_routes(&cfg.parsed_routes()?));
    let t0 = Instant::now();
    let mut upf: Option<UpfRuntime> = None;
    let mut int: Option<IntRuntime> = None;
    let mut rcfg = rcfg;
    let running = match &cfg.pipeline {
        PipelineConfig::Upf { promiscuous } => {
            let section = cfg.upf.as_ref().ok_or_else(|| {
                RunError::Config(crate::config::invalid("upf", "missing [upf] section"))
            })?;
            rcfg.egress = section.egress_configs(cfg.ports.len(), |n| cfg.port_index(n));
            let u = UpfRuntime::prepare(section, rcfg.workers.len())?;
            let (tables, stats, ucfg) = (
                u.publisher.clone(),
                u.stats.clone(),
                u.stage_config(*promiscuous),
            );
            // `[int]` next to `[upf]`: INT on N6 around the UPF stage (control/src/int.rs).
            if let Some(s) = &cfg.int {
                int = Some(IntRuntime::start(s).map_err(RunError::IntManager)?);
            }
            let int_place = cfg.int.as_ref().map(|s| {
                let n6 = s.n6_port_ids(|n| cfg.port_index(n));
                let ingress = IntConfig {
                    // Before the UPF stage, which decrements the hop limit.
                    hop_limit_after_forward: true,
                    ..s.stage_config(|n| cfg.port_index(n))
                };
                let egress = IntConfig {
                    // After decap: the UPF stage has decremented it already.
                    hop_limit_after_forward: false,
                    ..ingress.clone()
                };
                (n6, s.n6_in_roles(), ingress, s.n6_out_roles(), egress)
            });
            let running = runtime::start(
                &mut backend,
                &|w: usize, r: &mut Reasons| {
                    let mut stages: Vec<Box<dyn runtime::Stage<<Bk::Io as WorkerIo>::Buf>>> =
                        Vec::with_capacity(7);
                    if let (Some((n6, roles, icfg, _, _)), Some(ir)) = (&int_place, &int) {
                        for st in int_stages(roles, icfg, ir, r) {
                            stages.push(Box::new(OnIngress::new(n6, st)));
                        }
                    }
                    stages.push(Box::new(Upf::new(
                        tables.reader(),
                        routes.reader(),
                        macs.clone(),
                        ucfg.clone(),
                        stats[w].clone(),
                        r,
                    )));
                    if let (Some((n6, _, _, roles, ecfg)), Some(ir)) = (&int_place, &int) {
                        for st in int_stages(roles, ecfg, ir, r) {
                            stages.push(Box::new(OnEgress::new(n6, st)));
                        }
                    }
                    Pipeline::<<Bk::Io as WorkerIo>::Buf>::new(stages)
                },
                &rcfg,
            )?;
            let end_markers = crate::upf::InjectEndMarkers {
                builder: crate::end_marker::EndMarkerBuilder {
                    n3_v4: section.n3_v4(),
                    n3_v6: section.n3_v6(),
                    // The routes at start; a SIGHUP reload does not reach End Markers.
                    routes: RouteTable::from_routes(&cfg.parsed_routes()?),
                    macs: macs.clone(),
                },
                injector: running.injector(),
            };
            upf = Some(u.start_control(section, Some(Box::new(end_markers)))?);
            running
        }
        PipelineConfig::Xconnect { pairs } => {
            let pairs: Vec<(PortId, PortId)> = pairs
                .iter()
                .filter_map(|[a, b]| Some((cfg.port_index(a)?, cfg.port_index(b)?)))
                .collect();
            runtime::start(
                &mut backend,
                &|_w: usize, r: &mut Reasons| {
                    Pipeline::<<Bk::Io as WorkerIo>::Buf>::new(vec![Box::new(XConnect::new(
                        &pairs, r,
                    ))])
                },
                &rcfg,
            )?
        }
        PipelineConfig::Int { promiscuous } => {
            let section = cfg.int.as_ref().ok_or_else(|| {
                RunError::Config(crate::config::invalid("int", "missing [int] section"))
            })?;
            // The manager binds first: a port in use fails the run before workers start.
            let ir = IntRuntime::start(section).map_err(RunError::IntManager)?;
            let icfg = section.stage_config(|n| cfg.port_index(n));
            let (sink, source, transit) = (
                section.has(Role::Sink),
                section.has(Role::Source),
                section.has(Role::Transit),
            );
            let running = runtime::start(
                &mut backend,
                &|_w: usize, r: &mut Reasons| {
                    let mut stages: Vec<Box<dyn runtime::Stage<<Bk::Io as WorkerIo>::Buf>>> =
                        Vec::with_capacity(4);
                    if sink {
                        stages.push(Box::new(int_sink(&icfg, &ir, r)));
                    }
                    if source {
                        stages.push(Box::new(int_source(&icfg, &ir)));
                    }
                    if transit {
                        stages.push(Box::new(int_transit(&icfg, &ir, r)));
                    }
                    stages.push(Box::new(L3Fwd::new(
                        routes.reader(),
                        macs.clone(),
                        *promiscuous,
                        r,
                    )));
                    Pipeline::<<Bk::Io as WorkerIo>::Buf>::new(stages)
                },
                &rcfg,
            )?;
            int = Some(ir);
            running
        }
        PipelineConfig::L3fwd { promiscuous } => runtime::start(
            &mut backend,
            &|_w: usize, r: &mut Reasons| {
                Pipeline::<<Bk::Io as WorkerIo>::Buf>::new(vec![Box::new(L3Fwd::new(
                    routes.reader(),
                    macs.clone(),
                    *promiscuous,
                    r,
                ))])
            },
            &rcfg,
        )?,
    };
    tracing::info!(workers = rcfg.workers.len(), stages = ?running.stage_names(), "workers started");
    // ARP / ND for the UPF's local addresses, answered through the workers' tx queues.
    let injector = running.injector();
    let mut neighbours = cfg.upf.as_ref().filter(|_| upf.is_some()).map(|s| {
        let addrs: Vec<_> = s.n3.iter().chain(&s.n6).copied().collect();
        crate::neighbour::Responder::new(&addrs, macs.clone())
    });
    let stop = running.stop_flag();
    let mut last_stats = Instant::now();
    let mut control_pkts = 0u64;
    while !running.finished() {
        // Exception packets: ARP / ND answered and learnt, buffered downlink reported.
        while let Some(p) = running.recv_control(Duration::from_millis(50)) {
            control_pkts += 1;
            tracing::debug!(port = p.port, len = p.len, "exception packet");
            if let Some(nb) = neighbours.as_mut().filter(|_| p.len == p.data.len()) {
                on_neighbour_frame(nb, &injector, t0, &p);
            }
            if let Some(u) = &upf {
                u.on_control_packet(&p);
            }
        }
        if let Some(u) = &mut upf {
            u.tick(&running);
        }
        if let Some(i) = &mut int {
            i.pump();
        }
        if opts
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            stop.store(true, Ordering::Relaxed);
        }
        if opts.duration.is_some_and(|d| t0.elapsed() >= d) {
            stop.store(true, Ordering::Relaxed);
        }
        if let Some(iv) = opts.stats_interval {
            if last_stats.elapsed() >= iv {
                last_stats = Instant::now();
                let c = running.counters();
                tracing::info!(
                    rx = c.total_rx(),
                    tx = c.total_tx(),
                    dropped = c.total_drops(),
                    "counters"
                );
            }
        }
        if opts
            .reload
            .as_ref()
            .is_some_and(|r| r.swap(false, Ordering::Relaxed))
        {
            reload_routes(cfg, opts, &routes);
        }
        routes.reclaim();
    }
    let ports = running.ports().to_vec();
    let stages = running.stage_names().to_vec();
    let reasons = running.reasons().clone();
    let nworkers = rcfg.workers.len();
    let total = running.join();
    let seconds = t0.elapsed().as_secs_f64();
    let stats: Vec<_> = (0..ports.len())
        .map(|p| backend.port_stats(p as PortId))
        .collect();
    tracing::debug!(control_pkts, "control thread done");
    if let Some(nb) = &neighbours {
        let s = nb.stats();
        tracing::info!(
            arp_replies = s.arp_replies_sent,
            neighbour_adverts = s.na_sent,
            learned = s.learned,
            neighbours = nb.table().len(),
            malformed = s.malformed,
            "neighbour responder"
        );
    }
    drop(backend);
    let mut summary = Summary::new(seconds, nworkers, &stages, &ports, &stats, &total, &reasons);
    if let Some(u) = upf {
        summary.upf = Some(u.finish());
    }
    if let Some(i) = int {
        summary.int = Some(i.finish());
    }
    Ok(summary)
}
