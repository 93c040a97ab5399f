use super::*;

fn frames() -> Vec<(u64, Vec<u8>)> {
    (0..50u64)
        .map(|i| {
            let len = 60 + (i as usize * 37) % 1455;
            let bytes = (0..len).map(|j| (j as u64 ^ i) as u8).collect();
            (1_700_000_000 * NANOS_PER_SEC + i * 1_234_567_891, bytes)
        })
        .collect()
}

fn write_pcap(resolution: Resolution, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), resolution).unwrap();
    for (ts, f) in frames {
        w.write(*ts, f).unwrap();
    }
    w.flush().unwrap();
    w.into_inner()
}

fn read_all(data: &[u8]) -> Result<Vec<(RecordInfo, Vec<u8>)>, PcapFileError> {
    let mut r = PcapReader::from_reader(data)?;
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(rec) = r.next_packet(&mut buf)? {
        assert_eq!(rec.caplen as usize, buf.len());
        out.push((rec, buf.clone()));
    }
    Ok(out)
}

#[test]
fn pcap_round_trip_nanoseconds() {
    let frames = frames();
    let data = write_pcap(Resolution::Nano, &frames);
    assert_eq!(
        PcapReader::from_reader(&data[..]).unwrap().format(),
        FileFormat::Pcap(Resolution::Nano)
    );
    let got = read_all(&data).unwrap();
    assert_eq!(got.len(), frames.len());
    for ((rec, bytes), (ts, f)) in got.iter().zip(&frames) {
        assert_eq!(rec.ts_ns, *ts);
        assert_eq!(rec.orig_len as usize, f.len());
        assert_eq!(bytes, f);
    }
}

#[test]
fn pcap_round_trip_microseconds_truncates_to_us() {
    let frames = frames();
    let data = write_pcap(Resolution::Micro, &frames);
    assert_eq!(&data[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
    let got = read_all(&data).unwrap();
    assert_eq!(got.len(), frames.len());
    for ((rec, bytes), (ts, f)) in got.iter().zip(&frames) {
        assert_eq!(rec.ts_ns, ts / 1000 * 1000);
        assert_eq!(bytes, f);
    }
}

#[test]
fn pcap_round_trip_via_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.pcap");
    let frames = frames();
    let mut w = PcapWriter::create(&path, Resolution::Nano).unwrap();
    for (ts, f) in &frames {
        w.write(*ts, f).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let mut r = PcapReader::open(&path).unwrap();
    let mut buf = Vec::new();
    let mut n = 0;
    while let Some(rec) = r.next_packet(&mut buf).unwrap() {
        assert_eq!(rec.ts_ns, frames[n].0);
        assert_eq!(buf, frames[n].1);
        n += 1;
    }
    assert_eq!(n, frames.len());
}

/// Rewrite a little-endian classic pcap produced by the writer in big-endian byte order.
fn byte_swap_pcap(le: &[u8]) -> Vec<u8> {
    let mut out = le.to_vec();
    let swap32 = |b: &mut [u8]| b[..4].reverse();
    swap32(&mut out[0..4]);
    out[4..6].reverse();
    out[6..8].reverse();
    for at in [8, 12, 16, 20] {
        swap32(&mut out[at..at + 4]);
    }
    let mut at = PCAP_HEADER_LEN;
    while at < out.len() {
        let caplen = u32::from_le_bytes(out[at + 8..at + 12].try_into().unwrap()) as usize;
        for f in 0..4 {
            swap32(&mut out[at + 4 * f..at + 4 * f + 4]);
        }
        at += PCAP_RECORD_HEADER_LEN + caplen;
    }
    out
}

#[test]
fn pcap_byte_swapped_headers() {
    let frames = frames();
    for res in [Resolution::Micro, Resolution::Nano] {
        let le = write_pcap(res, &frames);
        let be = byte_swap_pcap(&le);
        assert_ne!(le, be);
        assert_eq!(read_all(&le).unwrap(), read_all(&be).unwrap());
        assert_eq!(
            PcapReader::from_reader(&be[..]).unwrap().format(),
            FileFormat::Pcap(res)
        );
    }
}

#[test]
fn pcap_rejects_non_ethernet_link_type() {
    let mut data = write_pcap(Resolution::Micro, &frames()[..1]);
    data[20..24].copy_from_slice(&113u32.to_le_bytes()); // LINUX_SLL
    assert!(matches!(
        PcapReader::from_reader(&data[..]),
        Err(PcapFileError::LinkType(113))
    ));
}

#[test]
fn pcap_rejects_bad_version() {
    let mut data = write_pcap(Resolution::Micro, &frames()[..1]);
    data[4..6].copy_from_slice(&3u16.to_le_bytes());
    assert!(matches!(
        PcapReader::from_reader(&data[..]),
        Err(PcapFileError::UnsupportedVersion { major: 3, .. })
    ));
}

#[test]
fn pcap_truncated_files() {
    let frames = &frames()[..3];
    let data = write_pcap(Resolution::Nano, frames);
    let mut boundaries = vec![PCAP_HEADER_LEN];
    for (_, f) in frames {
        boundaries.push(boundaries.last().unwrap() + PCAP_RECORD_HEADER_LEN + f.len());
    }
    assert_eq!(*boundaries.last().unwrap(), data.len());
    for cut in 0..=data.len() {
        match read_all(&data[..cut]) {
            Ok(got) => {
                let n = boundaries.iter().position(|&b| b == cut);
                assert_eq!(Some(got.len()), n, "cut {cut} is not a record boundary");
            }
            Err(PcapFileError::Truncated(what)) => {
                assert!(!boundaries.contains(&cut), "cut {cut} is a record boundary");
                let expect = if cut < PCAP_HEADER_LEN {
                    "file header"
                } else if boundaries
                    .iter()
                    .any(|&b| cut > b && cut < b + PCAP_RECORD_HEADER_LEN)
                {
                    "record header"
                } else {
                    "record data"
                };
                assert_eq!(what, expect, "cut {cut}");
            }
            Err(e) => panic!("cut {cut}: unexpected {e}"),
        }
    }
}

#[test]
fn pcap_caplen_over_limit() {
    let mut data = write_pcap(Resolution::Micro, &frames()[..1]);
    let at = PCAP_HEADER_LEN + 8;
    data[at..at + 4].copy_from_slice(&(MAX_CAPLEN + 1).to_le_bytes());
    assert!(
        matches!(read_all(&data), Err(PcapFileError::CaplenTooLarge(c)) if c == MAX_CAPLEN + 1)
    );
    data[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        read_all(&data),
        Err(PcapFileError::CaplenTooLarge(u32::MAX))
    ));
}

#[test]
fn pcap_writer_truncates_to_snaplen() {
    let big = vec![0x5a; WRITER_SNAPLEN as usize + 100];
    let data = write_pcap(Resolution::Micro, &[(0, big)]);
    let got = read_all(&data).unwrap();
    assert_eq!(got[0].0.caplen, WRITER_SNAPLEN);
    assert_eq!(got[0].0.orig_len, WRITER_SNAPLEN + 100);
}

#[test]
fn garbage_is_rejected() {
    assert!(matches!(read_all(b""), Err(PcapFileError::Truncated(_))));
    assert!(matches!(
        read_all(b"hello, world, this is not a pcap"),
        Err(PcapFileError::NotPcap(_))
    ));
    assert!(matches!(
        read_all(&[0xd4, 0xc3, 0xb2]),
        Err(PcapFileError::Truncated(_))
    ));
}

/// Builds pcapng blocks in either byte order.
struct Ng {
    be: bool,
    out: Vec<u8>,
}

impl Ng {
    fn new(be: bool) -> Self {
        Ng {
            be,
            out: Vec::new(),
        }
    }
    fn u16(&self, v: u16) -> [u8; 2] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn block(&mut self, block_type: u32, body: &[u8]) -> &mut Self {
        let mut body = body.to_vec();
        body.resize(pad4(body.len()), 0);
        let total = (body.len() + 12) as u32;
        let (t, l) = (self.u32(block_type), self.u32(total));
        self.out.extend_from_slice(&t);
        self.out.extend_from_slice(&l);
        self.out.extend_from_slice(&body);
        self.out.extend_from_slice(&l);
        self
    }
    fn option(&self, body: &mut Vec<u8>, code: u16, value: &[u8]) {
        body.extend_from_slice(&self.u16(code));
        body.extend_from_slice(&self.u16(value.len() as u16));
        body.extend_from_slice(value);
        body.resize(pad4(body.len()), 0);
    }
    fn shb(&mut self) -> &mut Self {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(NG_BYTE_ORDER_MAGIC));
        body.extend_from_slice(&self.u16(1));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&u64::MAX.to_le_bytes()); // section length unknown (-1)
        self.option(&mut body, 4, b"peregrine test"); // shb_userappl
        self.option(&mut body, 0, b"");
        self.block(NG_BLOCK_SHB, &body)
    }
    fn idb(&mut self, link_type: u16, snaplen: u32, tsresol: Option<u8>) -> &mut Self {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u16(link_type));
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&self.u32(snaplen));
        self.option(&mut body, 2, b"eth0"); // if_name
        if let Some(r) = tsresol {
            self.option(&mut body, NG_OPT_IF_TSRESOL, &[r]);
        }
        self.option(&mut body, 0, b"");
        self.block(NG_BLOCK_IDB, &body)
    }
    fn epb(&mut self, if_id: u32, ts: u64, data: &[u8], orig_len: u32) -> &mut Self {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(if_id));
        body.extend_from_slice(&self.u32((ts >> 32) as u32));
        body.extend_from_slice(&self.u32(ts as u32));
        body.extend_from_slice(&self.u32(data.len() as u32));
        body.extend_from_slice(&self.u32(orig_len));
        body.extend_from_slice(data);
        body.resize(pad4(body.len()), 0);
        self.option(&mut body, 1, b"a comment"); // opt_comment
        self.block(NG_BLOCK_EPB, &body)
    }
    fn spb(&mut self, data: &[u8]) -> &mut Self {
        let mut body = self.u32(data.len() as u32).to_vec();
        body.extend_from_slice(data);
        self.block(NG_BLOCK_SPB, &body)
    }
}

fn sample_ng(be: bool) -> Vec<u8> {
    let mut ng = Ng::new(be);
    ng.shb()
        .idb(1, 0, None) // interface 0: Ethernet, microseconds
        .block(0x0000_0004, &[1, 2, 3, 4, 5, 6, 7, 8]) // Name Resolution Block: skipped
        .idb(1, 65535, Some(9)) // interface 1: Ethernet, nanoseconds
        .epb(0, 1_700_000_000_123_456, &[0xaa; 61], 61)
        .epb(1, 1_700_000_000_123_456_789, &[0xbb; 64], 1500)
        .spb(&[0xcc; 67])
        .block(0x0bad_1dea, &[0xff; 40]); // unknown block: skipped
    ng.out
}

#[test]
fn pcapng_shb_idb_epb_spb_both_byte_orders() {
    for be in [false, true] {
        let data = sample_ng(be);
        assert_eq!(
            PcapReader::from_reader(&data[..]).unwrap().format(),
            FileFormat::PcapNg
        );
        let got = read_all(&data).unwrap();
        assert_eq!(got.len(), 3, "be={be}");
        assert_eq!(
            got[0].0,
            RecordInfo {
                ts_ns: 1_700_000_000_123_456_000,
                orig_len: 61,
                caplen: 61
            }
        );
        assert_eq!(got[0].1, vec![0xaa; 61]);
        assert_eq!(
            got[1].0,
            RecordInfo {
                ts_ns: 1_700_000_000_123_456_789,
                orig_len: 1500,
                caplen: 64
            }
        );
        assert_eq!(got[1].1, vec![0xbb; 64]);
        assert_eq!(
            got[2].0,
            RecordInfo {
                ts_ns: 0,
                orig_len: 67,
                caplen: 67
            }
        );
        assert_eq!(got[2].1, vec![0xcc; 67]);
    }
}

#[test]
fn pcapng_sections_may_switch_byte_order() {
    let mut data = sample_ng(false);
    data.extend_from_slice(&sample_ng(true));
    assert_eq!(read_all(&data).unwrap().len(), 6);
}

#[test]
fn pcapng_spb_respects_snaplen() {
    let mut ng = Ng::new(false);
    ng.shb().idb(1, 16, None).spb(&[0x11; 40]);
    let got = read_all(&ng.out).unwrap();
    assert_eq!(
        got[0].0,
        RecordInfo {
            ts_ns: 0,
            orig_len: 40,
            caplen: 16
        }
    );
}

#[test]
fn pcapng_binary_tsresol() {
    let mut ng = Ng::new(false);
    ng.shb()
        .idb(1, 0, Some(0x80 | 10))
        .epb(0, 3 * 1024 + 512, &[0; 60], 60);
    assert_eq!(read_all(&ng.out).unwrap()[0].0.ts_ns, 3_500_000_000);
}

#[test]
fn pcapng_non_ethernet_interface_packets_are_rejected() {
    let mut ng = Ng::new(false);
    ng.shb()
        .idb(1, 0, None)
        .idb(113, 0, None)
        .epb(0, 0, &[0; 60], 60)
        .epb(1, 0, &[0; 60], 60);
    let mut r = PcapReader::from_reader(&ng.out[..]).unwrap();
    let mut buf = Vec::new();
    assert!(r.next_packet(&mut buf).unwrap().is_some());
    assert!(matches!(
        r.next_packet(&mut buf),
        Err(PcapFileError::LinkType(113))
    ));
}

#[test]
fn pcapng_undeclared_interface() {
    let mut ng = Ng::new(false);
    ng.shb().idb(1, 0, None).epb(1, 0, &[0; 60], 60);
    assert!(matches!(
        read_all(&ng.out),
        Err(PcapFileError::UnknownInterface(1))
    ));
    let mut ng = Ng::new(true);
    ng.shb().spb(&[0; 60]);
    assert!(matches!(
        read_all(&ng.out),
        Err(PcapFileError::UnknownInterface(0))
    ));
}

#[test]
fn pcapng_length_mismatches() {
    // Trailing length differs from the leading one.
    let mut data = sample_ng(false);
    let last = data.len() - 4;
    data[last] ^= 4;
    assert!(matches!(
        read_all(&data),
        Err(PcapFileError::BadBlock { .. })
    ));

    // Total length not a multiple of 4.
    let mut ng = Ng::new(false);
    ng.shb().idb(1, 0, None);
    let epb_at = ng.out.len();
    ng.epb(0, 0, &[0; 60], 60);
    let mut bad = ng.out.clone();
    bad[epb_at + 4] += 1;
    assert!(matches!(
        read_all(&bad),
        Err(PcapFileError::BadBlock { .. })
    ));

    // Captured length larger than the block.
    let mut bad = ng.out.clone();
    bad[epb_at + 20..epb_at + 24].copy_from_slice(&200u32.to_le_bytes());
    assert!(matches!(
        read_all(&bad),
        Err(PcapFileError::BadBlock { .. })
    ));

    // Captured length over the limit.
    let mut bad = ng.out.clone();
    bad[epb_at + 20..epb_at + 24].copy_from_slice(&(MAX_CAPLEN + 4).to_le_bytes());
    assert!(matches!(
        read_all(&bad),
        Err(PcapFileError::CaplenTooLarge(_))
    ));

    // Block length below the minimum.
    let mut bad = ng.out.clone();
    bad[epb_at + 4..epb_at + 8].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(
        read_all(&bad),
        Err(PcapFileError::BadBlock { .. })
    ));

    // Huge block length: rejected without allocating it.
    let mut bad = ng.out.clone();
    bad[epb_at + 4..epb_at + 8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    assert!(matches!(
        read_all(&bad),
        Err(PcapFileError::BadBlock { .. })
    ));

    // Huge length on a skipped block: truncated, not allocated.
    let mut bad = sample_ng(false);
    let n = bad.len();
    bad[n - 52 + 4..n - 52 + 8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    assert!(matches!(read_all(&bad), Err(PcapFileError::Truncated(_))));
}

#[test]
fn pcapng_bad_shb() {
    let good = sample_ng(false);
    let mut bad = good.clone();
    bad[8] ^= 0xff; // byte-order magic
    assert!(matches!(
        PcapReader::from_reader(&bad[..]),
        Err(PcapFileError::BadBlock { .. })
    ));
    let mut bad = good.clone();
    bad[12..14].copy_from_slice(&2u16.to_le_bytes()); // major version
    assert!(matches!(
        PcapReader::from_reader(&bad[..]),
        Err(PcapFileError::UnsupportedVersion { major: 2, .. })
    ));
    let mut bad = good;
    bad[4..8].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    assert!(matches!(
        PcapReader::from_reader(&bad[..]),
        Err(PcapFileError::BadBlock { .. })
    ));
}

#[test]
fn pcapng_truncated_anywhere_never_panics() {
    for be in [false, true] {
        let data = sample_ng(be);
        for cut in 0..data.len() {
            match read_all(&data[..cut]) {
                Ok(got) => assert!(got.len() <= 3),
                Err(e) => assert!(
                    matches!(e, PcapFileError::Truncated(_)),
                    "cut {cut}: unexpected {e}"
                ),
            }
        }
    }
}

#[test]
fn ts_units() {
    assert_eq!(TsUnit::Decimal(6).to_ns(5), 5_000);
    assert_eq!(TsUnit::Decimal(9).to_ns(5), 5);
    assert_eq!(TsUnit::Decimal(12).to_ns(5_000), 5);
    assert_eq!(TsUnit::Decimal(127).to_ns(u64::MAX), 0);
    assert_eq!(
        TsUnit::Decimal(0).to_ns(u64::MAX),
        u128::from(u64::MAX) * 1_000_000_000
    );
    assert_eq!(TsUnit::Binary(0).to_ns(2), 2_000_000_000);
    assert_eq!(TsUnit::Binary(127).to_ns(u64::MAX), 0);
    let iface = Interface {
        link_type: 1,
        snaplen: 0,
        unit: TsUnit::Decimal(0),
        offset_s: -5,
    };
    assert_eq!(iface.ts_ns(u64::MAX), u64::MAX);
    assert_eq!(iface.ts_ns(3), 0);
}

/// Deterministic mutation fuzzing of valid files: flips, truncations and splices.
#[test]
fn fuzz_mutations_never_panic() {
    let seeds = [
        sample_ng(false),
        sample_ng(true),
        write_pcap(Resolution::Micro, &frames()[..4]),
        byte_swap_pcap(&write_pcap(Resolution::Nano, &frames()[..4])),
    ];
    let mut g = peregrine_testkit::rng::seeded(0x9e37_79b9_7f4a_7c15);
    let mut rnd = move || peregrine_testkit::rng::RngCore::next_u64(&mut g);
    for seed in &seeds {
        fuzz(seed);
        for _ in 0..2_000 {
            let mut d = seed.clone();
            for _ in 0..1 + rnd() % 4 {
                let at = (rnd() as usize) % d.len();
                match rnd() % 3 {
                    0 => d[at] ^= 1 << (rnd() % 8),
                    1 => d[at] = [0, 0xff, 0x7f, 0x80][(rnd() % 4) as usize],
                    _ => d.truncate(at.max(1)),
                }
            }
            fuzz(&d);
        }
    }
    for len in 0..64 {
        fuzz(&vec![0u8; len]);
        fuzz(&vec![0xffu8; len]);
    }
}
