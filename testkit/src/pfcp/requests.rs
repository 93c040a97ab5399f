//! PFCP request builders (TS 29.244 section 7): node messages, and Session Establishment /
//! Modification / Deletion Requests with typical Create PDR / FAR / QER / URR IEs, as bytes
//! or as message structs, shared by the N4, rules, daemon tests and the UPF harness.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use peregrine_pfcp::ie::{
    apply_action, ie_type as t, measurement_method, ohc, BitRate, Bitmap, FSeid, FTeid, GateStatus,
    Grouped, Ie, NodeId, OuterHeaderCreation, OuterHeaderRemoval, SdfFilter, UeIpAddress, Volume,
};
use peregrine_pfcp::message::{
    AssociationRequest, Body, Heartbeat, SessionDeletionRequest, SessionEstablishmentRequest,
    SessionModificationRequest,
};
use peregrine_pfcp::Message;

pub const UPF: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const N3: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);
pub const GNB: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
pub const RTS: u32 = 0xe6f0_1234;
pub const SEC: u64 = 1_000_000_000;

pub fn smf() -> SocketAddr {
    "10.0.0.1:8805".parse().unwrap()
}

pub fn smf2() -> SocketAddr {
    "10.0.0.9:8805".parse().unwrap()
}

pub fn msg(seq: u32, seid: Option<u64>, body: Body) -> Vec<u8> {
    Message {
        seq,
        seid,
        priority: None,
        fo: false,
        body,
    }
    .to_vec()
    .unwrap()
}

pub fn setup_req(seq: u32, rts: u32) -> Vec<u8> {
    msg(
        seq,
        None,
        Body::AssociationSetupRequest(AssociationRequest {
            node_id: NodeId::fqdn("smf.example"),
            recovery_time_stamp: Some(rts),
            up_function_features: Some(Bitmap(0x01)),
            extra: vec![],
        }),
    )
}

pub fn assoc_req(seq: u32, release: bool) -> Vec<u8> {
    let r = AssociationRequest {
        node_id: NodeId::fqdn("smf.example"),
        recovery_time_stamp: None,
        up_function_features: None,
        extra: vec![],
    };
    msg(
        seq,
        None,
        if release {
            Body::AssociationReleaseRequest(r)
        } else {
            Body::AssociationUpdateRequest(r)
        },
    )
}

pub fn heartbeat_req(seq: u32) -> Vec<u8> {
    msg(
        seq,
        None,
        Body::HeartbeatRequest(Heartbeat {
            recovery_time_stamp: 77,
            extra: vec![],
        }),
    )
}

pub fn heartbeat_resp(seq: u32) -> Vec<u8> {
    msg(
        seq,
        None,
        Body::HeartbeatResponse(Heartbeat {
            recovery_time_stamp: 77,
            extra: vec![],
        }),
    )
}

pub fn g(ty: u16, ies: Vec<Ie>) -> Grouped {
    Grouped::new(ty, ies)
}

/// Uplink PDR: access, F-TEID CHOOSE v4 with `chid`, QER 1, URR 1, FAR `far`.
pub fn pdr_ul(id: u16, chid: Option<u8>, far: u32) -> Grouped {
    g(
        t::CREATE_PDR,
        vec![
            Ie::PdrId(id),
            Ie::Precedence(200),
            Ie::Grouped(g(
                t::PDI,
                vec![
                    Ie::SourceInterface(0),
                    Ie::FTeid(FTeid::Choose {
                        v4: true,
                        v6: false,
                        choose_id: chid,
                    }),
                    Ie::UeIpAddress(UeIpAddress {
                        ipv4: Some(Ipv4Addr::new(10, 60, 0, 1)),
                        ..Default::default()
                    }),
                    Ie::SdfFilter(SdfFilter {
                        flow_description: Some(b"permit out ip from any to assigned".to_vec()),
                        ..Default::default()
                    }),
                    Ie::Qfi(9),
                ],
            )),
            Ie::OuterHeaderRemoval(OuterHeaderRemoval {
                description: 0,
                ext_header_deletion: None,
            }),
            Ie::FarId(far),
            Ie::UrrId(1),
            Ie::QerId(1),
        ],
    )
}

/// Downlink PDR: core, UE IP destination, FAR `far`.
pub fn pdr_dl(id: u16, far: u32) -> Grouped {
    pdr_dl_for(id, 100, Ipv4Addr::new(10, 60, 0, 1), far, Some(1))
}

/// Downlink PDR `id`, precedence `prec`: core, destination UE IPv4 `ue`, FAR `far`, QER
/// `qer` if any.
pub fn pdr_dl_for(id: u16, prec: u32, ue: Ipv4Addr, far: u32, qer: Option<u32>) -> Grouped {
    let mut ies = vec![
        Ie::PdrId(id),
        Ie::Precedence(prec),
        Ie::Grouped(g(
            t::PDI,
            vec![
                Ie::SourceInterface(1),
                Ie::UeIpAddress(UeIpAddress {
                    sd: true,
                    ipv4: Some(ue),
                    ..Default::default()
                }),
            ],
        )),
        Ie::FarId(far),
    ];
    ies.extend(qer.map(Ie::QerId));
    g(t::CREATE_PDR, ies)
}

pub fn far_n6(id: u32) -> Grouped {
    g(
        t::CREATE_FAR,
        vec![
            Ie::FarId(id),
            Ie::ApplyAction(Bitmap(apply_action::FORW)),
            Ie::Grouped(g(
                t::FORWARDING_PARAMETERS,
                vec![Ie::DestinationInterface(1)],
            )),
        ],
    )
}

pub fn far_n3(id: u32, teid: u32) -> Grouped {
    far_n3_to(id, teid, GNB)
}

/// FAR `id`: forward to access (N3) in GTP-U/UDP/IPv4 to `gnb` with TEID `teid`.
pub fn far_n3_to(id: u32, teid: u32, gnb: Ipv4Addr) -> Grouped {
    g(
        t::CREATE_FAR,
        vec![
            Ie::FarId(id),
            Ie::ApplyAction(Bitmap(apply_action::FORW)),
            Ie::Grouped(g(
                t::FORWARDING_PARAMETERS,
                vec![
                    Ie::DestinationInterface(0),
                    Ie::OuterHeaderCreation(OuterHeaderCreation {
                        description: ohc::GTPU_UDP_IPV4,
                        teid: Some(teid),
                        ipv4: Some(gnb),
                        ..Default::default()
                    }),
                ],
            )),
        ],
    )
}

pub fn qer(id: u32) -> Grouped {
    g(
        t::CREATE_QER,
        vec![
            Ie::QerId(id),
            Ie::GateStatus(GateStatus { ul: 0, dl: 0 }),
            Ie::Mbr(BitRate {
                ul: 100_000,
                dl: 200_000,
            }),
            Ie::Qfi(9),
        ],
    )
}

pub fn urr(id: u32) -> Grouped {
    g(
        t::CREATE_URR,
        vec![
            Ie::UrrId(id),
            Ie::MeasurementMethod(Bitmap(measurement_method::VOLUM)),
            Ie::ReportingTriggers(Bitmap(0x01)),
            Ie::VolumeThreshold(Volume {
                total: Some(1_000_000),
                ..Default::default()
            }),
            Ie::MeasurementPeriod(60),
        ],
    )
}

/// Create URR `id` measuring volume and duration with the Reporting Triggers `triggers`
/// (section 8.2.19 bits) and the `extra` IEs (thresholds, quotas, periods).
pub fn urr_with(id: u32, triggers: u64, extra: Vec<Ie>) -> Grouped {
    let mut ies = vec![
        Ie::UrrId(id),
        Ie::MeasurementMethod(Bitmap(
            measurement_method::VOLUM | measurement_method::DURAT,
        )),
        Ie::ReportingTriggers(Bitmap(triggers)),
    ];
    ies.extend(extra);
    g(t::CREATE_URR, ies)
}

pub fn cp_fseid(seid: u64) -> FSeid {
    FSeid {
        seid,
        ipv4: Some(Ipv4Addr::new(10, 0, 0, 1)),
        ipv6: None,
    }
}

/// A typical request: UL PDR 1 (CHOOSE, CHID 1) -> FAR 1 (N6), DL PDR 2 -> FAR 2 (N3),
/// QER 1, URR 1.
pub fn est(cp_seid: u64) -> SessionEstablishmentRequest {
    SessionEstablishmentRequest {
        node_id: NodeId::fqdn("smf.example"),
        cp_f_seid: cp_fseid(cp_seid),
        create_pdr: vec![pdr_ul(1, Some(1), 1), pdr_dl(2, 2)],
        create_far: vec![far_n6(1), far_n3(2, 0x100)],
        create_urr: vec![urr(1)],
        create_qer: vec![qer(1)],
        create_bar: None,
        extra: vec![],
    }
}

pub fn est_bytes(seq: u32, r: SessionEstablishmentRequest) -> Vec<u8> {
    msg(seq, Some(0), Body::SessionEstablishmentRequest(r))
}

pub fn modify_bytes(seq: u32, seid: u64, r: SessionModificationRequest) -> Vec<u8> {
    msg(seq, Some(seid), Body::SessionModificationRequest(r))
}

pub fn delete_bytes(seq: u32, seid: u64) -> Vec<u8> {
    msg(
        seq,
        Some(seid),
        Body::SessionDeletionRequest(SessionDeletionRequest::default()),
    )
}

/// (PDR ID, F-TEID) of a Created PDR.
pub fn created_fteid(c: &Grouped) -> (u16, u32, Option<Ipv4Addr>, Option<Ipv6Addr>) {
    let id = c.pdr_id().unwrap();
    match c.get(t::F_TEID) {
        Some(Ie::FTeid(FTeid::Assigned { teid, ipv4, ipv6 })) => (id, *teid, *ipv4, *ipv6),
        x => panic!("{x:?}"),
    }
}
