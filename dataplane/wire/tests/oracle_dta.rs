//! Independent oracles for DTA reports (`peregrine_wire::dta`), both directions:
//!
//! - Scapy, with layers written from the public DTA prototype's field definitions
//!   (`tests/oracle/dta_scapy.py`), builds reports of every primitive in both base-header
//!   variants; ours parse them to the fields Scapy set, and re-emit Scapy's bytes exactly.
//! - Reports we emit (every primitive, both variants, our frame builder) are dissected by
//!   the same Scapy layers to the fields we set, with IPv4 and UDP checksums Scapy agrees
//!   with; and `tshark` decodes their outer headers (Ethernet / IPv4 / UDP 40040) with
//!   valid checksums and no malformed or error expert items.
//!
//! Skips (with a message) when python3 with Scapy or tshark is missing, unless `CI` is set.

use peregrine_testkit::pcap::pcap;
use peregrine_testkit::tshark::{flatten, has, tshark_json};
use peregrine_wire::dta::{self, Primitive, Repr, Variant};
use peregrine_wire::ethernet::{self, Address};
use peregrine_wire::{ipv4, udp};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

fn script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/dta_scapy.py")
}

fn scapy_present() -> bool {
    peregrine_testkit::tools::tool_present("python3", &["-c", "import scapy"])
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The DTA payload of an Ethernet / IPv4 / UDP frame, checked with our parsers.
fn dta_payload(frame: &[u8]) -> &[u8] {
    let eth = ethernet::Frame::new_checked(frame).expect("ethernet");
    assert_eq!(eth.ethertype(), ethernet::ethertype::IPV4);
    let ip = ipv4::Packet::new_checked(eth.payload()).expect("ipv4");
    assert!(ip.verify_checksum(), "IPv4 checksum");
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let ip_payload = &frame[14 + ip.header_len()..14 + ip.total_len() as usize];
    let u = udp::Packet::new_checked(ip_payload).expect("udp");
    assert!(u.verify_checksum_v4(src, dst), "UDP checksum");
    assert_eq!(u.dst_port(), dta::UDP_PORT);
    let len = u.length() as usize;
    &ip_payload[udp::HEADER_LEN..len]
}

/// Our fields, in the Scapy layers' names.
fn fields(r: &Repr) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("opcode".into(), json!(r.primitive.opcode()));
    m.insert("immediate".into(), json!(r.immediate as u8));
    if r.variant == Variant::Tracked {
        m.insert("seqnum".into(), json!(r.seqnum));
        m.insert("retransmittable".into(), json!(r.retransmittable as u8));
    }
    match r.primitive {
        Primitive::KeyWrite {
            redundancy,
            key,
            words,
            data,
        } => {
            m.insert("redundancy".into(), json!(redundancy));
            m.insert("key".into(), json!(key));
            if words == 1 {
                m.insert("data".into(), json!(data[0]));
            } else {
                for (i, d) in data.iter().take(words as usize).enumerate() {
                    m.insert(format!("data{}", i + 1), json!(d));
                }
            }
        }
        Primitive::Append { list, data } => {
            m.insert("listID".into(), json!(list));
            m.insert("data".into(), json!(data));
        }
        Primitive::KeyIncrement {
            redundancy,
            key,
            counter,
        } => {
            m.insert("redundancy".into(), json!(redundancy));
            m.insert("key".into(), json!(key));
            m.insert("counter".into(), json!(counter));
        }
        Primitive::Postcard { key, hop, data } => {
            m.insert("key".into(), json!(key));
            m.insert("hopNum".into(), json!(hop));
            m.insert("data".into(), json!(data));
        }
    }
    m
}

#[test]
fn scapy_built_reports_parse_in_ours() {
    if !scapy_present() {
        return;
    }
    let out = Command::new("python3")
        .arg(script())
        .arg("build")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(recs.len() >= 20);
    let mut ops = [0usize; 5];
    for rec in &recs {
        let frame = unhex(rec["hex"].as_str().unwrap());
        let v = if rec["plain"].as_bool().unwrap() {
            Variant::Plain
        } else {
            Variant::Tracked
        };
        let payload = dta_payload(&frame);
        let p = dta::Packet::new_checked(payload, v).expect("checks");
        let r = Repr::parse(&p).expect("parses");
        ops[r.primitive.opcode() as usize] += 1;
        assert_eq!(
            Value::Object(fields(&r)),
            rec["fields"],
            "frame {}",
            rec["hex"]
        );
        let mut again = [0u8; 64];
        let n = r.emit(&mut again).unwrap();
        assert_eq!(hex(&again[..n]), hex(payload), "re-emitted bytes");
    }
    assert!(ops[1..].iter().all(|&n| n > 0), "every primitive: {ops:?}");
}

fn our_reports(v: Variant) -> Vec<Repr> {
    let tracked = v == Variant::Tracked;
    let prims = [
        Primitive::key_write(2, 0xdead_beef, &[0x0102_0304]).unwrap(),
        Primitive::key_write(4, 17, &[1, 2, 3]).unwrap(),
        Primitive::key_write(1, 0xffff_ffff, &[7, 6, 5, 4, 3, 2, 1]).unwrap(),
        Primitive::Append {
            list: 5,
            data: 0x8000_0001,
        },
        Primitive::KeyIncrement {
            redundancy: 3,
            key: 99,
            counter: u64::MAX - 1,
        },
        Primitive::Postcard {
            key: 0x0a0b_0c0d,
            hop: 4,
            data: 262_143,
        },
    ];
    prims
        .iter()
        .enumerate()
        .map(|(i, p)| Repr {
            variant: v,
            seqnum: if tracked { 200 + i as u8 } else { 0 },
            immediate: i % 2 == 1,
            retransmittable: tracked && i % 3 != 1,
            primitive: *p,
        })
        .collect()
}

fn our_frame(r: &Repr) -> Vec<u8> {
    let mut buf = vec![0u8; 128];
    let n = r.emit(&mut buf[dta::FRAME_OVERHEAD..]).unwrap();
    let a = dta::FrameAddrs {
        eth_src: Address([0x02, 0, 0x5e, 0x10, 0, 0x0a]),
        eth_dst: Address([0x02, 0, 0x5e, 0x10, 0, 0x0b]),
        ip_src: Ipv4Addr::new(10, 0, 0, 200),
        ip_dst: Ipv4Addr::new(10, 0, 0, 51),
        src_port: 40041,
        dst_port: dta::UDP_PORT,
    };
    let len = dta::emit_frame(&mut buf, &a, n).unwrap();
    buf.truncate(len);
    buf
}

#[test]
fn our_reports_parse_in_scapy() {
    if !scapy_present() {
        return;
    }
    for v in [Variant::Tracked, Variant::Plain] {
        let reprs = our_reports(v);
        let mut child = Command::new("python3")
            .arg(script())
            .arg("dissect")
            .args(if v == Variant::Plain {
                vec!["plain"]
            } else {
                vec![]
            })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        {
            let mut stdin = child.stdin.take().unwrap();
            for r in &reprs {
                writeln!(stdin, "{}", hex(&our_frame(r))).unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let got: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got.len(), reprs.len());
        for (r, g) in reprs.iter().zip(&got) {
            assert_eq!(g["fields"], Value::Object(fields(r)), "{v:?} {r:?}");
            assert_eq!(g["sub_len"], json!(r.primitive.sub_len()));
            assert_eq!(g["udp_dport"], json!(dta::UDP_PORT));
            assert_eq!(g["ip_chksum_ok"], json!(true));
            assert_eq!(g["udp_chksum_ok"], json!(true));
        }
    }
}

#[test]
fn tshark_decodes_outer_headers() {
    let frames: Vec<Vec<u8>> = our_reports(Variant::Tracked)
        .iter()
        .map(our_frame)
        .collect();
    let path = std::env::temp_dir().join(format!("peregrine-dta-{}.pcap", std::process::id()));
    std::fs::write(&path, pcap(&frames)).unwrap();
    let out = Command::new("tshark")
        // Wireshark has no DTA dissector: decode the payload as data, or its heuristic DNS
        // dissector claims some reports (and calls them malformed DNS).
        .args(["-n", "-d", "udp.port==40040,data"])
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-r",
        ])
        .arg(&path)
        .args(["-T", "json"])
        .output();
    let json = match out {
        Ok(o) if o.status.success() => serde_json::from_slice::<Value>(&o.stdout).unwrap(),
        _ => {
            // Fall back to the kit's runner, which skips (or fails under CI) for us.
            match tshark_json(&path) {
                Some(v) => v,
                None => return,
            }
        }
    };
    let _ = std::fs::remove_file(&path);
    let pkts = json.as_array().unwrap();
    assert_eq!(pkts.len(), frames.len());
    for (i, p) in pkts.iter().enumerate() {
        let mut f = BTreeMap::new();
        flatten(&p["_source"]["layers"], &mut f);
        assert!(!f.contains_key("_ws.malformed"), "frame {i}: malformed");
        assert!(has(&f, "udp.dstport", "40040"), "frame {i}: {f:?}");
        assert!(has(&f, "ip.dst", "10.0.0.51"));
        assert!(
            has(&f, "ip.checksum.status", "1"),
            "frame {i}: IPv4 checksum: {f:?}"
        );
        assert!(
            has(&f, "udp.checksum.status", "1"),
            "frame {i}: UDP checksum"
        );
        let payload: Vec<String> = frames[i][dta::FRAME_OVERHEAD..]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let payload = payload.join(":");
        assert!(
            has(&f, "data.data", &payload),
            "frame {i}: payload as data: {f:?}"
        );
        let want_len =
            (dta::FRAME_OVERHEAD + our_reports(Variant::Tracked)[i].buffer_len() - 14 - 20)
                .to_string();
        assert!(has(&f, "udp.length", &want_len));
    }
}
