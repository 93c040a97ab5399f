//! GTP-U path supervision through the node (TS 29.281 section 7.2.1; TS 29.244 section 6.2.9
//! Node Report, tables 7.4.5.1-1, 7.4.5.1.2-1, 7.4.5.1.3-1): Echo Requests to the gNB of an
//! established session, retransmission, the failure and recovery reported to the SMF in Node
//! Report Requests (decoded by our codec and by tshark), and the path's end with its last
//! session.

use std::net::IpAddr;
use std::time::Duration;

use peregrine_n4::{Event, Node, Output};
use peregrine_pfcp::ie::{ie_type as t, node_report_type, Ie, NodeId, RemoteGtpuPeer};
use peregrine_pfcp::message::{msg_type as mt, NodeReportRequest, NodeReportResponse};
use peregrine_pfcp::Body;
use peregrine_testkit::pfcp::{node::*, requests::*};
use peregrine_testkit::tshark;

fn echo_node() -> Node {
    let mut c = config();
    c.heartbeat_interval = Duration::from_secs(100_000);
    c.echo_interval = Duration::from_secs(60);
    c.echo_t3 = Duration::from_secs(3);
    c.echo_n3 = 2;
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1000));
    n
}

/// The standard session with a URR that never reports by itself (no periodic reports to
/// mix with the node's).
fn quiet_session(n: &mut Node, seq: u32, cp_seid: u64) -> u64 {
    let mut r = est(cp_seid);
    r.create_urr = vec![urr_with(1, 0, vec![])];
    let resp = sess_resp(&n.handle(0, smf(), &est_bytes(seq, r)));
    assert_eq!(resp.cause, 1, "{:?}", resp.offending);
    resp.up_seid.unwrap()
}

fn echoes(out: &[Output]) -> Vec<(IpAddr, u16)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Echo { peer, seq } => Some((*peer, *seq)),
            _ => None,
        })
        .collect()
}

/// The single Node Report Request sent, with its sequence number and bytes.
fn node_report(out: &[Output]) -> (u32, NodeReportRequest, Vec<u8>) {
    let m = sent(out);
    let Body::NodeReportRequest(r) = m.body else {
        panic!("{m:?}")
    };
    (m.seq, r, sent_bytes(out))
}

fn peers_in(g: &peregrine_pfcp::Grouped) -> Vec<RemoteGtpuPeer> {
    g.ies
        .iter()
        .filter_map(|i| match i {
            Ie::RemoteGtpuPeer(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

fn answer(n: &mut Node, seq: u32) -> Vec<Output> {
    let body = Body::NodeReportResponse(NodeReportResponse {
        node_id: NodeId::fqdn("smf.example"),
        cause: 1,
        offending_ie: None,
        extra: vec![],
    });
    n.handle(0, smf(), &msg(seq, None, body))
}

#[test]
fn echo_failure_and_recovery_reach_the_smf_in_node_reports() {
    const S: u64 = SEC;
    let gnb = IpAddr::V4(GNB);
    let mut n = echo_node();
    assert_eq!(n.next_timer(), Some(100_000 * S), "no path in use yet");
    let seid = quiet_session(&mut n, 2, 7);
    assert_eq!(n.next_timer(), Some(60 * S));
    assert_eq!(echoes(&n.poll_timers(60 * S)), [(gnb, 1)]);
    assert!(n.echo_response(61 * S, gnb, 1).is_empty());
    // Unanswered: retransmitted at +3 s and +6 s, failed at +9 s.
    assert_eq!(echoes(&n.poll_timers(121 * S)), [(gnb, 2)]);
    assert_eq!(echoes(&n.poll_timers(124 * S)), [(gnb, 2)]);
    assert_eq!(echoes(&n.poll_timers(127 * S)), [(gnb, 2)]);
    let out = n.poll_timers(130 * S);
    assert_eq!(events(&out), [Event::PathFailed { peer: gnb }]);
    let (seq, r, fail_bytes) = node_report(&out);
    assert_eq!(r.node_id, NodeId::Ipv4(UPF));
    assert_eq!(r.node_report_type.0, node_report_type::UPFR);
    let g = r.path_failure.as_ref().unwrap();
    assert_eq!(g.ie_type, t::USER_PLANE_PATH_FAILURE_REPORT);
    assert_eq!(peers_in(g)[0].ipv4, Some(GNB));
    assert!(r.path_recovery.is_none());
    assert_eq!(n.stats().gtpu_paths_failed, 1);
    // Unanswered, the report is retransmitted every T1 like a Session Report.
    assert_eq!(sent(&n.poll_timers(133 * S)).seq, seq);
    answer(&mut n, seq);
    assert_eq!(n.stats().node_reports_acknowledged, 1);
    assert_eq!(n.pending_reports(), 0);
    // Probed an interval later; the answer is the recovery.
    assert_eq!(echoes(&n.poll_timers(190 * S)), [(gnb, 3)]);
    let out = n.echo_response(191 * S, gnb, 3);
    assert_eq!(events(&out), [Event::PathRecovered { peer: gnb }]);
    let (seq, r, rec_bytes) = node_report(&out);
    assert_eq!(r.node_report_type.0, node_report_type::UPRR);
    let g = r.path_recovery.as_ref().unwrap();
    assert_eq!(g.ie_type, t::USER_PLANE_PATH_RECOVERY_REPORT);
    assert_eq!(peers_in(g)[0].ipv4, Some(GNB));
    answer(&mut n, seq);
    let st = n.stats();
    assert_eq!((st.paths.failures, st.paths.recoveries), (1, 1));
    assert_eq!(
        (st.node_reports_sent, st.gtpu_paths, st.gtpu_paths_failed),
        (2, 1, 0)
    );
    // The session goes, and with it the path.
    n.handle(200 * S, smf(), &delete_bytes(9, seid));
    assert_eq!(n.stats().gtpu_paths, 0);
    assert!(echoes(&n.poll_timers(400 * S)).is_empty());
    n.check_consistency().unwrap();

    // Wireshark reads both reports as we meant them.
    let Some(pkts) = tshark::decode_clean(&[fail_bytes, rec_bytes], "node_report") else {
        return;
    };
    for (f, bit) in [(&pkts[0], "upfr"), (&pkts[1], "uprr")] {
        assert!(
            tshark::has(f, "pfcp.msg_type", &mt::NODE_REPORT_REQUEST.to_string()),
            "{f:#?}"
        );
        assert!(
            tshark::has(f, &format!("pfcp.node_report_type.{bit}"), "1"),
            "{f:#?}"
        );
        assert!(f.values().flatten().any(|v| v == "192.168.1.10"), "{f:#?}");
    }
}

#[test]
fn stray_echo_responses_and_report_answers_are_counted_not_taken() {
    let mut n = echo_node();
    quiet_session(&mut n, 2, 7);
    let gnb = IpAddr::V4(GNB);
    // Nothing outstanding: an Echo Response is unexpected; so is one from a stranger.
    assert!(n.echo_response(SEC, gnb, 1).is_empty());
    assert!(n
        .echo_response(SEC, "198.51.100.9".parse().unwrap(), 1)
        .is_empty());
    assert_eq!(n.stats().paths.echo_responses_unexpected, 2);
    // A Node Report Response for nothing we sent.
    let before = n.stats().reports_unexpected_responses;
    answer(&mut n, 4242);
    assert_eq!(n.stats().reports_unexpected_responses, before + 1);
}
