//! Classic pcap files (<https://www.tcpdump.org/manpages/pcap-savefile.5.html>), little
//! endian, LINKTYPE_ETHERNET: built in memory for the tool oracles, written to a file with
//! nanosecond timestamps for the traffic generator, and read back (both resolutions).

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Snaplen of in-memory files (what the tool oracles always used).
const SNAPLEN: u32 = 65535;
/// Snaplen of written files: libpcap's MAXIMUM_SNAPLEN, as the dataplane's pcap writer.
const FILE_SNAPLEN: u32 = 262_144;
const LINKTYPE_ETHERNET: u32 = 1;

fn file_header(magic: u32, snaplen: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&magic.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes()); // version 2.4
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // thiszone = 0, sigfigs = 0.
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    h
}

fn record_header(secs: u32, frac: u32, len: usize) -> [u8; 16] {
    let len = u32::try_from(len).expect("frame fits a pcap record");
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&secs.to_le_bytes());
    h[4..8].copy_from_slice(&frac.to_le_bytes());
    h[8..12].copy_from_slice(&len.to_le_bytes()); // incl_len
    h[12..16].copy_from_slice(&len.to_le_bytes()); // orig_len
    h
}

/// A microsecond pcap file holding `frames`, 1 ms apart from 2023-11-14T22:13:20Z.
pub fn pcap<F: AsRef<[u8]>>(frames: &[F]) -> Vec<u8> {
    let mut out = file_header(MAGIC_US, SNAPLEN).to_vec();
    for (i, f) in frames.iter().enumerate() {
        let f = f.as_ref();
        out.extend_from_slice(&record_header(1_700_000_000, i as u32 * 1000, f.len()));
        out.extend_from_slice(f);
    }
    out
}

/// A buffered nanosecond-resolution pcap file being written.
#[derive(Debug)]
pub struct PcapWriter {
    out: BufWriter<File>,
}

impl PcapWriter {
    /// Create (or truncate) `path` and write the file header.
    pub fn create(path: impl AsRef<Path>) -> io::Result<PcapWriter> {
        let mut out = BufWriter::with_capacity(1 << 16, File::create(path)?);
        out.write_all(&file_header(MAGIC_NS, FILE_SNAPLEN))?;
        Ok(PcapWriter { out })
    }

    /// Append a frame captured at `ts_ns` (ns since the Unix epoch). Frames longer than the
    /// snaplen are an error, not truncated.
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
        if frame.len() > FILE_SNAPLEN as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("frame of {} bytes exceeds the snaplen", frame.len()),
            ));
        }
        let secs = u32::try_from(ts_ns / 1_000_000_000).unwrap_or(u32::MAX);
        let ns = (ts_ns % 1_000_000_000) as u32;
        self.out.write_all(&record_header(secs, ns, frame.len()))?;
        self.out.write_all(frame)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// One frame read back: timestamp (ns since the epoch) and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub ts_ns: u64,
    pub data: Vec<u8>,
}

/// Every record of the classic little-endian pcap file at `path`, in order.
pub fn read_records(path: impl AsRef<Path>) -> io::Result<Vec<Record>> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    parse(&bytes)
}

/// Every frame of the pcap file at `path`, in order.
///
/// # Panics
///
/// If the file cannot be read or is not a classic little-endian pcap file (a test helper).
pub fn read_pcap(path: impl AsRef<Path>) -> Vec<Vec<u8>> {
    let path = path.as_ref();
    read_records(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .map(|r| r.data)
        .collect()
}

/// Parse a classic little-endian pcap file from memory.
pub fn parse(bytes: &[u8]) -> io::Result<Vec<Record>> {
    let (out, rest) = parse_records(bytes)?;
    match rest {
        None => Ok(out),
        Some(why) => Err(io::Error::new(io::ErrorKind::InvalidData, why)),
    }
}

/// The complete records of a classic little-endian pcap file that a capture is still
/// writing (`tshark -F pcap -w`): a record header or data cut short at the end is left out,
/// not an error. An error only when the file header is not there (yet) or is not pcap.
pub fn parse_complete(bytes: &[u8]) -> io::Result<Vec<Record>> {
    parse_records(bytes).map(|(out, _)| out)
}

/// The records of `bytes`, and why the tail was cut short (if it was).
fn parse_records(bytes: &[u8]) -> io::Result<(Vec<Record>, Option<&'static str>)> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_owned());
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    if bytes.len() < 24 {
        return Err(bad("pcap file header truncated"));
    }
    let frac_ns = match u32_at(bytes, 0) {
        MAGIC_US => 1_000,
        MAGIC_NS => 1,
        _ => return Err(bad("not a little-endian classic pcap file")),
    };
    let mut rest = &bytes[24..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        if rest.len() < 16 {
            return Ok((out, Some("pcap record header truncated")));
        }
        let incl = u32_at(rest, 8) as usize;
        let Some(data) = rest.get(16..16 + incl) else {
            return Ok((out, Some("pcap record data truncated")));
        };
        out.push(Record {
            ts_ns: u64::from(u32_at(rest, 0)) * 1_000_000_000
                + u64::from(u32_at(rest, 4)) * frac_ns,
            data: data.to_vec(),
        });
        rest = &rest[16 + incl..];
    }
    Ok((out, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.pcap");
        let mut w = PcapWriter::create(&p).unwrap();
        w.write(1_500_000_000_123_456_789, &[1, 2, 3]).unwrap();
        w.write(1_500_000_001_000_000_000, &[4; 70]).unwrap();
        assert!(w.write(0, &vec![0; 300_000]).is_err());
        w.flush().unwrap();
        let r = read_records(&p).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].ts_ns, 1_500_000_000_123_456_789);
        assert_eq!(r[0].data, [1, 2, 3]);
        assert_eq!(r[1].data.len(), 70);
        assert_eq!(read_pcap(&p)[1], vec![4; 70]);
    }

    #[test]
    fn in_memory_files_parse_and_truncation_is_an_error() {
        let b = pcap(&[vec![9u8; 60], vec![8u8; 61]]);
        let r = parse(&b).unwrap();
        assert_eq!((r[0].data.len(), r[1].data.len()), (60, 61));
        assert_eq!(r[1].ts_ns - r[0].ts_ns, 1_000_000);
        for n in [0, 10, 24 + 8, b.len() - 1] {
            assert!(parse(&b[..n]).is_err(), "{n}");
        }
        assert!(parse(&[0u8; 24]).is_err());
    }

    #[test]
    fn a_file_being_written_gives_its_complete_records() {
        let b = pcap(&[vec![9u8; 60], vec![8u8; 61]]);
        let first = 24 + 16 + 60;
        for (n, want) in [
            (24, 0),
            (first - 1, 0),
            (first, 1),
            (first + 15, 1),
            (b.len() - 1, 1),
        ] {
            assert_eq!(parse_complete(&b[..n]).unwrap().len(), want, "{n}");
        }
        assert_eq!(parse_complete(&b).unwrap().len(), 2);
        assert!(parse_complete(&b[..23]).is_err());
        assert!(parse_complete(&[0u8; 24]).is_err());
    }
}
