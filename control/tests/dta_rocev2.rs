//! The translator's RoCEv2 output on the pcap backend: Key-Write and Key-Increment reports
//! come in, RDMA WRITE / FETCH_ADD requests go out toward the collector's NIC (valid ICRC,
//! the layout's addresses, consecutive PSNs); a PSN-sequence NAK from the collector moves
//! the PSN of the requests that follow.

use peregrine_control::config::Config;
use peregrine_control::daemon::{self, RunOptions};
use peregrine_control::dta::DtaTranslatorStats;
use peregrine_dataplane::io::pcapfile::{PcapWriter, Resolution};
use peregrine_dta::hash;
use peregrine_dta::{Layout, Sizes};
use peregrine_testkit::pcap::read_pcap;
use peregrine_wire::dta::{self, FrameAddrs, Primitive, Repr, Variant};
use peregrine_wire::ethernet::Address;
use peregrine_wire::roce::{self, opcode, Aeth, AtomicEth, Bth, Reth};
use std::net::Ipv4Addr;

const QP: u32 = 0x42;
const BASE: u64 = 0x7f00_0000_0000;
const NIC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 99);

fn report(p: Primitive) -> Vec<u8> {
    let r = Repr {
        variant: Variant::Tracked,
        seqnum: 0,
        immediate: false,
        retransmittable: false,
        primitive: p,
    };
    let mut b = vec![0u8; 96];
    let n = r.emit(&mut b[dta::FRAME_OVERHEAD..]).unwrap();
    let a = FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 9]),
        eth_dst: Address([2, 0, 0, 0, 0, 1]),
        ip_src: Ipv4Addr::new(10, 0, 0, 200),
        ip_dst: Ipv4Addr::new(10, 0, 0, 1),
        src_port: 40041,
        dst_port: dta::UDP_PORT,
    };
    let len = dta::emit_frame(&mut b, &a, n).unwrap();
    b.truncate(len);
    b
}

/// The collector NIC's NAK: PSN sequence error, expecting `psn`.
fn nak(psn: u32) -> Vec<u8> {
    let mut b = vec![0u8; 96];
    let at = dta::FRAME_OVERHEAD;
    Bth {
        opcode: opcode::RC_ACK,
        solicited: false,
        pad_count: 0,
        pkey: roce::DEFAULT_PKEY,
        dest_qp: QP,
        ack_req: false,
        psn,
    }
    .emit(&mut b[at..])
    .unwrap();
    Aeth {
        syndrome: 0x60,
        msn: 0,
    }
    .emit(&mut b[at + roce::BTH_LEN..])
    .unwrap();
    let a = FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 0x99]),
        eth_dst: Address([2, 0, 0, 0, 0, 1]),
        ip_src: NIC,
        ip_dst: Ipv4Addr::new(10, 0, 0, 1),
        src_port: 49999,
        dst_port: roce::UDP_PORT,
    };
    let len = dta::emit_frame(&mut b, &a, roce::BTH_LEN + roce::AETH_LEN + roce::ICRC_LEN).unwrap();
    b.truncate(len);
    roce::fill_icrc_v4(&mut b[14..]).unwrap();
    b
}

#[test]
fn rocev2_requests_out_and_nak_resync() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = PcapWriter::create(dir.path().join("in.pcap"), Resolution::Nano).unwrap();
    let mut t = 1_000_000_000u64;
    let mut step = |w: &mut PcapWriter<_>, f: &[u8]| {
        w.write(t, f).unwrap();
        t += 100_000_000; // 100 ms: the control loop ticks in between
    };
    for k in 1..=3u32 {
        step(
            &mut w,
            &report(Primitive::key_write(2, k, &[k * 10]).unwrap()),
        );
    }
    step(
        &mut w,
        &report(Primitive::KeyIncrement {
            redundancy: 1,
            key: 9,
            counter: 5,
        }),
    );
    step(&mut w, &nak(0x100));
    for k in 4..=5u32 {
        step(
            &mut w,
            &report(Primitive::key_write(2, k, &[k * 10]).unwrap()),
        );
    }
    step(&mut w, &report(Primitive::key_write(0, 1, &[1]).unwrap())); // refused
    for _ in 0..3 {
        step(&mut w, &[0u8; 60]); // a quiet tail (not reports)
    }
    w.flush().unwrap();
    let text = format!(
        r#"
[backend]
kind = "pcap"
replay = "timed"

[[port]]
name = "p"
mac = "02:00:00:00:00:01"
rx = "in.pcap"
tx = "out.pcap"

[pipeline]
kind = "dta-translator"

[dta_translator]
region = "region"

[dta_translator.sizes]
kw_slots = 1001
ki_slots = 101

[dta_translator.rocev2]
port = "p"
collector_ip = "{NIC}"
collector_mac = "02:00:00:00:00:99"
source_ip = "10.0.0.1"
qp = {QP}
rkey = 7
base_va = {BASE}
first_psn = 16777214
"#
    );
    let mut cfg = Config::parse(&text).unwrap();
    cfg.base_dir = dir.path().to_path_buf();
    let summary = daemon::run(&cfg, &RunOptions::default()).expect("run");
    let s: DtaTranslatorStats = summary.feature("dta_translator").unwrap();
    eprintln!("{s:?}");
    assert_eq!((s.key_write, s.key_increment), (5, 1));
    assert_eq!(s.refused["redundancy_zero"], 1);
    assert_eq!(
        (s.rdma_sent, s.rdma_inject_failed, s.rdma_resyncs),
        (11, 0, 1)
    );

    let l = Layout::new(Sizes {
        kw_slots: 1001,
        ki_slots: 101,
        ..Sizes::default()
    })
    .unwrap();
    let out = read_pcap(dir.path().join("out.pcap"));
    let mut psns = Vec::new();
    let (mut writes, mut adds) = (0, 0);
    for f in &out {
        let ip = &f[14..];
        assert!(roce::verify_icrc_v4(ip), "ICRC");
        assert_eq!(&ip[16..20], &NIC.octets());
        let bth = Bth::parse(&ip[28..]).unwrap();
        assert_eq!(bth.dest_qp, QP);
        psns.push(bth.psn);
        match bth.opcode {
            opcode::RC_RDMA_WRITE_ONLY => {
                let reth = Reth::parse(&ip[40..]).unwrap();
                let data = u32::from_le_bytes(ip[60..64].try_into().unwrap());
                let key = data / 10;
                let slots: Vec<u64> = (0..2)
                    .map(|n| BASE + l.kw_offset + 8 * hash::slot(key, n, 1001))
                    .collect();
                assert!(slots.contains(&reth.va), "key {key}: va {:#x}", reth.va);
                assert_eq!(reth.rkey, 7);
                assert_eq!(&ip[56..60], &hash::kw_checksum(key, 32).to_le_bytes());
                writes += 1;
            }
            opcode::RC_FETCH_ADD => {
                let a = AtomicEth::parse(&ip[40..]).unwrap();
                assert_eq!(a.va, BASE + l.ki_offset + 8 * hash::slot(9, 0, 101));
                assert_eq!(a.swap_add, 5);
                adds += 1;
            }
            o => panic!("opcode {o}"),
        }
    }
    assert_eq!((writes, adds), (10, 1));
    // PSNs: 2^24 - 2 on, wrapping, then from the NAK's 0x100.
    assert_eq!(
        psns,
        vec![0xff_fffe, 0xff_ffff, 0, 1, 2, 3, 4, 0x100, 0x101, 0x102, 0x103]
    );
}
