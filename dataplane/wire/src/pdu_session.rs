//! PDU Session Container extension header (3GPP TS 38.415 section 5.5.2, GTP-U ext type 0x85).
//!
//! As a GTP-U extension header (TS 29.281 section 5.2.1) the container is framed as
//! `[length in 4-octet units][content ...][next extension header type]`. The [`Packet`] view
//! here covers only the *content*, which is what [`crate::gtpu::Header::extensions`] yields;
//! [`Repr::emit`] writes the whole framed extension header.
//!
//! Content layout (TS 38.415 section 5.5.2.1, DL PDU SESSION INFORMATION, PDU type 0):
//!
//! ```text
//! octet 1:  PDU Type (4) | QMP | SNP | MSNP | spare
//! octet 2:  PPP | RQI | QFI (6)
//! octet 3:  PPI (3) | spare (5)                 -- if PPP
//! 8 octets: DL Sending Time Stamp               -- if QMP
//! 3 octets: DL QFI Sequence Number              -- if SNP
//! 4 octets: DL MBS QFI Sequence Number          -- if MSNP
//! padding to make the extension header a multiple of 4 octets (section 5.5.3.5)
//! ```
//!
//! Content layout (TS 38.415 section 5.5.2.2, UL PDU SESSION INFORMATION, PDU type 1):
//!
//! ```text
//! octet 1:  PDU Type (4) | QMP | DL Delay Ind. | UL Delay Ind. | SNP
//! octet 2:  N3/N9 Delay Ind. | New IE Flag | QFI (6)
//! optional time stamps, delay results, sequence number, new IE flags ... (tolerated, not read)
//! ```
//!
//! The DL optional fields are bounds-checked and readable; the UL optional fields are
//! tolerated but not interpreted (only the first two octets are required).

use crate::{be32, Error, Result};

/// GTP-U extension header type of the PDU Session Container (TS 29.281 section 5.2.1).
pub const EXT_TYPE: u8 = 0x85;

/// PDU Type values (TS 38.415 section 5.5.3.1).
pub mod pdu_type {
    /// DL PDU SESSION INFORMATION.
    pub const DL: u8 = 0;
    /// UL PDU SESSION INFORMATION.
    pub const UL: u8 = 1;
}

mod field {
    pub const PDU_TYPE: usize = 0;
    pub const QFI: usize = 1;
    /// First octet after the two mandatory ones (PPI in DL when PPP is set).
    pub const OPTIONAL: usize = 2;
}

/// Length of the two mandatory content octets.
pub const MIN_CONTENT_LEN: usize = field::OPTIONAL;

/// Octet 1 bits (TS 38.415 sections 5.5.2.1 and 5.5.2.2).
mod bits {
    pub const QMP: u8 = 0x08;
    pub const DL_SNP: u8 = 0x04;
    pub const DL_MSNP: u8 = 0x02;
    pub const UL_DL_DELAY_IND: u8 = 0x04;
    pub const UL_UL_DELAY_IND: u8 = 0x02;
    pub const UL_SNP: u8 = 0x01;
    // Octet 2.
    pub const PPP: u8 = 0x80;
    pub const RQI: u8 = 0x40;
    pub const N3N9_DELAY_IND: u8 = 0x80;
    pub const NEW_IE_FLAG: u8 = 0x40;
    pub const QFI_MASK: u8 = 0x3f;
}

const DL_SENDING_TS_LEN: usize = 8;
const DL_QFI_SN_LEN: usize = 3;
const DL_MBS_QFI_SN_LEN: usize = 4;

/// A read-only view of a PDU Session Container's content (the bytes between the extension
/// header's length octet and its next-type octet, padding included).
///
/// After [`Packet::new_checked`] the two mandatory octets are present and, for DL, every
/// optional field the flags announce fits.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking; accessors may panic on short buffers. Prefer [`Packet::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap and check lengths (see [`Packet::check_len`]).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` if the mandatory octets or a flagged DL optional field do not fit.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < MIN_CONTENT_LEN {
            return Err(Error::Truncated);
        }
        if self.pdu_type() == pdu_type::DL && self.dl_fields_end() > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn octet1(&self) -> u8 {
        self.buffer.as_ref()[field::PDU_TYPE]
    }

    fn octet2(&self) -> u8 {
        self.buffer.as_ref()[field::QFI]
    }

    fn is_dl(&self) -> bool {
        self.pdu_type() == pdu_type::DL
    }

    fn is_ul(&self) -> bool {
        self.pdu_type() == pdu_type::UL
    }

    /// PDU Type (section 5.5.3.1): [`pdu_type::DL`] or [`pdu_type::UL`]; others are reserved.
    pub fn pdu_type(&self) -> u8 {
        self.octet1() >> 4
    }

    /// QoS Flow Identifier (section 5.5.3.3), in both DL and UL.
    pub fn qfi(&self) -> u8 {
        self.octet2() & bits::QFI_MASK
    }

    /// QoS Monitoring Packet flag (section 5.5.3.8), in both DL and UL.
    pub fn qmp(&self) -> bool {
        self.octet1() & bits::QMP != 0
    }

    /// Sequence Number Presence (DL and UL use different bit positions).
    pub fn snp(&self) -> bool {
        match self.pdu_type() {
            pdu_type::DL => self.octet1() & bits::DL_SNP != 0,
            pdu_type::UL => self.octet1() & bits::UL_SNP != 0,
            _ => false,
        }
    }

    /// DL: MBS Sequence Number Presence.
    pub fn msnp(&self) -> bool {
        self.is_dl() && self.octet1() & bits::DL_MSNP != 0
    }

    /// DL: Paging Policy Presence (section 5.5.3.7).
    pub fn ppp(&self) -> bool {
        self.is_dl() && self.octet2() & bits::PPP != 0
    }

    /// DL: Reflective QoS Indicator (section 5.5.3.4).
    pub fn rqi(&self) -> bool {
        self.is_dl() && self.octet2() & bits::RQI != 0
    }

    /// UL: DL Delay Indication.
    pub fn dl_delay_ind(&self) -> bool {
        self.is_ul() && self.octet1() & bits::UL_DL_DELAY_IND != 0
    }

    /// UL: UL Delay Indication.
    pub fn ul_delay_ind(&self) -> bool {
        self.is_ul() && self.octet1() & bits::UL_UL_DELAY_IND != 0
    }

    /// UL: N3/N9 Delay Indication.
    pub fn n3n9_delay_ind(&self) -> bool {
        self.is_ul() && self.octet2() & bits::N3N9_DELAY_IND != 0
    }

    /// UL: New IE Flag (a further flags octet follows the other optional fields).
    pub fn new_ie_flag(&self) -> bool {
        self.is_ul() && self.octet2() & bits::NEW_IE_FLAG != 0
    }

    /// DL: Paging Policy Indicator (section 5.5.3.6), present when PPP is set.
    pub fn ppi(&self) -> Option<u8> {
        self.ppp()
            .then(|| self.buffer.as_ref()[field::OPTIONAL] >> 5)
    }

    /// Offset of the DL Sending Time Stamp (after the PPI octet, if any).
    fn dl_ts_offset(&self) -> usize {
        field::OPTIONAL + self.ppp() as usize
    }

    fn dl_sn_offset(&self) -> usize {
        self.dl_ts_offset() + if self.qmp() { DL_SENDING_TS_LEN } else { 0 }
    }

    fn dl_mbs_sn_offset(&self) -> usize {
        self.dl_sn_offset() + if self.snp() { DL_QFI_SN_LEN } else { 0 }
    }

    /// End of the DL fields the flags announce (the rest is padding).
    fn dl_fields_end(&self) -> usize {
        self.dl_mbs_sn_offset() + if self.msnp() { DL_MBS_QFI_SN_LEN } else { 0 }
    }

    /// DL: Sending Time Stamp (section 5.5.3.9, NTP 64-bit format), present when QMP is set.
    pub fn dl_sending_timestamp(&self) -> Option<u64> {
        if !(self.is_dl() && self.qmp()) {
            return None;
        }
        let o = self.dl_ts_offset();
        let b = &self.buffer.as_ref()[o..o + DL_SENDING_TS_LEN];
        Some(u64::from_be_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }

    /// DL: QFI Sequence Number (24 bits), present when SNP is set.
    pub fn dl_qfi_seq(&self) -> Option<u32> {
        if !(self.is_dl() && self.snp()) {
            return None;
        }
        let o = self.dl_sn_offset();
        let b = &self.buffer.as_ref()[o..o + DL_QFI_SN_LEN];
        Some(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }

    /// DL: MBS QFI Sequence Number (32 bits), present when MSNP is set.
    pub fn dl_mbs_qfi_seq(&self) -> Option<u32> {
        if !self.msnp() {
            return None;
        }
        Some(be32(&self.buffer.as_ref()[self.dl_mbs_sn_offset()..]))
    }
}

/// High-level representation of a PDU Session Container: the fields a UPF acts on.
///
/// DL optional fields other than the PPI (time stamps, sequence numbers) and all UL
/// optional fields are dropped by [`Repr::parse`] and never emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr {
    /// DL PDU SESSION INFORMATION (PDU type 0).
    Dl {
        /// QoS Flow Identifier, 0..=63.
        qfi: u8,
        /// Reflective QoS Indicator.
        rqi: bool,
        /// Paging Policy Indicator, 0..=7; `Some` sets PPP.
        ppi: Option<u8>,
    },
    /// UL PDU SESSION INFORMATION (PDU type 1).
    Ul {
        /// QoS Flow Identifier, 0..=63.
        qfi: u8,
    },
}

impl Repr {
    /// `Unsupported` for PDU types other than DL and UL.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        match packet.pdu_type() {
            pdu_type::DL => Ok(Repr::Dl {
                qfi: packet.qfi(),
                rqi: packet.rqi(),
                ppi: packet.ppi(),
            }),
            pdu_type::UL => Ok(Repr::Ul { qfi: packet.qfi() }),
            _ => Err(Error::Unsupported),
        }
    }

    pub const fn qfi(&self) -> u8 {
        match *self {
            Repr::Dl { qfi, .. } | Repr::Ul { qfi } => qfi,
        }
    }

    /// Content bytes before padding.
    pub const fn content_len(&self) -> usize {
        match self {
            Repr::Dl { ppi: Some(_), .. } => MIN_CONTENT_LEN + 1,
            _ => MIN_CONTENT_LEN,
        }
    }

    /// Length of the whole extension header (length octet, content, padding, next-type
    /// octet): a multiple of 4.
    pub const fn buffer_len(&self) -> usize {
        (self.content_len() + 2).div_ceil(4) * 4
    }

    /// Write the whole extension header into the first [`Repr::buffer_len`] bytes of `buf`,
    /// with next extension header type 0 ("no more extension headers").
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        self.emit_with_next(buf, 0)
    }

    /// As [`Repr::emit`], with the given next extension header type.
    /// `Malformed` if the QFI exceeds 63 or the PPI exceeds 7.
    pub fn emit_with_next(&self, buf: &mut [u8], next_type: u8) -> Result<()> {
        let n = self.buffer_len();
        if buf.len() < n {
            return Err(Error::BufferTooSmall);
        }
        if self.qfi() > bits::QFI_MASK {
            return Err(Error::Malformed);
        }
        let out = &mut buf[..n];
        out.fill(0);
        out[0] = (n / 4) as u8;
        let content = &mut out[1..];
        match *self {
            Repr::Dl { qfi, rqi, ppi } => {
                content[field::PDU_TYPE] = pdu_type::DL << 4;
                let mut o2 = qfi;
                if rqi {
                    o2 |= bits::RQI;
                }
                if let Some(ppi) = ppi {
                    if ppi > 7 {
                        return Err(Error::Malformed);
                    }
                    o2 |= bits::PPP;
                    content[field::OPTIONAL] = ppi << 5;
                }
                content[field::QFI] = o2;
            }
            Repr::Ul { qfi } => {
                content[field::PDU_TYPE] = pdu_type::UL << 4;
                content[field::QFI] = qfi;
            }
        }
        out[n - 1] = next_type;
        Ok(())
    }
}

/// Fuzz entry: treat `data` as container content; parse, read every field, re-emit, re-parse.
/// Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.pdu_type(),
        p.qfi(),
        p.qmp(),
        p.snp(),
        p.msnp(),
        p.ppp(),
        p.rqi(),
    );
    let _ = (
        p.dl_delay_ind(),
        p.ul_delay_ind(),
        p.n3n9_delay_ind(),
        p.new_ie_flag(),
    );
    let _ = (
        p.ppi(),
        p.dl_sending_timestamp(),
        p.dl_qfi_seq(),
        p.dl_mbs_qfi_seq(),
    );
    let Ok(r) = Repr::parse(&p) else { return };
    let mut out = [0u8; 8];
    r.emit_with_next(&mut out, 0x40).expect("valid repr fits");
    let n = r.buffer_len();
    assert_eq!(n % 4, 0);
    assert_eq!(out[0] as usize * 4, n);
    assert_eq!(out[n - 1], 0x40);
    let q = Packet::new_checked(&out[1..n - 1]).expect("emitted content checks");
    assert_eq!(Repr::parse(&q), Ok(r));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From a captured DL G-PDU: `85 | 01 00 09 00` (1 unit, DL, QFI 9, next type 0).
    const DL_EXT: [u8; 4] = [0x01, 0x00, 0x09, 0x00];
    /// UL from a gNB: `01 10 01 00` (1 unit, UL, QFI 1, next type 0).
    const UL_EXT: [u8; 4] = [0x01, 0x10, 0x01, 0x00];

    fn content(ext: &[u8]) -> &[u8] {
        &ext[1..ext[0] as usize * 4 - 1]
    }

    #[test]
    fn dl_capture() {
        let p = Packet::new_checked(content(&DL_EXT)).unwrap();
        assert_eq!(p.pdu_type(), pdu_type::DL);
        assert_eq!(p.qfi(), 9);
        assert!(!p.ppp() && !p.rqi() && !p.qmp() && !p.snp() && !p.msnp());
        assert_eq!(p.ppi(), None);
        assert_eq!(p.dl_sending_timestamp(), None);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr::Dl {
                qfi: 9,
                rqi: false,
                ppi: None
            }
        );
        assert_eq!(r.buffer_len(), 4);
        let mut out = [0xffu8; 4];
        r.emit(&mut out).unwrap();
        assert_eq!(out, DL_EXT);
    }

    #[test]
    fn ul_capture() {
        let p = Packet::new_checked(content(&UL_EXT)).unwrap();
        assert_eq!(p.pdu_type(), pdu_type::UL);
        assert_eq!(p.qfi(), 1);
        // DL-only accessors read as absent on UL.
        assert!(!p.ppp() && !p.rqi());
        assert_eq!(p.ppi(), None);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r, Repr::Ul { qfi: 1 });
        let mut out = [0u8; 4];
        r.emit(&mut out).unwrap();
        assert_eq!(out, UL_EXT);
    }

    #[test]
    fn dl_with_ppi_rqi_is_two_units() {
        // PPP=1 RQI=1 QFI=9 -> 0xc9; PPI=5 -> 0xa0; 3 padding octets; next type 0.
        let ext = [0x02, 0x00, 0xc9, 0xa0, 0x00, 0x00, 0x00, 0x00];
        let p = Packet::new_checked(content(&ext)).unwrap();
        assert!(p.ppp() && p.rqi());
        assert_eq!(p.qfi(), 9);
        assert_eq!(p.ppi(), Some(5));
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr::Dl {
                qfi: 9,
                rqi: true,
                ppi: Some(5)
            }
        );
        assert_eq!(r.buffer_len(), 8);
        let mut out = [0xffu8; 8];
        r.emit(&mut out).unwrap();
        assert_eq!(out, ext);
    }

    #[test]
    fn dl_optional_fields_read() {
        // QMP + SNP: 2 + 8 + 3 = 13 content octets -> 4 units (14 content octets).
        let ext = [
            0x04, 0x0c, 0x05, // DL, QMP, SNP; QFI 5
            1, 2, 3, 4, 5, 6, 7, 8, // DL sending time stamp
            0x00, 0x01, 0x02, // DL QFI SN
            0x00, // padding
            0x00, // next type
        ];
        let p = Packet::new_checked(content(&ext)).unwrap();
        assert!(p.qmp() && p.snp() && !p.msnp());
        assert_eq!(p.dl_sending_timestamp(), Some(0x0102_0304_0506_0708));
        assert_eq!(p.dl_qfi_seq(), Some(0x102));
        assert_eq!(p.dl_mbs_qfi_seq(), None);
        assert_eq!(
            Repr::parse(&p),
            Ok(Repr::Dl {
                qfi: 5,
                rqi: false,
                ppi: None
            })
        );
        // The same flags with the content cut short.
        assert_eq!(
            Packet::new_checked(&content(&ext)[..12]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn ul_optional_fields_tolerated() {
        // QMP, DL/UL delay, SNP set, N3/N9 delay and New IE flags set: not interpreted.
        let c = [0x1f, 0xc7, 0, 0];
        let p = Packet::new_checked(&c[..]).unwrap();
        assert!(p.qmp() && p.dl_delay_ind() && p.ul_delay_ind() && p.snp());
        assert!(p.n3n9_delay_ind() && p.new_ie_flag());
        assert_eq!(p.qfi(), 7);
        assert_eq!(Repr::parse(&p), Ok(Repr::Ul { qfi: 7 }));
    }

    #[test]
    fn malformed() {
        assert_eq!(
            Packet::new_checked(&[0x00][..]).unwrap_err(),
            Error::Truncated
        );
        // PPP set but no room for the PPI octet.
        assert_eq!(
            Packet::new_checked(&[0x00, 0x89][..]).unwrap_err(),
            Error::Truncated
        );
        // Reserved PDU type.
        let p = Packet::new_checked(&[0x20, 0x01][..]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::Unsupported));
    }

    #[test]
    fn emit_errors() {
        let r = Repr::Dl {
            qfi: 9,
            rqi: false,
            ppi: Some(1),
        };
        assert_eq!(r.emit(&mut [0u8; 7]), Err(Error::BufferTooSmall));
        assert_eq!(
            Repr::Ul { qfi: 64 }.emit(&mut [0u8; 4]),
            Err(Error::Malformed)
        );
        let bad_ppi = Repr::Dl {
            qfi: 1,
            rqi: false,
            ppi: Some(8),
        };
        assert_eq!(bad_ppi.emit(&mut [0u8; 8]), Err(Error::Malformed));
        let mut out = [0u8; 4];
        Repr::Ul { qfi: 63 }.emit_with_next(&mut out, 0x40).unwrap();
        assert_eq!(out, [0x01, 0x10, 0x3f, 0x40]);
    }

    #[test]
    fn fuzz_vectors() {
        fuzz(content(&DL_EXT));
        fuzz(content(&UL_EXT));
        fuzz(&[
            0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ]);
        fuzz(&[0x0e, 0xff]);
        fuzz(&[0x1f, 0xff]);
        fuzz(&[]);
    }
}
