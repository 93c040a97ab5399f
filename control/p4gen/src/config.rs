//! A Peregrine config as the P4 generator reads it, in the daemon's own types: the platform
//! part (`[[port]]`, `[[route]]`, ...) parsed and validated by `peregrine_control::config`,
//! and the sections the generator uses, `[upf]`, `[int]`, `[kestrel]`, `[fridge]` and `[dta]`,
//! deserialised with the features' section structs. One schema, one set of defaults: a key
//! the daemon does not know, or a value of the wrong type, is refused here too, the key named.
//!
//! [`Config::parse`] checks `[upf]` as the daemon does (`UpfSection::validate`: the generator
//! compiles its sessions) and, for the other sections, only what the P4 programs can hold (the
//! builders in [`crate::model`] and [`crate::telemetry`]); [`Config::parse_checked`], what
//! `peregrine-p4 entries` reads, first runs the daemon's whole check (`peregrine
//! check-config` but for the input files), so the switch never gets entries for a config the
//! daemon refuses.

use peregrine_control::config::Config as DaemonConfig;
use peregrine_control::error::{invalid, section_error};
use peregrine_control::platform::{PipelineConfig, Platform};
use peregrine_wire::ethernet::Address as MacAddr;
use serde::de::DeserializeOwned;

pub use peregrine_control::config::{ConfigError, ParsedRoute, Port, Route};
pub use peregrine_control::dta::reporter::ReporterSection as Dta;
pub use peregrine_control::fridge::{
    FridgeEntry as FridgeConf, FridgeSection as Fridge, SliceSection as FridgeSlice,
};
pub use peregrine_control::int::IntSection as Int;
pub use peregrine_control::kestrel::{EdgesConf as KestrelEdges, KestrelSection as Kestrel};
pub use peregrine_control::upf::{Synthetic, UpfSection as Upf, STATIC_SEID_BIT};

/// The daemon's platform part and the sections the generator reads (absent: `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Workers, backend, ports, pipeline, routes: validated as the daemon validates them.
    pub platform: Platform,
    pub upf: Option<Upf>,
    pub int: Option<Int>,
    pub kestrel: Option<Kestrel>,
    pub fridge: Option<Fridge>,
    pub dta: Option<Dta>,
}

/// Section `name` of `d` in the feature's type (an unknown key is named in full).
fn section<T: DeserializeOwned>(d: &DaemonConfig, name: &str) -> Result<Option<T>, ConfigError> {
    d.sections
        .get(name)
        .map(|v| {
            v.clone()
                .try_into()
                .map_err(|e: toml::de::Error| section_error(name, &e))
        })
        .transpose()
}

impl Config {
    /// The daemon's schema and platform check, `[upf]` validated, and what the generator
    /// needs (static next hops); see the module's doc.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        Self::from_daemon(DaemonConfig::parse_platform(text)?)
    }

    /// [`parse`](Self::parse) of a config the daemon accepts as a whole (every feature
    /// section checked as `peregrine check-config` checks it).
    pub fn parse_checked(text: &str) -> Result<Config, ConfigError> {
        Self::from_daemon(DaemonConfig::parse(text)?)
    }

    fn from_daemon(d: DaemonConfig) -> Result<Config, ConfigError> {
        let c = Config {
            upf: section(&d, "upf")?,
            int: section(&d, "int")?,
            kestrel: section(&d, "kestrel")?,
            fridge: section(&d, "fridge")?,
            dta: section(&d, "dta")?,
            platform: d.platform,
        };
        // A pipeline the P4 build has no program for is refused, not generated as if it were
        // a UPF or an INT node: the switch would forward what the daemon would not.
        let no_program = match &c.platform.pipeline {
            PipelineConfig::Upf { .. }
            | PipelineConfig::Int { .. }
            | PipelineConfig::L3fwd { .. } => None,
            PipelineConfig::Xconnect { .. } => Some("xconnect"),
            PipelineConfig::DtaTranslator {} => Some("dta-translator"),
            PipelineConfig::Impair(_) => Some("impair"),
        };
        if let Some(kind) = no_program {
            return Err(invalid(
                "pipeline.kind",
                format!(
                    "`{kind}` has no P4 program (the P4 build offloads the upf, int and l3fwd \
                     pipelines; p4/README.md)"
                ),
            ));
        }
        c.routes()?;
        if let Some(u) = &c.upf {
            u.validate(|n| c.port_index(n))?;
        }
        Ok(c)
    }

    pub fn port_index(&self, name: &str) -> Option<u16> {
        self.platform.port_index(name)
    }

    /// Port MACs in port order.
    pub fn macs(&self) -> Result<Vec<MacAddr>, ConfigError> {
        self.platform
            .ports
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

    /// The routes as the daemon parses them; a next hop resolved at run time (`via`) is
    /// refused, static switch entries need its MAC.
    pub fn routes(&self) -> Result<Vec<ParsedRoute>, ConfigError> {
        if let Some(i) = self.platform.routes.iter().position(|r| r.via.is_some()) {
            return Err(invalid(
                format!("route[{i}].via"),
                "a next hop resolved by ARP/ND at run time cannot be generated into \
                 static switch entries; give next_hop_mac instead",
            ));
        }
        self.platform.parsed_routes()
    }
}
