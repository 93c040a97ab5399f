//! The classifier's fast path: the frame shapes a UPF forwards nearly all the time, read
//! with fixed offsets and no per-field error paths. Untagged Ethernet; IPv4 without options
//! or fragmentation (outer header checksum verified) or IPv6 without extension headers;
//! TCP, UDP, ICMP (over IPv4) or ICMPv6 (over IPv6); and for UDP to port 2152 a G-PDU whose
//! GTP-U header has no optional fields or only the E flag with one PDU Session Container
//! (UL, or DL without optional fields: TS 38.415 section 5.5.2), carrying such an inner
//! packet.
//!
//! It answers `false` for anything else, and the general parser (`super::classify_general`)
//! takes the frame: the fast path never decides an error or an unusual case, so its result,
//! when it gives one, is the general parser's (`tests::fast_path_agrees_with_general`
//! checks this on mutated frames).

use super::{flags, flow_hash, PacketMeta, FIRST_FRAGMENT, HAS_QFI};
use peregrine_wire::ethernet::ethertype;
use peregrine_wire::gtpu;
use peregrine_wire::ipv4::ip_protocol;

/// One IP header's facts as the fast path read them.
struct Ip {
    v6: bool,
    src: u128,
    dst: u128,
    proto: u8,
    l3: usize,
    l4: usize,
    /// Ports, for TCP / UDP.
    ports: (u16, u16),
}

#[inline(always)]
fn be16(d: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([d[i], d[i + 1]])
}

#[inline(always)]
fn be32(d: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]])
}

#[inline(always)]
fn be128(d: &[u8], i: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&d[i..i + 16]);
    u128::from_be_bytes(a)
}

/// Whether the 20-byte IPv4 header `h` has a correct checksum (RFC 1071: the one's
/// complement sum of its 16-bit words is 0xffff). 32-bit words folded to 16 bits give the
/// same one's complement sum as 16-bit words.
#[inline(always)]
fn ipv4_checksum_ok(h: &[u8; 20]) -> bool {
    let mut s = 0u64;
    for i in (0..20).step_by(4) {
        s += u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    }
    sum_is_ones(s)
}

/// Whether a one's complement sum of 32-bit words (at most 2^32 of them, so it fits in 64
/// bits) folds to 0xffff: a correct RFC 1071 checksum over the words summed. Folding
/// (RFC 1071 section 2 (B)) keeps the sum's value modulo 0xffff (2^16 = 1 modulo 0xffff)
/// and takes a non-zero sum to 1..=0xffff, so the folded sum is 0xffff exactly when the sum
/// is a non-zero multiple of 0xffff: `s != 0 && s % 0xffff == 0`, here with one multiply
/// and one compare (Granlund and Montgomery, "Division by Invariant Integers using
/// Multiplication", PLDI 1994, section 9; Lemire, Kaser and Kurz 2019): for odd d, `s` is a
/// multiple of d exactly when `s * d^-1 mod 2^64` (then the quotient) is at most
/// `(2^64 - 1) / d`; taking 1 off makes `s = 0` (quotient 0) wrap above the bound, so the
/// one unsigned compare also refuses it. Shared by the classifier, the UPF's pass 1 and the
/// DTA translator.
#[inline(always)]
pub fn sum_is_ones(s: u64) -> bool {
    s.wrapping_mul(INV_FFFF).wrapping_sub(1) < u64::MAX / 0xffff
}

/// The inverse of 0xffff modulo 2^64 (0xffff is odd), by Newton's iteration
/// `x <- x (2 - d x)`, each step doubling the bits that are right.
const INV_FFFF: u64 = {
    let mut x: u64 = 0xffff;
    let mut i = 0;
    while i < 6 {
        x = x.wrapping_mul(2u64.wrapping_sub(0xffff_u64.wrapping_mul(x)));
        i += 1;
    }
    x
};

/// The IP packet at `l3` of `d[..end]`, if it has the fast shape; `outer` verifies an IPv4
/// checksum. Returns the packet's facts and its end. Headers are read through fixed-size
/// views (one bounds check per header, not per field).
#[inline(always)]
fn ip(d: &[u8], l3: usize, end: usize, v6: bool, outer: bool) -> Option<(Ip, usize)> {
    let d = d.get(..end)?;
    let (src, dst, proto, l4, pend) = if v6 {
        let h: &[u8; 40] = d.get(l3..)?.first_chunk()?;
        if h[0] >> 4 != 6 {
            return None;
        }
        let pend = l3 + 40 + usize::from(be16(h, 4));
        let nh = h[6];
        if pend > end
            || !matches!(
                nh,
                ip_protocol::TCP | ip_protocol::UDP | ip_protocol::IPV6_ICMP
            )
        {
            return None;
        }
        (be128(h, 8), be128(h, 24), nh, l3 + 40, pend)
    } else {
        let h: &[u8; 20] = d.get(l3..)?.first_chunk()?;
        if h[0] != 0x45 {
            return None;
        }
        let pend = l3 + usize::from(be16(h, 2));
        // Any fragment (MF or an offset) goes to the general path.
        if pend < l3 + 20 || pend > end || be16(h, 6) & 0x3fff != 0 {
            return None;
        }
        if outer && !ipv4_checksum_ok(h) {
            return None;
        }
        let proto = h[9];
        if !matches!(
            proto,
            ip_protocol::TCP | ip_protocol::UDP | ip_protocol::ICMP
        ) {
            return None;
        }
        (
            u128::from(be32(h, 12)),
            u128::from(be32(h, 16)),
            proto,
            l3 + 20,
            pend,
        )
    };
    let l4d = &d[l4..pend];
    let ports = match proto {
        ip_protocol::UDP => {
            let u: &[u8; 8] = l4d.first_chunk()?;
            let ulen = usize::from(be16(u, 4));
            if ulen < 8 || ulen > l4d.len() {
                return None;
            }
            (be16(u, 0), be16(u, 2))
        }
        ip_protocol::TCP => {
            let t: &[u8; 20] = l4d.first_chunk()?;
            let hl = usize::from(t[12] >> 4) * 4;
            if hl < 20 || hl > l4d.len() {
                return None;
            }
            (be16(t, 0), be16(t, 2))
        }
        // ICMP / ICMPv6: type, code, checksum.
        _ => {
            if l4d.len() < 4 {
                return None;
            }
            (0, 0)
        }
    };
    Some((
        Ip {
            v6,
            src,
            dst,
            proto,
            l3,
            l4,
            ports,
        },
        pend,
    ))
}

/// Classify `d` into `m` if it has a fast shape (see the module docs); `false` leaves `m`
/// untouched for the general parser.
#[inline]
pub(super) fn classify_fast(d: &[u8], m: &mut PacketMeta) -> bool {
    if d.len() > usize::from(u16::MAX) {
        return false;
    }
    let Some(eth) = d.first_chunk::<{ 14 + 20 }>() else {
        return false;
    };
    let v6 = match be16(eth, 12) {
        ethertype::IPV4 => false,
        ethertype::IPV6 => true,
        _ => return false,
    };
    let Some((outer, _)) = ip(d, 14, d.len(), v6, true) else {
        return false;
    };
    let mut out = PacketMeta {
        l3_off: 14,
        l4_off: outer.l4 as u16,
        flags: flags::CLASSIFIED | flags::L4 | if v6 { flags::OUTER_V6 } else { 0 },
        ..PacketMeta::EMPTY
    };
    let mut flow = outer;
    if flow.proto == ip_protocol::UDP && flow.ports.1 == gtpu::PORT {
        let l4 = flow.l4;
        let g = l4 + 8;
        // `ip` checked the UDP header and its length against the IP packet's.
        let uend = l4 + usize::from(be16(d, l4 + 4));
        let Some(gh) = d[..uend].get(g..).and_then(<[u8]>::first_chunk::<8>) else {
            return false;
        };
        if gh[1] != gtpu::msg_type::G_PDU {
            return false;
        }
        let gend = g + 8 + usize::from(be16(gh, 2));
        if gend > uend {
            return false;
        }
        let teid = be32(gh, 4);
        let gd = &d[g..gend];
        let (hlen, qfi) = match gh[0] {
            0x30 => (8, None),
            0x34 => {
                let Some(x) = gd.first_chunk::<12>() else {
                    return false;
                };
                match x[11] {
                    0 => (12, None),
                    gtpu::ext_type::PDU_SESSION_CONTAINER => {
                        // One 4-byte container: length 1, two content octets, next type 0.
                        let Some(x) = gd.first_chunk::<16>() else {
                            return false;
                        };
                        if x[12] != 1 || x[15] != 0 {
                            return false;
                        }
                        match psc_qfi(x[13], x[14]) {
                            Some(q) => (16, Some(q)),
                            None => return false,
                        }
                    }
                    _ => return false,
                }
            }
            _ => return false,
        };
        let il3 = g + hlen;
        let iv6 = match d.get(il3).map(|b| b >> 4) {
            Some(4) => false,
            Some(6) => true,
            _ => return false,
        };
        let Some((inner, _)) = ip(d, il3, gend, iv6, false) else {
            return false;
        };
        out.flags |= flags::GPDU;
        out.teid = teid;
        if let Some(q) = qfi {
            out.qfi = q;
            out.flags |= HAS_QFI;
        }
        flow = inner;
    }
    out.inner_l3_off = flow.l3 as u16;
    out.inner_l4_off = flow.l4 as u16;
    out.proto = flow.proto;
    if flow.v6 {
        out.flags |= flags::INNER_V6;
    }
    out.flow_hash = flow_hash(flow.src, flow.dst, flow.ports.0, flow.ports.1, flow.proto);
    debug_assert_eq!(out.flags & (flags::FRAGMENT | FIRST_FRAGMENT), 0);
    *m = out;
    true
}

/// The QFI of a one-container PDU Session Container from its two content octets (TS 38.415
/// section 5.5.2): UL PDU SESSION INFORMATION, or DL PDU SESSION INFORMATION without PPI,
/// timestamp or sequence numbers; `None` for anything else (the general parser's case).
#[inline(always)]
pub(crate) fn psc_qfi(o1: u8, o2: u8) -> Option<u8> {
    match o1 >> 4 {
        1 => Some(o2 & 0x3f),
        0 if o1 & 0x0f == 0 && o2 & 0x80 == 0 => Some(o2 & 0x3f),
        _ => None,
    }
}

#[cfg(test)]
mod sum_tests {
    use super::{sum_is_ones, INV_FFFF};

    /// The four folds it replaced.
    fn folded(mut s: u64) -> bool {
        s = (s & 0xffff_ffff) + (s >> 32);
        s = (s & 0xffff) + (s >> 16);
        s = (s & 0xffff) + (s >> 16);
        s = (s & 0xffff) + (s >> 16);
        s == 0xffff
    }

    #[test]
    fn multiple_of_ones_is_the_fold() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for k in 0..200_000u64 {
            // Edges (0, multiples of 0xffff and their neighbours, the largest sums of five
            // and of 2^32 words) and random sums.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for s in [
                k,
                k * 0xffff,
                (k * 0xffff).wrapping_sub(1),
                k * 0xffff + 1,
                x >> (k % 31),
                x,
                5 * 0xffff_ffff - k,
                u64::MAX - k,
            ] {
                assert_eq!(sum_is_ones(s), folded(s), "{s:#x}");
            }
        }
    }

    /// The multiply-and-compare divisibility test is `s != 0 && s % 0xffff == 0`.
    #[test]
    fn sum_is_ones_is_the_remainder_test() {
        assert_eq!(INV_FFFF.wrapping_mul(0xffff), 1);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edge = [
            0,
            1,
            0xfffe,
            0xffff,
            0x1_0000,
            0x1_fffe,
            u64::MAX,
            u64::MAX / 0xffff * 0xffff,
        ];
        for s in edge {
            assert_eq!(sum_is_ones(s), s != 0 && s % 0xffff == 0, "{s:#x}");
        }
        for _ in 0..200_000 {
            let r = next();
            for s in [r, (r >> 20) * 0xffff, (r >> 20) * 0xffff + 1, r >> 29] {
                assert_eq!(sum_is_ones(s), s != 0 && s % 0xffff == 0, "{s:#x}");
            }
        }
    }
}
