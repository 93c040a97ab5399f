use super::*;

fn write_trace(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::create(path, Resolution::Micro).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_000_000_000 + i as u64 * 1_000, f).unwrap();
    }
    w.flush().unwrap();
}

fn port(name: &str, rx: Option<PathBuf>, tx: Option<PathBuf>) -> PcapPortConfig {
    PcapPortConfig {
        name: name.into(),
        rx,
        tx,
        mac: [2, 0, 0, 0, 0, 1],
    }
}

#[test]
fn pcap_preload_limit_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.pcap");
    let b = dir.path().join("b.pcap");
    write_trace(&a, &vec![vec![0u8; 100]; 5]);
    write_trace(&b, &vec![vec![0u8; 100]; 5]);
    let cfg = PcapConfig {
        ports: vec![port("a", Some(a), None), port("b", Some(b), None)],
        ..PcapConfig::default()
    };
    let clock = Arc::new(SystemClock::new());
    assert!(PcapBackend::build(cfg.clone(), clock.clone(), 1000).is_ok());
    let err = PcapBackend::build(cfg, clock, 999).unwrap_err();
    assert!(
        matches!(err, PcapError::PreloadLimit { ref port, .. } if port == "b"),
        "{err}"
    );
}

#[test]
fn pcap_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pcap");
    let base = PcapConfig::default();
    let bad = |cfg: PcapConfig| PcapBackend::new(cfg).unwrap_err();
    assert!(matches!(
        bad(PcapConfig {
            workers: 0,
            ..base.clone()
        }),
        PcapError::NoWorkers
    ));
    assert!(matches!(
        bad(PcapConfig {
            pool_size: 0,
            ..base.clone()
        }),
        PcapError::EmptyPool
    ));
    for speed in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let cfg = PcapConfig {
            replay: Replay::Timed { speed },
            ..base.clone()
        };
        assert!(matches!(bad(cfg), PcapError::BadSpeed(_)));
    }
    let dup = PcapConfig {
        ports: vec![
            port("a", None, Some(out.clone())),
            port("b", None, Some(out.clone())),
        ],
        ..base.clone()
    };
    assert!(matches!(bad(dup), PcapError::DuplicateTx(_)));
    assert!(!out.exists(), "nothing created on a bad configuration");
    let missing = PcapConfig {
        ports: vec![port(
            "a",
            Some(dir.path().join("nope.pcap")),
            Some(out.clone()),
        )],
        ..base.clone()
    };
    assert!(matches!(bad(missing), PcapError::Read { .. }));
    assert!(!out.exists(), "nothing created on a bad configuration");
    let huge = PcapConfig {
        pool_size: usize::MAX / 2,
        ..base
    };
    assert!(matches!(bad(huge), PcapError::PoolTooLarge { .. }));
}

#[test]
fn pcap_worker_handles_taken_once() {
    let mut be = PcapBackend::new(PcapConfig {
        workers: 2,
        ..PcapConfig::default()
    })
    .unwrap();
    assert!(be.try_worker_io(1).is_ok());
    assert!(matches!(
        be.try_worker_io(1),
        Err(PcapError::WorkerTaken(1))
    ));
    assert!(matches!(
        be.try_worker_io(2),
        Err(PcapError::NoSuchWorker { .. })
    ));
    let io = be.try_worker_io(0).unwrap();
    assert_eq!(io.worker(), 0);
    assert!(
        io.rx_exhausted(),
        "a worker without rx files has nothing to replay"
    );
}

#[test]
fn pcap_pool_refuses_foreign_and_excess_buffers() {
    let mut pool = Pool::new(2, DEFAULT_DATA_ROOM, None);
    let a = pool.get().unwrap();
    pool.put(OwnedBuf::with_capacity(DEFAULT_HEADROOM, 64));
    assert_eq!(pool.bufs.len(), 1, "too small for the pool's frames");
    pool.put(a);
    pool.put(OwnedBuf::new());
    assert_eq!(pool.bufs.len(), 2, "never grows past its size");
}

#[test]
fn pcap_jumbo_frames_get_big_buffers_and_bad_ports_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let rx = dir.path().join("rx.pcap");
    write_trace(&rx, &[vec![7u8; 9000], vec![8u8; 60]]);
    let cfg = PcapConfig {
        ports: vec![port("a", Some(rx), None)],
        pool_size: 4,
        ..PcapConfig::default()
    };
    let mut be = PcapBackend::new(cfg).unwrap();
    assert_eq!(be.rx_packets(0), 2);
    let mut io = be.worker_io(0);
    let mut burst = Burst::new();
    assert_eq!(io.rx_burst(1, 0, &mut burst, 32), 0, "no such port");
    assert_eq!(io.rx_burst(0, 1, &mut burst, 32), 0, "no such queue");
    assert_eq!(io.rx_burst(0, 0, &mut burst, 0), 0, "max 0");
    assert_eq!(io.rx_burst(0, 0, &mut burst, 32), 2);
    assert_eq!(burst[0].data(), &[7u8; 9000][..]);
    assert!(io.rx_exhausted());
    // Port 0 has no tx file: everything is freed and counted as an error.
    assert_eq!(io.tx_burst(0, 0, &mut burst), 0);
    assert!(burst.is_empty());
    assert_eq!(io.pool_available(), 4);
    assert_eq!(be.port_stats(0).oerrors, 2);
    assert_eq!(be.port_stats(0).ierrors, 0);
    assert_eq!(be.port_stats(9), PortStats::default());
}
