//! Pre-allocated and Incremental Trace Options (RFC 9197 section 4.4).

use super::*;

/// Trace option flags (RFC 9197 section 4.4; 4 bits, most significant first).
pub mod flags {
    /// Overflow: a node could not add its data for lack of space.
    pub const OVERFLOW: u8 = 0b1000;
    /// Loopback (RFC 9322).
    pub const LOOPBACK: u8 = 0b0100;
    /// Active (RFC 9322).
    pub const ACTIVE: u8 = 0b0010;
}

/// A read/write view of a Pre-allocated or Incremental Trace Option body (RFC 9197 section
/// 4.4): the buffer is exactly the option body, the bytes after the RFC 9486 Reserved and
/// IOAM Option-Type octets, so its length after the 8-byte header is the node data list.
#[derive(Debug, Clone)]
pub struct TraceOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TraceOption<T> {
    pub const fn new_unchecked(buffer: T) -> TraceOption<T> {
        TraceOption { buffer }
    }

    /// Wrap and check that the 8-byte header fits. RemainingLen is not checked against the
    /// buffer (it means different things in the two trace options); see
    /// [`TraceOption::entries`] and [`TraceOption::fill_next`].
    pub fn new_checked(buffer: T) -> Result<TraceOption<T>> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < TRACE_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn lens_flags(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENS_FLAGS])
    }

    /// Namespace-ID (16 bits).
    pub fn namespace_id(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::NAMESPACE])
    }

    /// NodeLen (5 bits): one node's data in 4-octet units, without the opaque snapshot.
    pub fn node_len(&self) -> u8 {
        (self.lens_flags() >> 11) as u8
    }

    /// Flags (4 bits; [`flags`]).
    pub fn flags(&self) -> u8 {
        ((self.lens_flags() >> 7) & 0xf) as u8
    }

    pub fn overflow(&self) -> bool {
        self.flags() & flags::OVERFLOW != 0
    }

    pub fn loopback(&self) -> bool {
        self.flags() & flags::LOOPBACK != 0
    }

    pub fn active(&self) -> bool {
        self.flags() & flags::ACTIVE != 0
    }

    /// RemainingLen (7 bits): free space in 4-octet units.
    pub fn remaining_len(&self) -> u8 {
        (self.lens_flags() & 0x7f) as u8
    }

    /// IOAM-Trace-Type (24 bits).
    pub fn trace_type(&self) -> TraceType {
        let b = &self.buffer.as_ref()[field::TRACE_TYPE];
        TraceType(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }

    /// The Reserved octet after the trace type.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::TRACE_RESERVED]
    }

    /// Node data list: everything after the header.
    pub fn node_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::NODE_DATA]
    }

    /// NodeLen as the trace type says it should be ([`TraceType::node_len`]).
    pub fn node_len_from_type(&self) -> u8 {
        self.trace_type().node_len()
    }

    /// Bytes one entry takes without an opaque snapshot (`node_len() * 4`).
    pub fn node_data_len(&self) -> usize {
        self.node_len() as usize * 4
    }

    /// Pre-allocated trace: the free space at the start of the node data list
    /// (`RemainingLen * 4` bytes). `Malformed` if RemainingLen points past the buffer.
    pub fn free_space(&self) -> Result<&[u8]> {
        let n = self.remaining_len() as usize * 4;
        self.node_data().get(..n).ok_or(Error::Malformed)
    }

    /// Pre-allocated trace: the filled node entries, most recent hop first (they follow the
    /// `RemainingLen * 4` free bytes; RFC 9197 section 4.4). Yields `Malformed` once if
    /// RemainingLen points past the buffer or NodeLen disagrees with the trace type.
    pub fn entries(&self) -> Entries<'_> {
        let data = self.node_data();
        let start = self.remaining_len() as usize * 4;
        match data.get(start..) {
            Some(filled) => self.entries_over(filled),
            None => Entries::failed(),
        }
    }

    /// Incremental trace: every entry in the node data list, most recent hop first.
    pub fn entries_incremental(&self) -> Entries<'_> {
        self.entries_over(self.node_data())
    }

    fn entries_over<'a>(&self, data: &'a [u8]) -> Entries<'a> {
        let tt = self.trace_type();
        let usable = self.node_len() == tt.node_len()
            && (tt.node_len() > 0 || tt.has(TraceType::OPAQUE_STATE_SNAPSHOT));
        if !usable {
            return Entries::failed();
        }
        Entries {
            data,
            pos: 0,
            tt,
            error: false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TraceOption<T> {
    fn set_lens_flags(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::LENS_FLAGS], v);
    }

    pub fn set_namespace_id(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::NAMESPACE], v);
    }

    /// Set NodeLen (low 5 bits of `v`).
    pub fn set_node_len(&mut self, v: u8) {
        let lf = self.lens_flags() & 0x07ff | ((v as u16 & 0x1f) << 11);
        self.set_lens_flags(lf);
    }

    /// Set the 4 flag bits (low 4 bits of `v`).
    pub fn set_flags(&mut self, v: u8) {
        let lf = self.lens_flags() & !(0xf << 7) | ((v as u16 & 0xf) << 7);
        self.set_lens_flags(lf);
    }

    pub fn set_overflow(&mut self, on: bool) {
        let f = self.flags();
        self.set_flags(if on {
            f | flags::OVERFLOW
        } else {
            f & !flags::OVERFLOW
        });
    }

    /// Set RemainingLen (low 7 bits of `v`).
    pub fn set_remaining_len(&mut self, v: u8) {
        let lf = self.lens_flags() & !0x7f | (v as u16 & 0x7f);
        self.set_lens_flags(lf);
    }

    /// Set the trace type (low 24 bits).
    pub fn set_trace_type(&mut self, v: TraceType) {
        let b = v.0.to_be_bytes();
        self.buffer.as_mut()[field::TRACE_TYPE].copy_from_slice(&b[1..]);
    }

    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::TRACE_RESERVED] = v;
    }

    pub fn node_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::NODE_DATA]
    }

    /// Pre-allocated trace, transit node: write `node` into the last free entry (just before
    /// the filled ones) and decrease RemainingLen by the entry length (RFC 9197 section
    /// 4.4). Without room, sets the Overflow flag and returns `BufferTooSmall`. NodeLen not
    /// matching the trace type, or RemainingLen pointing past the buffer, is `Malformed`
    /// (and so is a field value wider than its field); nothing is written in those cases.
    pub fn fill_next(&mut self, node: &NodeData<'_>) -> Result<()> {
        let tt = self.trace_type();
        if self.node_len() != tt.node_len()
            || (tt.node_len() == 0 && !tt.has(TraceType::OPAQUE_STATE_SNAPSHOT))
        {
            return Err(Error::Malformed);
        }
        node.check()?;
        let rem = self.remaining_len() as usize * 4;
        if rem > self.node_data().len() {
            return Err(Error::Malformed);
        }
        let len = node.entry_len(tt);
        if len > rem {
            self.set_overflow(true);
            return Err(Error::BufferTooSmall);
        }
        node.emit(tt, &mut self.node_data_mut()[rem - len..rem])?;
        self.set_remaining_len(((rem - len) / 4) as u8);
        Ok(())
    }
}

/// Iterator over trace entries, from [`TraceOption::entries`]. Yields `Err` at most once,
/// then ends.
#[derive(Debug, Clone)]
pub struct Entries<'a> {
    data: &'a [u8],
    pos: usize,
    tt: TraceType,
    error: bool,
}

impl<'a> Entries<'a> {
    fn failed() -> Entries<'a> {
        Entries {
            data: &[],
            pos: 0,
            tt: TraceType(0),
            error: true,
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<NodeData<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.error {
            self.error = false;
            self.pos = self.data.len();
            return Some(Err(Error::Malformed));
        }
        let rest = self.data.get(self.pos..).filter(|r| !r.is_empty())?;
        match NodeData::parse(rest, self.tt) {
            Ok((d, n)) if n > 0 => {
                self.pos += n;
                Some(Ok(d))
            }
            Ok(_) | Err(_) => {
                self.pos = self.data.len();
                Some(Err(Error::Truncated))
            }
        }
    }
}

impl FusedIterator for Entries<'_> {}

/// High-level representation of a trace option header, plus the length of its node data
/// list (which [`TraceRepr::emit`] zero-fills).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRepr {
    pub namespace_id: u16,
    /// 5 bits.
    pub node_len: u8,
    /// 4 bits ([`flags`]).
    pub flags: u8,
    /// 7 bits.
    pub remaining_len: u8,
    pub trace_type: TraceType,
    /// Bytes of node data after the header.
    pub data_len: usize,
}

impl TraceRepr {
    /// A Pre-allocated Trace with room for `entries` nodes: NodeLen from the trace type,
    /// RemainingLen = `entries * NodeLen`, node data all zero. A trace type with bit 22
    /// (variable-length opaque snapshot) is `Unsupported`; an empty one, reserved bit 23,
    /// or more space than RemainingLen (127 units) or one IPv6 option can hold, `Malformed`.
    pub fn pre_allocated(namespace_id: u16, trace_type: TraceType, entries: usize) -> Result<Self> {
        if trace_type.has(TraceType::OPAQUE_STATE_SNAPSHOT) {
            return Err(Error::Unsupported);
        }
        let r = Self::incremental(namespace_id, trace_type, entries)?;
        let data_len = r.remaining_len as usize * 4;
        if TRACE_HEADER_LEN + data_len > MAX_BODY_LEN {
            return Err(Error::Malformed);
        }
        Ok(TraceRepr { data_len, ..r })
    }

    /// An Incremental Trace announcing room for `entries` nodes (RemainingLen), with no
    /// node data yet.
    pub fn incremental(namespace_id: u16, trace_type: TraceType, entries: usize) -> Result<Self> {
        let node_len = trace_type.node_len();
        if node_len == 0 || trace_type.0 > 0xff_ffff || trace_type.has(TraceType::RESERVED) {
            return Err(Error::Malformed);
        }
        let units = entries
            .checked_mul(node_len as usize)
            .filter(|&u| u <= 0x7f)
            .ok_or(Error::Malformed)?;
        Ok(TraceRepr {
            namespace_id,
            node_len,
            flags: 0,
            remaining_len: units as u8,
            trace_type,
            data_len: 0,
        })
    }

    pub fn parse<T: AsRef<[u8]> + ?Sized>(t: &TraceOption<&T>) -> Result<Self> {
        t.check_len()?;
        Ok(TraceRepr {
            namespace_id: t.namespace_id(),
            node_len: t.node_len(),
            flags: t.flags(),
            remaining_len: t.remaining_len(),
            trace_type: t.trace_type(),
            data_len: t.node_data().len(),
        })
    }

    /// Header plus node data.
    pub const fn buffer_len(&self) -> usize {
        TRACE_HEADER_LEN + self.data_len
    }

    /// Write the header (Reserved = 0) and `data_len` zero bytes of node data at the start
    /// of `buf`. Field values wider than their field are `Malformed`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.node_len > 0x1f
            || self.flags > 0xf
            || self.remaining_len > 0x7f
            || self.trace_type.0 > 0xff_ffff
        {
            return Err(Error::Malformed);
        }
        let b = buf
            .get_mut(..self.buffer_len())
            .ok_or(Error::BufferTooSmall)?;
        let mut t = TraceOption::new_unchecked(b);
        t.set_namespace_id(self.namespace_id);
        t.set_lens_flags(
            (self.node_len as u16) << 11 | (self.flags as u16) << 7 | self.remaining_len as u16,
        );
        t.set_trace_type(self.trace_type);
        t.set_reserved(0);
        t.node_data_mut().fill(0);
        Ok(())
    }
}
