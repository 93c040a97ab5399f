//! `peregrinectl dta ...` against a region written by the translator's store.

use peregrine_dta::{Config, Region, Sizes, Store, Translator};
use peregrine_wire::dta::{Primitive, Repr, Variant};
use serde_json::Value;
use std::process::Command;
use std::sync::Arc;

fn ctl(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_peregrinectl"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn report(p: Primitive) -> Vec<u8> {
    let r = Repr::new(Variant::Tracked, p);
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b).unwrap();
    b
}

#[test]
fn queries_print_json_and_bad_regions_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("region");
    let sizes = Sizes {
        kw_slots: 1001,
        ki_slots: 101,
        pc_chunks: 101,
        ap_lists: 2,
        ap_batch: 2,
        ap_list_len: 16,
        ..Sizes::default()
    };
    let region = Arc::new(Region::create(&path, sizes).unwrap());
    let mut t = Translator::new(Store::new(region), Config::default());
    t.handle(&report(Primitive::key_write(2, 42, &[7]).unwrap()))
        .unwrap();
    t.handle(&report(Primitive::KeyIncrement {
        redundancy: 2,
        key: 5,
        counter: 9,
    }))
    .unwrap();
    for d in [10, 11, 12] {
        t.handle(&report(Primitive::Append { list: 1, data: d }))
            .unwrap();
    }
    for hop in 0..5 {
        t.handle(&report(Primitive::Postcard {
            key: 3,
            hop,
            data: 100 + hop as u32,
        }))
        .unwrap();
    }
    t.flush();
    let r = path.to_str().unwrap();

    let (c, out, _) = ctl(&["dta", "--region", r, "kw", "42", "--n", "2"]);
    assert_eq!(c, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["answer"]["result"], "found");
    assert_eq!(v["answer"]["data"][0], 7);
    let (_, out, _) = ctl(&["dta", "--region", r, "kw", "43", "--n", "2"]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["answer"]["result"],
        "empty"
    );
    let (_, out, _) = ctl(&["dta", "--region", r, "ki", "5", "--n", "2"]);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["counter"], 9);
    let (_, out, _) = ctl(&["dta", "--region", r, "path", "3"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["answer"]["hops"],
        serde_json::json!([100, 101, 102, 103, 104])
    );
    let (c, out, _) = ctl(&[
        "dta",
        "--region",
        r,
        "follow",
        "1",
        "--from-start",
        "--count",
        "3",
    ]);
    assert_eq!(c, 0);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines
            .iter()
            .map(|l| l["data"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![10, 11, 12]
    );
    let (_, out, _) = ctl(&["dta", "--region", r, "info"]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["sizes"]["kw_slots"],
        1001
    );

    // Unknown list: exit 1 with the reason.
    let (c, _, err) = ctl(&["dta", "--region", r, "follow", "5"]);
    assert_eq!(c, 1);
    assert!(err.contains("unknown list 5"), "{err}");
    // A corrupt region: exit 3, the problem named, no panic.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] ^= 0xff;
    let bad = dir.path().join("bad");
    std::fs::write(&bad, &bytes).unwrap();
    let (c, _, err) = ctl(&["dta", "--region", bad.to_str().unwrap(), "info"]);
    assert_eq!(c, 3);
    assert!(err.contains("corrupt DTA region"), "{err}");
    let (c, _, err) = ctl(&["dta", "--region", "/nonexistent/region", "info"]);
    assert_eq!(c, 3);
    assert!(err.contains("/nonexistent/region"), "{err}");
}

#[test]
fn session_and_int_flow_queries_compute_the_reporters_keys() {
    use peregrine_control::dta::feeds::{int_flow_key, kestrel_key};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("region");
    let region = Arc::new(Region::create(&path, Sizes::default()).unwrap());
    let mut t = Translator::new(Store::new(region), Config::default());
    t.handle(&report(Primitive::KeyIncrement {
        redundancy: 2,
        key: kestrel_key(1, 0x0200_0001, 9),
        counter: 60,
    }))
    .unwrap();
    let flow = peregrine_int::report::IntReport {
        src: std::net::Ipv4Addr::new(10, 1, 0, 1).to_ipv6_mapped(),
        dst: "fd00:2::1".parse().unwrap(),
        proto: 17,
        sport: 4000,
        dport: 5000,
        ..Default::default()
    };
    for (hop, data) in [(0u8, 1u32), (1, 3)] {
        t.handle(&report(Primitive::Postcard {
            key: int_flow_key(&flow),
            hop,
            data,
        }))
        .unwrap();
    }
    t.flush();
    let r = path.to_str().unwrap();
    let args = ["dta", "--region", r, "ki-session", "--dir", "dl"];
    let (c, out, err) = ctl(&[
        &args[..],
        &["--teid", "0x2000001", "--qfi", "9", "--n", "2"],
    ]
    .concat());
    assert_eq!(c, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["counter"], 60);
    // The other direction is another key.
    let (_, out, _) = ctl(&[
        "dta",
        "--region",
        r,
        "ki-session",
        "--dir",
        "ul",
        "--teid",
        "33554433",
        "--qfi",
        "9",
        "--n",
        "2",
    ]);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["counter"], 0);
    let (c, _, err) = ctl(&[
        "dta",
        "--region",
        r,
        "ki-session",
        "--dir",
        "up",
        "--teid",
        "1",
        "--qfi",
        "9",
    ]);
    assert_eq!(c, 1);
    assert!(err.contains("--dir `up`"), "{err}");
    let (c, out, err) = ctl(&[
        "dta",
        "--region",
        r,
        "int-path",
        "--src",
        "10.1.0.1",
        "--dst",
        "fd00:2::1",
        "--proto",
        "17",
        "--sport",
        "4000",
        "--dport",
        "5000",
    ]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["answer"]["hops"],
        serde_json::json!([1, 3])
    );
}

/// `rdma-serve` reads the translator's file first (a bad one is exit 1, naming it); built
/// without the `verbs` feature it says so (exit 3), with it and no RDMA device it says
/// that (exit 3). It never claims a connection it did not make.
#[test]
fn rdma_serve_names_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let region = dir.path().join("region");
    let region = region.to_str().unwrap();
    let (code, _, err) = ctl(&[
        "dta",
        "--region",
        region,
        "rdma-serve",
        "--translator-config",
        "/nonexistent.toml",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("/nonexistent.toml"), "{err}");
    let cfg = dir.path().join("t.toml");
    std::fs::write(
        &cfg,
        "[workers]\ncount = 2\n[dta_translator]\nregion = \"r\"\n[dta_translator.sizes]\nkw_slots = 1001\n\
         [dta_translator.rocev2]\nport = \"c\"\nsource_ip = \"10.0.0.1\"\n",
    )
    .unwrap();
    let (code, out, err) = ctl(&[
        "dta",
        "--region",
        region,
        "rdma-serve",
        "--translator-config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(code, 3, "{out} {err}");
    assert!(
        err.contains("`verbs` feature") || err.contains("no RDMA device"),
        "{err}"
    );
    assert!(out.is_empty(), "no connection printed: {out}");
}
