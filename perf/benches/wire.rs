//! Per-packet costs of the wire formats and of the L3 forwarding stage, over frames from the
//! traffic generator (built before any timing loop).
//!
//! Run with `cargo bench -p peregrine-perf --bench wire`; every benchmark reports elements
//! (packets) per second. Results are kept in `perf/results/wire-bench.md`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use peregrine_dataplane::buffer::{OwnedBuf, PacketBuf};
use peregrine_dataplane::runtime::{Batch, Context, Disposition, Publisher, Reasons, Stage};
use peregrine_dataplane::stages::l3fwd::{L3Fwd, NextHop, RouteTable};
use peregrine_testkit::traffic::{self, parse, Addressing, Dir, IpMix, Sizes, TrafficSpec};
use peregrine_wire::ethernet::{self, ethertype};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{checksum, gtpu, ipv4, ipv6, ipv6ext, pdu_session, tcp, udp, vlan};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// Frames per batch in the batch benchmarks, a typical rx burst.
const BATCH: usize = 32;

/// `n` valid frames of direction `dir` from `spec`.
fn frames(spec: &TrafficSpec, dir: Dir, n: usize) -> Vec<Vec<u8>> {
    let v: Vec<Vec<u8>> = traffic::generate(spec)
        .filter(|p| p.dir == dir && p.anomaly.is_none())
        .take(n)
        .map(|p| p.frame)
        .collect();
    assert_eq!(v.len(), n, "spec yields too few {dir:?} frames");
    v
}

fn quickstart_no_anomalies() -> TrafficSpec {
    TrafficSpec {
        anomalies: 0,
        ..TrafficSpec::default()
    }
}

/// What the UPF's uplink path reads of a frame: every header from Ethernet to the inner
/// transport header, the outer IPv4 header checksum verified, no L4 checksum summed.
/// Returns the TEID, QFI and inner ports so that nothing is optimised away.
fn parse_ul_headers(frame: &[u8]) -> Option<(u32, u8, u16, u16)> {
    let (off, et) = vlan::l3_offset(frame).ok()?;
    let l3 = &frame[off..];
    let seg = match et {
        ethertype::IPV4 => {
            let ip = ipv4::Packet::new_checked(l3).ok()?;
            if !ip.verify_checksum() || ip.protocol() != ip_protocol::UDP {
                return None;
            }
            &l3[ip.header_len()..ip.total_len() as usize]
        }
        ethertype::IPV6 => {
            let ip = ipv6::Packet::new_checked(l3).ok()?;
            let payload = &l3[ipv6::HEADER_LEN..ip.total_len()];
            let (proto, at) = ipv6ext::parse_chain(ip.next_header(), payload)
                .ok()
                .map(|c| (c.upper, c.upper_offset))?;
            if proto != ip_protocol::UDP {
                return None;
            }
            &payload[at..]
        }
        _ => return None,
    };
    let u = udp::Packet::new_checked(seg).ok()?;
    if u.dst_port() != gtpu::PORT {
        return None;
    }
    let g = gtpu::Header::new_checked(&seg[udp::HEADER_LEN..u.length() as usize]).ok()?;
    let qfi = g.pdu_session().ok()??.qfi();
    let inner = g.payload();
    let (proto, l4) = match inner.first()? >> 4 {
        4 => {
            let ip = ipv4::Packet::new_checked(inner).ok()?;
            (
                ip.protocol(),
                &inner[ip.header_len()..ip.total_len() as usize],
            )
        }
        6 => {
            let ip = ipv6::Packet::new_checked(inner).ok()?;
            let payload = &inner[ipv6::HEADER_LEN..ip.total_len()];
            let c = ipv6ext::parse_chain(ip.next_header(), payload).ok()?;
            (c.upper, &payload[c.upper_offset..])
        }
        _ => return None,
    };
    let ports = match proto {
        ip_protocol::UDP => {
            let p = udp::Packet::new_checked(l4).ok()?;
            (p.src_port(), p.dst_port())
        }
        ip_protocol::TCP => {
            let p = tcp::Packet::new_checked(l4).ok()?;
            (p.src_port(), p.dst_port())
        }
        _ => return None,
    };
    Some((g.teid(), qfi, ports.0, ports.1))
}

fn bench_parse(c: &mut Criterion) {
    let ul = frames(&quickstart_no_anomalies(), Dir::Ul, 1024);
    assert!(ul.iter().all(|f| parse_ul_headers(f).is_some()));
    let mut g = c.benchmark_group("parse_ul");
    g.throughput(Throughput::Elements(ul.len() as u64));
    // Headers only, as the UPF's uplink stage reads them.
    g.bench_function("headers", |b| {
        b.iter(|| {
            for f in &ul {
                black_box(parse_ul_headers(black_box(f)));
            }
        })
    });
    // Every checksum verified too (outer UDP, inner UDP/TCP): the test suite's parser.
    g.bench_function("verify_all_checksums", |b| {
        b.iter(|| {
            for f in &ul {
                let _ = black_box(parse::ul_frame(black_box(f)));
            }
        })
    });
    g.finish();
}

fn bench_checksums(c: &mut Criterion) {
    // An IPv4 header from the generator.
    let spec = TrafficSpec {
        inner: IpMix::V4,
        ..quickstart_no_anomalies()
    };
    let dl = frames(&spec, Dir::Dl, 1);
    let mut hdr = [0u8; ipv4::HEADER_LEN];
    hdr.copy_from_slice(&dl[0][ethernet::HEADER_LEN..][..ipv4::HEADER_LEN]);
    let mut g = c.benchmark_group("checksum");
    g.throughput(Throughput::Elements(1));
    g.bench_function("ipv4_header", |b| {
        b.iter(|| checksum::checksum(black_box(&hdr)))
    });

    // A 512-byte UDP datagram (header + 504 bytes of payload) over IPv6.
    let spec = TrafficSpec {
        inner: IpMix::V6,
        sizes: Sizes::Fixed(vec![(ethernet::HEADER_LEN + ipv6::HEADER_LEN + 512) as u16]),
        ..quickstart_no_anomalies()
    };
    let frame = traffic::generate(&spec)
        .find(|p| {
            p.dir == Dir::Dl
                && p.frame[ethernet::HEADER_LEN + 6] == ip_protocol::UDP
                && p.anomaly.is_none()
        })
        .expect("a DL UDP frame")
        .frame;
    let ip = ipv6::Packet::new_checked(&frame[ethernet::HEADER_LEN..]).unwrap();
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let mut dgram = ip.payload().to_vec();
    assert_eq!(dgram.len(), 512);
    assert!(udp::Packet::new_checked(&dgram[..])
        .unwrap()
        .verify_checksum_v6(src, dst));
    g.bench_function("udp_ipv6_512B_verify", |b| {
        b.iter(|| udp::Packet::new_unchecked(black_box(&dgram[..])).verify_checksum_v6(src, dst))
    });
    g.bench_function("udp_ipv6_512B_fill", |b| {
        b.iter(|| udp::Packet::new_unchecked(black_box(&mut dgram[..])).fill_checksum_v6(src, dst))
    });
    g.finish();
}

fn bench_ipv6_ext_walk(c: &mut Criterion) {
    // Hop-by-Hop (PadN) / Routing (type 4, no segments left) / Destination Options (PadN) /
    // atomic Fragment / UDP.
    let mut payload = vec![0u8; 32 + udp::HEADER_LEN];
    let padn = [1u8, 4, 0, 0, 0, 0];
    ipv6ext::OptionsRepr {
        next_header: ip_protocol::IPV6_ROUTE,
        options: &padn,
    }
    .emit(&mut payload[0..])
    .unwrap();
    ipv6ext::RoutingRepr {
        next_header: ip_protocol::IPV6_OPTS,
        routing_type: 4,
        segments_left: 0,
        data: &[0; 4],
    }
    .emit(&mut payload[8..])
    .unwrap();
    ipv6ext::OptionsRepr {
        next_header: ip_protocol::IPV6_FRAG,
        options: &padn,
    }
    .emit(&mut payload[16..])
    .unwrap();
    ipv6ext::FragmentRepr {
        next_header: ip_protocol::UDP,
        frag_offset: 0,
        more_frags: false,
        ident: 0x1234_5678,
    }
    .emit(&mut payload[24..])
    .unwrap();
    let first = ip_protocol::HOPOPT;
    let mut w = ipv6ext::walk(first, &payload);
    assert_eq!(w.by_ref().count(), 4);
    assert_eq!(w.upper(), Some((ip_protocol::UDP, 32)));

    let mut g = c.benchmark_group("ipv6_ext");
    g.throughput(Throughput::Elements(1));
    g.bench_function("walk_4_headers", |b| {
        b.iter(|| {
            let mut w = ipv6ext::walk(black_box(first), black_box(&payload));
            for h in &mut w {
                black_box(h.ok());
            }
            w.upper()
        })
    });
    g.bench_function("walk_none", |b| {
        b.iter(|| {
            let mut w = ipv6ext::walk(black_box(ip_protocol::UDP), black_box(&payload[32..]));
            w.next().is_none() && w.upper().is_some()
        })
    });
    g.finish();
}

/// The outer headers of one tunnel, as the downlink encapsulation stage would hold them.
#[derive(Clone, Copy)]
struct Tunnel {
    src: IpAddr,
    dst: IpAddr,
    teid: u32,
    qfi: u8,
    src_mac: ethernet::Address,
    dst_mac: ethernet::Address,
}

/// Downlink encapsulation in place: strip Ethernet, prepend Ethernet / IP / UDP / GTP-U with a
/// DL PDU Session Container. Over IPv6 the UDP checksum is computed (mandatory); over IPv4
/// it is left 0, as UPFs do. Returns the number of bytes prepended.
fn encap(buf: &mut OwnedBuf, t: &Tunnel) -> usize {
    buf.adj(ethernet::HEADER_LEN).expect("frame has Ethernet");
    let inner_len = buf.len();
    let gtp = gtpu::Repr {
        msg_type: gtpu::msg_type::G_PDU,
        teid: t.teid,
        seq: None,
        npdu: None,
        ext: Some(pdu_session::Repr::Dl {
            qfi: t.qfi,
            rqi: false,
            ppi: None,
        }),
        payload_len: inner_len,
    };
    let (ohl, et) = match t.src {
        IpAddr::V4(_) => (ipv4::HEADER_LEN, ethertype::IPV4),
        IpAddr::V6(_) => (ipv6::HEADER_LEN, ethertype::IPV6),
    };
    let udp_off = ethernet::HEADER_LEN + ohl;
    let gtp_off = udp_off + udp::HEADER_LEN;
    let total = gtp_off + gtp.header_len();
    let hdr = buf.prepend(total).expect("headroom");
    ethernet::Repr {
        src: t.src_mac,
        dst: t.dst_mac,
        ethertype: et,
    }
    .emit(hdr)
    .unwrap();
    gtp.emit(&mut hdr[gtp_off..]).unwrap();
    let udp_payload = gtp.buffer_len();
    udp::Repr {
        src_port: gtpu::PORT,
        dst_port: gtpu::PORT,
        payload_len: udp_payload,
    }
    .emit(&mut hdr[udp_off..])
    .unwrap();
    match (t.src, t.dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => ipv4::Repr {
            src,
            dst,
            protocol: ip_protocol::UDP,
            payload_len: udp::HEADER_LEN + udp_payload,
            ttl: 64,
            dscp_ecn: 0,
            ident: 0,
            dont_frag: true,
        }
        .emit(&mut hdr[ethernet::HEADER_LEN..])
        .unwrap(),
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            ipv6::Repr {
                src,
                dst,
                next_header: ip_protocol::UDP,
                payload_len: udp::HEADER_LEN + udp_payload,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            }
            .emit(&mut hdr[ethernet::HEADER_LEN..])
            .unwrap();
            udp::Packet::new_unchecked(&mut buf.data_mut()[udp_off..]).fill_checksum_v6(src, dst);
        }
        _ => unreachable!("tunnel endpoints share a family"),
    }
    total
}

fn bench_encap(c: &mut Criterion) {
    let spec = quickstart_no_anomalies();
    let a = Addressing::default();
    let dl = frames(&spec, Dir::Dl, BATCH);
    let mut g = c.benchmark_group("gtpu_encap");
    g.throughput(Throughput::Elements(BATCH as u64));
    let v4 = Tunnel {
        src: IpAddr::V4(a.upf_n3_v4),
        dst: IpAddr::V4(a.gnb_v4(0)),
        teid: 0x0200_0001,
        qfi: 9,
        src_mac: a.upf_n3_mac,
        dst_mac: a.gnb_peer_mac,
    };
    let v6 = Tunnel {
        src: IpAddr::V6(a.upf_n3_v6),
        dst: IpAddr::V6(a.gnb_v6(0)),
        ..v4
    };
    for (name, t) in [("ipv4_outer", v4), ("ipv6_outer_udp_csum", v6)] {
        let mut bufs: Vec<OwnedBuf> = dl.iter().map(|f| OwnedBuf::from_slice(f)).collect();
        // Check once that the result parses as a DL G-PDU around the original packet.
        {
            let mut b = bufs[0].clone();
            encap(&mut b, &t);
            let (outer, h) = parse::n3_gtpu(b.data()).expect("encapsulated frame parses");
            assert_eq!((outer.src, h.teid()), (t.src, t.teid));
            assert_eq!(h.payload(), &dl[0][ethernet::HEADER_LEN..]);
        }
        g.bench_function(name, |b| {
            b.iter(|| {
                for buf in bufs.iter_mut() {
                    let n = encap(buf, black_box(&t));
                    black_box(buf.data()[0]);
                    // Undo the geometry change (O(1) offset moves; the bytes stay).
                    buf.adj(n).unwrap();
                    buf.prepend(ethernet::HEADER_LEN).unwrap();
                }
            })
        });
    }
    g.finish();
}

fn bench_l3fwd(c: &mut Criterion) {
    let spec = quickstart_no_anomalies();
    let a = &spec.addressing;
    let dl = frames(&spec, Dir::Dl, BATCH);
    let gnb_side = NextHop {
        port: 0,
        mac: a.gnb_peer_mac,
    };
    let mut table = RouteTable::default();
    table.insert(IpAddr::V4(a.ue_pool_v4.addr), a.ue_pool_v4.len, gnb_side);
    table.insert(IpAddr::V6(a.ue_pool_v6.addr), a.ue_pool_v6.len, gnb_side);
    table.insert(
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        0,
        NextHop {
            port: 1,
            mac: a.n6_router_mac,
        },
    );
    table.insert(
        IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        0,
        NextHop {
            port: 1,
            mac: a.n6_router_mac,
        },
    );
    let publisher = Publisher::new(table);
    let mut reasons = Reasons::new();
    let mut stage = L3Fwd::new(
        publisher.reader(),
        vec![a.upf_n3_mac, a.upf_n6_mac],
        false,
        &mut reasons,
    );
    let cx = Context::fixed(0, 0);
    let mut batch = Batch::<OwnedBuf>::new();
    batch.rx_port = 1;
    for f in &dl {
        batch
            .push(OwnedBuf::from_slice(f), Disposition::CONTINUE)
            .expect("batch has room");
    }
    let reset = |batch: &mut Batch<OwnedBuf>| {
        for (buf, f) in batch.pkts.iter_mut().zip(&dl) {
            buf.set_data(f).expect("fits");
        }
        batch.reset_dispositions();
    };
    reset(&mut batch);
    Stage::<OwnedBuf>::process(&mut stage, &mut batch, &cx);
    assert!(
        batch.dispositions().all(|d| d == Disposition::tx(0)),
        "every DL packet is routed to N3: {:?}",
        batch.dispositions().collect::<Vec<_>>()
    );

    let mut g = c.benchmark_group("l3fwd");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("batch32_dl", |b| {
        b.iter(|| {
            reset(&mut batch);
            stage.process(black_box(&mut batch), &cx);
            black_box(batch.disposition(BATCH - 1));
        })
    });
    // The reset alone, to subtract from the above.
    g.bench_function("batch32_reset_only", |b| {
        b.iter(|| {
            reset(&mut batch);
            black_box(batch.disposition(BATCH - 1));
        })
    });
    g.finish();
    drop(publisher);
}

fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20)
}

criterion_group! {
    name = wire;
    config = config();
    targets = bench_parse, bench_checksums, bench_ipv6_ext_walk, bench_encap, bench_l3fwd
}
criterion_main!(wire);
