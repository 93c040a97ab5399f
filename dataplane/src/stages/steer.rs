//! Flow steering: every packet of one UE is processed by one worker, whatever queue the NIC's
//! RSS put it on (a gNB's GTP-U arrives on one RSS queue; most NICs cannot hash GTP-U inner
//! headers). Per-UE state (QER meters, URR counters) then lives on one worker, so a session's
//! MBR is enforced once, not once per worker.
//!
//! The UE address is read from the packet metadata the classifier filled
//! ([`PacketMeta`], no parsing here): for an uplink G-PDU the inner packet's source address,
//! otherwise (downlink N6 traffic) the destination address of the flow packet. An IPv6 UE is
//! identified by its /64 prefix (TS 23.501 section 5.8.2.2.3: a UE is given a /64 and may use
//! any address in it). The owner is `hash(UE key) % workers` (the MurmurHash3 64-bit
//! finaliser as the hash: cheap and well mixed in the low bits); a packet for another worker
//! is handed off with [`Disposition::handoff`] to resume at the stage after this one.
//! Packets it cannot attribute (not classified, not IP, truncated) stay on the receiving
//! worker. With one worker the daemon does not add this stage.

use crate::buffer::PacketBuf;
use crate::meta::{flags, PacketMeta};
use crate::runtime::{Batch, Context, Disposition, Stage};

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Steer {
    workers: u64,
    resume_at: u8,
}

impl Steer {
    /// Steer among `workers` workers (indices `0..workers`, `Context::worker`); handed-off
    /// packets resume at stage index `resume_at` (this stage's index + 1).
    pub fn new(workers: usize, resume_at: u8) -> Steer {
        Steer {
            workers: workers.max(1) as u64,
            resume_at,
        }
    }

    /// The worker that owns `pkt`'s UE, if it can be attributed.
    #[inline]
    pub fn owner(&self, data: &[u8], m: &PacketMeta) -> Option<usize> {
        ue_key(data, m).map(|k| (fmix64(k) % self.workers) as usize)
    }
}

/// The UE key of a classified packet: an IPv4 UE address, or the /64 prefix of an IPv6 one
/// (see the module docs); `None` when the packet cannot be attributed.
#[inline]
pub fn ue_key(data: &[u8], m: &PacketMeta) -> Option<u64> {
    if !m.is_classified() || m.inner_l3_off == 0 {
        return None;
    }
    let l3 = usize::from(m.inner_l3_off);
    let uplink = m.has(flags::GPDU);
    if m.has(flags::INNER_V6) {
        // Source at 8..24, destination at 24..40 (RFC 8200 section 3).
        let at = l3 + if uplink { 8 } else { 24 };
        let b: [u8; 8] = data.get(at..at + 8)?.try_into().ok()?;
        Some(u64::from_be_bytes(b))
    } else {
        // Source at 12..16, destination at 16..20 (RFC 791 section 3.1); bit 32 keeps the
        // IPv4 keys apart from IPv6 prefixes.
        let at = l3 + if uplink { 12 } else { 16 };
        let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        Some(1 << 32 | u64::from(u32::from_be_bytes(b)))
    }
}

/// The MurmurHash3 64-bit finaliser (Appleby): every input bit affects every output bit.
#[inline]
pub const fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

impl<B: PacketBuf> Stage<B> for Steer {
    fn name(&self) -> &'static str {
        "steer"
    }

    #[inline]
    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        let me = cx.worker;
        let resume_at = self.resume_at;
        batch.for_each_active(|p| match self.owner(p.data(), p.pkt_meta()) {
            Some(w) if w != me => Disposition::handoff(w as u16, resume_at),
            _ => Disposition::CONTINUE,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::Direction;
    use crate::runtime::Action;
    use crate::OwnedBuf;

    /// A buffer with a 14-byte Ethernet header and a minimal IP header at 14 (v4 or v6),
    /// `src`/`dst` filled with `a`/`b`, classified as a plain (downlink) packet.
    fn plain(v6: bool, a: u8, b: u8) -> OwnedBuf {
        let mut f = vec![0u8; 14 + 40];
        if v6 {
            f[14 + 8..14 + 24].fill(a);
            f[14 + 24..14 + 40].fill(b);
        } else {
            f[14 + 12..14 + 16].fill(a);
            f[14 + 16..14 + 20].fill(b);
        }
        let mut p = OwnedBuf::from_slice(&f);
        let m = p.pkt_meta_mut();
        m.flags = flags::CLASSIFIED | if v6 { flags::INNER_V6 } else { 0 };
        m.l3_off = 14;
        m.inner_l3_off = 14;
        m.dir = Direction::Downlink as u8;
        p
    }

    #[test]
    fn keys_follow_the_ue_side_of_the_packet() {
        let p = plain(false, 1, 2);
        assert_eq!(ue_key(p.data(), p.pkt_meta()), Some(1 << 32 | 0x0202_0202));
        // An uplink G-PDU's UE is the inner source.
        let mut g = plain(false, 1, 2);
        g.pkt_meta_mut().flags |= flags::GPDU;
        assert_eq!(ue_key(g.data(), g.pkt_meta()), Some(1 << 32 | 0x0101_0101));
        let p6 = plain(true, 3, 4);
        assert_eq!(
            ue_key(p6.data(), p6.pkt_meta()),
            Some(0x0404_0404_0404_0404)
        );
        let mut g6 = plain(true, 3, 4);
        g6.pkt_meta_mut().flags |= flags::GPDU;
        assert_eq!(
            ue_key(g6.data(), g6.pkt_meta()),
            Some(0x0303_0303_0303_0303)
        );
    }

    #[test]
    fn ipv6_ue_is_its_slash_64() {
        let mut a = plain(true, 0, 0);
        let mut b = plain(true, 0, 0);
        a.data_mut()[14 + 24..14 + 32].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 7]);
        b.data_mut()[14 + 24..14 + 32].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 7]);
        a.data_mut()[14 + 39] = 1;
        b.data_mut()[14 + 39] = 0xfe;
        assert_eq!(
            ue_key(a.data(), a.pkt_meta()),
            ue_key(b.data(), b.pkt_meta())
        );
    }

    #[test]
    fn unattributable_packets_have_no_key() {
        let mut p = plain(false, 1, 2);
        p.pkt_meta_mut().flags = 0;
        assert_eq!(ue_key(p.data(), p.pkt_meta()), None, "not classified");
        let mut p = plain(false, 1, 2);
        p.pkt_meta_mut().inner_l3_off = 0;
        assert_eq!(ue_key(p.data(), p.pkt_meta()), None, "no IP header (ARP)");
        let mut p = plain(true, 1, 2);
        p.trim(10).unwrap();
        assert_eq!(ue_key(p.data(), p.pkt_meta()), None, "truncated");
        let mut p = plain(false, 1, 2);
        p.pkt_meta_mut().inner_l3_off = u16::MAX;
        assert_eq!(ue_key(p.data(), p.pkt_meta()), None, "offset past the end");
    }

    #[test]
    fn owners_spread_and_stage_hands_off_only_foreign_ues() {
        let s = Steer::new(2, 3);
        let mut per = [0usize; 2];
        for ue in 0..=255u8 {
            let p = plain(false, 9, ue);
            per[s.owner(p.data(), p.pkt_meta()).unwrap()] += 1;
        }
        assert!(per[0] > 96 && per[1] > 96, "{per:?}");
        let mut batch: Batch<OwnedBuf> = Batch::new();
        for ue in 0..32u8 {
            batch.pkts.push(plain(false, 9, ue));
        }
        let mut arp = OwnedBuf::from_slice(&[0u8; 60]);
        arp.pkt_meta_mut().flags = 0;
        batch.pkts.push(arp);
        batch.reset_dispositions();
        let mut stage = s.clone();
        Stage::process(&mut stage, &mut batch, &Context::fixed(0, 1));
        for (i, d) in batch.dispositions().enumerate() {
            if i == 32 {
                assert_eq!(d, Disposition::CONTINUE, "ARP stays");
                continue;
            }
            let p = &batch.pkts[i];
            match s.owner(p.data(), p.pkt_meta()).unwrap() {
                1 => assert_eq!(d, Disposition::CONTINUE),
                w => assert_eq!(
                    d.action(),
                    Action::Handoff {
                        worker: w as u16,
                        resume_at: 3
                    }
                ),
            }
        }
    }

    #[test]
    fn fmix64_mixes() {
        assert_eq!(fmix64(0), 0);
        assert_ne!(fmix64(1), 1);
        // Sequential keys (consecutive UE addresses) split evenly on the low bit.
        let odd = (0..1000u64).filter(|&k| fmix64(k) & 1 == 1).count();
        assert!((440..=560).contains(&odd), "{odd}");
    }
}
