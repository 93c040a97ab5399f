//! Error handling (TS 29.244 7.6): truncated, wrong-version and garbage requests, and the
//! Scapy vectors, never panic and get the cause the section names.

use super::*;

// ---- 7.6 Error handling --------------------------------------------------------------------

fn all_requests() -> Vec<Vec<u8>> {
    vec![
        heartbeat_req(1),
        setup_req(2, 5),
        assoc_req(3, false),
        est_bytes(4, est(1)),
        modify_bytes(
            5,
            1,
            SessionModificationRequest {
                create_far: vec![far_n6(3)],
                ..Default::default()
            },
        ),
        delete_bytes(6, 1),
        assoc_req(7, true),
    ]
}

#[test]
fn truncated_requests_never_panic() {
    for req in all_requests() {
        for cut in 0..req.len() {
            let mut n = associated();
            establish(&mut n, 0, 90, 1);
            let before = n.debug_snapshot();
            let out = n.handle(0, smf(), &req[..cut]);
            assert_eq!(n.debug_snapshot(), before);
            n.check_consistency().unwrap();
            // At most one response, and if any, of the request's type + 1 or VNS.
            let sends: Vec<_> = out
                .iter()
                .filter_map(|o| match o {
                    Output::Send { bytes, .. } => Some(bytes),
                    _ => None,
                })
                .collect();
            assert!(sends.len() <= 1);
            if cut < 8 {
                assert!(sends.is_empty(), "header unreadable: discard");
            }
            for b in sends {
                let m = Message::parse(b).unwrap();
                assert_eq!(m.body.msg_type(), req[1] + 1);
                assert_eq!(m.seq, Message::parse(&req).unwrap().seq);
            }
        }
    }
}

#[test]
fn wrong_version_gets_version_not_supported() {
    let mut n = node();
    let mut b = heartbeat_req(33);
    b[0] = (b[0] & 0x1f) | (2 << 5);
    let m = sent(&n.handle(0, smf(), &b));
    assert_eq!(m.body, Body::VersionNotSupportedResponse);
    assert_eq!(m.seq, 33);
    // Shorter than the fixed header: discarded (section 7.6.4) whatever the version.
    assert!(n.handle(0, smf(), &[0x40]).is_empty());
    // A bad version with no readable sequence number: VNS with sequence 0.
    let m = sent(&n.handle(0, smf(), &[0x40, 1, 0, 0]));
    assert_eq!((m.body, m.seq), (Body::VersionNotSupportedResponse, 0));
}

#[test]
fn garbage_is_discarded_or_rejected() {
    let mut n = associated();
    assert!(n.handle(0, smf(), &[]).is_empty());
    assert!(n.handle(0, smf(), &[0x20]).is_empty());
    // Unknown message type: discarded.
    let mut b = heartbeat_req(1);
    b[1] = 99;
    assert!(n.handle(0, smf(), &b).is_empty());
    // Malformed heartbeat: discarded (its response has no Cause).
    let mut b = heartbeat_req(1);
    b.truncate(8);
    b[3] = 4;
    assert!(n.handle(0, smf(), &b).is_empty());
    // Establishment missing its Create FAR: response 51 with cause 66, Offending IE Create FAR.
    let mut r = est(5);
    r.create_far.clear();
    let bytes = msg(8, Some(0), Body::SessionEstablishmentRequest(r));
    let out = n.handle(0, smf(), &bytes);
    let resp = sess_resp(&out);
    assert_eq!(resp.msg_type, mt::SESSION_ESTABLISHMENT_RESPONSE);
    assert_eq!(
        (resp.cause, resp.offending),
        (cause::MANDATORY_IE_MISSING, Some(t::CREATE_FAR))
    );
    assert_eq!(n.session_count(), 0);
    // Responses we never asked for are ignored.
    let out = n.handle(
        0,
        smf(),
        &msg(
            9,
            Some(1),
            Body::SessionReportResponse(peregrine_pfcp::message::SessionResponse {
                cause: 1,
                offending_ie: None,
                created_pdr: vec![],
                usage_report: vec![],
                extra: vec![],
            }),
        ),
    );
    assert!(out.is_empty());
}

#[test]
fn scapy_vectors_never_panic() {
    let text = include_str!("../../../pfcp/tests/oracle/scapy_vectors.jsonl");
    let mut count = 0;
    for line in text.lines() {
        let Some(i) = line.find("\"hex\": \"") else {
            continue;
        };
        let rest = &line[i + 8..];
        let hex = &rest[..rest.find('"').unwrap()];
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|k| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).unwrap())
            .collect();
        let mut n = associated();
        n.handle(0, smf(), &bytes);
        n.check_consistency().unwrap();
        count += 1;
    }
    assert!(count > 10);
}
