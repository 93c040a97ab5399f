//! The workload and the anomalies of the Kestrel evaluation (Kestrel, Saha et al., sections
//! V-VI, Table I), seeded: about 100 UEs with uplink QoS flows of five application kinds, and
//! the four anomaly types on seeded schedules. The seed's operator trace is not available;
//! the traffic here is synthetic (see perf/results/kestrel-eval.md for the model).
//!
//! Rates are given at `scale = 1` (about 1 Gbit/s aggregate); every rate, the port shaper
//! and the anomaly intensities scale together, so a smaller scale keeps the utilisation and
//! the queueing the same in bytes per byte of capacity.

use peregrine_testkit::rng::{below, seeded, unit_f64, Xoshiro256PlusPlus};

pub const S: u64 = 1_000_000_000;
pub const MS: u64 = 1_000_000;
pub const US: u64 = 1_000;

/// QFIs of the application kinds (default 5QI -> QID map: 1 -> 1 SP, 3 -> 2, 4 -> 3, 6 -> 4,
/// 8 -> 6, 9 -> 7; DRR weights 8, 6, 4, 2, 1).
pub const QFI_VOIP: u8 = 1;
pub const QFI_GAMING: u8 = 3;
pub const QFI_BACKHAUL: u8 = 4;
pub const QFI_VIDEO: u8 = 6;
pub const QFI_IOT: u8 = 8;
pub const QFI_BE: u8 = 9;
/// The QFIs scored per (window, QFI): the UEs' own.
pub const USER_QFIS: [u8; 5] = [QFI_VOIP, QFI_GAMING, QFI_VIDEO, QFI_IOT, QFI_BE];
pub const UES: u32 = 100;
pub const TEID0: u32 = 0x1000;
/// The cross-traffic TEIDs of the contention anomaly (a competing backhaul aggregate).
pub const BACKHAUL_TEID0: u32 = 0xB000;
pub const BACKHAUL_TEIDS: u32 = 8;

/// Anomaly types, bit positions in a label mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Kind {
    Microburst = 0,
    Congestion = 1,
    Contention = 2,
    PolicyAbuse = 3,
}

pub const KINDS: [Kind; 4] = [
    Kind::Microburst,
    Kind::Congestion,
    Kind::Contention,
    Kind::PolicyAbuse,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Microburst => "microburst",
            Kind::Congestion => "congestion",
            Kind::Contention => "contention",
            Kind::PolicyAbuse => "policy_abuse",
        }
    }
    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// Scenarios 1-5 of Table I: one anomaly type, or all four (mixed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Single(Kind),
    Mixed,
    /// No anomaly (calibration of the bin edges).
    Baseline,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Single(k) => k.name(),
            Scenario::Mixed => "mixed",
            Scenario::Baseline => "baseline",
        }
    }
    pub fn kinds(self) -> Vec<Kind> {
        match self {
            Scenario::Single(k) => vec![k],
            Scenario::Mixed => KINDS.to_vec(),
            Scenario::Baseline => vec![],
        }
    }
}

/// The anomaly intensities (ours: the seed gives none), at scale 1. Chosen so that the
/// volume counters alone do not separate them all (see perf/results/kestrel-eval.md).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Intensity {
    /// Microburst: extra rate per burst, spread over its 1-3 TEIDs (bit/s).
    pub microburst_bps: f64,
    /// Congestion: extra rate on each congested QFI, spread over its active TEIDs (bit/s).
    pub congestion_bps: f64,
    /// Contention: cross-traffic rate on the shaped port (bit/s) from the backhaul TEIDs.
    pub contention_bps: f64,
    /// Policy abuse: rate each abusing TEID sends under the gaming QFI (bit/s).
    pub abuse_bps: f64,
}

impl Default for Intensity {
    fn default() -> Self {
        Intensity {
            microburst_bps: 150e6,
            congestion_bps: 100e6,
            contention_bps: 120e6,
            abuse_bps: 10e6,
        }
    }
}

impl Intensity {
    /// Every intensity times `f` (the intensity sweep).
    pub fn times(&self, f: f64) -> Intensity {
        Intensity {
            microburst_bps: self.microburst_bps * f,
            congestion_bps: self.congestion_bps * f,
            contention_bps: self.contention_bps * f,
            abuse_bps: self.abuse_bps * f,
        }
    }
}

/// Port shaper at scale 1 (bit/s): the mean offered load is about 70 % of it.
pub const PORT_BPS: f64 = 1.4e9;

/// One anomaly episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    pub kind: Kind,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Affected (TEID, QFI) keys (labels per key).
    pub keys: Vec<(u32, u8)>,
    /// Affected QFIs (labels per QFI).
    pub qfis: Vec<u8>,
}

/// Application kinds of the background flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum App {
    /// CBR voice: 200-byte packets every 20 ms.
    Voip,
    /// 60 fps cloud-gaming frames: a burst of 1200-byte packets every 16.7 ms.
    Gaming,
    /// Buffered video: on (segment download at 14 Mbit/s) / off (2-6 s).
    Video,
    /// Poisson IoT reports, 120 bytes, 2 per second.
    Iot,
    /// Best effort: Poisson 1400-byte packets at 2-5 Mbit/s.
    BestEffort,
    /// Injected load (anomalies): Poisson at a given rate until an end time.
    Extra,
}

/// A packet source: one (TEID, QFI) flow.
#[derive(Debug, Clone)]
pub struct Flow {
    pub teid: u32,
    pub qfi: u8,
    pub app: App,
    /// Inner IP packet size, bytes.
    pub size: u32,
    /// Mean gap, ns (Poisson / CBR / on-period pacing); 0 = idle.
    pub gap_ns: f64,
    pub next_ns: u64,
    /// Video: end of the current on period; Gaming: packets left in the frame; Extra: end.
    pub until_ns: u64,
    pub left: u32,
}

/// The whole seeded scenario: flows, episodes and the scale.
#[derive(Debug, Clone)]
pub struct Plan {
    pub scale: f64,
    pub duration_ns: u64,
    pub flows: Vec<Flow>,
    pub episodes: Vec<Episode>,
    /// Per UE: which apps it runs.
    pub gamers: Vec<u32>,
}

fn uniform(r: &mut Xoshiro256PlusPlus, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * unit_f64(r)
}

fn exp_gap(r: &mut Xoshiro256PlusPlus, mean: f64) -> f64 {
    -mean * (1.0 - unit_f64(r)).ln()
}

/// Gap in ns of `size`-byte packets at `bps`.
pub fn gap_of(size: u32, bps: f64) -> f64 {
    f64::from(size) * 8.0 * 1e9 / bps
}

impl Plan {
    /// The plan of `scenario` with `seed`, `duration_s` long, at `scale`.
    pub fn new(
        scenario: Scenario,
        seed: u64,
        duration_s: u64,
        scale: f64,
        intensity: &Intensity,
    ) -> Plan {
        let mut r = seeded(seed ^ 0x6b65_7374_7265_6c00);
        let mut flows = Vec::new();
        let mut gamers = Vec::new();
        for ue in 0..UES {
            let teid = TEID0 + ue;
            let mut add =
                |qfi: u8, app: App, size: u32, gap_ns: f64, r: &mut Xoshiro256PlusPlus| {
                    flows.push(Flow {
                        teid,
                        qfi,
                        app,
                        size,
                        gap_ns,
                        next_ns: (unit_f64(r) * gap_ns.max(1e6)) as u64,
                        until_ns: 0,
                        left: 0,
                    });
                };
            if ue % 5 < 2 {
                // 40 UEs with voice (CBR does not scale: a call is a call).
                add(QFI_VOIP, App::Voip, 200, 20e6, &mut r);
            }
            if ue % 4 == 1 {
                gamers.push(teid);
                add(QFI_GAMING, App::Gaming, 1200, 1e9 / 60.0, &mut r);
            }
            if ue % 5 != 4 {
                add(
                    QFI_VIDEO,
                    App::Video,
                    1400,
                    gap_of(1400, 14e6 * scale),
                    &mut r,
                );
            }
            if ue % 2 == 0 {
                add(QFI_IOT, App::Iot, 120, 0.5e9, &mut r);
            }
            let be = uniform(&mut r, 2e6, 5e6) * scale;
            add(QFI_BE, App::BestEffort, 1400, gap_of(1400, be), &mut r);
        }
        let duration_ns = duration_s * S;
        let mut episodes = Vec::new();
        for k in scenario.kinds() {
            let (dur, every) = match k {
                Kind::Microburst => ((0.3, 1.0), (10.0, 30.0)),
                Kind::Congestion => ((25.0, 40.0), (60.0, 120.0)),
                Kind::Contention => ((12.0, 30.0), (90.0, 150.0)),
                Kind::PolicyAbuse => ((30.0, 60.0), (150.0, 300.0)),
            };
            // The first onset within the first period (after 5 s of warm-up), then one
            // period after each onset.
            let mut t = 5.0 + uniform(&mut r, 0.0, every.0);
            while t < duration_s as f64 - 2.0 {
                let d = uniform(&mut r, dur.0, dur.1);
                let start_ns = (t * 1e9) as u64;
                let end_ns = (((t + d) * 1e9) as u64).min(duration_ns);
                let ep = episode(k, start_ns, end_ns, &flows, &gamers, &mut r);
                add_load(&ep, &mut flows, intensity, scale, &mut r);
                episodes.push(ep);
                t += uniform(&mut r, every.0, every.1);
            }
        }
        Plan {
            scale,
            duration_ns,
            flows,
            episodes,
            gamers,
        }
    }
}

/// Who an episode hits.
fn episode(
    k: Kind,
    start_ns: u64,
    end_ns: u64,
    flows: &[Flow],
    gamers: &[u32],
    r: &mut Xoshiro256PlusPlus,
) -> Episode {
    let pick_ues = |n: u64, r: &mut Xoshiro256PlusPlus, avoid: &[u32]| {
        let mut v: Vec<u32> = Vec::new();
        while (v.len() as u64) < n {
            let t = TEID0 + below(r, u64::from(UES)) as u32;
            if !v.contains(&t) && !avoid.contains(&t) {
                v.push(t);
            }
        }
        v
    };
    let keys_of = |qfi: u8| -> Vec<(u32, u8)> {
        flows
            .iter()
            .filter(|f| f.qfi == qfi && f.app != App::Extra && f.teid < BACKHAUL_TEID0)
            .map(|f| (f.teid, f.qfi))
            .collect()
    };
    match k {
        Kind::Microburst => {
            let qfi = if below(r, 2) == 0 { QFI_BE } else { QFI_VIDEO };
            let n = 1 + below(r, 3);
            let ues = pick_ues(n, r, &[]);
            Episode {
                kind: k,
                start_ns,
                end_ns,
                keys: ues.iter().map(|&t| (t, qfi)).collect(),
                qfis: vec![qfi],
            }
        }
        Kind::Congestion => {
            let cands = [QFI_VIDEO, QFI_BE, QFI_GAMING];
            let a = cands[below(r, 3) as usize];
            let mut qfis = vec![a];
            if below(r, 3) == 0 {
                let b = cands[(cands.iter().position(|&c| c == a).unwrap() + 1) % 3];
                qfis.push(b);
            }
            Episode {
                kind: k,
                start_ns,
                end_ns,
                keys: qfis.iter().flat_map(|&q| keys_of(q)).collect(),
                qfis,
            }
        }
        Kind::Contention => {
            // Cross traffic competes for the shaped port with every DRR queue.
            let qfis = vec![QFI_GAMING, QFI_VIDEO, QFI_IOT, QFI_BE];
            Episode {
                kind: k,
                start_ns,
                end_ns,
                keys: qfis.iter().flat_map(|&q| keys_of(q)).collect(),
                qfis,
            }
        }
        Kind::PolicyAbuse => {
            let n = 1 + below(r, 3);
            let ues = pick_ues(n, r, gamers);
            Episode {
                kind: k,
                start_ns,
                end_ns,
                keys: ues.iter().map(|&t| (t, QFI_GAMING)).collect(),
                qfis: vec![QFI_GAMING],
            }
        }
    }
}

/// The extra flows an episode adds.
fn add_load(
    ep: &Episode,
    flows: &mut Vec<Flow>,
    i: &Intensity,
    scale: f64,
    r: &mut Xoshiro256PlusPlus,
) {
    let mut extra = |teid: u32, qfi: u8, size: u32, bps: f64, r: &mut Xoshiro256PlusPlus| {
        flows.push(Flow {
            teid,
            qfi,
            app: App::Extra,
            size,
            gap_ns: gap_of(size, bps),
            next_ns: ep.start_ns + (unit_f64(r) * 1e5) as u64,
            until_ns: ep.end_ns,
            left: 0,
        });
    };
    match ep.kind {
        Kind::Microburst => {
            let n = ep.keys.len() as f64;
            for &(t, q) in &ep.keys {
                extra(t, q, 1400, i.microburst_bps * scale / n, r);
            }
        }
        Kind::Congestion => {
            for &q in &ep.qfis {
                let keys: Vec<(u32, u8)> = ep.keys.iter().filter(|k| k.1 == q).copied().collect();
                let n = keys.len().max(1) as f64;
                for (t, q) in keys {
                    let size = if q == QFI_GAMING { 1200 } else { 1400 };
                    extra(t, q, size, i.congestion_bps * scale / n, r);
                }
            }
        }
        Kind::Contention => {
            let n = f64::from(BACKHAUL_TEIDS);
            for b in 0..BACKHAUL_TEIDS {
                extra(
                    BACKHAUL_TEID0 + b,
                    QFI_BACKHAUL,
                    1400,
                    i.contention_bps * scale / n,
                    r,
                );
            }
        }
        Kind::PolicyAbuse => {
            for &(t, q) in &ep.keys {
                extra(t, q, 1200, i.abuse_bps * scale, r);
            }
        }
    }
}

/// Advance `f` past one packet sent at `f.next_ns`; false when the flow is over.
pub fn advance(f: &mut Flow, r: &mut Xoshiro256PlusPlus, scale: f64) -> bool {
    match f.app {
        App::Voip => {
            f.next_ns += (f.gap_ns + uniform(r, -0.5e6, 0.5e6)) as u64;
        }
        App::Gaming => {
            if f.left == 0 {
                // A new frame: 6-14 packets (7-17 KB at scale 1) every 16.7 ms, paced 20 us
                // apart; fewer packets at a smaller scale.
                f.left = ((6 + below(r, 9)) as f64 * scale).round().max(1.0) as u32;
                f.until_ns = f.next_ns;
            }
            f.left -= 1;
            if f.left == 0 {
                f.until_ns += f.gap_ns as u64;
                f.next_ns = f.until_ns + below(r, 500_000);
            } else {
                f.next_ns += 20 * US;
            }
        }
        App::Video => {
            if f.next_ns >= f.until_ns {
                // The on period is over: off for 2-6 s, then a 1.5-4.5 s segment.
                let off = uniform(r, 2.0, 6.0) * 1e9;
                let on = uniform(r, 1.5, 4.5) * 1e9;
                f.next_ns += off as u64;
                f.until_ns = f.next_ns + on as u64;
            } else {
                f.next_ns += (f.gap_ns * uniform(r, 0.8, 1.2)) as u64;
            }
        }
        App::Iot | App::BestEffort => {
            f.next_ns += exp_gap(r, f.gap_ns) as u64 + 1;
        }
        App::Extra => {
            f.next_ns += (f.gap_ns * uniform(r, 0.9, 1.1)) as u64 + 1;
            return f.next_ns < f.until_ns;
        }
    }
    true
}

/// Labels of a window `[seq*S, (seq+1)*S)`: anomaly bits per QFI and per key.
#[derive(Debug, Clone, Default)]
pub struct Labels {
    pub qfi: std::collections::HashMap<u8, u8>,
    pub key: std::collections::HashMap<(u32, u8), u8>,
}

impl Plan {
    /// An episode labels every window it overlaps.
    pub fn labels(&self, seq: u64, window_ns: u64) -> Labels {
        let (w0, w1) = (seq * window_ns, (seq + 1) * window_ns);
        let mut l = Labels::default();
        for e in &self.episodes {
            if e.start_ns < w1 && e.end_ns > w0 {
                for &q in &e.qfis {
                    *l.qfi.entry(q).or_default() |= e.kind.bit();
                }
                for &k in &e.keys {
                    *l.key.entry(k).or_default() |= e.kind.bit();
                }
            }
        }
        l
    }

    /// Every (TEID, QFI) key the UPF has a rule for (the collector's PFCP view).
    pub fn keys(&self) -> Vec<(u32, u8)> {
        let mut v: Vec<(u32, u8)> = self
            .flows
            .iter()
            .filter(|f| f.teid < BACKHAUL_TEID0)
            .map(|f| (f.teid, f.qfi))
            .collect();
        for ue in 0..UES {
            v.push((TEID0 + ue, QFI_GAMING));
        }
        v.sort_unstable();
        v.dedup();
        v
    }
}
