//! Tests of the INT manager's request API (Miranda et al., III-B, Listing 1); the namespace
//! table (Listing 2) is in `namespace_table.rs`.

use peregrine_int::namespace::{
    NamespaceTable, TableConfig, TableError, DEFAULT_RESEND_INTERVAL_NS, MAX_HOP_OVERRIDES,
};
use peregrine_int::request::{
    Flags, Mode, ModeKind, ModifyFields, Protocol, Reply, ReplyBody, Request, RequestError, Rule,
    TraceType, MAX_DEPTH, MAX_OPTION_PAYLOAD, MAX_PAYLOAD,
};
use peregrine_int_manager::codec::{decode_cbor, decode_json, ReplyCodec, RequestJson, RuleCbor};
use peregrine_testkit::rng::{self, Mutations};

/// The seed's Listing 1 ("INT Request message format"), verbatim modulo OCR damage, is a template:
///
/// ```text
/// "int_request": {
///   "ns_id": <number, namespace id>,
///   "app_id": <number, application id>,
///   "src_ip": <string, IPv6 source address>,
///   "dst_ip": <string, IPv6 destination address>,
///   "src_port": <number, source port, 0 for any>,
///   "dst_port": <number, dest. port, 0 for any>,
///   "protocol": <string, TCP/UDP/ICMP>,
///   "trace_type": <string, trace type in hex>,
///   "mode": <string, count/frequency/probability>,
///   "mode_setting": <number, value for mode> }
/// ```
///
/// The seed gives no filled-in example, so this is Listing 1 with the placeholders filled from the
/// seed's own experiments: trace type 0x7000E000 (IV-A), UDP (MGEN), one INT packet every 100
/// packets (V-C "once every 100 packets").
const LISTING1_EXAMPLE: &str = r#"{"int_request": {
    "ns_id": 1,
    "app_id": 10,
    "src_ip": "2001:db8:1::10",
    "dst_ip": "2001:db8:2::20",
    "src_port": 0,
    "dst_port": 5001,
    "protocol": "UDP",
    "trace_type": "0x7000E000",
    "mode": "count",
    "mode_setting": 100 }}"#;

fn listing1_rule() -> Rule {
    Rule {
        ns_id: 1,
        app_id: 10,
        src_ip: "2001:db8:1::10".parse().unwrap(),
        dst_ip: "2001:db8:2::20".parse().unwrap(),
        src_port: 0,
        dst_port: 5001,
        protocol: Protocol::Udp,
        trace_type: TraceType(0x7000_E000),
        mode: Mode::Count(100),
        flags: Flags::default(),
    }
}

fn rule(ns: u16) -> Rule {
    Rule {
        ns_id: ns,
        ..listing1_rule()
    }
}

/// Listing 1 example with one field replaced (raw JSON value text) or removed (`None`).
fn with_field(field: &str, value: Option<&str>) -> String {
    let mut fields = vec![
        ("ns_id", "1"),
        ("app_id", "10"),
        ("src_ip", "\"2001:db8:1::10\""),
        ("dst_ip", "\"2001:db8:2::20\""),
        ("src_port", "0"),
        ("dst_port", "5001"),
        ("protocol", "\"UDP\""),
        ("trace_type", "\"0x7000E000\""),
        ("mode", "\"count\""),
        ("mode_setting", "100"),
    ];
    match value {
        Some(v) => match fields.iter_mut().find(|f| f.0 == field) {
            Some(f) => f.1 = v,
            None => fields.push((field, v)),
        },
        None => fields.retain(|f| f.0 != field),
    }
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    format!("{{\"int_request\": {{{}}}}}", body.join(", "))
}

fn err(field: &str, value: Option<&str>) -> RequestError {
    decode_json(with_field(field, value).as_bytes()).expect_err("should be rejected")
}

#[test]
fn listing1_example_decodes() {
    let r = decode_json(LISTING1_EXAMPLE.as_bytes()).unwrap();
    assert_eq!(r, Request::Install(listing1_rule()));
    let Request::Install(rule) = r else { panic!() };
    assert_eq!(rule.trace_type.e2e(), 0x7000);
    assert_eq!(rule.trace_type.hbh(), 0xE000);
    assert_eq!(rule.protocol.number(), 17);
}

#[test]
fn listing1_example_via_cbor_is_the_same_rule() {
    let r = decode_json(LISTING1_EXAMPLE.as_bytes()).unwrap();
    assert_eq!(decode_cbor(&r.to_cbor()).unwrap(), r);
}

#[test]
fn json_uses_listing1_field_names() {
    let json = String::from_utf8(Request::Install(listing1_rule()).to_json()).unwrap();
    for f in [
        "\"int_request\"",
        "\"ns_id\"",
        "\"app_id\"",
        "\"src_ip\"",
        "\"dst_ip\"",
        "\"src_port\"",
        "\"dst_port\"",
        "\"protocol\"",
        "\"trace_type\":\"0x7000E000\"",
        "\"mode\":\"count\"",
        "\"mode_setting\":100",
    ] {
        assert!(json.contains(f), "{f} missing in {json}");
    }
    // Default flags are left out.
    assert!(!json.contains("transmit_report"));
}

fn sample_requests() -> Vec<Request> {
    let mut all_flags = rule(2);
    all_flags.flags = Flags {
        transmit_report: false,
        piggyback_report: true,
        extract_report: true,
        hop_enabled: false,
    };
    all_flags.mode = Mode::Probability(12.5);
    all_flags.protocol = Protocol::Icmp;
    all_flags.dst_port = 0;
    let mut freq = rule(3);
    freq.mode = Mode::Frequency(250);
    freq.protocol = Protocol::Tcp;
    vec![
        Request::Install(listing1_rule()),
        Request::Install(all_flags),
        Request::Install(freq),
        Request::Modify {
            namespace: 1,
            changes: ModifyFields {
                mode: Some(ModeKind::Probability),
                mode_setting: Some(0.5),
                trace_type: Some(TraceType(0xF000_0000)),
                transmit_report: Some(false),
                piggyback_report: Some(true),
                extract_report: Some(false),
                hop_enabled: Some(false),
                enable_hops: vec![2, 7],
                disable_hops: vec![3],
            },
        },
        Request::Modify {
            namespace: 65535,
            changes: ModifyFields {
                mode_setting: Some(10.0),
                ..Default::default()
            },
        },
        Request::Remove { namespace: 9 },
        Request::List,
        Request::Stats { namespace: None },
        Request::Stats { namespace: Some(4) },
    ]
}

#[test]
fn json_and_cbor_round_trips() {
    for r in sample_requests() {
        assert_eq!(decode_json(&r.to_json()).unwrap(), r, "json {r:?}");
        assert_eq!(decode_cbor(&r.to_cbor()).unwrap(), r, "cbor {r:?}");
    }
}

#[test]
fn other_request_shapes() {
    assert_eq!(decode_json(br#"{"int_list":{}}"#).unwrap(), Request::List);
    assert_eq!(
        decode_json(br#"{"int_stats":{}}"#).unwrap(),
        Request::Stats { namespace: None }
    );
    assert_eq!(
        decode_json(br#"{"int_remove":{"ns_id":5}}"#).unwrap(),
        Request::Remove { namespace: 5 }
    );
    let m =
        decode_json(br#"{"int_modify":{"ns_id":5,"hop_enabled":false,"disable_hops":[4,4,2]}}"#)
            .unwrap();
    assert_eq!(
        m,
        Request::Modify {
            namespace: 5,
            changes: ModifyFields {
                hop_enabled: Some(false),
                disable_hops: vec![2, 4],
                ..Default::default()
            }
        }
    );
}

#[test]
fn lenient_where_documented() {
    // Protocol case-insensitive, trace type without 0x, integral float settings.
    let r = decode_json(with_field("protocol", Some("\"udp\"")).as_bytes()).unwrap();
    assert_eq!(r, Request::Install(listing1_rule()));
    let r = decode_json(with_field("trace_type", Some("\"7000e000\"")).as_bytes()).unwrap();
    assert_eq!(r, Request::Install(listing1_rule()));
    let r = decode_json(with_field("mode_setting", Some("100.0")).as_bytes()).unwrap();
    assert_eq!(r, Request::Install(listing1_rule()));
}

#[test]
fn validation_errors_name_field_and_reason() {
    use RequestError as E;
    assert_eq!(
        err("mode", Some("\"sometimes\"")),
        E::UnknownMode {
            value: "sometimes".into()
        }
    );
    let prob = |v: &str| {
        let s = with_field("mode", Some("\"probability\""))
            .replace("\"mode_setting\": 100", &format!("\"mode_setting\": {v}"));
        decode_json(s.as_bytes())
    };
    assert!(prob("100").is_ok());
    assert!(prob("0.01").is_ok());
    assert_eq!(
        prob("100.5"),
        Err(E::ProbabilityOutOfRange { value: 100.5 })
    );
    assert_eq!(prob("-1"), Err(E::ProbabilityOutOfRange { value: -1.0 }));
    assert_eq!(prob("0"), Err(E::ProbabilityOutOfRange { value: 0.0 }));
    assert_eq!(err("mode_setting", Some("0")), E::ZeroPacketCount);
    assert!(matches!(
        err("mode_setting", Some("2.5")),
        E::BadModeSetting { mode: "count", .. }
    ));
    assert!(matches!(
        err("mode_setting", Some("4294967296")),
        E::BadModeSetting { mode: "count", .. }
    ));
    let freq = |v: &str| {
        let s = with_field("mode", Some("\"frequency\""))
            .replace("\"mode_setting\": 100", &format!("\"mode_setting\": {v}"));
        decode_json(s.as_bytes())
    };
    assert!(freq("1").is_ok());
    assert_eq!(freq("0"), Err(E::FrequencyOutOfRange { value: 0.0 }));
    assert_eq!(freq("1e12"), Err(E::FrequencyOutOfRange { value: 1e12 }));
    assert_eq!(
        err("src_ip", Some("\"10.0.0.1\"")),
        E::BadIpAddress {
            field: "src_ip",
            value: "10.0.0.1".into()
        }
    );
    assert!(matches!(
        err("dst_ip", Some("\"2001:db8::zz\"")),
        E::BadIpAddress {
            field: "dst_ip",
            ..
        }
    ));
    assert_eq!(
        err("src_port", Some("65536")),
        E::PortOutOfRange {
            field: "src_port",
            value: "65536".into()
        }
    );
    assert!(matches!(
        err("dst_port", Some("-1")),
        E::PortOutOfRange {
            field: "dst_port",
            ..
        }
    ));
    assert_eq!(
        err("ns_id", Some("0")),
        E::NamespaceOutOfRange { value: "0".into() }
    );
    assert_eq!(
        err("ns_id", Some("65536")),
        E::NamespaceOutOfRange {
            value: "65536".into()
        }
    );
    assert!(matches!(
        err("app_id", Some("4294967296")),
        E::AppIdOutOfRange { .. }
    ));
    assert_eq!(
        err("trace_type", Some("\"0x7000E001\"")),
        E::UnknownTraceTypeBits { unknown: 1 }
    );
    assert_eq!(
        err("trace_type", Some("\"0x08000000\"")),
        E::UnknownTraceTypeBits {
            unknown: 0x0800_0000
        }
    );
    for bad in ["\"\"", "\"0x\"", "\"0x1F000E000\"", "\"7000E00G\"", "\"0\""] {
        assert!(
            matches!(err("trace_type", Some(bad)), E::BadTraceType { .. }),
            "{bad}"
        );
    }
    assert_eq!(
        err("protocol", Some("\"sctp\"")),
        E::UnknownProtocol {
            value: "sctp".into()
        }
    );
    let icmp = decode_json(with_field("protocol", Some("\"ICMP\"")).as_bytes());
    assert_eq!(icmp, Err(E::PortWithIcmp { field: "dst_port" }));
    for f in [
        "ns_id",
        "app_id",
        "src_ip",
        "dst_ip",
        "src_port",
        "dst_port",
        "protocol",
        "trace_type",
        "mode",
        "mode_setting",
    ] {
        assert_eq!(err(f, None), E::MissingField { field: leak(f) });
    }
    assert_eq!(
        err("src_port", Some("\"80\"")),
        E::WrongType {
            field: "src_port",
            expected: "number",
            got: "string"
        }
    );
    assert_eq!(
        err("src_ip", Some("1")),
        E::WrongType {
            field: "src_ip",
            expected: "string",
            got: "number"
        }
    );
    assert_eq!(
        err("transmit_report", Some("1")),
        E::WrongType {
            field: "transmit_report",
            expected: "boolean",
            got: "number"
        }
    );
    // null is treated as absent.
    assert_eq!(err("mode", Some("null")), E::MissingField { field: "mode" });
    // Unknown fields (serde deny_unknown_fields) and unknown requests.
    let e = err("colour", Some("\"blue\""));
    assert!(
        matches!(&e, E::Malformed(m) if m.contains("unknown field `colour`")),
        "{e}"
    );
    let e = decode_json(br#"{"int_explode":{}}"#).unwrap_err();
    assert!(
        matches!(&e, E::Malformed(m) if m.contains("unknown variant")),
        "{e}"
    );
    let e = decode_json(br#"{"int_list":{"x":1}}"#).unwrap_err();
    assert!(
        matches!(&e, E::Malformed(m) if m.contains("unknown field")),
        "{e}"
    );
    // Duplicate field.
    let e = decode_json(br#"{"int_remove":{"ns_id":1,"ns_id":2}}"#).unwrap_err();
    assert!(
        matches!(&e, E::Malformed(m) if m.contains("duplicate field")),
        "{e}"
    );
    // Modify specifics.
    assert_eq!(
        decode_json(br#"{"int_modify":{"ns_id":3}}"#),
        Err(E::EmptyModify { ns_id: 3 })
    );
    assert_eq!(
        decode_json(br#"{"int_modify":{"ns_id":3,"mode":"frequency","mode_setting":0}}"#),
        Err(E::FrequencyOutOfRange { value: 0.0 })
    );
    assert!(matches!(
        decode_json(br#"{"int_modify":{"ns_id":3,"mode_setting":-5}}"#),
        Err(E::BadModeSetting { .. })
    ));
    assert!(matches!(
        decode_json(br#"{"int_modify":{"ns_id":3,"enable_hops":[1],"disable_hops":[1]}}"#),
        Err(E::BadHopList {
            field: "disable_hops",
            ..
        })
    ));
    assert!(matches!(
        decode_json(br#"{"int_modify":{"ns_id":3,"enable_hops":[0]}}"#),
        Err(E::BadHopList {
            field: "enable_hops",
            ..
        })
    ));
    assert_eq!(
        decode_json(br#"{"int_modify":{"ns_id":3,"enable_hops":5}}"#),
        Err(E::WrongType {
            field: "enable_hops",
            expected: "array",
            got: "number"
        })
    );
    // Error messages name the field.
    assert!(err("src_port", Some("70000"))
        .to_string()
        .contains("`src_port`"));
    assert!(err("mode_setting", Some("0"))
        .to_string()
        .contains("`mode_setting`"));
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

#[test]
fn size_and_depth_limits() {
    let big = format!("{{\"int_list\":{{}}}}{}", " ".repeat(MAX_PAYLOAD));
    assert!(matches!(
        decode_json(big.as_bytes()),
        Err(RequestError::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        decode_cbor(&vec![0u8; MAX_PAYLOAD + 1]),
        Err(RequestError::PayloadTooLarge { .. })
    ));
    let deep = format!(
        "{{\"int_modify\":{{\"ns_id\":1,\"enable_hops\":{}1{}}}}}",
        "[".repeat(MAX_DEPTH),
        "]".repeat(MAX_DEPTH)
    );
    assert_eq!(
        decode_json(deep.as_bytes()),
        Err(RequestError::NestingTooDeep { max: MAX_DEPTH })
    );
    let very_deep = "[".repeat(100_000);
    assert!(decode_json(very_deep.as_bytes()).is_err());
    // CBOR: 0x81 = array of one element, nested, where a value is expected. (Elsewhere the typed
    // decoder rejects the array by type before recursing.)
    let mut cbor = vec![0xA1, 0x6A];
    cbor.extend_from_slice(b"int_remove");
    cbor.extend_from_slice(&[0xA1, 0x65]);
    cbor.extend_from_slice(b"ns_id");
    cbor.extend(std::iter::repeat_n(0x81, MAX_PAYLOAD - 20));
    cbor.push(0x00);
    assert_eq!(
        decode_cbor(&cbor),
        Err(RequestError::NestingTooDeep { max: MAX_DEPTH })
    );
    // Huge arrays: a hop list longer than the cap, and a CBOR array header claiming 2^32 items.
    let many: Vec<String> = (1..=1000).map(|n| n.to_string()).collect();
    let s = format!(
        "{{\"int_modify\":{{\"ns_id\":1,\"enable_hops\":[{}]}}}}",
        many.join(",")
    );
    assert!(matches!(
        decode_json(s.as_bytes()),
        Err(RequestError::BadHopList { .. })
    ));
    let mut claim = Request::Modify {
        namespace: 1,
        changes: ModifyFields {
            enable_hops: vec![1],
            ..Default::default()
        },
    }
    .to_cbor();
    let pos = claim.iter().position(|&b| b == 0x81).unwrap();
    claim.splice(pos..pos + 1, [0x9A, 0xFF, 0xFF, 0xFF, 0xFF]);
    assert!(decode_cbor(&claim).is_err());
}

#[test]
fn hostile_inputs_are_errors() {
    let json = LISTING1_EXAMPLE.as_bytes();
    for n in 0..json.len() {
        assert!(decode_json(&json[..n]).is_err(), "json prefix {n}");
    }
    let cbor = Request::Install(listing1_rule()).to_cbor();
    for n in 0..cbor.len() {
        assert!(decode_cbor(&cbor[..n]).is_err(), "cbor prefix {n}");
    }
    let mut trailing = cbor.clone();
    trailing.push(0);
    assert!(decode_cbor(&trailing).is_err());
    for bad in [
        &b"null"[..],
        b"[]",
        b"1",
        b"\"int_list\"",
        b"{}",
        b"{\"int_list\":{},\"int_stats\":{}}",
        b"{\"int_request\":[]}",
        b"{\"int_request\":null}",
        b"\xff\xfe",
        b"{\"int_remove\":{\"ns_id\":1e400}}",
        b"{\"int_remove\":{\"ns_id\":18446744073709551616}}",
        b"{\"int_remove\":{\"ns_id\":-9223372036854775809}}",
        b"{\"int_remove\":{\"ns_id\":\"\xff\"}}",
    ] {
        assert!(
            decode_json(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
        assert!(decode_cbor(bad).is_err());
    }
    // CBOR oddities: indefinite-length, tags, byte strings, floats16, huge string claim.
    for bad in [
        &[
            0xA1, 0x68, b'i', b'n', b't', b'_', b'l', b'i', b's', b't', 0xBF,
        ][..],
        &[0xC0, 0x00],
        &[0x5B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
        &[0x7B, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00],
        &[0xF9, 0x7C, 0x00],
        &[
            0xA1, 0x6A, b'i', b'n', b't', b'_', b'r', b'e', b'm', b'o', b'v', b'e', 0xA1, 0x65,
            b'n', b's', b'_', b'i', b'd', 0x42, 1, 2,
        ],
    ] {
        assert!(decode_cbor(bad).is_err(), "{bad:x?}");
    }
}

/// Byte-level mutations of `input` (the test kit's, [`Mutations::basic`]), a copied chunk
/// or a `dict` token inserted; 1 to 4 of them.
fn mutate(rng: &mut Mutations, input: &[u8], dict: &[&[u8]]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        let kind = rng.below(7);
        if rng.basic(&mut v, kind) {
            continue;
        }
        match kind {
            5 if len > 0 => {
                let a = rng.below(len);
                let b = a + rng.below(len - a + 1);
                let chunk = v[a..b].to_vec();
                let i = rng.below(len + 1);
                v.splice(i..i, chunk);
            }
            _ => {
                let d = dict[rng.below(dict.len())];
                let i = rng.below(len + 1);
                v.splice(i..i, d.iter().copied());
            }
        }
    }
    v
}

#[test]
fn mutation_loop_never_panics() {
    let reqs = sample_requests();
    let jsons: Vec<Vec<u8>> = reqs.iter().map(|r| r.to_json()).collect();
    let cbors: Vec<Vec<u8>> = reqs.iter().map(|r| r.to_cbor()).collect();
    let jdict: &[&[u8]] = &[
        b"[",
        b"{",
        b"\"",
        b"-",
        b"0",
        b"1e9",
        b"65536",
        b"null",
        b"true",
        b",",
        b":",
        b"\\u0000",
        b"\"probability\"",
        b"\"frequency\"",
        b"\"0xFFFFFFFF\"",
    ];
    let cdict: &[&[u8]] = &[
        &[0x81],
        &[0xA1],
        &[0x9F],
        &[0xBF],
        &[0xFF],
        &[0xF6],
        &[0xF5],
        &[0x19, 0xFF, 0xFF],
        &[0x1B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
        &[0x3A, 0, 0, 0, 1],
        &[0xFB, 0x7F, 0xF8, 0, 0, 0, 0, 0, 0],
        &[0xC1],
        &[0x40],
        &[0x60],
    ];
    let mut rng = Mutations(rng::seeded(0x0003_6169_2813_6B05));
    let (mut ok_json, mut ok_cbor) = (0, 0);
    for i in 0..50_000 {
        let src = &jsons[i % jsons.len()];
        let m = mutate(&mut rng, src, jdict);
        if let Ok(r) = decode_json(&m) {
            ok_json += 1;
            assert_eq!(decode_json(&r.to_json()).unwrap(), r);
        }
        let src = &cbors[i % cbors.len()];
        let m = mutate(&mut rng, src, cdict);
        if let Ok(r) = decode_cbor(&m) {
            ok_cbor += 1;
            assert_eq!(decode_cbor(&r.to_cbor()).unwrap(), r);
        }
    }
    // Some mutants stay valid (e.g. whitespace, changed numbers) -- the loop exercises both paths.
    assert!(ok_json > 0 && ok_cbor > 0, "{ok_json} {ok_cbor}");
}

#[test]
fn in_band_option_payload() {
    let r = listing1_rule();
    let p = r.to_option_payload().unwrap();
    assert!(p.len() <= MAX_OPTION_PAYLOAD);
    assert_eq!(p, r.to_cbor());
    assert_eq!(Rule::from_cbor(&p).unwrap(), r);
    // It is the CBOR form of the Listing 1 message.
    assert_eq!(decode_cbor(&p).unwrap(), Request::Install(r.clone()));
    // Longest addresses with default flags still fit ...
    let mut long = r.clone();
    long.src_ip = "1111:2222:3333:4444:5555:6666:7777:8888".parse().unwrap();
    long.dst_ip = long.src_ip;
    long.mode = Mode::Probability(33.333333333333336);
    let p = long.to_option_payload().unwrap();
    assert_eq!(Rule::from_cbor(&p).unwrap(), long);
    // ... but not with every flag at its non-default value.
    long.flags = Flags {
        transmit_report: false,
        piggyback_report: true,
        extract_report: true,
        hop_enabled: false,
    };
    let e = long.to_option_payload().unwrap_err();
    assert!(
        matches!(e, RequestError::OptionTooLarge { len, max: MAX_OPTION_PAYLOAD } if len > MAX_OPTION_PAYLOAD),
        "{e}"
    );
    assert!(matches!(
        Rule::from_cbor(&long.to_cbor()),
        Err(RequestError::OptionTooLarge { .. })
    ));
    assert_eq!(
        Rule::from_cbor(&Request::List.to_cbor()),
        Err(RequestError::NotAnInstall)
    );
}

#[test]
fn replies_encode_and_decode() {
    let mut t = NamespaceTable::default();
    t.install(listing1_rule()).unwrap();
    let replies = vec![
        Reply::Ok(ReplyBody::Installed { ns_id: 1 }),
        Reply::Ok(ReplyBody::List { rules: t.list() }),
        Reply::Ok(ReplyBody::Stats {
            stats: t.stats(None).unwrap(),
        }),
        RequestError::ZeroPacketCount.to_reply(),
        Reply::error(404, "namespace 9 is not installed"),
    ];
    for r in replies {
        assert_eq!(Reply::from_json(&r.to_json()).unwrap(), r);
        assert_eq!(Reply::from_cbor(&r.to_cbor()).unwrap(), r);
    }
    let e = String::from_utf8(RequestError::ZeroPacketCount.to_reply().to_json()).unwrap();
    assert!(
        e.contains("\"code\":400") && e.contains("mode_setting"),
        "{e}"
    );
}

/// Found by the `request_cbor` fuzz target: a probability setting needing all 53 mantissa bits
/// changed by one ulp through JSON until serde_json's `float_roundtrip` feature was enabled.
#[test]
fn fuzz_regression_probability_json_round_trip() {
    let mut r = listing1_rule();
    r.mode = Mode::Probability(f64::from_bits(0x4029_a1f8_23a0_0000));
    let req = Request::Install(r);
    assert_eq!(decode_json(&req.to_json()).unwrap(), req);
    assert_eq!(decode_cbor(&req.to_cbor()).unwrap(), req);
    for bits in [
        0x4029_a1f8_23a0_0001u64,
        0x3FB9_9999_9999_999A,
        0x4058_FFFF_FFFF_FFFF,
    ] {
        let mut r = listing1_rule();
        r.mode = Mode::Probability(f64::from_bits(bits));
        let req = Request::Install(r);
        assert_eq!(decode_json(&req.to_json()).unwrap(), req, "{bits:#x}");
    }
}

mod namespace_table;
