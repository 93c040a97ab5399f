//! The sketch-INT co-design gate (Zhu et al., "Workflow", step 3; `docs/codesign.md`): a
//! per-worker Count-Min sketch with conservative update (Cormode and Muthukrishnan; Estan and
//! Varghese) counts every packet by its flow hash; a flow is *large* once its estimate in the
//! current window reaches `large`, or when its estimate in the previous window reached
//! `small` (hysteresis without per-flow state). The INT source adds INT only to packets of
//! small flows. I/O-free: time is passed in; no allocation after construction.

use serde::Deserialize;

/// What the thresholds count.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GateUnit {
    #[default]
    Packets,
    Bytes,
}

/// The gate's configuration (`[int.gate]`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    /// Window length, ms: the sketch restarts every window.
    #[serde(default = "default_window_ms")]
    pub window_ms: u64,
    /// Sketch rows d (1..=8).
    #[serde(default = "default_rows")]
    pub rows: u8,
    /// Counters per row w (a power of two, 64..=2^22).
    #[serde(default = "default_width")]
    pub width: u32,
    #[serde(default)]
    pub unit: GateUnit,
    /// T_hi: a flow whose current-window estimate reaches this is large.
    pub large: u32,
    /// T_lo (<= T_hi): a flow whose previous-window estimate reached this stays large.
    pub small: u32,
}

fn default_window_ms() -> u64 {
    1000
}
fn default_rows() -> u8 {
    3
}
fn default_width() -> u32 {
    4096
}

/// Why a gate configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateConfigError {
    #[error("gate.rows must be in 1..=8, got {0}")]
    Rows(u8),
    #[error("gate.width must be a power of two in 64..=4194304, got {0}")]
    Width(u32),
    #[error("gate.window_ms must be > 0")]
    Window,
    #[error("gate thresholds need 1 <= small <= large, got small {small}, large {large}")]
    Thresholds { small: u32, large: u32 },
}

impl GateConfig {
    pub fn validate(&self) -> Result<(), GateConfigError> {
        if !(1..=8).contains(&self.rows) {
            return Err(GateConfigError::Rows(self.rows));
        }
        if !self.width.is_power_of_two() || !(64..=1 << 22).contains(&self.width) {
            return Err(GateConfigError::Width(self.width));
        }
        if self.window_ms == 0 {
            return Err(GateConfigError::Window);
        }
        if self.small == 0 || self.small > self.large {
            return Err(GateConfigError::Thresholds {
                small: self.small,
                large: self.large,
            });
        }
        Ok(())
    }

    /// Bytes of counter memory: two windows of d x w 32-bit counters.
    pub fn memory_bytes(&self) -> usize {
        2 * usize::from(self.rows) * self.width as usize * 4
    }
}

/// The gate's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GateStats {
    /// Packets observed.
    pub packets: u64,
    /// Packets of flows judged large.
    pub large_packets: u64,
    /// Flows that crossed T_hi within a window (small -> large).
    pub switched: u64,
    /// Windows started.
    pub windows: u64,
}

/// The verdict for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The flow is large: no INT for this packet.
    pub large: bool,
    /// The flow's current-window estimate before this packet was added.
    pub estimate: u32,
}

/// The per-worker gate.
#[derive(Debug, Clone)]
pub struct FlowGate {
    cfg: GateConfig,
    window_ns: u64,
    shift: u32,
    cur: Vec<u32>,
    prev: Vec<u32>,
    window_start: Option<u64>,
    stats: GateStats,
}

/// Row i's column for a flow hash: a 64-bit mix of (hash, row), top bits.
#[inline]
fn column(hash: u32, row: usize, shift: u32) -> usize {
    let mut z = (u64::from(hash) | (row as u64) << 32).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) >> shift) as usize
}

impl FlowGate {
    /// A gate; the configuration must have passed [`GateConfig::validate`].
    pub fn new(cfg: GateConfig) -> Result<FlowGate, GateConfigError> {
        cfg.validate()?;
        let n = usize::from(cfg.rows) * cfg.width as usize;
        Ok(FlowGate {
            window_ns: cfg.window_ms * 1_000_000,
            shift: 64 - cfg.width.trailing_zeros(),
            cur: vec![0; n],
            prev: vec![0; n],
            window_start: None,
            stats: GateStats::default(),
            cfg,
        })
    }

    pub fn config(&self) -> &GateConfig {
        &self.cfg
    }

    pub fn stats(&self) -> GateStats {
        self.stats
    }

    /// Start the window `now` falls in, if it is not the current one.
    fn roll(&mut self, now: u64) {
        let start = match self.window_start {
            Some(s) if now < s.saturating_add(self.window_ns) => return,
            Some(s) if now < s.saturating_add(2 * self.window_ns) => {
                std::mem::swap(&mut self.cur, &mut self.prev);
                s + self.window_ns
            }
            // First packet, or a whole window without packets: nothing carries over.
            Some(s) => {
                self.prev.fill(0);
                s + (now - s) / self.window_ns * self.window_ns
            }
            None => now,
        };
        self.cur.fill(0);
        self.window_start = Some(start);
        self.stats.windows += 1;
    }

    /// Count one packet of `bytes` bytes of flow `hash` at `now` (ns) and judge its flow.
    #[inline]
    pub fn observe(&mut self, hash: u32, bytes: u32, now: u64) -> Verdict {
        self.roll(now);
        let w = self.cfg.width as usize;
        let rows = usize::from(self.cfg.rows);
        let mut idx = [0usize; 8];
        let (mut est, mut prev) = (u32::MAX, u32::MAX);
        for (r, slot) in idx.iter_mut().enumerate().take(rows) {
            let i = r * w + column(hash, r, self.shift);
            *slot = i;
            est = est.min(self.cur[i]);
            prev = prev.min(self.prev[i]);
        }
        let inc = match self.cfg.unit {
            GateUnit::Packets => 1,
            GateUnit::Bytes => bytes,
        };
        let large = est >= self.cfg.large || prev >= self.cfg.small;
        // Conservative update: raise each counter only up to the new estimate.
        let new = est.saturating_add(inc);
        for &i in &idx[..rows] {
            self.cur[i] = self.cur[i].max(new);
        }
        self.stats.packets += 1;
        if large {
            self.stats.large_packets += 1;
        } else if new >= self.cfg.large {
            self.stats.switched += 1;
        }
        Verdict {
            large,
            estimate: est,
        }
    }

    /// The current-window estimate of a flow (what a collector reads from an export).
    pub fn estimate(&self, hash: u32) -> u32 {
        let w = self.cfg.width as usize;
        (0..usize::from(self.cfg.rows))
            .map(|r| self.cur[r * w + column(hash, r, self.shift)])
            .min()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(large: u32, small: u32) -> GateConfig {
        GateConfig {
            window_ms: 10,
            rows: 3,
            width: 1024,
            unit: GateUnit::Packets,
            large,
            small,
        }
    }

    #[test]
    fn refuses_bad_config() {
        let mut c = cfg(10, 5);
        c.width = 1000;
        assert_eq!(FlowGate::new(c).unwrap_err(), GateConfigError::Width(1000));
        assert!(matches!(
            FlowGate::new(cfg(5, 10)),
            Err(GateConfigError::Thresholds { .. })
        ));
        assert!(matches!(
            FlowGate::new(cfg(5, 0)),
            Err(GateConfigError::Thresholds { .. })
        ));
        let mut c = cfg(10, 5);
        c.rows = 9;
        assert_eq!(FlowGate::new(c).unwrap_err(), GateConfigError::Rows(9));
    }

    #[test]
    fn a_flow_gets_int_for_exactly_its_first_large_packets() {
        let mut g = FlowGate::new(cfg(8, 4)).unwrap();
        let v: Vec<bool> = (0..12).map(|i| g.observe(7, 100, i).large).collect();
        assert_eq!(v.iter().filter(|&&l| !l).count(), 8);
        assert!(v[8..].iter().all(|&l| l));
        assert_eq!(g.stats().switched, 1);
        assert_eq!(g.stats().large_packets, 4);
        assert_eq!(g.estimate(7), 12);
        // Another flow is unaffected (no collision in 3 x 1024 for two flows).
        assert!(!g.observe(8, 100, 20).large);
    }

    #[test]
    fn hysteresis_across_windows() {
        let ms = 1_000_000;
        let mut g = FlowGate::new(cfg(8, 4)).unwrap();
        for i in 0..10 {
            g.observe(1, 1, i);
        }
        // Next window: large from the first packet (previous estimate 10 >= 4).
        assert!(g.observe(1, 1, 10 * ms).large);
        for i in 0..2 {
            g.observe(1, 1, 10 * ms + i + 1);
        }
        // Window after: previous estimate 3 < 4, so small again until it reaches 8.
        assert!(!g.observe(1, 1, 20 * ms).large);
        // A whole silent window forgets everything.
        for i in 0..10 {
            g.observe(2, 1, 20 * ms + i);
        }
        assert!(!g.observe(2, 1, 45 * ms).large);
        assert_eq!(g.stats().windows, 4);
    }

    #[test]
    fn byte_threshold() {
        let mut c = cfg(3000, 1000);
        c.unit = GateUnit::Bytes;
        let mut g = FlowGate::new(c).unwrap();
        assert!(!g.observe(5, 1500, 0).large);
        assert!(!g.observe(5, 1500, 1).large);
        assert!(g.observe(5, 1500, 2).large);
    }

    #[test]
    fn conservative_update_never_underestimates() {
        let mut c = cfg(u32::MAX, 1);
        c.width = 64;
        let mut g = FlowGate::new(c).unwrap();
        let mut truth = vec![0u32; 500];
        let mut x = 1u64;
        for t in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let f = ((x >> 33) % 500) as usize;
            truth[f] += 1;
            g.observe(f as u32, 1, t);
        }
        for (f, &n) in truth.iter().enumerate() {
            assert!(g.estimate(f as u32) >= n);
        }
    }
}
