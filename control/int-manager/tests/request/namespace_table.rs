//! The namespace table (the seed's Listing 2): install, modify, remove, caps, resends.

use super::*;

#[test]
fn table_install_modify_remove_list_stats() {
    let mut t = NamespaceTable::default();
    assert_eq!(
        t.handle(Request::Install(rule(1))),
        Reply::Ok(ReplyBody::Installed { ns_id: 1 })
    );
    let dup = t.handle(Request::Install(rule(1)));
    assert!(matches!(dup, Reply::Error { code: 409, .. }), "{dup:?}");
    assert_eq!(t.install(rule(1)), Err(TableError::Duplicate { ns_id: 1 }));
    t.install(rule(2)).unwrap();

    let before = t.get(1).unwrap().clone();
    let changes = ModifyFields {
        transmit_report: Some(false),
        ..Default::default()
    };
    t.modify(1, &changes).unwrap();
    let after = t.get(1).unwrap();
    assert!(!after.request.flags.transmit_report);
    // Only the given field changed.
    let mut expect = before.clone();
    expect.request.flags.transmit_report = false;
    assert_eq!(*after, expect);

    let unknown = t.handle(Request::Modify {
        namespace: 9,
        changes: changes.clone(),
    });
    assert!(matches!(unknown, Reply::Error { code: 404, .. }));

    let list = t.handle(Request::List);
    let Reply::Ok(ReplyBody::List { rules }) = list else {
        panic!("{list:?}")
    };
    assert_eq!(rules.iter().map(|r| r.ns_id).collect::<Vec<_>>(), [1, 2]);

    t.record_tx(1, 500, true, 42).unwrap();
    t.record_tx(1, 500, false, 43).unwrap();
    t.record_rx(1, 480).unwrap();
    let Reply::Ok(ReplyBody::Stats { stats }) = t.handle(Request::Stats { namespace: Some(1) })
    else {
        panic!()
    };
    assert_eq!(stats.len(), 1);
    assert_eq!(
        (
            stats[0].tx_packets,
            stats[0].tx_bytes,
            stats[0].rx_packets,
            stats[0].rx_bytes
        ),
        (2, 1000, 1, 480)
    );
    assert_eq!(
        (stats[0].int_packets, stats[0].last_int_tx_ns),
        (1, Some(42))
    );
    assert!(matches!(
        t.handle(Request::Stats { namespace: Some(7) }),
        Reply::Error { code: 404, .. }
    ));

    assert_eq!(
        t.handle(Request::Remove { namespace: 1 }),
        Reply::Ok(ReplyBody::Removed { ns_id: 1 })
    );
    assert!(matches!(
        t.handle(Request::Remove { namespace: 1 }),
        Reply::Error { code: 404, .. }
    ));
    assert_eq!(t.len(), 1);
}

#[test]
fn rejected_modify_changes_nothing() {
    let mut t = NamespaceTable::default();
    t.install(rule(1)).unwrap(); // count 100
    let snap = t.snapshot();
    let before = t.get(1).unwrap().clone();
    // Switching to probability keeps the setting 100 -> 100 %: fine. But 1000 is not a percent.
    t.modify(
        1,
        &ModifyFields {
            mode_setting: Some(1000.0),
            ..Default::default()
        },
    )
    .unwrap();
    let before2 = t.get(1).unwrap().clone();
    let snap2 = t.snapshot();
    assert_ne!(before, before2);
    let bad = ModifyFields {
        mode: Some(ModeKind::Probability),
        transmit_report: Some(false),
        hop_enabled: Some(false),
        enable_hops: vec![5],
        ..Default::default()
    };
    let r = t.modify(1, &bad);
    assert_eq!(
        r,
        Err(TableError::Invalid(RequestError::ProbabilityOutOfRange {
            value: 1000.0
        }))
    );
    assert_eq!(*t.get(1).unwrap(), before2);
    assert!(std::sync::Arc::ptr_eq(&snap2, &t.snapshot()));
    assert!(!std::sync::Arc::ptr_eq(&snap, &snap2));
    let reply = t.handle(Request::Modify {
        namespace: 1,
        changes: bad,
    });
    assert!(
        matches!(&reply, Reply::Error { code: 400, message } if message.contains("mode_setting"))
    );
    assert_eq!(*t.get(1).unwrap(), before2);

    // Too many hop overrides is rejected as a whole.
    let mut n = 1u16;
    loop {
        let hops: Vec<u16> = (n..n + 64).collect();
        n += 64;
        let r = t.modify(
            1,
            &ModifyFields {
                enable_hops: hops,
                ..Default::default()
            },
        );
        if r.is_err() {
            assert_eq!(
                r,
                Err(TableError::TooManyHopOverrides {
                    ns_id: 1,
                    max: MAX_HOP_OVERRIDES
                })
            );
            break;
        }
    }
    assert_eq!(t.get(1).unwrap().hop_overrides.len(), MAX_HOP_OVERRIDES);
}

#[test]
fn table_cap() {
    let mut t = NamespaceTable::new(TableConfig {
        max_namespaces: 3,
        ..Default::default()
    });
    for ns in 1..=3 {
        t.install(rule(ns)).unwrap();
    }
    assert_eq!(t.install(rule(4)), Err(TableError::Full { max: 3 }));
    assert!(matches!(
        t.handle(Request::Install(rule(4))),
        Reply::Error { code: 507, .. }
    ));
    t.remove(2).unwrap();
    t.install(rule(4)).unwrap();
    assert_eq!(t.len(), 3);
}

#[test]
fn resend_schedule_with_fake_clock() {
    const S: u64 = 1_000_000_000;
    let mut t = NamespaceTable::default();
    let mut now = 1000 * S;
    t.install(rule(1)).unwrap();
    t.install(rule(2)).unwrap();
    // Never sent: due at once.
    assert_eq!(t.due_requests(now), [1, 2]);
    t.mark_request_sent(1, now).unwrap();
    assert_eq!(t.due_requests(now), [2]);
    t.mark_request_sent(2, now + 10 * S).unwrap();
    assert!(t.due_requests(now + 10 * S).is_empty());
    now += DEFAULT_RESEND_INTERVAL_NS - 1;
    assert!(t.due_requests(now).is_empty());
    now += 1; // 60 s after ns 1's request
    assert_eq!(t.due_requests(now), [1]);
    t.mark_request_sent(1, now).unwrap();
    now += 10 * S; // 60 s after ns 2's request
    assert_eq!(t.due_requests(now), [2]);
    // Clock going backwards makes nothing due.
    t.mark_request_sent(2, now).unwrap();
    assert!(t.due_requests(now - 5 * S).is_empty());
    // A modify of mode or trace type makes the request due again (the destination must learn it);
    // a flag change does not.
    t.modify(
        1,
        &ModifyFields {
            extract_report: Some(true),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(t.due_requests(now).is_empty());
    t.modify(
        1,
        &ModifyFields {
            trace_type: Some(TraceType(0x8000_0000)),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(t.due_requests(now), [1]);
    assert_eq!(
        t.mark_request_sent(9, now),
        Err(TableError::Unknown { ns_id: 9 })
    );
    // Custom interval.
    let mut t = NamespaceTable::new(TableConfig {
        resend_interval_ns: 5 * S,
        ..Default::default()
    });
    t.install(rule(1)).unwrap();
    t.mark_request_sent(1, 0).unwrap();
    assert!(t.due_requests(4 * S).is_empty());
    assert_eq!(t.due_requests(5 * S), [1]);
}
