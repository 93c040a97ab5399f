//! The Edge-to-Edge Option (RFC 9197 section 4.6).

use super::*;

/// IOAM-E2E-Type bits (RFC 9197 section 4.6; bit 0 the most significant of 16).
pub mod e2e_type {
    /// Bit 0: 64-bit sequence number.
    pub const SEQ_NUM_64: u16 = 1 << 15;
    /// Bit 1: 32-bit sequence number.
    pub const SEQ_NUM_32: u16 = 1 << 14;
    /// Bit 2: timestamp seconds.
    pub const TIMESTAMP_SECS: u16 = 1 << 13;
    /// Bit 3: timestamp fraction.
    pub const TIMESTAMP_FRAC: u16 = 1 << 12;
    /// Bits 4-15: undefined.
    pub const UNDEFINED: u16 = 0x0fff;
}

/// A read/write view of an Edge-to-Edge Option body (RFC 9197 section 4.6):
/// Namespace-ID (16) | IOAM-E2E-Type (16) | data. The buffer is exactly the body.
#[derive(Debug, Clone)]
pub struct E2eOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> E2eOption<T> {
    pub const fn new_unchecked(buffer: T) -> E2eOption<T> {
        E2eOption { buffer }
    }

    /// Wrap and check that the 4-byte header fits.
    pub fn new_checked(buffer: T) -> Result<E2eOption<T>> {
        let o = Self::new_unchecked(buffer);
        o.check_len()?;
        Ok(o)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < E2E_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn namespace_id(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::NAMESPACE])
    }

    /// IOAM-E2E-Type ([`e2e_type`]).
    pub fn e2e_type(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::E2E_TYPE])
    }

    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::E2E_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> E2eOption<T> {
    pub fn set_namespace_id(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::NAMESPACE], v);
    }

    pub fn set_e2e_type(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::E2E_TYPE], v);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::E2E_DATA]
    }
}

/// High-level representation of an E2E option; the IOAM-E2E-Type is implied by which
/// fields are `Some`, data in bit order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct E2eRepr {
    pub namespace_id: u16,
    pub seq_num_64: Option<u64>,
    pub seq_num_32: Option<u32>,
    pub timestamp_secs: Option<u32>,
    pub timestamp_frac: Option<u32>,
}

impl E2eRepr {
    /// Parse; undefined type bits are `Unsupported` (their data length is unknown), data
    /// shorter than the type needs is `Truncated`. Trailing data is ignored.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(o: &E2eOption<&T>) -> Result<Self> {
        o.check_len()?;
        let ty = o.e2e_type();
        if ty & e2e_type::UNDEFINED != 0 {
            return Err(Error::Unsupported);
        }
        let d = o.data();
        if d.len() < Self::data_len_for(ty) {
            return Err(Error::Truncated);
        }
        let mut r = E2eRepr {
            namespace_id: o.namespace_id(),
            ..E2eRepr::default()
        };
        let mut p = 0;
        if ty & e2e_type::SEQ_NUM_64 != 0 {
            r.seq_num_64 = Some(be64(&d[p..]));
            p += 8;
        }
        for (bit, slot) in [
            (e2e_type::SEQ_NUM_32, &mut r.seq_num_32),
            (e2e_type::TIMESTAMP_SECS, &mut r.timestamp_secs),
            (e2e_type::TIMESTAMP_FRAC, &mut r.timestamp_frac),
        ] {
            if ty & bit != 0 {
                *slot = Some(be32(&d[p..]));
                p += 4;
            }
        }
        Ok(r)
    }

    const fn data_len_for(ty: u16) -> usize {
        let mut n = 0;
        if ty & e2e_type::SEQ_NUM_64 != 0 {
            n += 8;
        }
        n + 4
            * (ty & (e2e_type::SEQ_NUM_32 | e2e_type::TIMESTAMP_SECS | e2e_type::TIMESTAMP_FRAC))
                .count_ones() as usize
    }

    /// The IOAM-E2E-Type these fields imply.
    pub const fn e2e_type(&self) -> u16 {
        let mut t = 0;
        if self.seq_num_64.is_some() {
            t |= e2e_type::SEQ_NUM_64;
        }
        if self.seq_num_32.is_some() {
            t |= e2e_type::SEQ_NUM_32;
        }
        if self.timestamp_secs.is_some() {
            t |= e2e_type::TIMESTAMP_SECS;
        }
        if self.timestamp_frac.is_some() {
            t |= e2e_type::TIMESTAMP_FRAC;
        }
        t
    }

    pub const fn buffer_len(&self) -> usize {
        E2E_HEADER_LEN + Self::data_len_for(self.e2e_type())
    }

    /// Write the option body at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf
            .get_mut(..self.buffer_len())
            .ok_or(Error::BufferTooSmall)?;
        let mut o = E2eOption::new_unchecked(b);
        o.set_namespace_id(self.namespace_id);
        o.set_e2e_type(self.e2e_type());
        let d = o.data_mut();
        let mut p = 0;
        if let Some(v) = self.seq_num_64 {
            put64(&mut d[p..], v);
            p += 8;
        }
        for v in [self.seq_num_32, self.timestamp_secs, self.timestamp_frac]
            .into_iter()
            .flatten()
        {
            put32(&mut d[p..], v);
            p += 4;
        }
        Ok(())
    }
}
