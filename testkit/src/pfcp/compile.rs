//! PFCP builders with every knob, for the rule compiler's tests (TS 29.244 section 7.5.2):
//! PDRs with a chosen precedence, F-TEID (or CHOOSE), outer header removal and extra PDI IEs;
//! FARs with any apply action or outer header; QERs with gates, MBR and QFI; a dual-stack N3
//! node associated with [`smf`], and establishment / modification / deletion round trips
//! that return the node's answer. The fixed-shape requests are in [`requests`](super::requests).

use std::net::{Ipv4Addr, Ipv6Addr};

pub use super::requests::{far_n6, g, msg, smf, GNB, N3, UPF};
use peregrine_n4::{Node, NodeConfig, Output, Session};
use peregrine_pfcp::ie::{
    apply_action, ie_type as t, measurement_method, ohc, BitRate, Bitmap, FSeid, FTeid, GateStatus,
    Grouped, Ie, NodeId, OuterHeaderCreation, OuterHeaderRemoval, SdfFilter, UeIpAddress,
};
use peregrine_pfcp::message::{
    AssociationRequest, Body, SessionDeletionRequest, SessionEstablishmentRequest,
    SessionModificationRequest,
};
use peregrine_pfcp::Message;

pub const N3_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1);
pub const GNB_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 0x10);

/// An N4 node with an association with [`smf`].
pub fn node() -> Node {
    let mut c = NodeConfig::new(NodeId::Ipv4(UPF), 0xe6f0_1234, Some(N3));
    c.n3_addresses.1 = Some(N3_V6);
    let mut n = Node::new(c);
    let setup = msg(
        1,
        None,
        Body::AssociationSetupRequest(AssociationRequest {
            node_id: NodeId::fqdn("smf.example"),
            recovery_time_stamp: Some(1000),
            up_function_features: None,
            extra: vec![],
        }),
    );
    n.handle(0, smf(), &setup);
    n
}

pub fn sdf(s: &str) -> Ie {
    Ie::SdfFilter(SdfFilter {
        flow_description: Some(s.as_bytes().to_vec()),
        ..Default::default()
    })
}

/// Uplink PDR: access, F-TEID (CHOOSE v4 when `teid` is None), OHR `ohr`, extra PDI IEs.
pub fn pdr_ul(id: u16, prec: u32, teid: Option<u32>, ohr: u8, far: u32, pdi: Vec<Ie>) -> Grouped {
    let f = match teid {
        None => FTeid::Choose {
            v4: true,
            v6: false,
            choose_id: Some(1),
        },
        Some(teid) => FTeid::Assigned {
            teid,
            ipv4: Some(N3),
            ipv6: None,
        },
    };
    let mut p = vec![Ie::SourceInterface(0), Ie::FTeid(f)];
    p.extend(pdi);
    g(
        t::CREATE_PDR,
        vec![
            Ie::PdrId(id),
            Ie::Precedence(prec),
            Ie::Grouped(g(t::PDI, p)),
            Ie::OuterHeaderRemoval(OuterHeaderRemoval {
                description: ohr,
                ext_header_deletion: None,
            }),
            Ie::FarId(far),
            Ie::QerId(1),
            Ie::UrrId(1),
        ],
    )
}

/// Downlink PDR: core, UE IPv4 `ue` (and IPv6 `ue6`), extra PDI IEs, QER 1, URR 1.
pub fn pdr_dl(
    id: u16,
    prec: u32,
    ue: Ipv4Addr,
    ue6: Option<Ipv6Addr>,
    far: u32,
    pdi: Vec<Ie>,
) -> Grouped {
    let mut p = vec![
        Ie::SourceInterface(1),
        Ie::UeIpAddress(UeIpAddress {
            sd: true,
            ipv4: Some(ue),
            ipv6: ue6,
            ..Default::default()
        }),
    ];
    p.extend(pdi);
    g(
        t::CREATE_PDR,
        vec![
            Ie::PdrId(id),
            Ie::Precedence(prec),
            Ie::Grouped(g(t::PDI, p)),
            Ie::FarId(far),
            Ie::QerId(1),
            Ie::UrrId(1),
        ],
    )
}

pub fn ohc_v4(teid: u32) -> OuterHeaderCreation {
    OuterHeaderCreation {
        description: ohc::GTPU_UDP_IPV4,
        teid: Some(teid),
        ipv4: Some(GNB),
        ..Default::default()
    }
}

pub fn far_n3(id: u32, o: OuterHeaderCreation) -> Grouped {
    g(
        t::CREATE_FAR,
        vec![
            Ie::FarId(id),
            Ie::ApplyAction(Bitmap(apply_action::FORW)),
            Ie::Grouped(g(
                t::FORWARDING_PARAMETERS,
                vec![Ie::DestinationInterface(0), Ie::OuterHeaderCreation(o)],
            )),
        ],
    )
}

pub fn far_action(id: u32, bits: u64) -> Grouped {
    g(
        t::CREATE_FAR,
        vec![Ie::FarId(id), Ie::ApplyAction(Bitmap(bits))],
    )
}

pub fn qer(id: u32, mbr: Option<(u64, u64)>, gate: (u8, u8), qfi: u8) -> Grouped {
    let mut v = vec![
        Ie::QerId(id),
        Ie::GateStatus(GateStatus {
            ul: gate.0,
            dl: gate.1,
        }),
        Ie::Qfi(qfi),
    ];
    if let Some((ul, dl)) = mbr {
        v.push(Ie::Mbr(BitRate { ul, dl }));
    }
    g(t::CREATE_QER, v)
}

pub fn urr(id: u32) -> Grouped {
    g(
        t::CREATE_URR,
        vec![
            Ie::UrrId(id),
            Ie::MeasurementMethod(Bitmap(measurement_method::VOLUM)),
            Ie::ReportingTriggers(Bitmap(0)),
        ],
    )
}

/// The usual session: UL PDR 1 (TEID or CHOOSE) -> FAR 1 (N6), DL PDR 2 for `ue` -> FAR 2
/// (N3 to [`GNB`], TEID 0x100), QER 1 (MBR 100/200 Mbit/s, QFI 9), URR 1.
pub fn est(cp_seid: u64, teid: Option<u32>, ue: Ipv4Addr) -> SessionEstablishmentRequest {
    SessionEstablishmentRequest {
        node_id: NodeId::fqdn("smf.example"),
        cp_f_seid: FSeid {
            seid: cp_seid,
            ipv4: Some(Ipv4Addr::new(10, 0, 0, 1)),
            ipv6: None,
        },
        create_pdr: vec![
            pdr_ul(
                1,
                200,
                teid,
                0,
                1,
                vec![sdf("permit out ip from any to assigned")],
            ),
            pdr_dl(2, 200, ue, None, 2, vec![]),
        ],
        create_far: vec![far_n6(1), far_n3(2, ohc_v4(0x100))],
        create_urr: vec![urr(1)],
        create_qer: vec![qer(1, Some((100_000, 200_000)), (0, 0), 9)],
        create_bar: None,
        extra: vec![],
    }
}

fn sent(out: &[Output]) -> Message {
    let b = out
        .iter()
        .find_map(|o| match o {
            Output::Send { bytes, .. } => Some(bytes),
            _ => None,
        })
        .expect("a response");
    Message::parse(b).unwrap()
}

/// Send an establishment; returns our SEID (panics unless accepted).
pub fn establish(n: &mut Node, seq: u32, r: SessionEstablishmentRequest) -> u64 {
    let out = n.handle(
        0,
        smf(),
        &msg(seq, Some(0), Body::SessionEstablishmentRequest(r)),
    );
    match sent(&out).body {
        Body::SessionEstablishmentResponse(r) => {
            assert_eq!(r.cause, 1, "offending {:?}", r.offending_ie);
            r.up_f_seid.unwrap().seid
        }
        b => panic!("{b:?}"),
    }
}

/// Send a modification; returns the cause.
pub fn modify(n: &mut Node, seq: u32, seid: u64, r: SessionModificationRequest) -> u8 {
    let out = n.handle(
        0,
        smf(),
        &msg(seq, Some(seid), Body::SessionModificationRequest(r)),
    );
    match sent(&out).body {
        Body::SessionModificationResponse(r) => r.cause,
        b => panic!("{b:?}"),
    }
}

pub fn delete(n: &mut Node, seq: u32, seid: u64) -> u8 {
    let out = n.handle(
        0,
        smf(),
        &msg(
            seq,
            Some(seid),
            Body::SessionDeletionRequest(SessionDeletionRequest::default()),
        ),
    );
    match sent(&out).body {
        Body::SessionDeletionResponse(r) => r.cause,
        b => panic!("{b:?}"),
    }
}

pub fn session(n: &Node, seid: u64) -> Session {
    n.session(seid).expect("session").clone()
}
