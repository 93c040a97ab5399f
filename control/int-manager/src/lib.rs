//! Peregrine's INT manager, the control side of in-band telemetry (Miranda et al., "A Flexible
//! In-band Network Telemetry Framework", section III-B "INTManager"; III-E reports; III-F QoS
//! monitor). The worker stages are in `peregrine-int`, which links no ZeroMQ; this crate does.
//!
//! - this module: the INTManager over ZeroMQ;
//! - [`dispatch`]: its I/O-free core (rule API, report topics);
//! - [`codec`]: rule API messages from and to JSON / CBOR;
//! - [`qos_monitor`]: throughput, delay, jitter and loss per namespace (III-F).
//!
//!
//! "The INTManager is the entity that handles all the requests from the control plane ... using
//! a request/reply pattern ... every configuration sent by the control plane gets an immediate
//! confirmation", and reports go to the controller "using a publish/subscribe pattern" (III-B).
//! [`IntManager::spawn`] runs that on its own thread:
//!
//! - a **REP** socket (the rule API): each message is one request in JSON (Listing 1) or CBOR,
//!   detected per message ([`dispatch::detect_encoding`]), answered at once in the same encoding
//!   with a [`Reply`](peregrine_int::request::Reply); malformed, invalid, oversize, empty and multipart
//!   messages get an error reply and a named counter ([`RejectCounters`]). A REP socket must
//!   always answer, or its peer hangs: every path through the loop sends exactly one reply.
//!   After a change the new [`TableSnapshot`] goes to the dataplane through the daemon's callback
//!   (e.g. `peregrine_dataplane::runtime::snapshot::Publisher::publish`).
//! - a **PUB** socket: every report from the sink stage (a channel, [`ManagedReport`]) is
//!   published on `raw/<app_id>/<ns_id>`, and the [`QosMonitor`](crate::qos_monitor::QosMonitor)'s
//!   1 s / 10 s / 60 s reports on `qos/<app_id>/<ns_id>` when their windows close. Two frames:
//!   the topic (SUB prefix filters match it) and the payload (JSON, or CBOR by configuration).
//!
//! The logic is in [`dispatch::ManagerCore`], I/O-free with the time passed in; this module only
//! moves bytes between it and the sockets. ZeroMQ is the system libzmq (Debian `libzmq3-dev`).

pub mod codec;
pub mod dispatch;
pub mod qos_monitor;

pub use dispatch::{InBandCounters, ManagerCore, ManagerCounters, RejectCounters};

use crate::qos_monitor::{QosConfig, RawReport};
use peregrine_int::namespace::{TableConfig, TableSnapshot};
use peregrine_int::report::IntReport;
use peregrine_int::request::Rule;
use serde::Serialize;
use std::borrow::Cow;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Default rule API endpoint.
pub const DEFAULT_RULES_ENDPOINT: &str = "tcp://127.0.0.1:5555";
/// Default report endpoint.
pub const DEFAULT_REPORTS_ENDPOINT: &str = "tcp://127.0.0.1:5556";
/// Largest message libzmq accepts on the REP socket before it drops the connection. Above the
/// decoder's 64 KiB limit, so that oversize requests up to here get a 413 reply rather than a
/// silent disconnect, and low enough that a hostile peer cannot make us buffer gigabytes.
pub const MAX_WIRE_MESSAGE: i64 = 1024 * 1024;

/// Payload encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// JSON (RFC 8259).
    #[default]
    Json,
    /// CBOR (RFC 8949).
    Cbor,
}

/// A report the sink stage hands to the manager. Implemented by the QoS monitor's
/// [`RawReport`]; the sink's own report type implements it too.
pub trait ManagedReport: Serialize + Send + 'static {
    /// The report's namespace (the IOAM Namespace-ID, seed III-A).
    fn ns_id(&self) -> u32;
    /// The QoS monitor's input for this report, if it has one.
    fn qos_input(&self) -> Option<Cow<'_, RawReport>>;
}

impl ManagedReport for RawReport {
    fn ns_id(&self) -> u32 {
        self.namespace
    }
    fn qos_input(&self) -> Option<Cow<'_, RawReport>> {
        Some(Cow::Borrowed(self))
    }
}

/// The sink's reports go to the INT manager as they are (published on `raw/<app>/<ns>`) and
/// feed its QoS monitor through [`RawReport::from`] (III-E, III-F).
impl ManagedReport for IntReport {
    fn ns_id(&self) -> u32 {
        self.ns_id as u32
    }
    fn qos_input(&self) -> Option<Cow<'_, RawReport>> {
        Some(Cow::Owned(RawReport::from(self)))
    }
}

/// One PUB message: topic frame and payload frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    /// `raw/<app_id>/<ns_id>` or `qos/<app_id>/<ns_id>`.
    pub topic: String,
    /// The report, JSON or CBOR.
    pub payload: Vec<u8>,
}

/// Manager configuration.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// REP endpoint to bind (`tcp://127.0.0.1:*` picks a free port).
    pub rules_endpoint: String,
    /// PUB endpoint to bind.
    pub reports_endpoint: String,
    /// Encoding of published reports.
    pub report_encoding: Encoding,
    /// Namespace table limits and re-send interval.
    pub table: TableConfig,
    /// QoS monitor limits.
    pub qos: QosConfig,
    /// A QoS window is closed this long after its end, so reports in flight land in it.
    pub qos_grace: Duration,
    /// Longest wait for a request before the loop drains reports and ticks the QoS windows;
    /// also bounds how long a stop takes.
    pub poll_interval: Duration,
    /// Most requests answered per loop turn (then reports get their turn).
    pub request_batch: usize,
    /// Most reports taken from the channel per loop turn.
    pub report_batch: usize,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            rules_endpoint: DEFAULT_RULES_ENDPOINT.into(),
            reports_endpoint: DEFAULT_REPORTS_ENDPOINT.into(),
            report_encoding: Encoding::Json,
            table: TableConfig::default(),
            qos: QosConfig::default(),
            qos_grace: Duration::from_millis(100),
            poll_interval: Duration::from_millis(5),
            request_batch: 64,
            report_batch: 1024,
        }
    }
}

/// Receives each new table snapshot (the daemon publishes it to the workers).
pub type SnapshotSink = Box<dyn FnMut(Arc<TableSnapshot>) + Send>;
/// The clock the QoS windows run on, ns: the same clock as the sink's timestamps.
pub type Clock = Box<dyn Fn() -> u64 + Send>;

/// How long a closing PUB socket may keep sending what was queued before the stop (ms).
const PUB_LINGER_MS: i32 = 250;

/// Wall-clock time in ns since the Unix epoch (the IOAM/PTP-style timestamp base).
pub fn unix_clock() -> Clock {
    Box::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    })
}

/// The running manager. Dropping it stops the thread.
#[derive(Debug)]
pub struct IntManager {
    rules_endpoint: String,
    reports_endpoint: String,
    counters: Arc<Mutex<ManagerCounters>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

fn zerr(what: &str, e: zmq::Error) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

fn bound_endpoint(s: &zmq::Socket) -> io::Result<String> {
    s.get_last_endpoint()
        .map_err(|e| zerr("endpoint", e))?
        .map_err(|_| io::Error::other("endpoint is not UTF-8"))
}

impl IntManager {
    /// Binds both sockets (errors are returned here, not on the thread) and starts the thread.
    /// The first snapshot (the empty table) is handed to `on_snapshot` before any request.
    pub fn spawn<R: ManagedReport>(
        cfg: ManagerConfig,
        reports: Receiver<R>,
        on_snapshot: SnapshotSink,
        clock: Clock,
    ) -> io::Result<IntManager> {
        // No in-band requests: a receiver whose sender is gone.
        let (_, inband) = std::sync::mpsc::sync_channel(0);
        Self::spawn_with_inband(cfg, reports, inband, on_snapshot, clock)
    }

    /// [`IntManager::spawn`], also taking in-band INT requests (0x32, decoded and validated
    /// by the daemon as rule API installs) from `inband`: each creates or refreshes its
    /// namespace ([`ManagerCore::on_inband_request`]) and a change is published as a snapshot.
    pub fn spawn_with_inband<R: ManagedReport>(
        cfg: ManagerConfig,
        reports: Receiver<R>,
        inband: Receiver<Rule>,
        on_snapshot: SnapshotSink,
        clock: Clock,
    ) -> io::Result<IntManager> {
        let ctx = zmq::Context::new();
        let rep = ctx.socket(zmq::REP).map_err(|e| zerr("REP socket", e))?;
        rep.set_linger(0).map_err(|e| zerr("REP linger", e))?;
        rep.set_maxmsgsize(MAX_WIRE_MESSAGE)
            .map_err(|e| zerr("REP maxmsgsize", e))?;
        rep.bind(&cfg.rules_endpoint)
            .map_err(|e| zerr(&format!("bind {}", cfg.rules_endpoint), e))?;
        let publ = ctx.socket(zmq::PUB).map_err(|e| zerr("PUB socket", e))?;
        // Reports published just before a stop are still in the socket's queue when it
        // closes: give them a bounded time to reach connected subscribers (linger 0 dropped
        // the last report of a run now and then).
        publ.set_linger(PUB_LINGER_MS)
            .map_err(|e| zerr("PUB linger", e))?;
        publ.bind(&cfg.reports_endpoint)
            .map_err(|e| zerr(&format!("bind {}", cfg.reports_endpoint), e))?;
        let rules_endpoint = bound_endpoint(&rep)?;
        let reports_endpoint = bound_endpoint(&publ)?;

        let core = ManagerCore::new(
            cfg.table,
            cfg.qos,
            cfg.report_encoding,
            cfg.qos_grace.as_nanos() as u64,
        );
        let counters = Arc::new(Mutex::new(ManagerCounters::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut lp = Loop {
            core,
            rep,
            publ,
            reports,
            reports_open: true,
            inband,
            inband_open: true,
            on_snapshot,
            clock,
            cfg,
            shared: Arc::clone(&counters),
            _ctx: ctx,
        };
        let st = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("int-manager".into())
            .spawn(move || lp.run(&st))?;
        Ok(IntManager {
            rules_endpoint,
            reports_endpoint,
            counters,
            stop,
            handle: Some(handle),
        })
    }

    /// The bound rule API endpoint (the port resolved if `*` was asked for).
    pub fn rules_endpoint(&self) -> &str {
        &self.rules_endpoint
    }
    /// The bound report endpoint.
    pub fn reports_endpoint(&self) -> &str {
        &self.reports_endpoint
    }
    /// The counters as of the end of the thread's last loop turn.
    pub fn counters(&self) -> ManagerCounters {
        // A poisoned lock means the thread panicked mid-copy; the copy is still plain data.
        match self.counters.lock() {
            Ok(c) => *c,
            Err(p) => *p.into_inner(),
        }
    }
    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }
    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for IntManager {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Loop<R> {
    core: ManagerCore,
    rep: zmq::Socket,
    publ: zmq::Socket,
    reports: Receiver<R>,
    reports_open: bool,
    inband: Receiver<Rule>,
    inband_open: bool,
    on_snapshot: SnapshotSink,
    clock: Clock,
    cfg: ManagerConfig,
    shared: Arc<Mutex<ManagerCounters>>,
    // Dropped last: sockets must close before their context terminates.
    _ctx: zmq::Context,
}

impl<R: ManagedReport> Loop<R> {
    fn run(&mut self, stop: &AtomicBool) {
        let first = self.core.publish_snapshot();
        (self.on_snapshot)(first);
        let mut out = Vec::new();
        let poll_ms = self.cfg.poll_interval.as_millis().clamp(1, 1000) as i64;
        while !stop.load(Ordering::Relaxed) {
            // Wait for a request, at most one poll interval; errors (EINTR) just loop.
            if self.rep.poll(zmq::POLLIN, poll_ms).unwrap_or(0) > 0 {
                self.serve_requests();
            }
            self.drain_inband();
            self.drain_reports();
            self.core.tick((self.clock)(), &mut out);
            for p in out.drain(..) {
                self.publish(&p);
            }
            if let Ok(mut c) = self.shared.lock() {
                *c = self.core.counters();
            }
        }
    }

    fn serve_requests(&mut self) {
        for _ in 0..self.cfg.request_batch.max(1) {
            let frames = match self.rep.recv_multipart(zmq::DONTWAIT) {
                Ok(f) => f,
                // EAGAIN: nothing more queued. Other errors leave the REP state unchanged.
                Err(_) => return,
            };
            let (reply, changed) = match frames.as_slice() {
                [one] => {
                    let h = self.core.handle_message(one);
                    (h.reply, h.changed)
                }
                [] => (self.core.handle_message(&[]).reply, false),
                [first, ..] => (self.core.reject_multipart(first, frames.len()), false),
            };
            // Publish before replying: a controller that reads "installed" / "removed" can
            // count on the dataplane's next snapshot carrying the change.
            if changed {
                let s = self.core.publish_snapshot();
                (self.on_snapshot)(s);
            }
            if self.rep.send(reply, 0).is_err() {
                self.core.count_reply_send_error();
            }
        }
    }

    /// Applies queued in-band requests, then publishes one snapshot if any changed the table.
    fn drain_inband(&mut self) {
        if !self.inband_open {
            return;
        }
        let mut changed = false;
        for _ in 0..self.cfg.request_batch.max(1) {
            match self.inband.try_recv() {
                Ok(rule) => changed |= self.core.on_inband_request(rule),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.inband_open = false;
                    break;
                }
            }
        }
        if changed {
            let s = self.core.publish_snapshot();
            (self.on_snapshot)(s);
        }
    }

    fn drain_reports(&mut self) {
        if !self.reports_open {
            return;
        }
        for _ in 0..self.cfg.report_batch.max(1) {
            match self.reports.try_recv() {
                Ok(r) => {
                    if let Some(p) = self.core.on_report(&r) {
                        self.publish(&p);
                    }
                }
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    // The sink is gone; the rule API keeps serving.
                    self.reports_open = false;
                    return;
                }
            }
        }
    }

    fn publish(&mut self, p: &Publication) {
        let ok = self
            .publ
            .send(p.topic.as_bytes(), zmq::SNDMORE)
            .and_then(|_| self.publ.send(&p.payload[..], 0));
        if ok.is_err() {
            self.core.count_publish_error();
        }
    }
}
