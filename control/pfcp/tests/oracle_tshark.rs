//! Oracle test: our emitted messages, framed as Ethernet/IPv4/UDP 8805 in a pcap, must be
//! decoded by Wireshark's PFCP dissector (tshark -T json) with our values and without
//! malformed-packet or error-severity expert items. Skipped when tshark is missing, unless
//! `CI` is set.

use peregrine_pfcp::Message;
use peregrine_testkit::pcap::pcap;
use peregrine_testkit::pfcp::samples as common;
use peregrine_testkit::tshark::{flatten, has, pfcp_frame as frame, tshark_json};
use std::collections::BTreeMap;

#[test]
fn tshark_decodes_our_messages() {
    let msgs: Vec<Message> = common::all();
    let frames: Vec<Vec<u8>> = msgs.iter().map(|m| frame(&m.to_vec().unwrap())).collect();
    let path = std::env::temp_dir().join(format!("peregrine-pfcp-{}.pcap", std::process::id()));
    std::fs::write(&path, pcap(&frames)).unwrap();
    let out = tshark_json(&path);
    let _ = std::fs::remove_file(&path);
    let Some(out) = out else { return };
    let pkts = out.as_array().unwrap();
    assert_eq!(pkts.len(), msgs.len());
    for (m, pkt) in msgs.iter().zip(pkts) {
        let mut f = BTreeMap::new();
        flatten(&pkt["_source"]["layers"], &mut f);
        let name = format!("{:?}", m.body).chars().take(40).collect::<String>();
        if std::env::var_os("PFCP_DUMP").is_some() {
            eprintln!("{name}: {f:#?}");
        }
        assert!(
            !f.contains_key("_ws.malformed"),
            "{name}: malformed: {f:#?}"
        );
        if let Some(sev) = f.get("_ws.expert.severity") {
            // 0x800000 = error (PI_ERROR); warnings are allowed.
            assert!(
                !sev.iter().any(|s| s == "8388608"),
                "{name}: expert error: {:?}",
                f.get("_ws.expert.message")
            );
        }
        assert!(
            has(&f, "pfcp.msg_type", &m.body.msg_type().to_string()),
            "{name}: {f:#?}"
        );
        assert!(has(&f, "pfcp.seqno", &m.seq.to_string()), "{name}: {f:#?}");
        check_values(m, &f, &name);
    }
}

/// Spot-check values of our samples against tshark's field values.
fn check_values(m: &Message, f: &BTreeMap<String, Vec<String>>, name: &str) {
    use peregrine_pfcp::ie::Ie;
    if let Some(seid) = m.seid {
        assert!(
            has(f, "pfcp.seid", &format!("0x{seid:016x}")),
            "{name}: seid {f:#?}"
        );
    }
    let mut stack = m.body.to_ies();
    while let Some(ie) = stack.pop() {
        let ok = match &ie {
            Ie::Grouped(g) => {
                stack.extend(g.ies.iter().cloned());
                true
            }
            Ie::Cause(c) => has(f, "pfcp.cause", &c.to_string()),
            Ie::PdrId(x) => has(f, "pfcp.pdr_id", &x.to_string()),
            Ie::FarId(x) => has(f, "pfcp.far_id", &x.to_string()),
            Ie::UrrId(x) => has(f, "pfcp.urr_id", &x.to_string()),
            Ie::QerId(x) => has(f, "pfcp.qer_id", &x.to_string()),
            Ie::Precedence(x) => has(f, "pfcp.precedence", &x.to_string()),
            Ie::Qfi(x) => has(f, "pfcp.qfi_value", &format!("0x{x:02x}")),
            Ie::NodeId(peregrine_pfcp::ie::NodeId::Ipv4(a)) => {
                has(f, "pfcp.node_id_ipv4", &a.to_string())
            }
            Ie::FSeid(s) => has(f, "pfcp.seid", &format!("0x{:016x}", s.seid)),
            Ie::UrSeqn(x) => has(f, "pfcp.ur_seqn", &x.to_string()),
            Ie::OffendingIe(x) => has(f, "pfcp.offending_ie", &x.to_string()),
            _ => true,
        };
        assert!(ok, "{name}: {ie:?} not found in tshark output {f:#?}");
    }
}
