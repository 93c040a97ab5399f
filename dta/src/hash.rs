//! Addresses and checksums (seed appendix A.1, Algorithms 1, 2, 5, 6; section 4
//! "Postcarding").
//!
//! - Key-Write / Key-Increment slot `n` of key `k`: `CRC32(k as u32 LE || n as u8) mod S`
//!   (`h_0(n, K)`); the Key-Write checksum is `CRC32(k LE)` (`h_1(K)`), cut to b bits.
//! - Postcarding chunk `j` of key `x`: `CRC32(x LE || j) mod C`; hop `i`'s checksum
//!   `checksum(x, i) = CRC32(x LE || 0x80 | i)`; the value hash `g` is the MurmurHash3
//!   32-bit finaliser, a bijection, so the collector decodes `g^-1` in constant time instead
//!   of the seed's lookup table; `v` is valid when below `2^value_bits`, and the blank
//!   marker is [`BLANK`] (outside every V).
//!
//! CRC-32 is the IEEE polynomial (zlib's). The inputs are 4 or 5 bytes, so it is
//! table-driven here rather than `crc32fast`'s general path: the CRC register after the 4
//! key bytes ([`KeyCrc`]) is four independent lookups in the slice-by-4 tables (Kounavis and
//! Berry, "A Systematic Approach to Building High Performance Software-Based CRC
//! Generators", ISCC 2005), and `CRC32(key LE || 0)` ([`crc_key0`]) is four more in the
//! slice-by-5 tables, so neither is a chain of dependent byte steps; slot `n` is then slot
//! 0's CRC xor a table entry ([`KeyCrc::crc_n_xor`]). Tests pin it to `crc32fast`.

/// The blank value ⊔: "no postcard for this hop".
pub const BLANK: u32 = u32::MAX;

const fn table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE: [u32; 256] = table();

/// `SLICE[k][i]`: the CRC register's change from byte `i` followed by `k` zero bytes
/// (`SLICE[0]` is [`TABLE`]; `SLICE[k][i] = step(SLICE[k-1][i], 0)`).
const fn slices() -> [[u32; 256]; 5] {
    let mut t = [[0u32; 256]; 5];
    t[0] = table();
    let mut k = 1;
    while k < 5 {
        let mut i = 0;
        while i < 256 {
            let c = t[k - 1][i];
            t[k][i] = t[0][(c & 0xff) as usize] ^ (c >> 8);
            i += 1;
        }
        k += 1;
    }
    t
}

static SLICE: [[u32; 256]; 5] = slices();

#[inline(always)]
fn step(c: u32, b: u8) -> u32 {
    TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8)
}

/// The register after the 4 bytes of `x` (the initial register xor the key, LE) followed by
/// `z` zero bytes (0 or 1): four independent lookups instead of four dependent steps.
#[inline(always)]
fn slice4(x: u32, z: usize) -> u32 {
    let b = x.to_le_bytes();
    SLICE[z + 3][b[0] as usize]
        ^ SLICE[z + 2][b[1] as usize]
        ^ SLICE[z + 1][b[2] as usize]
        ^ SLICE[z][b[3] as usize]
}

/// `CRC32(key LE || 0)`, slot 0's CRC, by the slice-by-5 tables (the fifth byte is zero, so
/// its lookup is `TABLE[0] = 0`): equal to `KeyCrc::new(key).crc_n(0)`.
#[inline(always)]
pub fn crc_key0(key: u32) -> u32 {
    !slice4(!key, 1)
}

/// The CRC-32 register after a key's 4 little-endian bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyCrc(u32);

impl KeyCrc {
    #[inline(always)]
    pub fn new(key: u32) -> KeyCrc {
        KeyCrc(slice4(!key, 0))
    }

    /// `CRC32(key LE)`.
    #[inline(always)]
    pub fn crc(self) -> u32 {
        !self.0
    }

    /// `CRC32(key LE || n)`.
    #[inline(always)]
    pub fn crc_n(self, n: u8) -> u32 {
        !step(self.0, n)
    }

    /// `CRC32(key LE || (m xor n))` from `c = CRC32(key LE || m)`: the byte step is linear
    /// (the table is, `TABLE[a ^ b] = TABLE[a] ^ TABLE[b]`), so changing the last byte by `n`
    /// changes the CRC by `TABLE[n]`.
    #[inline(always)]
    pub fn crc_n_xor(c: u32, n: u8) -> u32 {
        c ^ TABLE[n as usize]
    }

    /// Slot `n` among `slots` (> 0).
    #[inline]
    pub fn slot(self, n: u8, slots: u64) -> u64 {
        self.crc_n(n) as u64 % slots
    }
}

/// `x mod d` for 32-bit `x` by a multiply instead of a division (Lemire, Kaser, Kurz,
/// "Faster Remainder by Direct Computation", 2019: `fastmod_u32`), exact for every 32-bit
/// `x` and every divisor; a divisor of 2^32 or more leaves `x` as it is. No branch: such a
/// divisor is kept as 2^32, whose multiplier 2^32 makes the formula give `x` itself
/// (`((x << 32) * 2^32) >> 64 = x`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastMod {
    d: u64,
    m: u64,
}

impl FastMod {
    /// The divisor `d` (0 only for a disabled section: then every result is 0).
    pub const fn new(d: u64) -> FastMod {
        let d = if d > 1 << 32 { 1 << 32 } else { d };
        let m = match u64::MAX.checked_div(d) {
            Some(q) => q.wrapping_add(1),
            None => 0,
        };
        FastMod { d, m }
    }

    #[inline(always)]
    pub fn of(self, x: u32) -> u64 {
        let low = self.m.wrapping_mul(x as u64);
        ((low as u128 * self.d as u128) >> 64) as u64
    }
}

/// `CRC32(key LE || n)`.
#[inline]
pub fn crc_kn(key: u32, n: u8) -> u32 {
    KeyCrc::new(key).crc_n(n)
}

/// Slot `n` of `key` among `slots` (> 0).
#[inline]
pub fn slot(key: u32, n: u8, slots: u64) -> u64 {
    crc_kn(key, n) as u64 % slots
}

/// The Key-Write checksum of `key`, its low `bits` bits.
#[inline]
pub fn kw_checksum(key: u32, bits: u32) -> u32 {
    KeyCrc::new(key).crc() & mask(bits)
}

#[inline]
pub const fn mask(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    }
}

/// Hop `hop`'s checksum for postcard key `key`.
#[inline]
pub fn hop_checksum(key: u32, hop: u8) -> u32 {
    crc_kn(key, 0x80 | hop)
}

/// `g`: MurmurHash3's fmix32, a bijection on u32.
#[inline]
pub const fn g(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// `g^-1`.
#[inline]
pub const fn g_inv(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x7ed1_b41d); // inverse of 0xc2b2ae35 mod 2^32
    h ^= (h >> 13) ^ (h >> 26);
    h = h.wrapping_mul(0xa5cb_9243); // inverse of 0x85ebca6b mod 2^32
    h ^= h >> 16;
    h
}

/// The word stored for hop `hop`'s value `v` of key `key` (hashed mode).
#[inline]
pub fn postcard_word(key: u32, hop: u8, v: u32) -> u32 {
    hop_checksum(key, hop) ^ g(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_inverts() {
        let mut x = 0x1234_5678u32;
        for _ in 0..100_000 {
            assert_eq!(g_inv(g(x)), x);
            x = x.wrapping_mul(0x9e37_79b9).wrapping_add(7);
        }
        assert_eq!(g_inv(g(BLANK)), BLANK);
    }

    #[test]
    fn table_crc_is_crc32fast() {
        let mut x = 1u32;
        for _ in 0..100_000 {
            let k = KeyCrc::new(x);
            assert_eq!(k.crc(), crc32fast::hash(&x.to_le_bytes()));
            let b = x.to_le_bytes();
            for n in [0u8, 1, 3, 0x80, 0xff] {
                assert_eq!(k.crc_n(n), crc32fast::hash(&[b[0], b[1], b[2], b[3], n]));
            }
            x = x.wrapping_mul(0x9e37_79b9).wrapping_add(11);
        }
    }

    /// The slice-by-4 register and the slice-by-5 slot-0 CRC are the byte-wise steps'.
    #[test]
    fn sliced_crc_is_the_byte_steps() {
        let bytewise = |key: u32| {
            let mut c = !0u32;
            for b in key.to_le_bytes() {
                c = step(c, b);
            }
            c
        };
        let mut x = 9u32;
        for _ in 0..200_000 {
            assert_eq!(KeyCrc::new(x).0, bytewise(x));
            assert_eq!(crc_key0(x), !step(bytewise(x), 0));
            assert_eq!(crc_key0(x), KeyCrc::new(x).crc_n(0));
            x = x.wrapping_mul(0x9e37_79b9).wrapping_add(17);
        }
        for x in [0, 1, u32::MAX, 0x8000_0000, 0xff, 0xff00] {
            assert_eq!(KeyCrc::new(x).0, bytewise(x));
            assert_eq!(
                crc_key0(x),
                crc32fast::hash(&[x.to_le_bytes().as_slice(), &[0]].concat())
            );
        }
    }

    #[test]
    fn last_byte_changes_the_crc_by_the_table() {
        let mut x = 5u32;
        for _ in 0..1_000 {
            let k = KeyCrc::new(x);
            for m in [0u8, 0x80, 0xff] {
                for n in 0..=255u8 {
                    assert_eq!(KeyCrc::crc_n_xor(k.crc_n(m), n), k.crc_n(m ^ n));
                }
            }
            x = x.wrapping_mul(0x9e37_79b9).wrapping_add(3);
        }
    }

    #[test]
    fn fast_mod_is_the_remainder() {
        let mut x = 7u32;
        for d in [
            1u64,
            2,
            3,
            7,
            4093,
            65521,
            262_139,
            1_048_573,
            u32::MAX as u64,
        ] {
            let f = FastMod::new(d);
            for probe in [
                0,
                1,
                u32::MAX,
                u32::MAX - 1,
                d as u32,
                (d as u32).wrapping_sub(1),
            ] {
                assert_eq!(f.of(probe), probe as u64 % d, "{probe} mod {d}");
            }
            for _ in 0..20_000 {
                assert_eq!(f.of(x), x as u64 % d, "{x} mod {d}");
                x = x.wrapping_mul(0x9e37_79b9).wrapping_add(13);
            }
        }
        assert_eq!(FastMod::new(1 << 33).of(u32::MAX), u32::MAX as u64);
    }

    /// Divisors of 2^32 and above (kept as 2^32, no branch) leave every x as it is; 0 gives 0.
    #[test]
    fn fast_mod_large_divisors() {
        let mut x = 3u32;
        for _ in 0..20_000 {
            for d in [1u64 << 32, (1 << 32) + 1, 1 << 33, u64::MAX] {
                assert_eq!(FastMod::new(d).of(x), x as u64, "{x} mod {d}");
            }
            assert_eq!(FastMod::new(0).of(x), 0);
            x = x.wrapping_mul(0x9e37_79b9).wrapping_add(29);
        }
        for d in [1u64 << 32, 1 << 40] {
            for x in [0, 1, u32::MAX] {
                assert_eq!(FastMod::new(d).of(x), x as u64);
            }
        }
    }

    #[test]
    fn crc_is_zlib() {
        // zlib.crc32(b"123456789") == 0xcbf43926, the CRC-32 check value.
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
        // zlib.crc32((1).to_bytes(4, "little") + bytes([0])) == 0x...; checked against
        // Python in the Scapy oracle test; here the little-endian order is pinned.
        assert_eq!(crc_kn(1, 0), crc32fast::hash(&[1, 0, 0, 0, 0]));
    }
}
