//! The traffic generator's contract: determinism, frames that parse with valid checksums at
//! every layer, exact sizes, anomalies that fail as labelled, and pcap/manifest output.

use peregrine_dataplane::io::pcapfile::PcapReader;
use peregrine_testkit::traffic::parse::{self, Layer};
use peregrine_testkit::traffic::{
    self, generate, Anomaly, Dir, GenPacket, IpMix, Session, Sizes, Summary, TrafficSpec,
    NO_ROUTE_V4, UNKNOWN_ETHERTYPE, UNKNOWN_TEID,
};
use peregrine_wire::ethernet::{self, ethertype};
use peregrine_wire::{arp, gtpu, gtpu_msg, ipv4, ipv6, pdu_session, udp, Error as WireError};
use std::collections::BTreeMap;
use std::net::IpAddr;

fn quickstart() -> TrafficSpec {
    TrafficSpec::default()
}

/// Specs covering every IP version combination and size mode.
fn variety() -> Vec<TrafficSpec> {
    let base = TrafficSpec {
        packets: 3000,
        anomalies: 0,
        ..quickstart()
    };
    let mut v = vec![quickstart()];
    for (inner, outer) in [
        (IpMix::V4, IpMix::V4),
        (IpMix::V6, IpMix::V6),
        (IpMix::V4, IpMix::V6),
        (IpMix::V6, IpMix::V4),
    ] {
        v.push(TrafficSpec {
            inner,
            outer,
            seed: 7,
            ..base.clone()
        });
    }
    v.push(TrafficSpec {
        sizes: Sizes::Imix,
        ues: 1000,
        gnbs: 13,
        qfis: vec![9],
        seed: 99,
        ..base.clone()
    });
    v
}

fn mac(frame: &[u8]) -> (ethernet::Address, ethernet::Address, u16) {
    let f = ethernet::Frame::new_checked(frame).unwrap();
    (f.dst_addr(), f.src_addr(), f.ethertype())
}

fn ue_addrs(s: &Session) -> [IpAddr; 2] {
    [IpAddr::V4(s.ue_ipv4), IpAddr::V6(s.ue_ipv6)]
}

fn in_dn(spec: &TrafficSpec, a: IpAddr) -> bool {
    let ad = &spec.addressing;
    match a {
        IpAddr::V4(a) => u32::from(a) >> 8 == u32::from(ad.dn_v4.addr) >> 8,
        IpAddr::V6(a) => u128::from(a) >> 80 == u128::from(ad.dn_v6.addr) >> 80,
    }
}

#[test]
fn same_spec_same_bytes() {
    let spec = quickstart();
    let a: Vec<GenPacket> = generate(&spec).collect();
    let b: Vec<GenPacket> = generate(&spec).collect();
    assert_eq!(a.len(), 10_000);
    assert_eq!(a, b);
    let other: Vec<GenPacket> = generate(&TrafficSpec { seed: 2, ..spec }).collect();
    assert_ne!(a, other);
    // Independent of iteration state: a fresh generator skipped ahead agrees.
    let late: Vec<GenPacket> = generate(&quickstart()).skip(9_990).collect();
    assert_eq!(late, a[9_990..]);
}

#[test]
fn quickstart_shape() {
    let spec = quickstart();
    let sessions = spec.sessions();
    assert_eq!(sessions.len(), 64);
    let pkts: Vec<GenPacket> = generate(&spec).collect();
    let normal: Vec<&GenPacket> = pkts.iter().filter(|p| p.anomaly.is_none()).collect();
    let ul = normal.iter().filter(|p| p.dir == Dir::Ul).count() as f64;
    let ratio = ul / normal.len() as f64;
    assert!((0.57..0.63).contains(&ratio), "UL ratio {ratio}");
    // Every UE, gNB, both IP versions inside and out, UDP and TCP all appear.
    let used: std::collections::HashSet<usize> = normal.iter().filter_map(|p| p.session).collect();
    assert_eq!(used.len(), 64);
    let mut families = std::collections::HashSet::new();
    let mut protos = std::collections::HashSet::new();
    for p in &normal {
        if p.dir == Dir::Ul {
            let u = parse::ul_frame(&p.frame).unwrap();
            families.insert(("outer", u.outer.src.is_ipv4()));
            families.insert(("inner", u.inner.ip.src.is_ipv4()));
            protos.insert(u.inner.l4.protocol);
        }
    }
    assert_eq!(families.len(), 4);
    assert_eq!(protos.len(), 2);
    let gnbs: std::collections::HashSet<u32> = sessions.iter().map(|s| s.gnb_index).collect();
    assert_eq!(gnbs.len(), 4);
    for (i, p) in pkts.iter().enumerate() {
        assert_eq!(p.index, i as u64);
        assert_eq!(p.ts_ns, traffic::START_TS_NS + 1000 * i as u64);
    }
}

/// Every non-anomalous UL frame parses down to the inner L4 header with valid checksums, and
/// its tunnel, QFI and addresses are its session's.
#[test]
fn uplink_frames_parse_with_valid_checksums() {
    for spec in variety() {
        let sessions = spec.sessions();
        let a = &spec.addressing;
        let mut n = 0;
        for p in generate(&spec).filter(|p| p.anomaly.is_none() && p.dir == Dir::Ul) {
            n += 1;
            let s = &sessions[p.session.unwrap()];
            let u = parse::ul_frame(&p.frame).unwrap_or_else(|e| panic!("{e} in {p:?}"));
            let (dst, src, et) = mac(&p.frame);
            assert_eq!((dst, src), (a.upf_n3_mac, a.gnb_peer_mac));
            assert_eq!(et == ethertype::IPV4, u.outer.src.is_ipv4());
            assert_eq!(u.outer.src, s.gnb_addr);
            let upf: IpAddr = match s.gnb_addr {
                IpAddr::V4(_) => a.upf_n3_v4.into(),
                IpAddr::V6(_) => a.upf_n3_v6.into(),
            };
            assert_eq!(u.outer.dst, upf);
            assert_eq!(u.outer.ttl, 64);
            assert_eq!(u.outer.total_len + 14, p.frame.len());
            // The outer UDP checksum is present (and verified by the parser) over both families.
            let seg = &p.frame[14 + u.outer.header_len..];
            let udp = udp::Packet::new_checked(seg).unwrap();
            assert_eq!((udp.src_port(), udp.dst_port()), (2152, 2152));
            assert_ne!(udp.checksum(), 0);
            assert_eq!(u.teid, s.ul_teid);
            let qfi = p.qfi.unwrap();
            assert!(s.qfis.contains(&qfi));
            assert_eq!(u.pdu_session, Some(pdu_session::Repr::Ul { qfi }));
            let g = gtpu::Header::new_checked(udp.payload()).unwrap();
            assert!(g.e_flag());
            assert_eq!(g.msg_type(), gtpu::msg_type::G_PDU);
            assert!(ue_addrs(s).contains(&u.inner.ip.src));
            assert!(in_dn(&spec, u.inner.ip.dst));
            assert_eq!(u.inner.ip.ttl, 64);
            if spec.inner == IpMix::V4 {
                assert!(u.inner.ip.src.is_ipv4());
            }
            if spec.inner == IpMix::V6 {
                assert!(u.inner.ip.src.is_ipv6());
            }
            if spec.outer != IpMix::Mixed {
                assert_eq!(u.outer.src.is_ipv4(), spec.outer == IpMix::V4);
            }
        }
        assert!(n > 1000, "{n} UL packets");
    }
}

/// Every non-anomalous DL frame parses with valid checksums and is addressed to its UE.
#[test]
fn downlink_frames_parse_with_valid_checksums() {
    for spec in variety() {
        let sessions = spec.sessions();
        let a = &spec.addressing;
        let mut n = 0;
        for p in generate(&spec).filter(|p| p.anomaly.is_none() && p.dir == Dir::Dl) {
            n += 1;
            let s = &sessions[p.session.unwrap()];
            let d = parse::dl_frame(&p.frame).unwrap_or_else(|e| panic!("{e} in {p:?}"));
            assert_eq!(mac(&p.frame).0, a.upf_n6_mac);
            assert_eq!(mac(&p.frame).1, a.n6_router_mac);
            assert!(
                ue_addrs(s).contains(&d.ip.dst),
                "{:?} not UE {}",
                d.ip.dst,
                s.ue_index
            );
            assert!(in_dn(&spec, d.ip.src));
            assert_eq!(d.ip.ttl, 64);
            assert!(s.qfis.contains(&p.qfi.unwrap()));
            // No Ethernet padding beyond the 60-byte minimum.
            assert_eq!((d.ip.total_len + 14).max(60), p.frame.len());
        }
        assert!(n > 500, "{n} DL packets");
    }
}

/// A flow keeps its 5-tuple: packets of the same session and ports share addresses.
#[test]
fn flows_are_stable() {
    let spec = quickstart();
    let mut seen: BTreeMap<(usize, u16), (IpAddr, IpAddr, u16)> = BTreeMap::new();
    for p in generate(&spec).filter(|p| p.anomaly.is_none() && p.dir == Dir::Ul) {
        let u = parse::ul_frame(&p.frame).unwrap();
        let key = (p.session.unwrap(), u.inner.l4.src_port);
        let val = (u.inner.ip.src, u.inner.ip.dst, u.inner.l4.dst_port);
        assert_eq!(*seen.entry(key).or_insert(val), val);
    }
    // At most FLOWS_PER_UE flows per UE.
    let mut per_ue: BTreeMap<usize, usize> = BTreeMap::new();
    for (s, _) in seen.keys() {
        *per_ue.entry(*s).or_default() += 1;
    }
    assert!(per_ue
        .values()
        .all(|&n| n <= traffic::FLOWS_PER_UE as usize));
}

/// Sizes above every header stack are met exactly; smaller ones grow to the stack (with an
/// empty payload) or to 60 bytes.
#[test]
fn frame_sizes_as_requested() {
    let sizes = vec![200u16, 512, 1400, 1500, 139];
    let spec = TrafficSpec {
        sizes: Sizes::Fixed(sizes.clone()),
        packets: 4000,
        ..quickstart()
    };
    for p in generate(&spec).filter(|p| p.anomaly.is_none()) {
        assert_eq!(
            p.frame.len(),
            sizes[p.index as usize % sizes.len()] as usize
        );
    }
    let spec = TrafficSpec {
        sizes: Sizes::Imix,
        packets: 1200,
        ..spec
    };
    for p in generate(&spec).filter(|p| p.anomaly.is_none()) {
        let want = traffic::IMIX_CYCLE[p.index as usize % 12] as usize;
        match p.dir {
            Dir::Ul => {
                let u = parse::ul_frame(&p.frame).unwrap();
                if p.frame.len() != want {
                    assert!(p.frame.len() > want && u.inner.l4.payload_len == 0);
                }
            }
            Dir::Dl => {
                let d = parse::dl_frame(&p.frame).unwrap();
                if p.frame.len() != want {
                    assert!(p.frame.len() > want && d.l4.payload_len == 0);
                }
            }
        }
    }
    // Below the Ethernet minimum: 60 bytes, or the stack if longer.
    let spec = TrafficSpec {
        sizes: Sizes::Fixed(vec![1]),
        packets: 500,
        anomalies: 0,
        ..quickstart()
    };
    for p in generate(&spec) {
        assert!(p.frame.len() >= 60);
        let payload = match p.dir {
            Dir::Ul => parse::ul_frame(&p.frame).unwrap().inner.l4.payload_len,
            Dir::Dl => parse::dl_frame(&p.frame).unwrap().l4.payload_len,
        };
        assert!(
            p.frame.len() == 60 || payload == 0,
            "{} bytes",
            p.frame.len()
        );
    }
}

#[test]
fn payload_carries_the_index() {
    let spec = TrafficSpec {
        sizes: Sizes::Fixed(vec![300]),
        packets: 200,
        anomalies: 0,
        ..quickstart()
    };
    for p in generate(&spec) {
        let n = p.frame.len();
        let l4_payload_len = match p.dir {
            Dir::Ul => parse::ul_frame(&p.frame).unwrap().inner.l4.payload_len,
            Dir::Dl => parse::dl_frame(&p.frame).unwrap().l4.payload_len,
        };
        let payload = &p.frame[n - l4_payload_len..];
        assert_eq!(payload[..8], p.index.to_be_bytes());
    }
}

/// Check that an anomalous frame fails (or stands out) the way its label says.
fn check_anomaly(spec: &TrafficSpec, sessions: &[Session], p: &GenPacket) {
    let a = &spec.addressing;
    let kind = p.anomaly.unwrap();
    let (dst_mac, _, et) = mac(&p.frame);
    match (kind, p.dir) {
        (Anomaly::BadIpv4Checksum, dir) => {
            assert_eq!(et, ethertype::IPV4);
            let ip = ipv4::Packet::new_checked(&p.frame[14..]).unwrap();
            assert!(!ip.verify_checksum());
            assert_eq!(ipv4::Repr::parse(&ip), Err(WireError::Checksum));
            let e = match dir {
                Dir::Ul => parse::ul_frame(&p.frame).unwrap_err(),
                Dir::Dl => parse::dl_frame(&p.frame).unwrap_err(),
            };
            assert_eq!((e.layer, e.error), (Layer::OuterIp, WireError::Checksum));
            if dir == Dir::Ul {
                assert_eq!(ip.dst_addr(), a.upf_n3_v4);
            }
        }
        (Anomaly::Ttl1, Dir::Ul) => {
            let u = parse::ul_frame(&p.frame).unwrap();
            assert_eq!((u.outer.ttl, u.inner.ip.ttl), (64, 1));
            assert_eq!(u.teid, sessions[p.session.unwrap()].ul_teid);
        }
        (Anomaly::Ttl1, Dir::Dl) => {
            assert_eq!(parse::dl_frame(&p.frame).unwrap().ip.ttl, 1);
        }
        (Anomaly::Truncated, dir) => {
            let l3 = &p.frame[14..];
            let hl = if et == ethertype::IPV4 { 20 } else { 40 };
            assert!(!l3.is_empty() && l3.len() < hl);
            let err = if et == ethertype::IPV4 {
                ipv4::Packet::new_checked(l3).unwrap_err()
            } else {
                assert_eq!(et, ethertype::IPV6);
                ipv6::Packet::new_checked(l3).unwrap_err()
            };
            assert_eq!(err, WireError::Truncated);
            let e = match dir {
                Dir::Ul => parse::ul_frame(&p.frame).unwrap_err(),
                Dir::Dl => parse::dl_frame(&p.frame).unwrap_err(),
            };
            assert_eq!((e.layer, e.error), (Layer::OuterIp, WireError::Truncated));
        }
        (Anomaly::UnknownEthertype, dir) => {
            assert_eq!(et, UNKNOWN_ETHERTYPE);
            let port_mac = if dir == Dir::Ul {
                a.upf_n3_mac
            } else {
                a.upf_n6_mac
            };
            assert_eq!(dst_mac, port_mac);
            let e = parse::dl_frame(&p.frame).unwrap_err();
            assert_eq!(
                (e.layer, e.error),
                (Layer::Ethernet, WireError::Unsupported)
            );
        }
        (Anomaly::ArpRequest, Dir::Ul) => {
            assert_eq!(
                (dst_mac, et),
                (ethernet::Address::BROADCAST, ethertype::ARP)
            );
            let r = arp::Repr::parse(&arp::Packet::new_checked(&p.frame[14..]).unwrap()).unwrap();
            assert_eq!(r.operation, arp::Operation::Request);
            assert_eq!(r.target_protocol_addr, a.upf_n3_v4);
            assert_eq!(r.sender_hardware_addr, a.gnb_peer_mac);
            assert_eq!(p.frame.len(), 60);
        }
        (Anomaly::NoRoute, Dir::Ul) => {
            let u = parse::ul_frame(&p.frame).unwrap();
            assert_eq!(u.inner.ip.dst, IpAddr::V4(NO_ROUTE_V4));
            assert_eq!(u.teid, sessions[p.session.unwrap()].ul_teid);
        }
        (Anomaly::NoRoute, Dir::Dl) => {
            let d = parse::dl_frame(&p.frame).unwrap();
            assert_eq!(d.ip.dst, IpAddr::V4(NO_ROUTE_V4));
        }
        (Anomaly::UnknownTeid, Dir::Ul) => {
            let u = parse::ul_frame(&p.frame).unwrap();
            assert_eq!(u.teid, UNKNOWN_TEID);
            assert!(sessions.iter().all(|s| s.ul_teid != UNKNOWN_TEID));
        }
        (Anomaly::EchoRequest, Dir::Ul) => {
            let (outer, h) = parse::n3_gtpu(&p.frame).unwrap();
            assert!(outer.dst == IpAddr::V4(a.upf_n3_v4) || outer.dst == IpAddr::V6(a.upf_n3_v6));
            assert_eq!(
                gtpu_msg::Repr::parse(&h),
                Ok(gtpu_msg::Repr::EchoRequest {
                    seq: p.index as u16
                })
            );
            let e = parse::ul_frame(&p.frame).unwrap_err();
            assert_eq!((e.layer, e.error), (Layer::Gtpu, WireError::Unsupported));
        }
        (k, d) => panic!("{k} generated in direction {d:?}"),
    }
}

#[test]
fn anomalies_are_counted_and_fail_as_labelled() {
    for (anomalies, inner, outer) in [
        (40, IpMix::Mixed, IpMix::Mixed),
        (80, IpMix::V6, IpMix::V6),
        (19, IpMix::V4, IpMix::V4),
    ] {
        let spec = TrafficSpec {
            anomalies,
            inner,
            outer,
            packets: 2000,
            ..quickstart()
        };
        let sessions = spec.sessions();
        let mut by_kind: BTreeMap<Anomaly, usize> = BTreeMap::new();
        for p in generate(&spec).filter(|p| p.anomaly.is_some()) {
            *by_kind.entry(p.anomaly.unwrap()).or_default() += 1;
            check_anomaly(&spec, &sessions, &p);
        }
        assert_eq!(by_kind.values().sum::<usize>(), anomalies as usize);
        // The kinds in turn: counts differ by at most one.
        let (min, max) = (by_kind.values().min(), by_kind.values().max());
        assert!(max.unwrap() - min.unwrap() <= 1, "{by_kind:?}");
        assert_eq!(by_kind.len(), Anomaly::ALL.len());
    }
}

#[test]
fn anomalies_come_in_both_directions() {
    let spec = TrafficSpec {
        anomalies: 16,
        packets: 100,
        ..quickstart()
    };
    let s = Summary::of(&spec);
    assert_eq!(s.ul.anomalies + s.dl.anomalies, 16);
    for k in Anomaly::ALL {
        let c = s.anomalies[k.name()];
        if k.both_directions() {
            assert_eq!((c.ul, c.dl), (1, 1), "{k}");
        } else {
            assert_eq!((c.ul, c.dl), (2, 0), "{k}");
        }
    }
    // All anomalies, no normal packets.
    let spec = TrafficSpec {
        anomalies: 50,
        packets: 50,
        ..quickstart()
    };
    assert!(generate(&spec).all(|p| p.anomaly.is_some()));
}

#[test]
fn ul_ratio_extremes() {
    for (ratio, dir) in [(0.0, Dir::Dl), (1.0, Dir::Ul)] {
        let spec = TrafficSpec {
            ul_ratio: ratio,
            anomalies: 0,
            packets: 500,
            ..quickstart()
        };
        assert!(generate(&spec).all(|p| p.dir == dir));
    }
}

/// What is written to the pcap files reads back as the same frames and timestamps.
#[test]
fn pcaps_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (ul_path, dl_path) = (dir.path().join("ul.pcap"), dir.path().join("dl.pcap"));
    let spec = TrafficSpec {
        rate_pps: Some(3_000_000.0),
        ..quickstart()
    };
    let summary = traffic::write_pcaps(&spec, &ul_path, &dl_path).unwrap();
    assert_eq!(summary, Summary::of(&spec));
    for (path, dir) in [(&ul_path, Dir::Ul), (&dl_path, Dir::Dl)] {
        let want: Vec<GenPacket> = generate(&spec).filter(|p| p.dir == dir).collect();
        let mut r = PcapReader::open(path).unwrap();
        let mut buf = Vec::new();
        let mut n = 0;
        while let Some(rec) = r.next_packet(&mut buf).unwrap() {
            let w = &want[n];
            assert_eq!(buf, w.frame, "frame {n} of {}", path.display());
            assert_eq!(rec.ts_ns, w.ts_ns);
            assert_eq!(rec.orig_len as usize, w.frame.len());
            n += 1;
        }
        assert_eq!(n, want.len());
        let count = match dir {
            Dir::Ul => summary.ul.packets,
            Dir::Dl => summary.dl.packets,
        };
        assert_eq!(n as u64, count);
    }
}

#[test]
fn manifest_describes_sessions_and_counts() {
    let spec = quickstart();
    let m = traffic::manifest(&spec);
    let sessions = spec.sessions();
    let js = m["sessions"].as_array().unwrap();
    assert_eq!(js.len(), sessions.len());
    for (j, s) in js.iter().zip(&sessions) {
        assert_eq!(j["ul_teid"], s.ul_teid);
        assert_eq!(j["dl_teid"], s.dl_teid);
        assert_eq!(j["qfi"], s.qfi);
        assert_eq!(j["ue_ipv4"], s.ue_ipv4.to_string());
        assert_eq!(j["ue_ipv6"], s.ue_ipv6.to_string());
        assert_eq!(j["gnb_addr"], s.gnb_addr.to_string());
    }
    let c = &m["counts"];
    assert_eq!(c["packets"], 10_000);
    assert_eq!(
        c["ul"]["packets"].as_u64().unwrap() + c["dl"]["packets"].as_u64().unwrap(),
        10_000
    );
    let total: u64 = c["anomalies"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v["ul"].as_u64().unwrap() + v["dl"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 40);
    assert_eq!(m["spec"]["addressing"]["upf_n3_mac"], "02:00:00:00:00:03");
    assert_eq!(m["spec"]["addressing"]["ue_pool_v6"], "2001:db8:45::/48");
    assert_eq!(m["spec"]["inner"], "mixed");
    assert_eq!(m["anomaly_kinds"].as_object().unwrap().len(), 8);
}

#[test]
#[should_panic(expected = "invalid traffic spec")]
fn generate_rejects_invalid_specs() {
    let _ = generate(&TrafficSpec {
        ues: 0,
        ..quickstart()
    });
}
