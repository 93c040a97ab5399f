//! The INT manager over real ZeroMQ sockets on ephemeral loopback ports (Miranda et al., III-B):
//! every request kind in JSON and CBOR, error replies for bad input with the manager still
//! answering afterwards, snapshots handed to the dataplane, and reports on PUB topics that SUB
//! prefix filters select.

use peregrine_int::namespace::TableSnapshot;
use peregrine_int::request::{
    Flags, Mode, ModeKind, ModifyFields, Protocol, Reply, ReplyBody, Request, Rule, TraceType,
};
use peregrine_int_manager::codec::{ReplyCodec, RequestJson};
use peregrine_int_manager::qos_monitor::{QosReport, RawReport, Window};
use peregrine_int_manager::{Encoding, IntManager, ManagerConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEC: u64 = 1_000_000_000;

struct Harness {
    mgr: IntManager,
    reports: SyncSender<RawReport>,
    snapshots: Receiver<Arc<TableSnapshot>>,
    clock: Arc<AtomicU64>,
    ctx: zmq::Context,
}

fn start(encoding: Encoding) -> Harness {
    let cfg = ManagerConfig {
        rules_endpoint: "tcp://127.0.0.1:*".into(),
        reports_endpoint: "tcp://127.0.0.1:*".into(),
        report_encoding: encoding,
        qos_grace: Duration::from_millis(100),
        ..ManagerConfig::default()
    };
    let (tx, rx) = mpsc::sync_channel(1024);
    let (stx, srx) = mpsc::channel();
    let clock = Arc::new(AtomicU64::new(SEC / 2));
    let c = Arc::clone(&clock);
    let mgr = IntManager::spawn(
        cfg,
        rx,
        Box::new(move |s| {
            let _ = stx.send(s);
        }),
        Box::new(move || c.load(Ordering::Relaxed)),
    )
    .expect("manager starts");
    Harness {
        mgr,
        reports: tx,
        snapshots: srx,
        clock,
        ctx: zmq::Context::new(),
    }
}

impl Harness {
    fn req_socket(&self) -> zmq::Socket {
        let s = self.ctx.socket(zmq::REQ).unwrap();
        s.set_linger(0).unwrap();
        s.set_rcvtimeo(5000).unwrap();
        s.set_sndtimeo(5000).unwrap();
        s.connect(self.mgr.rules_endpoint()).unwrap();
        s
    }
    /// Sends raw bytes, returns the raw reply (panics on a 5 s timeout: the manager hung).
    fn raw(&self, msg: &[u8]) -> Vec<u8> {
        let s = self.req_socket();
        s.send(msg, 0).unwrap();
        s.recv_bytes(0).expect("the manager must reply within 5 s")
    }
    fn json(&self, msg: &[u8]) -> Reply {
        let b = self.raw(msg);
        assert_eq!(b.first(), Some(&b'{'), "JSON request, JSON reply");
        Reply::from_json(&b).unwrap()
    }
    fn call(&self, req: &Request, cbor: bool) -> Reply {
        if cbor {
            let b = self.raw(&req.to_cbor());
            assert!(b[0] >= 0x80, "CBOR request, CBOR reply");
            Reply::from_cbor(&b).unwrap()
        } else {
            self.json(&req.to_json())
        }
    }
    fn sub(&self, prefixes: &[&str]) -> zmq::Socket {
        let s = self.ctx.socket(zmq::SUB).unwrap();
        s.set_linger(0).unwrap();
        s.set_rcvtimeo(100).unwrap();
        for p in prefixes {
            s.set_subscribe(p.as_bytes()).unwrap();
        }
        s.connect(self.mgr.reports_endpoint()).unwrap();
        s
    }
    fn latest_snapshot(&self) -> Arc<TableSnapshot> {
        let mut last = self.snapshots.recv_timeout(Duration::from_secs(5)).unwrap();
        while let Ok(s) = self.snapshots.try_recv() {
            last = s;
        }
        last
    }
}

fn rule(ns: u16, app: u32) -> Rule {
    Rule {
        ns_id: ns,
        app_id: app,
        src_ip: "2001:db8::1".parse().unwrap(),
        dst_ip: "2001:db8::2".parse().unwrap(),
        src_port: 0,
        dst_port: 5000,
        protocol: Protocol::Udp,
        trace_type: TraceType::SEED_EXPERIMENTS,
        mode: Mode::Count(100),
        flags: Flags::default(),
    }
}

fn error_code(r: &Reply) -> u16 {
    match r {
        Reply::Error { code, .. } => *code,
        other => panic!("expected an error reply, got {other:?}"),
    }
}

fn every_request_kind(cbor: bool) {
    let h = start(Encoding::Json);
    assert!(
        h.latest_snapshot().namespaces.is_empty(),
        "initial snapshot"
    );
    let r = h.call(&Request::Install(rule(7, 1)), cbor);
    assert_eq!(r, Reply::Ok(ReplyBody::Installed { ns_id: 7 }));
    let snap = h.latest_snapshot();
    assert_eq!(snap.get(7).unwrap().rule, rule(7, 1));

    let changes = ModifyFields {
        mode: Some(ModeKind::Probability),
        mode_setting: Some(5.0),
        piggyback_report: Some(true),
        extract_report: Some(true),
        transmit_report: Some(false),
        disable_hops: vec![3],
        enable_hops: vec![4],
        ..Default::default()
    };
    let r = h.call(
        &Request::Modify {
            namespace: 7,
            changes,
        },
        cbor,
    );
    assert_eq!(r, Reply::Ok(ReplyBody::Modified { ns_id: 7 }));
    let snap = h.latest_snapshot();
    let ns = snap.get(7).unwrap();
    assert_eq!(ns.rule.mode, Mode::Probability(5.0));
    assert!(ns.rule.flags.piggyback_report && ns.rule.flags.extract_report);
    assert!(!ns.rule.flags.transmit_report);
    assert!(!ns.hop_enabled_for(3) && ns.hop_enabled_for(4) && ns.hop_enabled_for(5));

    // Hop enable alone, then the namespace-wide switch.
    let r = h.call(
        &Request::Modify {
            namespace: 7,
            changes: ModifyFields {
                enable_hops: vec![3],
                hop_enabled: Some(false),
                ..Default::default()
            },
        },
        cbor,
    );
    assert_eq!(r, Reply::Ok(ReplyBody::Modified { ns_id: 7 }));
    let snap = h.latest_snapshot();
    let ns = snap.get(7).unwrap();
    assert!(ns.hop_enabled_for(3) && !ns.hop_enabled_for(5));

    assert_eq!(
        h.call(&Request::Install(rule(8, 2)), cbor),
        Reply::Ok(ReplyBody::Installed { ns_id: 8 })
    );
    let Reply::Ok(ReplyBody::List { rules }) = h.call(&Request::List, cbor) else {
        panic!("list")
    };
    assert_eq!(
        rules
            .iter()
            .map(|r| (r.ns_id, r.app_id))
            .collect::<Vec<_>>(),
        [(7, 1), (8, 2)]
    );
    assert_eq!(rules[0].mode, Mode::Probability(5.0));
    let Reply::Ok(ReplyBody::Stats { stats }) = h.call(&Request::Stats { namespace: None }, cbor)
    else {
        panic!("stats")
    };
    assert_eq!(stats.len(), 2);
    let Reply::Ok(ReplyBody::Stats { stats }) =
        h.call(&Request::Stats { namespace: Some(8) }, cbor)
    else {
        panic!("stats 8")
    };
    assert_eq!((stats.len(), stats[0].ns_id, stats[0].app_id), (1, 8, 2));
    assert_eq!(
        h.call(&Request::Remove { namespace: 7 }, cbor),
        Reply::Ok(ReplyBody::Removed { ns_id: 7 })
    );
    let snap = h.latest_snapshot();
    assert!(snap.get(7).is_none() && snap.get(8).is_some());
    // Table errors come back as error replies too.
    assert_eq!(
        error_code(&h.call(&Request::Remove { namespace: 7 }, cbor)),
        404
    );
    assert_eq!(
        error_code(&h.call(&Request::Install(rule(8, 2)), cbor)),
        409
    );

    // Give the thread a turn to copy its counters out.
    std::thread::sleep(Duration::from_millis(50));
    let k = h.mgr.counters();
    assert_eq!(k.requests, 10);
    if cbor {
        assert_eq!((k.cbor_requests, k.json_requests), (10, 0));
    } else {
        assert_eq!((k.cbor_requests, k.json_requests), (0, 10));
    }
    assert_eq!(
        (k.installs, k.modifies, k.removes, k.lists, k.stats),
        (2, 2, 1, 1, 2)
    );
    assert_eq!(k.rejected.unknown_namespace, 1);
    assert_eq!(k.rejected.duplicate_namespace, 1);
    assert_eq!(k.rejected.total(), 2);
    // One initial snapshot plus one per change (2 installs, 2 modifies, 1 remove).
    assert_eq!(k.snapshots_published, 6);
}

#[test]
fn every_request_kind_json() {
    every_request_kind(false);
}

#[test]
fn every_request_kind_cbor() {
    every_request_kind(true);
}

#[test]
fn listing1_json_text_installs() {
    let h = start(Encoding::Json);
    let msg = br#" {"int_request": {"ns_id": 7, "app_id": 1, "src_ip": "2001:db8::1",
        "dst_ip": "2001:db8::2", "src_port": 0, "dst_port": 5000, "protocol": "UDP",
        "trace_type": "0x7000E000", "mode": "frequency", "mode_setting": 10}}"#;
    assert_eq!(h.json(msg), Reply::Ok(ReplyBody::Installed { ns_id: 7 }));
}

#[test]
fn bad_messages_get_error_replies_and_are_counted() {
    let h = start(Encoding::Json);
    let install_json = String::from_utf8(Request::Install(rule(7, 1)).to_json()).unwrap();
    let mut oversize = br#"{"int_list":{"pad":""#.to_vec();
    oversize.extend(std::iter::repeat_n(b'x', 100 * 1024));
    oversize.extend(br#""}}"#);

    // (message, expected code, expected JSON reply?)
    let cases: Vec<(Vec<u8>, u16, bool, &str)> = vec![
        (br#"{"int_list": {"#.to_vec(), 400, true, "malformed"),
        (b"hello".to_vec(), 400, true, "malformed"),
        (vec![0xA1, 0x6B, b'i', b'n', b't'], 400, false, "malformed"), // truncated CBOR
        (vec![0xBF, 0xFF, 0xFF, 0x00], 400, false, "malformed"),       // break + trailing
        (
            install_json
                .replace("\"ns_id\":7", "\"ns_id\":7,\"colour\":\"red\"")
                .into_bytes(),
            400,
            true,
            "malformed", // unknown field
        ),
        (
            install_json
                .replace("\"ns_id\":7", "\"ns_id\":\"7\"")
                .into_bytes(),
            400,
            true,
            "invalid", // wrong type
        ),
        (
            install_json
                .replace("\"mode_setting\":100", "\"mode_setting\":0")
                .into_bytes(),
            400,
            true,
            "invalid",
        ),
        (oversize, 413, true, "oversize"),
        (Vec::new(), 400, true, "empty"),
        (
            b"[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]".to_vec(),
            400,
            true,
            "too_deep",
        ),
    ];
    for (msg, code, json, _) in &cases {
        let b = h.raw(msg);
        let r = if *json {
            Reply::from_json(&b)
        } else {
            Reply::from_cbor(&b)
        }
        .unwrap_or_else(|e| panic!("reply to {:?} undecodable: {e}", &msg[..msg.len().min(40)]));
        assert_eq!(error_code(&r), *code, "{r:?}");
        if let Reply::Error { message, .. } = &r {
            assert!(!message.is_empty());
        }
    }
    // The field is named in the message.
    let r = h.json(
        install_json
            .replace("\"ns_id\":7", "\"ns_id\":7,\"colour\":\"red\"")
            .as_bytes(),
    );
    let Reply::Error { message, .. } = r else {
        panic!()
    };
    assert!(message.contains("colour"), "{message}");

    // Multipart: one error reply for the whole message.
    let s = h.req_socket();
    s.send_multipart([&b"{}"[..], &b"{}"[..]], 0).unwrap();
    let r = Reply::from_json(&s.recv_bytes(0).unwrap()).unwrap();
    assert_eq!(error_code(&r), 400);

    // Still answering, and nothing was installed.
    assert_eq!(
        h.call(&Request::List, false),
        Reply::Ok(ReplyBody::List { rules: vec![] })
    );
    std::thread::sleep(Duration::from_millis(50));
    let k = h.mgr.counters();
    let rj = k.rejected;
    let want = |reason: &str| cases.iter().filter(|c| c.3 == reason).count() as u64;
    assert_eq!(rj.malformed, want("malformed") + 1);
    assert_eq!(rj.invalid, want("invalid"));
    assert_eq!(rj.oversize, 1);
    assert_eq!(rj.empty, 1);
    assert_eq!(rj.too_deep, 1);
    assert_eq!(rj.multipart, 1);
    assert_eq!(k.requests, cases.len() as u64 + 3);
    assert_eq!(k.ok, 1);
    assert_eq!(k.installs, 0);
}

#[test]
fn many_clients_each_get_their_own_reply() {
    let h = start(Encoding::Json);
    let threads: Vec<_> = (0..4u16)
        .map(|i| {
            let ep = h.mgr.rules_endpoint().to_owned();
            std::thread::spawn(move || {
                let ctx = zmq::Context::new();
                let s = ctx.socket(zmq::REQ).unwrap();
                s.set_rcvtimeo(5000).unwrap();
                s.connect(&ep).unwrap();
                for j in 0..10u16 {
                    let ns = 1 + i * 100 + j;
                    s.send(Request::Install(rule(ns, i as u32)).to_cbor(), 0)
                        .unwrap();
                    let r = Reply::from_cbor(&s.recv_bytes(0).unwrap()).unwrap();
                    assert_eq!(r, Reply::Ok(ReplyBody::Installed { ns_id: ns }));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let Reply::Ok(ReplyBody::List { rules }) = h.call(&Request::List, false) else {
        panic!()
    };
    assert_eq!(rules.len(), 40);
}

/// Collects `(topic, payload)` for `for_ms` after the first message arrives, while `pump` keeps
/// producing (PUB/SUB drops what is sent before the subscription is in place).
fn collect(sub: &zmq::Socket, mut pump: impl FnMut(), for_ms: u64) -> Vec<(String, Vec<u8>)> {
    let start = Instant::now();
    let mut first: Option<Instant> = None;
    let mut got = Vec::new();
    loop {
        if first.is_none() {
            pump();
        }
        if let Ok(f) = sub.recv_multipart(0) {
            assert_eq!(f.len(), 2, "topic and payload frames");
            got.push((String::from_utf8(f[0].clone()).unwrap(), f[1].clone()));
            first.get_or_insert_with(Instant::now);
        }
        match first {
            Some(t) if t.elapsed() > Duration::from_millis(for_ms) => return got,
            None if start.elapsed() > Duration::from_secs(10) => return got,
            _ => {}
        }
    }
}

#[test]
fn sub_topic_filters_select_kind_app_and_namespace() {
    let h = start(Encoding::Json);
    for (ns, app) in [(7, 1), (8, 2), (70, 1)] {
        assert!(matches!(
            h.call(&Request::Install(rule(ns, app)), false),
            Reply::Ok(_)
        ));
    }
    let by_app = h.sub(&["raw/2/"]);
    let by_ns = h.sub(&["raw/1/7"]);
    let qos_only = h.sub(&["qos/"]);
    let mut seq = 0u32;
    let tx = h.reports.clone();
    let mut pump = || {
        for ns in [7u32, 8, 70, 99] {
            let t = SEC / 2 + seq as u64;
            let _ = tx.try_send(RawReport::new(ns, seq, t - 1000, t, 200));
        }
        seq += 1;
        std::thread::sleep(Duration::from_millis(5));
    };
    let got = collect(&by_app, &mut pump, 100);
    assert!(!got.is_empty());
    assert!(got.iter().all(|(t, _)| t == "raw/2/8"), "{got:?}");
    let r: RawReport = serde_json::from_slice(&got[0].1).unwrap();
    assert_eq!((r.namespace, r.packet_len), (8, 200));

    let got = collect(&by_ns, &mut pump, 100);
    // `raw/1/7` is a prefix of `raw/1/70`: both arrive, nothing else does.
    assert!(got.iter().any(|(t, _)| t == "raw/1/7"));
    assert!(
        got.iter().all(|(t, _)| t == "raw/1/7" || t == "raw/1/70"),
        "{got:?}"
    );

    // No window has closed (the clock stands still): the QoS subscriber gets nothing.
    assert!(qos_only.recv_multipart(0).is_err());
    std::thread::sleep(Duration::from_millis(50));
    let k = h.mgr.counters();
    assert!(
        k.reports_unknown_namespace > 0,
        "namespace 99 is not installed"
    );
    assert_eq!(k.reports_in, k.raw_published + k.reports_unknown_namespace);
    assert_eq!(k.qos_published, 0);
}

fn qos_reports_published(encoding: Encoding) {
    let h = start(encoding);
    assert!(matches!(
        h.call(&Request::Install(rule(7, 1)), false),
        Reply::Ok(_)
    ));
    let sub = h.sub(&["qos/1/7", "raw/1/7"]);
    // Reports at 0.5 s + i ms with a 1 ms one-way delay, until the subscriber sees one.
    let mut i = 0u64;
    let tx = h.reports.clone();
    let mut pump = || {
        let t = SEC / 2 + i * 1_000_000;
        let _ = tx.try_send(RawReport::new(7, i as u32, t - 1_000_000, t, 1000));
        i += 1;
        std::thread::sleep(Duration::from_millis(2));
    };
    let got = collect(&sub, &mut pump, 1);
    assert!(got.iter().all(|(t, _)| t == "raw/1/7"));
    let sent = i;
    // Close the first 1 s window: the sink clock passes 1 s plus the 100 ms grace.
    h.clock.store(SEC + 150_000_000, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(5);
    let qos = loop {
        assert!(Instant::now() < deadline, "no QoS report");
        if let Ok(f) = sub.recv_multipart(0) {
            if f[0] == b"qos/1/7" {
                break f[1].clone();
            }
        }
    };
    let r: QosReport = match encoding {
        Encoding::Json => serde_json::from_slice(&qos).unwrap(),
        Encoding::Cbor => ciborium::de::from_reader(&qos[..]).unwrap(),
    };
    assert_eq!(r.window, Window::OneSecond);
    assert_eq!((r.namespace, r.window_start_ns), (7, 0));
    assert_eq!(r.reports, sent);
    assert!((r.delay_ns.mean - 1e6).abs() < 1.0, "{:?}", r.delay_ns);
    assert_eq!(r.loss_ratio, Some(0.0));
}

#[test]
fn qos_report_published_when_window_closes_json() {
    qos_reports_published(Encoding::Json);
}

#[test]
fn qos_report_published_when_window_closes_cbor() {
    qos_reports_published(Encoding::Cbor);
}

#[test]
fn bind_conflict_is_an_error_not_a_panic() {
    let h = start(Encoding::Json);
    let cfg = ManagerConfig {
        rules_endpoint: h.mgr.rules_endpoint().to_owned(),
        reports_endpoint: "tcp://127.0.0.1:*".into(),
        ..ManagerConfig::default()
    };
    let (_tx, rx) = mpsc::sync_channel::<RawReport>(1);
    let e = IntManager::spawn(cfg, rx, Box::new(|_| {}), Box::new(|| 0)).unwrap_err();
    assert!(e.to_string().contains("bind"), "{e}");
}

#[test]
fn manager_keeps_serving_after_the_sink_goes_away() {
    let Harness {
        mgr,
        reports,
        snapshots,
        clock,
        ctx,
    } = start(Encoding::Json);
    let h = Harness {
        mgr,
        reports: mpsc::sync_channel(1).0,
        snapshots,
        clock,
        ctx,
    };
    // The only sender of the manager's report channel goes away: the channel disconnects.
    drop(reports);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        h.call(&Request::List, false),
        Reply::Ok(ReplyBody::List { rules: vec![] })
    );
    assert_eq!(
        h.call(&Request::Install(rule(7, 1)), true),
        Reply::Ok(ReplyBody::Installed { ns_id: 7 })
    );
}
