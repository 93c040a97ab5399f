//! Live end to end with fragments made by kernels (issue 14 items 2 and 3): the real
//! `peregrine` daemon as a UPF with a static session, a gNB and a data network in network
//! namespaces on 1500-byte veths.
//!
//! ```text
//!  netns gnb                 root namespace                          netns dn
//!  [ {p}g ]=veth=[ {p}n3 ]--net_pcap0   peregrine   net_af_packet1--[ {p}n6 ]=veth=[ {p}d ]
//!  192.0.2.10                N3 192.0.2.1, 2001:db8:3::1   N6 198.51.100.254   198.51.100.10
//!  2001:db8:3::10
//! ```
//!
//! N3 is a DPDK `net_pcap` port on the veth (libpcap hands frames over as they are): a
//! `net_af_packet` port joins a PACKET_FANOUT group with PACKET_FANOUT_FLAG_DEFRAG, so the
//! kernel would reassemble IPv4 fragments before the UPF saw them. `frag_gnb.py` sends a
//! full-size uplink G-PDU over IPv4 and over IPv6 with ordinary kernel UDP sockets (the
//! kernel fragments the outer packet), counts the fragments on the wire, and receives the
//! inner datagram in dn; then dn's kernel sends a 1500-byte UDP packet without DF to the
//! UE, which the UPF must fragment, and Scapy's `defragment` reassembles what the gNB gets.
//! The daemon's counters show the stage saw the fragments.
//!
//! Needs root, `ip netns` and python3 with Scapy; outside CI it prints why and passes when
//! they are missing, under `CI` it fails.

use peregrine_testkit::daemon::{sample, scrape, Live};
use peregrine_testkit::netns::{
    gnb_dn_backend, gnb_dn_routes, gnb_dn_ues as setup, gnb_dn_ues_upf, Topology,
    RIG_DN_V4 as DN_V4, RIG_GNB_V4 as GNB_V4, RIG_GNB_V6 as GNB_V6, RIG_N3_V4 as N3_V4,
    RIG_N3_V6 as N3_V6,
};
use peregrine_testkit::tools::{
    free_tcp_port, is_root, run, skip, wait_until, wait_value, START_GUARD,
};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const UE_V4: &str = "10.45.0.2";
const UL_TEID: u32 = 0x100;
const DL_TEID: u32 = 0x200;
const QFI: u8 = 9;

fn config(topo: &Topology, metrics: u16) -> String {
    // N3 is a net_pcap port: it hands over outer fragments as they are.
    let backend = gnb_dn_backend(topo, ["net_pcap", "net_af_packet"], 512, 4095, 256);
    let routes = gnb_dn_routes(&["192.0.2.0/24", "2001:db8:3::/48"], &["198.51.100.0/24"]);
    format!(
        r#"{backend}
[pipeline]
kind = "upf"

{upf}
[upf.reassembly]
max_datagrams = 16
timeout_ms = 1000
{routes}"#,
        upf = gnb_dn_ues_upf(metrics, UE_V4, UL_TEID, DL_TEID, QFI),
    )
}

fn sample_of(page: &str, series: &str) -> f64 {
    sample(page, series).unwrap_or_else(|| panic!("no {series} in the metrics page"))
}

#[test]
fn kernel_fragments_through_the_live_upf() {
    const T: &str = "the live fragment test";
    if !is_root() {
        return skip(T, "not root");
    }
    if run(&["ip", "netns", "list"]).is_err() {
        return skip(T, "no `ip netns`");
    }
    if run(&["python3", "-c", "import scapy.contrib.gtp"]).is_err() {
        return skip(T, "python3 with Scapy (gtp) not available");
    }
    let mut topo = Topology::new(Topology::unique_prefix("plf"));
    if let Err(e) = setup(&mut topo) {
        return skip(T, &format!("cannot build the namespaces: {e}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let metrics = free_tcp_port();
    let mut daemon = Live::start(
        env!("CARGO_BIN_EXE_peregrine"),
        dir.path(),
        "frag",
        &config(&topo, metrics),
    );
    daemon.wait_metrics(metrics, START_GUARD);
    // N3's libpcap handle captures once its packet socket is bound to the veth.
    wait_until("libpcap capturing on the N3 veth", || {
        topo.captured(&topo.dev("n3"))
    });

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/smf/frag_gnb.py");
    let traffic = Command::new("ip")
        .args(["netns", "exec", &topo.ns("gnb"), "python3"])
        .arg(script)
        .args(["--gnb-ns", &format!("/run/netns/{}", topo.ns("gnb"))])
        .args(["--dn-ns", &format!("/run/netns/{}", topo.ns("dn"))])
        .args(["--dev", &topo.dev("g")])
        .args([
            "--gnb4", GNB_V4, "--gnb6", GNB_V6, "--n3v4", N3_V4, "--n3v6", N3_V6,
        ])
        .args(["--ue", UE_V4, "--dn", DN_V4])
        .args(["--ul-teid", &UL_TEID.to_string(), "--qfi", &QFI.to_string()])
        .output()
        .expect("run frag_gnb.py");
    // The page is refreshed once a second: wait until it shows the traffic's counters (the
    // test fails below, with the daemon's log, if frag_gnb.py did).
    let page = if traffic.status.success() {
        wait_value(
            "the metrics page counting fragments",
            Duration::from_millis(100),
            || {
                let page = scrape(metrics);
                let seen = sample(&page, "peregrine_upf_fragments_made_total") >= Some(2.0)
                    && sample(&page, "peregrine_upf_datagrams_reassembled_total") >= Some(2.0);
                if seen {
                    Ok(page)
                } else {
                    Err(page)
                }
            },
        )
    } else {
        scrape(metrics)
    };
    let drops: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("peregrine_drops_total{") && !l.ends_with(" 0"))
        .collect();
    eprintln!("daemon drops: {drops:?}");
    assert!(
        traffic.status.success(),
        "frag_gnb.py failed ({}): {}{}\n{}",
        traffic.status,
        String::from_utf8_lossy(&traffic.stdout),
        String::from_utf8_lossy(&traffic.stderr),
        daemon.log()
    );
    let obs: serde_json::Value = serde_json::from_slice(&traffic.stdout).expect("JSON");
    eprintln!("observed: {obs}");
    // The kernel fragmented both outer packets (2 fragments each on a 1500-byte link).
    assert_eq!(obs["fragments_sent"]["v4"], 2, "{obs}");
    assert_eq!(obs["fragments_sent"]["v6"], 2, "{obs}");
    // The stage saw them as fragments and reassembled both datagrams ...
    assert_eq!(
        sample_of(&page, "peregrine_upf_fragments_received_total"),
        4.0
    );
    assert_eq!(
        sample_of(&page, "peregrine_upf_datagrams_reassembled_total"),
        2.0
    );
    // ... whose inner packets reached dn's kernel intact (UDP checksum checked there).
    for fam in ["v4", "v6"] {
        let u = &obs["uplink"][fam];
        assert_eq!(u["intact"], true, "{fam}: {obs}");
        assert_eq!(u["len"], 1472, "{fam}: {obs}");
    }
    // Downlink: fragmented inner packet, each piece a whole G-PDU, Scapy reassembles it.
    assert_eq!(obs["downlink"]["pieces"], 2, "{obs}");
    assert_eq!(obs["downlink"]["reassembled_by_scapy"], true, "{obs}");
    for g in obs["downlink_gpdus"].as_array().unwrap() {
        assert_eq!(g["teid"], DL_TEID, "{obs}");
        assert!(g["len"].as_u64().unwrap() + 28 <= 1500, "{obs}");
    }
    assert_eq!(
        sample_of(&page, "peregrine_upf_packets_fragmented_total"),
        1.0
    );
    assert_eq!(sample_of(&page, "peregrine_upf_fragments_made_total"), 2.0);
    drop(daemon);
}
