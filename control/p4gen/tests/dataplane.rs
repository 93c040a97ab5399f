//! The generated entries decide what the software UPF decides. The bundled quickstart
//! traffic goes through the Rust UPF stage (the config's sessions, routes, MACs and QFI map);
//! each packet is also walked through the generated tables the way `p4/include/upf.p4`
//! walks them (parser shape, PDR key, FAR, route LPM, QFI -> queue). For every packet the
//! software forwards, the walk predicts the same egress port, queue, MACs and, for an
//! encapsulation, the same outer addresses, TEID and PSC QFI.
//!
//! This is a model of the P4 table walk over the generated entries, not the P4 program: the
//! differential test of the program itself runs in `scripts/p4-check.sh` where BMv2 exists.

use peregrine_dataplane::qos::QfiMap;
use peregrine_dataplane::runtime::{
    Action, Batch, Context, Disposition, Pipeline, Publisher, Reasons, Stage,
};
use peregrine_dataplane::stages::l3fwd::{NextHop, RouteTable};
use peregrine_dataplane::upf::{Upf, UpfConfig, UpfStats};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_p4gen::config::Config;
use peregrine_p4gen::model::{self, Entries, FarEntry, Options, PdrAction, PdrEntry};
use peregrine_wire::ethernet::Address as MacAddr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Prediction {
    port: u16,
    qid: u8,
    dmac: MacAddr,
    smac: MacAddr,
    /// TEID, peer, local, PSC QFI.
    encap: Option<(u32, IpAddr, IpAddr, u8)>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn addr(b: &[u8], at: usize, v6: bool) -> IpAddr {
    if v6 {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::from(be32(b, at)))
    }
}

/// Longest-prefix match over the route entries (the `route_v4` / `route_v6` tables).
fn route(e: &Entries, dst: IpAddr) -> Option<(u16, MacAddr, MacAddr)> {
    let bits = |a: IpAddr| match a {
        IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
        IpAddr::V6(a) => u128::from(a),
    };
    e.routes
        .iter()
        .filter(|r| r.addr.is_ipv4() == dst.is_ipv4())
        .filter(|r| {
            let mask = if r.len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(r.len))
            };
            bits(r.addr) & mask == bits(dst) & mask
        })
        .max_by_key(|r| r.len)
        .map(|r| (r.port, r.dmac, r.smac))
}

fn find<K: Ord + Copy>(v: &[PdrEntry<K>], k: K) -> Option<PdrAction> {
    v.binary_search_by_key(&k, |e| e.key)
        .ok()
        .map(|i| v[i].action)
}

/// The table walk of upf.p4 for one frame (only the shapes its parser accepts).
fn predict(e: &Entries, f: &[u8]) -> Option<Prediction> {
    // Bounds-checked reads: the traffic has truncated frames on purpose.
    let byte = |at: usize| f.get(at).copied();
    let be16 = |at: usize| Some(be16(f.get(at..at + 2)?, 0));
    let be32 = |at: usize| Some(be32(f.get(at..at + 4)?, 0));
    let addr = |at: usize, v6: bool| Some(addr(f.get(at..at + if v6 { 16 } else { 4 })?, 0, v6));
    let (mut l3, mut et) = (14, be16(12)?);
    if et == 0x8100 {
        et = be16(16)?;
        l3 = 18;
    }
    let v6 = match et {
        0x0800 if byte(l3)? == 0x45 => false,
        0x86dd => true,
        _ => return None,
    };
    let (proto, l4) = if v6 {
        (byte(l3 + 6)?, l3 + 40)
    } else {
        (byte(l3 + 9)?, l3 + 20)
    };
    let dst = addr(l3 + if v6 { 24 } else { 16 }, v6)?;
    let ours = match dst {
        IpAddr::V4(a) => e.n3_v4.contains(&a),
        IpAddr::V6(a) => e.n3_v6.contains(&a),
    };
    let (action, uplink, psc_qfi, inner) = if ours {
        if proto != 17 || be16(l4 + 2)? != 2152 || byte(l4 + 9)? != 255 {
            return None;
        }
        let g = l4 + 8;
        let mut inner = g + 8;
        let mut psc_qfi = None;
        if byte(g)? & 0x07 != 0 {
            inner += 4;
            if byte(g + 11)? == 0x85 {
                if byte(g + 12)? != 1 || byte(g + 15)? != 0 {
                    return None;
                }
                psc_qfi = Some(byte(g + 14)? & 0x3f);
                inner += 4;
            } else if byte(g + 11)? != 0 {
                return None;
            }
        }
        (find(&e.ul, be32(g + 4)?)?, true, psc_qfi, inner)
    } else if v6 {
        let k = u64::from_be_bytes(f.get(l3 + 24..l3 + 32)?.try_into().ok()?);
        (find(&e.dl_v6, k)?, false, None, l3)
    } else {
        (
            find(&e.dl_v4, Ipv4Addr::from(be32(l3 + 16)?))?,
            false,
            None,
            l3,
        )
    };
    let PdrAction::Apply(p) = action else {
        return None;
    };
    let qfi = if uplink {
        if p.pdr_qfi.is_some() && psc_qfi != p.pdr_qfi {
            return None;
        }
        psc_qfi.or(p.pdr_qfi).unwrap_or(0)
    } else {
        p.mark_qfi
    };
    if !p.gate_open {
        return None;
    }
    let inner_v6 = byte(inner)? >> 4 == 6;
    let inner_dst = addr(inner + if inner_v6 { 24 } else { 16 }, inner_v6)?;
    let (key, encap) = match e.fars[p.far_idx as usize] {
        FarEntry::Route => (inner_dst, None),
        FarEntry::EncapV4 {
            teid, peer, local, ..
        } => (
            IpAddr::V4(peer),
            Some((teid, IpAddr::V4(peer), IpAddr::V4(local), qfi)),
        ),
        FarEntry::EncapV6 {
            teid, peer, local, ..
        } => (
            IpAddr::V6(peer),
            Some((teid, IpAddr::V6(peer), IpAddr::V6(local), qfi)),
        ),
        FarEntry::Drop | FarEntry::Buffer => return None,
    };
    let (port, dmac, smac) = route(e, key)?;
    Some(Prediction {
        port,
        qid: e.qfi_qid[usize::from(qfi & 0x3f)],
        dmac,
        smac,
        encap,
    })
}

/// What the software sent, in the terms of [`Prediction`].
fn observed(out: &[u8], port: u16, qid: u8, encap: bool) -> Prediction {
    let mac = |at: usize| MacAddr(out[at..at + 6].try_into().unwrap());
    let enc = encap.then(|| {
        let v6 = be16(out, 12) == 0x86dd;
        let (src, dst, l4) = if v6 { (22, 38, 54) } else { (26, 30, 34) };
        let g = l4 + 8;
        (
            be32(out, g + 4),
            addr(out, dst, v6),
            addr(out, src, v6),
            out[g + 14] & 0x3f,
        )
    });
    Prediction {
        port,
        qid,
        dmac: mac(0),
        smac: mac(6),
        encap: enc,
    }
}

#[test]
fn generated_entries_forward_the_quickstart_traffic_as_the_software_upf_does() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("examples/quickstart.toml")).unwrap();
    let cfg = Config::parse(&text).unwrap();
    let e = model::build(&cfg, &Options::default()).unwrap();
    let u = cfg.upf.as_ref().unwrap();

    let mut routes = RouteTable::default();
    for r in cfg.routes().unwrap() {
        routes.insert(
            r.addr,
            r.len,
            NextHop {
                port: r.port,
                mac: r.next_hop,
            },
        );
    }
    let tables = Publisher::new(model::compile(&cfg).unwrap());
    let routes = Publisher::new(routes);
    let mut reasons = Reasons::new();
    let qfi_map: QfiMap = u.qfi_map();
    let upf = Upf::new(
        tables.reader(),
        routes.reader(),
        cfg.macs().unwrap(),
        UpfConfig {
            mtu: u.mtu,
            qfi_map,
            max_meter_slots: 4096,
            ..UpfConfig::default()
        },
        Arc::new(UpfStats::new(4096)),
        &mut reasons,
    );
    // Every drop code of the P4 programs counts under a reason the Rust stage registers.
    for (_, code) in model::Verdict::ALL {
        if code >= model::Verdict::FIRST_DROP {
            let name = model::Verdict::reason_name(code).unwrap();
            assert!(reasons.names().contains(&name.as_str()), "{name}");
        }
    }
    let stages: Vec<Box<dyn Stage<OwnedBuf>>> = vec![Box::new(upf)];
    let mut pipe = Pipeline::new(stages);
    let mut batch = Batch::new();

    let (mut compared, mut encapsulated, mut software_only) = (0, 0, 0);
    for (rx, file) in [(0u16, "quickstart-ul.pcap"), (1, "quickstart-dl.pcap")] {
        let frames = peregrine_testkit::pcap::read_pcap(root.join("examples/traffic").join(file));
        for chunk in frames.chunks(32) {
            batch.rx_port = rx;
            for f in chunk {
                batch
                    .push(OwnedBuf::from_slice(f), Disposition::CONTINUE)
                    .expect("batch room");
            }
            pipe.run(&mut batch, &Context::fixed(1_000_000_000, 0));
            for ((b, d), input) in batch.drain().zip(chunk) {
                let pred = predict(&e, input);
                match (d.action(), pred) {
                    (Action::Tx(port), Some(p)) => {
                        let got =
                            observed(b.data(), port, d.qid().unwrap_or(255), p.encap.is_some());
                        assert_eq!(got, p, "frame {}", hex(input));
                        compared += 1;
                        encapsulated += usize::from(p.encap.is_some());
                    }
                    // Sent by the software, but not by the tables: only replies the software
                    // builds itself (Echo Response, Error Indication, ICMP) may do that.
                    (Action::Tx(_), None) => software_only += 1,
                    // The software drops or punts what the tables would forward: its own
                    // checks (checksum, TTL, MTU, malformed), which upf.p4 also makes.
                    _ => {}
                }
            }
        }
    }
    assert!(compared > 9_000, "only {compared} packets compared");
    assert!(
        encapsulated > 3_000,
        "only {encapsulated} encapsulations compared"
    );
    // quickstart.json: 5 Echo Requests answered, 5 Error Indications sent.
    assert!(
        software_only <= 10,
        "{software_only} packets sent without a table path"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().take(80).map(|x| format!("{x:02x}")).collect()
}
