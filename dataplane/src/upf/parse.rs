//! Parse phase of the UPF stage: what kind of packet this is and its lookup key, from the
//! packet's [`PacketMeta`] (filled by the shared classifier, `crate::classify`) plus the
//! few header fields the record does not hold, read at the offsets it gives. L2 checks,
//! the local / N6 decision and GTP-U path management (TS 29.281 section 7) are here too.

use crate::buffer::PacketBuf;
use crate::classify::{self, flags, ClassifyError, PacketMeta, FIRST_FRAGMENT, HAS_QFI};
use crate::runtime::Disposition;
use crate::upf::emit::flow_port;
use crate::upf::encap;
use crate::upf::prefetch::prefetch_addr;
use crate::upf::reasm::Outcome;
use crate::upf::stats::Total;
use crate::upf::tables::Direction;
use crate::upf::work::Work;
use peregrine_wire::ethernet::{self, ethertype};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{gtpu, icmpv4, udp, Error as WireError};
use std::net::{Ipv4Addr, Ipv6Addr};

/// What pass 1 learned about a packet that the common path can finish: the lookup key
/// (which map by `kind`), the received QFI and the few facts of the inner (user) IP packet
/// the fast path reads (48 bytes; it was 96 with the whole inner [`Flow`], two `u128`
/// addresses of which only the destination is read). Anything past the fast path reads
/// the whole [`Flow`] again from the packet and its record (`Flow::inner`, which is what
/// pass 1 read: the packet is not changed between the passes), unless pass 1 kept it
/// (`flow`: the packets [`Work::pre`] reads, IPv6 among them, which the UPF's own
/// classifier does not take and which often take the general path).
///
/// Laid out (`repr(C)`) so pass 1 writes it with few stores: the bytes 32..40 (`inner_off`,
/// `kind`, `v6`, `flow`, `meta`, `qfi`) are constants on the UPF classifier's downlink
/// (one 64-bit store) and `kind`..`meta` on its uplink (one 32-bit store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(super) struct Pre {
    /// The inner packet's destination address (IPv4 in the low 32 bits).
    pub dst: u128,
    /// The lookup key as its map's `u64` (`KeyMap`'s `Into<u64>`): the TEID or the UE IPv4
    /// address zero-extended, the UE IPv6 /64 prefix (the lookup reads it without
    /// narrowing it first).
    pub key: u64,
    /// The inner IP packet's length (from its header).
    pub len: u32,
    /// With `meta`: the record's flow hash (see `proto`).
    pub hash: u32,
    /// The inner IP packet's offset in the frame.
    pub inner_off: u16,
    pub kind: u8,
    /// The inner packet is IPv6.
    pub v6: bool,
    /// Pass 1 kept the whole inner [`Flow`] beside this record.
    pub flow: bool,
    /// The packet's record is not written yet: pass 1's own classifier (`upf::quick`) left
    /// it to pass 3, which writes the final record once ([`Pre::quick_meta`] restamped) or,
    /// on any other way out, [`Pre::quick_meta`] itself ([`Pre::settle`]).
    pub meta: bool,
    pub qfi: Option<u8>,
    /// [`flow_port`](super::emit::flow_port) of the inner packet when pass 1 computed it
    /// (downlink), else 0 (never a flow port: those are at least 0xC000).
    pub port: u16,
    /// With `meta`: the record's L4 protocol (and `hash` its flow hash; the rest follows
    /// from `kind`, `key`, `qfi` and `inner_off`).
    pub proto: u8,
}

const _: () = assert!(std::mem::size_of::<Pre>() == 48);

impl Pre {
    /// A packet pass 1 found already decided (its disposition is not `Continue`).
    pub const SKIP: Pre = Pre {
        kind: KIND_SKIP,
        ..Pre::SLOW
    };

    /// Not for the common path (or not active): pass 3 runs [`Work::packet`].
    pub const SLOW: Pre = Pre {
        key: 0,
        dst: 0,
        len: 0,
        inner_off: 0,
        port: 0,
        kind: KIND_SLOW,
        qfi: None,
        v6: false,
        flow: false,
        meta: false,
        proto: 0,
        hash: 0,
    };

    /// The pass-1 record of a packet by `kind` and `key` whose inner packet `f` is at
    /// `inner_off`, with its flow port `port` (0: not computed).
    #[inline(always)]
    pub fn new(kind: u8, qfi: Option<u8>, inner_off: usize, key: u64, f: &Flow, port: u16) -> Pre {
        Pre {
            key,
            dst: f.dst,
            // At most 40 + 65535.
            len: f.len as u32,
            // Within a frame of at most 65535 bytes.
            inner_off: inner_off as u16,
            port,
            kind,
            qfi,
            v6: f.v6,
            flow: false,
            meta: false,
            proto: 0,
            hash: 0,
        }
    }

    /// The record the shared classifier writes for a frame of one of `upf::quick`'s two
    /// shapes this pass-1 record describes (`meta` set; `quick`'s tests check it against
    /// the classifier): Ethernet, an IPv4 header without options, then for a G-PDU (`kind`
    /// [`KIND_UL`], TEID `key`) the inner IPv4 packet at `inner_off`; the L4 header always
    /// complete.
    #[inline(always)]
    pub fn quick_meta(&self) -> PacketMeta {
        let ul = self.kind == KIND_UL;
        let qfi = if ul { self.qfi } else { None };
        PacketMeta {
            l3_off: ethernet::HEADER_LEN as u16,
            l4_off: (ethernet::HEADER_LEN + 20) as u16,
            inner_l3_off: self.inner_off,
            inner_l4_off: self.inner_off + 20,
            flags: flags::CLASSIFIED
                | flags::L4
                | if ul { flags::GPDU } else { 0 }
                | if qfi.is_some() { HAS_QFI } else { 0 },
            proto: self.proto,
            teid: if ul { self.key as u32 } else { 0 },
            qfi: qfi.unwrap_or(0),
            flow_hash: self.hash,
            ..PacketMeta::EMPTY
        }
    }

    /// Write the packet's record if pass 1 left it to pass 3 (`meta`): before any way out
    /// of pass 3 other than the fast path's forwarding, which writes the final one.
    #[inline(always)]
    pub fn settle<B: PacketBuf>(&self, p: &mut B) {
        if self.meta {
            *p.pkt_meta_mut() = self.quick_meta();
        }
    }
}

pub(super) const KIND_SLOW: u8 = 0;
/// Not active (another stage already decided the packet): pass 3 leaves it alone.
pub(super) const KIND_SKIP: u8 = 4;
/// G-PDU by TEID.
pub(super) const KIND_UL: u8 = 1;
/// N6 packet by UE IPv4 address.
pub(super) const KIND_DL4: u8 = 2;
/// N6 packet by UE IPv6 /64 prefix.
pub(super) const KIND_DL6: u8 = 3;

/// An IP packet's header facts, read at the offsets the classifier checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Flow {
    pub v6: bool,
    /// Addresses; IPv4 in the low 32 bits.
    pub src: u128,
    pub dst: u128,
    /// Upper-layer protocol.
    pub proto: u8,
    /// Ports for TCP/UDP in a first (or no) fragment.
    pub ports: Option<(u16, u16)>,
    /// ICMP / ICMPv6 type, if the packet is one (and not a later fragment).
    pub icmp_type: Option<u8>,
    /// Whole IP packet length (from the header).
    pub len: usize,
    pub df: bool,
    /// A fragment (IPv4 MF or offset; IPv6 Fragment header).
    pub frag: bool,
}

/// A 100-byte first-fragment flow with DF, for the phases' unit tests.
#[cfg(test)]
pub(super) fn test_flow(
    v6: bool,
    src: u128,
    dst: u128,
    proto: u8,
    ports: Option<(u16, u16)>,
) -> Flow {
    Flow {
        v6,
        src,
        dst,
        proto,
        ports,
        icmp_type: None,
        len: 100,
        df: true,
        frag: false,
    }
}

impl Flow {
    /// No flow (scratch before pass 1 writes one).
    pub const NONE: Flow = Flow {
        v6: false,
        src: 0,
        dst: 0,
        proto: 0,
        ports: None,
        icmp_type: None,
        len: 0,
        df: false,
        frag: false,
    };

    /// The facts of the IP header at `l3` whose L4 header is at `l4` (0: none). The
    /// classifier checked both, so the reads are in bounds; fixed-size views keep them to
    /// one bounds check each.
    #[inline]
    fn read(data: &[u8], l3: usize, l4: usize, v6: bool, proto: u8, has_l4: bool) -> Flow {
        let (src, dst, len, df) = if v6 {
            let h: &[u8; 40] = data[l3..l3 + 40].try_into().expect("40 bytes");
            let a = |i: usize| {
                let w: [u8; 16] = h[i..i + 16].try_into().expect("16 bytes");
                u128::from_be_bytes(w)
            };
            let plen = u16::from_be_bytes([h[4], h[5]]);
            (a(8), a(24), 40 + usize::from(plen), true)
        } else {
            let h: &[u8; 20] = data[l3..l3 + 20].try_into().expect("20 bytes");
            let a = |i: usize| u128::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
            let len = u16::from_be_bytes([h[2], h[3]]);
            (a(12), a(16), usize::from(len), h[6] & 0x40 != 0)
        };
        let mut f = Flow {
            v6,
            src,
            dst,
            proto,
            ports: None,
            icmp_type: None,
            len,
            df,
            frag: false,
        };
        if has_l4 {
            match proto {
                ip_protocol::UDP | ip_protocol::TCP => {
                    let p: &[u8; 4] = data[l4..l4 + 4].try_into().expect("4 bytes");
                    f.ports = Some((
                        u16::from_be_bytes([p[0], p[1]]),
                        u16::from_be_bytes([p[2], p[3]]),
                    ));
                }
                ip_protocol::ICMP | ip_protocol::IPV6_ICMP => f.icmp_type = Some(data[l4]),
                _ => {}
            }
        }
        f
    }

    /// The destination address of a classified record's outer IP header (IPv4 in the low
    /// 32 bits).
    #[inline]
    pub fn outer_dst(data: &[u8], m: &PacketMeta) -> u128 {
        let l3 = usize::from(m.l3_off);
        if m.has(flags::OUTER_V6) {
            let w: [u8; 16] = data[l3 + 24..l3 + 40].try_into().expect("16 bytes");
            u128::from_be_bytes(w)
        } else {
            let w: [u8; 4] = data[l3 + 16..l3 + 20].try_into().expect("4 bytes");
            u128::from(u32::from_be_bytes(w))
        }
    }

    /// The flow packet of a classified record (the inner packet of a G-PDU).
    #[inline]
    pub fn inner(data: &[u8], m: &PacketMeta) -> Flow {
        let mut f = Flow::read(
            data,
            usize::from(m.inner_l3_off),
            usize::from(m.inner_l4_off),
            m.has(flags::INNER_V6),
            m.proto,
            m.has(flags::L4),
        );
        f.frag = m.flags & (flags::FRAGMENT | FIRST_FRAGMENT) != 0;
        f
    }

    /// The outer packet of a classified record (the flow packet unless it is a G-PDU, whose
    /// outer header is an unfragmented UDP datagram).
    #[inline]
    pub fn outer(data: &[u8], m: &PacketMeta) -> Flow {
        if !m.has(flags::GPDU) {
            return Flow::inner(data, m);
        }
        Flow::read(
            data,
            usize::from(m.l3_off),
            usize::from(m.l4_off),
            m.has(flags::OUTER_V6),
            ip_protocol::UDP,
            true,
        )
    }
}

/// Whether `f` is an ICMP error message (never answered with another, RFC 1122 section
/// 3.2.2, RFC 4443 section 2.4 (e)).
pub(super) fn is_icmp_error(f: &Flow) -> bool {
    match (f.v6, f.proto, f.icmp_type) {
        (false, ip_protocol::ICMP, Some(t)) => matches!(
            t,
            icmpv4::msg_type::DST_UNREACHABLE
                | icmpv4::msg_type::REDIRECT
                | icmpv4::msg_type::TIME_EXCEEDED
                | icmpv4::msg_type::PARAM_PROBLEM
                | 4
        ),
        (true, ip_protocol::IPV6_ICMP, Some(t)) => t < 128,
        _ => false,
    }
}

impl Work<'_> {
    /// Whether the frame's destination MAC is unicast and ours (or we are promiscuous).
    #[inline]
    pub(super) fn for_us_unicast(&self, data: &[u8]) -> bool {
        let dst = ethernet::Frame::new_unchecked(data).dst_addr();
        !dst.is_multicast()
            && (self.cfg.promiscuous || self.macs.get(self.rx as usize) == Some(&dst))
    }

    /// Whether `f`'s destination is one of our GTP-U addresses.
    #[inline]
    pub(super) fn is_local(&self, f: &Flow) -> bool {
        self.is_local_dst(f.v6, f.dst)
    }

    /// Whether `dst` (IPv6 if `v6`, else IPv4 in the low 32 bits) is one of our GTP-U
    /// addresses.
    #[inline]
    pub(super) fn is_local_dst(&self, v6: bool, dst: u128) -> bool {
        if v6 {
            self.t.local_v6.contains(&Ipv6Addr::from(dst))
        } else {
            // One address (the usual configuration) without the slice search's loop.
            let a = Ipv4Addr::from(dst as u32);
            match self.t.local_v4.as_slice() {
                [one] => *one == a,
                all => all.contains(&a),
            }
        }
    }

    /// Whether a non-local packet is for the control core: our N6 address, IPv6 multicast.
    #[inline]
    pub(super) fn is_n6_own(&self, f: &Flow) -> bool {
        let own = if f.v6 {
            self.cfg.n6_v6.map(u128::from) == Some(f.dst)
        } else {
            self.cfg.n6_v4.map(|a| u128::from(u32::from(a))) == Some(f.dst)
        };
        own || (f.v6 && Ipv6Addr::from(f.dst).is_multicast())
    }

    /// Pass 1 (read-only): for the common cases (a G-PDU to one of our addresses; an N6
    /// packet to a UE) the lookup key (`Work::key_shard` then prefetches its map). Anything else
    /// (errors, path management, control traffic) is [`Pre::SLOW`].
    #[inline]
    /// The inner [`Flow`] of a packet it does not answer [`Pre::SLOW`] for goes to `flow`
    /// (and the record says so).
    pub fn pre(&self, data: &[u8], m: &PacketMeta, flow: &mut Flow) -> Pre {
        if !m.is_classified() || !self.for_us_unicast(data) {
            return Pre::SLOW;
        }
        if m.has(flags::GPDU) {
            // A G-PDU is UDP to port 2152 (the classifier checked): only the address is left.
            if !self.is_local_dst(m.has(flags::OUTER_V6), Flow::outer_dst(data, m)) {
                return Pre::SLOW;
            }
            *flow = Flow::inner(data, m);
            return Pre {
                flow: true,
                ..Pre::new(
                    KIND_UL,
                    m.has(HAS_QFI).then_some(m.qfi),
                    usize::from(m.inner_l3_off),
                    u64::from(m.teid),
                    flow,
                    0,
                )
            };
        }
        let f = Flow::inner(data, m);
        if self.is_local(&f) || self.is_n6_own(&f) {
            return Pre::SLOW;
        }
        // Encapsulation writes up to 78 bytes in front of the frame: a line the feed did not
        // touch. Start loading it now.
        prefetch_addr(data.as_ptr().wrapping_sub(1));
        prefetch_addr(data.as_ptr().wrapping_sub(80));
        let (kind, key) = if f.v6 {
            (KIND_DL6, (f.dst >> 64) as u64)
        } else {
            (KIND_DL4, u64::from(f.dst as u32))
        };
        *flow = f;
        Pre {
            flow: true,
            ..Pre::new(kind, None, usize::from(m.l3_off), key, &f, flow_port(&f))
        }
    }

    fn classify_err(&self, e: ClassifyError) -> Disposition {
        let d = &self.d;
        Disposition::drop_as(match e {
            ClassifyError::L2Truncated => d.l2_truncated,
            ClassifyError::UnsupportedEthertype(ethertype::ARP) => return Disposition::TO_CONTROL,
            ClassifyError::UnsupportedEthertype(_) => d.unsupported_ethertype,
            ClassifyError::Ipv4Truncated => d.ipv4_truncated,
            ClassifyError::Ipv4Malformed => d.ipv4_malformed,
            ClassifyError::Ipv4BadChecksum => d.ipv4_bad_checksum,
            ClassifyError::Ipv6Truncated => d.ipv6_truncated,
            ClassifyError::Ipv6Malformed => d.ipv6_malformed,
            ClassifyError::L4Malformed => d.l4_malformed,
        })
    }

    /// The general path of one packet: L2 checks, the classifier's verdict, then path
    /// management, uplink or downlink. The record is current (classified in pass 1, or
    /// unclassified because the classifier refused the frame).
    pub fn packet<B: PacketBuf>(&mut self, p: &mut B) -> Disposition {
        let d = self.d;
        let data = p.data();
        if data.len() < ethernet::HEADER_LEN {
            return Disposition::drop_as(d.l2_truncated);
        }
        let dst = ethernet::Frame::new_unchecked(data).dst_addr();
        if dst.is_multicast() {
            return Disposition::TO_CONTROL;
        }
        if !self.cfg.promiscuous && self.macs.get(self.rx as usize) != Some(&dst) {
            return Disposition::drop_as(d.l2_not_for_us);
        }
        let mut m = *p.pkt_meta();
        if !m.is_classified() {
            if let Err(e) = classify::classify(data, &mut m) {
                return self.classify_err(e);
            }
            *p.pkt_meta_mut() = m;
        }
        let data = p.data();
        let f = Flow::outer(data, &m);
        if self.is_local(&f) {
            if f.frag {
                return self.reassemble(p, &m);
            }
            if f.proto == ip_protocol::UDP && !f.frag {
                if let Some((_, gtpu::PORT)) = f.ports {
                    return self.gtpu(p, &m, &f);
                }
            }
            return Disposition::TO_CONTROL;
        }
        if self.is_n6_own(&f) {
            return Disposition::TO_CONTROL;
        }
        self.downlink(p, usize::from(m.l3_off), &f)
    }

    /// An outer fragment to one of our addresses: into the reassembly table
    /// ([`crate::upf::reasm`]); the fragment that completes a datagram gets the whole
    /// datagram written into its buffer (untagged Ethernet in front), is classified again
    /// and goes on as a received packet: a G-PDU to the uplink, anything else to the
    /// control core as before.
    fn reassemble<B: PacketBuf>(&mut self, p: &mut B, m: &PacketMeta) -> Disposition {
        let d = self.d;
        self.stats.count(Total::FragmentsReceived);
        let gone = self.reasm.expire(self.now);
        if gone > 0 {
            self.stats.count_n(Total::ReassemblyTimeouts, gone as u64);
        }
        let l3 = usize::from(m.l3_off);
        let (slot, len) = match self.reasm.insert(&p.data()[l3..], self.now) {
            Ok(Outcome::Held) => return Disposition::drop_as(d.reasm.held),
            Ok(Outcome::Complete { slot, len }) => (slot, len),
            Err(e) => return Disposition::drop_as(d.reasm.refused(e)),
        };
        let frame = ethernet::HEADER_LEN + len;
        let mut macs = [0u8; 12];
        macs.copy_from_slice(&p.data()[..12]);
        // Grow at the tail, and into the headroom only for what the tailroom lacks.
        let short = frame.saturating_sub(p.len() + p.tailroom());
        if (short > 0 && p.prepend(short).is_err()) || encap::set_len(p, frame).is_err() {
            self.reasm.abandon(slot);
            return Disposition::drop_as(d.reasm.no_room);
        }
        let et = if m.has(flags::OUTER_V6) {
            ethertype::IPV6
        } else {
            ethertype::IPV4
        };
        let data = p.data_mut();
        data[..12].copy_from_slice(&macs);
        data[12..14].copy_from_slice(&et.to_be_bytes());
        self.reasm.finish(slot, &mut data[ethernet::HEADER_LEN..]);
        self.stats.count(Total::DatagramsReassembled);
        let mut m = PacketMeta::EMPTY;
        if let Err(e) = classify::classify(p.data(), &mut m) {
            return self.classify_err(e);
        }
        *p.pkt_meta_mut() = m;
        let f = Flow::outer(p.data(), &m);
        if f.proto == ip_protocol::UDP && !f.frag {
            if let Some((_, gtpu::PORT)) = f.ports {
                return self.gtpu(p, &m, &f);
            }
        }
        Disposition::TO_CONTROL
    }

    /// A GTP-U message to one of our addresses (TS 29.281 section 7): path management
    /// answered or handed to the control core, G-PDUs to the uplink lookup.
    fn gtpu<B: PacketBuf>(&mut self, p: &mut B, m: &PacketMeta, f: &Flow) -> Disposition {
        let d = self.d;
        let l3 = usize::from(m.l3_off);
        let l4 = usize::from(m.l4_off);
        let gtp_off = l4 + udp::HEADER_LEN;
        if m.has(flags::GPDU) {
            let qfi = m.has(HAS_QFI).then_some(m.qfi);
            let inner = Flow::inner(p.data(), m);
            return self.uplink(p, l3, l4, f, gtp_off, m.teid, qfi, &inner);
        }
        // Not a G-PDU the classifier could take apart: read the header to say why.
        let data = p.data();
        let ulen = udp::Packet::new_unchecked(&data[l4..]).length() as usize;
        let Some(msg) = data.get(gtp_off..l4 + ulen) else {
            return Disposition::drop_as(d.l4_malformed);
        };
        let Ok(g) = gtpu::Header::new_checked(msg) else {
            return Disposition::drop_as(d.gtpu_malformed);
        };
        match g.msg_type() {
            gtpu::msg_type::G_PDU => {}
            gtpu::msg_type::ECHO_REQUEST => {
                let seq = g.seq_number().unwrap_or(0);
                return self.echo_reply(p, l3, l4, f, seq);
            }
            gtpu::msg_type::ECHO_RESPONSE | gtpu::msg_type::SUPPORTED_EXT_HEADERS_NOTIFICATION => {
                return Disposition::TO_CONTROL
            }
            gtpu::msg_type::ERROR_INDICATION => {
                self.stats.count(Total::ErrorIndicationsReceived);
                return Disposition::TO_CONTROL;
            }
            gtpu::msg_type::END_MARKER => {
                self.stats.count(Total::EndMarkersReceived);
                return Disposition::drop_as(d.end_marker);
            }
            _ => return Disposition::drop_as(d.gtpu_unsupported_message),
        }
        let teid = g.teid();
        let qfi = match g.pdu_session() {
            Ok(r) => r.map(|r| r.qfi()),
            // An unknown PDU type: no QFI.
            Err(WireError::Unsupported) => None,
            Err(_) => return Disposition::drop_as(d.gtpu_malformed),
        };
        // A G-PDU whose inner packet does not parse: unknown TEIDs still get their Error
        // Indication, known ones drop as inner_malformed.
        let sq = qfi.unwrap_or(0);
        if self.t.teid_candidates(teid).is_none() {
            return self.error_indication(p, l3, l4, f, gtp_off, teid, sq);
        }
        self.drop_q(Direction::Uplink, sq, d.inner_malformed)
    }
}
