//! PFCP messages for tests (TS 29.244): [`samples`] holds one of every message type with
//! most typed IEs somewhere inside; [`requests`] builds the requests an SMF sends; `node`
//! (feature `n4`) drives an N4 node with them; `compile` (feature `n4`) has the builders with
//! every knob that the rule compiler's tests use.

#[cfg(feature = "n4")]
pub mod compile;
#[cfg(feature = "n4")]
pub mod node;
pub mod requests;
pub mod samples;

/// The PFCP header of a captured Ethernet / IPv4 / UDP frame (a capture on `lo`): its
/// message type and, when the S flag is set, its SEID (TS 29.244 section 7.2.2). `None`
/// when the frame is too short to hold one.
pub fn header_in_frame(frame: &[u8]) -> Option<(u8, Option<u64>)> {
    let ihl = usize::from(frame.get(14)? & 0x0f) * 4;
    let pfcp = frame.get(14 + ihl + 8..)?;
    let ty = *pfcp.get(1)?;
    if pfcp[0] & 0x01 == 0 {
        return Some((ty, None));
    }
    let seid = pfcp.get(4..12)?;
    Some((ty, Some(u64::from_be_bytes(seid.try_into().ok()?))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn headers_are_found_in_captured_frames() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let hb = [0x20, 1, 0, 4, 0, 0, 1, 0];
        let f = crate::frames::udp_frame(lo, lo, 8805, 8805, &hb);
        assert_eq!(header_in_frame(&f), Some((1, None)));
        let mut rep = vec![0x21, 56, 0, 12];
        rep.extend_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        rep.extend_from_slice(&[0, 0, 1, 0]);
        let f = crate::frames::udp_frame(lo, lo, 8805, 8805, &rep);
        assert_eq!(header_in_frame(&f), Some((56, Some(0x0102_0304_0506_0708))));
        assert_eq!(header_in_frame(&f[..f.len() - rep.len() + 5]), None);
    }
}
