//! tshark driving shared by the PFCP oracle test and the N4 node tests (which include this
//! file with `#[path]`): frame PFCP payloads as Ethernet/IPv4/UDP 8805 in a pcap, run
//! `tshark -T json` and flatten its field tree.
#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::Command;

const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = data
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32)
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Ethernet / IPv4 / UDP (8805 -> 8805, no UDP checksum) around `payload`.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0x40, 0, 64, 17, 0, 0]);
    ip.extend_from_slice(&SRC.octets());
    ip.extend_from_slice(&DST.octets());
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let port = peregrine_pfcp::PORT.to_be_bytes();
    f.extend_from_slice(&port);
    f.extend_from_slice(&port);
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// A classic little-endian pcap file with Ethernet link type.
pub fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&4u16.to_le_bytes());
    for x in [0u32, 0, 65535, 1] {
        p.extend_from_slice(&x.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for x in [
            1_700_000_000u32 + i as u32,
            0,
            f.len() as u32,
            f.len() as u32,
        ] {
            p.extend_from_slice(&x.to_le_bytes());
        }
        p.extend_from_slice(f);
    }
    p
}

/// Every (field name, value) pair of a tshark JSON layer tree.
pub fn flatten(v: &Value, out: &mut BTreeMap<String, Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match x {
                    Value::String(s) => out.entry(k.clone()).or_default().push(s.clone()),
                    Value::Array(a) if a.iter().all(Value::is_string) => {
                        for s in a {
                            out.entry(k.clone())
                                .or_default()
                                .push(s.as_str().unwrap_or_default().to_string());
                        }
                    }
                    _ => {
                        out.entry(k.clone()).or_default();
                        flatten(x, out)
                    }
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| flatten(x, out)),
        _ => {}
    }
}

pub fn tshark_json(path: &std::path::Path) -> Option<Value> {
    let ci = std::env::var_os("CI").is_some();
    match Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-T", "json"])
        .output()
    {
        Ok(o) if o.status.success() => Some(serde_json::from_slice(&o.stdout).unwrap()),
        r => {
            let why = format!("tshark unavailable: {r:?}");
            assert!(!ci, "{why}");
            eprintln!("skipping tshark oracle: {why}");
            None
        }
    }
}

pub fn has(f: &BTreeMap<String, Vec<String>>, key: &str, val: &str) -> bool {
    f.get(key).is_some_and(|v| v.iter().any(|x| x == val))
}

/// Decode `payloads` (PFCP datagrams) with tshark; assert none is malformed or carries an
/// error-severity expert item; return each packet's flattened fields. `None` when tshark is
/// missing (not allowed when `CI` is set).
pub fn decode_clean(payloads: &[Vec<u8>], tag: &str) -> Option<Vec<BTreeMap<String, Vec<String>>>> {
    let frames: Vec<Vec<u8>> = payloads.iter().map(|p| frame(p)).collect();
    let path = std::env::temp_dir().join(format!("peregrine-{tag}-{}.pcap", std::process::id()));
    std::fs::write(&path, pcap(&frames)).unwrap();
    let out = tshark_json(&path);
    let _ = std::fs::remove_file(&path);
    let out = out?;
    let pkts = out.as_array().unwrap();
    assert_eq!(pkts.len(), payloads.len());
    let mut all = Vec::new();
    for (i, pkt) in pkts.iter().enumerate() {
        let mut f = BTreeMap::new();
        flatten(&pkt["_source"]["layers"], &mut f);
        assert!(
            !f.contains_key("_ws.malformed"),
            "packet {i}: malformed: {f:#?}"
        );
        if let Some(sev) = f.get("_ws.expert.severity") {
            // 0x800000 = error (PI_ERROR); warnings are allowed.
            assert!(
                !sev.iter().any(|s| s == "8388608"),
                "packet {i}: expert error: {:?}",
                f.get("_ws.expert.message")
            );
        }
        all.push(f);
    }
    Some(all)
}
