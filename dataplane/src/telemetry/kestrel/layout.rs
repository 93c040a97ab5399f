//! The sketch layout (Kestrel section III-C): per direction and egress queue (QID) one
//! Count-Min sketch of `rows` x `width` enriched buckets, keyed by (TEID, QFI).

/// Bins of each histogram (the seed's 8-bin latency and inter-arrival histograms).
pub const BINS: usize = 8;
/// Edges between the bins: bin `k` holds values in `[edge[k-1], edge[k])` (ns).
pub const EDGES: usize = BINS - 1;
/// Most egress queues a sketch set covers (the UPF's QIDs are 0..8).
pub const MAX_QIDS: usize = 8;
/// Most rows (d) of one sketch.
pub const MAX_ROWS: usize = 8;
/// Directions a bank keeps apart: uplink (index 0) and downlink (index 1).
pub const DIRS: usize = 2;
/// Longest window the counter widths are sized for (see [`Bucket`]).
pub const MAX_WINDOW_NS: u64 = 10_000_000_000;

/// Packets a [`HotBucket`] counts at most before it spills into the wide [`Bucket`] of the
/// same index: every u16 counter of a hot bucket is at most its `packets`, so none can wrap.
/// The burst update spills a whole sketch when its packets since the last spill reach this
/// (`Bank::hot_room`), which bounds every one of its buckets.
pub const SPILL_AT: u16 = u16::MAX;

/// One enriched Count-Min bucket as the worker updates it: one cache line, so a packet's
/// update touches one line per row (Kestrel section III-C's registers, laid out for a CPU).
///
/// Counters are u16 and spill: before `packets` can pass [`SPILL_AT`] the worker adds every
/// counter into the wide [`Bucket`] at the same index of the bank and zeroes them (rare:
/// the burst update spills a sketch's buckets once per 65 535 packets of that sketch, off
/// the hot path). Every other u16 counter is at most `packets`, so none can wrap before the
/// spill; `bytes` is 64-bit (see [`Bucket`]).
/// The window's value of a bucket is wide + hot ([`Bank::bucket`](super::Bank::bucket));
/// exports carry only that sum, so the exported format is the same as with wide buckets.
/// `last_seen` outlives the window: at the edge the worker copies it into the next bank
/// (`KestrelTap`), exports leave it out.
///
/// ```text
///  0           8       16  18            24                40                56      64
///  | last_seen | bytes | p | green yellow red | lat[0..8] (u16) | iat[0..8] (u16) | pad |
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct HotBucket {
    /// Worker-clock ns of the bucket's last packet (0: never); not a window counter.
    pub last_seen: u64,
    pub bytes: u64,
    pub packets: u16,
    /// TrTCM colours: green, yellow, red.
    pub colour: [u16; 3],
    pub lat: [u16; BINS],
    pub iat: [u16; BINS],
}

const _: () = assert!(std::mem::size_of::<HotBucket>() == 64);

impl HotBucket {
    pub const ZERO: HotBucket = HotBucket {
        last_seen: 0,
        bytes: 0,
        packets: 0,
        colour: [0; 3],
        lat: [0; BINS],
        iat: [0; BINS],
    };
}

impl Default for HotBucket {
    fn default() -> Self {
        HotBucket::ZERO
    }
}

/// One enriched Count-Min bucket with window-wide counters: what hot buckets spill into,
/// and the store of the one-packet reference update ([`Sketcher::record`](super::Sketcher::record)).
///
/// Widths: at 100 Gbit/s with minimum-size Ethernet frames (84 bytes on the wire) a queue
/// dequeues at most 148.8 Mpps, so in the longest window ([`MAX_WINDOW_NS`], 10 s) every
/// per-packet counter stays below 1.49e9 < 2^32; bytes reach 1.25e11 > 2^32 and get 64 bits.
///
/// ```text
///  0       8       12      16      20      24                      56                    88
///  | bytes | pkts  | green | yellow| red   | lat[0..8] (u32 each)  | iat[0..8] (u32 each)  |
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Bucket {
    pub bytes: u64,
    pub packets: u32,
    /// TrTCM colours: green, yellow, red.
    pub colour: [u32; 3],
    pub lat: [u32; BINS],
    pub iat: [u32; BINS],
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 88);

impl Bucket {
    pub const ZERO: Bucket = Bucket {
        bytes: 0,
        packets: 0,
        colour: [0; 3],
        lat: [0; BINS],
        iat: [0; BINS],
    };

    /// Add hot bucket `h`'s counters (not its last-seen time).
    #[inline]
    pub fn add_hot(&mut self, h: &HotBucket) {
        self.bytes += h.bytes;
        self.packets += u32::from(h.packets);
        for (w, &x) in self.colour.iter_mut().zip(&h.colour) {
            *w += u32::from(x);
        }
        for (w, &x) in self.lat.iter_mut().zip(&h.lat) {
            *w += u32::from(x);
        }
        for (w, &x) in self.iat.iter_mut().zip(&h.iat) {
            *w += u32::from(x);
        }
    }
}

impl Default for Bucket {
    fn default() -> Self {
        Bucket::ZERO
    }
}

/// Why a layout is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("qids must be 1..={MAX_QIDS}, not {0}")]
    Qids(usize),
    #[error("rows (d) must be 1..={MAX_ROWS}, not {0}")]
    Rows(usize),
    #[error("width (w) must be a power of two in 2..=65536, not {0}")]
    Width(usize),
    #[error("rows x log2(width) = {0} bits: one 64-bit hash gives at most 64")]
    HashBits(u32),
    #[error("{got} seeds for {qids} QIDs: one seed per QID")]
    Seeds { got: usize, qids: usize },
    #[error("rows x log2(width) = {0} bits: the crc32 index hash gives 32")]
    CrcBits(u32),
    #[error("seed {0:#x} does not fit the crc32 index hash's 32-bit seed")]
    CrcSeed(u64),
}

/// The index hash of a layout: which function turns `(seed[qid], teid, qfi)` into the bits
/// the rows' columns are cut from (docs/kestrel.md "Hash").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexHash {
    /// `splitmix64(seed ^ (teid << 8 | qfi))`: 64 bits, the software default.
    #[default]
    Splitmix64,
    /// CRC-32 (IEEE 802.3: polynomial 0x04C11DB7 reflected, init and final XOR 0xFFFFFFFF,
    /// i.e. zlib's) over the 9 big-endian bytes `seed:u32 | teid:u32 | qfi:u8`: 32 bits.
    /// What Tofino's `Hash<bit<32>>` with that polynomial computes over the field list
    /// `{seed, teid, qfi}`, so the P4 twin's sketches index the same buckets.
    Crc32,
}

impl IndexHash {
    /// The name exports carry (`layout.hash`).
    pub const fn name(self) -> &'static str {
        match self {
            IndexHash::Splitmix64 => "splitmix64-xor-v1",
            IndexHash::Crc32 => "crc32-be-v1",
        }
    }

    /// The hash of that name.
    pub fn from_name(s: &str) -> Option<IndexHash> {
        [IndexHash::Splitmix64, IndexHash::Crc32]
            .into_iter()
            .find(|h| h.name() == s)
    }

    /// Hash bits available to the rows.
    pub const fn bits(self) -> u32 {
        match self {
            IndexHash::Splitmix64 => 64,
            IndexHash::Crc32 => 32,
        }
    }

    /// The key hash under `seed`.
    #[inline]
    pub fn hash(self, seed: u64, teid: u32, qfi: u8) -> u64 {
        match self {
            IndexHash::Splitmix64 => hash(seed, teid, qfi),
            IndexHash::Crc32 => u64::from(crc32_key(seed as u32, teid, qfi)),
        }
    }
}

/// The crc32 index hash (see [`IndexHash::Crc32`]).
#[inline]
pub fn crc32_key(seed: u32, teid: u32, qfi: u8) -> u32 {
    let s = seed.to_be_bytes();
    let t = teid.to_be_bytes();
    crc32fast::hash(&[s[0], s[1], s[2], s[3], t[0], t[1], t[2], t[3], qfi])
}

/// Shape of the sketches and their hash seeds: what an export carries so a reader (and the
/// P4 twin) computes the same bucket indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub qids: usize,
    pub rows: usize,
    pub width: usize,
    /// One hash seed per QID.
    pub seeds: Vec<u64>,
    /// The index hash ([`IndexHash::Splitmix64`] unless [`Layout::with_hash`] says).
    pub hash: IndexHash,
}

impl Layout {
    /// The seed's configuration (d = 3, w = 512, 8 QIDs) with [`default_seeds`].
    pub fn paper() -> Layout {
        Layout::new(8, 3, 512, default_seeds(8)).expect("valid")
    }

    pub fn new(
        qids: usize,
        rows: usize,
        width: usize,
        seeds: Vec<u64>,
    ) -> Result<Layout, LayoutError> {
        if qids == 0 || qids > MAX_QIDS {
            return Err(LayoutError::Qids(qids));
        }
        if rows == 0 || rows > MAX_ROWS {
            return Err(LayoutError::Rows(rows));
        }
        if !width.is_power_of_two() || !(2..=65536).contains(&width) {
            return Err(LayoutError::Width(width));
        }
        let bits = rows as u32 * width.trailing_zeros();
        if bits > 64 {
            return Err(LayoutError::HashBits(bits));
        }
        if seeds.len() != qids {
            return Err(LayoutError::Seeds {
                got: seeds.len(),
                qids,
            });
        }
        Ok(Layout {
            qids,
            rows,
            width,
            seeds,
            hash: IndexHash::Splitmix64,
        })
    }

    /// The same layout under index hash `h`, checked against what `h` gives (crc32: 32 bits
    /// for the rows, 32-bit seeds).
    pub fn with_hash(mut self, h: IndexHash) -> Result<Layout, LayoutError> {
        let bits = self.rows as u32 * self.index_bits();
        if bits > h.bits() {
            return Err(LayoutError::CrcBits(bits));
        }
        if h == IndexHash::Crc32 {
            if let Some(&s) = self.seeds.iter().find(|&&s| s > u64::from(u32::MAX)) {
                return Err(LayoutError::CrcSeed(s));
            }
        }
        self.hash = h;
        Ok(self)
    }

    /// Bits of the hash each row's index takes.
    pub fn index_bits(&self) -> u32 {
        self.width.trailing_zeros()
    }

    /// Buckets of one (direction, QID) sketch.
    pub fn sketch_len(&self) -> usize {
        self.rows * self.width
    }

    /// Buckets of a bank: both directions, every QID.
    pub fn bank_len(&self) -> usize {
        DIRS * self.qids * self.sketch_len()
    }

    /// Index of the first bucket of sketch (dir, qid) in a bank.
    pub fn sketch_base(&self, dir: usize, qid: usize) -> usize {
        (dir * self.qids + qid) * self.sketch_len()
    }

    /// The `rows` bucket columns of `(teid, qfi)` in QID `qid`'s sketch.
    #[inline]
    pub fn columns(&self, qid: usize, teid: u32, qfi: u8, out: &mut [usize; MAX_ROWS]) {
        split(
            self.hash.hash(self.seeds[qid], teid, qfi),
            self.rows,
            self.index_bits(),
            out,
        );
    }
}

/// Per-QID seeds when the configuration gives none: splitmix64 of the QID.
pub fn default_seeds(qids: usize) -> Vec<u64> {
    (0..qids as u64)
        .map(|q| mix(q ^ 0x6b65_7374_7265_6c00))
        .collect()
}

/// Per-QID seeds for the crc32 index hash when the configuration gives none: the top 32 bits
/// of [`default_seeds`].
pub fn default_crc_seeds(qids: usize) -> Vec<u64> {
    default_seeds(qids).into_iter().map(|s| s >> 32).collect()
}

/// The splitmix64 finaliser (Steele et al., "Fast splittable pseudorandom number
/// generators"): a bijection of u64 with full avalanche.
#[inline]
pub const fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The key hash: `mix(seed ^ (teid << 8 | qfi))` (docs/kestrel.md "Hash").
#[inline]
pub const fn hash(seed: u64, teid: u32, qfi: u8) -> u64 {
    mix(seed ^ ((teid as u64) << 8 | qfi as u64))
}

/// Row `i`'s column: bits `[i*bits, (i+1)*bits)` of the hash.
#[inline]
pub fn split(h: u64, rows: usize, bits: u32, out: &mut [usize; MAX_ROWS]) {
    let mask = (1u64 << bits) - 1;
    for (i, o) in out.iter_mut().enumerate().take(rows) {
        *o = ((h >> (i as u32 * bits)) & mask) as usize;
    }
}

/// The bin of `v` given ascending `edges`: the number of edges `<= v`.
#[inline]
pub fn bin(edges: &[u32; EDGES], v: u32) -> usize {
    edges.iter().map(|&e| usize::from(v >= e)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_bucket_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<HotBucket>(), 64);
        assert_eq!(std::mem::align_of::<HotBucket>(), 64);
        assert_eq!(std::mem::offset_of!(HotBucket, packets), 16);
        assert_eq!(std::mem::offset_of!(HotBucket, lat), 24);
        assert_eq!(std::mem::offset_of!(HotBucket, iat), 40);
        assert_eq!(std::mem::size_of::<Bucket>(), 88);
        assert_eq!(std::mem::offset_of!(Bucket, lat), 24);
        assert_eq!(std::mem::offset_of!(Bucket, iat), 56);
    }

    #[test]
    fn counter_widths_hold_a_window_at_100g() {
        let max_pps = 100e9 / (84.0 * 8.0);
        let per_window = max_pps * (MAX_WINDOW_NS as f64 / 1e9);
        assert!(per_window < u32::MAX as f64, "{per_window}");
        assert!(100e9 / 8.0 * (MAX_WINDOW_NS as f64 / 1e9) > u32::MAX as f64);
        // Hot counters spill before any can wrap: none exceeds `packets` < 2^16, and bytes
        // are 64-bit (65 535 packets of at most 2^32 bytes each fit).
        assert!((u64::from(SPILL_AT) * u64::from(u32::MAX)) < u64::MAX);
    }

    #[test]
    fn hash_vectors_and_split() {
        // Vectors for other implementations (the P4 twin, the docs).
        assert_eq!(mix(0), 0xe220_a839_7b1d_cdaf);
        let h = hash(0, 87, 2);
        let mut c = [0; MAX_ROWS];
        split(h, 3, 9, &mut c);
        for (i, &x) in c.iter().enumerate().take(3) {
            assert_eq!(x as u64, (h >> (9 * i)) & 511);
            assert!(x < 512);
        }
        assert_ne!(hash(0, 87, 2), hash(1, 87, 2), "the seed matters");
        assert_ne!(hash(0, 87, 2), hash(0, 87, 3), "the QFI matters");
    }

    #[test]
    fn crc32_index_hash_vectors() {
        // bf-p4c's own constant-folding tests (FoldConstantHashes, CRC32 and the custom
        // 0x04C11DB7 reflected polynomial): Hash<bit<32>> over 32w0xABCDEF01 = 2360908734,
        // over 32w0x01234567 = 4247457659. zlib's CRC-32 over the big-endian bytes agrees.
        assert_eq!(crc32fast::hash(&[0xab, 0xcd, 0xef, 0x01]), 2_360_908_734);
        assert_eq!(crc32fast::hash(&[0x01, 0x23, 0x45, 0x67]), 4_247_457_659);
        // One vector per row of the paper's layout (d = 3, w = 512) under QID 0's default
        // crc seed: the P4 twin (p4/include/kestrel.p4) must cut the same columns.
        let seeds = default_crc_seeds(8);
        assert_eq!(seeds[0], 0x1c81_e046);
        let l = Layout::new(8, 3, 512, seeds)
            .unwrap()
            .with_hash(IndexHash::Crc32)
            .unwrap();
        let h = crc32_key(0x1c81_e046, 0x0000_0011, 9);
        assert_eq!(h, 0xc3c8_f45d);
        let mut c = [0; MAX_ROWS];
        l.columns(0, 0x11, 9, &mut c);
        assert_eq!(&c[..3], &[0x05d, 0x07a, 0x0f2]);
        assert_eq!(c[0] as u32, h & 511);
        assert_eq!(c[1] as u32, (h >> 9) & 511);
        assert_eq!(c[2] as u32, (h >> 18) & 511);
        assert_eq!(IndexHash::from_name("crc32-be-v1"), Some(IndexHash::Crc32));
        assert_eq!(IndexHash::from_name("crc32"), None);
    }

    #[test]
    fn crc32_layouts_are_validated() {
        let l = Layout::new(8, 4, 512, default_seeds(8)).unwrap();
        assert_eq!(
            l.clone().with_hash(IndexHash::Crc32),
            Err(LayoutError::CrcBits(36))
        );
        let l = Layout::new(8, 3, 512, default_seeds(8)).unwrap();
        assert!(matches!(
            l.with_hash(IndexHash::Crc32),
            Err(LayoutError::CrcSeed(_))
        ));
    }

    #[test]
    fn bins_follow_edges() {
        let e = [10, 20, 30, 40, 50, 60, 70];
        assert_eq!(bin(&e, 0), 0);
        assert_eq!(bin(&e, 9), 0);
        assert_eq!(bin(&e, 10), 1);
        assert_eq!(bin(&e, 69), 6);
        assert_eq!(bin(&e, 70), 7);
        assert_eq!(bin(&e, u32::MAX), 7);
    }

    #[test]
    fn layouts_are_validated() {
        assert_eq!(
            Layout::new(9, 3, 512, default_seeds(9)),
            Err(LayoutError::Qids(9))
        );
        assert_eq!(
            Layout::new(8, 0, 512, default_seeds(8)),
            Err(LayoutError::Rows(0))
        );
        assert_eq!(
            Layout::new(8, 3, 500, default_seeds(8)),
            Err(LayoutError::Width(500))
        );
        assert_eq!(
            Layout::new(8, 5, 65536, default_seeds(8)),
            Err(LayoutError::HashBits(80))
        );
        assert_eq!(
            Layout::new(8, 3, 512, vec![1]),
            Err(LayoutError::Seeds { got: 1, qids: 8 })
        );
        let l = Layout::paper();
        assert_eq!(l.bank_len(), 2 * 8 * 3 * 512);
    }
}
