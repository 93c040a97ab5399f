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
    /// ZeroMQ PUB endpoint of the window exports (switch records, `docs/codesign.md`
    /// "Export"); none: the gate keeps its records to itself.
    #[serde(default)]
    pub export: Option<String>,
    /// Most flows judged large one window can record (the rest are counted as
    /// `export_overflow`).
    #[serde(default = "default_export_flows")]
    pub export_flows: u32,
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
fn default_export_flows() -> u32 {
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
    #[error("gate.export_flows must be in 1..=1048576, got {0}")]
    ExportFlows(u32),
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
        if !(1..=1 << 20).contains(&self.export_flows) {
            return Err(GateConfigError::ExportFlows(self.export_flows));
        }
        Ok(())
    }

    /// Bytes of counter memory: two windows of d x w 32-bit counters.
    pub fn memory_bytes(&self) -> usize {
        2 * usize::from(self.rows) * self.width as usize * 4
    }

    /// A configuration with these thresholds and every other key at its default.
    pub fn with_thresholds(large: u32, small: u32) -> GateConfig {
        GateConfig {
            window_ms: default_window_ms(),
            rows: default_rows(),
            width: default_width(),
            unit: GateUnit::default(),
            large,
            small,
            export: None,
            export_flows: default_export_flows(),
        }
    }
}

/// One flow judged large in a closed window: what the collector needs to count its large
/// phase without the packets that already carried INT (`docs/codesign.md` "Merge").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwitchRecord {
    /// The classifier's flow hash.
    pub hash: u32,
    /// Ĉ_switch: the flow's current-window estimate just before its first large packet.
    pub at_switch: u32,
    /// Ĉ_end: its estimate when the window closed.
    pub at_end: u32,
}

/// A closed window: its switch records are `FlowGate::closed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClosedWindow {
    /// Window start, the gate's clock (ns).
    pub start_ns: u64,
    /// Packets the gate saw in the window.
    pub packets: u64,
    /// Packets judged large whose flow found no room in the switch table (`export_flows`
    /// full): the collector misses their flows' large phase.
    pub overflow: u32,
}

/// The flows judged large in the current window: open addressing on the flow hash, keys
/// stored as hash + 1 (0 = empty), allocated once.
#[derive(Debug, Clone)]
struct SwitchTable {
    keys: Vec<u64>,
    at_switch: Vec<u32>,
    len: usize,
    cap: usize,
    overflow: u32,
}

impl SwitchTable {
    fn new(cap: usize) -> SwitchTable {
        // Load factor at most 1/2: short probes.
        let n = (2 * cap).next_power_of_two();
        SwitchTable {
            keys: vec![0; n],
            at_switch: vec![0; n],
            len: 0,
            cap,
            overflow: 0,
        }
    }

    /// Record `hash` with `est` unless it is already there.
    #[inline]
    fn note(&mut self, hash: u32, est: u32) {
        let key = u64::from(hash) + 1;
        let mask = self.keys.len() - 1;
        let mut i = (hash.wrapping_mul(0x9E37_79B9) >> 8) as usize & mask;
        loop {
            match self.keys[i] {
                k if k == key => return,
                0 => break,
                _ => i = (i + 1) & mask,
            }
        }
        if self.len == self.cap {
            self.overflow = self.overflow.saturating_add(1);
            return;
        }
        self.keys[i] = key;
        self.at_switch[i] = est;
        self.len += 1;
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
    switches: SwitchTable,
    window_packets: u64,
    closed: Vec<SwitchRecord>,
    closed_window: Option<ClosedWindow>,
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
            switches: SwitchTable::new(cfg.export_flows as usize),
            window_packets: 0,
            closed: Vec::with_capacity(cfg.export_flows as usize),
            closed_window: None,
            cfg,
        })
    }

    pub fn config(&self) -> &GateConfig {
        &self.cfg
    }

    pub fn stats(&self) -> GateStats {
        self.stats
    }

    /// Close the current window: its switch records with their end estimates go to
    /// [`closed`](Self::closed) (replacing what was there), the table empties.
    fn close(&mut self, start: u64) {
        self.closed.clear();
        let t = &mut self.switches;
        for (k, &c) in t.keys.iter_mut().zip(&t.at_switch) {
            if *k != 0 {
                let hash = (*k - 1) as u32;
                *k = 0;
                self.closed.push(SwitchRecord {
                    hash,
                    at_switch: c,
                    at_end: 0,
                });
            }
        }
        let (w, rows) = (self.cfg.width as usize, usize::from(self.cfg.rows));
        for r in &mut self.closed {
            r.at_end = (0..rows)
                .map(|i| self.cur[i * w + column(r.hash, i, self.shift)])
                .min()
                .unwrap_or(0);
        }
        self.closed_window = (self.window_packets > 0).then_some(ClosedWindow {
            start_ns: start,
            packets: self.window_packets,
            overflow: t.overflow,
        });
        t.len = 0;
        t.overflow = 0;
        self.window_packets = 0;
    }

    /// The last closed window (with packets) not yet taken, and its switch records.
    pub fn take_closed(&mut self) -> Option<(ClosedWindow, &[SwitchRecord])> {
        let w = self.closed_window.take()?;
        Some((w, &self.closed))
    }

    /// Whether a closed window waits in [`take_closed`](Self::take_closed).
    #[inline]
    pub fn has_closed(&self) -> bool {
        self.closed_window.is_some()
    }

    /// Close the current window if `now` is past its end (the worker is idle: the records
    /// go out without waiting for the next packet).
    pub fn expire(&mut self, now: u64) {
        if self
            .window_start
            .is_some_and(|s| now >= s.saturating_add(self.window_ns))
        {
            self.roll(now);
        }
    }

    /// Close the current window whatever the time (the stage is shutting down).
    pub fn flush(&mut self) {
        if let Some(s) = self.window_start {
            self.close(s);
        }
    }

    /// Start the window `now` falls in, if it is not the current one.
    fn roll(&mut self, now: u64) {
        if let Some(s) = self.window_start {
            if now >= s.saturating_add(self.window_ns) {
                self.close(s);
            }
        }
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
        self.window_packets += 1;
        if large {
            self.switches.note(hash, est);
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
            export: None,
            export_flows: 64,
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
    fn a_closed_window_exports_each_large_flow_once_with_its_switch_point() {
        let ms = 1_000_000;
        let mut g = FlowGate::new(cfg(8, 4)).unwrap();
        for i in 0..12 {
            g.observe(7, 1, i);
        }
        for i in 0..3 {
            g.observe(9, 1, 20 + i);
        }
        assert!(!g.has_closed());
        // Idle before the window's end changes nothing; after it, the window closes.
        g.expire(9 * ms);
        assert!(!g.has_closed());
        g.expire(10 * ms);
        let (w, recs) = g.take_closed().unwrap();
        assert_eq!((w.start_ns, w.packets, w.overflow), (0, 15, 0));
        assert_eq!(
            recs,
            [SwitchRecord {
                hash: 7,
                at_switch: 8,
                at_end: 12
            }]
        );
        assert!(g.take_closed().is_none());
        // Next window: flow 7 is large from its first packet (hysteresis): at_switch 0.
        for i in 0..5 {
            g.observe(7, 1, 10 * ms + 1 + i);
        }
        g.flush();
        let (w, recs) = g.take_closed().unwrap();
        assert_eq!((w.start_ns, w.packets), (10 * ms, 5));
        assert_eq!(
            recs,
            [SwitchRecord {
                hash: 7,
                at_switch: 0,
                at_end: 5
            }]
        );
    }

    #[test]
    fn a_full_switch_table_counts_what_it_could_not_record() {
        let mut c = cfg(1, 1);
        c.export_flows = 2;
        let mut g = FlowGate::new(c).unwrap();
        for f in 0..4u32 {
            for i in 0..3 {
                g.observe(f, 1, u64::from(f * 3 + i));
            }
        }
        g.flush();
        let (w, recs) = g.take_closed().unwrap();
        assert_eq!(recs.len(), 2);
        // Flows 2 and 3: two large packets each found no room.
        assert_eq!(w.overflow, 4);
        assert!(matches!(
            FlowGate::new(GateConfig {
                export_flows: 0,
                ..cfg(1, 1)
            }),
            Err(GateConfigError::ExportFlows(0))
        ));
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
