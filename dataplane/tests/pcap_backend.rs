//! The pcap backend end to end: files written with `PcapWriter`, replayed through
//! `WorkerIo::rx_burst`, sent back out with `tx_burst` and read back.

use peregrine_dataplane::io::pcap::{
    ManualClock, PcapBackend, PcapConfig, PcapError, PcapPortConfig, PcapWorkerIo, Replay,
};
use peregrine_dataplane::io::pcapfile::{PcapReader, PcapWriter, Resolution};
use peregrine_dataplane::io::{Backend, Burst, PortId, WorkerIo};
use peregrine_dataplane::{Meta, OwnedBuf, PacketBuf};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const BURST: usize = 32;
const T0: u64 = 1_700_000_000_000_000_000;

fn checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum = 0u32;
    let mut odd: Option<u8> = None;
    for chunk in chunks {
        for &b in *chunk {
            match odd.take() {
                Some(hi) => sum += u32::from(u16::from_be_bytes([hi, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(hi) = odd {
        sum += u32::from(u16::from_be_bytes([hi, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet/IPv4/UDP frame with valid checksums; `seed` varies addresses, ports, TTL,
/// DSCP and the payload length (0..=1472 bytes, padded to the 60-byte Ethernet minimum).
fn udp_frame(seed: u32) -> Vec<u8> {
    let payload_len = ((seed as usize).wrapping_mul(7919) % 1473) as u16;
    let payload: Vec<u8> = (0..payload_len)
        .map(|i| (i as u32 ^ seed.wrapping_mul(31)) as u8)
        .collect();
    let src = [10, 0, (seed >> 8) as u8, seed as u8];
    let dst = [192, 168, (seed % 7) as u8, 1 + (seed % 250) as u8];
    let (sport, dport) = (
        1024 + (seed % 50_000) as u16,
        [53u16, 2152, 443, 8805][seed as usize % 4],
    );

    let udp_len = 8 + payload_len;
    let mut udp = Vec::with_capacity(udp_len as usize);
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&payload);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&udp_len.to_be_bytes());
    let c = match checksum(&[&pseudo, &udp]) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());

    let mut ip = vec![0x45, ((seed % 64) << 2) as u8];
    ip.extend_from_slice(&(20 + udp_len).to_be_bytes());
    ip.extend_from_slice(&(seed as u16).to_be_bytes()); // identification
    ip.extend_from_slice(&[0x40, 0]); // DF
    ip.extend_from_slice(&[1 + (seed % 255) as u8, 17, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = checksum(&[&ip]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());

    let mut frame = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    frame.extend_from_slice(&ip);
    frame.extend_from_slice(&udp);
    frame.resize(frame.len().max(60), 0);
    frame
}

/// `n` varied frames starting at `seed`, captured 1.5 ms + i µs apart.
fn frames(n: u32, seed: u32) -> Vec<(u64, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                T0 + u64::from(i) * 1_500_000 + u64::from(i % 10) * 1_000,
                udp_frame(seed + i),
            )
        })
        .collect()
}

fn write_pcap(path: &Path, res: Resolution, frames: &[(u64, Vec<u8>)]) {
    let mut w = PcapWriter::create(path, res).unwrap();
    for (ts, f) in frames {
        w.write(*ts, f).unwrap();
    }
    w.flush().unwrap();
}

fn read_pcap(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut r = PcapReader::open(path).unwrap();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while let Some(rec) = r.next_packet(&mut buf).unwrap() {
        assert_eq!(rec.orig_len, rec.caplen);
        out.push((rec.ts_ns, buf.clone()));
    }
    out
}

fn port(name: &str, rx: Option<PathBuf>, tx: Option<PathBuf>) -> PcapPortConfig {
    PcapPortConfig {
        name: name.into(),
        rx,
        tx,
        mac: [0x02, 0, 0, 0, 0, 0x10],
    }
}

fn config(ports: Vec<PcapPortConfig>) -> PcapConfig {
    PcapConfig {
        ports,
        workers: 1,
        replay: Replay::Fast,
        loops: 1,
        pool_size: 256,
    }
}

/// Receive everything `io` has on `port` in bursts of [`BURST`], as (ts, bytes, meta).
fn drain_rx<I: WorkerIo<Buf = OwnedBuf>>(io: &mut I, port: PortId) -> Vec<(Vec<u8>, Meta)> {
    let mut got = Vec::new();
    let mut burst = Burst::new();
    while !io.rx_exhausted() {
        let n = io.rx_burst(port, 0, &mut burst, BURST);
        assert!(n <= BURST);
        assert_eq!(n, burst.len());
        for b in burst.drain(..) {
            got.push((b.data().to_vec(), b.meta()));
            io.release(b);
        }
    }
    got
}

#[test]
fn rx_tx_round_trip_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
    let frames = frames(300, 1);
    write_pcap(&input, Resolution::Micro, &frames);

    let mut be =
        PcapBackend::new(config(vec![port("n3", Some(input), Some(output.clone()))])).unwrap();
    assert_eq!(be.ports().len(), 1);
    let info = &be.ports()[0];
    assert_eq!(
        (
            info.driver.as_str(),
            info.name.as_str(),
            info.rx_queues,
            info.tx_queues
        ),
        ("pcap", "n3", 1, 1)
    );
    assert_eq!(be.rx_queues_of(0), vec![(0, 0)]);
    let mut io = be.worker_io(0);
    let mut burst = Burst::new();
    let mut bursts = 0;
    while !io.rx_exhausted() {
        let n = io.rx_burst(0, 0, &mut burst, BURST);
        assert!(n > 0 && n <= BURST);
        for b in &burst {
            assert_eq!(b.meta().rx_port, 0);
            assert_eq!(b.meta().hash, 0);
            assert_ne!(b.meta().timestamp_ns, 0);
        }
        assert_eq!(io.tx_burst(0, 0, &mut burst), n);
        assert!(burst.is_empty());
        bursts += 1;
    }
    assert_eq!(bursts, 300usize.div_ceil(BURST));
    assert_eq!(
        io.rx_burst(0, 0, &mut burst, BURST),
        0,
        "nothing after the end"
    );
    io.flush();

    let total: u64 = frames.iter().map(|(_, f)| f.len() as u64).sum();
    let stats = be.port_stats(0);
    assert_eq!((stats.ipackets, stats.ibytes), (300, total));
    assert_eq!((stats.opackets, stats.obytes), (300, total));
    assert_eq!((stats.oerrors, stats.rx_nombuf, stats.ierrors), (0, 0, 0));
    drop(io);
    drop(be);

    let out = read_pcap(&output);
    assert_eq!(out.len(), frames.len());
    for (i, ((ts, bytes), (want_ts, want))) in out.iter().zip(&frames).enumerate() {
        assert_eq!(bytes, want, "packet {i}");
        assert_eq!(
            *ts,
            want_ts / 1_000 * 1_000,
            "packet {i}: µs input timestamps are preserved"
        );
    }
}

#[test]
fn loops_replay_the_file_n_times() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    let frames = frames(100, 7);
    write_pcap(&input, Resolution::Nano, &frames);

    let mut be = PcapBackend::new(PcapConfig {
        loops: 3,
        ..config(vec![port("a", Some(input), None)])
    })
    .unwrap();
    let mut io = be.worker_io(0);
    let got = drain_rx(&mut io, 0);
    assert_eq!(got.len(), 300);
    for (i, (bytes, meta)) in got.iter().enumerate() {
        let (ts, want) = &frames[i % 100];
        assert_eq!(bytes, want, "packet {i}");
        assert_eq!(meta.timestamp_ns, *ts, "packet {i}");
    }
    assert_eq!(be.port_stats(0).ipackets, 300);
}

#[test]
fn loops_zero_replays_forever() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    write_pcap(&input, Resolution::Nano, &frames(10, 3));
    let mut be = PcapBackend::new(PcapConfig {
        loops: 0,
        ..config(vec![port("a", Some(input), None)])
    })
    .unwrap();
    let mut io = be.worker_io(0);
    let mut burst = Burst::new();
    let mut total = 0;
    for _ in 0..100 {
        total += io.rx_burst(0, 0, &mut burst, 7);
        for b in burst.drain(..) {
            io.release(b);
        }
        assert!(!io.rx_exhausted());
    }
    assert_eq!(total, 700);
}

#[test]
fn two_workers_poll_their_own_ports_and_share_tx() {
    let dir = tempfile::tempdir().unwrap();
    let mut ports = Vec::new();
    let mut inputs = Vec::new();
    for p in 0..4u32 {
        let input = dir.path().join(format!("in{p}.pcap"));
        let frames = frames(150 + 20 * p, 1000 * p);
        write_pcap(&input, Resolution::Nano, &frames);
        inputs.push(frames);
        ports.push(port(
            &format!("p{p}"),
            Some(input),
            Some(dir.path().join(format!("out{p}.pcap"))),
        ));
    }
    let sink = dir.path().join("sink.pcap");
    ports.push(port("sink", None, Some(sink.clone())));
    let mut be = PcapBackend::new(PcapConfig {
        workers: 2,
        ..config(ports)
    })
    .unwrap();
    assert_eq!(be.rx_queues_of(0), vec![(0, 0), (2, 0)]);
    assert_eq!(be.rx_queues_of(1), vec![(1, 0), (3, 0)]);
    assert_eq!(be.ports()[4].rx_queues, 0);
    assert!(be.ports().iter().all(|p| p.tx_queues == 2));

    let ios = [be.worker_io(0), be.worker_io(1)];
    let queues = [be.rx_queues_of(0), be.rx_queues_of(1)];
    std::thread::scope(|s| {
        for (w, (mut io, queues)) in ios.into_iter().zip(queues.clone()).enumerate() {
            s.spawn(move || {
                let mut burst = Burst::new();
                let mut copy = Burst::new();
                // The other worker's ports deliver nothing here.
                for (p, _) in &queues {
                    assert_eq!(io.rx_burst((p + 1) % 4, 0, &mut burst, BURST), 0);
                }
                while !io.rx_exhausted() {
                    for &(p, q) in &queues {
                        let n = io.rx_burst(p, q, &mut burst, BURST);
                        for b in &burst {
                            assert_eq!(b.meta().rx_port, p);
                            let mut c = io.alloc().expect("pool");
                            c.set_data(b.data()).unwrap();
                            c.set_meta(b.meta());
                            copy.push(c);
                        }
                        assert_eq!(io.tx_burst(p, w as u16, &mut burst), n);
                        assert_eq!(io.tx_burst(4, w as u16, &mut copy), n);
                    }
                }
                io.flush();
            });
        }
    });
    let stats: Vec<_> = (0..5).map(|p| be.port_stats(p)).collect();
    drop(be);

    let mut sink_want = 0;
    for (p, frames) in inputs.iter().enumerate() {
        assert_eq!(stats[p].ipackets, frames.len() as u64);
        assert_eq!(stats[p].opackets, frames.len() as u64);
        assert_eq!(
            &read_pcap(&dir.path().join(format!("out{p}.pcap"))),
            frames,
            "port {p}"
        );
        sink_want += frames.len();
    }
    let sink = read_pcap(&sink);
    assert_eq!(sink.len(), sink_want);
    assert_eq!(stats[4].opackets, sink_want as u64);
    // Every input packet is in the sink, each port's in order.
    for frames in &inputs {
        let mine: Vec<_> = sink
            .iter()
            .filter(|pkt| frames.contains(pkt))
            .cloned()
            .collect();
        assert_eq!(&mine, frames);
    }
}

#[test]
fn timed_replay_follows_the_injected_clock() {
    const MS: u64 = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    // 5 packets 100 ms apart, replayed at speed 10: due every 10 ms.
    let frames: Vec<_> = (0..5)
        .map(|i| (T0 + i * 100 * MS, udp_frame(i as u32)))
        .collect();
    write_pcap(&input, Resolution::Micro, &frames);

    let clock = Arc::new(ManualClock::new(12_345));
    let cfg = PcapConfig {
        replay: Replay::Timed { speed: 10.0 },
        loops: 2,
        ..config(vec![port("a", Some(input), None)])
    };
    let mut be = PcapBackend::with_clock(cfg, clock.clone()).unwrap();
    let mut io = be.worker_io(0);
    let mut burst = Burst::new();
    let mut rx = |io: &mut PcapWorkerIo| {
        let n = io.rx_burst(0, 0, &mut burst, BURST);
        let ts: Vec<u64> = burst
            .iter()
            .map(|b| (b.meta().timestamp_ns - T0) / MS)
            .collect();
        for b in burst.drain(..) {
            io.release(b);
        }
        assert_eq!(n, ts.len());
        ts
    };
    // Replay starts at the first poll: packet 0 is due at once.
    assert_eq!(rx(&mut io), vec![0]);
    assert_eq!(rx(&mut io), Vec::<u64>::new());
    clock.advance(10 * MS - 1);
    assert_eq!(rx(&mut io), Vec::<u64>::new(), "not before its time");
    clock.advance(1);
    assert_eq!(rx(&mut io), vec![100]);
    clock.advance(25 * MS);
    assert_eq!(rx(&mut io), vec![200, 300]);
    // The second loop follows the first back to back: its first packet is due with the
    // first loop's last.
    clock.advance(5 * MS);
    assert_eq!(rx(&mut io), vec![400, 0]);
    assert!(!io.rx_exhausted());
    clock.advance(1_000 * MS);
    assert_eq!(rx(&mut io), vec![100, 200, 300, 400]);
    assert!(io.rx_exhausted());
    assert_eq!(be.port_stats(0).ipackets, 10);
}

#[test]
fn pool_exhaustion_counts_rx_nombuf_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    let frames = frames(19, 11);
    write_pcap(&input, Resolution::Nano, &frames);
    let mut be = PcapBackend::new(PcapConfig {
        pool_size: 8,
        ..config(vec![port("a", Some(input), None)])
    })
    .unwrap();
    let mut io = be.worker_io(0);
    let mut held = Burst::new();
    assert_eq!(io.rx_burst(0, 0, &mut held, BURST), 8);
    assert_eq!(be.port_stats(0).rx_nombuf, 1);
    assert!(io.alloc().is_none());
    let mut more = Burst::new();
    assert_eq!(io.rx_burst(0, 0, &mut more, BURST), 0);
    assert_eq!(be.port_stats(0).rx_nombuf, 2);

    for b in held.drain(5..) {
        io.release(b);
    }
    assert_eq!(io.rx_burst(0, 0, &mut more, BURST), 3);
    assert_eq!(be.port_stats(0).rx_nombuf, 3);
    for b in held.drain(..).chain(more.drain(..)) {
        io.release(b);
    }
    // Recovered: the rest of the file arrives, and an alloc'd buffer is empty.
    assert_eq!(io.rx_burst(0, 0, &mut more, BURST), 8);
    assert!(io.rx_exhausted());
    assert_eq!(be.port_stats(0).rx_nombuf, 3);
    assert_eq!(be.port_stats(0).ipackets, 19);
    for b in more.drain(..) {
        io.release(b);
    }
    let b = io.alloc().unwrap();
    assert!(b.is_empty());
    assert_eq!(b.meta(), Meta::default());
    assert!(b.headroom() >= 64);
}

#[test]
fn tx_stamps_untimed_packets_with_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.pcap");
    let clock = Arc::new(ManualClock::new(T0 + 42));
    let mut be =
        PcapBackend::with_clock(config(vec![port("a", None, Some(output.clone()))]), clock)
            .unwrap();
    assert_eq!(be.rx_queues_of(0), vec![]);
    let mut io = be.worker_io(0);
    assert!(io.rx_exhausted());
    let mut burst = Burst::new();
    let mut b = io.alloc().unwrap();
    b.append(60).unwrap().copy_from_slice(&udp_frame(5)[..60]);
    burst.push(b);
    let mut b = OwnedBuf::from_slice(&udp_frame(6));
    b.set_meta(Meta {
        timestamp_ns: T0 + 7,
        ..Meta::default()
    });
    burst.push(b);
    assert_eq!(io.tx_burst(0, 0, &mut burst), 2);
    drop(io);
    drop(be);
    let out = read_pcap(&output);
    assert_eq!(
        out,
        vec![
            (T0 + 42, udp_frame(5)[..60].to_vec()),
            (T0 + 7, udp_frame(6))
        ]
    );
}

#[test]
fn bad_rx_files_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    write_pcap(&input, Resolution::Micro, &frames(3, 0));
    let mut bytes = std::fs::read(&input).unwrap();
    bytes[20..24].copy_from_slice(&101u32.to_le_bytes()); // LINKTYPE_RAW
    std::fs::write(&input, &bytes).unwrap();
    let err = PcapBackend::new(config(vec![port("n6", Some(input.clone()), None)])).unwrap_err();
    assert!(matches!(err, PcapError::Read { ref port, .. } if port == "n6"));
    assert!(err.to_string().contains("link type 101"), "{err}");

    bytes[20..24].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&input, &bytes[..30]).unwrap();
    let err = PcapBackend::new(config(vec![port("n6", Some(input), None)])).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn tshark_reads_writer_output() {
    if std::process::Command::new("tshark")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("tshark not on PATH; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let frames = frames(200, 99);
    for res in [Resolution::Micro, Resolution::Nano] {
        let path = dir.path().join(format!("{res:?}.pcap"));
        write_pcap(&path, res, &frames);
        let out = std::process::Command::new("tshark")
            .arg("-r")
            .arg(&path)
            .args([
                "-T",
                "fields",
                "-e",
                "frame.len",
                "-e",
                "frame.time_epoch",
                "-e",
                "udp.srcport",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tshark failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), frames.len());
        for (line, (ts, f)) in lines.iter().zip(&frames) {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields[0].parse::<usize>().unwrap(), f.len(), "{line}");
            // frame.time_epoch is seconds with 9 decimals.
            let (secs, frac) = fields[1].split_once('.').unwrap();
            let ns = secs.parse::<u64>().unwrap() * 1_000_000_000 + frac.parse::<u64>().unwrap();
            let want = if res == Resolution::Micro {
                ts / 1_000 * 1_000
            } else {
                *ts
            };
            assert_eq!(ns, want, "{line}");
            assert_eq!(
                fields[2].parse::<u16>().unwrap(),
                u16::from_be_bytes([f[34], f[35]])
            );
        }
    }
}

/// A pcapng written by Wireshark's `editcap` (SHB/IDB/EPB with real options) replays like the
/// pcap it came from. Skipped if `editcap` is not on PATH.
#[test]
fn editcap_pcapng_replays() {
    if std::process::Command::new("editcap")
        .arg("-V")
        .output()
        .is_err()
    {
        println!("editcap not on PATH; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (pcap, pcapng) = (dir.path().join("in.pcap"), dir.path().join("in.pcapng"));
    let frames = frames(120, 5);
    write_pcap(&pcap, Resolution::Nano, &frames);
    let out = std::process::Command::new("editcap")
        .args(["-F", "pcapng"])
        .arg(&pcap)
        .arg(&pcapng)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "editcap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        &std::fs::read(&pcapng).unwrap()[..4],
        &[0x0a, 0x0d, 0x0d, 0x0a]
    );

    let mut be = PcapBackend::new(config(vec![port("a", Some(pcapng), None)])).unwrap();
    let mut io = be.worker_io(0);
    let got: Vec<_> = drain_rx(&mut io, 0)
        .into_iter()
        .map(|(bytes, meta)| (meta.timestamp_ns, bytes))
        .collect();
    assert_eq!(got, frames);
}

/// Flow steering moves buffers between workers: what worker 1 releases beyond its own pool
/// goes to the shared spare queue, from which worker 0, whose pool it drained, refills
/// (module docs, Buffers). Without it worker 0 would count `rx_nombuf` forever.
#[test]
fn buffers_released_by_another_worker_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    write_pcap(&input, Resolution::Nano, &frames(19, 11));
    let mut be = PcapBackend::new(PcapConfig {
        pool_size: 8,
        workers: 2,
        ..config(vec![port("a", Some(input), None)])
    })
    .unwrap();
    let mut io0 = be.worker_io(0);
    let mut io1 = be.worker_io(1);
    let mut held = Burst::new();
    assert_eq!(io0.rx_burst(0, 0, &mut held, BURST), 8);
    assert_eq!(be.port_stats(0).rx_nombuf, 1);
    // Worker 1 (pool full) takes the packets over and frees them.
    for b in held.drain(..) {
        io1.release(b);
    }
    assert_eq!(io1.pool_available(), 8);
    assert_eq!(io0.pool_available(), 0);
    // The 8 buffers come back through the spare queue (the burst wanted more: one more
    // `rx_nombuf`).
    assert_eq!(io0.rx_burst(0, 0, &mut held, BURST), 8);
    assert_eq!(be.port_stats(0).rx_nombuf, 2);
    for b in held.drain(..) {
        io1.release(b);
    }
    assert_eq!(io0.rx_burst(0, 0, &mut held, BURST), 3);
    assert!(io0.rx_exhausted());
    assert_eq!(be.port_stats(0).ipackets, 19);
    assert_eq!(be.port_stats(0).rx_nombuf, 2);
}
