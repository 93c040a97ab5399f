//! An N4 node (`peregrine_n4::Node`) as the tests drive it: its configuration, an
//! association and standard sessions established, its outputs parsed.

use std::time::Duration;

use super::requests::*;
use peregrine_n4::{Event, Node, NodeConfig, Output};
use peregrine_pfcp::ie::{Grouped, NodeId};
use peregrine_pfcp::message::Body;
use peregrine_pfcp::Message;

pub fn config() -> NodeConfig {
    let mut c = NodeConfig::new(NodeId::Ipv4(UPF), RTS, Some(N3));
    c.max_sessions = 5000;
    c.heartbeat_interval = Duration::from_secs(10);
    c.heartbeat_retries = 3;
    c
}

pub fn node() -> Node {
    Node::new(config())
}

/// The single datagram sent, parsed.
pub fn sent(out: &[Output]) -> Message {
    let v: Vec<&Vec<u8>> = out
        .iter()
        .filter_map(|o| match o {
            Output::Send { bytes, .. } => Some(bytes),
            _ => None,
        })
        .collect();
    assert_eq!(v.len(), 1, "{out:?}");
    Message::parse(v[0]).unwrap()
}

pub fn sent_bytes(out: &[Output]) -> Vec<u8> {
    out.iter()
        .find_map(|o| match o {
            Output::Send { bytes, .. } => Some(bytes.clone()),
            _ => None,
        })
        .expect("a datagram")
}

pub fn events(out: &[Output]) -> Vec<Event> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// (cause, offending IE, header SEID, up F-SEID, created PDRs) of a session response.
#[allow(missing_debug_implementations)]
pub struct SessResp {
    pub cause: u8,
    pub offending: Option<u16>,
    pub hdr_seid: Option<u64>,
    pub up_seid: Option<u64>,
    pub created: Vec<Grouped>,
    pub msg_type: u8,
}

pub fn sess_resp(out: &[Output]) -> SessResp {
    let m = sent(out);
    let msg_type = m.body.msg_type();
    match m.body {
        Body::SessionEstablishmentResponse(r) => SessResp {
            cause: r.cause,
            offending: r.offending_ie,
            hdr_seid: m.seid,
            up_seid: r.up_f_seid.map(|f| f.seid),
            created: r.created_pdr,
            msg_type,
        },
        Body::SessionModificationResponse(r) | Body::SessionDeletionResponse(r) => SessResp {
            cause: r.cause,
            offending: r.offending_ie,
            hdr_seid: m.seid,
            up_seid: None,
            created: r.created_pdr,
            msg_type,
        },
        b => panic!("not a session response: {b:?}"),
    }
}

/// Node with an association with [`smf`] established at time 0.
pub fn associated() -> Node {
    let mut n = node();
    n.handle(0, smf(), &setup_req(1, 1000));
    n
}

/// Establish the standard session with `cp_seid`; returns our SEID.
pub fn establish(n: &mut Node, now: u64, seq: u32, cp_seid: u64) -> u64 {
    let out = n.handle(now, smf(), &est_bytes(seq, est(cp_seid)));
    let r = sess_resp(&out);
    assert_eq!(r.cause, 1, "offending {:?}", r.offending);
    r.up_seid.unwrap()
}
