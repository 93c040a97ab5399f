//! The parts of a Peregrine config (`control/src/config.rs` schema) the P4 generator reads:
//! ports (names, MACs), `[[route]]`, `[upf]` (N3 addresses, static and synthetic sessions,
//! `qfi_to_qid`, `mtu`) and `[int]` (`node_id`, `ioam_hops`, `timestamp`).
//!
//! Sections and keys it does not use are skipped here on purpose (the daemon's own parser,
//! `peregrine check-config`, rejects unknown keys); the keys it does use are typed, and every
//! error names the key.

use peregrine_dataplane::qos::scheduler::{QfiMap, NUM_QFI};
use peregrine_rules::static_sessions::{
    self, N3Addresses, OuterMix, StaticSession, SyntheticParams,
};
use peregrine_wire::ethernet::Address as MacAddr;
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Static sessions get SEIDs with the top bit set, as the daemon does
/// (`control/src/upf.rs`, `STATIC_SEID_BIT`).
pub const STATIC_SEID_BIT: u64 = 1 << 63;

/// A config error naming the key.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{0}")]
    Syntax(String),
    #[error("invalid `{field}`: {reason}")]
    Invalid { field: String, reason: String },
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Config {
    #[serde(rename = "port")]
    pub ports: Vec<Port>,
    #[serde(default, rename = "route")]
    pub routes: Vec<Route>,
    pub upf: Option<Upf>,
    pub int: Option<Int>,
    pub kestrel: Option<Kestrel>,
    pub fridge: Option<Fridge>,
    pub dta: Option<Dta>,
}

/// `[kestrel]`: the keys the sketch layout, hash and initial edges come from
/// (control/src/kestrel/mod.rs has the rest and the same defaults).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Kestrel {
    #[serde(default = "k_qids")]
    pub qids: usize,
    #[serde(default = "k_rows")]
    pub rows: usize,
    #[serde(default = "k_width")]
    pub width: usize,
    pub seeds: Option<Vec<u64>>,
    #[serde(default = "k_hash")]
    pub hash: String,
    #[serde(default)]
    pub edges: Vec<KestrelEdges>,
}

fn k_qids() -> usize {
    8
}
fn k_rows() -> usize {
    3
}
fn k_width() -> usize {
    512
}
fn k_hash() -> String {
    "splitmix64".into()
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct KestrelEdges {
    pub qid: usize,
    pub lat: Vec<f64>,
    pub iat: Vec<f64>,
}

/// `[fridge]` (control/src/fridge: same keys and defaults).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Fridge {
    #[serde(default = "insertions")]
    pub x_counts: String,
    #[serde(default, rename = "slice")]
    pub slices: Vec<FridgeSlice>,
}

fn insertions() -> String {
    "insertions".into()
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct FridgeSlice {
    pub name: String,
    pub kind: String,
    #[serde(default = "n6")]
    pub vantage: String,
    pub m: Option<u32>,
    pub p: Option<f64>,
    #[serde(default)]
    pub fridges: Vec<FridgeConf>,
    /// Read so that a filter the P4 fridge cannot apply is refused, not dropped.
    #[serde(default)]
    pub qfi: Vec<u8>,
    #[serde(default)]
    pub ports: Vec<u16>,
}

fn n6() -> String {
    "n6".into()
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
pub struct FridgeConf {
    pub m: u32,
    pub p: f64,
}

/// `[dta]`, the reporter (control/src/dta/reporter.rs: same keys and defaults).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Dta {
    pub port: String,
    pub collector_ip: Ipv4Addr,
    pub collector_mac: String,
    pub source_ip: Ipv4Addr,
    #[serde(default = "dta_sport")]
    pub source_port: u16,
    #[serde(default = "tracked")]
    pub variant: String,
    #[serde(default = "two")]
    pub sojourn_redundancy: u8,
    #[serde(default = "one_u32")]
    pub sojourn_sample: u32,
    #[serde(default)]
    pub drops_list: u32,
}

fn dta_sport() -> u16 {
    40041
}
fn tracked() -> String {
    "tracked".into()
}
fn two() -> u8 {
    2
}
fn one_u32() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Port {
    pub name: String,
    pub mac: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Route {
    pub prefix: String,
    pub port: String,
    /// Absent when the daemon resolves the next hop by ARP/ND (`via`): refused here.
    #[serde(default)]
    pub next_hop_mac: Option<String>,
    /// The daemon's gateway resolved at run time; static entries cannot carry it.
    #[serde(default)]
    pub via: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Upf {
    pub n3: Vec<IpAddr>,
    #[serde(default = "default_mtu")]
    pub mtu: u16,
    #[serde(default)]
    pub qfi_to_qid: Vec<[u8; 2]>,
    #[serde(default)]
    pub session: Vec<StaticSession>,
    pub synthetic: Option<Synthetic>,
}

fn default_mtu() -> u16 {
    1500
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Synthetic {
    pub sessions: usize,
    #[serde(default = "one")]
    pub seed: u64,
    #[serde(default = "default_qfis")]
    pub qfis: Vec<u8>,
    #[serde(default = "default_gnbs")]
    pub gnbs: u32,
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

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Int {
    pub node_id: u16,
    #[serde(default = "default_ioam_hops")]
    pub ioam_hops: u8,
    /// "posix" (the daemon's default) or "ptp".
    #[serde(default = "posix")]
    pub timestamp: String,
}

fn default_ioam_hops() -> u8 {
    5
}
fn posix() -> String {
    "posix".into()
}

/// A validated route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedRoute {
    pub addr: IpAddr,
    pub len: u8,
    pub port: u16,
    pub next_hop: MacAddr,
}

impl Config {
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        c.macs()?;
        c.routes()?;
        if let Some(u) = &c.upf {
            // Queue ids above the last queue are clamped by `QfiMap`, as in the daemon.
            for (i, [q, _]) in u.qfi_to_qid.iter().enumerate() {
                if usize::from(*q) >= NUM_QFI {
                    return Err(invalid(format!("upf.qfi_to_qid[{i}]"), "QFI above 63"));
                }
            }
        }
        if let Some(i) = &c.int {
            if !matches!(i.timestamp.as_str(), "posix" | "ptp") {
                return Err(invalid("int.timestamp", "must be \"posix\" or \"ptp\""));
            }
        }
        Ok(c)
    }

    pub fn port_index(&self, name: &str) -> Option<u16> {
        self.ports
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as u16)
    }

    /// Port MACs in port order.
    pub fn macs(&self) -> Result<Vec<MacAddr>, ConfigError> {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                MacAddr::parse(&p.mac).ok_or_else(|| {
                    invalid(
                        format!("port[{i}].mac"),
                        format!("`{}` is not a MAC", p.mac),
                    )
                })
            })
            .collect()
    }

    pub fn routes(&self) -> Result<Vec<ParsedRoute>, ConfigError> {
        self.routes
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let f = |k: &str| format!("route[{i}].{k}");
                let (a, l) = r
                    .prefix
                    .split_once('/')
                    .ok_or_else(|| invalid(f("prefix"), "not ADDRESS/LENGTH"))?;
                let addr: IpAddr = a
                    .parse()
                    .map_err(|_| invalid(f("prefix"), format!("`{a}` is not an IP address")))?;
                let len: u8 = l
                    .parse()
                    .map_err(|_| invalid(f("prefix"), format!("`{l}` is not a length")))?;
                if len > if addr.is_ipv4() { 32 } else { 128 } {
                    return Err(invalid(f("prefix"), format!("length {len} too long")));
                }
                let port = self
                    .port_index(&r.port)
                    .ok_or_else(|| invalid(f("port"), format!("no port named `{}`", r.port)))?;
                if r.via.is_some() {
                    return Err(invalid(
                        f("via"),
                        "a next hop resolved by ARP/ND at run time cannot be generated into \
                         static switch entries; give next_hop_mac instead",
                    ));
                }
                let mac = r
                    .next_hop_mac
                    .as_deref()
                    .ok_or_else(|| invalid(f("next_hop_mac"), "missing (required for P4)"))?;
                let next_hop = MacAddr::parse(mac)
                    .ok_or_else(|| invalid(f("next_hop_mac"), "not a MAC address"))?;
                Ok(ParsedRoute {
                    addr,
                    len,
                    port,
                    next_hop,
                })
            })
            .collect()
    }
}

impl Upf {
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

    /// The QFI -> queue map the daemon's UPF uses.
    pub fn qfi_map(&self) -> QfiMap {
        let mut m = QfiMap::default();
        for [q, id] in &self.qfi_to_qid {
            m.set(*q, *id);
        }
        m
    }

    /// Static and synthetic sessions as n4 sessions, numbered as the daemon numbers them.
    pub fn sessions(&self) -> Result<Vec<peregrine_n4::Session>, ConfigError> {
        let mut all = self.session.clone();
        if let Some(s) = &self.synthetic {
            let outer = match s.outer.as_str() {
                "v4" => OuterMix::V4,
                "v6" => OuterMix::V6,
                "mixed" => OuterMix::Mixed,
                o => {
                    return Err(invalid(
                        "upf.synthetic.outer",
                        format!("`{o}` is not v4, v6 or mixed"),
                    ))
                }
            };
            let p = SyntheticParams {
                seed: s.seed,
                qfis: s.qfis.clone(),
                gnbs: s.gnbs,
                outer,
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
        let mut v =
            static_sessions::to_sessions(&all, n3).map_err(|e| invalid("upf.session", e))?;
        for s in &mut v {
            s.up_seid |= STATIC_SEID_BIT;
        }
        Ok(v)
    }
}
