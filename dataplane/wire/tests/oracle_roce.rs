//! RoCEv2 requests as the DTA translator's RDMA output emits them (`peregrine_wire::roce`),
//! checked by two independent decoders:
//!
//! - Scapy's RoCE layer (`scapy.contrib.roce.BTH`) recomputes the ICRC of each frame (its
//!   own implementation of IBA Annex A17.3.3) and reads the BTH fields;
//! - Wireshark's InfiniBand dissector (`tshark`) decodes BTH, RETH and AtomicETH to the
//!   values we set, with no malformed or error expert items.
//!
//! Skips when python3 with Scapy or tshark is missing, unless `CI` is set.

use peregrine_testkit::pcap::pcap;
use peregrine_testkit::tools::tool_present;
use peregrine_testkit::tshark::{flatten, has, tshark_json};
use peregrine_wire::dta::FrameAddrs;
use peregrine_wire::ethernet::Address;
use peregrine_wire::roce::{self, opcode, AtomicEth, Bth, Request, Reth};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

fn addrs() -> FrameAddrs {
    FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 0x0a]),
        eth_dst: Address([2, 0, 0, 0, 0, 0x0b]),
        ip_src: Ipv4Addr::new(10, 0, 0, 1),
        ip_dst: Ipv4Addr::new(10, 0, 0, 51),
        src_port: 49152,
        dst_port: 0,
    }
}

fn bth(op: u8, qp: u32, psn: u32) -> Bth {
    Bth {
        opcode: op,
        solicited: false,
        pad_count: 0,
        pkey: roce::DEFAULT_PKEY,
        dest_qp: qp,
        ack_req: true,
        psn,
    }
}

/// (frame, opcode, qp, psn, va, rkey, dma_len or add value)
type Case = (Vec<u8>, u8, u32, u32, u64, u32, u64);

fn frames() -> Vec<Case> {
    let mut out = Vec::new();
    let slot = [0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 42];
    let cases: [(u32, u32, u64, u32, &[u8]); 3] = [
        (0x11, 7, 0x7f00_0000_1000, 0x1234, &slot),
        (0xabcdef, 0xffffff, 0x7f00_0000_2000, 0x99, &[1, 2, 3, 4, 5]),
        (0x11, 0, 0x10, 1, &[9; 20]),
    ];
    for (qp, psn, va, rkey, data) in cases {
        let mut b = vec![0u8; 256];
        let reth = Reth {
            va,
            rkey,
            dma_len: data.len() as u32,
        };
        let n = roce::emit_request(
            &mut b,
            &addrs(),
            &bth(opcode::RC_RDMA_WRITE_ONLY, qp, psn),
            &Request::Write { reth, data },
        )
        .unwrap();
        b.truncate(n);
        out.push((
            b,
            opcode::RC_RDMA_WRITE_ONLY,
            qp,
            psn,
            va,
            rkey,
            data.len() as u64,
        ));
    }
    let mut b = vec![0u8; 256];
    let a = AtomicEth {
        va: 0x7f00_0000_3008,
        rkey: 0x55,
        swap_add: 1_000_000_007,
        compare: 0,
    };
    let n = roce::emit_request(
        &mut b,
        &addrs(),
        &bth(opcode::RC_FETCH_ADD, 0x22, 100),
        &Request::FetchAdd(a),
    )
    .unwrap();
    b.truncate(n);
    out.push((b, opcode::RC_FETCH_ADD, 0x22, 100, a.va, a.rkey, a.swap_add));
    out
}

#[test]
fn our_icrc_verifies_in_our_code() {
    for (f, ..) in frames() {
        assert!(roce::verify_icrc_v4(&f[14..]));
        let mut bad = f.clone();
        let last = bad.len() - 5;
        bad[last] ^= 1;
        assert!(!roce::verify_icrc_v4(&bad[14..]));
    }
}

const PY: &str = r#"
import sys, logging
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.layers.l2 import Ether
from scapy.contrib.roce import BTH
for line in sys.stdin:
    p = Ether(bytes.fromhex(line.strip()))
    b = p[BTH]
    want = b.compute_icrc(None)
    got = bytes(p)[-4:]
    print(int(want == got), b.opcode, b.dqpn, b.psn, b.ackreq, b.padcount, flush=True)
"#;

#[test]
fn scapy_recomputes_our_icrc() {
    if !tool_present("python3", &["-c", "import scapy.contrib.roce"]) {
        return;
    }
    let fr = frames();
    let mut child = Command::new("python3")
        .args(["-c", PY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut i = child.stdin.take().unwrap();
        for (f, ..) in &fr {
            let h: String = f.iter().map(|b| format!("{b:02x}")).collect();
            writeln!(i, "{h}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), fr.len());
    for (l, (f, op, qp, psn, _, _, dlen)) in lines.iter().zip(&fr) {
        let v: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
        assert_eq!(v[0], 1, "Scapy's ICRC differs for {l}");
        assert_eq!(
            (v[1], v[2], v[3], v[4]),
            (*op as u64, *qp as u64, *psn as u64, 1)
        );
        if *op == opcode::RC_RDMA_WRITE_ONLY {
            assert_eq!(v[5], (4 - dlen % 4) % 4, "pad count");
        }
        let _ = f;
    }
}

#[test]
fn tshark_infiniband_dissector_decodes_our_requests() {
    let fr = frames();
    let path = std::env::temp_dir().join(format!("peregrine-roce-{}.pcap", std::process::id()));
    std::fs::write(
        &path,
        pcap(&fr.iter().map(|f| f.0.clone()).collect::<Vec<_>>()),
    )
    .unwrap();
    let Some(json) = tshark_json(&path) else {
        return;
    };
    let _ = std::fs::remove_file(&path);
    let pkts = json.as_array().unwrap();
    assert_eq!(pkts.len(), fr.len());
    for (p, (frame, op, qp, psn, va, rkey, x)) in pkts.iter().zip(&fr) {
        let mut f = BTreeMap::new();
        flatten(&p["_source"]["layers"], &mut f);
        assert!(!f.contains_key("_ws.malformed"), "{f:?}");
        // The dissector shows the ICRC bytes as sent (it does not check them: Scapy does).
        let icrc: String = frame[frame.len() - 4..]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(
            has(&f, "infiniband.invariant.crc", &format!("0x{icrc}")),
            "{f:?}"
        );
        if let Some(sev) = f.get("_ws.expert.severity") {
            assert!(!sev.iter().any(|s| s == "8388608"), "{f:?}");
        }
        assert!(has(&f, "infiniband.bth.opcode", &op.to_string()), "{f:?}");
        assert!(
            has(&f, "infiniband.bth.destqp", &format!("0x{qp:06x}"))
                || has(&f, "infiniband.bth.destqp", &qp.to_string()),
            "{f:?}"
        );
        assert!(has(&f, "infiniband.bth.psn", &psn.to_string()), "{f:?}");
        if *op == opcode::RC_RDMA_WRITE_ONLY {
            assert!(
                has(&f, "infiniband.reth.va", &format!("0x{va:016x}")),
                "{f:?}"
            );
            assert!(
                has(&f, "infiniband.reth.r_key", &rkey.to_string())
                    || has(&f, "infiniband.reth.r_key", &format!("0x{rkey:08x}")),
                "{f:?}"
            );
            assert!(has(&f, "infiniband.reth.dmalen", &x.to_string()), "{f:?}");
        } else {
            assert!(
                has(&f, "infiniband.atomiceth.swapdt", &x.to_string()),
                "{f:?}"
            );
        }
    }
}
