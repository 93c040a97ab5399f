//! End to end, the UPF on N3: ARP and Neighbour Discovery answered locally, End Markers on a
//! path switch (the daemon driven over real PFCP).

use super::*;
use peregrine_testkit::tools::START_GUARD;

/// ARP and Neighbour Discovery answered locally (DESIGN section 1, exception path): an ARP
/// request for the N3 IPv4 address and a Neighbour Solicitation for the N3 IPv6 address,
/// replayed on n3, get an ARP reply and a solicited Neighbour Advertisement out of n3 (sent
/// through a worker by the injector), which tshark decodes with a good ICMPv6 checksum.
#[test]
fn upf_answers_arp_and_neighbour_solicitation_on_n3() {
    use peregrine_control::neighbour::{arp_request, neighbour_solicit};
    use peregrine_wire::ethernet::Address;
    let dir = tempfile::tempdir().unwrap();
    let peer = Address([0x02, 0, 0, 0, 0x03, 0x01]);
    let rx = dir.path().join("nd.pcap");
    let mut w = PcapWriter::create(&rx, Resolution::Nano).unwrap();
    w.write(
        0,
        &arp_request(
            peer,
            "192.0.2.10".parse().unwrap(),
            "192.0.2.1".parse().unwrap(),
        ),
    )
    .unwrap();
    let ns = neighbour_solicit(
        peer,
        "2001:db8:3::10".parse().unwrap(),
        "2001:db8:3::1".parse().unwrap(),
    );
    // The replay repeats every 200 ms until --duration stops the run.
    w.write(200_000_000, &ns).unwrap();
    w.flush().unwrap();
    let cfg = format!(
        r#"[backend]
kind = "pcap"
replay = "timed"
loops = 0
[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
rx = "{}"
tx = "n3-out.pcap"
[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
tx = "n6-out.pcap"
[pipeline]
kind = "upf"
[upf]
node_id = "192.0.2.1"
n3 = ["192.0.2.1", "2001:db8:3::1"]
n6 = ["198.51.100.254"]
{routes}"#,
        rx.display(),
        routes = peregrine_testkit::daemon::n3_n6_routes(),
    );
    let conf = dir.path().join("nd.toml");
    std::fs::write(&conf, cfg).unwrap();
    let out = bin()
        .args(["run", "--duration", "1", "--config"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = read_pcap(&dir.path().join("n3-out.pcap"));
    assert!(sent.len() >= 2, "{} frames out of n3", sent.len());
    let arp = sent
        .iter()
        .find(|f| f[12..14] == [0x08, 0x06])
        .expect("ARP reply");
    assert_eq!(&arp[..6], &peer.0, "to the requester");
    assert_eq!(&arp[6..12], &[2, 0, 0, 0, 0, 3], "from n3's MAC");
    assert_eq!(&arp[20..22], &[0, 2], "ARP reply");
    let pcap = dir.path().join("n3-out.pcap");
    if let Some(n) = tshark_problems(&pcap) {
        assert_eq!(n, 0, "tshark found problems in our replies");
    }
    if let Some(rows) = tshark_fields(
        &pcap,
        "arp.opcode == 2",
        &["arp.src.proto_ipv4", "arp.src.hw_mac", "arp.dst.proto_ipv4"],
    ) {
        assert!(!rows.is_empty());
        assert_eq!(rows[0], ["192.0.2.1", "02:00:00:00:00:03", "192.0.2.10"]);
    }
    if let Some(rows) = tshark_fields(
        &pcap,
        "icmpv6.type == 136 && icmpv6.checksum.status == 1",
        &[
            "ipv6.src",
            "ipv6.dst",
            "ipv6.hlim",
            "icmpv6.nd.na.target_address",
            "icmpv6.nd.na.flag.s",
            "icmpv6.opt.linkaddr",
        ],
    ) {
        assert!(
            !rows.is_empty(),
            "a Neighbour Advertisement with a good checksum"
        );
        assert_eq!(
            rows[0],
            [
                "2001:db8:3::1",
                "2001:db8:3::10",
                "255",
                "2001:db8:3::1",
                "1",
                "02:00:00:00:00:03"
            ]
        );
    }
}

/// One PFCP request from `c` to the daemon at `to`, its response decoded.
fn pfcp_exchange(
    c: &std::net::UdpSocket,
    to: std::net::SocketAddr,
    seq: u32,
    seid: Option<u64>,
    body: peregrine_pfcp::Body,
) -> Option<peregrine_pfcp::Message> {
    let m = peregrine_pfcp::Message {
        seq,
        seid,
        priority: None,
        fo: false,
        body,
    };
    c.send_to(&m.to_vec().unwrap(), to).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = c.recv_from(&mut buf).ok()?;
    Some(peregrine_pfcp::Message::parse(&buf[..n]).expect("our response decodes"))
}

/// SNDEM end to end (TS 29.244 section 5.2.2.3, TS 29.281 section 7.3.2): an SMF over N4
/// establishes a session whose downlink FAR tunnels to the gNB with TEID 0x100, then moves
/// it to TEID 0x200 with PFCPSMReq-Flags SNDEM; the daemon sends a GTP-U End Marker with
/// the old TEID from our N3 address to the gNB out of n3, which tshark decodes.
#[test]
fn sndem_path_switch_sends_an_end_marker_on_the_old_tunnel() {
    use peregrine_pfcp::ie::{
        ie_type as t, ohc, smreq_flags, Bitmap, FSeid, Grouped, Ie, NodeId, OuterHeaderCreation,
    };
    use peregrine_pfcp::message::{
        AssociationRequest, SessionEstablishmentRequest, SessionModificationRequest,
    };
    use peregrine_pfcp::Body;
    use peregrine_testkit::pfcp::requests::{far_n3_to, pdr_dl_for};
    let dir = tempfile::tempdir().unwrap();
    // n6 replays one foreign frame every 100 ms, so the pcap run lasts until --duration.
    let rx = dir.path().join("idle.pcap");
    let mut w = PcapWriter::create(&rx, Resolution::Nano).unwrap();
    let foreign = peregrine_control::neighbour::arp_request(
        peregrine_wire::ethernet::Address([2, 0, 0, 0, 9, 9]),
        "203.0.113.9".parse().unwrap(),
        "203.0.113.10".parse().unwrap(),
    );
    w.write(0, &foreign).unwrap();
    w.write(100_000_000, &foreign).unwrap();
    w.flush().unwrap();
    let pfcp_port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = format!(
        r#"[backend]
kind = "pcap"
replay = "timed"
loops = 0
[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
tx = "n3-out.pcap"
[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
rx = "{}"
[pipeline]
kind = "upf"
[upf]
node_id = "192.0.2.1"
n3 = ["192.0.2.1"]
n6 = ["198.51.100.254"]
pfcp = ["127.0.0.1:{pfcp_port}"]
{routes}"#,
        rx.display(),
        routes = peregrine_testkit::daemon::n3_n6_routes(),
    );
    let conf = dir.path().join("em.toml");
    std::fs::write(&conf, cfg).unwrap();
    let child = bin()
        .args(["run", "--duration", "4", "--config"])
        .arg(&conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let to: std::net::SocketAddr = format!("127.0.0.1:{pfcp_port}").parse().unwrap();
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let t0 = Instant::now();
    let setup = || {
        Body::AssociationSetupRequest(AssociationRequest {
            node_id: NodeId::fqdn("smf.test"),
            recovery_time_stamp: Some(1),
            up_function_features: None,
            extra: vec![],
        })
    };
    while pfcp_exchange(&c, to, 1, None, setup()).is_none() {
        assert!(t0.elapsed() < START_GUARD, "N4 did not answer");
    }
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let gnb = "192.0.2.10".parse().unwrap();
    let tunnel = |teid| OuterHeaderCreation {
        description: ohc::GTPU_UDP_IPV4,
        teid: Some(teid),
        ipv4: Some(gnb),
        ..Default::default()
    };
    let est = SessionEstablishmentRequest {
        node_id: NodeId::fqdn("smf.test"),
        cp_f_seid: FSeid {
            seid: 0x77,
            ipv4: Some("127.0.0.1".parse().unwrap()),
            ipv6: None,
        },
        create_pdr: vec![pdr_dl_for(1, 100, "10.60.0.1".parse().unwrap(), 1, None)],
        create_far: vec![far_n3_to(1, 0x100, gnb)],
        create_urr: vec![],
        create_qer: vec![],
        create_bar: None,
        extra: vec![],
    };
    let r = pfcp_exchange(&c, to, 2, Some(0), Body::SessionEstablishmentRequest(est)).unwrap();
    let up_seid = match r.body {
        Body::SessionEstablishmentResponse(e) => {
            assert_eq!(e.cause, 1, "{e:?}");
            e.up_f_seid.unwrap().seid
        }
        b => panic!("{b:?}"),
    };
    let modify = SessionModificationRequest {
        update_far: vec![Grouped::new(
            t::UPDATE_FAR,
            vec![
                Ie::FarId(1),
                Ie::Grouped(Grouped::new(
                    t::UPDATE_FORWARDING_PARAMETERS,
                    vec![
                        Ie::OuterHeaderCreation(tunnel(0x200)),
                        Ie::PfcpsmReqFlags(Bitmap(smreq_flags::SNDEM)),
                    ],
                )),
            ],
        )],
        ..Default::default()
    };
    let r = pfcp_exchange(
        &c,
        to,
        3,
        Some(up_seid),
        Body::SessionModificationRequest(modify),
    )
    .unwrap();
    match r.body {
        Body::SessionModificationResponse(m) => assert_eq!(m.cause, 1, "{m:?}"),
        b => panic!("{b:?}"),
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pcap = dir.path().join("n3-out.pcap");
    let sent = read_pcap(&pcap);
    assert_eq!(sent.len(), 1, "exactly one frame out of n3: the End Marker");
    let f = &sent[0];
    assert_eq!(&f[..6], &[2, 0, 0, 0, 3, 1], "to the gNB's next hop");
    assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 3], "from n3");
    assert_eq!(f[14 + 20 + 8 + 1], 254, "GTP-U End Marker");
    assert_eq!(
        &f[14 + 20 + 8 + 4..14 + 20 + 8 + 8],
        &[0, 0, 1, 0],
        "old TEID"
    );
    if let Some(n) = tshark_problems(&pcap) {
        assert_eq!(n, 0, "tshark found problems in the End Marker");
    }
    if let Some(rows) = tshark_fields(
        &pcap,
        "gtp.message == 254",
        &["ip.src", "ip.dst", "udp.srcport", "udp.dstport", "gtp.teid"],
    ) {
        assert_eq!(
            rows,
            [["192.0.2.1", "192.0.2.10", "2152", "2152", "0x00000100"]]
        );
    }
}
