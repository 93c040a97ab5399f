//! Software TCP/UDP checksums for ports whose peers leave them partial (docs/upf.md,
//! "Checksum offload on veths").
//!
//! A Linux veth (or any device) with transmit checksum offload hands the frame on with
//! `CHECKSUM_PARTIAL`: the L4 checksum field holds only the pseudo-header sum and whoever
//! transmits is to finish it. `net_af_packet` delivers such frames as they are (the kernel
//! marks them `TP_STATUS_CSUMNOTREADY`, which DPDK 22.11's driver does not pass on: its mbufs
//! carry no RX checksum flags), so a UPF that forwards them sends TCP segments every receiver
//! drops. On the ports `[upf] fix_l4_checksums` names, the UPF recomputes the inner TCP/UDP
//! checksum (RFC 793 / RFC 768 with the pseudo-header; RFC 8200 section 8.1 for IPv6) of every
//! packet it forwards and counts the ones it changed.

use peregrine_wire::checksum::{combine, finish, pseudo_v4, pseudo_v6, sum};

const TCP: u8 = 6;
const UDP: u8 = 17;

/// Recompute the TCP or UDP checksum of the IP packet `ip` (its header at 0, `ip.len()` the
/// IP length). Returns whether the field changed. Fragments, other protocols, IPv6 with
/// extension headers, truncated headers and IPv4 UDP without checksum (0) are left alone.
pub fn fix_l4_checksum(ip: &mut [u8]) -> bool {
    let Some(&b0) = ip.first() else {
        return false;
    };
    let (l4_off, proto, pseudo) = match b0 >> 4 {
        4 => {
            let ihl = usize::from(b0 & 0x0f) * 4;
            if ip.len() < 20 || ihl < 20 || ip.len() < ihl {
                return false;
            }
            // More fragments or a fragment offset: no whole L4 segment here.
            if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
                return false;
            }
            let proto = ip[9];
            let l4_len = ip.len() - ihl;
            let Ok(l4_len16) = u16::try_from(l4_len) else {
                return false;
            };
            let src = [ip[12], ip[13], ip[14], ip[15]];
            let dst = [ip[16], ip[17], ip[18], ip[19]];
            (ihl, proto, pseudo_v4(src, dst, proto, l4_len16))
        }
        6 => {
            if ip.len() < 40 {
                return false;
            }
            let proto = ip[6];
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&ip[8..24]);
            dst.copy_from_slice(&ip[24..40]);
            (
                40,
                proto,
                pseudo_v6(src, dst, proto, (ip.len() - 40) as u32),
            )
        }
        _ => return false,
    };
    let field = match proto {
        TCP if ip.len() >= l4_off + 20 => l4_off + 16,
        UDP if ip.len() >= l4_off + 8 => l4_off + 6,
        _ => return false,
    };
    let old = [ip[field], ip[field + 1]];
    if proto == UDP && b0 >> 4 == 4 && old == [0, 0] {
        return false;
    }
    ip[field] = 0;
    ip[field + 1] = 0;
    let mut c = finish(combine(pseudo, sum(&ip[l4_off..])));
    if proto == UDP && c == 0 {
        // RFC 768: a computed 0 is sent as all ones.
        c = 0xffff;
    }
    ip[field..field + 2].copy_from_slice(&c.to_be_bytes());
    old != c.to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 TCP segment as a veth with tx checksum offload hands it on: the checksum
    /// field holds the folded pseudo-header sum (what Linux's `csum_tcpudp_magic` leaves
    /// before the device finishes it).
    fn partial_tcp_v4() -> Vec<u8> {
        let payload = b"hello through a veth";
        let mut p = vec![
            0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, TCP, 0, 0, 198, 51, 100, 10, 10, 45, 0, 2,
        ];
        let tcp_len = 20 + payload.len();
        let total = (20 + tcp_len) as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&[
            0x1f, 0x90, 0xc3, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
        ]);
        p.extend_from_slice(payload);
        let ps = pseudo_v4([198, 51, 100, 10], [10, 45, 0, 2], TCP, tcp_len as u16);
        let folded = !finish(ps);
        p[36..38].copy_from_slice(&folded.to_be_bytes());
        p
    }

    fn verify(ip: &[u8], l4: usize, proto: u8) -> bool {
        let ps = if ip[0] >> 4 == 4 {
            pseudo_v4(
                ip[12..16].try_into().unwrap(),
                ip[16..20].try_into().unwrap(),
                proto,
                (ip.len() - l4) as u16,
            )
        } else {
            pseudo_v6(
                ip[8..24].try_into().unwrap(),
                ip[24..40].try_into().unwrap(),
                proto,
                (ip.len() - l4) as u32,
            )
        };
        finish(combine(ps, sum(&ip[l4..]))) == 0
    }

    #[test]
    fn partial_tcp_checksum_is_completed_once() {
        let mut p = partial_tcp_v4();
        assert!(!verify(&p, 20, TCP), "partial checksums do not verify");
        assert!(fix_l4_checksum(&mut p));
        assert!(verify(&p, 20, TCP));
        assert!(
            !fix_l4_checksum(&mut p),
            "a correct checksum is left as it is"
        );
    }

    #[test]
    fn udp_v6_and_the_cases_left_alone() {
        let mut p = vec![0x60, 0, 0, 0, 0, 12, UDP, 64];
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[
            0x20, 0x01, 0x0d, 0xb8, 0, 0x45, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
        ]);
        p.extend_from_slice(&[0x13, 0x88, 0x13, 0x89, 0, 12, 0xab, 0xcd, 1, 2, 3, 4]);
        assert!(fix_l4_checksum(&mut p));
        assert!(verify(&p, 40, UDP));
        // IPv4 UDP without checksum, a later fragment, a truncated header, not IP.
        let mut nocsum = vec![
            0x45, 0, 0, 28, 0, 0, 0, 0, 64, UDP, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
        ];
        nocsum.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
        assert!(!fix_l4_checksum(&mut nocsum));
        assert_eq!(&nocsum[26..28], &[0, 0]);
        let mut frag = partial_tcp_v4();
        frag[6] = 0x20; // MF
        let before = frag.clone();
        assert!(!fix_l4_checksum(&mut frag));
        assert_eq!(frag, before);
        assert!(!fix_l4_checksum(&mut partial_tcp_v4()[..30].to_vec()));
        assert!(!fix_l4_checksum(&mut [0x10, 0, 0]));
        assert!(!fix_l4_checksum(&mut []));
    }
}
