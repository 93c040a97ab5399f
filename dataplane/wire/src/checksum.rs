//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).

/// One's-complement sum of `data` folded into 32 bits, not yet complemented.
/// Odd lengths are padded with a zero byte, as RFC 1071 section 4.1 says.
pub fn sum(data: &[u8]) -> u32 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        // Big-endian 64-bit words add as four 16-bit big-endian words with end-around carry later.
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let (s, carry) = acc.overflowing_add(w);
        acc = s + carry as u64;
    }
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        let (s, carry) = acc.overflowing_add(u16::from_be_bytes([p[0], p[1]]) as u64);
        acc = s + carry as u64;
    }
    if let [last] = pairs.remainder() {
        let (s, carry) = acc.overflowing_add((*last as u64) << 8);
        acc = s + carry as u64;
    }
    // Fold 64 -> 32 bits with end-around carry.
    let hi = acc >> 32;
    let lo = acc & 0xffff_ffff;
    let mut s = hi + lo;
    s = (s >> 32) + (s & 0xffff_ffff);
    s as u32
}

/// Fold a 32-bit partial sum to 16 bits. Two end-around-carry steps always suffice: the
/// first leaves at most 0xffff + 0xffff = 0x1fffe, the second at most 0xfffe + 1 (no
/// loop, so no branch on the data).
#[inline]
pub fn fold(s: u32) -> u16 {
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// Add two partial sums.
pub fn combine(a: u32, b: u32) -> u32 {
    let (s, c) = a.overflowing_add(b);
    s + c as u32
}

/// The final checksum field value: complement of the folded sum.
pub fn finish(s: u32) -> u16 {
    !fold(s)
}

/// Checksum of `data` as it would be written into a header (complemented).
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(data))
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for a 16-bit field changing from `old` to `new`.
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    let s = (!hc as u32) + (!old as u32) + new as u32;
    !fold(s)
}

/// Partial sum of the IPv4 pseudo-header (RFC 768 / RFC 793).
pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u32 {
    let mut s = sum(&src);
    s = combine(s, sum(&dst));
    combine(s, proto as u32 + len as u32)
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 section 8.1).
pub fn pseudo_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, len: u32) -> u32 {
    let mut s = sum(&src);
    s = combine(s, sum(&dst));
    s = combine(s, (len >> 16) + (len & 0xffff));
    combine(s, next_header as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-step fold equals folding until no carry is left, for every kind of input.
    #[test]
    fn fold_equals_folding_to_a_fixed_point() {
        fn slow(mut s: u32) -> u16 {
            while s >> 16 != 0 {
                s = (s & 0xffff) + (s >> 16);
            }
            s as u16
        }
        let edges = [
            0,
            1,
            0xffff,
            0x1_0000,
            0x1_fffe,
            0x1_ffff,
            0xffff_0000,
            u32::MAX,
        ];
        let mut x = 0x2545_f491u32;
        let walk = (0..200_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        });
        for s in edges.into_iter().chain(walk) {
            assert_eq!(fold(s), slow(s), "{s:#x}");
        }
    }

    /// RFC 1071 section 3 example: 0001 f203 f4f5 f6f7 sums to ddf2.
    #[test]
    fn rfc1071_example() {
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&d)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(sum(&[0xab])), 0xab00);
        assert_eq!(fold(sum(&[0x01, 0x02, 0x03])), 0x0102 + 0x0300);
    }

    /// Incremental update agrees with a full recomputation (RFC 1624 section 4 case).
    #[test]
    fn incremental_matches_full() {
        let mut hdr = [
            0x45u8, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = checksum(&hdr);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        let old = u16::from_be_bytes([hdr[8], hdr[9]]);
        hdr[8] -= 1; // TTL decrement
        let new = u16::from_be_bytes([hdr[8], hdr[9]]);
        let inc = update16(c, old, new);
        hdr[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(inc, checksum(&hdr));
    }

    #[test]
    fn long_buffer_matches_naive() {
        let data: [u8; 301] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        let mut naive: u32 = 0;
        for p in data.chunks(2) {
            let w = if p.len() == 2 {
                u16::from_be_bytes([p[0], p[1]])
            } else {
                (p[0] as u16) << 8
            };
            naive += w as u32;
        }
        assert_eq!(fold(sum(&data)), fold(naive));
    }
}
