//! The export encoding (version 2): one CBOR map per message, published on ZeroMQ with the
//! message kind as topic and appended to the windows file as a CBOR sequence (RFC 8742).
//! Schema in docs/kestrel.md "Export". Three kinds share the header (`v`, `kind`, `seq`,
//! `window_ns`, `workers`, `sources`, `late`): `kestrel` (the sketches), `pm` (3GPP-PM
//! per-QFI counters) and `postcards` (Delta-SMP).
//!
//! Version 2 sends a sketch's non-empty buckets only (their indices as gaps, then their
//! fields); version 1 sent every bucket. Both decode to the same dense [`SketchRec`]; `pm`
//! and `postcards` are alike in both.

use peregrine_dataplane::telemetry::kestrel::{
    layout, IndexHash, Layout, Postcard, SumBucket, Window, BINS, DIRS, QFIS,
};
use serde::{Deserialize, Serialize};

/// Encoding version written in every message.
pub const VERSION: u32 = 2;

/// Versions this reader decodes (1: dense sketches).
pub const VERSIONS: [u32; 2] = [1, 2];

/// Most buckets a version-2 message may expand to (all its sketches together): a small
/// message must not make the reader allocate without bound. 2^20 buckets is 4x the largest
/// default-like layout (8 QIDs x 2 directions x 4 x 4096).
pub const MAX_SPARSE_BUCKETS: usize = 1 << 20;

/// The sketch layout as exported: what a reader needs to compute bucket indices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutRec {
    pub qids: usize,
    pub rows: usize,
    pub width: usize,
    pub seeds: Vec<u64>,
    /// Names the index hash (`IndexHash::name`): `splitmix64-xor-v1` =
    /// `splitmix64(seed ^ (teid << 8 | qfi))`, `crc32-be-v1` = CRC-32 of `seed:u32 teid:u32
    /// qfi:u8` big-endian; row i = bits [i*log2(w), ..).
    pub hash: String,
}

/// The default index hash's name.
pub const HASH_NAME: &str = "splitmix64-xor-v1";

impl LayoutRec {
    pub fn of(l: &Layout) -> LayoutRec {
        LayoutRec {
            qids: l.qids,
            rows: l.rows,
            width: l.width,
            seeds: l.seeds.clone(),
            hash: l.hash.name().into(),
        }
    }

    pub fn layout(&self) -> Result<Layout, String> {
        let h = IndexHash::from_name(&self.hash)
            .ok_or_else(|| format!("unknown hash `{}`", self.hash))?;
        Layout::new(self.qids, self.rows, self.width, self.seeds.clone())
            .and_then(|l| l.with_hash(h))
            .map_err(|e| e.to_string())
    }
}

/// One QID's edges (ns) as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgesRec {
    pub qid: usize,
    pub lat: Vec<u32>,
    pub iat: Vec<u32>,
}

/// One (direction, QID) sketch: per field, `rows * width` values row-major; the
/// histograms `rows * width * 8`, bucket-major (bucket j's bins at `8j .. 8j+8`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SketchRec {
    /// 0 uplink, 1 downlink.
    pub dir: usize,
    pub qid: usize,
    pub packets: Vec<u64>,
    pub bytes: Vec<u64>,
    pub green: Vec<u64>,
    pub yellow: Vec<u64>,
    pub red: Vec<u64>,
    pub lat: Vec<u64>,
    pub iat: Vec<u64>,
}

/// The header every message carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub v: u32,
    pub kind: String,
    pub seq: u64,
    pub window_ns: u64,
    /// Workers of the daemon.
    pub workers: u32,
    /// Taps (worker x port) whose banks are summed in.
    pub sources: Vec<u32>,
    /// A part of a window already exported: add it to that window.
    pub late: bool,
}

/// A `kestrel` message: one window's sketches (empty sketches left out), dense in memory;
/// serialised sparse (version 2) or dense (version 1) by its header's `v`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SketchMsg {
    #[serde(flatten)]
    pub h: Header,
    pub layout: LayoutRec,
    /// Edge versions the window was binned with (one unless a publish raced an edge).
    pub edges_version: Vec<u64>,
    /// The edges of `edges_version[0]`, per QID.
    pub edges: Vec<EdgesRec>,
    pub packets: u64,
    pub skipped: u64,
    pub sketches: Vec<SketchRec>,
}

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
    /// Bucket `i` (row-major, `row * width + column`) as one value; the caller has validated
    /// the sketch against its layout.
    pub fn bucket(&self, i: usize) -> SumBucket {
        let mut b = SumBucket {
            packets: self.packets[i],
            bytes: self.bytes[i],
            colour: [self.green[i], self.yellow[i], self.red[i]],
            ..SumBucket::default()
        };
        b.lat.copy_from_slice(&self.lat[i * BINS..(i + 1) * BINS]);
        b.iat.copy_from_slice(&self.iat[i * BINS..(i + 1) * BINS]);
        b
    }

    /// Every per-bucket field has one value per bucket (histograms 8): what the sparse form
    /// needs to index it.
    fn well_formed(&self) -> bool {
        let n = self.packets.len();
        [&self.bytes, &self.green, &self.yellow, &self.red]
            .iter()
            .all(|v| v.len() == n)
            && self.lat.len() == n * BINS
            && self.iat.len() == n * BINS
    }

    /// The non-empty buckets (any field not zero).
    fn sparse(&self) -> SparseRec {
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
struct SparseSketchMsg {
    #[serde(flatten)]
    h: Header,
    layout: LayoutRec,
    edges_version: Vec<u64>,
    edges: Vec<EdgesRec>,
    packets: u64,
    skipped: u64,
    sketches: Vec<SparseRec>,
}

/// A sketch as written: dense (version 1, or a record whose fields disagree in length, which
/// the reader then refuses by name) or sparse.
#[derive(Serialize)]
#[serde(untagged)]
enum RecOut<'a> {
    Dense(&'a SketchRec),
    Sparse(SparseRec),
}

#[derive(Serialize)]
struct SketchOut<'a> {
    #[serde(flatten)]
    h: &'a Header,
    layout: &'a LayoutRec,
    edges_version: &'a [u64],
    edges: &'a [EdgesRec],
    packets: u64,
    skipped: u64,
    sketches: Vec<RecOut<'a>>,
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
    fn dense(self) -> Result<SketchMsg, String> {
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

/// One (direction, QFI) of the 3GPP-PM baseline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmRec {
    pub dir: usize,
    pub qfi: u8,
    pub packets: u64,
    pub bytes: u64,
    pub mean_delay_ns: u64,
}

/// A `pm` message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmMsg {
    #[serde(flatten)]
    pub h: Header,
    pub qfis: Vec<PmRec>,
}

/// A `postcards` message: the Delta-SMP postcards whose dequeue time falls in the window,
/// columnar (entry i of every array is postcard i).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostcardMsg {
    #[serde(flatten)]
    pub h: Header,
    pub t_ns: Vec<u64>,
    pub teid: Vec<u32>,
    pub qfi: Vec<u8>,
    pub qid: Vec<u8>,
    pub dir: Vec<u8>,
    pub colour: Vec<u8>,
    pub sojourn_ns: Vec<u32>,
    pub iat_ns: Vec<u32>,
    pub len: Vec<u32>,
}

impl PostcardMsg {
    pub fn of(h: Header, ps: &[Postcard]) -> PostcardMsg {
        PostcardMsg {
            h,
            t_ns: ps.iter().map(|p| p.t_ns).collect(),
            teid: ps.iter().map(|p| p.teid).collect(),
            qfi: ps.iter().map(|p| p.qfi).collect(),
            qid: ps.iter().map(|p| p.qid).collect(),
            dir: ps.iter().map(|p| p.dir).collect(),
            colour: ps.iter().map(|p| p.colour).collect(),
            sojourn_ns: ps.iter().map(|p| p.sojourn_ns).collect(),
            iat_ns: ps.iter().map(|p| p.iat_ns).collect(),
            len: ps.iter().map(|p| p.len).collect(),
        }
    }

    /// The number of postcards; an error when the columns disagree or a direction or colour
    /// is out of range.
    pub fn validate(&self) -> Result<usize, String> {
        let n = self.t_ns.len();
        let lens = [
            self.teid.len(),
            self.qfi.len(),
            self.qid.len(),
            self.dir.len(),
            self.colour.len(),
            self.sojourn_ns.len(),
            self.iat_ns.len(),
            self.len.len(),
        ];
        if lens.iter().any(|&l| l != n) {
            return Err(format!(
                "postcard columns of different lengths: {n} and {lens:?}"
            ));
        }
        if let Some(i) = self.dir.iter().position(|&d| usize::from(d) >= DIRS) {
            return Err(format!("postcard {i}: direction {} (0 or 1)", self.dir[i]));
        }
        if let Some(i) = self.colour.iter().position(|&c| c > 2) {
            return Err(format!("postcard {i}: colour {} (0..=2)", self.colour[i]));
        }
        Ok(n)
    }
}

/// Any message, as read back.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    Sketch(SketchMsg),
    Pm(PmMsg),
    Postcards(PostcardMsg),
}

impl SketchMsg {
    pub fn of(w: &Window, h: Header, edges: Vec<EdgesRec>) -> SketchMsg {
        let l = &w.layout;
        let mut sketches = Vec::new();
        for dir in 0..DIRS {
            for qid in 0..l.qids {
                let s = w.sketch(dir, qid);
                if s.iter().all(|b| b.packets == 0) {
                    continue;
                }
                let f = |g: fn(&SumBucket) -> u64| s.iter().map(g).collect::<Vec<u64>>();
                sketches.push(SketchRec {
                    dir,
                    qid,
                    packets: f(|b| b.packets),
                    bytes: f(|b| b.bytes),
                    green: f(|b| b.colour[0]),
                    yellow: f(|b| b.colour[1]),
                    red: f(|b| b.colour[2]),
                    lat: s.iter().flat_map(|b| b.lat).collect(),
                    iat: s.iter().flat_map(|b| b.iat).collect(),
                });
            }
        }
        SketchMsg {
            h,
            layout: LayoutRec::of(l),
            edges_version: w.edges_versions.clone(),
            edges,
            packets: w.packets,
            skipped: w.skipped,
            sketches,
        }
    }

    /// The sketch of (dir, qid), if it had packets.
    pub fn sketch(&self, dir: usize, qid: usize) -> Option<&SketchRec> {
        self.sketches.iter().find(|s| s.dir == dir && s.qid == qid)
    }

    /// Check the shape against the layout (a reader's input is untrusted).
    pub fn validate(&self) -> Result<Layout, String> {
        let l = self.layout.layout()?;
        let n = l.rows * l.width;
        for (i, s) in self.sketches.iter().enumerate() {
            if s.dir >= DIRS || s.qid >= l.qids {
                return Err(format!(
                    "sketch of dir {} qid {} is outside the layout",
                    s.dir, s.qid
                ));
            }
            if self.sketches[..i]
                .iter()
                .any(|x| x.dir == s.dir && x.qid == s.qid)
            {
                return Err(format!("two sketches of dir {} qid {}", s.dir, s.qid));
            }
            for (name, v, k) in [
                ("packets", &s.packets, 1),
                ("bytes", &s.bytes, 1),
                ("green", &s.green, 1),
                ("yellow", &s.yellow, 1),
                ("red", &s.red, 1),
                ("lat", &s.lat, BINS),
                ("iat", &s.iat, BINS),
            ] {
                if v.len() != n * k {
                    return Err(format!(
                        "sketch dir {} qid {}: `{name}` has {} values, the layout needs {}",
                        s.dir,
                        s.qid,
                        v.len(),
                        n * k
                    ));
                }
            }
        }
        Ok(l)
    }

    /// The Count-Min estimate of key (teid, qfi) in (dir, qid): per field the minimum over
    /// the d rows (Kestrel section III-C). `None` when the layout is invalid; zeros when the
    /// sketch had no packets.
    pub fn query(&self, dir: usize, qid: usize, teid: u32, qfi: u8) -> Option<SumBucket> {
        let l = self.validate().ok()?;
        let Some(s) = self.sketch(dir, qid) else {
            return Some(SumBucket::default());
        };
        let mut cols = [0; layout::MAX_ROWS];
        l.columns(qid, teid, qfi, &mut cols);
        let at = |r: usize| s.bucket(r * l.width + cols[r]);
        Some((1..l.rows).fold(at(0), |acc, r| acc.min(&at(r))))
    }
}

impl PmMsg {
    /// Directions and QFIs in range, one record per (direction, QFI).
    pub fn validate(&self) -> Result<(), String> {
        for (i, r) in self.qfis.iter().enumerate() {
            if r.dir >= DIRS || usize::from(r.qfi) >= QFIS {
                return Err(format!(
                    "pm record of dir {} qfi {} is out of range",
                    r.dir, r.qfi
                ));
            }
            if self.qfis[..i]
                .iter()
                .any(|x| x.dir == r.dir && x.qfi == r.qfi)
            {
                return Err(format!("two pm records of dir {} qfi {}", r.dir, r.qfi));
            }
        }
        Ok(())
    }

    pub fn of(w: &Window, h: Header) -> PmMsg {
        let qfis =
            w.pm.iter()
                .enumerate()
                .filter(|(_, p)| p.packets > 0)
                .map(|(i, p)| PmRec {
                    dir: i / QFIS,
                    qfi: (i % QFIS) as u8,
                    packets: p.packets,
                    bytes: p.bytes,
                    mean_delay_ns: p.sojourn_sum_ns / p.packets,
                })
                .collect();
        PmMsg { h, qfis }
    }
}

/// CBOR bytes of a message.
pub fn encode<T: Serialize>(m: &T) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(m, &mut out).expect("writing to a Vec does not fail");
    out
}

/// Decode one message, by its `kind`.
pub fn decode(bytes: &[u8]) -> Result<Msg, String> {
    let v: ciborium::Value = ciborium::from_reader(bytes).map_err(|e| format!("not CBOR: {e}"))?;
    decode_value(v)
}

fn decode_value(v: ciborium::Value) -> Result<Msg, String> {
    let kind = v
        .as_map()
        .and_then(|m| {
            m.iter()
                .find(|(k, _)| k.as_text() == Some("kind"))
                .and_then(|(_, v)| v.as_text().map(str::to_owned))
        })
        .ok_or("no `kind` text field")?;
    let version = v
        .as_map()
        .and_then(|m| m.iter().find(|(k, _)| k.as_text() == Some("v")))
        .and_then(|(_, v)| v.as_integer())
        .ok_or("no `v` field")?;
    if !VERSIONS.iter().any(|&k| version == k.into()) {
        return Err(format!(
            "encoding version {version:?}, this reader knows {VERSIONS:?}"
        ));
    }
    match kind.as_str() {
        "kestrel" if version == 1.into() => {
            let m: SketchMsg = v
                .deserialized()
                .map_err(|e| format!("kestrel message: {e}"))?;
            m.validate()?;
            Ok(Msg::Sketch(m))
        }
        "kestrel" => {
            let m: SparseSketchMsg = v
                .deserialized()
                .map_err(|e| format!("kestrel message: {e}"))?;
            let m = m.dense()?;
            m.validate()?;
            Ok(Msg::Sketch(m))
        }
        "pm" => {
            let m: PmMsg = v.deserialized().map_err(|e| format!("pm message: {e}"))?;
            m.validate()?;
            Ok(Msg::Pm(m))
        }
        "postcards" => {
            let m: PostcardMsg = v
                .deserialized()
                .map_err(|e| format!("postcards message: {e}"))?;
            m.validate()?;
            Ok(Msg::Postcards(m))
        }
        k => Err(format!("unknown message kind `{k}`")),
    }
}

/// Every message of a windows file (a CBOR sequence); stops at the first bad one with its
/// index and reason.
pub fn read_file(bytes: &[u8]) -> Result<Vec<Msg>, String> {
    let mut r = bytes;
    let mut out = Vec::new();
    while !r.is_empty() {
        let v: ciborium::Value = ciborium::from_reader(&mut r)
            .map_err(|e| format!("message {}: not CBOR: {e}", out.len()))?;
        out.push(decode_value(v).map_err(|e| format!("message {}: {e}", out.len()))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_dataplane::runtime::Publisher;
    use peregrine_dataplane::telemetry::kestrel::{tap_pair, Aggregator, EdgeTable, Sample};

    fn header(kind: &str) -> Header {
        Header {
            v: VERSION,
            kind: kind.into(),
            seq: 4,
            window_ns: 1_000,
            workers: 1,
            sources: vec![0],
            late: false,
        }
    }

    fn window() -> Window {
        let l = Layout::new(2, 3, 16, layout::default_seeds(2)).unwrap();
        let t = Publisher::new(EdgeTable::default());
        let (mut tap, ends) = tap_pair(0, &l, 1_000, t.reader(), None);
        let mut a = Aggregator::new(l, 1_000);
        a.add_source(ends);
        for i in 0..50u32 {
            tap.record(&Sample {
                dir: 1,
                qid: 1,
                teid: i % 7,
                qfi: 9,
                len: 100 + i,
                colour: (i % 3) as u8,
                sojourn_ns: i * 100,
                t_ns: u64::from(i) * 10,
            });
        }
        drop(tap);
        a.flush(0).remove(0)
    }

    #[test]
    fn sketch_messages_round_trip_and_answer_queries_like_the_window() {
        let w = window();
        let m = SketchMsg::of(&w, header("kestrel"), vec![]);
        let Msg::Sketch(back) = decode(&encode(&m)).unwrap() else {
            panic!("kind")
        };
        assert_eq!(back, m);
        assert_eq!(back.sketches.len(), 1, "empty sketches are left out");
        for teid in 0..7 {
            assert_eq!(back.query(1, 1, teid, 9), Some(w.query(1, 1, teid, 9)));
        }
        let pm = PmMsg::of(&w, header("pm"));
        assert_eq!(pm.qfis.len(), 1);
        assert_eq!(pm.qfis[0].packets, 50);
        assert_eq!(decode(&encode(&pm)).unwrap(), Msg::Pm(pm));
    }

    #[test]
    fn counts_near_2_pow_64_give_features_not_an_overflow() {
        // Found by the kestrel_export fuzz target: a decoded message's counters summed with
        // `+` in the detectors' features overflowed (a panic in a debug build).
        let mut m = SketchMsg::of(&window(), header("kestrel"), vec![]);
        for s in &mut m.sketches {
            for f in [
                &mut s.packets,
                &mut s.bytes,
                &mut s.green,
                &mut s.lat,
                &mut s.iat,
            ] {
                f.iter_mut().for_each(|x| *x = u64::MAX - 1);
            }
        }
        let v = super::super::features::MsgView::new(&m).unwrap();
        let port = super::super::features::port_context(&v, 1);
        assert_eq!(port[0], u64::MAX as f32);
        let f = super::super::features::qfi_base(&v, 1, 1, 9, &[0, 1, 2], &port);
        assert!(f.iter().all(|x| x.is_finite()), "{f:?}");
    }

    #[test]
    fn crc32_layouts_travel_with_their_hash_name() {
        let l = Layout::new(2, 3, 16, layout::default_crc_seeds(2))
            .unwrap()
            .with_hash(IndexHash::Crc32)
            .unwrap();
        let rec = LayoutRec::of(&l);
        assert_eq!(rec.hash, "crc32-be-v1");
        assert_eq!(rec.layout(), Ok(l.clone()));
        let mut wide = rec.clone();
        wide.seeds[0] = 1 << 40;
        assert!(wide.layout().unwrap_err().contains("32-bit seed"));
        let t = Publisher::new(EdgeTable::default());
        let (mut tap, ends) = tap_pair(0, &l, 1_000, t.reader(), None);
        let mut a = Aggregator::new(l, 1_000);
        a.add_source(ends);
        for i in 0..20u32 {
            tap.record(&Sample {
                dir: 0,
                qid: 1,
                teid: i % 5,
                qfi: 9,
                len: 100,
                colour: 0,
                sojourn_ns: 10,
                t_ns: u64::from(i) * 10,
            });
        }
        drop(tap);
        let w = a.flush(0).remove(0);
        let m = SketchMsg::of(&w, header("kestrel"), vec![]);
        let Msg::Sketch(back) = decode(&encode(&m)).unwrap() else {
            panic!("kind")
        };
        for teid in 0..5 {
            assert_eq!(back.query(0, 1, teid, 9), Some(w.query(0, 1, teid, 9)));
            assert_eq!(w.query(0, 1, teid, 9).packets, 4);
        }
    }

    #[test]
    fn bad_messages_are_refused_by_name() {
        assert!(decode(&[0xff, 0x00]).unwrap_err().contains("not CBOR"));
        let mut m = SketchMsg::of(&window(), header("kestrel"), vec![]);
        m.h.v = 9;
        assert!(decode(&encode(&m)).unwrap_err().contains("version"));
        // Version 1 (dense): a field of the wrong length is refused by name.
        m.h.v = 1;
        m.sketches[0].lat.pop();
        assert!(decode(&encode(&m)).unwrap_err().contains("`lat` has"));
        m.sketches[0].qid = 5;
        assert!(decode(&encode(&m))
            .unwrap_err()
            .contains("outside the layout"));
        let mut m = SketchMsg::of(&window(), header("falcon"), vec![]);
        assert!(decode(&encode(&m))
            .unwrap_err()
            .contains("unknown message kind"));
        m.h.kind = "kestrel".into();
        m.layout.hash = "crc32".into();
        assert!(decode(&encode(&m)).unwrap_err().contains("unknown hash"));
        let mut p = PostcardMsg::of(header("postcards"), &[Postcard::default(); 3]);
        assert_eq!(p.validate(), Ok(3));
        p.len.pop();
        assert!(decode(&encode(&p))
            .unwrap_err()
            .contains("different lengths"));
        // A file: messages in turn, the bad one named by its index.
        let good = encode(&SketchMsg::of(&window(), header("kestrel"), vec![]));
        let mut file = good.clone();
        file.extend_from_slice(&good);
        assert_eq!(read_file(&file).unwrap().len(), 2);
        file.extend_from_slice(&[0xa1]);
        assert!(read_file(&file).unwrap_err().starts_with("message 2"));
    }

    #[test]
    fn version_2_sends_the_non_empty_buckets_and_decodes_to_the_dense_window() {
        let m = SketchMsg::of(&window(), header("kestrel"), vec![]);
        assert_eq!(m.h.v, 2);
        let sparse = encode(&m);
        let dense = encode(&SketchMsg {
            h: Header {
                v: 1,
                ..m.h.clone()
            },
            ..m.clone()
        });
        assert!(
            sparse.len() * 3 < dense.len() * 2,
            "{} vs {}",
            sparse.len(),
            dense.len()
        );
        let Msg::Sketch(a) = decode(&sparse).unwrap() else {
            panic!("kind")
        };
        let Msg::Sketch(b) = decode(&dense).unwrap() else {
            panic!("kind")
        };
        assert_eq!(a.sketches, m.sketches);
        assert_eq!(b.sketches, m.sketches);
        assert_eq!(a.h.v, 2);
    }

    #[test]
    fn hostile_sparse_sketches_are_refused_by_name() {
        let m = SketchMsg::of(&window(), header("kestrel"), vec![]);
        let r = m.sketches[0].sparse();
        assert!(r.gaps.len() >= 2);
        let n = m.layout.rows * m.layout.width;
        let wire = |f: &dyn Fn(&mut SparseSketchMsg)| {
            let mut w = SparseSketchMsg {
                h: m.h.clone(),
                layout: m.layout.clone(),
                edges_version: m.edges_version.clone(),
                edges: m.edges.clone(),
                packets: m.packets,
                skipped: m.skipped,
                sketches: vec![r.clone()],
            };
            f(&mut w);
            let out = SketchOut {
                h: &w.h,
                layout: &w.layout,
                edges_version: &w.edges_version,
                edges: &w.edges,
                packets: w.packets,
                skipped: w.skipped,
                sketches: w.sketches.into_iter().map(RecOut::Sparse).collect(),
            };
            decode(&encode(&out)).unwrap_err()
        };
        let e = wire(&|w| w.sketches[0].gaps[1] = 0);
        assert!(e.contains("gap 1 is 0"), "{e}");
        let e = wire(&|w| w.sketches[0].gaps[0] = n as u32);
        assert!(e.contains("beyond the layout"), "{e}");
        let e = wire(&|w| {
            w.sketches[0].gaps[1] = u32::MAX;
        });
        assert!(e.contains("beyond the layout"), "{e}");
        let e = wire(&|w| {
            w.sketches[0].lat.pop();
        });
        assert!(e.contains("`lat` has"), "{e}");
        let e = wire(&|w| w.sketches = vec![r.clone(); 2 * w.layout.qids + 1]);
        assert!(e.contains("sketches, the layout has"), "{e}");
        let e = wire(&|w| {
            w.layout.width = 65536;
            w.layout.rows = 4;
            w.layout.qids = 8;
            w.layout.seeds = layout::default_seeds(8);
            w.sketches = vec![r.clone(); 2 * w.layout.qids];
            for (i, s) in w.sketches.iter_mut().enumerate() {
                (s.dir, s.qid) = (i % 2, i / 2);
            }
        });
        assert!(e.contains("buckets: more than"), "{e}");
        // Two records of one (direction, QID) are refused as in version 1.
        let e = wire(&|w| w.sketches = vec![r.clone(), r.clone()]);
        assert!(e.contains("two sketches"), "{e}");
    }
}
