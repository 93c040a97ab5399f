//! Features as plug-ins: what a feature (the UPF, INT, and next the Kestrel sketches,
//! fridges, DTA export, ...) gives the daemon, and where its stages go.
//!
//! A pipeline is a main stage (`xconnect`, `l3fwd`, or a feature's, as the UPF's) with the
//! enabled features' stages around it:
//!
//! ```text
//!  rx -> [classify] -> [steer] -> Place::Ingress .. -> main -> Place::AfterUpf ..
//!     -> egress queues (per port) -> taps(port) -> tx
//! ```
//!
//! The daemon (`crate::daemon`) builds every worker's pipeline from the features the
//! configuration enables (`crate::registry`), calls their control-side hooks from its loop,
//! and joins their metrics and summary lines to its own. It names none of them.

use crate::error::{ConfigError, RunError};
use crate::metrics::Exposition;
use crate::platform::Platform;
use crate::telemetry::{Kind as TelemetryKind, Telemetry};
use peregrine_dataplane::io::PortId;
use peregrine_dataplane::qos::QfiMap;
use peregrine_dataplane::runtime::{
    ControlPacket, EgressConfig, Publisher, Reasons, Running, Stage, Tap,
};
use peregrine_dataplane::stages::l3fwd::RouteTable;
use peregrine_dataplane::upf::UpfTables;
use peregrine_dataplane::PacketBuf;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

/// Where a feature's stage runs in every worker's pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Before the main stage (the UPF's): packets as received, after classification.
    Ingress,
    /// After the main stage, before the egress queues: packets the UPF (or router) has
    /// decided to send, with their final headers.
    AfterUpf,
}

/// What a feature gets while one worker's pipeline is built.
#[derive(Debug)]
pub struct Build<'a> {
    /// The worker's index (per-worker counters are indexed by it).
    pub worker: usize,
    /// The shared drop-reason registry: register reasons here so every worker's ids agree.
    pub reasons: &'a mut Reasons,
    /// The daemon's route table (republished on SIGHUP), for stages that route.
    pub routes: &'a Publisher<RouteTable>,
    /// The shared classifier runs first in this pipeline: every packet's `PacketMeta` is
    /// fresh when it reaches a feature's stage (`upf::Upf::after_classifier`).
    pub classified: bool,
}

/// The installed PFCP sessions as the workers forward with them (the UPF's rule snapshot,
/// static and N4 sessions alike) and the QFI -> egress queue map: for features that key
/// telemetry by session (Kestrel's collector).
#[derive(Debug, Clone)]
pub struct Sessions {
    pub tables: Arc<Publisher<UpfTables>>,
    pub qfi_map: QfiMap,
}

/// A worker's stages, boxed for its buffer type.
pub type Stages<B> = Vec<Box<dyn Stage<B>>>;

/// A worker's taps on one port, boxed for its buffer type.
pub type Taps<B> = Vec<Box<dyn Tap<B>>>;

/// What a feature's section parses into. Implemented by the feature's type; registered by
/// one line in `crate::registry`.
pub trait Configure: Sized {
    /// The TOML section (`"upf"` for `[upf]`); also the feature's name in the summary.
    const SECTION: &'static str;

    /// Parse and validate the section; `Ok(None)` when the feature is off (no section, and
    /// the pipeline kind does not need it). Errors name the key (`upf.mtu: ...`).
    fn configure(section: Option<&toml::Value>, p: &Platform) -> Result<Option<Self>, ConfigError>;
}

/// An enabled feature, for workers with buffers `B`. Every hook but [`finish`](Self::finish)
/// has a default that does nothing, so a feature implements what it uses.
///
/// Order of calls: [`prepare`](Self::prepare) (before any worker starts: bind sockets,
/// build tables; an error stops the run before packets flow), the stage builders (once per
/// worker, on the control thread), [`start`](Self::start) (workers run), then the control
/// loop's [`on_control_packet`](Self::on_control_packet) / [`tick`](Self::tick) /
/// [`metrics`](Self::metrics), and [`finish`](Self::finish) after the workers stopped.
pub trait Feature<B: PacketBuf>: Send {
    /// The feature's name (its section's).
    fn name(&self) -> &'static str;

    /// Before workers start. `egress` is the per-port egress scheduler configuration the
    /// runtime will use; a feature that schedules (the UPF) fills its ports.
    fn prepare(
        &mut self,
        _p: &Platform,
        _egress: &mut [Option<EgressConfig>],
    ) -> Result<(), RunError> {
        Ok(())
    }

    /// The feature's stages read the classifier's `PacketMeta` (flow offsets, inner 5-tuple
    /// hash, TEID, QFI): the daemon then places the shared `Classify` stage first in every
    /// worker's pipeline and sets [`Build::classified`].
    fn reads_packet_meta(&self) -> bool {
        false
    }

    /// Its stages at [`Place::Ingress`] may change a packet's headers without updating its
    /// `PacketMeta`. The record would then be stale for the stages after them, so the daemon
    /// does not place the classifier (they parse for themselves).
    fn stales_packet_meta(&self) -> bool {
        false
    }

    /// The pipeline's main stage, for the feature the pipeline kind names (`upf`).
    fn main_stage(&self, _b: &mut Build<'_>) -> Option<Box<dyn Stage<B>>> {
        None
    }

    /// This worker's stages at `place`, appended to `out` in order.
    fn stages(&self, _place: Place, _b: &mut Build<'_>, _out: &mut Stages<B>) {}

    /// This worker's post-dequeue taps on egress port `port` (called for every port),
    /// appended to `out`: they see each burst leaving the port's egress scheduler, with the
    /// packets' metadata (`PacketMeta`: sojourn, queue, colour, TEID, QFI), before tx.
    fn taps(&self, _port: PortId, _b: &mut Build<'_>, _out: &mut Taps<B>) {}

    /// The feature's own IP addresses (the UPF's N3 / N6): the daemon answers ARP / ND for
    /// them and solicits next hops from them (`crate::nexthop`).
    fn local_addrs(&self) -> Vec<IpAddr> {
        Vec::new()
    }

    /// The daemon's route publisher, before [`start`](Self::start): for control-side frames
    /// that must follow the current routes and resolved next hops (End Markers).
    fn use_routes(&mut self, _routes: &Arc<Publisher<RouteTable>>) {}

    /// The sessions this feature installs (the UPF's, after [`prepare`](Self::prepare)).
    fn sessions(&self) -> Option<Sessions> {
        None
    }

    /// The daemon's [`Sessions`] (if a feature installs any), after every `prepare`.
    fn use_sessions(&mut self, _s: &Sessions) {}

    /// Workers run: start what needs them (N4 with End Markers through the injector, ...).
    fn start(&mut self, _running: &Running) -> Result<(), RunError> {
        Ok(())
    }

    /// An exception packet the workers handed to the control thread (ARP, ND, buffered
    /// downlink, ...). Every feature sees every packet.
    fn on_control_packet(&mut self, _now: Instant, _p: &ControlPacket) {}

    /// The control loop's tick (every ~50 ms; more often under exception traffic): pumps,
    /// exporters, windows. `now` is the loop's clock; a feature never sleeps here.
    fn tick(&mut self, _now: Instant, _running: &Running) {}

    /// Every worker has reached the end of its run and handed over what its taps held; the
    /// workers still send what is injected (`peregrine_dataplane::runtime::end`). Close what
    /// is open (the last windows) so its telemetry reaches the bus while consumers can still
    /// send it. Called once, before a last tick; by default that tick.
    fn drain(&mut self, now: Instant, running: &Running) {
        self.tick(now, running);
    }

    /// Add this feature's families to the metrics page (after the daemon's own).
    fn metrics(&self, _page: &mut Exposition) {}

    /// Telemetry kinds this feature can put on the control loop's bus (`crate::telemetry`).
    fn telemetry_produces(&self) -> Vec<TelemetryKind> {
        Vec::new()
    }

    /// Kinds it consumes, each with the configuration key that asked (named in errors).
    fn telemetry_wants(&self) -> Vec<(TelemetryKind, &'static str)> {
        Vec::new()
    }

    /// A consumer wants `kind`: produce it (called once per kind, before
    /// [`prepare`](Self::prepare)).
    fn telemetry_request(&mut self, _kind: TelemetryKind) {}

    /// After every feature's [`tick`](Self::tick): move the records produced since the last
    /// call to `out`.
    fn telemetry_out(&mut self, _out: &mut Vec<Telemetry>) {}

    /// What the producers put out in this iteration (called only when there is some).
    fn telemetry_in(&mut self, _records: &[Telemetry]) {}

    /// Workers have stopped: shut down (sockets, threads) and report.
    fn finish(self: Box<Self>) -> FeatureReport;
}

impl<B: PacketBuf> crate::telemetry::TelemetryHooks for dyn Feature<B> {
    fn produces(&self) -> Vec<TelemetryKind> {
        self.telemetry_produces()
    }
    fn wants(&self) -> Vec<(TelemetryKind, &'static str)> {
        self.telemetry_wants()
    }
    fn request(&mut self, k: TelemetryKind) {
        self.telemetry_request(k)
    }
}

/// A feature's part of the end-of-run summary.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureReport {
    /// The summary JSON's key (the feature's name).
    pub name: &'static str,
    /// Its figures, under `name` in the JSON summary.
    pub json: serde_json::Value,
    /// Its lines in the printed summary (each ending in a newline).
    pub text: String,
}

impl FeatureReport {
    /// A report of `figures` (serialised to JSON) and `text`.
    pub fn new(name: &'static str, figures: &impl serde::Serialize, text: String) -> Self {
        FeatureReport {
            name,
            json: serde_json::to_value(figures).unwrap_or(serde_json::Value::Null),
            text,
        }
    }
}
