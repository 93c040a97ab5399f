//! `pg-gen`, the traffic generator's command line: it writes the same bytes as the library
//! (`peregrine_testkit::traffic`) and rejects bad specs with a message.

use peregrine_testkit::traffic::{self, IpMix, Sizes, TrafficSpec};

fn quickstart() -> TrafficSpec {
    TrafficSpec::default()
}

/// The command line writes the same bytes as the library.
#[test]
fn pg_gen_cli() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pg-gen"))
        .args(["--preset", "quickstart", "--ues", "10", "--packets", "500"])
        .args([
            "--sizes", "imix", "--inner", "v6", "--outer", "v4", "--qfis", "2,3",
        ])
        .args([
            "--seed",
            "5",
            "--anomalies",
            "8",
            "--rate-pps",
            "2000",
            "--ul-ratio",
            "0.5",
        ])
        .arg("--ul")
        .arg(p("ul.pcap"))
        .arg("--dl")
        .arg(p("dl.pcap"))
        .arg("--manifest")
        .arg(p("m.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.starts_with("pg-gen: 500 packets"), "{line}");
    assert_eq!(line.lines().count(), 1);

    let spec = TrafficSpec {
        ues: 10,
        packets: 500,
        sizes: Sizes::Imix,
        inner: IpMix::V6,
        outer: IpMix::V4,
        qfis: vec![2, 3],
        seed: 5,
        anomalies: 8,
        rate_pps: Some(2000.0),
        ul_ratio: 0.5,
        ..quickstart()
    };
    let (ul2, dl2) = (p("ul2.pcap"), p("dl2.pcap"));
    traffic::write_pcaps(&spec, &ul2, &dl2).unwrap();
    assert_eq!(
        std::fs::read(p("ul.pcap")).unwrap(),
        std::fs::read(ul2).unwrap()
    );
    assert_eq!(
        std::fs::read(p("dl.pcap")).unwrap(),
        std::fs::read(dl2).unwrap()
    );
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p("m.json")).unwrap()).unwrap();
    assert_eq!(m, traffic::manifest(&spec));

    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_pg-gen"))
        .args(["--qfis", "64", "--ul"])
        .arg(p("x.pcap"))
        .arg("--dl")
        .arg(p("y.pcap"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("QFI 64"));
}
