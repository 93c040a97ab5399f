//! The end-of-run report: packets in/out per port, drops by reason, and each feature's part
//! (`crate::feature::FeatureReport`), kept as JSON under the feature's name.

use peregrine_dataplane::io::{PortInfo, PortStats};
use peregrine_dataplane::runtime::{Counters, Reasons};
use serde::Serialize;
use std::fmt::Write;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PortSummary {
    pub name: String,
    pub driver: String,
    /// Packets the workers received / sent on this port.
    pub rx: u64,
    pub tx: u64,
    /// The backend's own counters (rte_eth_stats for DPDK).
    pub stats_ipackets: u64,
    pub stats_opackets: u64,
    pub stats_imissed: u64,
    pub stats_rx_nombuf: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub seconds: f64,
    pub workers: usize,
    pub stages: Vec<String>,
    pub packets_in: u64,
    pub packets_out: u64,
    pub to_control: u64,
    /// Frames the control side sent through the workers (ARP / ND replies, End Markers),
    /// not part of `packets_out`.
    pub injected: u64,
    pub dropped: u64,
    /// Packets a worker handed to another (flow steering); each is counted once more as
    /// received by the worker that took it.
    pub handed_off: u64,
    pub ports: Vec<PortSummary>,
    /// Every registered reason, zero or not, in registration order.
    pub drops: Vec<(String, u64)>,
    /// Each enabled feature's figures under its name (`"upf"`, `"int"`), in pipeline order.
    #[serde(flatten)]
    pub features: serde_json::Map<String, serde_json::Value>,
    /// The features' lines in the printed report.
    #[serde(skip)]
    pub feature_text: Vec<String>,
}

impl Summary {
    pub fn new(
        seconds: f64,
        workers: usize,
        stages: &[&'static str],
        ports: &[PortInfo],
        stats: &[PortStats],
        c: &Counters,
        reasons: &Reasons,
    ) -> Summary {
        Summary {
            seconds,
            workers,
            stages: stages.iter().map(|s| s.to_string()).collect(),
            packets_in: c.total_rx(),
            packets_out: c.total_tx(),
            to_control: c.to_control,
            injected: c.injected,
            dropped: c.total_drops(),
            handed_off: c.handed_off,
            ports: ports
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let s = stats.get(i).copied().unwrap_or_default();
                    PortSummary {
                        name: p.name.clone(),
                        driver: p.driver.clone(),
                        rx: c.rx_pkts.get(i).copied().unwrap_or(0),
                        tx: c.tx_pkts.get(i).copied().unwrap_or(0),
                        stats_ipackets: s.ipackets,
                        stats_opackets: s.opackets,
                        stats_imissed: s.imissed,
                        stats_rx_nombuf: s.rx_nombuf,
                    }
                })
                .collect(),
            drops: reasons
                .names()
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), c.drops.get(i).copied().unwrap_or(0)))
                .collect(),
            features: serde_json::Map::new(),
            feature_text: Vec::new(),
        }
    }

    /// Add a feature's part.
    pub fn add_feature(&mut self, name: &str, json: serde_json::Value, text: String) {
        self.features.insert(name.to_string(), json);
        self.feature_text.push(text);
    }

    /// A feature's figures, read back as its type (`summary.feature::<IntDaemonStats>("int")`).
    pub fn feature<T: serde::de::DeserializeOwned>(&self, name: &str) -> Option<T> {
        serde_json::from_value(self.features.get(name)?.clone()).ok()
    }

    /// The human-readable report printed at the end of `peregrine run`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let rate = if self.seconds > 0.0 {
            self.packets_in as f64 / self.seconds / 1e6
        } else {
            0.0
        };
        let _ = writeln!(
            s,
            "peregrine: {} worker(s), pipeline [{}], {:.3} s, {:.3} Mpps in",
            self.workers,
            self.stages.join(" -> "),
            self.seconds,
            rate
        );
        let _ = writeln!(
            s,
            "{:<10} {:<10} {:>12} {:>12} {:>10} {:>10}",
            "port", "driver", "rx", "tx", "missed", "nombuf"
        );
        for p in &self.ports {
            let _ = writeln!(
                s,
                "{:<10} {:<10} {:>12} {:>12} {:>10} {:>10}",
                p.name, p.driver, p.rx, p.tx, p.stats_imissed, p.stats_rx_nombuf
            );
        }
        let _ = writeln!(
            s,
            "packets: in {}, out {}, to control {}, dropped {}",
            self.packets_in, self.packets_out, self.to_control, self.dropped
        );
        if self.injected > 0 {
            let _ = writeln!(s, "injected by control: {}", self.injected);
        }
        if self.handed_off > 0 {
            let _ = writeln!(s, "handed off between workers: {}", self.handed_off);
        }
        let _ = writeln!(s, "dropped by reason:");
        let mut any = false;
        for (name, n) in &self.drops {
            if *n > 0 {
                let _ = writeln!(s, "  {name:<28} {n:>12}");
                any = true;
            }
        }
        if !any {
            let _ = writeln!(s, "  (none)");
        }
        for t in &self.feature_text {
            s.push_str(t);
        }
        s
    }
}
