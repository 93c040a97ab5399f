//! The region's layout descriptor: what the translator publishes in the first page of the
//! shared-memory region and what the collector validates before it reads anything.
//!
//! ```text
//!  offset  size  field (little-endian)
//!   0       8    magic "PGRNDTA\0"
//!   8       4    version (1)
//!  12       4    header length (4096: the data sections start on the next page)
//!  16       8    total length of the region in bytes (= the file's length)
//!  24       8    Key-Write section offset      32  8  slots S      40  4  data words K
//!  44       4    Key-Write checksum bits b     48  4  max redundancy
//!  52       4    Key-Increment max redundancy  56  8  section offset  64  8  counters
//!  72       8    Postcarding offset            80  8  chunks C     88  4  hops B
//!  92       4    Postcarding mode (0 hashed, 1 raw)  96  4  redundancy  100  4  value bits
//! 104       8    Append heads offset          112  4  lists       116  4  batch size
//! 120       8    Append list length (entries) 128  8  Append data offset
//! 136       4    CRC-32 of bytes 0..136
//! ```
//!
//! A section with zero slots (chunks, lists) is disabled. Key-Write slots are
//! `{checksum u32, data u32}` as one 64-bit word when K = 1, else `{seq u32, checksum u32,
//! data u32 x K}`; Key-Increment counters are u64; Postcarding chunks B u32 words; Append
//! heads u64 (entries ever written) and lists `length` u32 entries each.

use crate::Error;

pub const MAGIC: [u8; 8] = *b"PGRNDTA\0";
pub const VERSION: u32 = 1;
/// The header page; data sections start after it.
pub const HEADER_LEN: u64 = 4096;
const CRC_AT: usize = 136;

/// Postcarding storage mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PostcardMode {
    /// `checksum(x, i) xor g(v)` per hop, blank-filled, validity-checked on query (seed
    /// section 4, "Postcarding").
    Hashed,
    /// The prototype's raw values, unchecked.
    Raw,
}

/// Sizes of each primitive's structure; offsets follow from them ([`Layout::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sizes {
    pub kw_slots: u64,
    /// Data words per Key-Write slot: 1, 3 or 7.
    pub kw_words: u32,
    /// Checksum width b (1..=32); below 32 only for error-rate experiments.
    pub kw_checksum_bits: u32,
    pub kw_max_redundancy: u32,
    pub ki_slots: u64,
    pub ki_max_redundancy: u32,
    pub pc_chunks: u64,
    pub pc_hops: u32,
    pub pc_mode: PostcardMode,
    pub pc_redundancy: u32,
    /// Postcard values are below `2^pc_value_bits` (the set V of the seed's analysis).
    pub pc_value_bits: u32,
    pub ap_lists: u32,
    pub ap_batch: u32,
    pub ap_list_len: u64,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes {
            kw_slots: 1_048_573,
            kw_words: 1,
            kw_checksum_bits: 32,
            kw_max_redundancy: 4,
            ki_slots: 262_139,
            ki_max_redundancy: 4,
            pc_chunks: 65_521,
            pc_hops: 5,
            pc_mode: PostcardMode::Hashed,
            pc_redundancy: 1,
            pc_value_bits: 24,
            ap_lists: 8,
            ap_batch: 16,
            ap_list_len: 1 << 16,
        }
    }
}

/// Sizes plus the computed section offsets and total length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub sizes: Sizes,
    pub kw_offset: u64,
    pub ki_offset: u64,
    pub pc_offset: u64,
    pub ap_heads_offset: u64,
    pub ap_data_offset: u64,
    pub total_len: u64,
}

/// Largest region we lay out (1 TiB): bounds every product below so nothing overflows.
const MAX_TOTAL: u64 = 1 << 40;

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl Sizes {
    /// Bytes of one Key-Write slot.
    pub const fn kw_slot_bytes(&self) -> u64 {
        if self.kw_words == 1 {
            8
        } else {
            4 * (2 + self.kw_words as u64)
        }
    }

    /// Check every size; errors name the field.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |f: &'static str, why: String| Err(Error::Layout { field: f, why });
        if !matches!(self.kw_words, 1 | 3 | 7) {
            return bad(
                "kw_words",
                format!("must be 1, 3 or 7, got {}", self.kw_words),
            );
        }
        if !(1..=32).contains(&self.kw_checksum_bits) {
            return bad(
                "kw_checksum_bits",
                format!("must be 1..=32, got {}", self.kw_checksum_bits),
            );
        }
        for (f, v) in [
            ("kw_max_redundancy", self.kw_max_redundancy),
            ("ki_max_redundancy", self.ki_max_redundancy),
            ("pc_redundancy", self.pc_redundancy),
        ] {
            if !(1..=16).contains(&v) {
                return bad(f, format!("must be 1..=16, got {v}"));
            }
        }
        if !(1..=8).contains(&self.pc_hops) {
            return bad("pc_hops", format!("must be 1..=8, got {}", self.pc_hops));
        }
        if !(1..=31).contains(&self.pc_value_bits) {
            return bad(
                "pc_value_bits",
                format!("must be 1..=31, got {}", self.pc_value_bits),
            );
        }
        if !(1..=64).contains(&self.ap_batch) {
            return bad("ap_batch", format!("must be 1..=64, got {}", self.ap_batch));
        }
        if self.ap_lists > 0 && self.ap_list_len < self.ap_batch as u64 {
            return bad(
                "ap_list_len",
                format!(
                    "must hold at least one batch ({}), got {}",
                    self.ap_batch, self.ap_list_len
                ),
            );
        }
        for (f, v) in [
            ("kw_slots", self.kw_slots),
            ("ki_slots", self.ki_slots),
            ("pc_chunks", self.pc_chunks),
            ("ap_list_len", self.ap_list_len),
        ] {
            if v > MAX_TOTAL / 64 {
                return bad(f, format!("{v} is too large"));
            }
        }
        // CRC-32 is linear: CRC32(k || n) = CRC32(k || 0) xor c_n for a constant c_n. With an
        // even count the low bits of copy n are copy 0's xor a constant, so two keys that
        // share one slot share all of them and redundancy buys nothing (measured: N = 2
        // behaves like N = 1 at twice the load with 2^16 slots). Odd counts break the tie.
        for (f, count, n) in [
            ("kw_slots", self.kw_slots, self.kw_max_redundancy),
            ("ki_slots", self.ki_slots, self.ki_max_redundancy),
            ("pc_chunks", self.pc_chunks, self.pc_redundancy),
        ] {
            if n > 1 && count > 0 && count % 2 == 0 {
                return bad(
                    f,
                    format!(
                        "{count} is even; with redundancy above 1 the count must be odd (a prime \
                         is best): CRC32(key || n) mod an even count puts a key's copies at \
                         correlated slots"
                    ),
                );
            }
        }
        if self.ap_lists > 1 << 20 {
            return bad(
                "ap_lists",
                format!("must be at most 2^20, got {}", self.ap_lists),
            );
        }
        Ok(())
    }
}

impl Layout {
    /// Lay the sections out after the header page, each 64-byte aligned.
    pub fn new(sizes: Sizes) -> Result<Layout, Error> {
        sizes.validate()?;
        let kw_offset = HEADER_LEN;
        let ki_offset = align(kw_offset + sizes.kw_slots * sizes.kw_slot_bytes(), 64);
        let pc_offset = align(ki_offset + sizes.ki_slots * 8, 64);
        let ap_heads_offset = align(pc_offset + sizes.pc_chunks * 4 * sizes.pc_hops as u64, 64);
        let ap_data_offset = align(ap_heads_offset + 8 * sizes.ap_lists as u64, 64);
        let total_len = align(
            ap_data_offset + 4 * sizes.ap_list_len * sizes.ap_lists as u64,
            4096,
        );
        if total_len > MAX_TOTAL {
            return Err(Error::Layout {
                field: "total",
                why: format!("region of {total_len} bytes exceeds 1 TiB"),
            });
        }
        Ok(Layout {
            sizes,
            kw_offset,
            ki_offset,
            pc_offset,
            ap_heads_offset,
            ap_data_offset,
            total_len,
        })
    }

    /// The header bytes ([`HEADER_LEN`] long, zero after the CRC).
    pub fn encode(&self) -> Vec<u8> {
        let s = &self.sizes;
        let mut h = vec![0u8; HEADER_LEN as usize];
        let mut w = Writer(&mut h, 0);
        w.bytes(&MAGIC);
        w.u32(VERSION);
        w.u32(HEADER_LEN as u32);
        w.u64(self.total_len);
        w.u64(self.kw_offset);
        w.u64(s.kw_slots);
        w.u32(s.kw_words);
        w.u32(s.kw_checksum_bits);
        w.u32(s.kw_max_redundancy);
        w.u32(s.ki_max_redundancy);
        w.u64(self.ki_offset);
        w.u64(s.ki_slots);
        w.u64(self.pc_offset);
        w.u64(s.pc_chunks);
        w.u32(s.pc_hops);
        w.u32(match s.pc_mode {
            PostcardMode::Hashed => 0,
            PostcardMode::Raw => 1,
        });
        w.u32(s.pc_redundancy);
        w.u32(s.pc_value_bits);
        w.u64(self.ap_heads_offset);
        w.u32(s.ap_lists);
        w.u32(s.ap_batch);
        w.u64(s.ap_list_len);
        w.u64(self.ap_data_offset);
        debug_assert_eq!(w.1, CRC_AT);
        let crc = crc32fast::hash(&h[..CRC_AT]);
        h[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Decode and validate a header against the region's actual length: magic, version,
    /// CRC, sizes, and offsets equal to what [`Layout::new`] computes for those sizes (so
    /// every section lies inside the region). Errors say which check failed.
    pub fn decode(h: &[u8], region_len: u64) -> Result<Layout, Error> {
        let corrupt = |why: String| Err(Error::Corrupt(why));
        if h.len() < HEADER_LEN as usize {
            return corrupt(format!(
                "region of {} bytes is shorter than its header",
                h.len()
            ));
        }
        if h[..8] != MAGIC {
            return corrupt(format!("bad magic {:02x?} (not a DTA region)", &h[..8]));
        }
        let mut r = Reader(h, 8);
        let version = r.u32();
        if version != VERSION {
            return Err(Error::Version(version));
        }
        let crc = u32::from_le_bytes(h[CRC_AT..CRC_AT + 4].try_into().unwrap_or_default());
        if crc != crc32fast::hash(&h[..CRC_AT]) {
            return corrupt("header checksum mismatch".into());
        }
        if r.u32() as u64 != HEADER_LEN {
            return corrupt("header length is not 4096".into());
        }
        let total_len = r.u64();
        let kw_offset = r.u64();
        let kw_slots = r.u64();
        let kw_words = r.u32();
        let kw_checksum_bits = r.u32();
        let kw_max_redundancy = r.u32();
        let ki_max_redundancy = r.u32();
        let ki_offset = r.u64();
        let ki_slots = r.u64();
        let pc_offset = r.u64();
        let pc_chunks = r.u64();
        let pc_hops = r.u32();
        let pc_mode = match r.u32() {
            0 => PostcardMode::Hashed,
            1 => PostcardMode::Raw,
            m => return corrupt(format!("unknown postcarding mode {m}")),
        };
        let pc_redundancy = r.u32();
        let pc_value_bits = r.u32();
        let ap_heads_offset = r.u64();
        let ap_lists = r.u32();
        let ap_batch = r.u32();
        let ap_list_len = r.u64();
        let ap_data_offset = r.u64();
        let sizes = Sizes {
            kw_slots,
            kw_words,
            kw_checksum_bits,
            kw_max_redundancy,
            ki_slots,
            ki_max_redundancy,
            pc_chunks,
            pc_hops,
            pc_mode,
            pc_redundancy,
            pc_value_bits,
            ap_lists,
            ap_batch,
            ap_list_len,
        };
        let want = Layout::new(sizes).map_err(|e| Error::Corrupt(format!("header sizes: {e}")))?;
        let got = Layout {
            sizes,
            kw_offset,
            ki_offset,
            pc_offset,
            ap_heads_offset,
            ap_data_offset,
            total_len,
        };
        if got != want {
            return corrupt(format!(
                "section offsets do not match the sizes (header says {got:?}, sizes give {want:?})"
            ));
        }
        if total_len != region_len {
            return Err(Error::Size {
                header: total_len,
                actual: region_len,
            });
        }
        Ok(want)
    }
}

struct Writer<'a>(&'a mut [u8], usize);

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) {
        self.0[self.1..self.1 + b.len()].copy_from_slice(b);
        self.1 += b.len();
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

/// Reads at a cursor; the caller checked that the header is [`HEADER_LEN`] long.
struct Reader<'a>(&'a [u8], usize);

impl Reader<'_> {
    fn u32(&mut self) -> u32 {
        let v = u32::from_le_bytes(self.0[self.1..self.1 + 4].try_into().unwrap_or_default());
        self.1 += 4;
        v
    }
    fn u64(&mut self) -> u64 {
        let v = u64::from_le_bytes(self.0[self.1..self.1 + 8].try_into().unwrap_or_default());
        self.1 += 8;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_corruptions() {
        let l = Layout::new(Sizes::default()).unwrap();
        let h = l.encode();
        assert_eq!(Layout::decode(&h, l.total_len).unwrap(), l);
        assert!(matches!(
            Layout::decode(&h, l.total_len + 4096),
            Err(Error::Size { .. })
        ));
        assert!(matches!(
            Layout::decode(&h[..100], l.total_len),
            Err(Error::Corrupt(_))
        ));
        let mut bad = h.clone();
        bad[0] = b'X';
        assert!(matches!(
            Layout::decode(&bad, l.total_len),
            Err(Error::Corrupt(_))
        ));
        let mut v2 = h.clone();
        v2[8] = 2;
        assert!(matches!(
            Layout::decode(&v2, l.total_len),
            Err(Error::Version(2))
        ));
        // Every single-byte flip in the described part is caught (by the CRC or a check).
        for i in 12..CRC_AT + 4 {
            let mut c = h.clone();
            c[i] ^= 0x10;
            assert!(
                Layout::decode(&c, l.total_len).is_err(),
                "flip at {i} accepted"
            );
        }
    }

    #[test]
    fn bad_sizes_name_the_field() {
        let s = Sizes {
            kw_words: 2,
            ..Sizes::default()
        };
        let e = Layout::new(s).unwrap_err().to_string();
        assert!(e.contains("kw_words"), "{e}");
        let s = Sizes {
            pc_hops: 0,
            ..Sizes::default()
        };
        assert!(Layout::new(s).unwrap_err().to_string().contains("pc_hops"));
    }
}
