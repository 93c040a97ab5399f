//! `[upf.qos]` and `[[upf.qos.policy]]`: how QERs enforce their MBR (docs/upf.md, "MBR
//! enforcement"): policing with configurable bursts, or shaping in the egress scheduler.

use crate::error::{invalid, ConfigError};
use peregrine_dataplane::qos::policy::{MAX_SHAPING_QUEUE_NS, NUM_QFI_POLICIES};
use peregrine_dataplane::qos::{BurstSpec, Enforcement, QerPolicy, QosPolicies};
use serde::Deserialize;

/// A burst: an integer is bytes, a string a time at the rate (`"100ms"`, `"500us"`, `"1s"`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Burst {
    Bytes(u64),
    Time(String),
}

/// `[upf.qos]`, and (with `qfis`) one `[[upf.qos.policy]]`, where a missing key takes
/// `[upf.qos]`'s value.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct QosSection {
    /// `"shaping"` (default) or `"policing"`.
    pub mbr_enforcement: Option<String>,
    /// Peak burst (PBS, the MBR bucket) and committed burst (CBS, the GBR bucket).
    pub pbs: Option<Burst>,
    pub cbs: Option<Burst>,
    /// Floor of a burst given as a time (default 65536).
    pub min_burst_bytes: Option<u64>,
    /// The shaper's burst tolerance (default "2ms", at least 3200 bytes).
    pub shaping_burst: Option<Burst>,
    /// The shaping queue bound, ms at the MBR (default 100).
    pub shaping_queue_ms: Option<u64>,
    /// `[[upf.qos.policy]]` only: the QFIs whose QERs use this policy.
    pub qfis: Option<Vec<u8>>,
    /// Overrides for the QERs of some QFIs.
    #[serde(default)]
    pub policy: Vec<QosSection>,
}

/// Largest burst accepted, bytes (1 GiB) and as a time (10 s).
const MAX_BURST_BYTES: u64 = 1 << 30;
const MAX_BURST_NS: u64 = 10_000_000_000;
/// Smallest burst in bytes: one full-size frame with GTP-U, or full-size packets are red
/// however slowly they come.
const MIN_BURST_BYTES: u64 = 1_600;

fn parse_time_ns(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1_000_000)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1_000)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1_000_000_000)
    } else {
        return None;
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

fn burst(key: &str, b: &Burst, min_bytes: u64) -> Result<BurstSpec, ConfigError> {
    match b {
        Burst::Bytes(n) if (MIN_BURST_BYTES..=MAX_BURST_BYTES).contains(n) => {
            Ok(BurstSpec::Bytes(*n))
        }
        Burst::Bytes(n) => Err(invalid(
            key,
            format!("{n} bytes: must be {MIN_BURST_BYTES}..={MAX_BURST_BYTES}"),
        )),
        Burst::Time(t) => match parse_time_ns(t) {
            Some(ns) if (1..=MAX_BURST_NS).contains(&ns) => Ok(BurstSpec::Time { ns, min_bytes }),
            Some(_) => Err(invalid(
                key,
                format!("`{t}`: must be above 0 and at most 10s"),
            )),
            None => Err(invalid(
                key,
                format!(
                    "`{t}`: a byte count (integer) or a time such as \"100ms\", \"500us\", \"1s\""
                ),
            )),
        },
    }
}

impl QosSection {
    /// The policy these keys give on top of `base`; `at` names the table for errors.
    fn apply(&self, base: &QerPolicy, at: &str) -> Result<QerPolicy, ConfigError> {
        let mut p = *base;
        if let Some(e) = &self.mbr_enforcement {
            p.enforcement = match e.as_str() {
                "shaping" => Enforcement::Shaping,
                "policing" => Enforcement::Policing,
                _ => {
                    return Err(invalid(
                        format!("{at}.mbr_enforcement"),
                        format!("`{e}`: \"shaping\" or \"policing\""),
                    ))
                }
            };
        }
        let floor = match self.min_burst_bytes {
            Some(m) if (MIN_BURST_BYTES..=MAX_BURST_BYTES).contains(&m) => Some(m),
            Some(m) => {
                return Err(invalid(
                    format!("{at}.min_burst_bytes"),
                    format!("{m}: must be {MIN_BURST_BYTES}..={MAX_BURST_BYTES}"),
                ))
            }
            None => None,
        };
        // A new floor applies to the inherited time bursts too.
        let refloor = |b: BurstSpec| match (b, floor) {
            (BurstSpec::Time { ns, .. }, Some(min_bytes)) => BurstSpec::Time { ns, min_bytes },
            (b, _) => b,
        };
        let min_of = |b: &BurstSpec| match b {
            BurstSpec::Time { min_bytes, .. } => *min_bytes,
            BurstSpec::Bytes(_) => peregrine_dataplane::qos::policy::DEFAULT_MIN_BURST_BYTES,
        };
        p.pbs = refloor(p.pbs);
        p.cbs = refloor(p.cbs);
        if let Some(b) = &self.pbs {
            p.pbs = burst(&format!("{at}.pbs"), b, floor.unwrap_or(min_of(&base.pbs)))?;
        }
        if let Some(b) = &self.cbs {
            p.cbs = burst(&format!("{at}.cbs"), b, floor.unwrap_or(min_of(&base.cbs)))?;
        }
        if let Some(b) = &self.shaping_burst {
            let min = peregrine_dataplane::qos::policy::DEFAULT_SHAPING_MIN_BURST_BYTES;
            p.shaping_burst = burst(&format!("{at}.shaping_burst"), b, min)?;
        }
        if let Some(ms) = self.shaping_queue_ms {
            let ns = ms.saturating_mul(1_000_000);
            if ms == 0 || ns > MAX_SHAPING_QUEUE_NS {
                return Err(invalid(
                    format!("{at}.shaping_queue_ms"),
                    format!(
                        "{ms}: must be 1..={} (the egress timing wheel's reach)",
                        MAX_SHAPING_QUEUE_NS / 1_000_000
                    ),
                ));
            }
            p.shaping_queue_ns = ns;
        }
        Ok(p)
    }

    /// The policies, or a clear error naming the key.
    pub fn policies(&self) -> Result<QosPolicies, ConfigError> {
        if self.qfis.is_some() {
            return Err(invalid(
                "upf.qos.qfis",
                "only in [[upf.qos.policy]] (QFIs of an override)",
            ));
        }
        let default = self.apply(&QerPolicy::default(), "upf.qos")?;
        let mut ps = QosPolicies::new(default);
        if self.policy.len() > NUM_QFI_POLICIES {
            return Err(invalid(
                "upf.qos.policy",
                format!("at most {NUM_QFI_POLICIES} policies"),
            ));
        }
        for (i, q) in self.policy.iter().enumerate() {
            let at = format!("upf.qos.policy[{i}]");
            if !q.policy.is_empty() {
                return Err(invalid(format!("{at}.policy"), "policies do not nest"));
            }
            let qfis = q.qfis.as_deref().unwrap_or(&[]);
            if qfis.is_empty() || qfis.iter().any(|&f| f > 63) {
                return Err(invalid(format!("{at}.qfis"), "QFIs 0..=63, at least one"));
            }
            let p = q.apply(&default, &at)?;
            ps.add(qfis, p);
        }
        Ok(ps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<QosPolicies, String> {
        let s: QosSection = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        s.policies().map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_shape_with_tcp_sized_bursts() {
        let p = parse("").unwrap();
        assert_eq!(p.default, QerPolicy::default());
        assert_eq!(p.default.enforcement, Enforcement::Shaping);
        assert_eq!(p.default.pbs.bytes(2_500_000), 250_000);
    }

    #[test]
    fn bursts_as_bytes_or_time_and_per_qfi_overrides() {
        let p = parse(
            r#"
mbr_enforcement = "policing"
pbs = "50ms"
cbs = 30000
min_burst_bytes = 20000
[[policy]]
qfis = [1, 2]
mbr_enforcement = "shaping"
shaping_queue_ms = 40
shaping_burst = 4000
"#,
        )
        .unwrap();
        assert_eq!(p.default.enforcement, Enforcement::Policing);
        assert_eq!(
            p.default.pbs,
            BurstSpec::Time {
                ns: 50_000_000,
                min_bytes: 20_000
            }
        );
        assert_eq!(p.default.cbs, BurstSpec::Bytes(30_000));
        let o = p.for_qfi(Some(2));
        assert_eq!(o.enforcement, Enforcement::Shaping);
        assert_eq!(o.pbs, p.default.pbs, "inherited");
        assert_eq!(o.shaping_queue_ns, 40_000_000);
        assert_eq!(o.shaping_burst, BurstSpec::Bytes(4000));
        assert_eq!(p.for_qfi(Some(3)).enforcement, Enforcement::Policing);
    }

    #[test]
    fn bad_values_name_the_key() {
        for (text, key) in [
            ("pbs = \"100 parsecs\"", "upf.qos.pbs"),
            ("pbs = 10", "upf.qos.pbs"),
            ("cbs = \"0ms\"", "upf.qos.cbs"),
            ("cbs = \"20s\"", "upf.qos.cbs"),
            ("mbr_enforcement = \"both\"", "upf.qos.mbr_enforcement"),
            ("min_burst_bytes = 1", "upf.qos.min_burst_bytes"),
            ("shaping_queue_ms = 0", "upf.qos.shaping_queue_ms"),
            ("shaping_queue_ms = 900", "upf.qos.shaping_queue_ms"),
            ("[[policy]]\nqfis = [64]", "upf.qos.policy[0].qfis"),
            ("[[policy]]\nqfis = []", "upf.qos.policy[0].qfis"),
            ("[[policy]]\nqfis = [1]\npbs = 5", "upf.qos.policy[0].pbs"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(key), "`{text}`: {e}");
        }
        assert!(parse("burst = 100000").unwrap_err().contains("burst"));
    }
}
