//! The sketch-INT co-design gate in the INT source (`docs/codesign.md`): packets of a flow
//! that crossed the large-flow threshold get no INT, small flows keep it, and the counters
//! say how many packets and INT bytes the gate saved.

use peregrine_dataplane::classify::Classify;
use peregrine_dataplane::runtime::{Action, Batch, Context, Disposition, Publisher, Stage};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_int::gate::{FlowGate, GateConfig, GateUnit};
use peregrine_int::namespace::NamespaceTable;
use peregrine_int::request::{Flags, Mode, Protocol, Rule, TraceType};
use peregrine_int::stages::{IntConfig, IntSource};
use std::net::Ipv6Addr;

const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// Ethernet + IPv6 + UDP sport -> 5001 with 100 bytes of payload.
fn frame(sport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd];
    let plen: u16 = 8 + 100;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&plen.to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    f.extend_from_slice(&SRC.octets());
    f.extend_from_slice(&DST.octets());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&5001u16.to_be_bytes());
    f.extend_from_slice(&plen.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend(std::iter::repeat_n(0x5a, 100));
    f
}

/// The rule table both tests install: UDP to port 5001 from SRC to DST, every packet.
fn rules() -> Publisher<peregrine_int::namespace::TableSnapshot> {
    let mut table = NamespaceTable::default();
    table
        .install(Rule {
            ns_id: 7,
            app_id: 1,
            src_ip: SRC,
            dst_ip: DST,
            src_port: 0,
            dst_port: 5001,
            protocol: Protocol::Udp,
            trace_type: TraceType(0xf000_e000),
            mode: Mode::Count(1),
            flags: Flags::default(),
        })
        .unwrap();
    Publisher::new((*table.snapshot()).clone())
}

fn source(
    gate: Option<GateConfig>,
) -> (
    IntSource,
    Publisher<peregrine_int::namespace::TableSnapshot>,
) {
    let publisher = rules();
    let cfg = IntConfig {
        gate: gate.clone(),
        ..IntConfig::default()
    };
    let mut s = IntSource::new(cfg, publisher.reader()).after_classifier();
    if let Some(g) = gate {
        s = s.with_gate(FlowGate::new(g).unwrap());
    }
    (s, publisher)
}

/// Runs `pkts` through classifier + source; returns how many grew (got INT or a request).
fn run(s: &mut IntSource, pkts: &[Vec<u8>]) -> Vec<bool> {
    let mut c = Classify::new();
    pkts.iter()
        .enumerate()
        .map(|(i, p)| {
            let mut b = Batch::<OwnedBuf>::new();
            b.push(OwnedBuf::from_slice(p), Disposition::CONTINUE)
                .unwrap();
            let cx = Context::fixed(i as u64 * 1_000, 0);
            c.process(&mut b, &cx);
            s.process(&mut b, &cx);
            let (out, d) = b.drain().next().unwrap();
            assert_eq!(d.action(), Action::Continue);
            out.data().len() > p.len()
        })
        .collect()
}

#[test]
fn large_flow_loses_int_small_flow_keeps_it() {
    let gate = GateConfig {
        window_ms: 1000,
        rows: 3,
        width: 1024,
        unit: GateUnit::Packets,
        large: 10,
        small: 5,
        export: None,
        export_flows: 4096,
    };
    // 50 packets of a large flow, then 5 of a small one.
    let mut pkts: Vec<Vec<u8>> = (0..50).map(|_| frame(1000)).collect();
    pkts.extend((0..5).map(|_| frame(2000)));
    let (mut with, _p1) = source(Some(gate));
    let (mut without, _p2) = source(None);
    let grew = run(&mut with, &pkts);
    let grew_without = run(&mut without, &pkts);
    assert!(grew_without.iter().all(|&g| g));
    // Packet 0 carries the in-band request; 1..=9 INT; from 10 on the flow is large.
    assert!(grew[..10].iter().all(|&g| g));
    assert!(grew[10..50].iter().all(|&g| !g));
    assert!(grew[50..].iter().all(|&g| g), "the small flow keeps INT");
    let s = with.stats();
    let w = without.stats();
    assert_eq!(s.int_added, 9 + 5);
    assert_eq!(w.int_added, 49 + 5);
    assert_eq!(s.gate_switched, 1);
    assert_eq!(s.gate_skipped, 40);
    assert_eq!(s.gate_unclassified, 0);
    // Every packet was counted by the rule all the same.
    assert_eq!(s.matched, w.matched);
    // INT bytes saved: 40 headers of the size the ungated source inserted.
    let hdr = {
        let mut t = source(None).0;
        let mut c = Classify::new();
        let mut sizes = Vec::new();
        for (i, p) in pkts[..2].iter().enumerate() {
            let mut b = Batch::<OwnedBuf>::new();
            b.push(OwnedBuf::from_slice(p), Disposition::CONTINUE)
                .unwrap();
            let cx = Context::fixed(i as u64, 0);
            c.process(&mut b, &cx);
            t.process(&mut b, &cx);
            sizes.push(b.drain().next().unwrap().0.data().len() - p.len());
        }
        sizes[1] as u64
    };
    assert_eq!(s.gate_bytes_saved, 40 * hdr);
    assert_eq!(
        with.gate().unwrap().estimate(peregrine_flow_hash(&pkts[0])),
        50
    );
}

fn peregrine_flow_hash(p: &[u8]) -> u32 {
    let mut m = peregrine_dataplane::meta::PacketMeta::EMPTY;
    peregrine_dataplane::classify::classify(p, &mut m).unwrap();
    m.flow_hash
}

#[test]
fn without_the_classifier_the_gate_counts_and_stays_out() {
    let gate = GateConfig {
        window_ms: 1000,
        rows: 3,
        width: 1024,
        unit: GateUnit::Packets,
        large: 2,
        small: 1,
        export: None,
        export_flows: 4096,
    };
    let publisher = rules();
    let mut s = IntSource::new(IntConfig::default(), publisher.reader())
        .with_gate(FlowGate::new(gate).unwrap());
    for i in 0..6u64 {
        let mut b = Batch::<OwnedBuf>::new();
        b.push(OwnedBuf::from_slice(&frame(1000)), Disposition::CONTINUE)
            .unwrap();
        s.process(&mut b, &Context::fixed(i, 0));
    }
    assert_eq!(s.stats().gate_unclassified, 6);
    assert_eq!(s.stats().int_added, 5);
}
