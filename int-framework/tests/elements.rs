//! INT source -> transit -> transit -> sink in-process (Miranda et al., III-C..III-E), over
//! `Batch<OwnedBuf>` with `Context::fixed` clocks, in both wire encodings.

use crossbeam_channel::{bounded, Receiver};
use peregrine_dataplane::runtime::{
    Action, Batch, Context, Disposition, Publisher, Reasons, Stage,
};
use peregrine_dataplane::OwnedBuf;
use peregrine_int::namespace::{NamespaceTable, TableSnapshot};
use peregrine_int::report::{Encoding, IntReport};
use peregrine_int::request::{Flags, Mode, ModifyFields, Protocol, Rule, TraceType};
use peregrine_int::stages::{IntConfig, IntEvent, IntSink, IntSource, IntTransit, Piggyback};
use peregrine_int_manager::codec::RuleCbor;
use std::net::Ipv6Addr;

const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x10);
const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 0x20);
const NS: u16 = 7;

fn rule(mode: Mode, tt: u32) -> Rule {
    Rule {
        ns_id: NS,
        app_id: 42,
        src_ip: SRC,
        dst_ip: DST,
        src_port: 0,
        dst_port: 5001,
        protocol: Protocol::Udp,
        trace_type: TraceType(tt),
        mode,
        flags: Flags::default(),
    }
}

/// Ethernet + IPv6 + UDP to port 5001 with `payload_len` bytes of payload.
pub fn frame(src: Ipv6Addr, dst: Ipv6Addr, payload_len: usize, tag: u8) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd];
    let plen = 8 + payload_len;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(plen as u16).to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&[0x9c, 0x40, 0x13, 0x89]);
    f.extend_from_slice(&(plen as u16).to_be_bytes());
    f.extend_from_slice(&[0xab, 0xcd]);
    f.extend((0..payload_len).map(|i| (i as u8) ^ tag));
    f
}

#[allow(missing_debug_implementations)]
pub struct Path {
    pub table: NamespaceTable,
    pub publisher: Publisher<TableSnapshot>,
    pub source: IntSource,
    pub t1: IntTransit,
    pub t2: IntTransit,
    pub sink: IntSink,
    pub events: Receiver<IntEvent>,
    pub reasons: Reasons,
}

pub fn path(r: Rule, encoding: Encoding, mtu: usize) -> Path {
    let mut table = NamespaceTable::default();
    table.install(r).unwrap();
    let publisher = Publisher::new((*table.snapshot()).clone());
    let cfg = |node_id| IntConfig {
        node_id,
        mtu,
        seed_namespaces: if encoding == Encoding::Seed {
            vec![NS]
        } else {
            vec![]
        },
        ..IntConfig::default()
    };
    let mut reasons = Reasons::new();
    let (tx, events) = bounded(1 << 16);
    Path {
        source: IntSource::new(cfg(0), publisher.reader()),
        t1: IntTransit::new(cfg(1), publisher.reader(), &mut reasons),
        t2: IntTransit::new(cfg(2), publisher.reader(), &mut reasons),
        sink: IntSink::new(cfg(3), publisher.reader(), tx, &mut reasons),
        table,
        publisher,
        events,
        reasons,
    }
}

impl Path {
    pub fn modify(&mut self, changes: ModifyFields) {
        self.table.modify(NS, &changes).unwrap();
        self.publisher.publish((*self.table.snapshot()).clone());
    }

    /// Run one packet through the four stages; the clock advances 1 µs per stage. Returns
    /// the packet after the source and after the sink.
    pub fn run(&mut self, pkt: &[u8], t0: u64) -> (Vec<u8>, Vec<u8>) {
        let mut b = Batch::<OwnedBuf>::new();
        b.push(OwnedBuf::from_slice(pkt), Disposition::CONTINUE)
            .unwrap();
        self.source.process(&mut b, &Context::fixed(t0, 0));
        let mid = b.drain().next().unwrap();
        assert_eq!(mid.1.action(), Action::Continue);
        let after_source = peregrine_dataplane::PacketBuf::data(&mid.0).to_vec();
        let mut b = Batch::<OwnedBuf>::new();
        b.push(mid.0, Disposition::CONTINUE).unwrap();
        self.t1.process(&mut b, &Context::fixed(t0 + 1_000, 0));
        self.t2.process(&mut b, &Context::fixed(t0 + 2_000, 0));
        self.sink.process(&mut b, &Context::fixed(t0 + 3_000, 0));
        let (out, d) = b.drain().next().unwrap();
        assert_eq!(d.action(), Action::Continue, "dropped");
        (
            after_source,
            peregrine_dataplane::PacketBuf::data(&out).to_vec(),
        )
    }

    pub fn reports(&self) -> Vec<IntReport> {
        self.events
            .try_iter()
            .filter_map(|e| match e {
                IntEvent::Report { report, .. } => Some(report),
                _ => None,
            })
            .collect()
    }
}

const ENCODINGS: [Encoding; 2] = [Encoding::Ioam, Encoding::Seed];

#[test]
fn request_first_then_reports_with_every_hop_and_byte_identical_output() {
    for enc in ENCODINGS {
        let mut p = path(rule(Mode::Count(1), 0xf000_e000), enc, 1500);
        let mut sent = 0u32;
        let mut bytes = 0u32;
        for i in 0..5u64 {
            let f = frame(SRC, DST, 100 + i as usize, i as u8);
            sent += 1;
            bytes += (f.len() - 14) as u32;
            let t0 = 1_000_000_000 * (i + 1);
            let (mid, out) = p.run(&f, t0);
            assert_eq!(out, f, "{enc:?}: not byte-identical after the sink");
            assert_ne!(mid, f, "{enc:?}: the source added nothing");
            // The first packet of the flow carries the in-band request, and only that.
            let evs: Vec<_> = p.events.try_iter().collect();
            assert_eq!(evs.len(), 1, "{enc:?} packet {i}");
            match (i, evs[0]) {
                (0, IntEvent::Request { len, cbor, from }) => {
                    assert_eq!(mid[14 + 6], 0, "hop-by-hop header");
                    assert_eq!(mid[54 + 2], 0x32, "request option");
                    assert_eq!(from, SRC);
                    let r = Rule::from_cbor(&cbor[..len as usize]).unwrap();
                    assert_eq!(r, rule(Mode::Count(1), 0xf000_e000));
                }
                (
                    _,
                    IntEvent::Report {
                        report,
                        transmit,
                        piggyback,
                    },
                ) => {
                    assert!(transmit && !piggyback);
                    assert_eq!(report.encoding, enc);
                    assert_eq!(report.ns_id, NS);
                    assert_eq!(report.app_id, 42);
                    assert_eq!(report.trace_type, 0xf000_e000);
                    assert_eq!(report.e2e.int_counter, Some(i as u32));
                    assert_eq!(report.e2e.timestamp_ns, Some(t0));
                    assert_eq!(report.e2e.tx_packets, Some(sent));
                    assert_eq!(report.e2e.tx_bytes, Some(bytes));
                    assert_eq!(report.arrival_ns, t0 + 3_000);
                    assert_eq!(report.packet_len as usize, f.len() - 14);
                    assert_eq!(report.sink_rx_packets, i as u32);
                    let ids: Vec<u32> = report.hops().iter().map(|h| h.node_id).collect();
                    assert_eq!(ids, vec![1, 2], "{enc:?}: path order");
                    for (k, h) in report.hops().iter().enumerate() {
                        assert_eq!(h.timestamp_ns, Some(t0 + 1_000 * (k as u64 + 1)));
                        // Each transit counted every packet of the flow, this one included.
                        assert_eq!(h.rx_packets, Some(sent as u16));
                        assert_eq!(h.tx_packets, Some(sent as u16));
                        assert_eq!(h.rx_bytes, Some(bytes));
                        assert_eq!(h.tx_bytes, Some(bytes));
                        assert_eq!(h.entry_trace_type, 0xe000);
                    }
                }
                (_, e) => panic!("{enc:?}: unexpected {e:?}"),
            }
        }
        assert_eq!(p.source.stats().requests_sent, 1);
        assert_eq!(p.source.stats().int_added, 4);
        assert_eq!(p.sink.stats().reports, 4);
    }
}

#[test]
fn request_is_re_sent_on_the_interval() {
    let mut p = path(
        rule(Mode::Count(1_000_000), 0x4000_4000),
        Encoding::Ioam,
        1500,
    );
    let f = frame(SRC, DST, 10, 0);
    let s = 1_000_000_000u64;
    for t in [0, s, 59 * s, 60 * s, 61 * s, 119 * s, 120 * s] {
        p.run(&f, t);
    }
    // Sent at 0, 60 s and 120 s.
    assert_eq!(p.source.stats().requests_sent, 3);
    assert_eq!(p.sink.stats().requests, 3);
}

fn count_int(p: &mut Path, n: usize, step_ns: u64) -> u64 {
    let f = frame(SRC, DST, 64, 1);
    for i in 0..n {
        let (_, out) = p.run(&f, 1_000_000 + i as u64 * step_ns);
        assert_eq!(out, f);
    }
    p.source.stats().int_added
}

#[test]
fn sampling_modes_hit_their_rates() {
    for enc in ENCODINGS {
        // Count: every 10th packet after the request packet.
        let mut p = path(rule(Mode::Count(10), 0x4000_4000), enc, 1500);
        assert_eq!(count_int(&mut p, 1001, 1_000), 100, "{enc:?} count");
        assert_eq!(p.reports().len(), 100);
        // Frequency: one every 10 ms with a packet every 1 ms for 1 s.
        let mut p = path(rule(Mode::Frequency(10), 0x4000_4000), enc, 1500);
        let n = count_int(&mut p, 1001, 1_000_000);
        assert!((99..=101).contains(&n), "{enc:?} frequency: {n}");
        // Probability 25 % over 4000 packets: within 5 sigma (sigma ~ 27).
        let mut p = path(rule(Mode::Probability(25.0), 0x4000_4000), enc, 1500);
        let n = count_int(&mut p, 4000, 1_000);
        assert!(
            (1000 - 140..=1000 + 140).contains(&n),
            "{enc:?} probability: {n}"
        );
    }
}

#[test]
fn hop_and_namespace_disable() {
    for enc in ENCODINGS {
        let mut p = path(rule(Mode::Count(1), 0x4000_4000), enc, 1500);
        let f = frame(SRC, DST, 64, 1);
        p.run(&f, 1);
        p.run(&f, 2);
        assert_eq!(p.reports()[0].hops().len(), 2);
        p.modify(ModifyFields {
            disable_hops: vec![1],
            ..Default::default()
        });
        p.run(&f, 3); // the rule changed: the request goes again first
        let (_, out) = p.run(&f, 4);
        assert_eq!(out, f);
        let r = p.reports();
        let ids: Vec<u32> = r[0].hops().iter().map(|h| h.node_id).collect();
        assert_eq!(ids, vec![2], "{enc:?}: hop 1 disabled");
        p.modify(ModifyFields {
            hop_enabled: Some(false),
            enable_hops: vec![],
            ..Default::default()
        });
        p.run(&f, 5);
        let (_, out) = p.run(&f, 6);
        assert_eq!(out, f);
        let r = p.reports();
        assert_eq!(r.len(), 1);
        // Node 1 still has its own override (disabled); node 2 follows the namespace.
        assert!(r[0].hops().is_empty(), "{enc:?}: namespace disabled");
        assert!(r[0].e2e.timestamp_ns.is_some());
    }
}

#[test]
fn mtu_skip_leaves_the_packet_alone_and_counts_it() {
    for enc in ENCODINGS {
        let mut p = path(rule(Mode::Count(1), 0x7000_e000), enc, 1500);
        let small = frame(SRC, DST, 64, 1);
        p.run(&small, 1); // request
        let big = frame(SRC, DST, 1500 - 48, 2); // IPv6 length exactly 1500
        let (mid, out) = p.run(&big, 2);
        assert_eq!(mid, big);
        assert_eq!(out, big);
        assert_eq!(p.source.stats().skipped_mtu, 1);
        assert!(p.reports().is_empty());
        // Seed: each transit grows the header by 24 bytes; the seed header is 8n
        // bytes: 32 with the source's E2E data, 56 with one hop, 80 with two: at 1430 bytes
        // the second hop would exceed 1500.
        // IOAM: the source pre-allocates, transits fill in place.
        let l3 = if enc == Encoding::Seed { 1430 } else { 1300 };
        let near = frame(SRC, DST, l3 - 48, 3);
        let (_, out) = p.run(&near, 3);
        assert_eq!(out, near);
        let r = p.reports();
        assert_eq!(r.len(), 1);
        if enc == Encoding::Seed {
            assert_eq!(r[0].hops().len(), 1);
            assert_eq!(p.t2.stats().skipped_mtu, 1);
        } else {
            assert_eq!(r[0].hops().len(), 2);
        }
    }
}

#[test]
fn piggyback_report_goes_to_the_source_and_is_decoded() {
    let mut p = path(rule(Mode::Count(1), 0x4000_4000), Encoding::Ioam, 1500);
    let (ptx, prx) = bounded(4);
    let mut reasons = Reasons::new();
    let mut src = IntSource::new(IntConfig::default(), p.publisher.reader()).with_piggyback(prx);
    let f = frame(SRC, DST, 64, 1);
    p.run(&f, 1);
    p.run(&f, 2);
    let rep = p.reports()[0];
    ptx.send(Piggyback::new(SRC, &rep)).unwrap();
    // A packet of the reverse direction (towards SRC) carries it.
    let back = frame(DST, SRC, 40, 9);
    let mut b = Batch::<OwnedBuf>::new();
    b.push(OwnedBuf::from_slice(&back), Disposition::CONTINUE)
        .unwrap();
    src.process(&mut b, &Context::fixed(10, 0));
    assert_eq!(src.stats().reports_sent, 1);
    let (tx, rx) = bounded(4);
    let mut sink = IntSink::new(IntConfig::default(), p.publisher.reader(), tx, &mut reasons);
    sink.process(&mut b, &Context::fixed(11, 0));
    let (out, _) = b.drain().next().unwrap();
    assert_eq!(peregrine_dataplane::PacketBuf::data(&out), &back[..]);
    match rx.try_recv().unwrap() {
        IntEvent::InBandReport { len, bytes, from } => {
            assert_eq!(from, DST);
            let got = IntReport::decode_compact(&bytes[..len as usize]).unwrap();
            assert_eq!(got.ns_id, rep.ns_id);
            assert_eq!(got.hops(), rep.hops());
            assert_eq!(got.e2e, rep.e2e);
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn malformed_int_is_dropped_with_a_named_reason_and_never_panics() {
    for enc in ENCODINGS {
        let mut p = path(rule(Mode::Count(1), 0xf000_e000), enc, 1500);
        let f = frame(SRC, DST, 32, 1);
        p.run(&f, 1);
        let mut b = Batch::<OwnedBuf>::new();
        b.push(OwnedBuf::from_slice(&f), Disposition::CONTINUE)
            .unwrap();
        p.source.process(&mut b, &Context::fixed(2, 0));
        let good = peregrine_dataplane::PacketBuf::data(&b.drain().next().unwrap().0).to_vec();
        let mut drops = 0;
        for i in 14..good.len().min(14 + 40 + 200) {
            for v in [0u8, 1, 0x11, 0x31, 0x7f, 0xff] {
                let mut m = good.clone();
                m[i] = v;
                for cut in [m.len(), i + 1] {
                    let mut b = Batch::<OwnedBuf>::new();
                    b.push(OwnedBuf::from_slice(&m[..cut]), Disposition::CONTINUE)
                        .unwrap();
                    p.t1.process(&mut b, &Context::fixed(3, 0));
                    p.sink.process(&mut b, &Context::fixed(4, 0));
                    for (_, d) in b.drain() {
                        if let Action::Drop(r) = d.action() {
                            let name = p.reasons.name(r);
                            assert!(name.starts_with("int_"), "{name}");
                            drops += 1;
                        }
                    }
                }
            }
        }
        assert!(drops > 0, "{enc:?}: no mutation was caught");
    }
}

/// `frame` with an IPv6 Fragment header (offset `offset` 8-byte units) in front of what
/// looks like the same UDP header: a non-first fragment's payload is not an L4 header.
fn fragment(offset: u16) -> Vec<u8> {
    let mut f = frame(SRC, DST, 32, 0);
    let plen = u16::from_be_bytes([f[18], f[19]]) + 8;
    f[18..20].copy_from_slice(&plen.to_be_bytes());
    f[20] = 44; // Next Header: Fragment
    let om = offset << 3 | 1; // more fragments follow
    let [a, b] = om.to_be_bytes();
    let hdr = [17, 0, a, b, 0, 0, 0, 9];
    f.splice(54..54, hdr);
    f
}

/// A non-first fragment whose payload bytes look like the ports of a monitored flow (40000
/// -> 5001) must not match it: it has no ports. The first fragment does match.
#[test]
fn non_first_fragment_does_not_match_a_flow_by_its_payload() {
    for (offset, matched) in [(8u16, 0u64), (0, 1)] {
        let mut p = path(rule(Mode::Count(1_000), 0), Encoding::Ioam, 1500);
        let mut b = Batch::<OwnedBuf>::new();
        b.push(
            OwnedBuf::from_slice(&fragment(offset)),
            Disposition::CONTINUE,
        )
        .unwrap();
        p.source.process(&mut b, &Context::fixed(1, 0));
        p.sink.process(&mut b, &Context::fixed(2, 0));
        assert_eq!(p.source.stats().matched, matched, "offset {offset}");
        assert_eq!(
            p.source.counters(NS).map(|c| c.0.packets).unwrap_or(0),
            matched as u32,
            "offset {offset}"
        );
    }
}

/// The stages read a `Classify` stage's metadata (`after_classifier`) and give the same
/// bytes and reports as stages that classify for themselves; after the source inserted its
/// headers the record still describes the packet's bytes.
#[test]
fn stages_after_the_classifier_agree_with_stages_alone() {
    use peregrine_dataplane::classify::{classify, Classify};
    use peregrine_dataplane::meta::PacketMeta;
    use peregrine_dataplane::PacketBuf;
    for enc in ENCODINGS {
        let r = rule(Mode::Count(3), 0xf000_e000);
        let mut alone = path(r.clone(), enc, 1500);
        let mut meta = path(r, enc, 1500);
        let mut classify_stage = Classify::new();
        let mut source = std::mem::replace(
            &mut meta.source,
            IntSource::new(IntConfig::default(), meta.publisher.reader()),
        )
        .after_classifier();
        let mut t1 = std::mem::replace(
            &mut meta.t1,
            IntTransit::new(
                IntConfig::default(),
                meta.publisher.reader(),
                &mut meta.reasons,
            ),
        )
        .after_classifier();
        let mut t2 = std::mem::replace(
            &mut meta.t2,
            IntTransit::new(
                IntConfig::default(),
                meta.publisher.reader(),
                &mut meta.reasons,
            ),
        )
        .after_classifier();
        let mut sink = std::mem::replace(
            &mut meta.sink,
            IntSink::new(
                IntConfig::default(),
                meta.publisher.reader(),
                bounded(1).0,
                &mut meta.reasons,
            ),
        )
        .after_classifier();
        for i in 0..20u64 {
            let pkt = frame(SRC, DST, 100 + i as usize, i as u8);
            let (after_a, out_a) = alone.run(&pkt, i * 10_000);
            let mut b = Batch::<OwnedBuf>::new();
            b.push(OwnedBuf::from_slice(&pkt), Disposition::CONTINUE)
                .unwrap();
            let t0 = i * 10_000;
            classify_stage.process(&mut b, &Context::fixed(t0, 0));
            source.process(&mut b, &Context::fixed(t0, 0));
            let (buf, _) = b.drain().next().unwrap();
            assert_eq!(
                buf.data(),
                &after_a[..],
                "{enc:?} packet {i}: after the source"
            );
            let mut want = PacketMeta::EMPTY;
            classify(buf.data(), &mut want).unwrap();
            let m = buf.pkt_meta();
            assert_eq!(
                (m.l3_off, m.l4_off, m.inner_l4_off, m.proto, m.flow_hash),
                (
                    want.l3_off,
                    want.l4_off,
                    want.inner_l4_off,
                    want.proto,
                    want.flow_hash
                ),
                "{enc:?} packet {i}: the record follows the inserted headers"
            );
            let mut b = Batch::<OwnedBuf>::new();
            b.push(buf, Disposition::CONTINUE).unwrap();
            t1.process(&mut b, &Context::fixed(t0 + 1_000, 0));
            t2.process(&mut b, &Context::fixed(t0 + 2_000, 0));
            sink.process(&mut b, &Context::fixed(t0 + 3_000, 0));
            let (out, d) = b.drain().next().unwrap();
            assert_eq!(d.action(), Action::Continue);
            assert_eq!(out.data(), &out_a[..], "{enc:?} packet {i}: after the sink");
        }
        assert_eq!(source.stats(), alone.source.stats());
        assert_eq!(t1.stats().hops_added, alone.t1.stats().hops_added);
        assert_eq!(sink.stats().reports, alone.sink.stats().reports);
        let (a, m) = (alone.reports(), meta.reports());
        assert_eq!(a.len(), m.len(), "{enc:?}");
        for (a, m) in a.iter().zip(&m) {
            assert_eq!(a.hops, m.hops, "{enc:?}");
            assert_eq!(a.e2e, m.e2e, "{enc:?}");
        }
        assert!(alone.sink.stats().reports > 3, "{enc:?}");
    }
}
