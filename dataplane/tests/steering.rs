//! Flow steering across workers, end to end in the real runtime (two workers, in-memory
//! backend): packets of one UE arriving on both workers' rx queues are all processed by the
//! one worker `Steer` names; both directions of one inner TCP connection (uplink G-PDU on N3,
//! downlink plain IP on N6) meet on that worker; order within a flow is kept through the
//! hand-off rings; a full ring is counted as `handoff_ring_full`, and every packet received
//! is sent or dropped under a named reason.
//!
//! Port 0 ("n3") is polled by worker 0, port 1 ("n6") by worker 1 (the memory backend gives
//! port i to worker i % 2); everything leaves on port 2.

use peregrine_dataplane::classify::{classify, Classify};
use peregrine_dataplane::io::memory::{MemBackend, MemPort};
use peregrine_dataplane::meta::PacketMeta;
use peregrine_dataplane::runtime::{
    self, Batch, Context, Counters, Disposition, Pipeline, Reasons, RuntimeConfig, Stage,
    WorkerSpec, HANDOFF_RING,
};
use peregrine_dataplane::stages::steer::Steer;
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_testkit::frames::ip_packet;
use peregrine_testkit::upf::{dl_frame, server_v4, server_v6, ue_v4, ue_v6, ul_frame};
use peregrine_wire::ipv4::ip_protocol;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One processed packet: the worker that ran the stages after `Steer`, and the tag the
/// test wrote at the end of the frame (UE index, sequence number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    worker: usize,
    rx_port: u16,
    ue: u16,
    seq: u32,
}

/// After `Steer`: records who processed what and sends everything on port 2.
struct Record {
    log: Arc<Mutex<Vec<Seen>>>,
}

impl Stage<OwnedBuf> for Record {
    fn name(&self) -> &'static str {
        "record"
    }
    fn process(&mut self, batch: &mut Batch<OwnedBuf>, cx: &Context) {
        let mut log = self.log.lock().unwrap();
        let rx_port = batch.rx_port;
        batch.for_each_active(|p| {
            let (ue, seq) = tag_of(p.data());
            log.push(Seen {
                worker: cx.worker,
                rx_port,
                ue,
                seq,
            });
            Disposition::tx(2)
        });
    }
}

/// Stalls worker `w` for `d` in stage 0, on its first batch.
struct Stall(usize, Option<Duration>);

impl Stage<OwnedBuf> for Stall {
    fn name(&self) -> &'static str {
        "stall"
    }
    fn process(&mut self, _batch: &mut Batch<OwnedBuf>, cx: &Context) {
        if cx.worker == self.0 {
            if let Some(d) = self.1.take() {
                std::thread::sleep(d);
            }
        }
    }
}

/// The last 6 bytes of every test frame: UE index (u16) and sequence number (u32).
fn tag_of(f: &[u8]) -> (u16, u32) {
    let t = &f[f.len() - 6..];
    (
        u16::from_be_bytes([t[0], t[1]]),
        u32::from_be_bytes([t[2], t[3], t[4], t[5]]),
    )
}

fn tagged(mut ip: Vec<u8>, ue: u16, seq: u32) -> Vec<u8> {
    let n = ip.len();
    ip[n - 6..n - 4].copy_from_slice(&ue.to_be_bytes());
    ip[n - 4..].copy_from_slice(&seq.to_be_bytes());
    ip
}

const UE_PORT: u16 = 40_000;
const SERVER_PORT: u16 = 443;

/// Uplink: UE `ue`'s inner TCP segment to the server, in a G-PDU (IPv6 UE/outer if `v6`).
fn uplink(ue: u16, seq: u32, v6: bool) -> Vec<u8> {
    let (s, d) = addrs(ue, v6);
    let ip = ip_packet(s, d, ip_protocol::TCP, (UE_PORT, SERVER_PORT), 40, 64);
    ul_frame(v6, 0x100 + u32::from(ue), Some(9), &tagged(ip, ue, seq))
}

/// Downlink: the server's reply on the same TCP connection, plain IP on N6.
fn downlink(ue: u16, seq: u32, v6: bool) -> Vec<u8> {
    let (s, d) = addrs(ue, v6);
    let ip = ip_packet(d, s, ip_protocol::TCP, (SERVER_PORT, UE_PORT), 40, 64);
    dl_frame(&tagged(ip, ue, seq))
}

fn addrs(ue: u16, v6: bool) -> (IpAddr, IpAddr) {
    if v6 {
        (IpAddr::V6(ue_v6(u32::from(ue))), IpAddr::V6(server_v6()))
    } else {
        (IpAddr::V4(ue_v4(u32::from(ue))), IpAddr::V4(server_v4()))
    }
}

/// Each worker's pool holds more buffers than a hand-off ring, as a DPDK worker's does (with
/// fewer, a stalled receiver starves the sender of buffers before its ring fills).
fn backend(n3: Vec<Vec<u8>>, n6: Vec<Vec<u8>>) -> MemBackend {
    MemBackend::new(
        vec![
            MemPort {
                name: "n3".into(),
                rx: n3,
                ..Default::default()
            },
            MemPort {
                name: "n6".into(),
                rx: n6,
                ..Default::default()
            },
            MemPort {
                name: "out".into(),
                ..Default::default()
            },
        ],
        2,
    )
    .with_pool_size(8 * HANDOFF_RING)
}

fn cfg(be: &MemBackend) -> RuntimeConfig {
    RuntimeConfig {
        workers: (0..2)
            .map(|id| WorkerSpec {
                id,
                core: None,
                rx_queues: be.rx_queues_of(id),
                tx_queue: id as u16,
            })
            .collect(),
        burst: 32,
        stop_after_idle: None,
        control_queue: 16,
        egress: vec![],
    }
}

/// Run [stall, classify, steer, record] on two workers; returns what was seen and each
/// worker's counters.
fn run(
    n3: Vec<Vec<u8>>,
    n6: Vec<Vec<u8>>,
    stall: Option<(usize, Duration)>,
) -> (Vec<Seen>, Vec<Counters>, Reasons) {
    let mut be = backend(n3, n6);
    let c = cfg(&be);
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let factory = move |_w: usize, _r: &mut Reasons| {
        Pipeline::new(vec![
            Box::new(Stall(stall.map_or(usize::MAX, |s| s.0), stall.map(|s| s.1)))
                as Box<dyn Stage<OwnedBuf>>,
            Box::new(Classify::new()),
            Box::new(Steer::new(2, 3)),
            Box::new(Record { log: l.clone() }),
        ])
    };
    let running = runtime::start(&mut be, &factory, &c).unwrap();
    let reasons = running.reasons().clone();
    let per = running.join_workers();
    let seen = log.lock().unwrap().clone();
    (seen, per, reasons)
}

fn total(per: &[Counters]) -> Counters {
    let mut t = Counters::default();
    for c in per {
        t.add(c);
    }
    t
}

/// The worker `Steer` gives UE `ue`, from its downlink frame.
fn owner_of(ue: u16, v6: bool) -> usize {
    let f = downlink(ue, 0, v6);
    let mut m = PacketMeta::EMPTY;
    classify(&f, &mut m).expect("classified");
    Steer::new(2, 3).owner(&f, &m).expect("attributable")
}

/// 64 UEs (half IPv4, half IPv6), each with uplink on n3 (worker 0) and downlink on n6
/// (worker 1): every packet of a UE is processed by its one owner, so both directions of
/// each inner TCP connection meet there; each worker hands some packets to the other, and
/// every received packet is accounted for.
#[test]
fn one_ue_one_worker_both_directions_meet() {
    let ues = 64u16;
    let per_ue = 20u32;
    let (mut n3, mut n6) = (Vec::new(), Vec::new());
    for seq in 0..per_ue {
        for ue in 0..ues {
            let v6 = ue % 2 == 1;
            n3.push(uplink(ue, seq, v6));
            n6.push(downlink(ue, seq, v6));
        }
    }
    let sent = n3.len() + n6.len();
    let (seen, per, _) = run(n3, n6, None);
    let t = total(&per);
    assert_eq!(t.total_rx(), sent as u64);
    assert_eq!(t.total_tx(), sent as u64, "{t:?}");
    assert_eq!(t.total_drops(), 0);
    assert_eq!(seen.len(), sent);

    let mut by_ue: HashMap<u16, Vec<Seen>> = HashMap::new();
    for s in &seen {
        by_ue.entry(s.ue).or_default().push(*s);
    }
    let mut owners = [0usize; 2];
    for ue in 0..ues {
        let s = &by_ue[&ue];
        let w = owner_of(ue, ue % 2 == 1);
        owners[w] += 1;
        assert_eq!(s.len(), 2 * per_ue as usize);
        assert!(
            s.iter().all(|x| x.worker == w),
            "UE {ue} processed by {:?}, owner {w}",
            s.iter().map(|x| x.worker).collect::<Vec<_>>()
        );
        // Both directions of the connection are among them, with their rx port kept.
        assert_eq!(s.iter().filter(|x| x.rx_port == 0).count(), per_ue as usize);
        assert_eq!(s.iter().filter(|x| x.rx_port == 1).count(), per_ue as usize);
    }
    assert!(
        owners[0] > 0 && owners[1] > 0,
        "UEs on both workers: {owners:?}"
    );
    // Worker 0 handed off the uplink of worker 1's UEs, and the reverse.
    let up_to_1 = u64::from(per_ue) * owners[1] as u64;
    let down_to_0 = u64::from(per_ue) * owners[0] as u64;
    assert_eq!(per[0].handed_off, up_to_1);
    assert_eq!(per[1].handoff_received, up_to_1);
    assert_eq!(per[1].handed_off, down_to_0);
    assert_eq!(per[0].handoff_received, down_to_0);
}

/// One flow per UE, all arriving on n3 (worker 0) in sequence: whatever worker processes it,
/// each flow leaves in the order it arrived (one FIFO ring per pair of workers). Fewer
/// packets are steered than a ring holds, so none is dropped however late worker 1 starts.
#[test]
fn order_within_a_flow_is_kept() {
    let ues = 16u16;
    let per_ue = 100u32;
    let mut n3 = Vec::new();
    for seq in 0..per_ue {
        for ue in 0..ues {
            n3.push(uplink(ue, seq, false));
        }
    }
    let (seen, per, _) = run(n3, Vec::new(), None);
    let t = total(&per);
    assert_eq!(t.total_tx(), u64::from(per_ue) * u64::from(ues));
    assert!(per[0].handed_off > 0);
    let mut last: HashMap<u16, u32> = HashMap::new();
    let mut handed = 0;
    for s in &seen {
        if s.worker == 1 {
            handed += 1;
        }
        if let Some(prev) = last.insert(s.ue, s.seq) {
            assert_eq!(s.seq, prev + 1, "UE {} out of order", s.ue);
        }
    }
    assert_eq!(handed, per[0].handed_off as usize);
    assert_eq!(last.len(), usize::from(ues));
}

/// Worker 1 stalls on its first batch while worker 0 steers thousands of packets to it: the
/// ring takes `HANDOFF_RING`, the rest are dropped as `handoff_ring_full`, and the counts add
/// up (handed off + ring full = steered to worker 1; received = handed off).
#[test]
fn a_full_ring_is_counted() {
    // UEs owned by worker 1, many packets each, all on n3 (worker 0).
    let ues: Vec<u16> = (0..64)
        .filter(|&u| owner_of(u, false) == 1)
        .take(8)
        .collect();
    assert!(!ues.is_empty());
    let mut n3 = Vec::new();
    for seq in 0..600u32 {
        for &ue in &ues {
            n3.push(uplink(ue, seq, false));
        }
    }
    let steered = n3.len() as u64;
    assert!(steered > 2 * HANDOFF_RING as u64);
    // One packet on n6 gets worker 1 into its stall before it polls the ring.
    let n6 = vec![downlink(ues[0], 0, false)];
    let (seen, per, reasons) = run(n3, n6, Some((1, Duration::from_millis(400))));
    let t = total(&per);
    let full = t.drops[peregrine_dataplane::runtime::Reasons::HANDOFF_RING_FULL.0 as usize];
    assert_eq!(
        reasons.name(peregrine_dataplane::runtime::Reasons::HANDOFF_RING_FULL),
        "handoff_ring_full"
    );
    assert!(full > 0, "{t:?}");
    assert_eq!(per[0].handed_off + full, steered);
    assert_eq!(per[1].handoff_received, per[0].handed_off);
    assert!(per[0].handed_off >= HANDOFF_RING as u64);
    assert_eq!(t.total_rx(), t.total_tx() + t.total_drops());
    assert_eq!(t.total_drops(), full);
    assert_eq!(seen.len() as u64, t.total_tx());
    assert!(seen.iter().all(|s| s.worker == 1));
    // What got through kept its order per UE.
    let mut last: HashMap<u16, u32> = HashMap::new();
    for s in seen.iter().filter(|s| s.rx_port == 0) {
        if let Some(prev) = last.insert(s.ue, s.seq) {
            assert!(s.seq > prev, "UE {} out of order", s.ue);
        }
    }
}

/// Packets `Steer` cannot attribute (not IP: ARP) stay on the worker that received them.
#[test]
fn unattributable_packets_stay() {
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let n = 50u32;
    let n3: Vec<_> = (0..n).map(|i| tagged(arp.clone(), 7, i)).collect();
    let n6: Vec<_> = (0..n).map(|i| tagged(arp.clone(), 8, i)).collect();
    let (seen, per, _) = run(n3, n6, None);
    assert_eq!(seen.len(), 2 * n as usize);
    assert!(seen.iter().all(|s| s.worker == usize::from(s.rx_port)));
    assert_eq!(per[0].handed_off + per[1].handed_off, 0);
    // Sanity: the addresses used elsewhere are what the fixtures say.
    assert_ne!(ue_v4(1), Ipv4Addr::UNSPECIFIED);
    assert_ne!(ue_v6(1), Ipv6Addr::UNSPECIFIED);
}
