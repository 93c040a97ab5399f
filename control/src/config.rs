//! The daemon's TOML configuration: the platform part ([`Platform`]: workers, backend,
//! ports, pipeline kind, routes, `[metrics]`) and one section per feature (`[upf]`, `[int]`,
//! ...), which the feature parses and validates itself (`crate::registry`).
//!
//! Unknown keys are errors everywhere, so a typo never silently falls back to a default; every
//! error names the offending key.

use crate::error::invalid;
pub use crate::error::ConfigError;
use crate::feature::Feature;
use crate::platform::{MetricsSection, Platform};
use peregrine_dataplane::PacketBuf;
use std::path::Path;

pub use crate::platform::{
    BackendConfig, ParsedRoute, PipelineConfig, Port, ReplayMode, Route, Workers,
};

/// A whole configuration file.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub platform: Platform,
    /// The feature sections present, unparsed (each feature parses its own).
    pub sections: toml::Table,
}

/// A configuration is its platform part plus feature sections; `cfg.ports`, `cfg.workers`
/// and the platform's helpers read through.
impl std::ops::Deref for Config {
    type Target = Platform;
    fn deref(&self) -> &Platform {
        &self.platform
    }
}

impl std::ops::DerefMut for Config {
    fn deref_mut(&mut self) -> &mut Platform {
        &mut self.platform
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let mut cfg = Self::parse(&text)?;
        cfg.platform.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        cfg.check_files()?;
        Ok(cfg)
    }

    /// Parse and validate TOML text (relative paths resolve against the current directory).
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let cfg = Self::parse_platform(text)?;
        cfg.features::<peregrine_dataplane::OwnedBuf>()?;
        Ok(cfg)
    }

    /// Parse TOML text and validate its platform part only; the feature sections are split
    /// off unchecked ([`parse`](Self::parse) then checks them). For a tool that reads some
    /// sections with the features' own types and checks them its own way (`peregrine-p4`).
    pub fn parse_platform(text: &str) -> Result<Config, ConfigError> {
        let mut table: toml::Table =
            toml::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        let mut sections = toml::Table::new();
        for name in crate::registry::sections() {
            if let Some(v) = table.remove(name) {
                sections.insert(name.to_string(), v);
            }
        }
        let legacy = legacy_upf_metrics(&mut sections)?;
        let mut platform: Platform =
            toml::Value::Table(table)
                .try_into()
                .map_err(|e: toml::de::Error| {
                    let mut m = e.to_string();
                    if m.contains("unknown field") {
                        // The platform lists its own keys; the features' are sections too.
                        let s = crate::registry::sections().join("`, `");
                        m = format!("{}, or a feature section: `{s}`", m.trim_end());
                    }
                    ConfigError::Syntax(m)
                })?;
        if let Some(listen) = legacy {
            if platform.metrics.is_some() {
                return Err(invalid(
                    "upf.metrics",
                    "is the old name of [metrics] listen; set one of them",
                ));
            }
            platform.metrics = Some(MetricsSection { listen });
        }
        platform.validate()?;
        Ok(Config { platform, sections })
    }

    /// Check the platform part, then every feature section.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.platform.validate()?;
        self.features::<peregrine_dataplane::OwnedBuf>()?;
        Ok(())
    }

    /// The enabled features, configured, in pipeline order.
    pub fn features<B: PacketBuf + 'static>(
        &self,
    ) -> Result<Vec<Box<dyn Feature<B>>>, ConfigError> {
        crate::registry::configure(&self.sections, &self.platform)
    }
}

/// `[upf] metrics = "ADDR"`, the endpoint's place before `[metrics]` existed: taken out of
/// the UPF's section and served by the daemon for every pipeline kind.
fn legacy_upf_metrics(
    sections: &mut toml::Table,
) -> Result<Option<std::net::SocketAddr>, ConfigError> {
    let Some(v) = sections
        .get_mut("upf")
        .and_then(|u| u.as_table_mut())
        .and_then(|t| t.remove("metrics"))
    else {
        return Ok(None);
    };
    let s = v
        .as_str()
        .ok_or_else(|| invalid("upf.metrics", "must be a string like \"127.0.0.1:9100\""))?;
    s.parse()
        .map(Some)
        .map_err(|_| invalid("upf.metrics", format!("`{s}` is not ADDRESS:PORT")))
}

/// A valid two-port pcap `l3fwd` configuration, for the feature sections' unit tests to add
/// their section to (or change the pipeline kind of).
#[cfg(test)]
pub(crate) const TWO_PORT_L3FWD: &str = r#"
[backend]
kind = "pcap"

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
tx = "out3.pcap"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
tx = "out.pcap"

[pipeline]
kind = "l3fwd"

[[route]]
prefix = "10.45.0.0/16"
port = "n6"
next_hop_mac = "02:00:00:00:01:06"
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    const GOOD: &str = r#"
[workers]
count = 2
burst = 64

[backend]
kind = "pcap"
loops = 2

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
rx = "in.pcap"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
tx = "out.pcap"

[pipeline]
kind = "l3fwd"

[[route]]
prefix = "10.45.0.0/16"
port = "n6"
next_hop_mac = "02:00:00:00:01:06"

[[route]]
prefix = "2001:db8::/32"
port = "n3"
next_hop_mac = "02:00:00:00:01:03"
"#;

    #[test]
    fn good_config_parses() {
        let c = Config::parse(GOOD).unwrap();
        assert_eq!(c.workers.count, 2);
        assert_eq!(c.ports.len(), 2);
        let r = c.parsed_routes().unwrap();
        assert_eq!(r[0].len, 16);
        assert_eq!(r[0].port, 1);
        assert_eq!(r[1].addr, "2001:db8::".parse::<IpAddr>().unwrap());
        assert_eq!(r[0].via, None);
        // A route by gateway: no MAC until ARP / ND resolves it (`crate::nexthop`).
        let c = Config::parse(&GOOD.replace(
            "next_hop_mac = \"02:00:00:00:01:06\"",
            "via = \"192.0.2.10\"",
        ))
        .unwrap();
        let r = c.parsed_routes().unwrap();
        assert_eq!(r[0].via, Some("192.0.2.10".parse().unwrap()));
        assert_eq!(
            r[0].next_hop,
            peregrine_dataplane::stages::l3fwd::NextHop::UNRESOLVED
        );
        assert_eq!(c.neighbour.retrans_ms, 1000);
    }

    fn err(text: &str) -> String {
        Config::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (GOOD.replace("count = 2", "count = 0"), "workers.count"),
            (GOOD.replace("burst = 64", "burst = 1000"), "workers.burst"),
            (
                GOOD.replace("02:00:00:00:00:06", "02:00:00:00:06"),
                "port[1].mac",
            ),
            (
                GOOD.replace("name = \"n6\"", "name = \"n3\""),
                "port[1].name",
            ),
            (
                GOOD.replace("10.45.0.0/16", "10.45.0.0/33"),
                "route[0].prefix",
            ),
            (
                GOOD.replace("10.45.0.0/16", "10.45.0/16"),
                "route[0].prefix",
            ),
            (
                GOOD.replace("port = \"n6\"", "port = \"n9\""),
                "route[0].port",
            ),
            (GOOD.replace("tx = \"out.pcap\"", ""), "port[1].rx"),
            (
                GOOD.replace("next_hop_mac = \"02:00:00:00:01:06\"", ""),
                "route[0].next_hop_mac",
            ),
            (
                GOOD.replace("02:00:00:00:01:06", "00:00:00:00:00:00"),
                "route[0].next_hop_mac",
            ),
            (
                GOOD.replace(
                    "next_hop_mac = \"02:00:00:00:01:06\"",
                    "via = \"10.45.0.300\"",
                ),
                "route[0].via",
            ),
            (
                GOOD.replace(
                    "next_hop_mac = \"02:00:00:00:01:06\"",
                    "via = \"224.0.0.1\"",
                ),
                "route[0].via",
            ),
            (
                GOOD.replace(
                    "kind = \"l3fwd\"",
                    "kind = \"l3fwd\"\n[neighbour]\nretrans_ms = 0",
                ),
                "neighbour.retrans_ms",
            ),
            (
                GOOD.replace("loops = 2", "loops = 2\nspeed = -1.0"),
                "backend.speed",
            ),
            (
                GOOD.replace(
                    "rx = \"in.pcap\"",
                    "rx = \"in.pcap\"\ndevice = \"net_ring0\"",
                ),
                "port[0].device",
            ),
        ];
        for (text, field) in cases {
            let e = err(&text);
            assert!(e.contains(field), "error `{e}` should name `{field}`");
        }
    }

    #[test]
    fn syntax_and_unknown_keys_are_errors_not_panics() {
        assert!(err(&GOOD.replace("burst = 64", "burst = \"lots\"")).contains("burst"));
        assert!(err(&GOOD.replace("burst = 64", "brust = 64")).contains("brust"));
        assert!(err(&GOOD.replace("kind = \"pcap\"", "kind = \"netmap\"")).contains("netmap"));
        assert!(!err("[[[").is_empty());
        assert!(err("").contains("backend"));
    }

    #[test]
    fn dpdk_needs_devices_and_enough_mbufs() {
        let d = r#"
[backend]
kind = "dpdk"
eal_args = ["--no-huge"]
mbufs_per_worker = 100
[[port]]
name = "a"
mac = "02:00:00:00:00:01"
device = "net_ring0"
[pipeline]
kind = "xconnect"
pairs = [["a", "a"]]
"#;
        assert!(err(d).contains("backend.mbufs_per_worker"));
        let ok = d.replace("mbufs_per_worker = 100", "");
        Config::parse(&ok).unwrap();
        assert!(err(&ok.replace("device = \"net_ring0\"", "")).contains("port[0].device"));
        assert!(err(&ok.replace("[\"a\", \"a\"]", "[\"a\", \"b\"]")).contains("pipeline.pairs[0]"));
    }

    #[test]
    fn teid_reuse_after_is_validated() {
        let upf = GOOD.replace("kind = \"l3fwd\"", "kind = \"upf\"")
            + "[upf]\nnode_id = \"192.0.2.1\"\nn3 = [\"192.0.2.1\"]\n";
        Config::parse(&upf).unwrap();
        Config::parse(&(upf.clone() + "teid_reuse_after_s = 5\n")).unwrap();
        for bad in ["0", "3601"] {
            let e = err(&(upf.clone() + "teid_reuse_after_s = " + bad + "\n"));
            assert!(e.contains("upf.teid_reuse_after_s"), "{e}");
        }
    }

    #[test]
    fn metrics_section_and_its_old_upf_name() {
        let c =
            Config::parse(&(GOOD.to_string() + "[metrics]\nlisten = \"127.0.0.1:0\"\n")).unwrap();
        assert_eq!(c.metrics.as_ref().unwrap().listen.port(), 0);
        assert!(err(&(GOOD.to_string() + "[metrics]\nlisten = \"nowhere\"\n")).contains("listen"));
        let upf = GOOD.replace("kind = \"l3fwd\"", "kind = \"upf\"")
            + "[upf]\nnode_id = \"192.0.2.1\"\nn3 = [\"192.0.2.1\"]\nmetrics = \"127.0.0.1:9\"\n";
        let c = Config::parse(&upf).unwrap();
        assert_eq!(c.metrics.as_ref().unwrap().listen.port(), 9);
        assert!(
            err(&(upf.clone() + "[metrics]\nlisten = \"127.0.0.1:0\"\n")).contains("upf.metrics")
        );
        assert!(err(&upf.replace("127.0.0.1:9", "9")).contains("upf.metrics"));
        // A feature section the pipeline kind cannot place is an error, not ignored.
        assert!(
            err(&(GOOD.to_string() + "[int]\nnode_id = 1\nroles = [\"sink\"]\n")).contains("int")
        );
        assert!(
            err(&(GOOD.to_string() + "[upf]\nnode_id = \"x\"\nn3 = [\"192.0.2.1\"]\n"))
                .contains("upf")
        );
        // An unknown section is named, with the feature sections a file may have.
        let e = err(&(GOOD.to_string() + "[falcon]\nwidth = 1\n"));
        assert!(e.contains("falcon") && e.contains("`upf`, `int`"), "{e}");
        // A known feature's section is validated, the key named.
        let e = err(&(GOOD.to_string() + "[kestrel]\nwidth = 1\n"));
        assert!(e.contains("kestrel") && e.contains("power of two"), "{e}");
    }
}
