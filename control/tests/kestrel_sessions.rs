//! The daemon's Kestrel collector keys come from the PFCP sessions (issue 10 item 5) and its
//! online detectors run inside `peregrine run` (issue 11 item 5): the real daemon (pcap
//! backend, a looping timed replay of G-PDUs) with `[kestrel]` and `[kestrel.detect]`
//! naming the committed detectors; an SMF over N4 establishes sessions, the edge API lists
//! their (TEID, QFI) keys, ranks them in their queue and answers per-key queries; a deleted
//! session's keys disappear; the metrics page shows the detectors scoring every window. A
//! bad model file stops the daemon at start with a message naming it.

use peregrine_dataplane::io::pcapfile::{PcapWriter, Resolution};
use peregrine_pfcp::ie::{ie_type as t, FSeid, FTeid, GateStatus, Grouped, Ie, NodeId};
use peregrine_pfcp::message::{AssociationRequest, SessionEstablishmentRequest};
use peregrine_pfcp::{Body, Message};
use peregrine_testkit::frames::udp4;
use peregrine_testkit::pfcp::requests::{far_n3_to, far_n6, pdr_dl_for};
use peregrine_testkit::tools::START_GUARD;
use peregrine_testkit::upf::{server_v4, ue_v4, ul_frame};
use serde_json::{json, Value};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const UL_TEID: u32 = 0x500;
const DL_TEID: u32 = 0x900;
const QFI: u8 = 9;
const SESSIONS: u32 = 3;

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../perf/models/kestrel")
}

fn free_port(tcp: bool) -> u16 {
    if tcp {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    } else {
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}

/// The committed detectors' `[kestrel.detect]` with absolute model paths.
fn detect_section() -> String {
    let text = std::fs::read_to_string(models().join("kestrel.toml")).unwrap();
    let at = text
        .find("[kestrel.detect]")
        .expect("a [kestrel.detect] section");
    text[at..].replace("model = \"", &format!("model = \"{}/", models().display()))
}

fn config(dir: &Path, pfcp: u16, api: u16, metrics: u16, detect: &str) -> PathBuf {
    // n3 replays G-PDUs of the sessions' uplink TEIDs, 100 per second, over and over.
    let rx = dir.join("n3-rx.pcap");
    let mut w = PcapWriter::create(&rx, Resolution::Nano).unwrap();
    for i in 0..50u64 {
        let s = (i % u64::from(SESSIONS)) as u32;
        let inner = udp4(ue_v4(s), server_v4(), 5000, 200 + 100 * s as usize);
        w.write(
            i * 10_000_000,
            &ul_frame(false, UL_TEID + s, Some(QFI), &inner),
        )
        .unwrap();
    }
    w.flush().unwrap();
    let cfg = format!(
        r#"[backend]
kind = "pcap"
replay = "timed"
loops = 0
[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
rx = "{rx}"
[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
tx = "n6-out.pcap"
[pipeline]
kind = "upf"
[metrics]
listen = "127.0.0.1:{metrics}"
[upf]
node_id = "192.0.2.1"
n3 = ["192.0.2.1"]
n6 = ["198.51.100.254"]
pfcp = ["127.0.0.1:{pfcp}"]
{routes}[kestrel]
publish = ""
api = "tcp://127.0.0.1:{api}"
strategy = "static"
{detect}
"#,
        rx = rx.display(),
        routes = peregrine_testkit::daemon::n3_n6_routes(),
    );
    let path = dir.join("kestrel.toml");
    std::fs::write(&path, cfg).unwrap();
    path
}

fn pfcp(c: &UdpSocket, to: SocketAddr, seq: u32, seid: Option<u64>, body: Body) -> Option<Message> {
    let m = Message {
        seq,
        seid,
        priority: None,
        fo: false,
        body,
    };
    c.send_to(&m.to_vec().unwrap(), to).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = c.recv_from(&mut buf).ok()?;
    Some(Message::parse(&buf[..n]).expect("our response decodes"))
}

/// Session `i`: uplink PDR on F-TEID (UL_TEID + i, our N3) with PDI QFI 9 -> N6; downlink
/// PDR for the UE -> GTP-U to the gNB with TEID DL_TEID + i; a QER marking QFI 9.
fn session(i: u32) -> SessionEstablishmentRequest {
    let ue = ue_v4(i);
    SessionEstablishmentRequest {
        node_id: NodeId::fqdn("smf.test"),
        cp_f_seid: FSeid {
            seid: 0x70 + u64::from(i),
            ipv4: Some("127.0.0.1".parse().unwrap()),
            ipv6: None,
        },
        create_pdr: vec![
            Grouped::new(
                t::CREATE_PDR,
                vec![
                    Ie::PdrId(1),
                    Ie::Precedence(100),
                    Ie::Grouped(Grouped::new(
                        t::PDI,
                        vec![
                            Ie::SourceInterface(0),
                            Ie::FTeid(FTeid::Assigned {
                                teid: UL_TEID + i,
                                ipv4: Some("192.0.2.1".parse().unwrap()),
                                ipv6: None,
                            }),
                            Ie::Qfi(QFI),
                        ],
                    )),
                    Ie::OuterHeaderRemoval(peregrine_pfcp::ie::OuterHeaderRemoval {
                        description: 0,
                        ext_header_deletion: None,
                    }),
                    Ie::FarId(1),
                    Ie::QerId(1),
                ],
            ),
            pdr_dl_for(2, 100, ue, 2, Some(1)),
        ],
        create_far: vec![
            far_n6(1),
            far_n3_to(2, DL_TEID + i, "192.0.2.10".parse().unwrap()),
        ],
        create_urr: vec![],
        create_qer: vec![Grouped::new(
            t::CREATE_QER,
            vec![
                Ie::QerId(1),
                Ie::GateStatus(GateStatus { ul: 0, dl: 0 }),
                Ie::Qfi(QFI),
            ],
        )],
        create_bar: None,
        extra: vec![],
    }
}

/// One edge-API request.
fn api(ctx: &zmq::Context, port: u16, req: Value) -> Value {
    let s = ctx.socket(zmq::REQ).unwrap();
    s.set_rcvtimeo(5000).unwrap();
    s.set_linger(0).unwrap();
    s.connect(&format!("tcp://127.0.0.1:{port}")).unwrap();
    s.send(req.to_string().as_bytes(), 0).unwrap();
    let r = s.recv_bytes(0).expect("the edge API answers");
    serde_json::from_slice(&r).unwrap()
}

fn scrape(port: u16) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn metric(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn keys_of(v: &Value) -> Vec<(String, u64, u64)> {
    v["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["dir"].as_str().unwrap().to_string(),
                k["teid"].as_u64().unwrap(),
                k["qfi"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn collector_keys_follow_the_n4_sessions_and_the_detectors_score_every_window() {
    let dir = tempfile::tempdir().unwrap();
    let (pp, ap, mp) = (free_port(false), free_port(true), free_port(true));
    let conf = config(dir.path(), pp, ap, mp, &detect_section());
    let child = Command::new(env!("CARGO_BIN_EXE_peregrine"))
        .args(["run", "--duration", "9", "--config"])
        .arg(&conf)
        .arg("--summary-json")
        .arg(dir.path().join("summary.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let to: SocketAddr = format!("127.0.0.1:{pp}").parse().unwrap();
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let setup = || {
        Body::AssociationSetupRequest(AssociationRequest {
            node_id: NodeId::fqdn("smf.test"),
            recovery_time_stamp: Some(1),
            up_function_features: None,
            extra: vec![],
        })
    };
    let t0 = Instant::now();
    while pfcp(&c, to, 1, None, setup()).is_none() {
        assert!(t0.elapsed() < START_GUARD, "N4 did not answer");
    }
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let ctx = zmq::Context::new();
    // No session yet: no key, and a query for one is refused.
    let k = api(&ctx, ap, json!({"cmd": "keys"}));
    assert_eq!(k["count"], 0, "{k}");
    let mut seids = Vec::new();
    for i in 0..SESSIONS {
        let r = pfcp(
            &c,
            to,
            2 + i,
            Some(0),
            Body::SessionEstablishmentRequest(session(i)),
        )
        .unwrap();
        match r.body {
            Body::SessionEstablishmentResponse(e) => {
                assert_eq!(e.cause, 1, "{e:?}");
                seids.push(e.up_f_seid.unwrap().seid);
            }
            b => panic!("{b:?}"),
        }
    }
    // "Request accepted" means the rules are in force: the keys are there.
    let ul = api(&ctx, ap, json!({"cmd": "keys", "dir": "ul"}));
    let want: Vec<(String, u64, u64)> = (0..SESSIONS)
        .map(|i| ("ul".to_string(), u64::from(UL_TEID + i), u64::from(QFI)))
        .collect();
    assert_eq!(keys_of(&ul), want, "{ul}");
    let dl = api(&ctx, ap, json!({"cmd": "keys", "dir": "dl"}));
    let want_dl: Vec<(String, u64, u64)> = (0..SESSIONS)
        .map(|i| ("dl".to_string(), u64::from(DL_TEID + i), u64::from(QFI)))
        .collect();
    assert_eq!(keys_of(&dl), want_dl, "{dl}");

    // Traffic of the sessions' TEIDs fills windows: the top of QFI 9's queue (QID 7) are
    // the three uplink keys, the largest packets first (session 2 sends 400-byte payloads).
    let t0 = Instant::now();
    let top = loop {
        let top = api(
            &ctx,
            ap,
            json!({"cmd": "top", "qid": 7, "dir": "ul", "by": "bytes", "n": 10}),
        );
        assert_eq!(top["ok"], true, "{top}");
        if top["top"].as_array().unwrap().len() == SESSIONS as usize {
            break top;
        }
        assert!(t0.elapsed() < START_GUARD, "no window with the keys: {top}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let ranked: Vec<u64> = top["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["teid"].as_u64().unwrap())
        .collect();
    assert_eq!(ranked, vec![0x502, 0x501, 0x500], "{top}");
    let key = api(
        &ctx,
        ap,
        json!({"cmd": "key", "teid": UL_TEID, "qfi": QFI, "dir": "ul"}),
    );
    assert_eq!(key["ok"], true, "{key}");
    assert_eq!(key["qid"], 7);
    assert!(
        key["windows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["packets"].as_u64().unwrap() > 0),
        "{key}"
    );
    // A key no session has is refused, by name.
    let e = api(&ctx, ap, json!({"cmd": "key", "teid": 0x777, "qfi": QFI}));
    assert_eq!(e["ok"], false);
    assert!(e["error"].as_str().unwrap().contains("TEID 0x777"), "{e}");
    let e = api(&ctx, ap, json!({"cmd": "top", "qid": 99}));
    assert!(e["error"].as_str().unwrap().contains("QID 99"), "{e}");
    let e = api(&ctx, ap, json!({"cmd": "top", "qid": 7, "by": "colour"}));
    assert!(
        e["error"].as_str().unwrap().contains("unknown feature"),
        "{e}"
    );

    // Delete session 0: its keys disappear.
    let r = pfcp(
        &c,
        to,
        10,
        Some(seids[0]),
        Body::SessionDeletionRequest(Default::default()),
    )
    .unwrap();
    match r.body {
        Body::SessionDeletionResponse(d) => assert_eq!(d.cause, 1, "{d:?}"),
        b => panic!("{b:?}"),
    }
    let ul = api(&ctx, ap, json!({"cmd": "keys", "dir": "ul"}));
    assert_eq!(keys_of(&ul), want[1..].to_vec(), "{ul}");
    let dl = api(&ctx, ap, json!({"cmd": "keys", "dir": "dl"}));
    assert_eq!(keys_of(&dl), want_dl[1..].to_vec(), "{dl}");
    let e = api(&ctx, ap, json!({"cmd": "key", "teid": UL_TEID, "qfi": QFI}));
    assert_eq!(e["ok"], false, "{e}");
    let top = api(&ctx, ap, json!({"cmd": "top", "qid": 7, "by": "packets"}));
    assert!(
        top["top"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["teid"].as_u64() != Some(u64::from(UL_TEID))),
        "{top}"
    );

    // The detectors score every window inside the daemon (the page is rebuilt each tick).
    let t0 = Instant::now();
    let page = loop {
        let page = scrape(mp);
        if metric(&page, "peregrine_kestrel_session_keys") == Some(4.0) {
            break page;
        }
        assert!(t0.elapsed() < START_GUARD, "{page}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        metric(&page, "peregrine_kestrel_windows_scored_total").is_some_and(|n| n >= 1.0),
        "{page}"
    );
    assert!(metric(&page, "peregrine_kestrel_scoring_seconds_max").is_some_and(|s| s > 0.0));
    assert!(page.contains("peregrine_kestrel_detector_score{detector=\"microburst\",qfi=\"9\"}"));
    let st = api(&ctx, ap, json!({"cmd": "status"}));
    assert_eq!(
        st["detect"]["detectors"].as_array().unwrap().len(),
        4,
        "{st}"
    );

    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("kestrel detect:"), "{stdout}");
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    let d = &s["kestrel"]["detect"];
    assert!(d["windows_scored"].as_u64().unwrap() >= 5, "{d}");
}

#[test]
fn a_bad_model_file_is_refused_at_start_by_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("broken.json"), "{\"learner\": ").unwrap();
    for (model, want) in [
        ("missing.json", "missing.json"),
        ("broken.json", "not JSON"),
    ] {
        let detect = format!(
            "[kestrel.detect]\n[[kestrel.detect.detector]]\nkind = \"microburst\"\nmodel = \"{model}\"\nthreshold = 0.5\n"
        );
        let conf = config(
            dir.path(),
            free_port(false),
            free_port(true),
            free_port(true),
            &detect,
        );
        let out = Command::new(env!("CARGO_BIN_EXE_peregrine"))
            .args(["run", "--duration", "1", "--config"])
            .arg(&conf)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains("kestrel.detect") && err.contains(want) && !err.contains("panicked"),
            "{err}"
        );
    }
}
