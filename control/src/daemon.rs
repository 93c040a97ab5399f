//! `peregrine run`: build the backend, compose every worker's pipeline from the pipeline
//! kind's main stage and the enabled features (`crate::feature`), start the workers, run the
//! control loop (features' ticks, exception packets, the metrics page, SIGHUP route reloads)
//! until the input ends or a signal arrives, and report.

use crate::classify_stage::ClassifyCounters;
use crate::config::{BackendConfig, Config, PipelineConfig, ReplayMode};
use crate::error::invalid;
pub use crate::error::RunError;
use crate::feature::{Build, Feature, Place, Stages, Taps};
use crate::metrics::{Exposition, MetricsServer};
use crate::nexthop::Neighbours;
use crate::summary::Summary;
use peregrine_dataplane::io::dpdk::{DpdkBackend, DpdkConfig, DpdkPortConfig};
use peregrine_dataplane::io::pcap::{PcapBackend, PcapConfig, PcapPortConfig, Replay};
use peregrine_dataplane::io::{Backend, PortId, WorkerIo};
use peregrine_dataplane::runtime::{
    self, Pipeline, Publisher, Reasons, Running, RuntimeConfig, Stage, WorkerSpec,
};
use peregrine_dataplane::stages::impair_link::ImpairLink;
use peregrine_dataplane::stages::l3fwd::{L3Fwd, RouteTable};
use peregrine_dataplane::stages::steer::Steer;
use peregrine_dataplane::stages::xconnect::XConnect;
use peregrine_dataplane::PacketBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
/// them. Only routes change at run time; anything else needs a restart, and a file that
/// changes it (or does not validate) is refused with the old table kept.
fn reload_routes(
    running_cfg: &Config,
    opts: &RunOptions,
    routes: &Publisher<RouteTable>,
    neighbours: Option<&mut Neighbours>,
) {
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
    // Everything but the routes must be as running (feature sections included: a changed
    // `[upf]` is refused, not ignored).
    let mut rest = new.clone();
    rest.platform.routes.clone_from(&running_cfg.routes);
    if rest != *running_cfg {
        tracing::error!("reload refused: only [[route]] may change at run time; restart for ports, workers, backend, pipeline, metrics or feature sections");
        return;
    }
    let table = match new.parsed_routes() {
        // Gateways resolved so far keep their MACs; new ones are solicited.
        Ok(r) => match neighbours {
            Some(nb) => nb.set_routes(Instant::now(), &r),
            None => RouteTable::from_routes(&r),
        },
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

fn spec(cfg: &Config, w: usize, rx_queues: Vec<(PortId, u16)>) -> WorkerSpec {
    WorkerSpec {
        id: w,
        core: cfg.workers.cores.get(w).copied(),
        rx_queues,
        tx_queue: w as u16,
    }
}

/// The buffer type of a backend's workers.
type Buf<Bk> = <<Bk as Backend>::Io as WorkerIo>::Buf;

/// The daemon's side of the pipeline: what every worker's pipeline is built from.
struct Composer<'a, B> {
    cfg: &'a Config,
    features: &'a [Box<dyn Feature<B>>],
    routes: &'a Publisher<RouteTable>,
    classify: &'a ClassifyCounters,
}

impl<B: PacketBuf + 'static> Composer<'_, B> {
    /// Worker `w`'s pipeline: platform ingress, features at `Ingress`, the main stage,
    /// features at `AfterUpf`.
    fn pipeline(&self, w: usize, reasons: &mut Reasons) -> Pipeline<B> {
        let classified = self.features.iter().any(|f| f.reads_packet_meta())
            && !self.features.iter().any(|f| f.stales_packet_meta());
        let mut b = Build {
            worker: w,
            reasons,
            routes: self.routes,
            classified,
        };
        let mut stages: Stages<B> = Vec::with_capacity(8);
        // The daemon's own ingress: the shared classifier first, when a feature reads its
        // record, then (several workers) flow steering, so each UE's packets meet on one
        // worker; handed-off packets resume right after it.
        if classified {
            stages.push(Box::new(self.classify.stage()));
            if self.cfg.workers.count > 1 {
                let resume_at = stages.len() as u8 + 1;
                stages.push(Box::new(Steer::new(self.cfg.workers.count, resume_at)));
            }
        }
        for f in self.features {
            f.stages(Place::Ingress, &mut b, &mut stages);
        }
        match self.main_stage(&mut b) {
            Some(s) => stages.push(s),
            // Unreachable after `check_main_stage`; the packets are counted as
            // `no_disposition`, never lost silently.
            None => tracing::error!(worker = w, "no main stage"),
        }
        for f in self.features {
            f.stages(Place::AfterUpf, &mut b, &mut stages);
        }
        let mut pipeline = Pipeline::new(stages);
        for port in 0..self.cfg.ports.len() as PortId {
            let mut taps: Taps<B> = Vec::new();
            for f in self.features {
                f.taps(port, &mut b, &mut taps);
            }
            for t in taps {
                pipeline = pipeline.with_tap(port, t);
            }
        }
        pipeline
    }

    fn main_stage(&self, b: &mut Build<'_>) -> Option<Box<dyn Stage<B>>> {
        let cfg = self.cfg;
        if let Some(name) = cfg.pipeline.main_feature() {
            return self
                .features
                .iter()
                .find(|f| f.name() == name)?
                .main_stage(b);
        }
        let macs: Vec<_> = (0..cfg.ports.len()).map(|i| cfg.port_mac(i)).collect();
        Some(match &cfg.pipeline {
            PipelineConfig::Xconnect { pairs } => {
                let pairs: Vec<(PortId, PortId)> = pairs
                    .iter()
                    .filter_map(|[a, b]| Some((cfg.port_index(a)?, cfg.port_index(b)?)))
                    .collect();
                Box::new(XConnect::new(&pairs, b.reasons))
            }
            PipelineConfig::L3fwd { promiscuous } | PipelineConfig::Int { promiscuous } => {
                Box::new(L3Fwd::new(
                    self.routes.reader(),
                    macs,
                    *promiscuous,
                    b.reasons,
                ))
            }
            PipelineConfig::Impair(p) => {
                // Validated with the config: refusals here are unreachable.
                let links = p.links(|n| cfg.port_index(n)).ok()?;
                Box::new(ImpairLink::new(&links, b.reasons).ok()?)
            }
            PipelineConfig::Upf { .. } | PipelineConfig::DtaTranslator {} => return None,
        })
    }

    /// The feature the pipeline kind takes its main stage from must be enabled.
    fn check_main_stage(&self) -> Result<(), RunError> {
        match self.cfg.pipeline.main_feature() {
            Some(name) if !self.features.iter().any(|f| f.name() == name) => Err(invalid(
                "pipeline.kind",
                format!("needs the `{name}` feature's [{name}] section"),
            )
            .into()),
            _ => Ok(()),
        }
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
    log_links(&backend);
    let mut features = cfg.features::<Buf<Bk>>()?;
    let mut egress = vec![None; cfg.ports.len()];
    for f in features.iter_mut() {
        f.prepare(cfg, &mut egress)?;
    }
    // The impair kind holds each packet on its out port's egress wheel until it is due.
    if let PipelineConfig::Impair(p) = &cfg.pipeline {
        for (_, to, _) in p.links(|n| cfg.port_index(n))? {
            egress[usize::from(to)] = Some(ImpairLink::egress(p.hold));
        }
    }
    if let Some(sessions) = features.iter().find_map(|f| f.sessions()) {
        for f in features.iter_mut() {
            f.use_sessions(&sessions);
        }
    }
    let rcfg = RuntimeConfig {
        workers,
        burst: cfg.workers.burst,
        stop_after_idle: (cfg.workers.stop_after_idle_ms > 0)
            .then(|| Duration::from_millis(cfg.workers.stop_after_idle_ms)),
        control_queue: 1024,
        egress,
    };
    // Rules are published as snapshots; the control thread keeps the publisher. Routes by
    // gateway start unresolved (`crate::nexthop`).
    let parsed = cfg.parsed_routes()?;
    let routes = Arc::new(Publisher::new(RouteTable::from_routes(&parsed)));
    for f in features.iter_mut() {
        f.use_routes(&routes);
    }
    let classify = ClassifyCounters::default();
    let composer = Composer {
        cfg,
        features: &features,
        routes: &routes,
        classify: &classify,
    };
    composer.check_main_stage()?;
    // Held at the end, so the last windows' telemetry still leaves through the workers.
    let running = runtime::start_held(
        &mut backend,
        &|w: usize, r: &mut Reasons| composer.pipeline(w, r),
        &rcfg,
    )?;
    let t0 = Instant::now();
    tracing::info!(workers = rcfg.workers.len(), stages = ?running.stage_names(), "workers started");
    // Off the workers' cores from here on: this thread and every control thread it starts
    // (N4, metrics, features) inherit the CPU set.
    let control = crate::pinning::control_cores(&cfg.workers, crate::pinning::online_cores());
    // This thread and those started before it (DPDK's interrupt thread) too: none may share
    // a worker's core.
    match crate::pinning::pin_non_workers(&control) {
        Ok(n) if !control.is_empty() => {
            tracing::info!(cores = ?control, threads = n, "control threads pinned")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(%e, "control threads not pinned"),
    }
    let server = match start_features(&mut features, &running).and_then(|()| metrics_server(cfg)) {
        Ok(s) => s,
        Err(e) => {
            running.request_stop();
            running.join();
            return Err(e);
        }
    };
    let mut page = PageTimer {
        server,
        workers: rcfg.workers.len(),
        next: t0,
        classify: &classify,
    };
    let local: Vec<_> = features.iter().flat_map(|f| f.local_addrs()).collect();
    let macs = (0..cfg.ports.len()).map(|i| cfg.port_mac(i)).collect();
    let neighbours = Neighbours::new(&local, macs, &parsed, cfg.neighbour, running.injector(), t0);
    let mut lp = Loop {
        cfg,
        opts,
        routes: &routes,
        neighbours,
        t0,
        last_stats: t0,
        control_pkts: 0,
        bus: Vec::new(),
    };
    let mut drained = false;
    while !running.finished() {
        lp.iteration(&running, &mut features, &mut page, &backend);
        if !drained && running.all_ended() {
            lp.drain(&running, &mut features);
            running.release_end();
            drained = true;
        }
    }
    let (ports, stages) = (running.ports().to_vec(), running.stage_names().to_vec());
    let reasons = running.reasons().clone();
    let total = running.join();
    let neighbours = lp.neighbours.take();
    drop(page);
    let seconds = t0.elapsed().as_secs_f64();
    let stats: Vec<_> = (0..ports.len())
        .map(|p| backend.port_stats(p as PortId))
        .collect();
    tracing::debug!(control_pkts = lp.control_pkts, "control thread done");
    drop(backend);
    let nworkers = rcfg.workers.len();
    let mut summary = Summary::new(seconds, nworkers, &stages, &ports, &stats, &total, &reasons);
    if let Some(nb) = &neighbours {
        nb.log_stats();
        if nb.resolving() {
            let (json, text) = nb.report();
            summary.add_feature("neighbour", json, text);
        }
    }
    for f in features {
        let r = f.finish();
        summary.add_feature(r.name, r.json, r.text);
    }
    Ok(summary)
}

fn log_links<Bk: Backend>(backend: &Bk) {
    for p in backend.ports() {
        match backend.link(p.id) {
            Some(l) => {
                tracing::info!(port = %p.name, driver = %p.driver, up = l.up, speed_mbps = l.speed_mbps, full_duplex = l.full_duplex, "link")
            }
            None => tracing::info!(port = %p.name, driver = %p.driver, "port ready"),
        }
    }
}

/// The `[metrics]` endpoint, bound after the features started (N4 is up when it answers).
fn metrics_server(cfg: &Config) -> Result<Option<MetricsServer>, RunError> {
    let Some(m) = &cfg.metrics else {
        return Ok(None);
    };
    let s = MetricsServer::start(m.listen).map_err(|error| RunError::Metrics {
        addr: m.listen,
        error,
    })?;
    tracing::info!(addr = %s.local_addr(), "Prometheus metrics at /metrics");
    Ok(Some(s))
}

/// The control loop's state between iterations.
struct Loop<'a> {
    cfg: &'a Config,
    opts: &'a RunOptions,
    routes: &'a Publisher<RouteTable>,
    /// ARP / ND: the responder and the next-hop resolver (`crate::nexthop`).
    neighbours: Option<Neighbours>,
    t0: Instant,
    last_stats: Instant,
    control_pkts: u64,
    /// Telemetry between features (`crate::telemetry`), reused every iteration.
    bus: Vec<crate::telemetry::Telemetry>,
}

impl Loop<'_> {
    /// Every worker is at its end (`runtime::end`): the features close what is open, the
    /// bus carries its telemetry, and a last tick sends what the consumers made of it
    /// through the workers, which are released after this.
    fn drain<B: PacketBuf>(&mut self, running: &Running, features: &mut [Box<dyn Feature<B>>]) {
        let now = Instant::now();
        for f in features.iter_mut() {
            f.drain(now, running);
        }
        self.carry_bus(features);
        for f in features.iter_mut() {
            f.tick(now, running);
        }
        tracing::debug!("end of run: features drained");
    }

    /// What the producers put on the telemetry bus since the last call, to its consumers.
    fn carry_bus<B: PacketBuf>(&mut self, features: &mut [Box<dyn Feature<B>>]) {
        for f in features.iter_mut() {
            f.telemetry_out(&mut self.bus);
        }
        if !self.bus.is_empty() {
            for f in features.iter_mut() {
                f.telemetry_in(&self.bus);
            }
            self.bus.clear();
        }
    }

    /// Exception packets, features' ticks, the metrics page, stop conditions, the stats
    /// line, route reloads.
    fn iteration<Bk: Backend, B: PacketBuf>(
        &mut self,
        running: &Running,
        features: &mut [Box<dyn Feature<B>>],
        page: &mut PageTimer<'_>,
        backend: &Bk,
    ) {
        // Every feature sees each exception packet (ARP / ND, buffered downlink, ...), for
        // at most 50 ms, so a steady trickle of them does not starve the ticks below.
        let until = Instant::now() + Duration::from_millis(50);
        while let Some(p) = running.recv_control(until.saturating_duration_since(Instant::now())) {
            self.control_pkts += 1;
            tracing::debug!(port = p.port, len = p.len, "exception packet");
            let now = Instant::now();
            if let Some(nb) = self.neighbours.as_mut() {
                nb.on_frame(now, &p);
            }
            for f in features.iter_mut() {
                f.on_control_packet(now, &p);
            }
            if now >= until {
                break;
            }
        }
        let now = Instant::now();
        if let Some(nb) = self.neighbours.as_mut() {
            nb.tick(now, self.routes);
        }
        for f in features.iter_mut() {
            f.tick(now, running);
        }
        self.carry_bus(features);
        page.refresh(
            now,
            self.t0,
            backend,
            running,
            features,
            self.neighbours.as_ref(),
        );
        let opts = self.opts;
        if opts
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
            || opts
                .duration
                .is_some_and(|d| now.duration_since(self.t0) >= d)
        {
            running.request_stop();
        }
        if opts
            .stats_interval
            .is_some_and(|iv| now.duration_since(self.last_stats) >= iv)
        {
            self.last_stats = now;
            let c = running.counters();
            tracing::info!(
                rx = c.total_rx(),
                tx = c.total_tx(),
                dropped = c.total_drops(),
                "counters"
            );
        }
        if opts
            .reload
            .as_ref()
            .is_some_and(|r| r.swap(false, Ordering::Relaxed))
        {
            reload_routes(self.cfg, opts, self.routes, self.neighbours.as_mut());
        }
        self.routes.reclaim();
    }
}

fn start_features<B: PacketBuf>(
    features: &mut [Box<dyn Feature<B>>],
    running: &Running,
) -> Result<(), RunError> {
    for f in features.iter_mut() {
        f.start(running)?;
    }
    Ok(())
}

/// The metrics page, rendered at start and then once a second.
struct PageTimer<'a> {
    server: Option<MetricsServer>,
    classify: &'a ClassifyCounters,
    workers: usize,
    next: Instant,
}

impl PageTimer<'_> {
    fn refresh<Bk: Backend, B: PacketBuf>(
        &mut self,
        now: Instant,
        t0: Instant,
        backend: &Bk,
        running: &Running,
        features: &[Box<dyn Feature<B>>],
        neighbours: Option<&Neighbours>,
    ) {
        let Some(server) = &self.server else {
            return;
        };
        if now < self.next {
            return;
        }
        self.next = now + Duration::from_secs(1);
        let counters = running.counters();
        let port_stats: Vec<_> = (0..running.ports().len())
            .map(|p| backend.port_stats(p as PortId))
            .collect();
        let mut e = Exposition::new();
        crate::platform_metrics::write(
            &mut e,
            &crate::platform_metrics::Snapshot {
                ports: running.ports(),
                port_stats: &port_stats,
                counters: &counters,
                per_worker: &running.worker_counters(),
                reasons: running.reasons(),
                workers: self.workers,
                uptime_s: now.duration_since(t0).as_secs_f64(),
            },
        );
        self.classify.write_metrics(&mut e);
        if let Some(nb) = neighbours {
            nb.metrics(&mut e);
        }
        for f in features {
            f.metrics(&mut e);
        }
        server.set(e.finish());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::{Configure, FeatureReport};
    use crate::platform::Platform;
    use peregrine_dataplane::runtime::{Batch, Context, Tap};
    use peregrine_dataplane::OwnedBuf;

    /// A stage or tap that only has a name.
    struct Named(&'static str);

    impl Stage<OwnedBuf> for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn process(&mut self, _: &mut Batch<OwnedBuf>, _: &Context) {}
    }

    impl Tap<OwnedBuf> for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn on_burst(&mut self, _: PortId, _: &mut [OwnedBuf], _: &Context) {}
    }

    /// A feature with one stage at each place and a tap on port 1, named after itself.
    struct Probe(&'static str, [&'static str; 3]);

    impl Configure for Probe {
        const SECTION: &'static str = "probe";
        fn configure(
            _: Option<&toml::Value>,
            _: &Platform,
        ) -> Result<Option<Self>, crate::error::ConfigError> {
            Ok(None)
        }
    }

    impl Feature<OwnedBuf> for Probe {
        fn name(&self) -> &'static str {
            self.0
        }
        fn stages(&self, place: Place, _: &mut Build<'_>, out: &mut Stages<OwnedBuf>) {
            let i = match place {
                Place::Ingress => 0,
                Place::AfterUpf => 1,
            };
            out.push(Box::new(Named(self.1[i])));
        }
        fn taps(&self, port: PortId, _: &mut Build<'_>, out: &mut Taps<OwnedBuf>) {
            if port == 1 {
                out.push(Box::new(Named(self.1[2])));
            }
        }
        fn finish(self: Box<Self>) -> FeatureReport {
            FeatureReport::new("probe", &(), String::new())
        }
    }

    /// A feature with no stages whose (absent) stages would read `PacketMeta`.
    struct MetaReader;

    impl Feature<OwnedBuf> for MetaReader {
        fn name(&self) -> &'static str {
            "meta_reader"
        }
        fn reads_packet_meta(&self) -> bool {
            true
        }
        fn finish(self: Box<Self>) -> FeatureReport {
            FeatureReport::new("meta_reader", &(), String::new())
        }
    }

    /// A feature whose (absent) ingress stages would rewrite headers.
    struct Stale;

    impl Feature<OwnedBuf> for Stale {
        fn name(&self) -> &'static str {
            "stale"
        }
        fn stales_packet_meta(&self) -> bool {
            true
        }
        fn finish(self: Box<Self>) -> FeatureReport {
            FeatureReport::new("stale", &(), String::new())
        }
    }

    #[test]
    fn features_compose_around_the_main_stage_in_registration_order() {
        let cfg = Config::parse(
            "[backend]\nkind = \"pcap\"\n[[port]]\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\n\
             tx = \"a.pcap\"\n[[port]]\nname = \"b\"\nmac = \"02:00:00:00:00:02\"\ntx = \"b.pcap\"\n\
             [pipeline]\nkind = \"l3fwd\"\n[[route]]\nprefix = \"10.0.0.0/8\"\nport = \"b\"\n\
             next_hop_mac = \"02:00:00:00:00:09\"\n",
        )
        .unwrap();
        let features: Vec<Box<dyn Feature<OwnedBuf>>> = vec![
            Box::new(Probe("one", ["one_in", "one_out", "one_tap"])),
            Box::new(Probe("two", ["two_in", "two_out", "two_tap"])),
        ];
        let routes = Publisher::new(RouteTable::from_routes(&cfg.parsed_routes().unwrap()));
        let c = Composer {
            cfg: &cfg,
            features: &features,
            routes: &routes,
            classify: &ClassifyCounters::default(),
        };
        c.check_main_stage().unwrap();
        let p = c.pipeline(0, &mut Reasons::new());
        assert_eq!(
            p.stage_names(),
            ["one_in", "two_in", "l3fwd", "one_out", "two_out"]
        );
        assert_eq!(p.tap_names(), [(1, "one_tap"), (1, "two_tap")]);
        // A feature that reads `PacketMeta` gets the shared classifier in front of everything.
        let features: Vec<Box<dyn Feature<OwnedBuf>>> = vec![
            Box::new(Probe("one", ["one_in", "one_out", "one_tap"])),
            Box::new(MetaReader),
        ];
        let c = Composer {
            cfg: &cfg,
            features: &features,
            routes: &routes,
            classify: &ClassifyCounters::default(),
        };
        let p = c.pipeline(0, &mut Reasons::new());
        assert_eq!(p.stage_names(), ["classify", "one_in", "l3fwd", "one_out"]);
        // With several workers, flow steering right after it.
        let mut two = cfg.clone();
        two.platform.workers.count = 2;
        let c2 = Composer {
            cfg: &two,
            features: &features,
            routes: &routes,
            classify: &ClassifyCounters::default(),
        };
        let p = c2.pipeline(0, &mut Reasons::new());
        assert_eq!(
            p.stage_names(),
            ["classify", "steer", "one_in", "l3fwd", "one_out"]
        );
        // ... unless an ingress stage would leave the record stale.
        let features: Vec<Box<dyn Feature<OwnedBuf>>> = vec![Box::new(MetaReader), Box::new(Stale)];
        let c = Composer {
            cfg: &cfg,
            features: &features,
            routes: &routes,
            classify: &ClassifyCounters::default(),
        };
        assert_eq!(c.pipeline(0, &mut Reasons::new()).stage_names(), ["l3fwd"]);
        // The upf kind takes its main stage from the `upf` feature, which must be enabled.
        let mut upf = cfg.clone();
        upf.platform.pipeline = PipelineConfig::Upf { promiscuous: false };
        let c = Composer {
            cfg: &upf,
            features: &features,
            routes: &routes,
            classify: &ClassifyCounters::default(),
        };
        let e = c.check_main_stage().unwrap_err().to_string();
        assert!(e.contains("pipeline.kind") && e.contains("[upf]"), "{e}");
    }
}
