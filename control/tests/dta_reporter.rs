//! Reporter to collector, end to end over two daemons on the pcap backend:
//!
//! 1. An `l3fwd` node with `[dta]` forwards UDP flows (and drops unroutable ones); its
//!    post-dequeue tap turns each packet's `PacketMeta` (flow hash, sojourn) into Key-Write
//!    reports, and its drop counters become Append events and Key-Increments; the reports
//!    leave through the node's port toward the collector's MAC and IPv4.
//! 2. A `dta-translator` node replays that port's output: the reports land in its region.
//! 3. A collector attached to the region finds every flow's record under the flow hash the
//!    reporter used, the drop counter under the `no_route` reason id, and the drop events in
//!    the list.

mod dta_common;

use dta_common::{l3fwd_reporter, parse, COLLECTOR};
use peregrine_control::daemon::{self, RunOptions};
use peregrine_control::dta::reporter::DtaReporterStats;
use peregrine_dataplane::io::pcapfile::{PcapWriter, Resolution};
use peregrine_dta::KwAnswer;
use peregrine_testkit::daemon::PCAP_ONE_PORT;
use peregrine_testkit::pcap::read_pcap;
use peregrine_wire::dta::{self, Primitive, Repr, Variant};
use peregrine_wire::{ethernet, ipv4, udp};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

const FLOWS: u16 = 8;
const PER_FLOW: u64 = 6;

fn udp_frame(dst: Ipv4Addr, sport: u16) -> Vec<u8> {
    let payload = [0u8; 18];
    let mut b = vec![0u8; 14 + 20 + 8 + payload.len()];
    ethernet::Repr {
        src: ethernet::Address([2, 0, 0, 0, 9, 9]),
        dst: ethernet::Address([2, 0, 0, 0, 0, 1]),
        ethertype: ethernet::ethertype::IPV4,
    }
    .emit(&mut b)
    .unwrap();
    let src = Ipv4Addr::new(10, 1, 0, 1);
    ipv4::Repr {
        src,
        dst,
        protocol: ipv4::ip_protocol::UDP,
        payload_len: 8 + payload.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: false,
    }
    .emit(&mut b[14..])
    .unwrap();
    udp::Repr {
        src_port: sport,
        dst_port: 5000,
        payload_len: payload.len(),
    }
    .emit(&mut b[34..])
    .unwrap();
    let mut u = udp::Packet::new_unchecked(&mut b[34..]);
    u.fill_checksum_v4(src, dst);
    b
}

#[test]
fn reporter_to_translator_to_collector() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = PcapWriter::create(dir.path().join("in.pcap"), Resolution::Nano).unwrap();
    let mut t = 1_000_000_000u64;
    for i in 0..PER_FLOW {
        for f in 0..FLOWS {
            w.write(t, &udp_frame(Ipv4Addr::new(10, 2, 0, 1), 6000 + f))
                .unwrap();
            t += 20_000_000; // 20 ms apart: the control loop ticks in between
        }
        // One unroutable packet per round: a `no_route` drop.
        w.write(t, &udp_frame(Ipv4Addr::new(192, 0, 2, 1), 7000 + i as u16))
            .unwrap();
        t += 20_000_000;
    }
    // A slow tail of flow 0 so the drop records are sent before the replay ends.
    for k in 0..10 {
        w.write(
            t + k * 50_000_000,
            &udp_frame(Ipv4Addr::new(10, 2, 0, 1), 6000),
        )
        .unwrap();
    }
    w.flush().unwrap();

    let reporter = parse(
        &format!(
            r#"{PCAP_ONE_PORT}
{reporter}drops = true
drops_list = 3
"#,
            reporter = l3fwd_reporter()
        ),
        dir.path(),
    );
    let summary = daemon::run(&reporter, &RunOptions::default()).expect("reporter run");
    let rs: DtaReporterStats = summary.feature("dta").expect("reporter summary");
    eprintln!("{rs:?}");
    let no_route = summary
        .drops
        .iter()
        .position(|(name, _)| name == "no_route")
        .expect("no_route is a reason") as u32;

    // What the reporter sent, decoded with our parser.
    let out = read_pcap(dir.path().join("out.pcap"));
    let mut sojourn: BTreeMap<u32, u32> = BTreeMap::new();
    let (mut appends, mut incs) = (0, 0);
    let mut reports = Vec::new();
    for f in &out {
        let e = ethernet::Frame::new_checked(&f[..]).unwrap();
        let ip = ipv4::Packet::new_checked(e.payload()).unwrap();
        if ip.dst_addr() != COLLECTOR {
            continue;
        }
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(u.dst_port(), dta::UDP_PORT);
        assert!(u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
        let r =
            Repr::parse(&dta::Packet::new_checked(u.payload(), Variant::Tracked).unwrap()).unwrap();
        match r.primitive {
            Primitive::KeyWrite { key, data, .. } => {
                sojourn.insert(key, data[0]);
            }
            Primitive::Append { list, data } => {
                assert_eq!(list, 3);
                assert_eq!(data >> 24, no_route);
                appends += 1;
            }
            Primitive::KeyIncrement { key, .. } => {
                assert_eq!(key, no_route);
                incs += 1;
            }
            Primitive::Postcard { .. } => panic!("no postcards configured"),
        }
        reports.push(f.clone());
    }
    // One flow hash per forwarded flow (the unroutable packets are dropped before egress).
    assert_eq!(sojourn.len(), FLOWS as usize, "{sojourn:?}");
    assert!(appends >= 1 && incs >= 1, "drop events reported");
    assert_eq!(rs.key_write + rs.append + rs.key_increment, rs.sent);
    // A frame the injector accepted in the last tick may meet a stopping worker.
    let n = reports.len() as u64;
    assert!(n <= rs.sent && n + 2 >= rs.sent, "{n} of {} sent", rs.sent);

    // The translator ingests the reporter's output.
    let (ts, c) = dta_common::translate(dir.path(), &reports, "ap_lists = 4");
    assert_eq!(ts.refused.values().sum::<u64>(), 0, "{ts:?}");

    for (key, soj) in &sojourn {
        assert_eq!(
            c.key_write(*key, Some(2), 1).unwrap(),
            KwAnswer::Found {
                data: vec![*soj],
                votes: 2,
                matching: 2
            }
        );
    }
    assert_eq!(c.key_increment(no_route, Some(2)).unwrap(), PER_FLOW);
    let mut f = c.follow_from(3, 0).unwrap();
    let events = f.poll(100).entries;
    assert_eq!(events.len(), appends);
    let total: u32 = events.iter().map(|e| e & 0xff_ffff).sum();
    assert_eq!(total as u64, PER_FLOW);
}
