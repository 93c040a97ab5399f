//! Packet capture file formats: a reader for classic pcap and pcapng, a writer for classic pcap.
//!
//! Formats, as specified by:
//!
//! * classic pcap — <https://www.tcpdump.org/manpages/pcap-savefile.5.html> (also
//!   draft-ietf-opsawg-pcap): a 24-byte file header followed by records of a 16-byte header and
//!   the captured bytes. The magic number gives the byte order and the timestamp resolution
//!   (`a1b2c3d4` microseconds, `a1b23c4d` nanoseconds).
//! * pcapng — draft-ietf-opsawg-pcapng (<https://datatracker.ietf.org/doc/draft-ietf-opsawg-pcapng/>):
//!   a sequence of blocks `type | total length | body | total length`. A Section Header Block
//!   (SHB) starts every section and fixes its byte order; Interface Description Blocks (IDB)
//!   declare interfaces with their link type and timestamp resolution (`if_tsresol`,
//!   `if_tsoffset`); Enhanced Packet Blocks (EPB) and Simple Packet Blocks (SPB) carry packets.
//!   Every other block type is skipped.
//!
//! Only Ethernet (`LINKTYPE_ETHERNET` = 1) captures are accepted: the dataplane consumes
//! Ethernet frames. Input is treated as hostile: malformed files produce a [`PcapFileError`],
//! never a panic, and no allocation is sized by a length field beyond [`MAX_CAPLEN`] (plus a
//! bounded allowance for pcapng options).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;
use thiserror::Error;

/// `LINKTYPE_ETHERNET` (<https://www.tcpdump.org/linktypes.html>).
pub const LINKTYPE_ETHERNET: u32 = 1;

/// Largest captured length the reader accepts (256 KiB, libpcap's `MAXIMUM_SNAPLEN`).
pub const MAX_CAPLEN: u32 = 256 * 1024;

/// Snapshot length written in the header of files produced by [`PcapWriter`].
pub const WRITER_SNAPLEN: u32 = 262_144;

/// Largest pcapng block the reader buffers to parse (SHB, IDB, EPB, SPB): a maximal packet plus
/// a generous allowance for options. Blocks of other types are skipped without buffering.
const MAX_PARSED_BLOCK: u32 = MAX_CAPLEN + (1 << 20);

/// Most interfaces one pcapng section may declare.
const MAX_INTERFACES: usize = 1 << 16;

const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
const PCAP_HEADER_LEN: usize = 24;
const PCAP_RECORD_HEADER_LEN: usize = 16;

const NG_BLOCK_SHB: u32 = 0x0a0d_0d0a;
const NG_BLOCK_IDB: u32 = 0x0000_0001;
const NG_BLOCK_SPB: u32 = 0x0000_0003;
const NG_BLOCK_EPB: u32 = 0x0000_0006;
const NG_BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
const NG_OPT_ENDOFOPT: u16 = 0;
const NG_OPT_IF_TSRESOL: u16 = 9;
const NG_OPT_IF_TSOFFSET: u16 = 14;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Errors reading or writing a capture file.
#[derive(Debug, Error)]
pub enum PcapFileError {
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error("not a pcap or pcapng file (first bytes {0:02x?})")]
    NotPcap([u8; 4]),
    #[error("unsupported {format} version {major}.{minor}")]
    UnsupportedVersion {
        format: &'static str,
        major: u16,
        minor: u16,
    },
    #[error("unsupported link type {0} (only Ethernet, link type 1, is accepted)")]
    LinkType(u32),
    #[error("captured length {0} exceeds the {MAX_CAPLEN}-byte limit")]
    CaplenTooLarge(u32),
    #[error("file truncated in {0}")]
    Truncated(&'static str),
    #[error("malformed pcapng block (type {block_type:#010x}): {reason}")]
    BadBlock {
        block_type: u32,
        reason: &'static str,
    },
    #[error("pcapng packet references undeclared interface {0}")]
    UnknownInterface(u32),
    #[error("pcapng section declares more than {MAX_INTERFACES} interfaces")]
    TooManyInterfaces,
}

/// Timestamp resolution of a classic pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Resolution {
    /// Microseconds (magic `a1b2c3d4`), the traditional format every tool reads.
    #[default]
    Micro,
    /// Nanoseconds (magic `a1b23c4d`).
    Nano,
}

/// The container format detected by [`PcapReader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Classic pcap with the given timestamp resolution.
    Pcap(Resolution),
    /// pcapng.
    PcapNg,
}

/// What the reader knows about one record; the bytes go to the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordInfo {
    /// Capture timestamp, nanoseconds since the Unix epoch (0 for pcapng Simple Packet Blocks,
    /// which carry none).
    pub ts_ns: u64,
    /// Length of the packet on the wire.
    pub orig_len: u32,
    /// Number of bytes captured (the length of the data returned); at most [`MAX_CAPLEN`].
    pub caplen: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }

    fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }

    fn i64(self, b: [u8; 8]) -> i64 {
        match self {
            Endian::Little => i64::from_le_bytes(b),
            Endian::Big => i64::from_be_bytes(b),
        }
    }
}

/// `N` bytes of `b` at `at`, or `None` if out of bounds.
fn field<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// `n` rounded up to a multiple of 4 (pcapng pads data and options to 32 bits).
fn pad4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// pcapng timestamp unit (`if_tsresol`): 10^-exp or 2^-exp seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TsUnit {
    Decimal(u8),
    Binary(u8),
}

impl TsUnit {
    fn from_option(v: u8) -> TsUnit {
        if v & 0x80 == 0 {
            TsUnit::Decimal(v)
        } else {
            TsUnit::Binary(v & 0x7f)
        }
    }

    /// `ticks` of this unit in nanoseconds, saturating.
    fn to_ns(self, ticks: u64) -> u128 {
        let ticks = u128::from(ticks);
        match self {
            TsUnit::Decimal(exp) if exp <= 9 => ticks * 10u128.pow(u32::from(9 - exp)),
            TsUnit::Decimal(exp) => match 10u128.checked_pow(u32::from(exp - 9)) {
                Some(div) => ticks / div,
                None => 0,
            },
            // ticks < 2^64, so ticks * 1e9 < 2^94: no overflow.
            TsUnit::Binary(exp) => (ticks * u128::from(NANOS_PER_SEC)) >> exp,
        }
    }
}

#[derive(Debug, Clone)]
struct Interface {
    link_type: u32,
    snaplen: u32,
    unit: TsUnit,
    /// `if_tsoffset`: seconds added to every timestamp.
    offset_s: i64,
}

impl Interface {
    fn ts_ns(&self, ticks: u64) -> u64 {
        let ns = self.unit.to_ns(ticks) as i128 + i128::from(self.offset_s) * 1_000_000_000;
        ns.clamp(0, i128::from(u64::MAX)) as u64
    }
}

#[derive(Debug)]
enum State {
    Pcap {
        endian: Endian,
        resolution: Resolution,
    },
    PcapNg {
        endian: Endian,
        interfaces: Vec<Interface>,
    },
}

/// Reads Ethernet packets from a classic pcap or pcapng stream.
///
/// ```no_run
/// # use peregrine_dataplane::io::pcapfile::PcapReader;
/// let mut r = PcapReader::open("trace.pcapng")?;
/// let mut buf = Vec::new();
/// while let Some(rec) = r.next_packet(&mut buf)? {
///     println!("{} bytes at {} ns", rec.caplen, rec.ts_ns);
/// }
/// # Ok::<(), peregrine_dataplane::io::pcapfile::PcapFileError>(())
/// ```
#[derive(Debug)]
pub struct PcapReader<R> {
    inner: R,
    state: State,
    /// Body of the pcapng block being parsed, reused across blocks.
    scratch: Vec<u8>,
}

impl PcapReader<BufReader<File>> {
    /// Open a capture file, detecting its format.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PcapFileError> {
        Self::from_reader(BufReader::new(File::open(path)?))
    }
}

impl<R: Read> PcapReader<R> {
    /// Read the file header (classic) or first Section Header Block (pcapng) from `inner`.
    pub fn from_reader(mut inner: R) -> Result<Self, PcapFileError> {
        let mut magic = [0u8; 4];
        read_exact(&mut inner, &mut magic, "file header")?;
        if u32::from_le_bytes(magic) == NG_BLOCK_SHB {
            let mut r = PcapReader {
                inner,
                state: State::PcapNg {
                    endian: Endian::Little,
                    interfaces: Vec::new(),
                },
                scratch: Vec::new(),
            };
            r.read_shb()?;
            return Ok(r);
        }
        let (endian, resolution) = match (u32::from_le_bytes(magic), u32::from_be_bytes(magic)) {
            (PCAP_MAGIC_US, _) => (Endian::Little, Resolution::Micro),
            (PCAP_MAGIC_NS, _) => (Endian::Little, Resolution::Nano),
            (_, PCAP_MAGIC_US) => (Endian::Big, Resolution::Micro),
            (_, PCAP_MAGIC_NS) => (Endian::Big, Resolution::Nano),
            _ => return Err(PcapFileError::NotPcap(magic)),
        };
        let mut hdr = [0u8; PCAP_HEADER_LEN - 4];
        read_exact(&mut inner, &mut hdr, "file header")?;
        let major = endian.u16([hdr[0], hdr[1]]);
        let minor = endian.u16([hdr[2], hdr[3]]);
        if major != 2 {
            return Err(PcapFileError::UnsupportedVersion {
                format: "pcap",
                major,
                minor,
            });
        }
        // thiszone (4) and sigfigs (4) are unused; snaplen (4) is advisory. The low 16 bits of
        // the last field are the link type; the upper bits carry FCS information, ignored here.
        let link_type = endian.u32([hdr[16], hdr[17], hdr[18], hdr[19]]) & 0xffff;
        if link_type != LINKTYPE_ETHERNET {
            return Err(PcapFileError::LinkType(link_type));
        }
        Ok(PcapReader {
            inner,
            state: State::Pcap { endian, resolution },
            scratch: Vec::new(),
        })
    }

    /// The detected container format.
    pub fn format(&self) -> FileFormat {
        match self.state {
            State::Pcap { resolution, .. } => FileFormat::Pcap(resolution),
            State::PcapNg { .. } => FileFormat::PcapNg,
        }
    }

    /// Read the next packet into `buf` (replacing its contents; its allocation is reused).
    ///
    /// Returns `Ok(None)` at a clean end of file. A file that ends inside a record is
    /// [`PcapFileError::Truncated`].
    pub fn next_packet(&mut self, buf: &mut Vec<u8>) -> Result<Option<RecordInfo>, PcapFileError> {
        match self.state {
            State::Pcap { endian, resolution } => self.next_pcap(endian, resolution, buf),
            State::PcapNg { .. } => self.next_pcapng(buf),
        }
    }

    fn next_pcap(
        &mut self,
        endian: Endian,
        resolution: Resolution,
        buf: &mut Vec<u8>,
    ) -> Result<Option<RecordInfo>, PcapFileError> {
        let mut hdr = [0u8; PCAP_RECORD_HEADER_LEN];
        if !read_record_start(&mut self.inner, &mut hdr, "record header")? {
            return Ok(None);
        }
        let word = |i: usize| endian.u32([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
        let (ts_sec, ts_frac, caplen, orig_len) = (word(0), word(4), word(8), word(12));
        if caplen > MAX_CAPLEN {
            return Err(PcapFileError::CaplenTooLarge(caplen));
        }
        let frac_ns = match resolution {
            Resolution::Micro => u64::from(ts_frac) * 1_000,
            Resolution::Nano => u64::from(ts_frac),
        };
        // u32::MAX * 1e9 + u32::MAX * 1e3 < 2^64: cannot overflow.
        let ts_ns = u64::from(ts_sec) * NANOS_PER_SEC + frac_ns;
        buf.clear();
        buf.resize(caplen as usize, 0);
        read_exact(&mut self.inner, buf, "record data")?;
        Ok(Some(RecordInfo {
            ts_ns,
            orig_len,
            caplen,
        }))
    }

    fn next_pcapng(&mut self, buf: &mut Vec<u8>) -> Result<Option<RecordInfo>, PcapFileError> {
        loop {
            let mut head = [0u8; 8];
            if !read_record_start(&mut self.inner, &mut head, "block header")? {
                return Ok(None);
            }
            let raw_type = [head[0], head[1], head[2], head[3]];
            if u32::from_le_bytes(raw_type) == NG_BLOCK_SHB {
                // A new section, possibly of the other byte order: the length can only be
                // interpreted after the byte-order magic.
                self.read_shb_after_type([head[4], head[5], head[6], head[7]])?;
                continue;
            }
            let endian = self.ng_endian();
            let block_type = endian.u32(raw_type);
            let total_len = endian.u32([head[4], head[5], head[6], head[7]]);
            if total_len & 3 != 0 || total_len < 12 {
                return Err(PcapFileError::BadBlock {
                    block_type,
                    reason: "bad block total length",
                });
            }
            match block_type {
                NG_BLOCK_IDB => {
                    self.read_block_body(block_type, total_len, 8)?;
                    self.parse_idb(endian)?;
                }
                NG_BLOCK_EPB => {
                    self.read_block_body(block_type, total_len, 20)?;
                    return self.parse_epb(endian, buf).map(Some);
                }
                NG_BLOCK_SPB => {
                    self.read_block_body(block_type, total_len, 4)?;
                    return self.parse_spb(endian, buf).map(Some);
                }
                _ => self.skip_block(block_type, total_len)?,
            }
        }
    }

    fn ng_endian(&self) -> Endian {
        match self.state {
            State::PcapNg { endian, .. } => endian,
            State::Pcap { endian, .. } => endian,
        }
    }

    /// Parse a Section Header Block whose 4-byte type has already been consumed.
    fn read_shb(&mut self) -> Result<(), PcapFileError> {
        let mut len = [0u8; 4];
        read_exact(&mut self.inner, &mut len, "section header")?;
        self.read_shb_after_type(len)
    }

    /// Parse a Section Header Block after its type; `raw_len` is its total length field as
    /// stored. Resets the interface list: interface ids are scoped to a section.
    fn read_shb_after_type(&mut self, raw_len: [u8; 4]) -> Result<(), PcapFileError> {
        let bad = |reason| PcapFileError::BadBlock {
            block_type: NG_BLOCK_SHB,
            reason,
        };
        let mut bom = [0u8; 4];
        read_exact(&mut self.inner, &mut bom, "section header")?;
        let endian = if u32::from_le_bytes(bom) == NG_BYTE_ORDER_MAGIC {
            Endian::Little
        } else if u32::from_be_bytes(bom) == NG_BYTE_ORDER_MAGIC {
            Endian::Big
        } else {
            return Err(bad("bad byte-order magic"));
        };
        let total_len = endian.u32(raw_len);
        // type, length, byte-order magic, versions (4), section length (8), trailing length.
        if total_len & 3 != 0 || total_len < 28 {
            return Err(bad("bad block total length"));
        }
        if total_len > MAX_PARSED_BLOCK {
            return Err(bad("block too long"));
        }
        // Body after the byte-order magic, plus the trailing length.
        let rest = total_len as usize - 12;
        self.scratch.clear();
        self.scratch.resize(rest, 0);
        read_exact(&mut self.inner, &mut self.scratch, "section header")?;
        let trailer = field::<4>(&self.scratch, rest - 4).ok_or(bad("short block"))?;
        if endian.u32(trailer) != total_len {
            return Err(bad("trailing length does not match"));
        }
        let major = endian.u16([self.scratch[0], self.scratch[1]]);
        let minor = endian.u16([self.scratch[2], self.scratch[3]]);
        if major != 1 {
            return Err(PcapFileError::UnsupportedVersion {
                format: "pcapng",
                major,
                minor,
            });
        }
        self.state = State::PcapNg {
            endian,
            interfaces: Vec::new(),
        };
        Ok(())
    }

    /// Read the body of a block (after type and length) into `scratch`, check the trailing
    /// length and strip it. The body must hold at least `min_body` bytes.
    fn read_block_body(
        &mut self,
        block_type: u32,
        total_len: u32,
        min_body: usize,
    ) -> Result<(), PcapFileError> {
        let bad = |reason| PcapFileError::BadBlock { block_type, reason };
        if total_len > MAX_PARSED_BLOCK {
            return Err(bad("block too long"));
        }
        let rest = total_len as usize - 8;
        if rest - 4 < min_body {
            return Err(bad("block too short"));
        }
        self.scratch.clear();
        self.scratch.resize(rest, 0);
        read_exact(&mut self.inner, &mut self.scratch, "block")?;
        let trailer = field::<4>(&self.scratch, rest - 4).ok_or(bad("short block"))?;
        if self.ng_endian().u32(trailer) != total_len {
            return Err(bad("trailing length does not match"));
        }
        self.scratch.truncate(rest - 4);
        Ok(())
    }

    /// Skip a block of a type this reader does not interpret, without buffering it.
    fn skip_block(&mut self, block_type: u32, total_len: u32) -> Result<(), PcapFileError> {
        let body = u64::from(total_len) - 12;
        let skipped = io::copy(&mut (&mut self.inner).take(body), &mut io::sink())?;
        if skipped != body {
            return Err(PcapFileError::Truncated("block"));
        }
        let mut trailer = [0u8; 4];
        read_exact(&mut self.inner, &mut trailer, "block")?;
        if self.ng_endian().u32(trailer) != total_len {
            return Err(PcapFileError::BadBlock {
                block_type,
                reason: "trailing length does not match",
            });
        }
        Ok(())
    }

    /// Interface Description Block: link type (2), reserved (2), snaplen (4), options.
    fn parse_idb(&mut self, endian: Endian) -> Result<(), PcapFileError> {
        let b = &self.scratch;
        let bad = |reason| PcapFileError::BadBlock {
            block_type: NG_BLOCK_IDB,
            reason,
        };
        let link_type = u32::from(endian.u16(field(b, 0).ok_or(bad("short"))?));
        let snaplen = endian.u32(field(b, 4).ok_or(bad("short"))?);
        let mut iface = Interface {
            link_type,
            snaplen,
            unit: TsUnit::Decimal(6),
            offset_s: 0,
        };
        for opt in Options::new(b.get(8..).unwrap_or_default(), endian) {
            let (code, value) = opt.map_err(|()| bad("option overruns block"))?;
            match (code, value.len()) {
                (NG_OPT_IF_TSRESOL, 1) => iface.unit = TsUnit::from_option(value[0]),
                (NG_OPT_IF_TSOFFSET, 8) => {
                    iface.offset_s = endian.i64(field(value, 0).ok_or(bad("short option"))?)
                }
                _ => {}
            }
        }
        let State::PcapNg { interfaces, .. } = &mut self.state else {
            return Ok(());
        };
        if interfaces.len() >= MAX_INTERFACES {
            return Err(PcapFileError::TooManyInterfaces);
        }
        interfaces.push(iface);
        Ok(())
    }

    /// The interface a packet block refers to; it must be Ethernet.
    fn interface(&self, id: u32) -> Result<&Interface, PcapFileError> {
        let iface = match &self.state {
            State::PcapNg { interfaces, .. } => interfaces.get(id as usize),
            State::Pcap { .. } => None,
        };
        let iface = iface.ok_or(PcapFileError::UnknownInterface(id))?;
        if iface.link_type != LINKTYPE_ETHERNET {
            return Err(PcapFileError::LinkType(iface.link_type));
        }
        Ok(iface)
    }

    /// Enhanced Packet Block: interface id (4), timestamp high/low (4+4), captured length (4),
    /// original length (4), data padded to 32 bits, options.
    fn parse_epb(&self, endian: Endian, buf: &mut Vec<u8>) -> Result<RecordInfo, PcapFileError> {
        let b = &self.scratch;
        let bad = |reason| PcapFileError::BadBlock {
            block_type: NG_BLOCK_EPB,
            reason,
        };
        let word = |at| field(b, at).map(|w| endian.u32(w)).ok_or(bad("short"));
        let (if_id, ts_hi, ts_lo, caplen, orig_len) =
            (word(0)?, word(4)?, word(8)?, word(12)?, word(16)?);
        if caplen > MAX_CAPLEN {
            return Err(PcapFileError::CaplenTooLarge(caplen));
        }
        if 20 + pad4(caplen as usize) > b.len() {
            return Err(bad("captured length overruns block"));
        }
        let iface = self.interface(if_id)?;
        let ts_ns = iface.ts_ns(u64::from(ts_hi) << 32 | u64::from(ts_lo));
        buf.clear();
        buf.extend_from_slice(&b[20..20 + caplen as usize]);
        Ok(RecordInfo {
            ts_ns,
            orig_len,
            caplen,
        })
    }

    /// Simple Packet Block: original length (4), data padded to 32 bits. The captured length
    /// is the smallest of the original length, the data in the block and interface 0's snaplen.
    fn parse_spb(&self, endian: Endian, buf: &mut Vec<u8>) -> Result<RecordInfo, PcapFileError> {
        let b = &self.scratch;
        let orig_len = endian.u32(field(b, 0).ok_or(PcapFileError::BadBlock {
            block_type: NG_BLOCK_SPB,
            reason: "short",
        })?);
        let iface = self.interface(0)?;
        let mut caplen = orig_len.min(u32::try_from(b.len() - 4).unwrap_or(u32::MAX));
        if iface.snaplen != 0 {
            caplen = caplen.min(iface.snaplen);
        }
        if caplen > MAX_CAPLEN {
            return Err(PcapFileError::CaplenTooLarge(caplen));
        }
        buf.clear();
        buf.extend_from_slice(&b[4..4 + caplen as usize]);
        Ok(RecordInfo {
            ts_ns: 0,
            orig_len,
            caplen,
        })
    }
}

/// Iterator over pcapng options (`code (2) | length (2) | value padded to 32 bits`), stopping
/// at `opt_endofopt` or the end of the buffer; yields `Err(())` if an option overruns it.
struct Options<'a> {
    rest: &'a [u8],
    endian: Endian,
}

impl<'a> Options<'a> {
    fn new(rest: &'a [u8], endian: Endian) -> Self {
        Options { rest, endian }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<(u16, &'a [u8]), ()>;

    fn next(&mut self) -> Option<Self::Item> {
        let code = self.endian.u16(field(self.rest, 0)?);
        if code == NG_OPT_ENDOFOPT {
            self.rest = &[];
            return None;
        }
        let Some(len) = field(self.rest, 2).map(|l| usize::from(self.endian.u16(l))) else {
            self.rest = &[];
            return Some(Err(()));
        };
        let Some(value) = self.rest.get(4..4 + len) else {
            self.rest = &[];
            return Some(Err(()));
        };
        self.rest = self.rest.get(4 + pad4(len)..).unwrap_or_default();
        Some(Ok((code, value)))
    }
}

/// `read_exact`, reporting a short read as [`PcapFileError::Truncated`] in `what`.
fn read_exact(r: &mut impl Read, buf: &mut [u8], what: &'static str) -> Result<(), PcapFileError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => PcapFileError::Truncated(what),
        _ => PcapFileError::Io(e),
    })
}

/// Fill `buf` at the start of a record: `Ok(false)` on a clean end of file (no byte read),
/// [`PcapFileError::Truncated`] if the file ends part-way.
fn read_record_start(
    r: &mut impl Read,
    buf: &mut [u8],
    what: &'static str,
) -> Result<bool, PcapFileError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(PcapFileError::Truncated(what)),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// Writes Ethernet packets as a classic little-endian pcap file (link type 1, snaplen
/// [`WRITER_SNAPLEN`]), per <https://www.tcpdump.org/manpages/pcap-savefile.5.html>.
///
/// Output is buffered; call [`flush`](Self::flush) to push it out (dropping a
/// `PcapWriter<BufWriter<_>>` also flushes, ignoring errors).
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    resolution: Resolution,
}

impl PcapWriter<BufWriter<File>> {
    /// Create (or truncate) `path` and write the file header.
    pub fn create(path: impl AsRef<Path>, resolution: Resolution) -> Result<Self, PcapFileError> {
        Self::new(
            BufWriter::with_capacity(1 << 16, File::create(path)?),
            resolution,
        )
    }
}

impl<W: Write> PcapWriter<W> {
    /// Write the file header to `out`.
    pub fn new(mut out: W, resolution: Resolution) -> Result<Self, PcapFileError> {
        let magic = match resolution {
            Resolution::Micro => PCAP_MAGIC_US,
            Resolution::Nano => PCAP_MAGIC_NS,
        };
        let mut hdr = [0u8; PCAP_HEADER_LEN];
        hdr[0..4].copy_from_slice(&magic.to_le_bytes());
        hdr[4..6].copy_from_slice(&2u16.to_le_bytes()); // version 2.4
        hdr[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone = 0, sigfigs = 0.
        hdr[16..20].copy_from_slice(&WRITER_SNAPLEN.to_le_bytes());
        hdr[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&hdr)?;
        Ok(PcapWriter { out, resolution })
    }

    /// Append one packet captured at `ts_ns` (nanoseconds since the Unix epoch; seconds past
    /// 2106 saturate). Packets longer than the snaplen are truncated to it, keeping their
    /// original length in the record header.
    pub fn write(&mut self, ts_ns: u64, bytes: &[u8]) -> Result<(), PcapFileError> {
        let secs = u32::try_from(ts_ns / NANOS_PER_SEC).unwrap_or(u32::MAX);
        let sub_ns = (ts_ns % NANOS_PER_SEC) as u32;
        let frac = match self.resolution {
            Resolution::Micro => sub_ns / 1_000,
            Resolution::Nano => sub_ns,
        };
        let orig_len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        let caplen = orig_len.min(WRITER_SNAPLEN);
        let mut hdr = [0u8; PCAP_RECORD_HEADER_LEN];
        hdr[0..4].copy_from_slice(&secs.to_le_bytes());
        hdr[4..8].copy_from_slice(&frac.to_le_bytes());
        hdr[8..12].copy_from_slice(&caplen.to_le_bytes());
        hdr[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.out.write_all(&hdr)?;
        self.out.write_all(&bytes[..caplen as usize])?;
        Ok(())
    }

    /// Flush buffered records to the underlying writer.
    pub fn flush(&mut self) -> Result<(), PcapFileError> {
        self.out.flush()?;
        Ok(())
    }

    /// The timestamp resolution of this file.
    pub fn resolution(&self) -> Resolution {
        self.resolution
    }

    /// The underlying writer (not flushed).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Run the reader over arbitrary bytes until it ends or fails. Entry point for fuzz targets
/// and no-panic tests: must never panic nor loop forever (every block consumes input).
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(mut r) = PcapReader::from_reader(data) else {
        return;
    };
    let _ = r.format();
    let mut buf = Vec::new();
    while let Ok(Some(rec)) = r.next_packet(&mut buf) {
        assert_eq!(rec.caplen as usize, buf.len());
        assert!(rec.caplen <= MAX_CAPLEN);
    }
}

#[cfg(test)]
mod tests;
