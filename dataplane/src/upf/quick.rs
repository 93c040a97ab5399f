//! The UPF's own pass-1 classifier: the two frame shapes the stage forwards nearly all the
//! time, read with 64-bit loads at fixed offsets, giving in one pass pass 1's `Pre` record
//! and what the packet's [`PacketMeta`](crate::classify::PacketMeta) needs beside it (pass 3
//! writes the record once, `Pre::quick_meta` restamped, instead of pass 1 writing it and
//! pass 3 rewriting most of it). The shared classifier, `crate::classify`,
//! and then `Work::pre` reading the inner header again cost ~510 instructions per uplink
//! packet between them; this path took ~210 instructions off the stage's uplink packet and
//! ~180 off the downlink one (callgrind, `perf/results/upf.md`, "Item 1, round 6").
//!
//! Shapes (the same checks as the shared classifier's fast path, `classify::fast`):
//! * uplink: untagged Ethernet, IPv4 without options or fragmentation (header checksum
//!   verified, RFC 1071), UDP to port 2152, a G-PDU (TS 29.281 section 5.1) without
//!   optional fields or with only the E flag and one PDU Session Container (TS 38.415
//!   section 5.5.2: UL, or DL without optional fields), carrying an IPv4 packet without
//!   options or fragmentation with TCP, UDP or ICMP;
//! * downlink (N6): untagged Ethernet, such an IPv4 packet (checksum verified), not UDP to
//!   port 2152.
//!
//! Everything else (IPv6 anywhere, VLAN tags, frames shorter than the fixed views, any
//! check the frame fails) answers `None` and takes the shared classifier and
//! `Work::pre`, which decide it. When it answers, the record (`Pre::quick_meta`) is
//! exactly the shared classifier's, `flow_hash` included (later stages and the telemetry taps read it), and
//! the `Pre` exactly `Work::pre`'s for that record (`tests::agrees_with_classifier_and_pre`
//! checks both on every prefix and single-bit flip of the shapes and on random mutations).

use crate::classify::flow_hash_word;
#[cfg(test)]
use crate::classify::{flags, PacketMeta, HAS_QFI};
use crate::upf::emit::flow_port_word;
use crate::upf::parse::{Flow, Pre, KIND_DL4, KIND_UL};
use crate::upf::prefetch::prefetch_addr;
use crate::upf::work::Work;
use peregrine_wire::ipv4::ip_protocol;

const ETH: usize = 14;
const L4: usize = ETH + 20;
const GTP: usize = L4 + 8;

#[inline(always)]
fn be16<const N: usize>(d: &[u8; N], i: usize) -> u16 {
    u16::from_be_bytes([d[i], d[i + 1]])
}

#[inline(always)]
fn be32<const N: usize>(d: &[u8; N], i: usize) -> u32 {
    u32::from_be_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]])
}

#[inline(always)]
fn be64<const N: usize>(d: &[u8; N], i: usize) -> u64 {
    let w: &[u8; 8] = d[i..i + 8].try_into().expect("8 bytes");
    u64::from_be_bytes(*w)
}

#[inline(always)]
fn le64<const N: usize>(d: &[u8; N], i: usize) -> u64 {
    let w: &[u8; 8] = d[i..i + 8].try_into().expect("8 bytes");
    u64::from_le_bytes(*w)
}

#[inline(always)]
fn le32<const N: usize>(d: &[u8; N], i: usize) -> u32 {
    u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]])
}

/// An IPv4 header without options read as three little-endian words (no byte swap for the
/// tests and the checksum; the fields a packet needs as numbers are swapped where read):
/// `a` bytes 0..8 (version / IHL, TOS, total length, ID, flags / fragment offset), `b`
/// bytes 8..16 (TTL, protocol, checksum, source), `c` the destination.
#[derive(Clone, Copy)]
struct V4 {
    a: u64,
    b: u64,
    c: u32,
}

impl V4 {
    #[inline(always)]
    fn at<const N: usize>(d: &[u8; N], i: usize) -> V4 {
        V4 {
            a: le64(d, i),
            b: le64(d, i + 8),
            c: le32(d, i + 16),
        }
    }

    /// Version 4, IHL 5, not a fragment (neither MF nor an offset), total length at least
    /// the header's, and the packet, starting at `off`, ending by `end` (any `end`: the
    /// header's own 20 bytes are part of the test): the total length. Three compares: the
    /// version / IHL byte (byte 0) and the fragment bits (bytes 6 and 7 but DF) under one
    /// mask, then the length's two bounds.
    #[inline(always)]
    fn plain_len(&self, off: usize, end: usize) -> Option<usize> {
        let tot = usize::from(((self.a >> 16) as u16).swap_bytes());
        if self.a & 0xff3f_0000_0000_00ff != 0x45 || tot < 20 || off + tot > end {
            return None;
        }
        Some(tot)
    }

    /// RFC 1071: the one's complement sum of the header's 16-bit words is 0xffff. Summed
    /// as the two 64-bit words and the last 32 bits with end-around carry (an add and two
    /// adds with carry): 2^64 = 1 modulo 0xffff as 2^16 is, so the sum keeps the 16-bit
    /// words' sum modulo 0xffff, and it is 0 only if every word is (what
    /// `classify::sum_is_ones` needs; `classify::fast` folds 32-bit words to the same
    /// verdict). The words are little-endian: each 16-bit word then counts byte-swapped,
    /// which is 256 times it modulo 0xffff (2^16 = 1), and 256 is invertible modulo 0xffff,
    /// so the sum is a multiple of 0xffff exactly when the big-endian one is (RFC 1071
    /// section 2 (B), byte order independence).
    #[inline(always)]
    fn checksum_ok(&self) -> bool {
        let (s, c1) = self.a.overflowing_add(self.b);
        // At most 2^32: no overflow.
        let (s, c2) = s.overflowing_add(u64::from(self.c) + u64::from(c1));
        // After a carry `s` is below 2^32: no overflow.
        crate::classify::sum_is_ones(s + u64::from(c2))
    }

    #[inline(always)]
    fn proto(&self) -> u8 {
        (self.b >> 8) as u8
    }

    /// The source address as a number.
    #[inline(always)]
    fn src(&self) -> u32 {
        ((self.b >> 32) as u32).swap_bytes()
    }

    /// The destination address as a number.
    #[inline(always)]
    fn dst(&self) -> u32 {
        self.c.swap_bytes()
    }

    /// The flow facts of this header (L4 facts filled by [`l4`]).
    #[inline(always)]
    fn flow(&self, len: usize) -> Flow {
        Flow {
            v6: false,
            src: u128::from(self.src()),
            dst: u128::from(self.dst()),
            proto: self.proto(),
            ports: None,
            icmp_type: None,
            len,
            df: self.a & 0x40 << 48 != 0,
            frag: false,
        }
    }
}

/// The L4 header at `l4` of a packet ending at `end` (both within `d`), checked as the
/// shared classifier checks it: ports for TCP / UDP, the type for ICMP; `None` for any
/// other protocol or a header that does not fit. Answers the flow's `classify::ports_word`
/// (the ports as the header's first four bytes, read once).
#[inline(always)]
fn l4<const N: usize>(d: &[u8; N], l4: usize, end: usize, f: &mut Flow) -> Option<u64> {
    let room = end - l4;
    let ports = be32(d, l4);
    // (`room` at least 8 or 20 follows from the length's two bounds.)
    match f.proto {
        ip_protocol::UDP => {
            let ulen = usize::from(be16(d, l4 + 4));
            if ulen < 8 || ulen > room {
                return None;
            }
            f.ports = Some(((ports >> 16) as u16, ports as u16));
        }
        ip_protocol::TCP => {
            let hl = usize::from(d[l4 + 12] >> 4) * 4;
            if hl < 20 || hl > room {
                return None;
            }
            f.ports = Some(((ports >> 16) as u16, ports as u16));
        }
        ip_protocol::ICMP => {
            if room < 4 {
                return None;
            }
            f.icmp_type = Some(d[l4]);
            return Some(u64::from(f.proto) << 32);
        }
        _ => return None,
    }
    Some(u64::from(f.proto) << 32 | u64::from(ports))
}

/// [`quick_pre`] and the record it leaves to pass 3, written into `m` (`None` writes
/// neither).
#[cfg(test)]
fn quick(d: &[u8], m: &mut PacketMeta, pre: &mut Pre) -> Option<(u32, Flow)> {
    let r = quick_pre(d, pre)?;
    *m = pre.quick_meta();
    Some(r)
}

/// If `d` has one of the module's shapes (see the module docs): its pass-1 record into
/// `pre` (lookup key set; the MAC / local address decisions are the caller's), with what
/// the packet's record needs beside it (`Pre::meta`: pass 3 writes the record once, see
/// [`Pre::quick_meta`]), the outer destination address and the inner packet's [`Flow`];
/// `None` writes nothing.
#[inline(always)]
pub(super) fn quick_pre(d: &[u8], pre: &mut Pre) -> Option<(u32, Flow)> {
    // The shortest view either shape takes: Ethernet, IPv4, a TCP header.
    let h: &[u8; L4 + 20] = d.first_chunk()?;
    if be16(h, 12) != 0x0800 || d.len() > usize::from(u16::MAX) {
        return None;
    }
    let ip = V4::at(h, ETH);
    let tot = ip.plain_len(ETH, d.len())?;
    if !ip.checksum_ok() {
        return None;
    }
    let pend = ETH + tot;
    let mut f = ip.flow(tot);
    if f.proto == ip_protocol::UDP && be16(h, L4 + 2) == 2152 {
        return uplink(d, pend, ip.dst(), pre);
    }
    let w = l4(h, L4, pend, &mut f)?;
    let port = flow_port_word(f.src, f.dst, w);
    *pre = Pre {
        meta: true,
        proto: f.proto,
        hash: flow_hash_word(f.src, f.dst, w),
        ..Pre::new(KIND_DL4, None, ETH, u64::from(ip.dst()), &f, port)
    };
    Some((ip.dst(), f))
}

/// The G-PDU shape of [`quick`]: the outer IPv4 header (ending at `pend`, destination
/// `dst`) is checked, the UDP header is at [`L4`].
#[inline(always)]
fn uplink(d: &[u8], pend: usize, dst: u32, pre: &mut Pre) -> Option<(u32, Flow)> {
    // Up to a PDU Session Container, an inner IPv4 header and a TCP header.
    let h: &[u8; GTP + 16 + 40] = d.first_chunk()?;
    // The UDP length stays within the outer packet (`pend` is past the UDP header: the
    // outer length is at least 20) and covers the GTP-U header and its payload (which
    // says it covers at least the 16 bytes of the UDP and GTP-U headers).
    let ulen = usize::from(be16(h, L4 + 4));
    if ulen > pend - L4 {
        return None;
    }
    let uend = L4 + ulen;
    // Flags / version and message type together (a G-PDU).
    let g = be64(h, GTP);
    let gend = GTP + 8 + usize::from((g >> 32) as u16);
    if gend > uend {
        return None;
    }
    let teid = g as u32;
    // The optional fields and the container are read from the fixed view whatever the
    // GTP-U length; the inner header's bounds below (at least 20 bytes after them, within
    // `gend`) say they are inside the message.
    // The E flag's shape first: what a gNB sends (a PDU Session Container on every G-PDU).
    let (hlen, qfi) = match g >> 48 {
        0x34ff => {
            // Sequence number, N-PDU number, next extension type; then the container (read
            // little-endian: byte `i` in bits `8 i`).
            let x = le64(h, GTP + 8);
            if x & 0xff00_0000 == 0 {
                (12, None)
            } else if x & 0xff00_00ff_ff00_0000 == 0x0000_0001_8500_0000 {
                // One 4-byte container (type 0x85): length 1, two content octets, next
                // type 0.
                let qfi = crate::classify::psc_qfi((x >> 40) as u8, (x >> 48) as u8)?;
                (16, Some(qfi))
            } else {
                return None;
            }
        }
        0x30ff => (8, None),
        _ => return None,
    };
    let il3 = GTP + hlen;
    let il4 = il3 + 20;
    let ip = V4::at(h, il3);
    // At least 20 and within `gend` (so `il4` is too).
    let tot = ip.plain_len(il3, gend)?;
    let mut f = ip.flow(tot);
    let w = l4(h, il4, il3 + tot, &mut f)?;
    *pre = Pre {
        meta: true,
        proto: f.proto,
        hash: flow_hash_word(f.src, f.dst, w),
        ..Pre::new(KIND_UL, qfi, il3, u64::from(teid), &f, 0)
    };
    Some((dst, f))
}

impl Work<'_> {
    /// Pass 1 of a packet nothing classified yet: its [`Pre`] into `pre` from [`quick_pre`]
    /// when the frame has one of its shapes and is for the common path (our MAC; a G-PDU to
    /// one of our GTP-U addresses, or an N6 packet to neither ours nor our N6 address), with
    /// the prefetches of [`Work::pre`]; the packet's record is left to pass 3 (`Pre::meta`).
    /// `false`: classify and run [`Work::pre`], which write the record and `pre` (`pre` may
    /// have been written).
    #[inline(always)]
    pub fn pre_quick(&self, data: &[u8], pre: &mut Pre) -> bool {
        // Every shape is IPv4 and longer than this (the MAC check wants an Ethernet header);
        // other frames leave at once for the shared classifier.
        let Some(h) = data.first_chunk::<{ L4 + 20 }>() else {
            return false;
        };
        // `for_us_unicast` on the destination MAC as a number (the frame's first 8 bytes
        // little-endian, shifted to keep the 6 address bytes, as `rx_mac` is): the group bit
        // (bit 0 of the first byte) clear, and ours (or promiscuous).
        let w = u64::from_le_bytes(*h.first_chunk::<8>().expect("8 of 54 bytes"));
        if be16(h, 12) != 0x0800 || w & 1 != 0 || !(w << 16 == self.rx_mac || self.cfg.promiscuous)
        {
            return false;
        }
        let Some((outer_dst, f)) = quick_pre(data, pre) else {
            return false;
        };
        if pre.kind == KIND_UL {
            if !self.is_local_dst(false, u128::from(outer_dst)) {
                return false;
            }
        } else {
            // `is_local` or `is_n6_own` (an IPv4 flow: `f.dst` is `outer_dst`).
            let own = match self.own_v4 {
                Some([local, n6]) => outer_dst == local || outer_dst == n6,
                None => self.is_local(&f) || self.is_n6_own(&f),
            };
            if own {
                return false;
            }
            prefetch_addr(data.as_ptr().wrapping_sub(1));
            prefetch_addr(data.as_ptr().wrapping_sub(80));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{classify, tests::each_fast_shape_mutation};
    use crate::upf::emit::flow_port;

    /// When `quick` answers, the record is the shared classifier's and the `Pre` is what
    /// `Work::pre` builds from that record (minus its MAC / address decisions, which
    /// `pre_quick` makes with the same functions).
    fn check(d: &[u8]) -> bool {
        let (mut m, mut pre) = (PacketMeta::EMPTY, Pre::SLOW);
        let Some((outer_dst, flow)) = quick(d, &mut m, &mut pre) else {
            assert_eq!((m, pre), (PacketMeta::EMPTY, Pre::SLOW), "{d:02x?}");
            return false;
        };
        let mut c = PacketMeta::EMPTY;
        assert_eq!(classify(d, &mut c), Ok(()), "frame {d:02x?}");
        assert_eq!(m, c, "frame {d:02x?}");
        assert_eq!(u128::from(outer_dst), Flow::outer_dst(d, &c), "{d:02x?}");
        let inner = Flow::inner(d, &c);
        assert_eq!(flow, inner, "frame {d:02x?}");
        assert_eq!(
            (pre.dst, pre.len as usize, pre.v6),
            (inner.dst, inner.len, inner.v6),
            "frame {d:02x?}"
        );
        if c.has(flags::GPDU) {
            assert_eq!(pre.kind, KIND_UL);
            assert_eq!(pre.qfi, c.has(HAS_QFI).then_some(c.qfi));
            assert_eq!(usize::from(pre.inner_off), usize::from(c.inner_l3_off));
            assert_eq!(pre.key, u64::from(c.teid));
            assert_eq!(pre.port, 0);
        } else {
            assert_eq!(pre.kind, KIND_DL4);
            assert_eq!(pre.qfi, None);
            assert_eq!(usize::from(pre.inner_off), usize::from(c.l3_off));
            assert_eq!(pre.key, u64::from(inner.dst as u32));
            assert_eq!(pre.port, flow_port(&inner));
        }
        true
    }

    /// The header checksum test with end-around carry is RFC 1071's folded sum of the ten
    /// 16-bit words being 0xffff, for random headers, headers with their checksum set, and
    /// the extremes.
    #[test]
    fn checksum_ok_is_the_folded_sum() {
        use peregrine_testkit::rng::{below, seeded};
        use rand_core::RngCore;
        // RFC 1071: the big-endian 16-bit words summed, carries folded back in.
        fn folded(h: &[u8; 20]) -> u16 {
            let mut s: u64 = h
                .chunks(2)
                .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
                .sum();
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            s as u16
        }
        let mut rng = seeded(0xc5c5);
        let mut ones = 0;
        for i in 0..200_000u32 {
            let mut h = [0u8; 20];
            match i % 4 {
                0 => rng.fill_bytes(&mut h),
                // Bytes mostly 0xff or 0 (carries and zero sums).
                1 => h
                    .iter_mut()
                    .for_each(|b| *b = [0, 0xff][below(&mut rng, 2) as usize]),
                _ => {
                    rng.fill_bytes(&mut h);
                    h[10] = 0;
                    h[11] = 0;
                    let sum = folded(&h);
                    h[10..12].copy_from_slice(&(!sum).to_be_bytes());
                    if i % 4 == 3 {
                        h[below(&mut rng, 20) as usize] ^= 1 << below(&mut rng, 8);
                    }
                }
            }
            let got = V4::at(&h, 0).checksum_ok();
            assert_eq!(got, folded(&h) == 0xffff, "{h:02x?}");
            ones += u32::from(got);
        }
        for h in [[0u8; 20], [0xff; 20]] {
            assert_eq!(
                V4::at(&h, 0).checksum_ok(),
                folded(&h) == 0xffff,
                "{h:02x?}"
            );
        }
        assert!(ones > 50_000, "{ones}");
    }

    #[test]
    fn agrees_with_classifier_and_pre() {
        let (mut checked, mut taken) = (0u32, 0u32);
        let mut run = |g: &[u8]| {
            checked += 1;
            taken += u32::from(check(g));
        };
        each_fast_shape_mutation(0x91c_c0de, &mut run);
        // Worth something only if both answers occurred often.
        assert!(
            taken > checked / 20 && taken < checked,
            "{taken} of {checked}"
        );
    }
}
