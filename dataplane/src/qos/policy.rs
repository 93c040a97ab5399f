//! How a QER's MBR is enforced: the burst sizes of its policer and the choice between
//! policing (RFC 2698 TrTCM, red dropped) and shaping (a per-session pacer in front of the
//! egress scheduler with a bounded queue).
//!
//! Why the defaults are what they are (docs/upf.md, "MBR enforcement"): TCP sends a
//! congestion window's worth of segments back to back, so a policer whose bucket holds less
//! than that burst drops several segments of one window. CUBIC halves its window after each
//! such loss burst and BBR (which does not react to isolated losses) keeps sending at what it
//! measured, which a small bucket keeps below the MBR; either way TCP stays far below the
//! MBR. A bucket of about one round trip at the rate (100 ms) and at least 64 KiB holds an
//! ordinary window's burst; shaping delays the excess instead of dropping it, which TCP sees
//! as a longer round trip, not as loss.

use super::pacer::PacerConfig;
use super::trtcm::{kbps_to_bytes_per_s, qer_config_with, ColourMode, TrTcmConfig};

/// A burst size: fixed bytes, or a time at the rate with a floor in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BurstSpec {
    Bytes(u64),
    /// `rate * ns / 10^9` bytes, at least `min_bytes` (for a non-zero rate).
    Time {
        ns: u64,
        min_bytes: u64,
    },
}

impl BurstSpec {
    /// The burst in bytes at `rate_bytes_per_s` (0 for a zero rate: nothing to hold).
    pub fn bytes(&self, rate_bytes_per_s: u64) -> u64 {
        if rate_bytes_per_s == 0 {
            return 0;
        }
        match *self {
            BurstSpec::Bytes(b) => b,
            BurstSpec::Time { ns, min_bytes } => {
                let b = u128::from(rate_bytes_per_s) * u128::from(ns) / 1_000_000_000;
                u64::try_from(b).unwrap_or(u64::MAX).max(min_bytes)
            }
        }
    }
}

/// Policing (drop above the MBR) or shaping (delay above the MBR, drop beyond a bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Enforcement {
    Policing,
    #[default]
    Shaping,
}

/// Default policer burst: 100 ms at the rate (about one wide-area round trip) ...
pub const DEFAULT_BURST_NS: u64 = 100_000_000;
/// ... and at least 64 KiB (a TCP window of 44 full-size segments).
pub const DEFAULT_MIN_BURST_BYTES: u64 = 65_536;
/// The shaper's own burst tolerance: 2 ms at the rate, at least two full-size GTP-U frames,
/// so a backlogged session leaves smoothly at its MBR.
pub const DEFAULT_SHAPING_BURST_NS: u64 = 2_000_000;
pub const DEFAULT_SHAPING_MIN_BURST_BYTES: u64 = 3_200;
/// Default shaping queue bound: 100 ms at the MBR (about one bandwidth-delay product).
pub const DEFAULT_SHAPING_QUEUE_NS: u64 = 100_000_000;
/// The longest shaping queue the egress scheduler's timing wheel can hold.
pub const MAX_SHAPING_QUEUE_NS: u64 = 250_000_000;

/// How the QERs of one policy (all QERs, or those of some QFIs) enforce their MBR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QerPolicy {
    pub enforcement: Enforcement,
    /// Committed burst (CBS, for the GBR) and peak burst (PBS, for the MBR) of the policer.
    pub cbs: BurstSpec,
    pub pbs: BurstSpec,
    /// Shaping: the pacer's burst tolerance and how much delay (time at the MBR) it queues
    /// before it drops.
    pub shaping_burst: BurstSpec,
    pub shaping_queue_ns: u64,
}

impl Default for QerPolicy {
    fn default() -> Self {
        let tcp = BurstSpec::Time {
            ns: DEFAULT_BURST_NS,
            min_bytes: DEFAULT_MIN_BURST_BYTES,
        };
        QerPolicy {
            enforcement: Enforcement::default(),
            cbs: tcp,
            pbs: tcp,
            shaping_burst: BurstSpec::Time {
                ns: DEFAULT_SHAPING_BURST_NS,
                min_bytes: DEFAULT_SHAPING_MIN_BURST_BYTES,
            },
            shaping_queue_ns: DEFAULT_SHAPING_QUEUE_NS,
        }
    }
}

impl QerPolicy {
    /// The policer of the bursts before this change: 10 ms at the rate, at least 3200 bytes
    /// (kept for comparisons, `perf/results/tcp-mbr.md`).
    pub fn legacy_policing() -> QerPolicy {
        let b = BurstSpec::Time {
            ns: super::trtcm::QER_BURST_NS,
            min_bytes: super::trtcm::QER_MIN_BURST_BYTES,
        };
        QerPolicy {
            enforcement: Enforcement::Policing,
            cbs: b,
            pbs: b,
            ..QerPolicy::default()
        }
    }

    /// The TrTCM of a QER direction (TS 29.244 §7.5.2.5: MBR → PIR, GBR → CIR, kbit/s);
    /// `None` without an MBR (no limit). GBR above MBR is clamped to the MBR.
    pub fn meter_kbps(
        &self,
        mbr_kbps: Option<u64>,
        gbr_kbps: Option<u64>,
        mode: ColourMode,
    ) -> Option<TrTcmConfig> {
        qer_config_with(
            mbr_kbps,
            gbr_kbps,
            mode,
            |cir| self.cbs.bytes(cir),
            |pir| self.pbs.bytes(pir),
        )
    }

    /// The pacer of a QER direction when this policy shapes; `None` when it polices or there
    /// is no MBR.
    pub fn pacer_kbps(&self, mbr_kbps: Option<u64>) -> Option<PacerConfig> {
        if self.enforcement != Enforcement::Shaping {
            return None;
        }
        let rate = kbps_to_bytes_per_s(mbr_kbps?);
        if rate == 0 {
            return None;
        }
        Some(PacerConfig {
            rate_bytes_per_s: rate,
            burst_bytes: u32::try_from(self.shaping_burst.bytes(rate)).unwrap_or(u32::MAX),
            queue_ns: u32::try_from(self.shaping_queue_ns).unwrap_or(u32::MAX),
        })
    }
}

/// Most overrides a [`QosPolicies`] holds.
pub const NUM_QFI_POLICIES: usize = 16;

/// Policies by QFI: a default and up to [`NUM_QFI_POLICIES`] overrides (`[[upf.qos.policy]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosPolicies {
    pub default: QerPolicy,
    /// Index into `overrides` + 1 per QFI (0: the default).
    by_qfi: [u8; super::NUM_QFI],
    overrides: Vec<QerPolicy>,
}

impl Default for QosPolicies {
    fn default() -> Self {
        QosPolicies::new(QerPolicy::default())
    }
}

impl QosPolicies {
    pub fn new(default: QerPolicy) -> QosPolicies {
        QosPolicies {
            default,
            by_qfi: [0; super::NUM_QFI],
            overrides: Vec::new(),
        }
    }

    /// Use `p` for the QERs marking one of `qfis` (later calls win for a QFI named twice).
    /// QFIs above 63 are ignored (the config layer refuses them).
    pub fn add(&mut self, qfis: &[u8], p: QerPolicy) {
        if self.overrides.len() >= NUM_QFI_POLICIES {
            return;
        }
        self.overrides.push(p);
        let k = self.overrides.len() as u8;
        for &q in qfis {
            if let Some(s) = self.by_qfi.get_mut(usize::from(q)) {
                *s = k;
            }
        }
    }

    /// The policy of a QER with this QFI (none: the default).
    pub fn for_qfi(&self, qfi: Option<u8>) -> &QerPolicy {
        match qfi.and_then(|q| self.by_qfi.get(usize::from(q))) {
            Some(&k) if k > 0 => &self.overrides[usize::from(k) - 1],
            _ => &self.default,
        }
    }

    /// Whether any policy shapes (the egress ports then need schedulers).
    pub fn any_shaping(&self) -> bool {
        std::iter::once(&self.default)
            .chain(&self.overrides)
            .any(|p| p.enforcement == Enforcement::Shaping)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_follow_rate_with_a_floor() {
        let p = QerPolicy::default();
        // 20 Mbit/s = 2.5 MB/s: 100 ms = 250 kB.
        assert_eq!(p.pbs.bytes(2_500_000), 250_000);
        // 1 Mbit/s: 12.5 kB < 64 KiB floor.
        assert_eq!(p.pbs.bytes(125_000), 65_536);
        assert_eq!(p.pbs.bytes(0), 0);
        let old = QerPolicy::legacy_policing();
        assert_eq!(old.pbs.bytes(2_500_000), 25_000);
        assert_eq!(BurstSpec::Bytes(9000).bytes(1), 9000);
    }

    #[test]
    fn policies_by_qfi() {
        let mut ps = QosPolicies::default();
        ps.add(&[5, 6], QerPolicy::legacy_policing());
        assert_eq!(ps.for_qfi(Some(5)).enforcement, Enforcement::Policing);
        assert_eq!(ps.for_qfi(Some(9)).enforcement, Enforcement::Shaping);
        assert_eq!(ps.for_qfi(None).enforcement, Enforcement::Shaping);
        assert!(ps.any_shaping());
        let m = ps
            .for_qfi(Some(6))
            .meter_kbps(Some(20_000), None, ColourMode::Blind);
        assert_eq!(m.unwrap().pbs, 25_000);
        assert!(ps.for_qfi(Some(6)).pacer_kbps(Some(20_000)).is_none());
        let pc = ps.for_qfi(Some(1)).pacer_kbps(Some(20_000)).unwrap();
        assert_eq!((pc.rate_bytes_per_s, pc.burst_bytes), (2_500_000, 5_000));
    }
}
