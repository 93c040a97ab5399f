//! The UPF as a feature: its `[upf]` section (`section`), the N4 rule side and End Markers
//! (`rules`), its Prometheus families and summary (`metrics`). It contributes the `upf`
//! pipeline's main stage, gives the daemon its addresses to answer ARP / ND for
//! (`crate::nexthop`), reports buffered downlink to the SMF, and closes 3GPP-PM style
//! windows once a second.

mod metrics;
mod offload;
mod qos;
mod rules;
mod section;

pub use metrics::{qfi_totals, write_metrics, PerQfi, PmWindows, QfiRow, QfiTotals, UpfSummary};
pub use rules::{ntp_now, DaemonRules, InjectGtpu};
pub use section::{EgressPort, Synthetic, UpfSection, STATIC_SEID_BIT};

use crate::error::{invalid, ConfigError, RunError};
use crate::feature::{Build, Configure, Feature, FeatureReport};
use crate::gtpu_frames::GtpuFrames;
use crate::metrics::Exposition;
use crate::platform::{PipelineConfig, Platform};
use peregrine_dataplane::qos::scheduler::QfiMap;
use peregrine_dataplane::runtime::{
    ControlPacket, EgressConfig, Injector, Publisher, Running, Stage,
};
use peregrine_dataplane::stages::l3fwd::RouteTable;
use peregrine_dataplane::upf::{Upf, UpfConfig, UpfStats, UpfTables};
use peregrine_dataplane::PacketBuf;
use peregrine_rules::Compiler;
use peregrine_wire::ethernet::Address as Mac;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The UPF feature: configuration until [`Feature::prepare`], then its control-side state.
pub struct UpfFeature {
    section: UpfSection,
    promiscuous: bool,
    macs: Vec<Mac>,
    /// The daemon's route publisher (`Feature::use_routes`): End Markers and Echo Requests
    /// follow the current routes and resolved next hops, as the UPF stage does.
    routes: Option<Arc<Publisher<RouteTable>>>,
    qfi_map: QfiMap,
    /// Ports whose TCP/UDP checksums are recomputed (bit per port index).
    fix_l4_checksums: u64,
    state: Option<State>,
    last_window: Option<Instant>,
    pm: PmWindows,
}

/// What exists once the tables are built.
struct State {
    publisher: Arc<Publisher<UpfTables>>,
    stats: Vec<Arc<UpfStats>>,
    compiler: Option<Compiler>,
    static_sessions: usize,
    n4: Option<crate::n4::N4Endpoint>,
}

impl std::fmt::Debug for UpfFeature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpfFeature")
            .field("node_id", &self.section.node_id)
            .field(
                "static_sessions",
                &self.state.as_ref().map(|s| s.static_sessions),
            )
            .finish()
    }
}

impl Configure for UpfFeature {
    const SECTION: &'static str = "upf";

    fn configure(section: Option<&toml::Value>, p: &Platform) -> Result<Option<Self>, ConfigError> {
        let (promiscuous, value) = match (&p.pipeline, section) {
            (PipelineConfig::Upf { promiscuous }, Some(v)) => (*promiscuous, v),
            (PipelineConfig::Upf { .. }, None) => {
                return Err(invalid("upf", "the upf pipeline needs an [upf] section"))
            }
            (_, None) => return Ok(None),
            (_, Some(_)) => {
                return Err(invalid(
                    "upf",
                    "the [upf] section needs `kind = \"upf\"` in [pipeline]",
                ))
            }
        };
        let section: UpfSection = value
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| crate::error::section_error("upf", &e))?;
        section.validate(|n| p.port_index(n))?;
        let fix_l4_checksums = offload::fix_mask(&section.fix_l4_checksums, |n| p.port_index(n));
        offload::warn_partial_checksums(p, fix_l4_checksums);
        Ok(Some(UpfFeature {
            fix_l4_checksums,
            qfi_map: section.qfi_map(),
            promiscuous,
            macs: (0..p.ports.len()).map(|i| p.port_mac(i)).collect(),
            routes: None,
            section,
            state: None,
            last_window: None,
            pm: PmWindows::default(),
        }))
    }
}

impl UpfFeature {
    /// The UPF stage's configuration.
    pub fn stage_config(&self) -> UpfConfig {
        let s = &self.section;
        UpfConfig {
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
            promiscuous: self.promiscuous,
            max_meter_slots: s.slots(),
            fix_l4_checksums: self.fix_l4_checksums,
            reassembly: s.reassembly.config(),
        }
    }

    /// The N4 endpoint's addresses, if it runs.
    pub fn pfcp_addrs(&self) -> Vec<SocketAddr> {
        self.state
            .as_ref()
            .and_then(|s| s.n4.as_ref())
            .map(|n| n.local_addrs().to_vec())
            .unwrap_or_default()
    }

    fn sessions(&self) -> usize {
        self.state.as_ref().map_or(0, |s| {
            s.static_sessions + s.n4.as_ref().map_or(0, |n| n.status().sessions)
        })
    }

    /// Start N4 (if `[upf] pfcp` lists addresses); End Markers go out through `injector`.
    fn start_n4(&mut self, injector: Injector) -> Result<(), RunError> {
        let s = &self.section;
        let Some(st) = self.state.as_mut() else {
            return Ok(());
        };
        if s.pfcp.is_empty() {
            return Ok(());
        }
        let Some(compiler) = st.compiler.take() else {
            return Ok(());
        };
        let Some(routes) = self.routes.clone() else {
            return Err(RunError::Config(invalid(
                "upf.pfcp",
                "N4 needs the daemon's routes (use_routes was not called)",
            )));
        };
        let gtpu = InjectGtpu {
            frames: GtpuFrames {
                n3_v4: s.n3_v4(),
                n3_v6: s.n3_v6(),
                routes,
                macs: self.macs.clone(),
            },
            injector,
        };
        let mut node = peregrine_n4::NodeConfig::new(s.node_id(), ntp_now(), s.n3_v4());
        node.n3_addresses.1 = s.n3_v6();
        node.max_sessions = s.max_sessions;
        node.heartbeat_interval = Duration::from_secs(s.heartbeat_interval_s);
        node.echo_interval = Duration::from_secs(s.echo_interval_s);
        node.echo_t3 = Duration::from_secs(s.echo_t3_s);
        node.echo_n3 = s.echo_n3;
        node.teid_reuse_after = Duration::from_secs(s.teid_reuse_after_s);
        // The static sessions' TEIDs are theirs: CHOOSE must not hand one out again.
        node.reserved_teids = s
            .static_sessions()?
            .iter()
            .flat_map(|x| x.teids())
            .collect();
        let rules = DaemonRules::new(compiler, st.publisher.clone(), st.stats.clone());
        let ep = crate::n4::N4Endpoint::start_with(
            crate::n4::N4Config {
                listen: s.pfcp.clone(),
                node,
                usage_interval: Duration::from_millis(s.usage_interval_ms),
            },
            rules,
            Some(Box::new(gtpu)),
        )?;
        tracing::info!(listen = ?ep.local_addrs(), "PFCP N4 endpoint up");
        st.n4 = Some(ep);
        Ok(())
    }
}

impl<B: PacketBuf + 'static> Feature<B> for UpfFeature {
    fn name(&self) -> &'static str {
        Self::SECTION
    }

    /// Compile the static sessions, make the snapshot and per-worker counters, and set the
    /// egress schedulers of `[[upf.egress]]`.
    fn prepare(
        &mut self,
        p: &Platform,
        egress: &mut [Option<EgressConfig>],
    ) -> Result<(), RunError> {
        for (slot, c) in egress.iter_mut().zip(
            self.section
                .egress_configs(p.ports.len(), |n| p.port_index(n)),
        ) {
            if c.is_some() {
                *slot = c;
            }
        }
        let mut compiler = self.section.compiler_with_static_sessions()?;
        let static_sessions = compiler.stats().sessions;
        let publisher = Arc::new(Publisher::new(compiler.build()));
        let stats = (0..p.workers.count)
            .map(|_| Arc::new(UpfStats::new(self.section.slots())))
            .collect();
        tracing::info!(static_sessions, "UPF rule tables built");
        self.state = Some(State {
            publisher,
            stats,
            compiler: Some(compiler),
            static_sessions,
            n4: None,
        });
        Ok(())
    }

    /// The UPF stage's parse phase reads the classifier's record instead of parsing again.
    fn reads_packet_meta(&self) -> bool {
        true
    }

    fn main_stage(&self, b: &mut Build<'_>) -> Option<Box<dyn Stage<B>>> {
        let st = self.state.as_ref()?;
        let upf = Upf::new(
            st.publisher.reader(),
            b.routes.reader(),
            self.macs.clone(),
            self.stage_config(),
            st.stats.get(b.worker)?.clone(),
            b.reasons,
        );
        Some(Box::new(if b.classified {
            upf.after_classifier()
        } else {
            upf
        }))
    }

    /// N3 and N6: the daemon answers ARP / ND for them.
    fn local_addrs(&self) -> Vec<IpAddr> {
        self.section
            .n3
            .iter()
            .chain(&self.section.n6)
            .copied()
            .collect()
    }

    fn use_routes(&mut self, routes: &Arc<Publisher<RouteTable>>) {
        self.routes = Some(routes.clone());
    }

    fn sessions(&self) -> Option<crate::feature::Sessions> {
        Some(crate::feature::Sessions {
            tables: self.state.as_ref()?.publisher.clone(),
            qfi_map: self.qfi_map,
        })
    }

    /// N4, End Markers through the injector.
    fn start(&mut self, running: &Running) -> Result<(), RunError> {
        self.start_n4(running.injector())
    }

    /// Buffered downlink reported to the SMF, Echo Responses to N4 (ARP / ND are the
    /// daemon's).
    fn on_control_packet(&mut self, _now: Instant, p: &ControlPacket) {
        let Some(st) = &self.state else {
            return;
        };
        let Some(n4) = &st.n4 else {
            return;
        };
        if let Some((up_seid, pdr_id)) = rules::buffered_downlink(&st.publisher.current(), &p.data)
        {
            n4.command(crate::n4::N4Command::DownlinkData { up_seid, pdr_id });
        } else if let Some((peer, seq)) = crate::gtpu_frames::echo_response(&p.data) {
            n4.command(crate::n4::N4Command::EchoResponse { peer, seq });
        }
    }

    /// Once a second: close the PM window.
    fn tick(&mut self, now: Instant, running: &Running) {
        if self
            .last_window
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        self.last_window = Some(now);
        if let Some(st) = &self.state {
            self.pm.tick(qfi_totals(&st.stats), &running.counters());
        }
    }

    fn metrics(&self, page: &mut Exposition) {
        let Some(st) = &self.state else {
            return;
        };
        let n4 = st.n4.as_ref().map(|n| n.status());
        write_metrics(
            page,
            &st.stats,
            &self.pm,
            &self.qfi_map,
            n4.as_ref().map(|s| (s, &s.pfcp)),
            Some(self.sessions()),
        );
    }

    /// Stop N4; the per-QFI totals and N4 figures.
    fn finish(self: Box<Self>) -> FeatureReport {
        let sessions = self.sessions();
        let s = match &self.state {
            Some(st) => metrics::summary(&st.stats, st.n4.as_ref().map(|n| n.status()), sessions),
            None => metrics::summary(&[], None, sessions),
        };
        let text = metrics::render_summary(&s);
        FeatureReport::new(Self::SECTION, &s, text)
    }
}
