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

mod sparse;
pub use sparse::SparseRec;
use sparse::SparseSketchMsg;

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
mod tests;
