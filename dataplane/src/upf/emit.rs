//! Emit phase of the UPF stage: the forwarded packet written out (Outer Header Removal,
//! GTP-U encapsulation toward a gNB or N9 peer, N6 routing with the TTL / hop limit
//! decremented, the MTU policy) and the replies built in place (Echo Response, Error
//! Indication, ICMP too big). See the stage's module docs for the policies. The packet's
//! [`PacketMeta`] is left describing the bytes sent.

use crate::buffer::PacketBuf;
use crate::classify::{flags, Direction as MetaDir, PacketMeta, HAS_QFI};
use crate::qos::Colour;
use crate::runtime::Disposition;
use crate::upf::encap::{self, Psc};
use crate::upf::enforce::Plan;
use crate::upf::frag::{FragJob, Out};
use crate::upf::parse::{is_icmp_error, Flow, Pre, KIND_UL};
use crate::upf::stats::Total;
use crate::upf::tables::{Direction, NONE};
use crate::upf::work::Work;
use peregrine_wire::ethernet::{self, ethertype};
use peregrine_wire::{gtpu, gtpu_msg, ipv4, ipv6, udp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

impl Work<'_> {
    /// Forward the user packet `inner` (at `inner_off`) per the plan's FAR: keep exactly
    /// the user packet, then encapsulate toward `plan.outer` or route it on N6.
    pub fn forward<B: PacketBuf>(
        &mut self,
        p: &mut B,
        plan: &Plan,
        dir: Direction,
        colour: Colour,
        inner_off: usize,
        inner: &Flow,
    ) -> Disposition {
        let d = self.d;
        let qfi = plan.qfi;
        let len = inner.len as u64;
        // Keep exactly the user packet: strip everything in front and any padding behind.
        if p.adj(inner_off).is_err() || encap::set_len(p, inner.len).is_err() {
            return self.drop_q(dir, qfi, d.inner_malformed);
        }
        let mtu = usize::from(self.cfg.mtu);
        let qid = self.cfg.qfi_map.qid(qfi);
        let stamp = Stamp {
            dir,
            qfi,
            qid,
            colour,
            session: plan.urrs[0],
            inner_off,
        };
        if let Some(outer) = plan.outer {
            let ov6 = outer.peer.is_ipv6();
            let peer = match outer.peer {
                IpAddr::V4(a) => u128::from(u32::from(a)),
                IpAddr::V6(a) => u128::from(a),
            };
            let nh = match self.route(ov6, peer) {
                Ok(nh) => nh,
                Err(r) => return self.drop_q(dir, qfi, r),
            };
            let overhead = encap::overhead(ov6);
            let fits = inner.len + overhead <= mtu;
            if !fits && !fragmentable(inner) {
                return self.too_big(p, dir, qfi, inner, mtu.saturating_sub(overhead));
            }
            let psc = if dir == Direction::Downlink {
                if !decrement_ttl(p.data_mut(), inner.v6) {
                    return self.drop_q(dir, qfi, d.ttl_exceeded);
                }
                Psc::Dl
            } else {
                Psc::Ul
            };
            let src_mac = self.our_mac(nh.port);
            if !fits {
                self.frag = Some(FragJob {
                    budget: mtu.saturating_sub(overhead),
                    out: Out::Encap {
                        outer,
                        psc,
                        src_port: flow_port(inner),
                    },
                    dst_mac: nh.mac,
                    src_mac,
                    disp: Disposition::tx_queue(nh.port, qid),
                    stamp,
                });
                return Disposition::CONTINUE;
            }
            if encap::encap_gtpu(p, &outer, qfi, psc, flow_port(inner), nh.mac, src_mac).is_err() {
                return self.drop_q(dir, qfi, d.encap_failed);
            }
            stamp.encapsulated(p.pkt_meta_mut(), ov6, outer.teid);
            self.stats.qfi_sent(dir, qfi, len);
            Disposition::tx_queue(nh.port, qid)
        } else {
            let nh = match self.route(inner.v6, inner.dst) {
                Ok(nh) => nh,
                Err(r) => return self.drop_q(dir, qfi, r),
            };
            let fits = inner.len <= mtu;
            if !fits && !fragmentable(inner) {
                return self.too_big(p, dir, qfi, inner, mtu);
            }
            if !decrement_ttl(p.data_mut(), inner.v6) {
                return self.drop_q(dir, qfi, d.ttl_exceeded);
            }
            let src_mac = self.our_mac(nh.port);
            if !fits {
                self.frag = Some(FragJob {
                    budget: mtu,
                    out: Out::Routed,
                    dst_mac: nh.mac,
                    src_mac,
                    disp: Disposition::tx_queue(nh.port, qid),
                    stamp,
                });
                return Disposition::CONTINUE;
            }
            let et = if inner.v6 {
                ethertype::IPV6
            } else {
                ethertype::IPV4
            };
            match p.prepend(ethernet::HEADER_LEN) {
                Ok(h) => encap::write_eth(h, nh.mac, src_mac, et),
                Err(_) => return self.drop_q(dir, qfi, d.encap_failed),
            }
            stamp.routed(p.pkt_meta_mut());
            self.stats.qfi_sent(dir, qfi, len);
            Disposition::tx_queue(nh.port, qid)
        }
    }

    /// Echo Response in place (TS 29.281 section 7.2.2): same sequence number, Recovery IE
    /// with restart counter 0, to the request's source port from 2152 (section 4.4.2.2).
    pub fn echo_reply<B: PacketBuf>(
        &mut self,
        p: &mut B,
        l3: usize,
        l4: usize,
        f: &Flow,
        seq: u16,
    ) -> Disposition {
        let msg = gtpu_msg::Repr::echo_response(seq);
        let gtp_off = l4 + udp::HEADER_LEN;
        let n = msg.buffer_len();
        if encap::set_len(p, gtp_off + n).is_err()
            || msg.emit(&mut p.data_mut()[gtp_off..]).is_err()
        {
            return Disposition::drop_as(self.d.reply_failed);
        }
        let peer_port = f.ports.map_or(gtpu::PORT, |(s, _)| s);
        let mac = self.our_mac(self.rx);
        encap::reply_udp_in_place(p.data_mut(), l3, l4, f.v6, n, (gtpu::PORT, peer_port), mac);
        // A new packet: nothing of the record describes it.
        *p.pkt_meta_mut() = PacketMeta::EMPTY;
        self.stats.count(Total::EchoReplies);
        Disposition::tx(self.rx)
    }

    /// Error Indication in place (TS 29.281 section 7.3.1): TEID 0, Tunnel Endpoint
    /// Identifier Data I = the unknown TEID, GTP-U Peer Address = the address the G-PDU was
    /// sent to (ours), to port 2152 of the sender (section 4.4.2.3). Rate-limited.
    #[allow(clippy::too_many_arguments)]
    pub fn error_indication<B: PacketBuf>(
        &mut self,
        p: &mut B,
        l3: usize,
        l4: usize,
        f: &Flow,
        gtp_off: usize,
        teid: u32,
        qfi: u8,
    ) -> Disposition {
        if !self.take_reply_token() {
            return self.drop_q(Direction::Uplink, qfi, self.d.gtpu_unknown_teid);
        }
        let ours = if f.v6 {
            IpAddr::V6(Ipv6Addr::from(f.dst))
        } else {
            IpAddr::V4(Ipv4Addr::from(f.dst as u32))
        };
        let msg = gtpu_msg::Repr::ErrorIndication {
            teid_data: teid,
            peer: ours,
        };
        let n = msg.buffer_len();
        if encap::set_len(p, gtp_off + n).is_err()
            || msg.emit(&mut p.data_mut()[gtp_off..]).is_err()
        {
            return Disposition::drop_as(self.d.reply_failed);
        }
        let mac = self.our_mac(self.rx);
        encap::reply_udp_in_place(p.data_mut(), l3, l4, f.v6, n, (gtpu::PORT, gtpu::PORT), mac);
        *p.pkt_meta_mut() = PacketMeta::EMPTY;
        self.stats.count(Total::ErrorIndicationsSent);
        Disposition::tx(self.rx)
    }

    /// The MTU policy of the module docs. The packet holds exactly the user IP packet.
    fn too_big<B: PacketBuf>(
        &mut self,
        p: &mut B,
        dir: Direction,
        qfi: u8,
        inner: &Flow,
        report_mtu: usize,
    ) -> Disposition {
        let d = self.d;
        if dir == Direction::Uplink || (!inner.v6 && !inner.df) || is_icmp_error(inner) {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        }
        let from = if inner.v6 {
            self.cfg.n6_v6.map(IpAddr::V6)
        } else {
            self.cfg.n6_v4.map(IpAddr::V4)
        };
        let Some(from) = from else {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        };
        let Ok(nh) = self.route(inner.v6, inner.src) else {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        };
        if !self.take_reply_token() {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        }
        let src_mac = self.our_mac(nh.port);
        let ok = match from {
            IpAddr::V4(a) => encap::icmpv4_frag_needed(
                p,
                a,
                Ipv4Addr::from(inner.src as u32),
                report_mtu.min(usize::from(u16::MAX)) as u16,
                nh.mac,
                src_mac,
            ),
            IpAddr::V6(a) => encap::icmpv6_too_big(
                p,
                a,
                Ipv6Addr::from(inner.src),
                report_mtu as u32,
                nh.mac,
                src_mac,
            ),
        };
        if ok.is_err() {
            return self.drop_q(dir, qfi, d.reply_failed);
        }
        // The user packet itself is not sent: count it as dropped for its QFI.
        self.stats.qfi_drop(dir, qfi);
        *p.pkt_meta_mut() = PacketMeta::EMPTY;
        self.stats.count(Total::IcmpErrorsSent);
        Disposition::tx(nh.port)
    }
}

/// Whether an oversize packet is cut into fragments (an IPv4 packet without DF) rather than
/// answered per the MTU policy.
#[inline]
fn fragmentable(inner: &Flow) -> bool {
    !inner.v6 && !inner.df
}

/// Decrement the TTL / hop limit of the IP packet at the start of `data` (RFC 1812 section
/// 5.3.1, RFC 8200 section 3); `false` if it would reach 0 (the packet must not be sent).
/// The caller parsed the header, so it is there; a buffer too short for one is refused.
#[inline]
pub(super) fn decrement_ttl(data: &mut [u8], v6: bool) -> bool {
    if v6 {
        let Some(h) = data.first_chunk_mut::<{ ipv6::HEADER_LEN }>() else {
            return false;
        };
        if h[7] <= 1 {
            return false;
        }
        h[7] -= 1;
    } else {
        let Some(h) = data.first_chunk_mut::<{ ipv4::HEADER_LEN }>() else {
            return false;
        };
        let ttl = h[8];
        if ttl <= 1 {
            return false;
        }
        h[8] = ttl - 1;
        let c = ttl_checksum_swapped(u16::from_le_bytes([h[10], h[11]]));
        h[10..12].copy_from_slice(&c.to_le_bytes());
    }
    true
}

/// The IPv4 header checksum `hc` after the TTL dropped by one (RFC 1624 eqn. 3): the TTL
/// is the high octet of the word at 8, which drops by 0x0100 (the TTL was at least 2), so
/// `~m + m'` of `checksum::update16(hc, m, m - 0x0100)` is always 0xffff - 0x0100, and
/// `~(~hc + 0xfeff)` folded is `hc + 0x0100` with its end-around carry, a sum of 0xffff
/// taken to 0 (RFC 1141's form, as Linux's `ip_decrease_ttl`): one add and one compare
/// (the test below checks it against `update16` for every checksum).
///
/// This is the update of the wire's (big-endian) value; the stage uses
/// `ttl_checksum_swapped`, checked against this one.
#[cfg(test)]
fn ttl_checksum(hc: u16) -> u16 {
    let s = u32::from(hc) + 0x0100;
    (s + u32::from(s >= 0xffff)) as u16
}

/// `ttl_checksum` on the checksum's bytes read the other way round (little-endian: no
/// byte swaps on x86): one's complement addition is the same in either byte order (RFC 1071
/// section 2(B)), so adding 0x0100 becomes adding 0x0001, and 0xffff, the one sum taken to
/// 0, reads the same both ways (the test below checks every checksum).
#[inline(always)]
fn ttl_checksum_swapped(l: u16) -> u16 {
    let s = u32::from(l) + 1;
    (s + u32::from(s >= 0xffff)) as u16
}

/// What the UPF decided about a forwarded packet, written into its record together with
/// the offsets of the bytes it now holds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stamp {
    pub dir: Direction,
    pub qfi: u8,
    pub qid: u8,
    pub colour: Colour,
    /// First URR slot of the rule, `NONE` if it counts none.
    pub session: u32,
    /// Where the user packet was in the received frame (the record's offsets are relative
    /// to that frame until restamped).
    pub inner_off: usize,
}

impl Stamp {
    #[inline]
    fn common(&self, m: &mut PacketMeta, hdr: usize) {
        m.dir = match self.dir {
            Direction::Uplink => MetaDir::Uplink,
            Direction::Downlink => MetaDir::Downlink,
        } as u8;
        m.qfi = self.qfi;
        m.qid = self.qid;
        m.color = self.colour as u8;
        m.session = if self.session == NONE {
            PacketMeta::NO_SESSION
        } else {
            self.session
        };
        // The user packet now starts at `hdr`; its L4 header keeps its distance.
        let l4 = if m.inner_l4_off == 0 {
            0
        } else {
            usize::from(m.inner_l4_off).saturating_sub(self.inner_off) + hdr
        };
        m.inner_l3_off = hdr as u16;
        m.inner_l4_off = l4 as u16;
    }

    /// Ethernet + the user packet.
    #[inline]
    pub(super) fn routed(&self, m: &mut PacketMeta) {
        self.common(m, ethernet::HEADER_LEN);
        m.l3_off = m.inner_l3_off;
        m.l4_off = m.inner_l4_off;
        m.flags &= !(flags::GPDU | flags::OUTER_V6 | HAS_QFI);
        if m.has(flags::INNER_V6) {
            m.flags |= flags::OUTER_V6;
        }
    }

    /// Ethernet + outer IP + UDP + GTP-U with a PDU Session Container + the user packet.
    #[inline]
    pub(super) fn encapsulated(&self, m: &mut PacketMeta, v6_outer: bool, teid: u32) {
        let l3 = ethernet::HEADER_LEN;
        let l4 = l3
            + if v6_outer {
                ipv6::HEADER_LEN
            } else {
                ipv4::HEADER_LEN
            };
        self.common(m, l4 + udp::HEADER_LEN + encap::GTPU_PSC_LEN);
        m.l3_off = l3 as u16;
        m.l4_off = l4 as u16;
        m.flags |= flags::GPDU | HAS_QFI;
        m.flags &= !flags::OUTER_V6;
        if v6_outer {
            m.flags |= flags::OUTER_V6;
        }
        if self.dir == Direction::Downlink {
            m.teid = teid;
        }
    }
}

/// The final record of a packet pass 1's own classifier took (`pre.meta`: the record was
/// left to pass 3) and the fast path forwarded as `stamp` says: `stamp.routed` (`teid`
/// `None`) or `stamp.encapsulated` over IPv4 (`Some(teid)`) applied to
/// [`Pre::quick_meta`], written as one literal (the offsets are constants of the two
/// shapes: the inner L4 header 20 bytes after the inner IPv4 header, which has no options).
/// `ul`: whether `pre.kind` is [`KIND_UL`], given by the caller, which knows it (the fast
/// path's inlined copies: their direction, a constant, follows from the kind), so the kind
/// is not read and tested again. `tests::quick_records_are_the_stamped_ones` checks it
/// against the two stamps.
#[inline(always)]
pub(super) fn quick_record_of(pre: &Pre, stamp: &Stamp, teid: Option<u32>, ul: bool) -> PacketMeta {
    debug_assert_eq!(ul, pre.kind == KIND_UL);
    let rx_teid = if ul { pre.key as u32 } else { 0 };
    let (l4, hdr, flags, teid) = match teid {
        None => (
            ethernet::HEADER_LEN + ipv4::HEADER_LEN,
            ethernet::HEADER_LEN,
            flags::CLASSIFIED | flags::L4,
            rx_teid,
        ),
        Some(t) => (
            ethernet::HEADER_LEN + ipv4::HEADER_LEN,
            ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN + encap::GTPU_PSC_LEN,
            flags::CLASSIFIED | flags::L4 | flags::GPDU | HAS_QFI,
            if stamp.dir == Direction::Downlink {
                t
            } else {
                rx_teid
            },
        ),
    };
    PacketMeta {
        flow_hash: pre.hash,
        teid,
        // `NONE` is `PacketMeta::NO_SESSION`.
        session: stamp.session,
        l3_off: ethernet::HEADER_LEN as u16,
        l4_off: l4 as u16,
        inner_l3_off: hdr as u16,
        inner_l4_off: (hdr + ipv4::HEADER_LEN) as u16,
        flags,
        proto: pre.proto,
        dir: match stamp.dir {
            Direction::Uplink => MetaDir::Uplink,
            Direction::Downlink => MetaDir::Downlink,
        } as u8,
        qfi: stamp.qfi,
        qid: stamp.qid,
        color: stamp.colour as u8,
        ..PacketMeta::EMPTY
    }
}

const _: () = assert!(NONE == PacketMeta::NO_SESSION);

/// Outer UDP source port from the inner 5-tuple: entropy for ECMP / RSS on the path to the
/// peer (as RFC 9300 section 5.3 does for LISP), kept in the dynamic range 49152..=65535.
#[inline]
pub(super) fn flow_port(fl: &Flow) -> u16 {
    let (sp, dp) = fl.ports.unwrap_or((0, 0));
    flow_port_word(
        fl.src,
        fl.dst,
        crate::classify::ports_word(sp, dp, fl.proto),
    )
}

/// [`flow_port`] with the ports and protocol as their `classify::ports_word`.
#[inline(always)]
pub(super) fn flow_port_word(src: u128, dst: u128, w: u64) -> u16 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (src as u64 ^ (src >> 64) as u64).wrapping_mul(K);
    h = (h ^ dst as u64 ^ (dst >> 64) as u64).wrapping_mul(K);
    h = (h ^ w).wrapping_mul(K);
    0xC000 | ((h >> 50) as u16 & 0x3FFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upf::parse::test_flow as flow;
    use peregrine_wire::checksum;

    /// The TTL's checksum update is RFC 1624's for every checksum and TTL / protocol word.
    #[test]
    fn ttl_checksum_is_the_incremental_update() {
        for hc in 0..=u16::MAX {
            for old in [0x0200u16, 0x0211, 0x4006, 0x8001, 0xff11, 0xffff] {
                assert_eq!(
                    ttl_checksum(hc),
                    checksum::update16(hc, old, old - 0x0100),
                    "{hc:#x} {old:#x}"
                );
            }
        }
    }

    /// The byte-swapped update is the update of the byte-swapped checksum, for every one.
    #[test]
    fn ttl_checksum_swapped_is_ttl_checksum() {
        for l in 0..=u16::MAX {
            assert_eq!(
                ttl_checksum_swapped(l),
                ttl_checksum(l.swap_bytes()).swap_bytes(),
                "{l:#x}"
            );
        }
    }

    /// `quick_record` is the two stamps applied to the record pass 1 left to pass 3.
    #[test]
    fn quick_records_are_the_stamped_ones() {
        use crate::upf::parse::{KIND_DL4, KIND_UL};
        for (kind, inner_off, qfi) in [
            (KIND_UL, 50u16, None),
            (KIND_UL, 54, None),
            (KIND_UL, 58, Some(9u8)),
            (KIND_UL, 58, Some(0)),
            (KIND_DL4, 14, None),
        ] {
            for proto in [1u8, 6, 17] {
                let pre = Pre {
                    meta: true,
                    proto,
                    hash: 0x1234_5678,
                    key: 0xdead_beef,
                    inner_off,
                    kind,
                    qfi,
                    ..Pre::SLOW
                };
                for (dir, session, colour) in [
                    (Direction::Uplink, 7, Colour::Green),
                    (Direction::Downlink, NONE, Colour::Yellow),
                    (Direction::Downlink, 3, Colour::Red),
                ] {
                    let stamp = Stamp {
                        dir,
                        qfi: 5,
                        qid: 2,
                        colour,
                        session,
                        inner_off: usize::from(inner_off),
                    };
                    let mut m = pre.quick_meta();
                    stamp.routed(&mut m);
                    let ul = pre.kind == KIND_UL;
                    assert_eq!(quick_record_of(&pre, &stamp, None, ul), m);
                    let mut m = pre.quick_meta();
                    stamp.encapsulated(&mut m, false, 0x0102_0304);
                    assert_eq!(quick_record_of(&pre, &stamp, Some(0x0102_0304), ul), m);
                }
            }
        }
    }

    #[test]
    fn flow_port_is_dynamic_and_spreads() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..256u128 {
            let p = flow_port(&flow(false, i, 7, 17, Some((1000, 80))));
            assert!(p >= 0xC000);
            seen.insert(p);
        }
        assert!(seen.len() > 200, "{}", seen.len());
    }
}
