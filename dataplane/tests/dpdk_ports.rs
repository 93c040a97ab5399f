//! DPDK port layer against real PMDs (net_ring, net_pcap, net_null) in one process, sharing one
//! EAL. Needs Debian's DPDK 22.11 runtime; runs without hugepages or PCI access, in its own
//! memory (`--no-huge --no-shconf`), so it can run beside other DPDK test processes.

use peregrine_dataplane::buffer::{conformance, Meta, PacketBuf};
use peregrine_dataplane::io::dpdk::{
    DpdkBackend, DpdkConfig, DpdkError, DpdkPortConfig, DpdkWorkerIo, Eal, Mbuf, Mempool,
};
use peregrine_dataplane::io::{Backend, Burst, WorkerIo, MAX_BURST};
use peregrine_dataplane::meta::PacketMeta;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Frames in the rx pcap file of `net_pcap0`.
const PCAP_RX_FRAMES: usize = 5;

struct Fixture {
    args: Vec<String>,
    dir: PathBuf,
    pcap_rx: Vec<Vec<u8>>,
    /// Held for the life of the process, so the EAL always has a user.
    _eal: Eal,
}

/// This thread's `Cpus_allowed_list`.
fn allowed_cpus() -> String {
    std::fs::read_to_string("/proc/thread-self/status")
        .expect("/proc/thread-self/status")
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .to_string()
}

impl Fixture {
    fn pcap_tx_file(&self) -> PathBuf {
        self.dir.join("tx.pcap")
    }
}

/// The process-wide EAL with every vdev the tests use (the EAL can be initialised once).
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("peregrine-dpdk-")
            .tempdir()
            .expect("tempdir")
            .keep();
        let pcap_rx: Vec<Vec<u8>> = (0..PCAP_RX_FRAMES)
            .map(|i| udp_frame(i as u16, 18 + 37 * i))
            .collect();
        let rx = dir.join("rx.pcap");
        std::fs::write(&rx, write_pcap(&pcap_rx)).expect("write rx pcap");
        let args: Vec<String> = [
            "-l",
            "0",
            "--no-huge",
            "--no-pci",
            "-m",
            "256",
            // (--in-memory would be the other way to stay private, but the EAL refuses it
            // with --no-huge.)
            "--no-shconf",
            "--file-prefix=peregrine-dpdk-test",
            "--no-telemetry",
            "--log-level=lib.eal:error",
            "--vdev=net_ring0",
            &format!(
                "--vdev=net_pcap0,rx_pcap={},tx_pcap={}",
                rx.display(),
                dir.join("tx.pcap").display()
            ),
            // A second pcap port, used only for configuration errors.
            &format!(
                "--vdev=net_pcap1,rx_pcap={},tx_pcap={}",
                rx.display(),
                dir.join("tx1.pcap").display()
            ),
            "--vdev=net_null0,size=100",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cpus_before = allowed_cpus();
        let eal = Eal::init(&args).expect("EAL init");
        assert_eq!(
            allowed_cpus(),
            cpus_before,
            "EAL init keeps the caller's CPU affinity"
        );
        Fixture {
            args,
            dir,
            pcap_rx,
            _eal: eal,
        }
    })
}

fn config(ports: Vec<DpdkPortConfig>, workers: usize, mbufs: u32) -> DpdkConfig {
    DpdkConfig {
        eal_args: fixture().args.clone(),
        ports,
        workers,
        mbufs_per_worker: mbufs,
        mbuf_cache: 64,
        data_room: DpdkConfig::DEFAULT_DATA_ROOM,
    }
}

fn port(name: &str, device: &str, rss: bool) -> DpdkPortConfig {
    DpdkPortConfig {
        rx_desc: 512,
        tx_desc: 512,
        rss,
        ..DpdkPortConfig::new(name, device)
    }
}

// ---- hand-built frames ----

fn csum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet / IPv4 / UDP frame with `payload` bytes of payload; `id` varies ports and bytes.
fn udp_frame(id: u16, payload: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(42 + payload);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02]); // dst
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]); // src
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (20 + 8 + payload) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, (id >> 8) as u8, id as u8]);
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&(10000 + id).to_be_bytes());
    f.extend_from_slice(&2152u16.to_be_bytes());
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]); // no UDP checksum
    f.extend((0..payload).map(|i| (i as u16).wrapping_mul(7).wrapping_add(id) as u8));
    f
}

/// A classic pcap file (microsecond timestamps, Ethernet).
fn write_pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    out.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    out.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
    out.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&(1_700_000_000u32 + i as u32).to_le_bytes());
        out.extend_from_slice(&(i as u32 * 10).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// Frames of a pcap file (little-endian, micro- or nanosecond magic).
fn read_pcap(bytes: &[u8]) -> Vec<Vec<u8>> {
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let magic = u32_at(0);
    assert!(
        magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d,
        "pcap magic {magic:#x}"
    );
    assert_eq!(u32_at(20), 1, "linktype Ethernet");
    let mut frames = Vec::new();
    let mut o = 24;
    while o + 16 <= bytes.len() {
        let incl = u32_at(o + 8) as usize;
        let orig = u32_at(o + 12) as usize;
        assert_eq!(incl, orig, "frame not truncated");
        frames.push(bytes[o + 16..o + 16 + incl].to_vec());
        o += 16 + incl;
    }
    assert_eq!(o, bytes.len(), "no trailing garbage");
    frames
}

fn mbuf_with(io: &mut DpdkWorkerIo, bytes: &[u8]) -> Mbuf {
    let mut m = io.alloc().expect("pool has mbufs");
    m.append(bytes.len())
        .expect("fits one mbuf")
        .copy_from_slice(bytes);
    m
}

/// Receive until `want` packets have arrived or a second has passed.
fn rx_until(io: &mut DpdkWorkerIo, port: u16, queue: u16, want: usize) -> Vec<Mbuf> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut burst: Burst<Mbuf> = Burst::new();
    while got.len() < want && Instant::now() < deadline {
        let n = io.rx_burst(port, queue, &mut burst, MAX_BURST);
        assert_eq!(n, burst.len());
        got.extend(burst.drain(..));
    }
    got
}

// ---- tests ----

#[test]
fn mbuf_passes_buffer_conformance() {
    fixture();
    let pool =
        Mempool::new("conformance", 255, 0, DpdkConfig::DEFAULT_DATA_ROOM, -1).expect("mempool");
    let payload: Vec<u8> = (0..200u8).collect();
    let m = Mbuf::from_slice(&pool, &payload).expect("mbuf");
    assert_eq!(m.headroom(), 128);
    assert_eq!(m.pkt_len(), 200);
    conformance(m, &payload);

    // Fresh mbufs carry no hash or timestamp, and an EMPTY packet metadata record in a
    // private area that covers it; metadata survives into_raw/from_raw.
    let mut m = pool.alloc().expect("mbuf");
    assert_eq!(*m.pkt_meta(), PacketMeta::EMPTY);
    // SAFETY: reads a plain field of the mbuf we own.
    let priv_size = unsafe { (*m.as_ptr()).priv_size };
    assert_eq!(priv_size, peregrine_dataplane::io::dpdk::MBUF_PRIV_SIZE);
    assert!(usize::from(priv_size) >= std::mem::size_of::<PacketMeta>());
    assert_eq!(priv_size % 8, 0, "RTE_MBUF_PRIV_ALIGN");
    m.pkt_meta_mut().session = 5;
    assert_eq!(m.meta().hash, 0);
    assert_eq!(m.meta().timestamp_ns, 0);
    assert_eq!(m.tailroom(), 2048);
    let meta = Meta {
        rx_port: 1,
        hash: 7,
        timestamp_ns: u64::MAX,
    };
    m.set_meta(meta);
    let raw = m.into_raw();
    // SAFETY: `raw` came from into_raw and is owned by nobody else.
    let m = unsafe { Mbuf::from_raw(raw) };
    assert_eq!(m.meta(), meta);
    assert_eq!(m.pkt_meta().session, 5);
    // The record does not overlap the packet's headroom or data.
    assert_eq!(m.headroom(), 128);
    assert_eq!(m.tailroom(), 2048);
    assert_eq!(pool.in_use_count(), 1);
    drop(m);
    assert_eq!(pool.in_use_count(), 0);
}

/// `Mbuf::keep` (one update for a window inside a single-segment packet) leaves what
/// `adj` then the tail set to `n` bytes leave, for every offset and length around the
/// packet's.
#[test]
fn mbuf_keep_is_adj_then_set_len() {
    fixture();
    let pool = Mempool::new("keep", 255, 0, DpdkConfig::DEFAULT_DATA_ROOM, -1).expect("mempool");
    let payload: Vec<u8> = (0..60u8).collect();
    for off in 0..64 {
        for n in [0, 1, 20, 39, 40, 59, 60, 61, 100] {
            let mut a = Mbuf::from_slice(&pool, &payload).expect("mbuf");
            let mut b = Mbuf::from_slice(&pool, &payload).expect("mbuf");
            let ra = a.keep(off, n);
            let rb = b.adj(off).and_then(|()| {
                let len = b.len();
                if n > len {
                    b.append(n - len).map(|_| ())
                } else {
                    b.trim(len - n)
                }
            });
            assert_eq!(ra, rb, "off {off} n {n}");
            assert_eq!(
                (a.headroom(), a.len(), a.pkt_len(), a.tailroom()),
                (b.headroom(), b.len(), b.pkt_len(), b.tailroom()),
                "off {off} n {n}"
            );
            if ra.is_ok() && n <= payload.len() - off {
                assert_eq!(a.data(), &payload[off..off + n]);
            }
        }
    }
    assert_eq!(pool.in_use_count(), 0);
}

#[test]
fn eal_is_shared_and_args_are_checked() {
    let f = fixture();
    let again = Eal::init(&f.args).expect("same args join the running EAL");
    assert_eq!(again.args(), f.args);
    assert!(matches!(
        Eal::init(&["--no-huge".to_string()]),
        Err(DpdkError::EalArgsMismatch { .. })
    ));
    // Cleanup is refused while anything else holds the EAL (here: a pool and the fixture).
    let pool = Mempool::new("eal_test", 63, 0, 256, -1).expect("small pool");
    assert!(matches!(again.cleanup(), Err(DpdkError::Busy(_))));
    assert_eq!(pool.avail_count(), 63);
    drop(pool);
    assert!(peregrine_dataplane::io::dpdk::tsc_hz() > 0);
    let t0 = peregrine_dataplane::io::dpdk::tsc();
    assert!(peregrine_dataplane::io::dpdk::tsc() >= t0);
}

#[test]
fn configuration_errors_are_reported() {
    fixture();
    let err = DpdkBackend::new(config(vec![port("x", "net_nosuch9", true)], 1, 1024)).unwrap_err();
    assert!(
        matches!(err, DpdkError::NoSuchDevice { ref device, .. } if device == "net_nosuch9"),
        "{err}"
    );
    // net_pcap has one queue per rx_pcap file: two workers cannot each have their own.
    let err = DpdkBackend::new(config(vec![port("p1", "net_pcap1", true)], 2, 1024)).unwrap_err();
    assert!(
        matches!(err, DpdkError::TooFewQueues { max_rx: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("net_pcap"), "{err}");
    let err = DpdkBackend::new(config(vec![port("p1", "net_pcap1", true)], 0, 1024)).unwrap_err();
    assert!(matches!(err, DpdkError::Config(_)), "{err}");
}

/// net_ring without arguments loops each tx queue back to the rx queue of the same number.
#[test]
fn net_ring_loops_tx_back_to_rx() {
    const N: usize = 100;
    let mut be = DpdkBackend::new(config(vec![port("ring", "net_ring0", true)], 2, 4096))
        .expect("ring backend");
    let info = be.ports()[0].clone();
    assert_eq!(info.id, 0);
    assert_eq!(info.name, "ring");
    assert_eq!(info.driver, "net_ring");
    assert_eq!((info.rx_queues, info.tx_queues), (2, 2));
    assert_eq!(be.rx_queues_of(1), vec![(0, 1)]);
    // The ring PMD reports a started port as up, at its nominal 10G full duplex.
    let link = be.link(0).expect("ethdev link state");
    assert!(link.up, "{link:?}");
    assert_eq!(link.speed_mbps, 10_000);
    assert!(link.full_duplex);
    assert!(be.link(7).is_none());
    let mut io0 = be.worker_io(0);
    let mut io1 = be.worker_io(1);

    let frames: Vec<Vec<u8>> = (0..N).map(|i| udp_frame(i as u16, 10 + i * 13)).collect();
    let mut burst: Burst<Mbuf> = Burst::new();
    for (i, f) in frames.iter().enumerate() {
        let mut m = mbuf_with(&mut io0, f);
        m.set_meta(Meta {
            rx_port: 9,
            hash: 0,
            timestamp_ns: 1000 + i as u64,
        });
        *m.pkt_meta_mut() = PacketMeta {
            teid: i as u32,
            enqueue_ns: 7 * i as u64,
            ..PacketMeta::EMPTY
        };
        burst.push(m);
    }
    assert_eq!(io0.tx_burst(0, 0, &mut burst), N);
    assert!(burst.is_empty());

    // Nothing on worker 1's queue: the ring of queue 0 is queue 0's alone.
    let mut other: Burst<Mbuf> = Burst::new();
    assert_eq!(io1.rx_burst(0, 1, &mut other, MAX_BURST), 0);

    // `max` bounds a burst.
    assert_eq!(io0.rx_burst(0, 0, &mut burst, 7), 7);
    let mut got: Vec<Mbuf> = burst.drain(..).collect();
    got.extend(rx_until(&mut io0, 0, 0, N - 7));
    assert_eq!(got.len(), N);
    for (i, (m, f)) in got.iter().zip(&frames).enumerate() {
        assert_eq!(m.data(), &f[..], "frame {i}");
        assert_eq!(m.pkt_len() as usize, f.len());
        // The timestamp dynfield travels with the mbuf; net_ring does not stamp a port, and rx
        // does not touch the mbuf to do so (the runtime keeps the rx port per batch).
        assert_eq!(
            Meta {
                rx_port: 0,
                ..m.meta()
            },
            Meta {
                rx_port: 0,
                hash: 0,
                timestamp_ns: 1000 + i as u64
            }
        );
        // So does the packet metadata in the private area.
        assert_eq!(
            *m.pkt_meta(),
            PacketMeta {
                teid: i as u32,
                enqueue_ns: 7 * i as u64,
                ..PacketMeta::EMPTY
            }
        );
    }
    for m in got {
        io0.release(m);
    }

    // Worker 1 round-trips on its own queue.
    other.push(mbuf_with(&mut io1, &frames[3]));
    assert_eq!(io1.tx_burst(0, 1, &mut other), 1);
    let back = rx_until(&mut io1, 0, 1, 1);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].data(), &frames[3][..]);
    drop(back);

    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum::<u64>() + frames[3].len() as u64;
    let st = be.port_stats(0);
    assert_eq!(st.ipackets, N as u64 + 1, "{st:?}");
    assert_eq!(st.opackets, N as u64 + 1, "{st:?}");
    // net_ring in 22.11 counts packets only; other drivers count bytes too.
    assert!(st.ibytes == 0 || st.ibytes == bytes, "{st:?}");
    assert!(st.obytes == 0 || st.obytes == bytes, "{st:?}");
    assert_eq!(st.oerrors, 0);

    // Overfill the ring: what the port does not accept is freed by tx_burst, not leaked.
    let pool0 = be.mempool(0).expect("pool 0");
    assert_eq!(pool0.in_use_count(), 0);
    let mut accepted = 0;
    let mut offered = 0;
    for _ in 0..6 {
        while !burst.is_full() {
            burst.push(mbuf_with(&mut io0, &frames[0]));
        }
        offered += burst.len();
        accepted += io0.tx_burst(0, 0, &mut burst);
        assert!(burst.is_empty());
    }
    assert!(
        accepted < offered,
        "ring never filled ({accepted} of {offered})"
    );
    assert_eq!(
        pool0.in_use_count() as usize,
        accepted,
        "unsent mbufs freed"
    );
    let drained = rx_until(&mut io0, 0, 0, accepted);
    assert_eq!(drained.len(), accepted);
    drop(drained);
    assert_eq!(pool0.in_use_count(), 0);

    // An unknown port drops what it is given.
    burst.push(mbuf_with(&mut io0, &frames[0]));
    assert_eq!(io0.tx_burst(5, 0, &mut burst), 0);
    assert!(burst.is_empty());
    assert_eq!(pool0.in_use_count(), 0);

    // Left in the ring at teardown: drained and freed when the backend goes.
    burst.push(mbuf_with(&mut io0, &frames[1]));
    assert_eq!(io0.tx_burst(0, 0, &mut burst), 1);
    drop(io0);
    drop(io1);
    drop(be);
}

#[test]
fn net_pcap_reads_and_writes_files() {
    let f = fixture();
    let mut be = DpdkBackend::new(config(vec![port("pcap", "net_pcap0", true)], 1, 2048))
        .expect("pcap backend");
    assert_eq!(be.ports()[0].driver, "net_pcap");
    let mut io = be.worker_io(0);

    let got = rx_until(&mut io, 0, 0, PCAP_RX_FRAMES);
    assert_eq!(got.len(), PCAP_RX_FRAMES);
    for (m, want) in got.iter().zip(&f.pcap_rx) {
        assert_eq!(m.data(), &want[..]);
        // net_pcap stamps its ethdev port id; the runtime's per-batch rx port is ours.
        assert_eq!(m.meta().rx_port, be.ethdev_port_id(0).unwrap());
        assert!(m.headroom() >= 64);
    }
    drop(got);
    // The file is at its end: no more packets (no infinite_rx).
    let mut burst: Burst<Mbuf> = Burst::new();
    assert_eq!(io.rx_burst(0, 0, &mut burst, MAX_BURST), 0);

    let sent: Vec<Vec<u8>> = (0..3)
        .map(|i| udp_frame(100 + i, 60 + i as usize))
        .collect();
    for s in &sent {
        burst.push(mbuf_with(&mut io, s));
    }
    assert_eq!(io.tx_burst(0, 0, &mut burst), 3);
    let st = be.port_stats(0);
    assert_eq!(st.ipackets, PCAP_RX_FRAMES as u64);
    assert_eq!(
        st.ibytes,
        f.pcap_rx.iter().map(|p| p.len() as u64).sum::<u64>()
    );
    assert_eq!(st.opackets, 3);
    assert_eq!(st.obytes, sent.iter().map(|p| p.len() as u64).sum::<u64>());

    // Stopping (dropping the I/O and the backend) closes the tx dumper.
    drop(io);
    drop(be);
    let written = read_pcap(&std::fs::read(f.pcap_tx_file()).expect("tx pcap"));
    assert_eq!(written, sent);
}

#[test]
fn net_null_smoke() {
    let mut be = DpdkBackend::new(config(vec![port("null", "net_null0", true)], 2, 2048))
        .expect("null backend");
    let mut io0 = be.worker_io(0);
    let mut io1 = be.worker_io(1);
    let mut burst: Burst<Mbuf> = Burst::new();
    assert_eq!(io0.rx_burst(0, 0, &mut burst, 32), 32);
    assert!(burst
        .iter()
        .all(|m| m.len() == 100 && m.meta().rx_port == be.ethdev_port_id(0).unwrap()));
    // tx accepts everything.
    assert_eq!(io0.tx_burst(0, 0, &mut burst), 32);
    assert_eq!(io1.rx_burst(0, 1, &mut burst, MAX_BURST), MAX_BURST);
    assert_eq!(io1.tx_burst(0, 1, &mut burst), MAX_BURST);
    let st = be.port_stats(0);
    assert_eq!(st.ipackets, 32 + MAX_BURST as u64);
    assert_eq!(st.opackets, 32 + MAX_BURST as u64);
    for w in 0..2 {
        assert_eq!(be.mempool(w).unwrap().in_use_count(), 0);
    }
    // Worker IOs move to their threads.
    let t = std::thread::spawn(move || {
        let mut b: Burst<Mbuf> = Burst::new();
        let n = io1.rx_burst(0, 1, &mut b, 16);
        let m = io1.alloc().expect("alloc on the worker thread");
        drop(m);
        io1.tx_burst(0, 1, &mut b);
        n
    });
    assert_eq!(t.join().unwrap(), 16);
    drop(io0);
    drop(be);
}
