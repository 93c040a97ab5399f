//! Hostile PFCP against the real daemon (`smf/hostile.py`, Scapy-built messages cut,
//! stretched and corrupted), and the PFCP gaps of issue 14 item 6 with Scapy's bytes: IEs we
//! would otherwise accept and ignore are refused by name, Time Quota with TIMQU, QAURR with
//! a Query URR Reference.
//!
//! Python with Scapy is a test tool: outside CI (`CI` unset) the test says it is missing and
//! returns; in CI it fails.

mod n4_daemon;

use n4_daemon::*;

/// Hostile PFCP over UDP against a forwarding daemon (N3 IPv4 only, max_sessions = 8). Each
/// case's answer follows TS 29.244 7.6 / 7.5.2-7.5.4, and after every one the node answers a
/// Heartbeat, accepts a Modification of the session set up first, keeps forwarding, and the
/// decode-error counter of the expected kind went up.
#[test]
fn hostile_pfcp_leaves_the_node_serving() {
    let _turn = heavy();
    let dir = tempfile::tempdir().unwrap();
    let (ul, dl) = small_traffic(dir.path(), 4, 4000, 2000.0, 256);
    let d = Daemon::start(
        dir.path(),
        "replay = \"timed\"\nloops = 0",
        &ul,
        &dl,
        "n3 = [\"192.0.2.1\"]\nmax_sessions = 8\nheartbeat_interval_s = 30\n\
         echo_interval_s = 2\necho_t3_s = 1\necho_n3 = 1\n\n\
         [upf.synthetic]\nsessions = 4\nseed = 1\nqfis = [9]\ngnbs = 1\nouter = \"v4\"\n",
    );
    let Some(r) = python(
        "hostile.py",
        &[
            format!("--upf={}", d.pfcp),
            format!("--metrics={}", d.metrics),
            "--max-sessions=8".into(),
        ],
    ) else {
        return;
    };
    let setup = &r["setup"];
    assert_eq!(setup["association"]["cause"], 1, "{setup}");
    assert_eq!(setup["prior"]["cause"], 1, "{setup}");
    assert_eq!(
        setup["fillers"], 6,
        "8 - the prior and the unknown-IE session: {setup}"
    );
    assert_eq!(setup["fillers_deleted"], 6);
    assert_eq!(setup["unknown_ie_session_deleted"], true);
    assert_eq!(setup["prior_still_modifiable"], true);
    // name -> (response type, cause, offending IE, header SEID, decode-error kind counted)
    type Want = (
        Option<u64>,
        Option<u64>,
        Option<u64>,
        Option<u64>,
        Option<&'static str>,
    );
    let want: &[(&str, Want)] = &[
        // A truncated / over-long IE: Invalid Length (68) naming the IE. The truncated IE is
        // the last, so the F-SEID before it is readable and the header carries the CP's
        // SEID; the over-long one is the first (Node ID) and hides it: SEID 0.
        (
            "truncated_ie",
            (Some(51), Some(68), Some(3), Some(0x9100), Some("ie_length")),
        ),
        (
            "overlong_ie_length",
            (Some(51), Some(68), Some(60), Some(0), Some("ie_length")),
        ),
        // Unknown IEs are ignored: the Heartbeat is answered, the session accepted.
        ("unknown_ie_heartbeat", (Some(2), None, None, None, None)),
        (
            "unknown_ie_establishment",
            (Some(51), Some(1), None, Some(0x9101), None),
        ),
        // Missing mandatory IEs: 66 with the missing IE.
        (
            "missing_fseid",
            (
                Some(51),
                Some(66),
                Some(57),
                Some(0),
                Some("mandatory_ie_missing"),
            ),
        ),
        // The F-SEID is readable though the message is refused: the response carries the
        // CP's SEID (TS 29.244 section 7.2.2.4.2), not 0.
        (
            "missing_node_id",
            (
                Some(51),
                Some(66),
                Some(60),
                Some(0x9103),
                Some("mandatory_ie_missing"),
            ),
        ),
        // Rule creation failure (73), Failed Rule ID / offending IE naming the rule.
        (
            "pdr_references_missing_far",
            (Some(51), Some(73), Some(108), Some(0x9104), None),
        ),
        (
            "duplicate_pdr_id",
            (Some(51), Some(73), Some(56), Some(0x9105), None),
        ),
        (
            "duplicate_far_id",
            (Some(51), Some(73), Some(108), Some(0x9106), None),
        ),
        // Unknown SEID: 65 with header SEID 0.
        ("unknown_session", (Some(53), Some(65), None, Some(0), None)),
        // CHOOSE v6 with no N3 IPv6: the node refuses the F-TEID (73, offending F-TEID 21).
        (
            "choose_v6_without_n3_v6",
            (Some(51), Some(73), Some(21), Some(0x9107), None),
        ),
        // The compiler cannot parse the SDF filter: 73 naming SDF Filter (23).
        (
            "unparsable_sdf_filter",
            (Some(51), Some(73), Some(23), Some(0x9108), None),
        ),
        // A spare Destination Interface: Mandatory IE incorrect (69) naming IE 42.
        (
            "spare_destination_interface",
            (Some(51), Some(69), Some(42), Some(0x9109), None),
        ),
        // An IE we do not implement inside a rule: 73 naming it (Monitoring Time, 33); at the
        // top of the message: Service not supported (76) naming it (Create Traffic Endpoint).
        (
            "monitoring_time_in_urr",
            (Some(51), Some(73), Some(33), Some(0x910A), None),
        ),
        (
            "create_traffic_endpoint",
            (Some(51), Some(76), Some(127), Some(0x910B), None),
        ),
        // Garbage is discarded (or, with a version other than 1, Version Not Supported).
        ("garbage_short", (None, None, None, None, Some("truncated"))),
        (
            "garbage_random",
            (None, None, None, None, Some("invalid_length")),
        ),
        (
            "garbage_zeros",
            (Some(11), None, None, None, Some("unsupported_version")),
        ),
        (
            "unknown_message_type",
            (None, None, None, None, Some("unknown_message_type")),
        ),
        ("huge_65000_bytes", (Some(2), None, None, None, None)),
        (
            "version_2",
            (Some(11), None, None, None, Some("unsupported_version")),
        ),
        (
            "session_table_full",
            (Some(51), Some(75), None, Some(0x92FF), None),
        ),
    ];
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), want.len());
    for (c, (name, (ty, cause, off, seid, kind))) in cases.iter().zip(want) {
        assert_eq!(c["name"], *name);
        let resp = &c["response"];
        assert_eq!(resp["type"].as_u64(), *ty, "{c}");
        assert_eq!(resp["cause"].as_u64(), *cause, "{c}");
        assert_eq!(resp["offending_ie"].as_u64(), *off, "{c}");
        if ty.is_some() && *ty != Some(2) && *ty != Some(11) {
            assert_eq!(resp["seid"].as_u64(), *seid, "{c}");
        }
        assert_eq!(c["heartbeat_ok"], true, "{c}");
        assert_eq!(c["prior_modified"], true, "{c}");
        assert_eq!(c["forwarding"], true, "{c}");
        if let Some(k) = kind {
            assert_eq!(c["decode_errors"][k].as_f64(), Some(1.0), "{c}");
        } else {
            assert!(
                c["decode_errors"].as_object().unwrap().is_empty(),
                "no decode error: {c}"
            );
        }
    }
    // Nothing was installed by the refused establishments: prior + unknown-IE session only.
    let sdf = cases
        .iter()
        .find(|c| c["name"] == "unparsable_sdf_filter")
        .unwrap();
    assert_eq!(sdf["pfcp_sessions"].as_f64(), Some(2.0), "{sdf}");
    assert_eq!(sdf["response"]["fseid"], false);
    // Issue 14 item 6 with Scapy's bytes. A Create URR with a 2 s Time Quota and TIMQU is
    // accepted; QAURR with a Query URR Reference reports that URR at once (IMMER), with the
    // reference; 2 s after the establishment the UPF reports TIMQU for it.
    let g = &r["gaps"];
    assert_eq!(g["establishment"]["cause"], 1, "{g}");
    assert_eq!(g["qaurr"]["cause"], 1, "{g}");
    assert_eq!(
        g["qaurr_reports"],
        serde_json::json!([{"urr": 1, "immer": true, "reference": 0x51AB}]),
        "{g}"
    );
    let timqu = g["reports"].as_array().unwrap().iter().any(|rep| {
        rep[0] == 0x9400
            && rep[1]
                .as_array()
                .unwrap()
                .iter()
                .any(|u| u[0] == 1 && u[1].as_array().unwrap().contains(&"TIMQU".into()))
    });
    assert!(timqu, "a TIMQU report for URR 1 of CP SEID 0x9400: {g}");
    assert_eq!(g["deleted"], true, "{g}");
    // Path supervision (TS 29.281 7.2.1, TS 29.244 6.2.9): the pcap gNB 192.0.2.77 of the
    // sessions never answers the Echo Requests (every 2 s, one retransmission after 1 s), so
    // its path fails and the SMF gets a Node Report Request (UPFR) naming it.
    let upfr = g["node_reports"].as_array().unwrap().iter().any(|n| {
        n["type_upfr"] == 1 && n["upfr"].as_array().unwrap().contains(&"192.0.2.77".into())
    });
    assert!(upfr, "a UPFR Node Report naming 192.0.2.77: {g}");
    let (_, s) = d.stop();
    // The Echo Requests on N3, as tshark reads the daemon's output: to the gNB, from our N3
    // address, sequence numbers counting up.
    if peregrine_testkit::tools::tool_present("tshark", &["-v"]) {
        let pcap = dir.path().join("n3-tx.pcap");
        let out = peregrine_testkit::tools::run(&[
            "tshark",
            "-r",
            pcap.to_str().unwrap(),
            "-Y",
            "gtp.message == 1",
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "gtp.seq_number",
        ])
        .unwrap();
        let echoes: Vec<&str> = out.lines().filter(|l| l.contains("192.0.2.77")).collect();
        assert!(echoes.len() >= 2, "Echo Requests to the gNB on N3: {out}");
        assert!(echoes.iter().all(|l| l.starts_with("192.0.2.1\t")), "{out}");
    } else {
        assert!(!in_ci(), "tshark is required in CI");
    }
    assert_eq!(
        s["upf"]["sessions"].as_u64(),
        Some(4 + 1),
        "static + the prior session"
    );
}
