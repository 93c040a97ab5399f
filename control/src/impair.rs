//! The `impair` pipeline kind: two ports joined by an emulated link each way
//! (`peregrine_dataplane::stages::impair_link`), a bump in the wire that adds delay, jitter,
//! loss and a rate limit where `tc netem` is not available (docs/configuration.md,
//! "Pipeline kind impair").
//!
//! ```toml
//! [pipeline]
//! kind = "impair"
//! ports = ["a", "b"]   # the link: a <-> b
//! hold = 4096          # packets each direction holds at most (default 4096)
//!
//! [pipeline.forward]   # a -> b (absent: no impairment)
//! delay_us = 15000
//! [pipeline.reverse]   # b -> a
//! delay_us = 15000
//! ```

use crate::error::{invalid, ConfigError};
use peregrine_dataplane::io::PortId;
use peregrine_dataplane::stages::impair::{ImpairConfigError, Jitter, LinkConfig};
use peregrine_dataplane::stages::impair_link::{check_link, LinkError, MAX_HOLD_NS};
use serde::Deserialize;

/// `[pipeline] kind = "impair"`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ImpairPipeline {
    /// The two ports: packets received on the first leave on the second through `forward`,
    /// and the other way through `reverse`.
    pub ports: [String; 2],
    /// Packets each direction may hold (the egress queue's depth, wheel included).
    #[serde(default = "default_hold")]
    pub hold: usize,
    #[serde(default)]
    pub forward: LinkSection,
    #[serde(default)]
    pub reverse: LinkSection,
}

fn default_hold() -> usize {
    4096
}

/// One direction of the link (netem's terms: `delay D J distribution`, `loss`, `rate`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LinkSection {
    /// Fixed one-way delay, microseconds.
    pub delay_us: u64,
    /// Jitter, microseconds: the uniform's half width or the normal's standard deviation.
    pub jitter_us: u64,
    /// `"uniform"` (default) or `"normal"`.
    pub jitter: String,
    /// Whether jitter may reorder packets (netem's tfifo does; default true).
    pub reorder: bool,
    /// Bernoulli loss probability in [0, 1].
    pub loss: f64,
    /// Rate limit in kbit/s (absent: none).
    pub rate_kbps: Option<u64>,
    /// Token bucket of the rate limit, bytes (holds the largest packet).
    pub burst_bytes: u64,
    /// Packets waiting for the rate limiter at most.
    pub queue_limit: usize,
    /// Seed of the loss and jitter draws.
    pub seed: u64,
}

impl Default for LinkSection {
    fn default() -> Self {
        let d = LinkConfig::default();
        LinkSection {
            delay_us: 0,
            jitter_us: 0,
            jitter: "uniform".into(),
            reorder: d.reorder,
            loss: d.loss,
            rate_kbps: None,
            burst_bytes: d.burst_bytes,
            queue_limit: d.queue_limit,
            seed: d.seed,
        }
    }
}

impl LinkSection {
    /// The link model's configuration; errors name the key under `at` (`pipeline.forward`).
    pub fn link(&self, at: &str) -> Result<LinkConfig, ConfigError> {
        let key = |k: &str| format!("{at}.{k}");
        let jitter = match self.jitter.as_str() {
            "uniform" => Jitter::Uniform,
            "normal" => Jitter::Normal,
            o => {
                return Err(invalid(
                    key("jitter"),
                    format!("`{o}` is neither \"uniform\" nor \"normal\""),
                ))
            }
        };
        let us = |k: &str, v: u64| {
            v.checked_mul(1000)
                .ok_or_else(|| invalid(key(k), format!("{v} us is too long")))
        };
        let cfg = LinkConfig {
            rate_bytes_per_s: self.rate_kbps.map(|k| k.saturating_mul(1000) / 8),
            burst_bytes: self.burst_bytes,
            queue_limit: self.queue_limit,
            delay_ns: us("delay_us", self.delay_us)?,
            jitter_ns: us("jitter_us", self.jitter_us)?,
            jitter,
            reorder: self.reorder,
            loss: self.loss,
            seed: self.seed,
        };
        let max_ms = MAX_HOLD_NS / 1_000_000;
        check_link(&cfg).map_err(|e| match e {
            LinkError::Model(ImpairConfigError::Loss(l)) => {
                invalid(key("loss"), format!("{l} is not a probability in [0, 1]"))
            }
            LinkError::Model(ImpairConfigError::ZeroRate) => invalid(
                key("rate_kbps"),
                "must be at least 1 kbit/s (leave it out for no limit)",
            ),
            LinkError::Model(ImpairConfigError::ZeroQueue) => {
                invalid(key("queue_limit"), "a rate-limited link needs a queue of at least 1")
            }
            LinkError::Model(ImpairConfigError::ZeroBurst) | LinkError::Model(ImpairConfigError::ZeroHold) => {
                invalid(key("burst_bytes"), "a rate-limited link needs a bucket of at least one packet")
            }
            LinkError::TooLong(ns) => invalid(
                key("delay_us"),
                format!(
                    "delay plus jitter reaches {} ms; the egress wheel holds packets at most {max_ms} ms",
                    ns / 1_000_000
                ),
            ),
            LinkError::QueueTooLong(ns) => invalid(
                key("queue_limit"),
                format!(
                    "a full queue at this rate plus the delay holds a packet {} ms; the egress wheel holds at most {max_ms} ms (shorten the queue or raise the rate)",
                    ns / 1_000_000
                ),
            ),
        })?;
        Ok(cfg)
    }
}

impl ImpairPipeline {
    /// Check the section against the port names (`port_index`).
    pub fn validate(&self, port_index: impl Fn(&str) -> Option<PortId>) -> Result<(), ConfigError> {
        self.links(port_index).map(drop)
    }

    /// The links `(from, to, cfg)`: forward and reverse.
    pub fn links(
        &self,
        port_index: impl Fn(&str) -> Option<PortId>,
    ) -> Result<[(PortId, PortId, LinkConfig); 2], ConfigError> {
        let [a, b] = [0, 1].map(|i| {
            port_index(&self.ports[i]).ok_or_else(|| {
                invalid(
                    format!("pipeline.ports[{i}]"),
                    format!("no port named `{}`", self.ports[i]),
                )
            })
        });
        let (a, b) = (a?, b?);
        if a == b {
            return Err(invalid("pipeline.ports", "needs two different ports"));
        }
        if self.hold == 0 {
            return Err(invalid("pipeline.hold", "must be at least 1"));
        }
        Ok([
            (a, b, self.forward.link("pipeline.forward")?),
            (b, a, self.reverse.link("pipeline.reverse")?),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ImpairPipeline, String> {
        toml::from_str(s).map_err(|e| e.to_string())
    }

    fn idx(n: &str) -> Option<PortId> {
        ["a", "b"].iter().position(|p| *p == n).map(|i| i as PortId)
    }

    #[test]
    fn a_link_each_way_with_defaults() {
        let p = parse(
            "ports = [\"a\", \"b\"]\n[forward]\ndelay_us = 15000\njitter_us = 100\njitter = \"normal\"\n",
        )
        .unwrap();
        let [f, r] = p.links(idx).unwrap();
        assert_eq!((f.0, f.1), (0, 1));
        assert_eq!((r.0, r.1), (1, 0));
        assert_eq!(f.2.delay_ns, 15_000_000);
        assert_eq!(f.2.jitter_ns, 100_000);
        assert_eq!(f.2.jitter, Jitter::Normal);
        assert_eq!(r.2, LinkConfig::default());
        assert_eq!(p.hold, 4096);
    }

    #[test]
    fn errors_name_the_key() {
        let e = |s: &str| parse(s).unwrap().validate(idx).unwrap_err().to_string();
        let has = |s: &str, k: &str| {
            let m = e(s);
            assert!(m.contains(k), "{m} should name {k}");
        };
        has("ports = [\"a\", \"c\"]", "pipeline.ports[1]");
        has("ports = [\"a\", \"a\"]", "pipeline.ports");
        has("ports = [\"a\", \"b\"]\nhold = 0", "pipeline.hold");
        has(
            "ports = [\"a\", \"b\"]\n[forward]\nloss = 1.5",
            "pipeline.forward.loss",
        );
        has(
            "ports = [\"a\", \"b\"]\n[reverse]\njitter = \"pareto\"",
            "pipeline.reverse.jitter",
        );
        has(
            "ports = [\"a\", \"b\"]\n[reverse]\ndelay_us = 400000",
            "pipeline.reverse.delay_us",
        );
        has(
            "ports = [\"a\", \"b\"]\n[forward]\nrate_kbps = 0",
            "pipeline.forward.rate_kbps",
        );
        has(
            "ports = [\"a\", \"b\"]\n[forward]\nrate_kbps = 1000\nqueue_limit = 1000",
            "pipeline.forward.queue_limit",
        );
        has(
            "ports = [\"a\", \"b\"]\n[forward]\nrate_kbps = 1000\nburst_bytes = 0",
            "pipeline.forward.burst_bytes",
        );
        let unknown = parse("ports = [\"a\", \"b\"]\n[forward]\ndelay_ms = 3").unwrap_err();
        assert!(unknown.contains("delay_ms"), "{unknown}");
    }
}
