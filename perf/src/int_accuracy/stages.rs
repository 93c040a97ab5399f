//! The experiment through the real INT stages (Miranda et al., III-C..III-E): every packet is an
//! Ethernet/IPv6/UDP frame in an [`OwnedBuf`] that goes source stage -> link 1 -> transit
//! stage (SW1) -> link 2 -> ... -> link 5 -> sink stage. Each stage runs on a one-packet
//! batch with a [`Context::fixed`] clock that reads the packet's emulated time at that node
//! (optionally offset and drifting, [`StageOptions`]); the sink's
//! [`IntReport`](peregrine_int::report::IntReport)s go through `RawReport::from` into the
//! [`QosMonitor`], as on the control core. Links see the frame's real length, INT headers
//! included.

use super::{
    link_models, next_event, take_sample_at, Encoding, QosSample, RunConfig, RunCounts, RunOutput,
    Source, StageOptions, Strategy, TestCase, LINKS, NS, PACKET_LEN, S,
};
use crossbeam_channel::{bounded, Receiver};
use peregrine_dataplane::runtime::{Batch, Context, Disposition, Publisher, Reasons, Stage};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_int::namespace::NamespaceTable;
use peregrine_int::request::{Flags, Mode, Protocol, Rule, TraceType};
use peregrine_int::stages::{IntConfig, IntEvent, IntSink, IntSource, IntTransit};
use peregrine_int_manager::qos_monitor::{QosConfig, QosMonitor, RawReport};
use peregrine_testkit::impair::{LinkModel, Verdict};
use peregrine_testkit::rng::{unit_f64, SeedableRng, SplitMix64};
use peregrine_wire::{ethernet, ipv6, udp};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::Ipv6Addr;

/// Node clocks read `EPOCH + t (+ offset, drift)`, so a negative offset stays a valid time.
/// A whole number of seconds, so the monitor's 1 s windows line up with the simulation's.
const EPOCH: u64 = 1_000 * S;
const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x10);
const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 0x20);
const DST_PORT: u16 = 5001;
/// The IPv6 packet inside the 562-byte frame: what the stages' counters count.
pub const L3_LEN: u32 = PACKET_LEN - ethernet::HEADER_LEN as u32;
const UDP_PAYLOAD: usize = L3_LEN as usize - ipv6::HEADER_LEN - udp::HEADER_LEN;

/// One MGEN-like frame; the payload carries the packet number, so every frame differs.
pub fn frame(id: u64) -> Vec<u8> {
    let mut f = vec![0u8; PACKET_LEN as usize];
    let eth = ethernet::Repr {
        src: ethernet::Address([2, 0, 0, 0, 0, 1]),
        dst: ethernet::Address([2, 0, 0, 0, 0, 2]),
        ethertype: ethernet::ethertype::IPV6,
    };
    eth.emit(&mut f).expect("frame is long enough");
    let l3 = ethernet::HEADER_LEN;
    let ip = ipv6::Repr {
        src: SRC,
        dst: DST,
        next_header: ipv6::ip_protocol::UDP,
        payload_len: udp::HEADER_LEN + UDP_PAYLOAD,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    };
    ip.emit(&mut f[l3..]).expect("frame is long enough");
    let l4 = l3 + ipv6::HEADER_LEN;
    let u = udp::Repr {
        src_port: 40000,
        dst_port: DST_PORT,
        payload_len: UDP_PAYLOAD,
    };
    u.emit(&mut f[l4..]).expect("frame is long enough");
    let p = l4 + udp::HEADER_LEN;
    f[p..p + 8].copy_from_slice(&id.to_be_bytes());
    udp::Packet::new_unchecked(&mut f[l4..]).fill_checksum_v6(SRC, DST);
    f
}

/// The INT rule of the experiment: every packet of the MGEN flow, trace type 0xF000E000
/// (E2E INT counter, timestamp, TX packets and bytes; HbH packet counters, timestamp, bytes).
pub fn rule(strategy: Strategy) -> Rule {
    Rule {
        ns_id: NS as u16,
        app_id: 1,
        src_ip: SRC,
        dst_ip: DST,
        src_port: 0,
        dst_port: DST_PORT,
        protocol: Protocol::Udp,
        trace_type: TraceType(TraceType::KNOWN),
        mode: match strategy {
            Strategy::Count(n) => Mode::Count(n),
            Strategy::Frequency(ms) => Mode::Frequency(ms),
            Strategy::Probability(p) => Mode::Probability(p),
        },
        flags: Flags::default(),
    }
}

/// A node's local clock against the simulation (= sink) clock.
#[derive(Debug, Clone, Copy)]
struct Clock {
    offset_ns: i64,
    drift: f64,
}

impl Clock {
    fn at(&self, t: u64) -> u64 {
        let skew = self.offset_ns + (t as f64 * self.drift) as i64;
        (EPOCH as i64 + t as i64 + skew) as u64
    }
}

/// Run one packet through `stage` at local time `now`; `None` if the stage dropped it.
fn step<S: Stage<OwnedBuf>>(
    stage: &mut S,
    batch: &mut Batch<OwnedBuf>,
    buf: OwnedBuf,
    now: u64,
) -> Option<OwnedBuf> {
    if batch.push(buf, Disposition::CONTINUE).is_err() {
        return None;
    }
    stage.process(batch, &Context::fixed(now, 0));
    let mut out = None;
    for (b, d) in batch.drain() {
        if d.is_continue() {
            out = Some(b);
        }
    }
    out
}

/// Offer a frame to a link; delivered frames wait in `flight` until their arrival event.
fn forward(
    link: &mut LinkModel,
    to: usize,
    t: u64,
    id: u64,
    buf: OwnedBuf,
    heap: &mut BinaryHeap<Reverse<(u64, u64, u8)>>,
    flight: &mut HashMap<u64, OwnedBuf>,
) {
    if let Verdict::Delivered(at) = link.offer(t, buf.len() as u32) {
        heap.push(Reverse((at, id, to as u8)));
        flight.insert(id, buf);
    }
}

fn drain_reports(events: &Receiver<IntEvent>, monitor: &mut QosMonitor, counts: &mut RunCounts) {
    for ev in events.try_iter() {
        if let IntEvent::Report { report, .. } = ev {
            counts.reports += 1;
            // A report the monitor refuses is counted in its own stats.
            let _ = monitor.ingest(&RawReport::from(&report));
        }
    }
}

/// Run one test case through the stages.
pub(super) fn run(tc: &TestCase, rc: &RunConfig, o: &StageOptions) -> RunOutput {
    let mut links = link_models(tc, rc);
    let mut table = NamespaceTable::default();
    table
        .install(rule(rc.strategy))
        .expect("the experiment's rule is valid");
    let publisher = Publisher::new((*table.snapshot()).clone());
    let cfg = |node_id: usize| IntConfig {
        node_id: node_id as u16,
        seed_namespaces: if o.encoding == Encoding::Seed {
            vec![NS as u16]
        } else {
            Vec::new()
        },
        // One pre-allocated entry per transit switch.
        ioam_hops: (LINKS - 1) as u8,
        prng_seed: rc.seed ^ 0x5a5a,
        ..IntConfig::default()
    };
    let mut reasons = Reasons::new();
    let (tx, events) = bounded(1024);
    let mut source = IntSource::new(cfg(0), publisher.reader());
    let mut transits: Vec<IntTransit> = (1..LINKS)
        .map(|k| IntTransit::new(cfg(k), publisher.reader(), &mut reasons))
        .collect();
    let mut sink = IntSink::new(cfg(LINKS), publisher.reader(), tx, &mut reasons);
    // The sink's clock is the reference (the monitor windows on it).
    let mut crng = SplitMix64::seed_from_u64(rc.seed ^ 0xc10c);
    let clocks: [Clock; LINKS + 1] = std::array::from_fn(|k| {
        let (a, b) = (unit_f64(&mut crng), unit_f64(&mut crng));
        if k == LINKS {
            Clock {
                offset_ns: 0,
                drift: 0.0,
            }
        } else {
            Clock {
                offset_ns: ((2.0 * a - 1.0) * o.clock_offset_ns as f64) as i64,
                drift: (2.0 * b - 1.0) * o.clock_drift_ppm * 1e-6,
            }
        }
    });

    let mut monitor = QosMonitor::new(QosConfig::default());
    let mut src = Source::new(rc.traffic, rc.seed ^ 0xb0b);
    let mut heap: BinaryHeap<Reverse<(u64, u64, u8)>> = BinaryHeap::new();
    let mut flight: HashMap<u64, OwnedBuf> = HashMap::new();
    let mut batch = Batch::<OwnedBuf>::new();
    let mut counts = RunCounts::default();
    let mut samples: Vec<QosSample> = Vec::with_capacity(rc.samples);
    let end = (rc.warmup_s + rc.samples as u64) * S;
    let mut next_sample_at = (rc.warmup_s + 1) * S;
    let mut pkt_id = 0u64;
    let mut next_send = src.next_send();

    while let Some((t, from_source)) = next_event(&heap, next_send, end) {
        while next_sample_at <= t && samples.len() < rc.samples {
            drain_reports(&events, &mut monitor, &mut counts);
            samples.push(take_sample_at(
                &monitor,
                next_sample_at,
                EPOCH + next_sample_at,
                rc.warmup_s,
            ));
            next_sample_at += S;
        }
        if from_source {
            next_send = src.next_send();
            let id = pkt_id;
            pkt_id += 1;
            counts.sent += 1;
            let before = source.stats().int_added;
            let buf = OwnedBuf::from_slice(&frame(id));
            let Some(buf) = step(&mut source, &mut batch, buf, clocks[0].at(t)) else {
                counts.stage_drops += 1;
                continue;
            };
            counts.int_sent += source.stats().int_added - before;
            let leave = t + o.processing_ns;
            forward(&mut links[0], 1, leave, id, buf, &mut heap, &mut flight);
            continue;
        }
        let Some(Reverse((t, id, node))) = heap.pop() else {
            break;
        };
        let node = usize::from(node);
        let Some(buf) = flight.remove(&id) else {
            continue;
        };
        if node == LINKS {
            counts.delivered += 1;
            match step(&mut sink, &mut batch, buf, clocks[LINKS].at(t)) {
                // Seed III-E: the sink hands on the packet the source received.
                Some(b) if b.data() == frame(id).as_slice() => {}
                Some(_) => counts.altered += 1,
                None => counts.stage_drops += 1,
            }
            drain_reports(&events, &mut monitor, &mut counts);
            continue;
        }
        let Some(buf) = step(&mut transits[node - 1], &mut batch, buf, clocks[node].at(t)) else {
            counts.stage_drops += 1;
            continue;
        };
        let leave = t + o.processing_ns;
        forward(
            &mut links[node],
            node + 1,
            leave,
            id,
            buf,
            &mut heap,
            &mut flight,
        );
    }
    drain_reports(&events, &mut monitor, &mut counts);
    while samples.len() < rc.samples {
        samples.push(take_sample_at(
            &monitor,
            next_sample_at,
            EPOCH + next_sample_at,
            rc.warmup_s,
        ));
        next_sample_at += S;
    }
    // The stages count the IPv6 packet (548 B, INT headers excluded); the seed's rates are
    // of the 562-byte Ethernet frame. Every packet has the same length, so scale.
    let scale = f64::from(PACKET_LEN) / f64::from(L3_LEN);
    for s in &mut samples {
        for v in s.throughput_mbps.iter_mut().flatten() {
            *v *= scale;
        }
    }
    for (k, l) in links.iter().enumerate() {
        counts.lost[k] = l.stats().lost;
        counts.queue_full[k] = l.stats().queue_full;
    }
    counts.int_hops = transits.iter().map(|t| t.stats().hops_added).sum();
    RunOutput { samples, counts }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_is_a_valid_mgen_packet() {
        let f = frame(7);
        assert_eq!(f.len(), PACKET_LEN as usize);
        let ip = ipv6::Packet::new_checked(&f[ethernet::HEADER_LEN..]).unwrap();
        assert_eq!(ip.total_len(), L3_LEN as usize);
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        assert!(u.verify_checksum_v6(SRC, DST));
        assert_ne!(frame(8), f);
    }

    #[test]
    fn offsets_and_drift_shift_the_local_clock() {
        let c = Clock {
            offset_ns: -5_000,
            drift: 10e-6,
        };
        assert_eq!(c.at(0), EPOCH - 5_000);
        assert_eq!(c.at(S), EPOCH + S - 5_000 + 10_000);
    }
}
