//! The platform part of the configuration: workers, backend, ports, the pipeline kind (its
//! main stage), routes and `[metrics]`. Feature sections (`[upf]`, `[int]`, ...) are parsed
//! by their features (`crate::feature`); [`crate::config::Config`] joins the two.
//!
//! Parsing is two steps: serde reads the file (unknown keys are errors, so a typo never
//! silently falls back to a default), then [`Platform::validate`] checks meaning and names
//! the offending field in every error.

use crate::error::{invalid, ConfigError};
use ipnet::IpNet;
use peregrine_dataplane::stages::l3fwd::{NextHop, RouteSpec};
use peregrine_wire::ethernet::Address as MacAddr;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    #[serde(default)]
    pub workers: Workers,
    pub backend: BackendConfig,
    #[serde(rename = "port")]
    pub ports: Vec<Port>,
    pub pipeline: PipelineConfig,
    #[serde(default, rename = "route")]
    pub routes: Vec<Route>,
    /// The Prometheus endpoint, for every pipeline kind.
    pub metrics: Option<MetricsSection>,
    /// Timers of next-hop resolution for routes given by `via` (RFC 4861 section 10 names).
    #[serde(default)]
    pub neighbour: NeighbourSection,
    /// Directory relative paths are resolved against (the config file's directory).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// `[metrics]`: where the daemon serves its Prometheus (OpenMetrics) page.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// `GET /metrics` is served here ("127.0.0.1:9100"; port 0 picks a free port).
    pub listen: SocketAddr,
}

/// `[neighbour]`: timers of the next-hop resolver (`crate::nexthop`), in milliseconds. The
/// defaults are RFC 4861 section 10's REACHABLE_TIME, DELAY_FIRST_PROBE_TIME, RETRANS_TIMER,
/// MAX_MULTICAST_SOLICIT / MAX_UNICAST_SOLICIT.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct NeighbourSection {
    /// A confirmed next hop stays REACHABLE this long, then STALE (still used).
    pub reachable_ms: u64,
    /// STALE this long, then PROBE (unicast solicitations).
    pub delay_ms: u64,
    /// Time between solicitations in INCOMPLETE and PROBE.
    pub retrans_ms: u64,
    /// Broadcast ARP requests / multicast solicitations before INCOMPLETE gives up (FAILED).
    pub max_multicast_solicit: u32,
    /// Unicast probes before a PROBE entry is dropped (its routes become unresolved).
    pub max_unicast_solicit: u32,
    /// A FAILED next hop is solicited again after this long.
    pub failed_retry_ms: u64,
}

impl Default for NeighbourSection {
    fn default() -> Self {
        NeighbourSection {
            reachable_ms: 30_000,
            delay_ms: 5_000,
            retrans_ms: 1_000,
            max_multicast_solicit: 3,
            max_unicast_solicit: 3,
            failed_retry_ms: 1_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workers {
    /// Number of poll-mode worker threads.
    #[serde(default = "one")]
    pub count: usize,
    /// CPU cores to pin workers to, one per worker (empty: not pinned).
    #[serde(default)]
    pub cores: Vec<usize>,
    /// CPU cores for every control-side thread (N4, metrics, the control loop); never a
    /// worker's. Absent: the online cores no worker uses, when `cores` is given; `[]`: not
    /// pinned. See [`crate::pinning`].
    #[serde(default)]
    pub control_cores: Option<Vec<usize>>,
    /// Packets per rx burst (1..=256; 32 is DPDK's usual).
    #[serde(default = "default_burst")]
    pub burst: usize,
    /// Stop after this long without a packet (0: never). For replays on ports that never end.
    #[serde(default)]
    pub stop_after_idle_ms: u64,
}

fn one() -> usize {
    1
}
fn default_burst() -> usize {
    32
}

impl Default for Workers {
    fn default() -> Self {
        Workers {
            count: 1,
            cores: vec![],
            control_cores: None,
            burst: 32,
            stop_after_idle_ms: 0,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum BackendConfig {
    /// Pure-Rust pcap replay/capture.
    Pcap {
        #[serde(default)]
        replay: ReplayMode,
        /// Speed factor for `timed` replay (2.0 = twice as fast as recorded).
        #[serde(default = "one_f")]
        speed: f64,
        /// Times each rx file is replayed; 0 = forever.
        #[serde(default = "one_u32")]
        loops: u32,
        #[serde(default = "default_pool")]
        pool_size: usize,
    },
    /// DPDK ethdev ports (NICs or vdevs).
    Dpdk {
        /// EAL arguments, passed through (e.g. "--no-huge", "--vdev=net_ring0").
        eal_args: Vec<String>,
        #[serde(default = "default_desc")]
        rx_desc: u16,
        #[serde(default = "default_desc")]
        tx_desc: u16,
        #[serde(default = "default_mbufs")]
        mbufs_per_worker: u32,
        #[serde(default = "default_cache")]
        mbuf_cache: u32,
    },
}

fn one_f() -> f64 {
    1.0
}
fn one_u32() -> u32 {
    1
}
fn default_pool() -> usize {
    4096
}
fn default_desc() -> u16 {
    1024
}
fn default_mbufs() -> u32 {
    8191
}
fn default_cache() -> u32 {
    256
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ReplayMode {
    #[default]
    Fast,
    Timed,
    /// Fast, with the workers' clock following the capture timestamps.
    Recorded,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Port {
    pub name: String,
    /// This port's MAC address (frames to it are ours; we send from it).
    pub mac: String,
    /// pcap backend: file to replay as this port's rx.
    pub rx: Option<PathBuf>,
    /// pcap backend: file to write this port's tx to.
    pub tx: Option<PathBuf>,
    /// dpdk backend: the ethdev name ("net_ring0", a PCI address, ...).
    pub device: Option<String>,
    /// dpdk backend: spread rx over queues with RSS when the device can.
    #[serde(default = "yes")]
    pub rss: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum PipelineConfig {
    /// Port-to-port patch panel: pairs of port names.
    Xconnect { pairs: Vec<[String; 2]> },
    /// IPv4/IPv6 router: longest-prefix match over `[[route]]`.
    L3fwd {
        /// Accept frames whatever their destination MAC (e.g. replays of foreign captures).
        #[serde(default)]
        promiscuous: bool,
    },
    /// The 5G UPF: GTP-U on N3/N9, IP on N6, PFCP rules (see `[upf]`); routes give next hops.
    /// Its main stage is the `upf` feature's.
    Upf {
        #[serde(default)]
        promiscuous: bool,
    },
    /// A stand-alone INT node: `l3fwd` as the main stage, with the `int` feature's elements
    /// (chosen by `[int] roles`) at ingress; routes as for l3fwd.
    Int {
        #[serde(default)]
        promiscuous: bool,
    },
    /// A DTA translator: reports on UDP 40040 are written into the collector's region (see
    /// `[dta_translator]`); its main stage is the `dta_translator` feature's.
    #[serde(rename = "dta-translator")]
    DtaTranslator {},
    /// A bump in the wire: two ports joined by an emulated link each way (delay, jitter,
    /// loss, rate; `crate::impair`), for live tests where `tc netem` is not available.
    Impair(Box<crate::impair::ImpairPipeline>),
}

impl PipelineConfig {
    /// The feature whose stage is this kind's main stage (`upf`), if not the platform's.
    pub fn main_feature(&self) -> Option<&'static str> {
        match self {
            PipelineConfig::Upf { .. } => Some("upf"),
            PipelineConfig::DtaTranslator {} => Some("dta_translator"),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// "10.45.0.0/16" or "2001:db8::/32".
    pub prefix: String,
    /// Port name to send on.
    pub port: String,
    /// Next hop's MAC address (static). Without it, `via` is resolved by ARP / ND.
    pub next_hop_mac: Option<String>,
    /// Next hop's IP address, resolved to a MAC from the neighbours learnt on `port`
    /// (`crate::nexthop`); used when `next_hop_mac` is absent.
    pub via: Option<String>,
}

/// A route after validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedRoute {
    pub addr: IpAddr,
    pub len: u8,
    pub port: u16,
    /// The static next-hop MAC, or [`NextHop::UNRESOLVED`] for a route by `via`.
    pub next_hop: MacAddr,
    /// The gateway resolved by ARP / ND when there is no static MAC.
    pub via: Option<IpAddr>,
}

impl RouteSpec for ParsedRoute {
    fn prefix(&self) -> (IpAddr, u8) {
        (self.addr, self.len)
    }

    fn next_hop(&self) -> NextHop {
        NextHop {
            port: self.port,
            mac: self.next_hop,
        }
    }
}

impl Platform {
    /// Input files must exist and be readable (output files are created at run time).
    pub fn check_files(&self) -> Result<(), ConfigError> {
        for (i, p) in self.ports.iter().enumerate() {
            if let Some(rx) = &p.rx {
                let full = self.resolve(rx);
                if let Err(e) = std::fs::File::open(&full) {
                    return Err(invalid(
                        format!("port[{i}].rx"),
                        format!("cannot open {}: {e}", full.display()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Resolve a configured path against the config file's directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    pub fn port_index(&self, name: &str) -> Option<u16> {
        self.ports
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as u16)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let w = &self.workers;
        if w.count == 0 || w.count > 128 {
            return Err(invalid(
                "workers.count",
                format!("must be 1..=128, got {}", w.count),
            ));
        }
        if !w.cores.is_empty() && w.cores.len() != w.count {
            return Err(invalid(
                "workers.cores",
                format!(
                    "lists {} cores for {} workers (give one per worker, or none)",
                    w.cores.len(),
                    w.count
                ),
            ));
        }
        crate::pinning::check(w).map_err(|e| invalid("workers.control_cores", e))?;
        if !(1..=256).contains(&w.burst) {
            return Err(invalid(
                "workers.burst",
                format!("must be 1..=256, got {}", w.burst),
            ));
        }
        match &self.backend {
            BackendConfig::Pcap {
                speed, pool_size, ..
            } => {
                if !(speed.is_finite() && *speed > 0.0) {
                    return Err(invalid(
                        "backend.speed",
                        format!("must be a positive number, got {speed}"),
                    ));
                }
                if *pool_size < 2 * w.burst {
                    return Err(invalid(
                        "backend.pool_size",
                        format!("must be at least 2 x burst ({})", 2 * w.burst),
                    ));
                }
            }
            BackendConfig::Dpdk {
                mbufs_per_worker,
                rx_desc,
                tx_desc,
                ..
            } => {
                let need = *rx_desc as u32 * self.ports.len() as u32 + 2 * w.burst as u32;
                if *mbufs_per_worker < need {
                    return Err(invalid(
                        "backend.mbufs_per_worker",
                        format!("{mbufs_per_worker} is too few to fill {} rx rings of {rx_desc} (need >= {need})", self.ports.len()),
                    ));
                }
                for (f, v) in [("backend.rx_desc", rx_desc), ("backend.tx_desc", tx_desc)] {
                    if *v == 0 || !v.is_power_of_two() {
                        return Err(invalid(f, format!("must be a power of two, got {v}")));
                    }
                }
            }
        }
        if self.ports.is_empty() {
            return Err(invalid("port", "at least one [[port]] is needed"));
        }
        if self.ports.len() > 64 {
            return Err(invalid("port", "at most 64 ports"));
        }
        for (i, p) in self.ports.iter().enumerate() {
            let f = |k: &str| format!("port[{i}].{k}");
            if p.name.is_empty() {
                return Err(invalid(f("name"), "must not be empty"));
            }
            if self.ports[..i].iter().any(|q| q.name == p.name) {
                return Err(invalid(
                    f("name"),
                    format!("`{}` is used by an earlier port", p.name),
                ));
            }
            MacAddr::parse(&p.mac).ok_or_else(|| {
                invalid(
                    f("mac"),
                    format!("`{}` is not a MAC address like 02:00:00:00:00:01", p.mac),
                )
            })?;
            match self.backend {
                BackendConfig::Pcap { .. } => {
                    if p.device.is_some() {
                        return Err(invalid(
                            f("device"),
                            "is for the dpdk backend; this config uses pcap",
                        ));
                    }
                    if p.rx.is_none() && p.tx.is_none() {
                        return Err(invalid(
                            f("rx"),
                            "a pcap port needs an rx file, a tx file, or both",
                        ));
                    }
                }
                BackendConfig::Dpdk { .. } => {
                    if p.device.as_deref().unwrap_or("").is_empty() {
                        return Err(invalid(
                            f("device"),
                            "a dpdk port needs the ethdev name (e.g. net_ring0)",
                        ));
                    }
                    if p.rx.is_some() || p.tx.is_some() {
                        return Err(invalid(
                            f("rx"),
                            "rx/tx files are for the pcap backend (use a net_pcap vdev with dpdk)",
                        ));
                    }
                }
            }
        }
        match &self.pipeline {
            PipelineConfig::Xconnect { pairs } => {
                if pairs.is_empty() {
                    return Err(invalid("pipeline.pairs", "needs at least one [a, b] pair"));
                }
                for (i, [a, b]) in pairs.iter().enumerate() {
                    for n in [a, b] {
                        if self.port_index(n).is_none() {
                            return Err(invalid(
                                format!("pipeline.pairs[{i}]"),
                                format!("no port named `{n}`"),
                            ));
                        }
                    }
                }
            }
            // The `[upf]` / `[int]` sections these kinds need are checked by their features.
            PipelineConfig::Upf { .. } => {
                if self.routes.is_empty() {
                    return Err(invalid(
                        "route",
                        "the upf pipeline needs [[route]]s to the gNBs (n3) and the data network (n6)",
                    ));
                }
            }
            PipelineConfig::Int { .. } => {
                if self.routes.is_empty() {
                    return Err(invalid(
                        "route",
                        "the int pipeline needs at least one [[route]]",
                    ));
                }
            }
            // Reports in, NACKs back out of the rx port: no routes needed.
            PipelineConfig::DtaTranslator {} => {}
            PipelineConfig::Impair(p) => p.validate(|n| self.port_index(n))?,
            PipelineConfig::L3fwd { .. } => {
                if self.routes.is_empty() {
                    return Err(invalid(
                        "route",
                        "the l3fwd pipeline needs at least one [[route]]",
                    ));
                }
            }
        }
        let n = &self.neighbour;
        for (k, v) in [
            ("neighbour.reachable_ms", n.reachable_ms),
            ("neighbour.retrans_ms", n.retrans_ms),
            (
                "neighbour.max_multicast_solicit",
                u64::from(n.max_multicast_solicit),
            ),
            (
                "neighbour.max_unicast_solicit",
                u64::from(n.max_unicast_solicit),
            ),
        ] {
            if v == 0 {
                return Err(invalid(k, "must be at least 1"));
            }
        }
        self.parsed_routes()?;
        Ok(())
    }

    /// Routes with prefixes, ports and MACs parsed.
    pub fn parsed_routes(&self) -> Result<Vec<ParsedRoute>, ConfigError> {
        self.routes
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let f = |k: &str| format!("route[{i}].{k}");
                let net: IpNet = r.prefix.parse().map_err(|_| {
                    invalid(
                        f("prefix"),
                        format!(
                            "`{}` is not ADDRESS/LENGTH (an IPv4 prefix of length at most 32 \
                             or an IPv6 prefix of length at most 128)",
                            r.prefix
                        ),
                    )
                })?;
                let (addr, len) = (net.addr(), net.prefix_len());
                let port = self
                    .port_index(&r.port)
                    .ok_or_else(|| invalid(f("port"), format!("no port named `{}`", r.port)))?;
                let via = match &r.via {
                    Some(v) => Some(v.parse::<IpAddr>().map_err(|_| {
                        invalid(f("via"), format!("`{v}` is not an IPv4 or IPv6 address"))
                    })?),
                    None => None,
                };
                if via.is_some_and(|v| v.is_unspecified() || v.is_multicast()) {
                    return Err(invalid(
                        f("via"),
                        "must be a unicast address of a neighbour on the port",
                    ));
                }
                let next_hop = match (&r.next_hop_mac, via) {
                    (Some(m), _) => {
                        let mac = MacAddr::parse(m).ok_or_else(|| {
                            invalid(f("next_hop_mac"), format!("`{m}` is not a MAC address"))
                        })?;
                        if mac == NextHop::UNRESOLVED || mac.is_multicast() {
                            return Err(invalid(
                                f("next_hop_mac"),
                                format!("`{m}` is not a unicast MAC address"),
                            ));
                        }
                        mac
                    }
                    (None, Some(_)) => NextHop::UNRESOLVED,
                    (None, None) => {
                        return Err(invalid(
                            f("next_hop_mac"),
                            "give the next hop's MAC, or its address as `via` to resolve it by ARP / ND",
                        ))
                    }
                };
                Ok(ParsedRoute {
                    addr,
                    len,
                    port,
                    next_hop,
                    via: if r.next_hop_mac.is_some() { None } else { via },
                })
            })
            .collect()
    }

    pub fn port_mac(&self, i: usize) -> MacAddr {
        MacAddr::parse(&self.ports[i].mac).unwrap_or_default()
    }
}
