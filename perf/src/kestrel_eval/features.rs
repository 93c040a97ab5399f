//! Per-window feature vectors of the three telemetry modes (Kestrel section V, "Telemetry
//! export and processing"): volume, latency tail fractions and percentiles, inter-arrival
//! head fractions, policer colour ratios and TEIDs per QFI, per (window, QFI) unit. Kestrel
//! reconstructs per-(TEID, QFI) distributions by the Count-Min query over its d rows, for the
//! keys the control plane knows from its PFCP sessions; Delta-SMP groups the window's
//! postcards per key; 3GPP-PM has only its per-QFI packets, bytes and mean delay.
//!
//! Every mode also gets the port-wide totals of its own data (context) and, per feature, the
//! change from the previous window and the ratio to a slow moving average (alpha 0.1), so the
//! detectors see onsets as well as levels.

use super::scenario::USER_QFIS;
use peregrine_control::kestrel::features::{self as kf, frac, mean_max, Temporal};
use peregrine_dataplane::qos::QfiMap;
use peregrine_dataplane::telemetry::kestrel::{Postcard, Window};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Mode {
    Kestrel,
    DeltaSmp,
    Pm,
}

pub const MODES: [Mode; 3] = [Mode::Kestrel, Mode::DeltaSmp, Mode::Pm];

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Kestrel => "kestrel",
            Mode::DeltaSmp => "delta_smp",
            Mode::Pm => "pm",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Mode::Kestrel => "Kestrel",
            Mode::DeltaSmp => "Delta-SMP",
            Mode::Pm => "3GPP-PM",
        }
    }
}

const UL: usize = 0;

/// Value at quantile `q` of `v` (sorted in place), 0 for none.
fn quantile(v: &mut [f32], q: f64) -> f32 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable_by(f32::total_cmp);
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i]
}

/// Names of Delta-SMP's per-QFI base features (from the QFI's postcards).
const SMP_BASE_NAMES: [&str; 16] = [
    "teids",
    "cards",
    "card_bytes",
    "soj_mean",
    "soj_p90",
    "soj_max",
    "keymax_mean",
    "keymax_max",
    "iat_min_mean",
    "iat_min_min",
    "iat_short",
    "nongreen",
    "cards_per_key_max",
    "port_cards",
    "port_soj_p90",
    "port_soj_mean",
];

/// Indices in Delta-SMP's per-QFI base vector that [`KeyCards::features`] reads.
const S_TEIDS: usize = kf::name_index(&SMP_BASE_NAMES, "teids");
const S_CARDS: usize = kf::name_index(&SMP_BASE_NAMES, "cards");
const S_CARD_BYTES: usize = kf::name_index(&SMP_BASE_NAMES, "card_bytes");
const S_SOJ_MEAN: usize = kf::name_index(&SMP_BASE_NAMES, "soj_mean");
const S_KEYMAX_MEAN: usize = kf::name_index(&SMP_BASE_NAMES, "keymax_mean");

/// Names of the per-QFI base features of each mode (before the temporal ones).
pub fn base_names(mode: Mode) -> Vec<String> {
    let v: Vec<&str> = match mode {
        Mode::Kestrel => kf::BASE_NAMES.to_vec(),
        Mode::DeltaSmp => SMP_BASE_NAMES.to_vec(),
        Mode::Pm => vec![
            "pkts",
            "bytes",
            "mean_delay",
            "port_pkts",
            "port_bytes",
            "port_delay",
        ],
    };
    v.into_iter().map(String::from).collect()
}

/// Every feature name: base, then `d_` (change from the previous window), then `r_` (ratio
/// to the moving average).
pub fn names(mode: Mode) -> Vec<String> {
    let b = base_names(mode);
    kf::with_temporal(&b.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Names of Delta-SMP's per-key base features (from the key's own postcards).
pub const SMP_KEY_NAMES: [&str; 13] = [
    "k_cards",
    "k_card_bytes",
    "k_soj_mean",
    "k_soj_max",
    "k_iat_min",
    "k_iat_short",
    "k_nongreen",
    "k_share",
    "k_rel_cards",
    "k_soj_excess",
    "k_sojmax_excess",
    "k_soj_p90",
    "k_iat_mean",
];

/// Names of the per-key history features every mode with per-key data gets ([`KeyHistory`]).
pub const HISTORY_NAMES: [&str; 2] = ["k_idle", "k_age"];

/// How many of a key's previous active windows [`KeyHistory`] keeps.
const HISTORY: usize = 8;
/// Cap of `k_idle` (also a new key's value) and `k_age`, in windows.
const HISTORY_CAP: u64 = 64;

/// Every feature name of the per-(window, TEID, QFI) unit: the key's own features with
/// their temporal ones, then its QFI's whole vector ([`names`]). 3GPP-PM has nothing per
/// key: its per-key vector is its QFI's.
pub fn key_names(mode: Mode) -> Vec<String> {
    let own: &[&str] = match mode {
        Mode::Kestrel => &kf::KEY_NAMES,
        Mode::DeltaSmp => &SMP_KEY_NAMES,
        Mode::Pm => &[],
    };
    let mut v = Vec::new();
    if !own.is_empty() {
        v = kf::with_temporal(own);
        v.extend(own.iter().map(|n| format!("m_{n}")));
        v.extend(own.iter().map(|n| format!("z_{n}")));
        v.extend(HISTORY_NAMES.iter().map(|n| n.to_string()));
    }
    v.extend(names(mode));
    v
}

/// The per-key history of the per-(window, TEID, QFI) unit, the same recipe for every mode
/// with per-key data (Kestrel's per-key Count-Min estimates, Delta-SMP's per-key postcards;
/// the collector keeps the previous windows either way): per base feature, the ratio to the
/// median of the key's last `HISTORY` active windows (a baseline one burst window does not
/// move, unlike the moving average), then its distance from that median in units of the
/// key's own spread (median absolute deviation, floored at 5 % of the median: a robust
/// z-score, so a key that always varies, like on/off video, needs a larger change than a
/// steady one), then the windows since the key was last active (capped; a key never seen
/// before gets the cap) and how many active windows it has had (capped).
#[derive(Debug, Default)]
pub struct KeyHistory {
    keys: HashMap<(u32, u8), KeyPast>,
}

/// One key's past in [`KeyHistory`].
#[derive(Debug)]
struct KeyPast {
    /// Its last active window (`u64::MAX` before the first).
    last_seq: u64,
    /// Active windows so far.
    seen: u64,
    /// Base vectors of its last [`HISTORY`] active windows, oldest first.
    past: std::collections::VecDeque<Vec<f32>>,
}

impl KeyHistory {
    /// `base`'s history features (one `m_`, then one `z_` per base feature, then
    /// [`HISTORY_NAMES`]) for `key` in window `seq`; then `base` joins the key's history.
    pub fn extend(&mut self, key: (u32, u8), seq: u64, base: &[f32]) -> Vec<f32> {
        let e = self.keys.entry(key).or_insert_with(|| KeyPast {
            last_seq: u64::MAX,
            seen: 0,
            past: Default::default(),
        });
        let mut out = Vec::with_capacity(2 * base.len() + HISTORY_NAMES.len());
        let mut z = Vec::with_capacity(base.len());
        let mut col: Vec<f32> = Vec::with_capacity(HISTORY);
        for (i, &x) in base.iter().enumerate() {
            col.clear();
            col.extend(e.past.iter().map(|h| h[i]));
            let (med, mad) = if col.is_empty() {
                (x, 0.0)
            } else {
                let med = quantile(&mut col, 0.5);
                for c in col.iter_mut() {
                    *c = (*c - med).abs();
                }
                (med, quantile(&mut col, 0.5))
            };
            out.push(x / (med.abs() + 1e-3));
            z.push((x - med) / (mad + 0.05 * med.abs() + 1e-3));
        }
        out.extend(z);
        let idle = if e.last_seq == u64::MAX {
            HISTORY_CAP
        } else {
            seq.saturating_sub(e.last_seq).min(HISTORY_CAP)
        };
        out.push(idle as f32);
        out.push(e.seen.min(HISTORY_CAP) as f32);
        e.last_seq = seq;
        e.seen += 1;
        if e.past.len() == HISTORY {
            e.past.pop_front();
        }
        e.past.push_back(base.to_vec());
        out
    }
}

/// The per-window extractor of one mode (keeps the temporal state).
#[derive(Debug)]
pub struct Extractor {
    pub mode: Mode,
    keys: HashMap<u8, Vec<u32>>,
    map: QfiMap,
    temporal: Temporal,
    /// The per-key unit's temporal state, per (TEID, QFI).
    key_temporal: Temporal<(u32, u8)>,
    key_history: KeyHistory,
    /// Short inter-arrival threshold of Delta-SMP (ns): the gap Kestrel's head bin would use.
    iat_short_ns: u32,
}

impl Extractor {
    pub fn new(mode: Mode, keys: &[(u32, u8)], iat_short_ns: u32) -> Extractor {
        let mut k: HashMap<u8, Vec<u32>> = HashMap::new();
        for &(t, q) in keys {
            k.entry(q).or_default().push(t);
        }
        Extractor {
            mode,
            keys: k,
            map: QfiMap::default(),
            temporal: Temporal::default(),
            key_temporal: Temporal::default(),
            key_history: KeyHistory::default(),
            iat_short_ns,
        }
    }

    /// Feature vectors of `USER_QFIS`, in that order.
    pub fn window(&mut self, w: &Window, pcs: &[Postcard]) -> Vec<(u8, Vec<f32>)> {
        let base: Vec<(u8, Vec<f32>)> = match self.mode {
            Mode::Kestrel => self.kestrel(w),
            Mode::DeltaSmp => self.smp(pcs),
            Mode::Pm => pm(w),
        };
        base.into_iter()
            .map(|(q, b)| (q, self.temporal.extend(q, b)))
            .collect()
    }

    /// Feature vectors of the per-key unit: every key of `active` on a user QFI, with
    /// `qfi_rows` this window's per-QFI vectors ([`Extractor::window`]). Kestrel: the key's
    /// Count-Min estimate; Delta-SMP: the key's postcards; 3GPP-PM: the QFI's vector only.
    pub fn keys_window(
        &mut self,
        w: &Window,
        pcs: &[Postcard],
        active: &[(u32, u8)],
        qfi_rows: &[(u8, Vec<f32>)],
    ) -> Vec<((u32, u8), Vec<f32>)> {
        let row_of = |q: u8| qfi_rows.iter().find(|r| r.0 == q).map(|r| &r.1);
        let per_key = match self.mode {
            Mode::DeltaSmp => smp_keys(pcs, self.iat_short_ns),
            _ => BTreeMap::new(),
        };
        let mut out = Vec::with_capacity(active.len());
        for &(t, q) in active {
            let Some(qx) = row_of(q) else { continue };
            let own = match self.mode {
                Mode::Kestrel => {
                    let qid = usize::from(self.map.qid(q));
                    Some(kf::key_base(w, UL, qid, t, q, qx))
                }
                Mode::DeltaSmp => {
                    let empty = KeyCards::default();
                    let c = per_key.get(&(t, q)).unwrap_or(&empty);
                    Some(c.features(qx))
                }
                Mode::Pm => None,
            };
            let mut v = match own {
                Some(b) => {
                    let h = self.key_history.extend((t, q), w.seq, &b);
                    let mut v = self.key_temporal.extend((t, q), b);
                    v.extend(h);
                    v
                }
                None => Vec::new(),
            };
            v.extend_from_slice(qx);
            out.push(((t, q), v));
        }
        out
    }

    fn kestrel(&self, w: &Window) -> Vec<(u8, Vec<f32>)> {
        let port = kf::port_context(w, UL);
        USER_QFIS
            .iter()
            .map(|&q| {
                let qid = usize::from(self.map.qid(q));
                let teids = self.keys.get(&q).map(Vec::as_slice).unwrap_or(&[]);
                (q, kf::qfi_base(w, UL, qid, q, teids, &port))
            })
            .collect()
    }

    fn smp(&self, pcs: &[Postcard]) -> Vec<(u8, Vec<f32>)> {
        let mut all: Vec<f32> = pcs.iter().map(|p| p.sojourn_ns as f32).collect();
        let port_mean = mean_max(&all)[0];
        let port = [pcs.len() as f32, quantile(&mut all, 0.9), port_mean];
        USER_QFIS
            .iter()
            .map(|&q| {
                // Per key: (cards, max sojourn, min gap); ordered, so sums repeat bit for bit.
                let mut per: BTreeMap<u32, (u32, f32, u32)> = BTreeMap::new();
                let mut soj: Vec<f32> = Vec::new();
                let (mut bytes, mut short, mut nongreen) = (0u64, 0u64, 0u64);
                for p in pcs.iter().filter(|p| p.qfi == q && p.dir == 0) {
                    let e = per.entry(p.teid).or_insert((0, 0.0, u32::MAX));
                    e.0 += 1;
                    e.1 = e.1.max(p.sojourn_ns as f32);
                    if p.iat_ns > 0 {
                        e.2 = e.2.min(p.iat_ns);
                    }
                    soj.push(p.sojourn_ns as f32);
                    bytes += u64::from(p.len);
                    if p.iat_ns > 0 && p.iat_ns < self.iat_short_ns {
                        short += 1;
                    }
                    if p.colour != 0 {
                        nongreen += 1;
                    }
                }
                let n = soj.len() as u64;
                let [sm, _] = mean_max(&soj);
                let p90 = quantile(&mut soj, 0.9);
                let smax = soj.last().copied().unwrap_or(0.0);
                let km: Vec<f32> = per.values().map(|e| e.1).collect();
                let [kmm, kmx] = mean_max(&km);
                let gaps: Vec<f32> = per
                    .values()
                    .filter(|e| e.2 != u32::MAX)
                    .map(|e| e.2 as f32)
                    .collect();
                let [gm, _] = mean_max(&gaps);
                let gmin = gaps.iter().copied().fold(f32::MAX, f32::min);
                let gmin = if gaps.is_empty() { 0.0 } else { gmin };
                let cmax = per.values().map(|e| e.0).max().unwrap_or(0) as f32;
                let mut v = vec![
                    per.len() as f32,
                    n as f32,
                    bytes as f32,
                    sm,
                    p90,
                    smax,
                    kmm,
                    kmx,
                    gm,
                    gmin,
                    frac(short, n),
                    frac(nongreen, n),
                    cmax,
                ];
                v.extend_from_slice(&port);
                (q, v)
            })
            .collect()
    }
}

fn pm(w: &Window) -> Vec<(u8, Vec<f32>)> {
    let at = |q: u8| w.pm[UL * 64 + usize::from(q)];
    let (mut pp, mut pb, mut ps) = (0u64, 0u64, 0u64);
    for p in &w.pm[..64] {
        pp += p.packets;
        pb += p.bytes;
        ps += p.sojourn_sum_ns;
    }
    let port_delay = if pp == 0 { 0.0 } else { ps as f32 / pp as f32 };
    USER_QFIS
        .iter()
        .map(|&q| {
            let p = at(q);
            let d = if p.packets == 0 {
                0.0
            } else {
                p.sojourn_sum_ns as f32 / p.packets as f32
            };
            (
                q,
                vec![
                    p.packets as f32,
                    p.bytes as f32,
                    d,
                    pp as f32,
                    pb as f32,
                    port_delay,
                ],
            )
        })
        .collect()
}

/// One key's postcards in a window (Delta-SMP's per-key view).
#[derive(Debug, Default)]
struct KeyCards {
    n: u64,
    bytes: u64,
    soj_sum: f64,
    soj_max: f32,
    iat_min: u32,
    short: u64,
    nongreen: u64,
    /// Sojourns of its postcards (for the percentile).
    soj: Vec<f32>,
    /// Sum and count of its non-zero gaps.
    iat_sum: f64,
    iat_n: u64,
}

impl KeyCards {
    /// [`SMP_KEY_NAMES`]; `qfi` the QFI's base vector (teids, cards, card bytes, sojourn
    /// mean, ... in [`base_names`] order): the key's share of its postcard bytes, its
    /// postcards against the mean key's, its sojourn mean above the QFI's and its sojourn
    /// max above the QFI's mean per-key max.
    fn features(&self, qfi: &[f32]) -> Vec<f32> {
        let qfi_bytes = qfi[S_CARD_BYTES];
        let mean = if self.n == 0 {
            0.0
        } else {
            (self.soj_sum / self.n as f64) as f32
        };
        let gap = if self.iat_min == 0 || self.iat_min == u32::MAX {
            0.0
        } else {
            self.iat_min as f32
        };
        let share = if qfi_bytes > 0.0 {
            self.bytes as f32 / qfi_bytes
        } else {
            0.0
        };
        let mean_key = if qfi[S_TEIDS] > 0.0 {
            qfi[S_CARDS] / qfi[S_TEIDS]
        } else {
            0.0
        };
        let rel = if mean_key > 0.0 {
            self.n as f32 / mean_key
        } else {
            0.0
        };
        vec![
            self.n as f32,
            self.bytes as f32,
            mean,
            self.soj_max,
            gap,
            frac(self.short, self.n),
            frac(self.nongreen, self.n),
            share,
            rel,
            mean - qfi[S_SOJ_MEAN],
            self.soj_max - qfi[S_KEYMAX_MEAN],
            quantile(&mut self.soj.clone(), 0.9),
            if self.iat_n == 0 {
                0.0
            } else {
                (self.iat_sum / self.iat_n as f64) as f32
            },
        ]
    }
}

/// The window's uplink postcards grouped per (TEID, QFI), in order.
fn smp_keys(pcs: &[Postcard], iat_short_ns: u32) -> BTreeMap<(u32, u8), KeyCards> {
    let mut m: BTreeMap<(u32, u8), KeyCards> = BTreeMap::new();
    for p in pcs.iter().filter(|p| p.dir == 0) {
        let c = m.entry((p.teid, p.qfi)).or_insert(KeyCards {
            iat_min: u32::MAX,
            ..KeyCards::default()
        });
        c.n += 1;
        c.bytes += u64::from(p.len);
        c.soj_sum += p.sojourn_ns as f64;
        c.soj_max = c.soj_max.max(p.sojourn_ns as f32);
        c.soj.push(p.sojourn_ns as f32);
        if p.iat_ns > 0 {
            c.iat_sum += f64::from(p.iat_ns);
            c.iat_n += 1;
            c.iat_min = c.iat_min.min(p.iat_ns);
            if p.iat_ns < iat_short_ns {
                c.short += 1;
            }
        }
        if p.colour != 0 {
            c.nongreen += 1;
        }
    }
    m
}
