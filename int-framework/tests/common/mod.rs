//! Helpers shared by the oracle tests: a minimal pcap writer, the tool check, and walks over
//! tshark's JSON.
#![allow(dead_code)]

use serde_json::Value;
use std::process::Command;
/// A classic pcap file (microsecond timestamps, LINKTYPE_ETHERNET = 1).
pub fn pcap(frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic
    out.extend_from_slice(&2u16.to_le_bytes()); // version 2.4
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    out.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    out.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
    out.extend_from_slice(&1u32.to_le_bytes()); // linktype Ethernet
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).expect("frame fits a pcap record");
        out.extend_from_slice(&1_700_000_000u32.to_le_bytes()); // ts_sec
        out.extend_from_slice(&(i as u32 * 1000).to_le_bytes()); // ts_usec
        out.extend_from_slice(&len.to_le_bytes()); // incl_len
        out.extend_from_slice(&len.to_le_bytes()); // orig_len
        out.extend_from_slice(f);
    }
    out
}

/// Whether `tool` runs. When it does not: `false` (skip) normally, a panic under `CI`.
pub fn tool_present(tool: &str, args: &[&str]) -> bool {
    if Command::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{tool} not usable, and CI is set: CI must install it");
    }
    eprintln!("skipping: {tool} not usable");
    false
}

/// Every value stored under `key` anywhere inside `v`, arrays flattened (tshark's
/// `--no-duplicate-keys` turns repeated fields into arrays).
pub fn find_all<'a>(v: &'a Value, key: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == key {
                    match x {
                        Value::Array(xs) => out.extend(xs),
                        x => out.push(x),
                    }
                }
                find_all(x, key, out);
            }
        }
        Value::Array(xs) => xs.iter().for_each(|x| find_all(x, key, out)),
        _ => {}
    }
}

/// Malformed markers and expert info of warning/error severity or in the malformed group
/// (`PI_WARN` 0x00600000, `PI_MALFORMED` 0x07000000, epan/proto.h).
pub fn malformed(v: &Value, path: &str, out: &mut Vec<String>) {
    const PI_SEVERITY_MASK: u64 = 0x00f0_0000;
    const PI_WARN: u64 = 0x0060_0000;
    const PI_MALFORMED: u64 = 0x0700_0000;
    let num = |x: Option<&Value>| {
        x.and_then(Value::as_str)
            .and_then(|s| s.parse::<u64>().ok())
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let here = format!("{path}/{k}");
                if k.starts_with("_ws.malformed") || k.starts_with("ipv6.opt.ioam.trace.invalid") {
                    out.push(format!("{here}: {x}"));
                }
                if k == "_ws.expert" {
                    let experts = match x {
                        Value::Array(xs) => xs.iter().collect(),
                        x => vec![x],
                    };
                    for ex in experts {
                        let sev = num(ex.get("_ws.expert.severity")).unwrap_or(0);
                        let group = num(ex.get("_ws.expert.group")).unwrap_or(0);
                        if sev & PI_SEVERITY_MASK >= PI_WARN || group == PI_MALFORMED {
                            out.push(format!("{here}: {ex}"));
                        }
                    }
                }
                malformed(x, &here, out);
            }
        }
        Value::Array(xs) => xs.iter().for_each(|x| malformed(x, path, out)),
        _ => {}
    }
}
