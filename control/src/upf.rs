//! The daemon's UPF: the `[upf]` configuration section, the glue between the N4 endpoint,
//! the rule compiler and the workers' snapshot, usage collection for URRs, per-QFI
//! 3GPP-PM style windows and the Prometheus page.

use crate::config::{invalid, ConfigError};
use crate::metrics::{Exposition, Kind};
use crate::n4::{N4Status, SessionRules};
use peregrine_dataplane::qos::scheduler::{QfiMap, SchedulerConfig, ShaperConfig, NUM_QFI};
use peregrine_dataplane::runtime::egress::EgressConfig;
use peregrine_dataplane::runtime::{Counters, Publisher, Reasons};
use peregrine_dataplane::upf::tables::Direction;
use peregrine_dataplane::upf::{UpfStats, UpfTables};
use peregrine_n4::usage::Usage;
use peregrine_n4::{Reject, Session};
use peregrine_pfcp::ie::NodeId;
use peregrine_rules::static_sessions::{
    self, N3Addresses, OuterMix, StaticSession, SyntheticParams,
};
use peregrine_rules::{Compiler, CompilerConfig};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Static sessions get SEIDs with the top bit set, so they never meet the SEIDs the N4 node
/// allocates (which count up from 1).
pub const STATIC_SEID_BIT: u64 = 1 << 63;

/// `[upf]`: the UPF's addresses, N4, limits, QoS and static sessions.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UpfSection {
    /// PFCP Node ID: an IP address or an FQDN.
    pub node_id: String,
    /// Local GTP-U (N3/N9) addresses, at most one per family.
    pub n3: Vec<IpAddr>,
    /// N6 addresses: sources of ICMP errors sent toward data-network hosts.
    #[serde(default)]
    pub n6: Vec<IpAddr>,
    /// PFCP listen addresses (UDP, usually port 8805); empty: static sessions only.
    #[serde(default)]
    pub pfcp: Vec<SocketAddr>,
    /// Prometheus endpoint (`GET /metrics`), if any.
    pub metrics: Option<SocketAddr>,
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// Largest outer IP packet sent; bigger ones get ICMP errors (see the UPF stage docs).
    #[serde(default = "default_mtu")]
    pub mtu: u16,
    #[serde(default = "default_ei_pps")]
    pub error_indication_pps: u32,
    /// How often URR usage is collected from the workers and checked against triggers.
    #[serde(default = "default_usage_ms")]
    pub usage_interval_ms: u64,
    /// Heartbeat Requests to each associated SMF, seconds.
    #[serde(default = "default_heartbeat_s")]
    pub heartbeat_interval_s: u64,
    /// Overrides of the default QFI -> egress queue map: `[[qfi, qid], ...]`.
    #[serde(default)]
    pub qfi_to_qid: Vec<[u8; 2]>,
    /// Ports with the 8-queue egress scheduler (SP + WRR) and optional shaper.
    #[serde(default)]
    pub egress: Vec<EgressPort>,
    /// Statically configured sessions (no SMF needed).
    #[serde(default)]
    pub session: Vec<StaticSession>,
    /// Generated sessions numbered like `pg-gen`'s traffic.
    pub synthetic: Option<Synthetic>,
}

fn default_max_sessions() -> usize {
    100_000
}
fn default_mtu() -> u16 {
    1500
}
fn default_ei_pps() -> u32 {
    100
}
fn default_usage_ms() -> u64 {
    100
}
fn default_heartbeat_s() -> u64 {
    10
}

/// One scheduled egress port.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EgressPort {
    pub port: String,
    /// Port shaper rate, Mbit/s (none: as fast as the port takes).
    pub shaper_mbps: Option<u64>,
}

/// `[upf.synthetic]`: `sessions` sessions as `pg-gen` numbers its UEs.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Synthetic {
    pub sessions: usize,
    #[serde(default = "one")]
    pub seed: u64,
    #[serde(default = "default_qfis")]
    pub qfis: Vec<u8>,
    #[serde(default = "default_gnbs")]
    pub gnbs: u32,
    /// "v4", "v6" or "mixed", as `pg-gen --outer`.
    #[serde(default = "mixed")]
    pub outer: String,
    pub mbr_kbps: Option<u64>,
}

fn one() -> u64 {
    1
}
fn default_qfis() -> Vec<u8> {
    vec![1, 5, 9]
}
fn default_gnbs() -> u32 {
    4
}
fn mixed() -> String {
    "mixed".into()
}

impl UpfSection {
    pub fn n3_v4(&self) -> Option<Ipv4Addr> {
        self.n3.iter().find_map(|a| match a {
            IpAddr::V4(a) => Some(*a),
            _ => None,
        })
    }

    pub fn n3_v6(&self) -> Option<Ipv6Addr> {
        self.n3.iter().find_map(|a| match a {
            IpAddr::V6(a) => Some(*a),
            _ => None,
        })
    }

    pub fn node_id(&self) -> NodeId {
        match self.node_id.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => NodeId::Ipv4(a),
            Ok(IpAddr::V6(a)) => NodeId::Ipv6(a),
            Err(_) => NodeId::fqdn(&self.node_id),
        }
    }

    /// Meter and URR slots: two metered directions and two URRs per session on average.
    pub fn slots(&self) -> u32 {
        u32::try_from(self.max_sessions.saturating_mul(2)).unwrap_or(u32::MAX)
    }

    pub fn qfi_map(&self) -> QfiMap {
        let mut m = QfiMap::default();
        for [q, id] in &self.qfi_to_qid {
            m.set(*q, *id);
        }
        m
    }

    /// Static and synthetic sessions as n4 sessions (SEIDs tagged with [`STATIC_SEID_BIT`]).
    pub fn static_sessions(&self) -> Result<Vec<Session>, ConfigError> {
        let mut all = self.session.clone();
        if let Some(s) = &self.synthetic {
            let p = SyntheticParams {
                seed: s.seed,
                qfis: s.qfis.clone(),
                gnbs: s.gnbs,
                outer: match s.outer.as_str() {
                    "v4" => OuterMix::V4,
                    "v6" => OuterMix::V6,
                    _ => OuterMix::Mixed,
                },
                mbr_kbps: s.mbr_kbps,
                ..SyntheticParams::default()
            };
            let base = all.iter().map(|s| s.seid).max().unwrap_or(0);
            all.extend(
                static_sessions::synthetic(s.sessions, &p)
                    .into_iter()
                    .map(|mut s| {
                        s.seid += base;
                        s
                    }),
            );
        }
        let n3 = N3Addresses {
            v4: self.n3_v4(),
            v6: self.n3_v6(),
        };
        let mut sessions =
            static_sessions::to_sessions(&all, n3).map_err(|e| invalid("upf.session", e))?;
        for s in &mut sessions {
            s.up_seid |= STATIC_SEID_BIT;
        }
        Ok(sessions)
    }

    pub fn validate(&self, port_index: impl Fn(&str) -> Option<u16>) -> Result<(), ConfigError> {
        if self.node_id.is_empty() {
            return Err(invalid("upf.node_id", "must not be empty"));
        }
        if self.n3.is_empty() {
            return Err(invalid("upf.n3", "needs at least one local GTP-U address"));
        }
        if self.n3.iter().filter(|a| a.is_ipv4()).count() > 1
            || self.n3.iter().filter(|a| a.is_ipv6()).count() > 1
        {
            return Err(invalid("upf.n3", "at most one address per family"));
        }
        if self.max_sessions == 0 || self.max_sessions > 10_000_000 {
            return Err(invalid("upf.max_sessions", "must be 1..=10000000"));
        }
        if !(576..=9000).contains(&self.mtu) {
            return Err(invalid(
                "upf.mtu",
                format!("must be 576..=9000, got {}", self.mtu),
            ));
        }
        if self.usage_interval_ms == 0 {
            return Err(invalid("upf.usage_interval_ms", "must be positive"));
        }
        if self.heartbeat_interval_s == 0 {
            return Err(invalid("upf.heartbeat_interval_s", "must be positive"));
        }
        for (i, [q, id]) in self.qfi_to_qid.iter().enumerate() {
            if *q as usize >= NUM_QFI || *id >= 8 {
                return Err(invalid(
                    format!("upf.qfi_to_qid[{i}]"),
                    format!("[{q}, {id}]: QFI must be 0..=63 and queue 0..=7"),
                ));
            }
        }
        for (i, e) in self.egress.iter().enumerate() {
            if port_index(&e.port).is_none() {
                return Err(invalid(
                    format!("upf.egress[{i}].port"),
                    format!("no port named `{}`", e.port),
                ));
            }
            if e.shaper_mbps == Some(0) {
                return Err(invalid(
                    format!("upf.egress[{i}].shaper_mbps"),
                    "must be positive",
                ));
            }
        }
        if let Some(s) = &self.synthetic {
            if !["v4", "v6", "mixed"].contains(&s.outer.as_str()) {
                return Err(invalid(
                    "upf.synthetic.outer",
                    format!("`{}`: v4, v6 or mixed", s.outer),
                ));
            }
            if s.qfis.is_empty() || s.qfis.iter().any(|q| *q > 63) {
                return Err(invalid("upf.synthetic.qfis", "QFIs 0..=63, at least one"));
            }
            if s.gnbs == 0 {
                return Err(invalid("upf.synthetic.gnbs", "must be positive"));
            }
        }
        let n = self.static_sessions()?.len();
        if n > self.max_sessions {
            return Err(invalid(
                "upf.session",
                format!(
                    "{n} static sessions exceed max_sessions {}",
                    self.max_sessions
                ),
            ));
        }
        // Compile them now, so a bad static rule is a config error, not a run-time surprise.
        self.compiler_with_static_sessions()?;
        Ok(())
    }

    pub fn compiler_config(&self) -> CompilerConfig {
        CompilerConfig {
            local_v4: self.n3_v4().into_iter().collect(),
            local_v6: self.n3_v6().into_iter().collect(),
            max_meter_slots: self.slots(),
            max_urr_slots: self.slots(),
        }
    }

    /// A compiler holding the static sessions.
    pub fn compiler_with_static_sessions(&self) -> Result<Compiler, ConfigError> {
        let mut c = Compiler::new(self.compiler_config());
        for s in self.static_sessions()? {
            c.upsert(&s).map_err(|e| {
                invalid(
                    "upf.session",
                    format!("static session {:#x}: {e}", s.up_seid & !STATIC_SEID_BIT),
                )
            })?;
        }
        Ok(c)
    }

    /// Egress scheduler per port index.
    pub fn egress_configs(
        &self,
        nports: usize,
        port_index: impl Fn(&str) -> Option<u16>,
    ) -> Vec<Option<EgressConfig>> {
        let mut v = vec![None; nports];
        let default_qid = self.qfi_map().qid(9);
        for e in &self.egress {
            if let Some(p) = port_index(&e.port) {
                let scheduler = SchedulerConfig {
                    shaper: e.shaper_mbps.map(|m| ShaperConfig {
                        rate_bytes_per_s: m * 125_000,
                        // 2 ms of line rate, and at least 16 full-size frames.
                        burst_bytes: (m * 250).max(16 * 1514),
                    }),
                    ..SchedulerConfig::default()
                };
                v[p as usize] = Some(EgressConfig {
                    scheduler,
                    default_qid,
                });
            }
        }
        v
    }
}

/// The rule side of the N4 endpoint: the compiler, the snapshot publisher the workers read,
/// and the workers' usage counters.
pub struct DaemonRules {
    pub compiler: Compiler,
    pub publisher: Arc<Publisher<UpfTables>>,
    pub stats: Vec<Arc<UpfStats>>,
    /// (SEID, URR ID) whose volume quota is used up, with that quota: their PDRs' FARs are
    /// compiled as DROP until the SMF provisions a new quota (Update URR).
    exhausted: BTreeMap<(u64, u32), Option<peregrine_pfcp::ie::Volume>>,
    /// (generation, publish time in the publisher's clock) of recent publishes.
    published_at: std::collections::VecDeque<(u64, u64)>,
}

impl std::fmt::Debug for DaemonRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonRules")
            .field("sessions", &self.compiler.stats().sessions)
            .finish()
    }
}

impl DaemonRules {
    pub fn new(
        compiler: Compiler,
        publisher: Arc<Publisher<UpfTables>>,
        stats: Vec<Arc<UpfStats>>,
    ) -> DaemonRules {
        DaemonRules {
            compiler,
            publisher,
            stats,
            exhausted: BTreeMap::new(),
            published_at: std::collections::VecDeque::new(),
        }
    }

    /// A session with the FARs of PDRs that count against an exhausted quota set to DROP
    /// (TS 29.244 section 5.2.2.2: forwarding stops when the quota is reached).
    fn enforce_quota(&mut self, s: &Session) -> Option<Session> {
        // A new quota (or a removed URR) lifts the block.
        self.exhausted.retain(|(seid, urr), q| {
            *seid != s.up_seid || s.urrs.get(urr).is_some_and(|u| u.volume_quota == *q)
        });
        let ids: Vec<u32> = self
            .exhausted
            .range((s.up_seid, 0)..=(s.up_seid, u32::MAX))
            .map(|((_, u), _)| *u)
            .collect();
        if ids.is_empty() {
            return None;
        }
        let mut s = s.clone();
        let fars: BTreeSet<u32> = s
            .pdrs
            .values()
            .filter(|p| p.urr_ids.iter().any(|u| ids.contains(u)))
            .map(|p| p.far_id)
            .collect();
        for f in fars {
            if let Some(far) = s.fars.get_mut(&f) {
                far.apply_action =
                    peregrine_pfcp::ie::Bitmap(peregrine_pfcp::ie::apply_action::DROP);
                far.forwarding = None;
            }
        }
        Some(s)
    }
}

impl SessionRules for DaemonRules {
    fn upsert(&mut self, s: &Session) -> Result<(), Reject> {
        let r = match self.enforce_quota(s) {
            Some(q) => self.compiler.upsert(&q),
            None => self.compiler.upsert(s),
        };
        r.map_err(|e| e.reject())
    }

    fn check(&self, s: &Session) -> Result<(), Reject> {
        self.compiler.check(s).map_err(|e| e.reject())
    }

    fn remove(&mut self, up_seid: u64) {
        self.compiler.remove(up_seid);
        self.exhausted.retain(|(seid, _), _| *seid != up_seid);
    }

    fn publish(&mut self) -> u64 {
        let g = self.publisher.publish(self.compiler.build());
        let at = self.publisher.now_ns();
        self.publisher.reclaim();
        if self.published_at.len() == 1024 {
            self.published_at.pop_front();
        }
        self.published_at.push_back((g, at));
        g
    }

    fn seen(&mut self, g: u64) -> Option<Duration> {
        let seen = self.publisher.seen_at(g)?;
        // Generations are published in order; forget the ones before `g`.
        while self.published_at.front().is_some_and(|(pg, _)| *pg < g) {
            self.published_at.pop_front();
        }
        let at = match self.published_at.front() {
            Some(&(pg, at)) if pg == g => at,
            _ => seen,
        };
        Some(Duration::from_nanos(seen.saturating_sub(at)))
    }

    fn usage(&mut self, up_seid: u64, urr_id: u32) -> Option<Usage> {
        let slot = self.compiler.urr_slot(up_seid, urr_id)?;
        let mut u = Usage::default();
        let (mut first, mut last) = (u64::MAX, 0u64);
        for st in &self.stats {
            let w = st.urr(slot);
            u.ul_bytes += w.ul_bytes;
            u.dl_bytes += w.dl_bytes;
            u.ul_pkts += w.ul_pkts;
            u.dl_pkts += w.dl_pkts;
            if w.ul_pkts + w.dl_pkts > 0 {
                first = first.min(w.first_pkt_ns);
                last = last.max(w.last_pkt_ns);
            }
        }
        // Worker clocks start a few milliseconds before the N4 clock; Time of First / Last
        // Packet is reported to the second, so the offset is not corrected.
        if first != u64::MAX {
            u.first_pkt_ns = Some(first);
            u.last_pkt_ns = Some(last);
        }
        Some(u)
    }

    fn quota_exhausted(&mut self, session: &Session, urr_id: u32) {
        let quota = session.urrs.get(&urr_id).and_then(|u| u.volume_quota);
        self.exhausted.insert((session.up_seid, urr_id), quota);
        if let Err(r) = self.upsert(session) {
            tracing::error!(
                seid = session.up_seid,
                cause = r.cause,
                "cannot stop forwarding at quota"
            );
        }
    }
}

/// End Markers built from the route table and sent through worker 0's tx queue.
#[derive(Debug)]
pub struct InjectEndMarkers {
    pub builder: crate::end_marker::EndMarkerBuilder,
    pub injector: peregrine_dataplane::runtime::Injector,
}

impl crate::n4::EndMarkerSink for InjectEndMarkers {
    fn send(
        &mut self,
        seid: u64,
        far_id: u32,
        old: &peregrine_pfcp::ie::OuterHeaderCreation,
    ) -> bool {
        let (port, frame) = match self.builder.frame(old) {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(seid, far_id, %e, "End Marker not built");
                return false;
            }
        };
        match self.injector.inject(0, port, &frame) {
            Ok(()) => {
                tracing::info!(seid, far_id, teid = ?old.teid, peer = ?old.ipv4.map(IpAddr::V4).or(old.ipv6.map(IpAddr::V6)), "End Marker sent on the old tunnel");
                true
            }
            Err(e) => {
                tracing::warn!(seid, far_id, %e, "End Marker not sent");
                false
            }
        }
    }
}

/// Per-QFI counters summed over workers, both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QfiTotals {
    pub pkts: u64,
    pub bytes: u64,
    pub drops: u64,
    pub green: u64,
    pub yellow: u64,
    pub red: u64,
}

/// Per-QFI counters, `[direction][qfi]` (0 uplink, 1 downlink).
pub type PerQfi = [[QfiTotals; NUM_QFI]; 2];

/// Sum the per-QFI counters of every worker.
pub fn qfi_totals(stats: &[Arc<UpfStats>]) -> PerQfi {
    let mut t = [[QfiTotals::default(); NUM_QFI]; 2];
    for (d, dir) in [Direction::Uplink, Direction::Downlink]
        .into_iter()
        .enumerate()
    {
        for (q, slot) in t[d].iter_mut().enumerate() {
            for st in stats {
                let u = st.qfi(dir, q as u8);
                slot.pkts += u.pkts;
                slot.bytes += u.bytes;
                slot.drops += u.drops;
                slot.green += u.green;
                slot.yellow += u.yellow;
                slot.red += u.red;
            }
        }
    }
    t
}

/// 3GPP-PM style per-QFI windows (TS 28.552 section 5.4: packets, volume, drops and mean
/// delay per QoS level per granularity period), 1 s here. Mean delay is the sojourn time in
/// our egress queues of the queue the QFI maps to (every QFI of a queue shares its delay).
#[derive(Debug, Default)]
pub struct PmWindows {
    prev: Option<PerQfi>,
    prev_sojourn: Vec<(u64, u64)>,
    /// The last complete window: `[direction][qfi]` deltas, and per-QID mean sojourn (ns).
    pub last: Option<(PerQfi, [Option<u64>; 8])>,
}

impl PmWindows {
    /// Close a window: deltas since the previous call.
    pub fn tick(&mut self, now: PerQfi, c: &Counters) {
        let mut sojourn = vec![(0u64, 0u64); 8];
        for e in &c.egress {
            for (q, s) in e.queues.iter().enumerate().take(8) {
                sojourn[q].0 += s.sojourn_sum_ns;
                sojourn[q].1 += s.sojourn_count;
            }
        }
        if let Some(p) = &self.prev {
            let mut d = [[QfiTotals::default(); NUM_QFI]; 2];
            for (dir, row) in d.iter_mut().enumerate() {
                for (q, out) in row.iter_mut().enumerate() {
                    let (a, b) = (now[dir][q], p[dir][q]);
                    *out = QfiTotals {
                        pkts: a.pkts - b.pkts.min(a.pkts),
                        bytes: a.bytes - b.bytes.min(a.bytes),
                        drops: a.drops - b.drops.min(a.drops),
                        green: a.green - b.green.min(a.green),
                        yellow: a.yellow - b.yellow.min(a.yellow),
                        red: a.red - b.red.min(a.red),
                    };
                }
            }
            let mut delay = [None; 8];
            for q in 0..8 {
                let (s, n) = (
                    sojourn[q]
                        .0
                        .saturating_sub(self.prev_sojourn.get(q).map_or(0, |p| p.0)),
                    sojourn[q]
                        .1
                        .saturating_sub(self.prev_sojourn.get(q).map_or(0, |p| p.1)),
                );
                delay[q] = s.checked_div(n);
            }
            self.last = Some((d, delay));
        }
        self.prev = Some(now);
        self.prev_sojourn = sojourn;
    }
}

/// The Prometheus page.
#[allow(clippy::too_many_arguments)]
pub fn render_metrics(
    port_names: &[String],
    c: &Counters,
    reasons: &Reasons,
    stats: &[Arc<UpfStats>],
    pm: &PmWindows,
    qfi_map: &QfiMap,
    n4: Option<(&N4Status, &peregrine_n4::N4Stats)>,
    compiler_sessions: Option<usize>,
) -> String {
    let mut e = Exposition::new();
    let ctr = Kind::Counter;
    e.family(
        "peregrine_port_rx_packets_total",
        ctr,
        "Packets received by the workers, per port.",
    );
    e.family(
        "peregrine_port_tx_packets_total",
        ctr,
        "Packets sent by the workers, per port.",
    );
    for (i, n) in port_names.iter().enumerate() {
        let l = [("port", n.as_str())];
        e.sample(
            "peregrine_port_rx_packets_total",
            &l,
            c.rx_pkts.get(i).copied().unwrap_or(0) as f64,
        );
        e.sample(
            "peregrine_port_tx_packets_total",
            &l,
            c.tx_pkts.get(i).copied().unwrap_or(0) as f64,
        );
    }
    e.family(
        "peregrine_drops_total",
        ctr,
        "Packets dropped, by named reason.",
    );
    for (i, n) in reasons.names().iter().enumerate() {
        e.sample(
            "peregrine_drops_total",
            &[("reason", n)],
            c.drops.get(i).copied().unwrap_or(0) as f64,
        );
    }
    e.one(
        "peregrine_to_control_total",
        ctr,
        "Packets handed to the control thread.",
        c.to_control as f64,
    );
    let t = qfi_totals(stats);
    e.family(
        "peregrine_qfi_packets_total",
        ctr,
        "UPF packets per direction and QFI (TS 28.552 5.4).",
    );
    e.family(
        "peregrine_qfi_bytes_total",
        ctr,
        "UPF bytes (inner IP) per direction and QFI.",
    );
    e.family(
        "peregrine_qfi_drops_total",
        ctr,
        "UPF drops per direction and QFI.",
    );
    e.family(
        "peregrine_qfi_colour_total",
        ctr,
        "TrTCM (RFC 2698) colours per direction and QFI.",
    );
    for (row, dn) in t.iter().zip(["uplink", "downlink"].iter()) {
        for (q, &x) in row.iter().enumerate() {
            if x.pkts + x.drops == 0 {
                continue;
            }
            let qs = q.to_string();
            let l = [("direction", *dn), ("qfi", qs.as_str())];
            e.sample("peregrine_qfi_packets_total", &l, x.pkts as f64);
            e.sample("peregrine_qfi_bytes_total", &l, x.bytes as f64);
            e.sample("peregrine_qfi_drops_total", &l, x.drops as f64);
            for (cn, v) in [("green", x.green), ("yellow", x.yellow), ("red", x.red)] {
                e.sample(
                    "peregrine_qfi_colour_total",
                    &[("direction", dn), ("qfi", qs.as_str()), ("colour", cn)],
                    v as f64,
                );
            }
        }
    }
    if let Some((w, delay)) = &pm.last {
        e.family(
            "peregrine_qfi_window_packets",
            Kind::Gauge,
            "Packets in the last 1 s window, per direction and QFI.",
        );
        e.family(
            "peregrine_qfi_window_mean_delay_seconds",
            Kind::Gauge,
            "Mean sojourn in our egress queues in the last 1 s window, per QFI (by its queue).",
        );
        for (d, dn) in ["uplink", "downlink"].iter().enumerate() {
            for (q, x) in w[d].iter().enumerate() {
                if x.pkts == 0 {
                    continue;
                }
                let qs = q.to_string();
                let l = [("direction", *dn), ("qfi", qs.as_str())];
                e.sample("peregrine_qfi_window_packets", &l, x.pkts as f64);
                if let Some(ns) = delay[qfi_map.qid(q as u8) as usize] {
                    e.sample(
                        "peregrine_qfi_window_mean_delay_seconds",
                        &l,
                        ns as f64 / 1e9,
                    );
                }
            }
        }
    }
    let mut tot = peregrine_dataplane::upf::UpfTotals::default();
    for s in stats {
        let x = s.totals();
        tot.echo_replies += x.echo_replies;
        tot.error_indications_sent += x.error_indications_sent;
        tot.error_indications_received += x.error_indications_received;
        tot.end_markers_received += x.end_markers_received;
        tot.buffered += x.buffered;
        tot.icmp_errors_sent += x.icmp_errors_sent;
    }
    e.one(
        "peregrine_gtpu_echo_replies_total",
        ctr,
        "GTP-U Echo Responses sent.",
        tot.echo_replies as f64,
    );
    e.one(
        "peregrine_gtpu_error_indications_sent_total",
        ctr,
        "GTP-U Error Indications sent for unknown TEIDs.",
        tot.error_indications_sent as f64,
    );
    e.one(
        "peregrine_gtpu_error_indications_received_total",
        ctr,
        "GTP-U Error Indications received.",
        tot.error_indications_received as f64,
    );
    e.one(
        "peregrine_gtpu_end_markers_received_total",
        ctr,
        "GTP-U End Markers received.",
        tot.end_markers_received as f64,
    );
    e.one(
        "peregrine_buffered_total",
        ctr,
        "Packets handed to the control core for buffering (BUFF).",
        tot.buffered as f64,
    );
    e.one(
        "peregrine_icmp_errors_sent_total",
        ctr,
        "ICMP Packet Too Big / Fragmentation Needed sent.",
        tot.icmp_errors_sent as f64,
    );
    if let Some(n) = compiler_sessions {
        e.one(
            "peregrine_upf_sessions",
            Kind::Gauge,
            "Sessions in the rule tables (static and PFCP).",
            n as f64,
        );
    }
    if let Some((st, ns)) = n4 {
        e.family(
            "peregrine_pfcp_messages_received_total",
            ctr,
            "PFCP messages received, by type.",
        );
        for (t, n) in &ns.rx {
            e.sample(
                "peregrine_pfcp_messages_received_total",
                &[("type", &t.to_string())],
                *n as f64,
            );
        }
        e.family(
            "peregrine_pfcp_messages_sent_total",
            ctr,
            "PFCP messages sent, by type.",
        );
        for (t, n) in &ns.tx {
            e.sample(
                "peregrine_pfcp_messages_sent_total",
                &[("type", &t.to_string())],
                *n as f64,
            );
        }
        e.family(
            "peregrine_pfcp_responses_total",
            ctr,
            "PFCP responses sent, by type and cause.",
        );
        for ((t, c), n) in &ns.responses {
            e.sample(
                "peregrine_pfcp_responses_total",
                &[("type", &t.to_string()), ("cause", &c.to_string())],
                *n as f64,
            );
        }
        e.family(
            "peregrine_pfcp_decode_errors_total",
            ctr,
            "Undecodable PFCP datagrams, by kind.",
        );
        for (k, n) in &ns.decode_errors {
            e.sample(
                "peregrine_pfcp_decode_errors_total",
                &[("kind", k)],
                *n as f64,
            );
        }
        e.one(
            "peregrine_pfcp_duplicates_total",
            ctr,
            "Retransmitted requests answered from the cache.",
            ns.duplicates as f64,
        );
        e.one(
            "peregrine_pfcp_reports_sent_total",
            ctr,
            "Session Report Requests sent.",
            ns.reports_sent as f64,
        );
        e.one(
            "peregrine_pfcp_sessions",
            Kind::Gauge,
            "PFCP sessions.",
            st.sessions as f64,
        );
        e.one(
            "peregrine_pfcp_associations",
            Kind::Gauge,
            "PFCP associations.",
            st.associations as f64,
        );
        e.one(
            "peregrine_rule_publishes_total",
            ctr,
            "Rule snapshots published.",
            st.counts.publishes as f64,
        );
        e.family(
            "peregrine_rule_publish_latency_seconds",
            Kind::Gauge,
            "Rule-publish latency (publish to every worker seen), quantiles of the last 65536.",
        );
        for q in [0.5, 0.99, 1.0] {
            if let Some(us) = st.publish_latency_quantile(q) {
                e.sample(
                    "peregrine_rule_publish_latency_seconds",
                    &[("quantile", &q.to_string())],
                    us as f64 / 1e6,
                );
            }
        }
    }
    e.finish()
}

/// What the UPF adds to the end-of-run summary.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct UpfSummary {
    pub sessions: usize,
    /// (direction, QFI, packets, bytes, drops, green, yellow, red), QFIs with traffic only.
    pub qfi: Vec<QfiRow>,
    pub echo_replies: u64,
    pub error_indications_sent: u64,
    pub pfcp_datagrams_in: u64,
    pub pfcp_datagrams_out: u64,
    pub rule_publishes: u64,
    pub publish_latency_p99_us: Option<u32>,
}

/// One per-QFI line of the summary.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct QfiRow {
    pub direction: &'static str,
    pub qfi: u8,
    pub packets: u64,
    pub bytes: u64,
    pub drops: u64,
    pub green: u64,
    pub yellow: u64,
    pub red: u64,
}

/// The UPF's control-side state in the daemon.
pub struct UpfRuntime {
    pub publisher: Arc<Publisher<UpfTables>>,
    pub stats: Vec<Arc<UpfStats>>,
    compiler: Option<Compiler>,
    static_sessions: usize,
    n4: Option<crate::n4::N4Endpoint>,
    metrics: Option<crate::metrics::MetricsServer>,
    pm: PmWindows,
    last_tick: Instant,
    qfi_map: QfiMap,
    section: UpfSection,
}

impl std::fmt::Debug for UpfRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpfRuntime")
            .field("static_sessions", &self.static_sessions)
            .finish()
    }
}

impl UpfRuntime {
    /// Compile the static sessions and make the snapshot and per-worker counters, before the
    /// workers start.
    pub fn prepare(
        section: &UpfSection,
        workers: usize,
    ) -> Result<UpfRuntime, crate::daemon::RunError> {
        let mut compiler = section.compiler_with_static_sessions()?;
        let static_sessions = compiler.stats().sessions;
        let publisher = Arc::new(Publisher::new(compiler.build()));
        let stats = (0..workers)
            .map(|_| Arc::new(UpfStats::new(section.slots())))
            .collect();
        tracing::info!(static_sessions, "UPF rule tables built");
        Ok(UpfRuntime {
            publisher,
            stats,
            compiler: Some(compiler),
            static_sessions,
            n4: None,
            metrics: None,
            pm: PmWindows::default(),
            last_tick: Instant::now(),
            qfi_map: section.qfi_map(),
            section: section.clone(),
        })
    }

    /// The UPF stage's configuration.
    pub fn stage_config(&self, promiscuous: bool) -> peregrine_dataplane::upf::UpfConfig {
        let s = &self.section;
        peregrine_dataplane::upf::UpfConfig {
            mtu: s.mtu,
            error_indication_pps: s.error_indication_pps,
            n6_v4: s.n6.iter().find_map(|a| match a {
                IpAddr::V4(a) => Some(*a),
                _ => None,
            }),
            n6_v6: s.n6.iter().find_map(|a| match a {
                IpAddr::V6(a) => Some(*a),
                _ => None,
            }),
            qfi_map: self.qfi_map,
            promiscuous,
            max_meter_slots: s.slots(),
        }
    }

    /// Start N4 and the metrics endpoint once the workers run; End Markers for SNDEM go out
    /// through `end_markers`, if given.
    pub fn start_control(
        mut self,
        s: &UpfSection,
        end_markers: Option<Box<dyn crate::n4::EndMarkerSink>>,
    ) -> Result<UpfRuntime, crate::daemon::RunError> {
        if !s.pfcp.is_empty() {
            let compiler = self.compiler.take().expect("compiler moves to N4 once");
            let rts = crate::upf::ntp_now();
            let mut node = peregrine_n4::NodeConfig::new(s.node_id(), rts, s.n3_v4());
            node.n3_addresses.1 = s.n3_v6();
            node.max_sessions = s.max_sessions;
            node.heartbeat_interval = Duration::from_secs(s.heartbeat_interval_s);
            let rules = DaemonRules::new(compiler, self.publisher.clone(), self.stats.clone());
            let ep = crate::n4::N4Endpoint::start_with(
                crate::n4::N4Config {
                    listen: s.pfcp.clone(),
                    node,
                    usage_interval: Duration::from_millis(s.usage_interval_ms),
                },
                rules,
                end_markers,
            )?;
            tracing::info!(listen = ?ep.local_addrs(), "PFCP N4 endpoint up");
            self.n4 = Some(ep);
        }
        if let Some(a) = s.metrics {
            let m = crate::metrics::MetricsServer::start(a)?;
            tracing::info!(addr = %m.local_addr(), "Prometheus metrics at /metrics");
            self.metrics = Some(m);
        }
        Ok(self)
    }

    /// The N4 endpoint's addresses, if it runs.
    pub fn pfcp_addrs(&self) -> Vec<SocketAddr> {
        self.n4
            .as_ref()
            .map(|n| n.local_addrs().to_vec())
            .unwrap_or_default()
    }

    /// An exception packet: a buffered downlink packet (BUFF) triggers a Downlink Data Report.
    pub fn on_control_packet(&self, p: &peregrine_dataplane::runtime::ControlPacket) {
        let Some(n4) = &self.n4 else {
            return;
        };
        if let Some((up_seid, pdr_id)) = buffered_downlink(&self.publisher.current(), &p.data) {
            n4.command(crate::n4::N4Command::DownlinkData { up_seid, pdr_id });
        }
    }

    /// Once a second: close the PM window and refresh the metrics page.
    pub fn tick(&mut self, running: &peregrine_dataplane::runtime::Running) {
        if self.last_tick.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last_tick = Instant::now();
        let c = running.counters();
        self.pm.tick(qfi_totals(&self.stats), &c);
        if let Some(m) = &self.metrics {
            let names: Vec<String> = running.ports().iter().map(|p| p.name.clone()).collect();
            let st = self.n4.as_ref().map(|n| n.status());
            let page = render_metrics(
                &names,
                &c,
                running.reasons(),
                &self.stats,
                &self.pm,
                &self.qfi_map,
                st.as_ref().map(|s| (s, &s.pfcp)),
                Some(self.sessions()),
            );
            m.set(page);
        }
    }

    fn sessions(&self) -> usize {
        self.static_sessions + self.n4.as_ref().map_or(0, |n| n.status().sessions)
    }

    /// The summary's UPF part; stops N4 and the metrics endpoint.
    pub fn finish(self) -> UpfSummary {
        let t = qfi_totals(&self.stats);
        let mut qfi = Vec::new();
        for (d, dn) in ["uplink", "downlink"].into_iter().enumerate() {
            for (q, x) in t[d].iter().enumerate() {
                if x.pkts + x.drops > 0 {
                    qfi.push(QfiRow {
                        direction: dn,
                        qfi: q as u8,
                        packets: x.pkts,
                        bytes: x.bytes,
                        drops: x.drops,
                        green: x.green,
                        yellow: x.yellow,
                        red: x.red,
                    });
                }
            }
        }
        let (mut echo, mut ei) = (0, 0);
        for s in &self.stats {
            let x = s.totals();
            echo += x.echo_replies;
            ei += x.error_indications_sent;
        }
        let st = self.n4.as_ref().map(|n| n.status()).unwrap_or_default();
        UpfSummary {
            sessions: self.sessions(),
            qfi,
            echo_replies: echo,
            error_indications_sent: ei,
            pfcp_datagrams_in: st.counts.datagrams_in,
            pfcp_datagrams_out: st.counts.datagrams_out,
            rule_publishes: st.counts.publishes,
            publish_latency_p99_us: st.publish_latency_quantile(0.99),
        }
    }
}

/// NTP seconds now (TS 29.244 section 8.2.65 Recovery Time Stamp: seconds since 1900).
pub fn ntp_now() -> u32 {
    const NTP_UNIX_OFFSET: u64 = 2_208_988_800;
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    (unix + NTP_UNIX_OFFSET) as u32
}

/// The session and PDR a buffered downlink frame belongs to: its destination is a UE
/// address whose first matching downlink PDR has a buffering FAR.
fn buffered_downlink(t: &UpfTables, frame: &[u8]) -> Option<(u64, u16)> {
    use peregrine_dataplane::upf::tables::FarAction;
    use peregrine_wire::{ethernet::ethertype, ipv4, ipv6, vlan};
    let (l3, et) = vlan::l3_offset(frame).ok()?;
    let (shard, range) = match et {
        ethertype::IPV4 => {
            let ip = ipv4::Packet::new_checked(frame.get(l3..)?).ok()?;
            let ue = u32::from(ip.dst_addr());
            let sh = t.ue_v4_shard(ue);
            (sh, *sh.by_ue_v4.get(&ue)?)
        }
        ethertype::IPV6 => {
            let ip = ipv6::Packet::new_checked(frame.get(l3..)?).ok()?;
            let p64 = (u128::from(ip.dst_addr()) >> 64) as u64;
            let sh = t.ue_v6_shard(p64);
            (sh, *sh.by_ue_v6.get(&p64)?)
        }
        _ => return None,
    };
    let order = shard.pdr_order.get(range.0 as usize..range.1 as usize)?;
    order.iter().find_map(|&i| {
        let pdr = shard.pdrs.get(i as usize)?;
        let far = shard.fars.get(pdr.far as usize)?;
        match far.action {
            FarAction::Buffer { .. } => Some((
                shard.sessions.get(pdr.session as usize)?.up_seid,
                pdr.pdr_id,
            )),
            _ => None,
        }
    })
}
