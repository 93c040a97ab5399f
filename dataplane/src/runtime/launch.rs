//! Starting the workers: checks the runtime configuration, builds one pipeline, I/O handle,
//! counter set, egress schedulers and hand-off rings per worker, allocates every ring and
//! channel before any thread runs, and spawns one `pg-worker-<id>` thread per
//! [`WorkerSpec`](super::worker::WorkerSpec) (`super::worker` is the loop each one runs).

use super::counters::{Counters, EgressCounters, SharedCounters};
use super::egress::{EgressConfigError, EgressPort, NO_EGRESS};
use super::end::EndGate;
use super::handoff::{self, Lockstep, Quiesce, HANDOFF_RING};
use super::inject::{Injector, INJECT_QUEUE};
use super::reason::Reasons;
use super::running::Running;
use super::stage::PipelineFactory;
use super::worker::{RuntimeConfig, Worker};
use crate::io::{Backend, Burst, PortId, WorkerIo, MAX_BURST};
use crate::qos::Scheduler;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

/// Name prefix of the worker threads (`pg-worker-<id>`): the control side tells them from
/// its own threads by it (pinning, per-thread accounting).
pub const WORKER_THREAD_PREFIX: &str = "pg-worker";

/// Start one thread per [`WorkerSpec`](super::worker::WorkerSpec), each with its own I/O
/// handle and pipeline.
pub fn start<Bk, F>(backend: &mut Bk, factory: &F, cfg: &RuntimeConfig) -> std::io::Result<Running>
where
    Bk: Backend,
    Bk::Io: 'static,
    F: PipelineFactory<<Bk::Io as WorkerIo>::Buf>,
{
    start_with(backend, factory, cfg, EndGate::new(false))
}

/// As [`start`], but every worker waits at its end for [`Running::release_end`] (up to
/// [`END_HOLD_LIMIT`](super::end::END_HOLD_LIMIT)), sending what the control side injects
/// meanwhile (`super::end`).
pub fn start_held<Bk, F>(
    backend: &mut Bk,
    factory: &F,
    cfg: &RuntimeConfig,
) -> std::io::Result<Running>
where
    Bk: Backend,
    Bk::Io: 'static,
    F: PipelineFactory<<Bk::Io as WorkerIo>::Buf>,
{
    start_with(backend, factory, cfg, EndGate::new(true))
}

fn start_with<Bk, F>(
    backend: &mut Bk,
    factory: &F,
    cfg: &RuntimeConfig,
    end: EndGate,
) -> std::io::Result<Running>
where
    Bk: Backend,
    Bk::Io: 'static,
    F: PipelineFactory<<Bk::Io as WorkerIo>::Buf>,
{
    let end = Arc::new(end);
    let burst = cfg.burst.clamp(1, MAX_BURST);
    let ports = backend.ports().to_vec();
    let invalid = |e: EgressConfigError| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    // (port, config) of every scheduled port, checked before any thread starts.
    let mut egress_cfg = Vec::new();
    for (port, c) in cfg.egress.iter().enumerate() {
        if let Some(c) = c {
            if port >= ports.len() {
                return Err(invalid(EgressConfigError::NoSuchPort(port)));
            }
            c.validate().map_err(invalid)?;
            egress_cfg.push((port as PortId, *c));
        }
    }
    let egress_ports: Vec<PortId> = egress_cfg.iter().map(|(p, _)| *p).collect();
    let mut egress_slot = vec![NO_EGRESS; ports.len()];
    for (slot, &p) in egress_ports.iter().enumerate() {
        egress_slot[p as usize] = slot as u16;
    }
    // A hand-off names its destination by index in `cfg.workers`; steering stages compute it
    // from `Context::worker`, so with several workers the two must agree.
    if cfg.workers.len() > 1 {
        if let Some((i, w)) = cfg.workers.iter().enumerate().find(|(i, w)| w.id != *i) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "worker {i} has id {}: ids must be 0..{}",
                    w.id,
                    cfg.workers.len()
                ),
            ));
        }
    }
    let mut reasons = Reasons::new();
    let pipelines: Vec<_> = cfg
        .workers
        .iter()
        .map(|w| factory.build(w.id, &mut reasons))
        .collect();
    let stage_names = pipelines
        .first()
        .map(|p| p.stage_names())
        .unwrap_or_default();
    let stop = Arc::new(AtomicBool::new(false));
    let control_pending = Arc::new(AtomicU64::new(0));
    let (ctl_tx, control_rx) = crossbeam_channel::bounded(cfg.control_queue.max(1));
    let epoch = Instant::now();
    let mut handles = Vec::new();
    let mut shared = Vec::new();
    let mut inject_tx = Vec::new();
    let quiesce = Quiesce::new(cfg.workers.len());
    let lockstep = Lockstep::new(cfg.workers.len());
    let rings = handoff::mesh(cfg.workers.len(), HANDOFF_RING);
    for ((spec, pipeline), (outbox, inbox)) in cfg.workers.iter().cloned().zip(pipelines).zip(rings)
    {
        // crossbeam's bounded channel allocates its slots here, once.
        let (itx, inject_rx) = crossbeam_channel::bounded(INJECT_QUEUE);
        inject_tx.push(itx);
        let sc = Arc::new(SharedCounters::with_egress(
            ports.len(),
            reasons.len(),
            &egress_ports,
        ));
        shared.push(sc.clone());
        let mut counters = Counters::new(ports.len(), reasons.len());
        counters.egress = egress_ports
            .iter()
            .map(|&p| EgressCounters::new(p))
            .collect();
        // Per-worker schedulers, all rings allocated here, before the worker runs.
        let egress = egress_cfg
            .iter()
            .map(|(port, c)| {
                Ok(EgressPort {
                    port: *port,
                    sched: Scheduler::new(&c.scheduler, 0)
                        .map_err(|e| invalid(EgressConfigError::Scheduler(e)))?,
                    default_qid: c.default_qid,
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        let w = Worker {
            io: backend.worker_io(spec.id),
            pipeline,
            counters,
            shared: sc,
            txq: (0..ports.len()).map(|_| Burst::new()).collect(),
            tx_pending: false,
            control: ctl_tx.clone(),
            control_pending: control_pending.clone(),
            inject_rx,
            inject_burst: Burst::new(),
            stop: stop.clone(),
            epoch,
            burst,
            stop_after_idle: cfg.stop_after_idle,
            spec,
            egress_slot: egress_slot.clone(),
            egress,
            egress_progress_ns: 0,
            recorded_ns: 0,
            outbox,
            inbox,
            quiesce: quiesce.clone(),
            lockstep: lockstep.clone(),
            end: end.clone(),
        };
        let name = format!("{WORKER_THREAD_PREFIX}-{}", w.spec.id);
        handles.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || w.run())?,
        );
    }
    Ok(Running {
        handles,
        shared,
        stop,
        control_rx,
        control_pending,
        injector: Injector {
            workers: inject_tx.into(),
            ports: ports.len(),
        },
        reasons,
        ports,
        stage_names,
        end,
    })
}
