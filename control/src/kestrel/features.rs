//! The per-(window, QFI) feature vector of Kestrel's detectors (Kestrel, Saha et al., section
//! V, "Telemetry export and processing"): the Count-Min query (minimum over the d rows) of
//! every (TEID, QFI) key the PFCP sessions name, summarised over the QFI's keys (volume,
//! latency tail fractions, inter-arrival head fractions, colour ratios, TEIDs per QFI), the
//! queue's exact histograms (row 0 sums: each packet is in one bucket of a row) and the
//! port's totals; then, per feature, the change from the previous window and the ratio to a
//! slow moving average (alpha 0.1), so the detectors see onsets as well as levels.
//!
//! One code path for the evaluation (`pg-kestrel-eval`, over the aggregated [`Window`]) and
//! the daemon's online detector (over the `kestrel` export message, [`MsgView`]): both are
//! [`SketchView`]s and give the same numbers for the same window.

use super::export::SketchMsg;
use peregrine_dataplane::telemetry::kestrel::{layout, Layout, SumBucket, Window, BINS};
use std::collections::HashMap;

/// What the features read of one window's sketches.
pub trait SketchView {
    /// QIDs of the layout.
    fn qids(&self) -> usize;
    /// Rows (d) of the layout.
    fn rows(&self) -> usize;
    /// The Count-Min estimate of (teid, qfi) in (dir, qid): per field the minimum over rows.
    fn query(&self, dir: usize, qid: usize, teid: u32, qfi: u8) -> SumBucket;
    /// The sum of row `row` of (dir, qid): the queue's exact totals.
    fn row_sum(&self, dir: usize, qid: usize, row: usize) -> SumBucket;
    /// The packet counts of the d buckets of (teid, qfi) in (dir, qid), one per row (0 past
    /// the layout's rows): what [`SketchView::query`] takes the minimum of.
    fn row_packets(&self, dir: usize, qid: usize, teid: u32, qfi: u8) -> [u64; layout::MAX_ROWS];
}

impl SketchView for Window {
    fn qids(&self) -> usize {
        self.layout.qids
    }
    fn rows(&self) -> usize {
        self.layout.rows
    }
    fn query(&self, dir: usize, qid: usize, teid: u32, qfi: u8) -> SumBucket {
        Window::query(self, dir, qid, teid, qfi)
    }
    fn row_sum(&self, dir: usize, qid: usize, row: usize) -> SumBucket {
        Window::row_sum(self, dir, qid, row)
    }
    fn row_packets(&self, dir: usize, qid: usize, teid: u32, qfi: u8) -> [u64; layout::MAX_ROWS] {
        let mut cols = [0; layout::MAX_ROWS];
        self.layout.columns(qid, teid, qfi, &mut cols);
        let s = self.sketch(dir, qid);
        let w = self.layout.width;
        let mut out = [0; layout::MAX_ROWS];
        for r in 0..self.layout.rows {
            out[r] = s[r * w + cols[r]].packets;
        }
        out
    }
}

/// A validated `kestrel` message, read as a [`SketchView`] (validated once, not per query).
#[derive(Debug)]
pub struct MsgView<'a> {
    msg: &'a SketchMsg,
    layout: Layout,
}

impl<'a> MsgView<'a> {
    /// Refused (with the reason) when the message does not fit its own layout.
    pub fn new(msg: &'a SketchMsg) -> Result<MsgView<'a>, String> {
        Ok(MsgView {
            layout: msg.validate()?,
            msg,
        })
    }

    fn bucket(&self, dir: usize, qid: usize, i: usize) -> SumBucket {
        self.msg
            .sketch(dir, qid)
            .map_or_else(SumBucket::default, |s| s.bucket(i))
    }
}

impl SketchView for MsgView<'_> {
    fn qids(&self) -> usize {
        self.layout.qids
    }
    fn rows(&self) -> usize {
        self.layout.rows
    }
    fn query(&self, dir: usize, qid: usize, teid: u32, qfi: u8) -> SumBucket {
        if qid >= self.layout.qids || self.msg.sketch(dir, qid).is_none() {
            return SumBucket::default();
        }
        let mut cols = [0; layout::MAX_ROWS];
        self.layout.columns(qid, teid, qfi, &mut cols);
        let w = self.layout.width;
        (1..self.layout.rows).fold(self.bucket(dir, qid, cols[0]), |acc, r| {
            acc.min(&self.bucket(dir, qid, r * w + cols[r]))
        })
    }
    fn row_packets(&self, dir: usize, qid: usize, teid: u32, qfi: u8) -> [u64; layout::MAX_ROWS] {
        let mut out = [0; layout::MAX_ROWS];
        if qid >= self.layout.qids || self.msg.sketch(dir, qid).is_none() {
            return out;
        }
        let mut cols = [0; layout::MAX_ROWS];
        self.layout.columns(qid, teid, qfi, &mut cols);
        let w = self.layout.width;
        for r in 0..self.layout.rows {
            out[r] = self.bucket(dir, qid, r * w + cols[r]).packets;
        }
        out
    }
    fn row_sum(&self, dir: usize, qid: usize, row: usize) -> SumBucket {
        let mut t = SumBucket::default();
        if qid >= self.layout.qids || self.msg.sketch(dir, qid).is_none() {
            return t;
        }
        let w = self.layout.width;
        for i in row * w..(row + 1) * w {
            let b = self.bucket(dir, qid, i);
            t.packets = t.packets.saturating_add(b.packets);
            t.bytes = t.bytes.saturating_add(b.bytes);
            for k in 0..3 {
                t.colour[k] = t.colour[k].saturating_add(b.colour[k]);
            }
            for k in 0..BINS {
                t.lat[k] = t.lat[k].saturating_add(b.lat[k]);
                t.iat[k] = t.iat[k].saturating_add(b.iat[k]);
            }
        }
        t
    }
}

/// The sum of counters that came from outside (a decoded export): saturating, so a hostile
/// message with counts near 2^64 gives a large feature, not an overflow.
fn total(v: impl IntoIterator<Item = u64>) -> u64 {
    v.into_iter().fold(0, u64::saturating_add)
}

pub fn frac(a: u64, n: u64) -> f32 {
    if n == 0 {
        0.0
    } else {
        a as f32 / n as f32
    }
}

/// Mean and max of `v` (0 for none).
pub fn mean_max(v: &[f32]) -> [f32; 2] {
    if v.is_empty() {
        return [0.0, 0.0];
    }
    let s: f32 = v.iter().sum();
    [s / v.len() as f32, v.iter().copied().fold(0.0, f32::max)]
}

/// Features of one key's (min over rows) bucket.
struct KeyF {
    packets: u64,
    bytes: u64,
    tail: f32,
    tail2: f32,
    head: f32,
    nongreen: f32,
    /// Mean latency bin index (0..7).
    lat_mean: f32,
    /// The 90th percentile of the latency histogram in bin units (interpolated in its bin).
    lat_p90: f32,
    /// Mean inter-arrival bin index (0..7).
    iat_mean: f32,
}

/// Mean bin index of histogram `h` (0 for none).
fn mean_bin(h: &[u64; BINS]) -> f32 {
    let n = total(*h);
    if n == 0 {
        return 0.0;
    }
    h.iter()
        .enumerate()
        .map(|(i, &c)| i as f32 * c as f32)
        .sum::<f32>()
        / n as f32
}

/// Quantile `q` of histogram `h` in bin units: the bin where the cumulative count reaches
/// `q` of the total, plus the fraction of that bin's count below it (0 for none).
fn bin_quantile(h: &[u64; BINS], q: f32) -> f32 {
    let n = total(*h);
    if n == 0 {
        return 0.0;
    }
    let want = q * n as f32;
    let mut below = 0f32;
    for (i, &c) in h.iter().enumerate() {
        let c = c as f32;
        if c > 0.0 && below + c >= want {
            return i as f32 + (want - below) / c;
        }
        below += c;
    }
    BINS as f32
}

fn key_f(b: &SumBucket) -> KeyF {
    let n = b.packets;
    let lat_n = total(b.lat);
    let iat_n = total(b.iat);
    KeyF {
        packets: n,
        bytes: b.bytes,
        tail: frac(b.lat[BINS - 1], lat_n),
        tail2: frac(b.lat[BINS - 1].saturating_add(b.lat[BINS - 2]), lat_n),
        head: frac(b.iat[0], iat_n),
        nongreen: frac(b.colour[1].saturating_add(b.colour[2]), total(b.colour)),
        lat_mean: mean_bin(&b.lat),
        lat_p90: bin_quantile(&b.lat, 0.9),
        iat_mean: mean_bin(&b.iat),
    }
}

/// Names of the per-QFI base features (before the temporal ones), in vector order.
pub const BASE_NAMES: [&str; 31] = [
    "teids",
    "pkts",
    "bytes",
    "tail_mean",
    "tail_max",
    "tail2_mean",
    "tail2_max",
    "head_mean",
    "head_max",
    "nongreen_mean",
    "nongreen_max",
    "latbin_mean",
    "latbin_max",
    "teids_tail10",
    "max_share",
    "q_lat0",
    "q_lat1",
    "q_lat2",
    "q_lat3",
    "q_lat4",
    "q_lat5",
    "q_lat6",
    "q_lat7",
    "q_iat0",
    "q_iat1",
    "port_pkts",
    "port_bytes",
    "port_tail",
    "port_head",
    "port_latbin",
    "port_tail2",
];

/// Every feature name of `base`: the base names, then `d_` (change from the previous
/// window), then `r_` (ratio to the moving average).
pub fn with_temporal(base: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = base.iter().map(|s| s.to_string()).collect();
    v.extend(base.iter().map(|n| format!("d_{n}")));
    v.extend(base.iter().map(|n| format!("r_{n}")));
    v
}

/// The names of the Kestrel feature vector (what a detector model must be trained on).
pub fn names() -> Vec<String> {
    with_temporal(&BASE_NAMES)
}

/// Length of the port context ([`port_context`]).
pub const PORT_LEN: usize = 6;

/// The port context of direction `dir`: every queue's row-0 totals (packets, bytes, latency
/// tail fraction, inter-arrival head fraction, then the latency location of the whole port:
/// its mean latency bin and the fraction in its top two latency bins, over the sum of the
/// queues' latency histograms; the port-wide counterpart of Delta-SMP's port sojourn mean
/// and of 3GPP-PM's port delay: cross traffic competing for the shaped port moves every
/// queue's latency at once).
pub fn port_context(v: &impl SketchView, dir: usize) -> [f32; PORT_LEN] {
    let (mut pp, mut pb, mut pt, mut pl, mut ph, mut pi) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut lat = [0u64; BINS];
    for qid in 0..v.qids() {
        let s = v.row_sum(dir, qid, 0);
        pp = pp.saturating_add(s.packets);
        pb = pb.saturating_add(s.bytes);
        pt = pt.saturating_add(s.lat[BINS - 1]);
        pl = pl.saturating_add(total(s.lat));
        ph = ph.saturating_add(s.iat[0]);
        pi = pi.saturating_add(total(s.iat));
        for (a, &b) in lat.iter_mut().zip(&s.lat) {
            *a = a.saturating_add(b);
        }
    }
    [
        pp as f32,
        pb as f32,
        frac(pt, pl),
        frac(ph, pi),
        mean_bin(&lat),
        frac(lat[BINS - 1].saturating_add(lat[BINS - 2]), pl),
    ]
}

/// The base features of QFI `qfi` (queue `qid`) in direction `dir`, over its keys `teids`.
pub fn qfi_base(
    v: &impl SketchView,
    dir: usize,
    qid: usize,
    qfi: u8,
    teids: &[u32],
    port: &[f32; PORT_LEN],
) -> Vec<f32> {
    let mut ks: Vec<KeyF> = Vec::with_capacity(teids.len());
    for &t in teids {
        let b = v.query(dir, qid, t, qfi);
        if b.packets > 0 {
            ks.push(key_f(&b));
        }
    }
    let pk = total(ks.iter().map(|k| k.packets));
    let by = total(ks.iter().map(|k| k.bytes));
    let col = |f: fn(&KeyF) -> f32| mean_max(&ks.iter().map(f).collect::<Vec<_>>());
    let [tm, tx] = col(|k| k.tail);
    let [t2m, t2x] = col(|k| k.tail2);
    let [hm, hx] = col(|k| k.head);
    let [nm, nx] = col(|k| k.nongreen);
    let [lm, lx] = col(|k| k.lat_mean);
    let t10 = ks.iter().filter(|k| k.tail > 0.1).count() as f32;
    let share = ks
        .iter()
        .map(|k| k.bytes)
        .max()
        .map_or(0.0, |m| frac(m, by));
    let qs = v.row_sum(dir, qid, 0);
    let ql = total(qs.lat);
    let qi = total(qs.iat);
    let mut out = Vec::with_capacity(BASE_NAMES.len());
    out.extend_from_slice(&[
        ks.len() as f32,
        pk as f32,
        by as f32,
        tm,
        tx,
        t2m,
        t2x,
        hm,
        hx,
        nm,
        nx,
        lm,
        lx,
        t10,
        share,
    ]);
    out.extend(qs.lat.iter().map(|&c| frac(c, ql)));
    out.push(frac(qs.iat[0], qi));
    out.push(frac(qs.iat[1], qi));
    out.extend_from_slice(port);
    out
}

/// Names of the per-key base features ([`key_base`]).
pub const KEY_NAMES: [&str; 14] = [
    "k_pkts",
    "k_bytes",
    "k_tail",
    "k_tail2",
    "k_head",
    "k_nongreen",
    "k_latbin",
    "k_share",
    "k_rel_pkts",
    "k_tail_excess",
    "k_latbin_excess",
    "k_row_spread",
    "k_lat_p90",
    "k_iatbin",
];

/// The index of `name` in `names`, evaluated at compile time where a const needs it (a
/// name not in the list fails the build): how per-key features read their QFI's base vector
/// by name, so a change of the vector's order cannot silently shift what they read.
pub const fn name_index(names: &[&str], name: &str) -> usize {
    let mut i = 0;
    while i < names.len() {
        let (a, b) = (names[i].as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("feature name not in the list")
}

/// Indices in the per-QFI base vector ([`BASE_NAMES`]) that [`key_base`] reads.
const Q_TEIDS: usize = name_index(&BASE_NAMES, "teids");
const Q_PKTS: usize = name_index(&BASE_NAMES, "pkts");
const Q_BYTES: usize = name_index(&BASE_NAMES, "bytes");
const Q_TAIL_MEAN: usize = name_index(&BASE_NAMES, "tail_mean");
const Q_LATBIN_MEAN: usize = name_index(&BASE_NAMES, "latbin_mean");

/// The base features of one (TEID, QFI) key in (dir, qid): its own Count-Min estimate
/// (minimum over the rows per field, as the collector's per-key query answers), its share of
/// its QFI's bytes, its packets against the mean key of its QFI, its latency tail fraction
/// and mean latency bin above its QFI's key means, and the spread of its d buckets' packet
/// counts ((max - min) / max(min, 1) over the rows: 0 when every row agrees, large when a row
/// is shared with a heavier key; a collision indicator from the exported rows, Kestrel
/// section IV). `qfi` is the QFI's base vector ([`qfi_base`], [`BASE_NAMES`] order). The
/// per-key unit of the evaluation.
pub fn key_base(
    v: &impl SketchView,
    dir: usize,
    qid: usize,
    teid: u32,
    qfi: u8,
    qfi_row: &[f32],
) -> Vec<f32> {
    let b = v.query(dir, qid, teid, qfi);
    let k = key_f(&b);
    let ratio = |a: f32, b: f32| if b > 0.0 { a / b } else { 0.0 };
    let share = ratio(k.bytes as f32, qfi_row[Q_BYTES]);
    let mean_key = ratio(qfi_row[Q_PKTS], qfi_row[Q_TEIDS]);
    let rows = v.row_packets(dir, qid, teid, qfi);
    let used = &rows[..v.rows().min(layout::MAX_ROWS)];
    let lo = used.iter().copied().min().unwrap_or(0);
    let hi = used.iter().copied().max().unwrap_or(0);
    vec![
        k.packets as f32,
        k.bytes as f32,
        k.tail,
        k.tail2,
        k.head,
        k.nongreen,
        k.lat_mean,
        share,
        ratio(k.packets as f32, mean_key),
        k.tail - qfi_row[Q_TAIL_MEAN],
        k.lat_mean - qfi_row[Q_LATBIN_MEAN],
        (hi - lo) as f32 / lo.max(1) as f32,
        k.lat_p90,
        k.iat_mean,
    ]
}

/// The temporal part: per unit (a QFI, or a (TEID, QFI) key in the evaluation's per-key
/// unit), the previous window's base vector and the moving average.
#[derive(Debug, Clone)]
pub struct Temporal<K = u8> {
    prev: HashMap<K, Vec<f32>>,
    ema: HashMap<K, Vec<f32>>,
}

impl<K> Default for Temporal<K> {
    fn default() -> Self {
        Temporal {
            prev: HashMap::new(),
            ema: HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Copy> Temporal<K> {
    /// `base`, then its change from the previous window of `unit`, then its ratio to the
    /// moving average (updated after, alpha 0.1). The first window has no change and ratio
    /// ~1.
    pub fn extend(&mut self, unit: K, base: Vec<f32>) -> Vec<f32> {
        let prev = self
            .prev
            .insert(unit, base.clone())
            .unwrap_or_else(|| base.clone());
        let ema = self.ema.entry(unit).or_insert_with(|| base.clone());
        let mut v = base.clone();
        v.extend(base.iter().zip(&prev).map(|(x, p)| x - p));
        v.extend(
            base.iter()
                .zip(ema.iter())
                .map(|(x, e)| x / (e.abs() + 1e-3)),
        );
        for (e, x) in ema.iter_mut().zip(&base) {
            *e = 0.9 * *e + 0.1 * x;
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_index_finds_the_whole_name_only() {
        assert_eq!(name_index(&["tail", "tail_mean", "t"], "t"), 2);
        assert_eq!(name_index(&["tail", "tail_mean", "t"], "tail_mean"), 1);
        // The indices `key_base` reads are the names they say.
        let at = |i: usize| BASE_NAMES[i];
        assert_eq!(
            [
                at(Q_TEIDS),
                at(Q_PKTS),
                at(Q_BYTES),
                at(Q_TAIL_MEAN),
                at(Q_LATBIN_MEAN)
            ],
            ["teids", "pkts", "bytes", "tail_mean", "latbin_mean"]
        );
        // Where the hand-written indices were (0, 1, 2, 3, 11): the vector is unchanged.
        assert_eq!(
            [Q_TEIDS, Q_PKTS, Q_BYTES, Q_TAIL_MEAN, Q_LATBIN_MEAN],
            [0, 1, 2, 3, 11]
        );
    }
}
