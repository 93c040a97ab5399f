//! Direct Telemetry Access in the daemon (Langlet et al., "Direct Telemetry Access",
//! SIGCOMM 2023; docs/dta.md).
//!
//! - [`DtaTranslatorFeature`] (`[dta_translator]`, pipeline kind `dta-translator`): creates
//!   the collector's shared-memory region and runs the translator stage
//!   ([`translator_stage`]) as every worker's main stage.
//! - [`reporter::DtaReporterFeature`] (`[dta]`, any other pipeline kind): our telemetry as
//!   DTA reports toward a translator.

pub mod feeds;
pub mod reporter;
pub mod translator_stage;

use crate::error::{invalid, ConfigError, RunError};
use crate::feature::{Build, Configure, Feature, FeatureReport};
use crate::metrics::{Exposition, Kind};
use crate::platform::{PipelineConfig, Platform};
use peregrine_dataplane::runtime::{EgressConfig, Stage};
use peregrine_dataplane::PacketBuf;
use peregrine_dta::{Config, RateLimiter, Refusal, Region, Sizes, Store, Translator};
use peregrine_wire::dta::Variant;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use translator_stage::{Shared, TranslatorStage};

/// Which base header reporters send (nothing on the wire tells them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VariantConfig {
    /// opcode, seqnum, flags: the NACK-tracking header (default).
    #[default]
    Tracked,
    /// opcode, flags.
    Plain,
}

impl From<VariantConfig> for Variant {
    fn from(v: VariantConfig) -> Variant {
        match v {
            VariantConfig::Tracked => Variant::Tracked,
            VariantConfig::Plain => Variant::Plain,
        }
    }
}

/// `[dta_translator]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranslatorSection {
    /// The region file (under /dev/shm, or a hugetlbfs mount); created (truncated) at start.
    pub region: PathBuf,
    #[serde(default)]
    pub variant: VariantConfig,
    /// Postcarding cache entries per worker.
    #[serde(default = "default_cache")]
    pub pc_cache_slots: usize,
    /// Reports per second per source IPv4 address; 0 = no limit.
    #[serde(default)]
    pub rate_per_source: f64,
    /// Token-bucket depth of the rate limit, in reports.
    #[serde(default = "default_burst")]
    pub rate_burst: f64,
    /// The region's structures (defaults: docs/dta.md).
    #[serde(default)]
    pub sizes: Sizes,
    /// RoCEv2 output: reports become RDMA WRITE / FETCH_ADD requests toward a collector's
    /// RDMA NIC instead of region writes.
    #[serde(default)]
    pub rocev2: Option<RoceSection>,
}

/// `[dta_translator.rocev2]`: where the collector's registered memory is.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoceSection {
    /// The port requests leave through (responses come back on it).
    pub port: String,
    pub collector_ip: std::net::Ipv4Addr,
    pub collector_mac: String,
    pub source_ip: std::net::Ipv4Addr,
    #[serde(default = "default_roce_sport")]
    pub source_port: u16,
    /// The collector's queue pair(s): one number, or one per worker (`[66, 67]`): each
    /// worker sends on its own queue pair (PSNs are per QP).
    pub qp: QpNumbers,
    /// Our queue pair numbers: worker `w` is `local_qp + w`. The collector connects its QP
    /// `w` to it; its ACKs / NAKs carry it as their destination QP.
    #[serde(default = "default_local_qp")]
    pub local_qp: u32,
    /// The collector's memory region's R_Key and the virtual address of the region's first
    /// byte (the layout's offsets are added to it).
    pub rkey: u32,
    pub base_va: u64,
    #[serde(default)]
    pub first_psn: u32,
}

/// `qp = 66` or `qp = [66, 67]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum QpNumbers {
    One(u32),
    PerWorker(Vec<u32>),
}

/// `local_qp` when the file gives none (`peregrinectl dta rdma-serve` connects to it too).
pub const DEFAULT_LOCAL_QP: u32 = 0x100;

fn default_local_qp() -> u32 {
    DEFAULT_LOCAL_QP
}

fn default_roce_sport() -> u16 {
    49152
}

/// The RoCEv2 output as configured: each worker builds its queue pair from it.
#[derive(Debug)]
struct RoceOut {
    port: peregrine_dataplane::io::PortId,
    layout: peregrine_dta::Layout,
    addrs: peregrine_wire::dta::FrameAddrs,
    /// The collector's QP per worker, ours per worker.
    qps: Vec<u32>,
    local_qps: Arc<[u32]>,
    rkey: u32,
    base_va: u64,
    first_psn: u32,
}

fn default_cache() -> usize {
    32_768
}

fn default_burst() -> f64 {
    1024.0
}

/// The translator feature.
#[derive(Debug)]
pub struct DtaTranslatorFeature {
    section: TranslatorSection,
    path: PathBuf,
    workers: usize,
    region: Option<Arc<Region>>,
    shared: Arc<Shared>,
    roce: Option<RoceOut>,
}

impl Configure for DtaTranslatorFeature {
    const SECTION: &'static str = "dta_translator";

    fn configure(section: Option<&toml::Value>, p: &Platform) -> Result<Option<Self>, ConfigError> {
        let is_kind = matches!(p.pipeline, PipelineConfig::DtaTranslator { .. });
        let v = match (is_kind, section) {
            (true, None) => {
                return Err(invalid(
                    "dta_translator",
                    "the dta-translator pipeline needs a [dta_translator] section",
                ))
            }
            (false, Some(_)) => {
                return Err(invalid(
                    "dta_translator",
                    "the translator runs as the dta-translator pipeline ([pipeline] kind)",
                ))
            }
            (false, None) => return Ok(None),
            (true, Some(v)) => v,
        };
        let s: TranslatorSection = v
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| crate::error::section_error("dta_translator", &e))?;
        peregrine_dta::Layout::new(s.sizes)
            .map_err(|e| invalid("dta_translator.sizes", e.to_string()))?;
        if !(s.rate_per_source >= 0.0 && s.rate_per_source.is_finite()) {
            return Err(invalid(
                "dta_translator.rate_per_source",
                format!("must be >= 0 (0: no limit), got {}", s.rate_per_source),
            ));
        }
        if s.rate_per_source > 0.0 && !(s.rate_burst >= 1.0 && s.rate_burst.is_finite()) {
            return Err(invalid("dta_translator.rate_burst", "must be >= 1"));
        }
        if s.pc_cache_slots == 0 || s.pc_cache_slots > 1 << 24 {
            return Err(invalid("dta_translator.pc_cache_slots", "must be 1..=2^24"));
        }
        let roce = match &s.rocev2 {
            None => None,
            Some(r) => {
                let port = p.port_index(&r.port).ok_or_else(|| {
                    invalid(
                        "dta_translator.rocev2.port",
                        format!("no port named `{}`", r.port),
                    )
                })?;
                let mac = peregrine_wire::ethernet::Address::parse(&r.collector_mac).ok_or_else(
                    || invalid("dta_translator.rocev2.collector_mac", "not a MAC address"),
                )?;
                if r.first_psn > 0xff_ffff {
                    return Err(invalid("dta_translator.rocev2.first_psn", "24-bit"));
                }
                let layout = peregrine_dta::Layout::new(s.sizes)
                    .map_err(|e| invalid("dta_translator.sizes", e.to_string()))?;
                let addrs = peregrine_wire::dta::FrameAddrs {
                    eth_src: p.port_mac(port as usize),
                    eth_dst: mac,
                    ip_src: r.source_ip,
                    ip_dst: r.collector_ip,
                    src_port: r.source_port,
                    dst_port: peregrine_wire::roce::UDP_PORT,
                };
                let workers = p.workers.count;
                let qps = match &r.qp {
                    QpNumbers::One(q) if workers == 1 => vec![*q],
                    QpNumbers::PerWorker(v) if v.len() == workers => v.clone(),
                    _ => {
                        return Err(invalid(
                            "dta_translator.rocev2.qp",
                            format!(
                                "each of the {workers} workers sends on its own queue pair: \
                                 give qp = [..] with {workers} numbers"
                            ),
                        ))
                    }
                };
                let local_qps: Vec<u32> = (0..workers as u32).map(|w| r.local_qp + w).collect();
                if qps.iter().chain(&local_qps).any(|q| *q > 0xff_ffff) {
                    return Err(invalid(
                        "dta_translator.rocev2",
                        "queue pair numbers (qp, local_qp + workers) are 24-bit",
                    ));
                }
                Some(RoceOut {
                    port,
                    layout,
                    addrs,
                    qps,
                    local_qps: local_qps.into(),
                    rkey: r.rkey,
                    base_va: r.base_va,
                    first_psn: r.first_psn,
                })
            }
        };
        Ok(Some(DtaTranslatorFeature {
            roce,
            path: p.resolve(&s.region),
            section: s,
            workers: p.workers.count,
            region: None,
            shared: Arc::new(Shared::new(p.workers.count)),
        }))
    }
}

/// The translator's figures in the run summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DtaTranslatorStats {
    pub region: String,
    pub key_write: u64,
    pub key_increment: u64,
    pub append: u64,
    pub postcard: u64,
    pub region_writes: u64,
    pub postcard_paths_complete: u64,
    pub postcard_early_flush: u64,
    pub nacks: u64,
    pub handed_off: u64,
    /// RoCEv2 output: request frames sent, reports dropped for want of buffers, PSN
    /// resynchronisations.
    #[serde(default)]
    pub rdma_sent: u64,
    #[serde(default)]
    pub rdma_no_buffer: u64,
    #[serde(default)]
    pub rdma_resyncs: u64,
    /// Refusals by reason (`Refusal::name`), zeros included.
    pub refused: std::collections::BTreeMap<String, u64>,
}

impl DtaTranslatorFeature {
    fn stats(&self) -> DtaTranslatorStats {
        let (c, nacks, handed_off, r) = self.shared.totals_rdma();
        DtaTranslatorStats {
            region: self.path.display().to_string(),
            key_write: c.key_write,
            key_increment: c.key_increment,
            append: c.append,
            postcard: c.postcard,
            region_writes: c.region_writes,
            // RoCEv2 mode: the workers' queue pairs write the chunks.
            postcard_paths_complete: c.postcard_paths_complete + r.paths_complete,
            postcard_early_flush: c.postcard_early_flush + r.paths_early,
            nacks,
            handed_off,
            rdma_sent: r.sent,
            rdma_no_buffer: r.no_buffer,
            rdma_resyncs: r.resyncs,
            refused: Refusal::ALL
                .iter()
                .map(|r| (r.name().to_string(), c.refused[r.index()]))
                .collect(),
        }
    }
}

impl<B: PacketBuf> Feature<B> for DtaTranslatorFeature {
    fn name(&self) -> &'static str {
        Self::SECTION
    }

    fn prepare(&mut self, _p: &Platform, _e: &mut [Option<EgressConfig>]) -> Result<(), RunError> {
        let r = Region::create(&self.path, self.section.sizes)
            .map_err(|e| RunError::Dta(format!("cannot create the region: {e}")))?;
        tracing::info!(
            region = %self.path.display(),
            bytes = r.layout().total_len,
            "dta translator region created"
        );
        self.region = Some(Arc::new(r));
        Ok(())
    }

    fn main_stage(&self, b: &mut Build<'_>) -> Option<Box<dyn Stage<B>>> {
        let region = self.region.clone()?;
        let s = &self.section;
        let t = Translator::new(
            Store::new(region),
            Config {
                variant: s.variant.into(),
                pc_cache_slots: s.pc_cache_slots,
            },
        );
        let limiter = (s.rate_per_source > 0.0)
            .then(|| RateLimiter::new(s.rate_per_source, s.rate_burst, 4096));
        let mut stage = TranslatorStage::new(
            t,
            s.variant.into(),
            limiter,
            self.workers,
            b.worker,
            self.shared.clone(),
            b.reasons,
        );
        if let Some(r) = &self.roce {
            let t = peregrine_dta::rdma::Target {
                qp: r.qps[b.worker],
                local_qp: r.local_qps[b.worker],
                rkey: r.rkey,
                base_va: r.base_va,
            };
            let qp =
                peregrine_dta::rdma::Qp::new(t, r.layout, r.addrs, r.first_psn, s.pc_cache_slots);
            stage = stage.with_rdma(translator_stage::RdmaOut::new(
                qp,
                r.port,
                r.local_qps.clone(),
                b.reasons,
            ));
        }
        Some(Box::new(stage))
    }

    fn metrics(&self, e: &mut Exposition) {
        let s = self.stats();
        let c = Kind::Counter;
        e.family(
            "peregrine_dta_reports_total",
            c,
            "DTA reports stored, by primitive.",
        );
        for (p, v) in [
            ("key_write", s.key_write),
            ("key_increment", s.key_increment),
            ("append", s.append),
            ("postcard", s.postcard),
        ] {
            e.sample("peregrine_dta_reports_total", &[("primitive", p)], v as f64);
        }
        e.family(
            "peregrine_dta_refused_total",
            c,
            "DTA reports refused, by reason.",
        );
        for (r, v) in &s.refused {
            e.sample("peregrine_dta_refused_total", &[("reason", r)], *v as f64);
        }
        e.one(
            "peregrine_dta_region_writes_total",
            c,
            "Slot, counter, batch and chunk writes into the collector region.",
            s.region_writes as f64,
        );
        e.one(
            "peregrine_dta_nacks_total",
            c,
            "NACKs sent to reporters.",
            s.nacks as f64,
        );
        e.family(
            "peregrine_dta_postcard_paths_total",
            c,
            "Postcard chunks written.",
        );
        e.sample(
            "peregrine_dta_postcard_paths_total",
            &[("how", "complete")],
            s.postcard_paths_complete as f64,
        );
        e.sample(
            "peregrine_dta_postcard_paths_total",
            &[("how", "early")],
            s.postcard_early_flush as f64,
        );
    }

    fn finish(self: Box<Self>) -> FeatureReport {
        let s = self.stats();
        let refused: u64 = s.refused.values().sum();
        let text = format!(
            "dta_translator: {} key-write, {} key-increment, {} append, {} postcard reports; {} region writes; {} refused, {} NACKs\n",
            s.key_write, s.key_increment, s.append, s.postcard, s.region_writes, refused, s.nacks
        );
        FeatureReport::new(Self::SECTION, &s, text)
    }
}
