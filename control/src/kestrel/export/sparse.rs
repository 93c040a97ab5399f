//! Version 2 of the `kestrel` message: a sketch's non-empty buckets only, their indices as
//! gaps (docs/kestrel.md "Export"); written from and read back into the dense [`SketchRec`].

use super::{EdgesRec, Header, LayoutRec, SketchMsg, SketchRec, MAX_SPARSE_BUCKETS};
use peregrine_dataplane::telemetry::kestrel::{BINS, DIRS};
use serde::{Deserialize, Serialize};

/// A sketch on the wire in version 2: the non-empty buckets only. `gaps[0]` is the first
/// bucket's index (row-major, `row * width + column`), `gaps[k]` (> 0) the distance from
/// bucket k-1's; every field holds one value per listed bucket (`lat`, `iat`: 8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SparseRec {
    pub dir: usize,
    pub qid: usize,
    pub gaps: Vec<u32>,
    pub packets: Vec<u64>,
    pub bytes: Vec<u64>,
    pub green: Vec<u64>,
    pub yellow: Vec<u64>,
    pub red: Vec<u64>,
    pub lat: Vec<u64>,
    pub iat: Vec<u64>,
}

impl SketchRec {
    /// Every per-bucket field has one value per bucket (histograms 8): what the sparse form
    /// needs to index it.
    pub(super) fn well_formed(&self) -> bool {
        let n = self.packets.len();
        [&self.bytes, &self.green, &self.yellow, &self.red]
            .iter()
            .all(|v| v.len() == n)
            && self.lat.len() == n * BINS
            && self.iat.len() == n * BINS
    }

    /// The non-empty buckets (any field not zero).
    pub(super) fn sparse(&self) -> SparseRec {
        let n = self.packets.len();
        let used = |i: usize| {
            self.packets[i] | self.bytes[i] | self.green[i] | self.yellow[i] | self.red[i] != 0
                || self.lat[i * BINS..(i + 1) * BINS].iter().any(|&x| x != 0)
                || self.iat[i * BINS..(i + 1) * BINS].iter().any(|&x| x != 0)
        };
        let idx: Vec<usize> = (0..n).filter(|&i| used(i)).collect();
        let pick = |v: &[u64]| idx.iter().map(|&i| v[i]).collect::<Vec<u64>>();
        let bins = |v: &[u64]| {
            idx.iter()
                .flat_map(|&i| v[i * BINS..(i + 1) * BINS].iter().copied())
                .collect::<Vec<u64>>()
        };
        let mut prev = 0;
        let gaps = idx
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let g = if k == 0 { i } else { i - prev };
                prev = i;
                g as u32
            })
            .collect();
        SparseRec {
            dir: self.dir,
            qid: self.qid,
            gaps,
            packets: pick(&self.packets),
            bytes: pick(&self.bytes),
            green: pick(&self.green),
            yellow: pick(&self.yellow),
            red: pick(&self.red),
            lat: bins(&self.lat),
            iat: bins(&self.iat),
        }
    }
}

impl SparseRec {
    /// The dense record of `n` buckets; refused when the gaps or the field lengths are wrong.
    fn dense(&self, n: usize) -> Result<SketchRec, String> {
        let at = format!("sketch dir {} qid {}", self.dir, self.qid);
        let k = self.gaps.len();
        for (name, v, m) in [
            ("packets", &self.packets, 1),
            ("bytes", &self.bytes, 1),
            ("green", &self.green, 1),
            ("yellow", &self.yellow, 1),
            ("red", &self.red, 1),
            ("lat", &self.lat, BINS),
            ("iat", &self.iat, BINS),
        ] {
            if v.len() != k * m {
                return Err(format!(
                    "{at}: `{name}` has {} values for {k} buckets",
                    v.len()
                ));
            }
        }
        let mut d = SketchRec {
            dir: self.dir,
            qid: self.qid,
            packets: vec![0; n],
            bytes: vec![0; n],
            green: vec![0; n],
            yellow: vec![0; n],
            red: vec![0; n],
            lat: vec![0; n * BINS],
            iat: vec![0; n * BINS],
        };
        let mut i = 0usize;
        for (j, &g) in self.gaps.iter().enumerate() {
            if j > 0 && g == 0 {
                return Err(format!("{at}: bucket gap {j} is 0 (indices must increase)"));
            }
            i = if j == 0 { g as usize } else { i + g as usize };
            if i >= n {
                return Err(format!(
                    "{at}: bucket index {i} beyond the layout's {n} buckets"
                ));
            }
            d.packets[i] = self.packets[j];
            d.bytes[i] = self.bytes[j];
            d.green[i] = self.green[j];
            d.yellow[i] = self.yellow[j];
            d.red[i] = self.red[j];
            d.lat[i * BINS..(i + 1) * BINS].copy_from_slice(&self.lat[j * BINS..(j + 1) * BINS]);
            d.iat[i * BINS..(i + 1) * BINS].copy_from_slice(&self.iat[j * BINS..(j + 1) * BINS]);
        }
        Ok(d)
    }
}

/// A version-2 `kestrel` message as read.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct SparseSketchMsg {
    #[serde(flatten)]
    pub(super) h: Header,
    pub(super) layout: LayoutRec,
    pub(super) edges_version: Vec<u64>,
    pub(super) edges: Vec<EdgesRec>,
    pub(super) packets: u64,
    pub(super) skipped: u64,
    pub(super) sketches: Vec<SparseRec>,
}

/// A sketch as written: dense (version 1, or a record whose fields disagree in length, which
/// the reader then refuses by name) or sparse.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum RecOut<'a> {
    Dense(&'a SketchRec),
    Sparse(SparseRec),
}

#[derive(Serialize)]
pub(super) struct SketchOut<'a> {
    #[serde(flatten)]
    pub(super) h: &'a Header,
    pub(super) layout: &'a LayoutRec,
    pub(super) edges_version: &'a [u64],
    pub(super) edges: &'a [EdgesRec],
    pub(super) packets: u64,
    pub(super) skipped: u64,
    pub(super) sketches: Vec<RecOut<'a>>,
}

impl Serialize for SketchMsg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let sparse = self.h.v >= 2;
        SketchOut {
            h: &self.h,
            layout: &self.layout,
            edges_version: &self.edges_version,
            edges: &self.edges,
            packets: self.packets,
            skipped: self.skipped,
            sketches: self
                .sketches
                .iter()
                .map(|r| {
                    if sparse && r.well_formed() {
                        RecOut::Sparse(r.sparse())
                    } else {
                        RecOut::Dense(r)
                    }
                })
                .collect(),
        }
        .serialize(s)
    }
}

impl SparseSketchMsg {
    /// The dense message, refused when the layout is bad, there are more sketches than
    /// (direction, QID)s, the expansion would exceed [`MAX_SPARSE_BUCKETS`], or a record is
    /// malformed.
    pub(super) fn dense(self) -> Result<SketchMsg, String> {
        let l = self.layout.layout()?;
        let n = l.rows * l.width;
        if self.sketches.len() > DIRS * l.qids {
            return Err(format!(
                "{} sketches, the layout has {} (direction, QID)s",
                self.sketches.len(),
                DIRS * l.qids
            ));
        }
        if self.sketches.len() * n > MAX_SPARSE_BUCKETS {
            return Err(format!(
                "{} sketches of {n} buckets: more than {MAX_SPARSE_BUCKETS} buckets",
                self.sketches.len()
            ));
        }
        let sketches = self
            .sketches
            .iter()
            .map(|r| r.dense(n))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SketchMsg {
            h: self.h,
            layout: self.layout,
            edges_version: self.edges_version,
            edges: self.edges,
            packets: self.packets,
            skipped: self.skipped,
            sketches,
        })
    }
}
