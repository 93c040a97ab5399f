//! Message-level encode / decode (TS 29.244 section 7): every message type round trips,
//! hostile lengths and missing IEs give the right error and cause, unknown IEs are kept.
//! (Moved from the unit tests of `message.rs` to use the test kit's sample messages.)

use peregrine_pfcp::cause;
use peregrine_pfcp::ie::ie_type as t;
use peregrine_pfcp::message::Heartbeat;
use peregrine_pfcp::{Action, Body, DecodeError, Ie, Message, RawIe};
use peregrine_testkit::pfcp::samples as common;

#[test]
fn round_trip_every_message_type() {
    let all = common::all();
    let mut types: Vec<u8> = all.iter().map(|m| m.body.msg_type()).collect();
    types.sort_unstable();
    assert_eq!(
        types,
        [1, 2, 5, 6, 7, 8, 9, 10, 11, 50, 51, 52, 53, 54, 55, 56, 57]
    );
    for m in all {
        let bytes = m.to_vec().unwrap();
        let back = Message::parse(&bytes).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        assert_eq!(back, m);
        let mut buf = vec![0u8; bytes.len()];
        assert_eq!(m.emit(&mut buf).unwrap(), bytes.len());
        assert_eq!(buf, bytes);
        assert!(m.emit(&mut vec![0u8; bytes.len() - 1]).is_err());
    }
}

#[test]
fn heartbeat_bytes() {
    let m = Message {
        seq: 0x010203,
        seid: None,
        priority: None,
        fo: false,
        body: Body::HeartbeatRequest(Heartbeat {
            recovery_time_stamp: 0xe6f01234,
            extra: vec![],
        }),
    };
    assert_eq!(
        m.to_vec().unwrap(),
        [0x20, 1, 0, 12, 1, 2, 3, 0, 0, 96, 0, 4, 0xe6, 0xf0, 0x12, 0x34]
    );
}

fn hb_bytes(ies: &[u8]) -> Vec<u8> {
    let mut v = vec![0x20, 1, 0, 0, 0, 0, 1, 0];
    v.extend_from_slice(ies);
    let l = (v.len() - 4) as u16;
    v[2..4].copy_from_slice(&l.to_be_bytes());
    v
}

const RTS: [u8; 8] = [0, 96, 0, 4, 0xe6, 0xf0, 0x12, 0x34];

#[test]
fn hostile_lengths() {
    let good = hb_bytes(&RTS);
    assert!(Message::parse(&good).is_ok());
    // Every truncation fails cleanly.
    for n in 0..good.len() {
        let e = Message::parse(&good[..n]).unwrap_err();
        assert!(matches!(
            e,
            DecodeError::Truncated | DecodeError::InvalidLength { .. }
        ));
    }
    assert_eq!(
        Message::parse(&good[..3]).unwrap_err().action(),
        Action::Discard
    );
    assert_eq!(
        Message::parse(&good[..10]).unwrap_err().cause(),
        Some(cause::INVALID_LENGTH)
    );
    // IE length past the message (but within the buffer).
    let mut bad = good.clone();
    bad[11] = 5;
    bad.push(0);
    let e = Message::parse(&bad).unwrap_err();
    assert_eq!(e, DecodeError::IeLength { ie_type: 96 });
    assert_eq!(
        e.action(),
        Action::Reject {
            cause: cause::INVALID_LENGTH,
            offending_ie: Some(96)
        }
    );
    // Overlong IE length.
    let mut bad = good.clone();
    bad[10] = 0xff;
    assert_eq!(
        Message::parse(&bad).unwrap_err(),
        DecodeError::IeLength { ie_type: 96 }
    );
    // Dangling partial IE header after a good IE.
    let bad = hb_bytes(&[&RTS[..], &[0, 19][..]].concat());
    assert_eq!(
        Message::parse(&bad).unwrap_err(),
        DecodeError::IeLength { ie_type: 19 }
    );
    // IE too short for its type.
    let bad = hb_bytes(&[0, 96, 0, 2, 1, 2]);
    let e = Message::parse(&bad).unwrap_err();
    assert_eq!(
        e.action(),
        Action::Reject {
            cause: cause::MANDATORY_IE_INCORRECT,
            offending_ie: Some(96)
        }
    );
}

#[test]
fn missing_mandatory_ies() {
    let e = Message::parse(&hb_bytes(&[])).unwrap_err();
    assert_eq!(
        e,
        DecodeError::MandatoryIeMissing {
            ie_type: t::RECOVERY_TIME_STAMP
        }
    );
    assert_eq!(
        e.action(),
        Action::Reject {
            cause: cause::MANDATORY_IE_MISSING,
            offending_ie: Some(96)
        }
    );
    // Session Establishment Request without Create FAR.
    let mut m = common::all().remove(9);
    if let Body::SessionEstablishmentRequest(r) = &mut m.body {
        r.create_far.clear();
    }
    let e = Message::parse(&m.to_vec().unwrap()).unwrap_err();
    assert_eq!(e.offending_ie(), Some(t::CREATE_FAR));
    assert_eq!(e.cause(), Some(cause::MANDATORY_IE_MISSING));
    // Create FAR without Apply Action: the member is reported.
    let mut m = common::all().remove(9);
    if let Body::SessionEstablishmentRequest(r) = &mut m.body {
        r.create_far[0]
            .ies
            .retain(|i| i.ie_type() != t::APPLY_ACTION);
    }
    let e = Message::parse(&m.to_vec().unwrap()).unwrap_err();
    assert_eq!(
        e,
        DecodeError::MandatoryIeMissing {
            ie_type: t::APPLY_ACTION
        }
    );
    // Accepted Session Establishment Response without UP F-SEID: conditional missing.
    let mut m = common::all().remove(10);
    if let Body::SessionEstablishmentResponse(r) = &mut m.body {
        r.up_f_seid = None;
    }
    let e = Message::parse(&m.to_vec().unwrap()).unwrap_err();
    assert_eq!(e, DecodeError::ConditionalIeMissing { ie_type: t::F_SEID });
    assert_eq!(e.cause(), Some(cause::CONDITIONAL_IE_MISSING));
}

#[test]
fn header_level_errors() {
    let mut v = hb_bytes(&RTS);
    v[0] = 0x40; // version 2
    let e = Message::parse(&v).unwrap_err();
    assert_eq!(e, DecodeError::UnsupportedVersion(2));
    assert_eq!(e.action(), Action::VersionNotSupported);
    let mut v = hb_bytes(&RTS);
    v[1] = 99;
    let e = Message::parse(&v).unwrap_err();
    assert_eq!(e, DecodeError::UnknownMessageType(99));
    assert_eq!(e.action(), Action::Discard);
    // Session message without SEID.
    let mut v = hb_bytes(&RTS);
    v[1] = 54;
    assert_eq!(
        Message::parse(&v).unwrap_err(),
        DecodeError::SeidFlag { msg_type: 54 }
    );
    // Emit refuses inconsistent SEID presence.
    let mut m = common::all().remove(0);
    m.seid = Some(1);
    assert!(m.to_vec().is_err());
}

#[test]
fn unknown_and_duplicate_ies_are_kept() {
    let ies = [
        &RTS[..],
        &[0, 200, 0, 1, 7][..],              // unknown type
        &[0x80, 5, 0, 3, 0x48, 0xf9, 1][..], // vendor IE
        &[0, 96, 0, 4, 0, 0, 0, 1][..],      // duplicate Recovery Time Stamp
    ]
    .concat();
    let m = Message::parse(&hb_bytes(&ies)).unwrap();
    let Body::HeartbeatRequest(hb) = &m.body else {
        panic!("{m:?}")
    };
    assert_eq!(hb.recovery_time_stamp, 0xe6f01234);
    assert_eq!(
        hb.extra,
        vec![
            Ie::Raw(RawIe {
                ie_type: 200,
                enterprise_id: None,
                value: vec![7]
            }),
            Ie::Raw(RawIe {
                ie_type: 0x8005,
                enterprise_id: Some(18681),
                value: vec![1]
            }),
            Ie::RecoveryTimeStamp(1),
        ]
    );
    assert_eq!(Message::parse(&m.to_vec().unwrap()).unwrap(), m);
}

#[test]
fn follow_on_chain() {
    let all = common::all();
    let mut a = all[0].clone();
    a.fo = true;
    let b = all[9].clone();
    let mut buf = a.to_vec().unwrap();
    let first = buf.len();
    buf.extend(b.to_vec().unwrap());
    let (m1, n1) = Message::parse_prefix(&buf).unwrap();
    assert_eq!((m1, n1), (a, first));
    let (m2, n2) = Message::parse_prefix(&buf[n1..]).unwrap();
    assert_eq!(m2, b);
    assert_eq!(n1 + n2, buf.len());
}

#[test]
fn report_request_conditionals() {
    let mut m = common::all().remove(15);
    if let Body::SessionReportRequest(r) = &mut m.body {
        r.usage_report.clear();
    }
    assert_eq!(
        Message::parse(&m.to_vec().unwrap()).unwrap_err(),
        DecodeError::ConditionalIeMissing {
            ie_type: t::USAGE_REPORT_SRR
        }
    );
}
