//! Sample messages: one of every message type,
//! with most typed IEs somewhere inside.

use peregrine_pfcp::ie::{
    apply_action, encode_labels, ie_type as t, measurement_method, ohc, report_type, smreq_flags,
    BitRate, Bitmap, FSeid, FTeid, GateStatus, Grouped, Ie, NodeId, OuterHeaderCreation,
    OuterHeaderRemoval, RawIe, SdfFilter, UeIpAddress, Volume,
};
use peregrine_pfcp::message::{
    AssociationRequest, AssociationResponse, Body, Heartbeat, Message, SessionDeletionRequest,
    SessionEstablishmentRequest, SessionEstablishmentResponse, SessionModificationRequest,
    SessionReportRequest, SessionResponse,
};
use std::net::{Ipv4Addr, Ipv6Addr};

pub const SMF: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const UPF: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const UE: Ipv4Addr = Ipv4Addr::new(10, 60, 0, 1);
pub const GNB: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
pub const V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

pub use super::requests::g as grouped;

pub fn create_pdr_ul() -> Grouped {
    grouped(
        t::CREATE_PDR,
        vec![
            Ie::PdrId(1),
            Ie::Precedence(200),
            Ie::Grouped(grouped(
                t::PDI,
                vec![
                    Ie::SourceInterface(0),
                    Ie::FTeid(FTeid::Choose {
                        v4: true,
                        v6: false,
                        choose_id: Some(1),
                    }),
                    Ie::NetworkInstance(encode_labels("internet")),
                    Ie::UeIpAddress(UeIpAddress {
                        ipv4: Some(UE),
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
            Ie::FarId(1),
            Ie::UrrId(1),
            Ie::QerId(1),
        ],
    )
}

/// Downlink PDR 2 for [`UE`] -> FAR 2, QER 1: the request builders'
/// ([`super::requests::pdr_dl_for`]).
pub fn create_pdr_dl() -> Grouped {
    super::requests::pdr_dl_for(2, 200, UE, 2, Some(1))
}

pub fn create_far_dl() -> Grouped {
    grouped(
        t::CREATE_FAR,
        vec![
            Ie::FarId(2),
            Ie::ApplyAction(Bitmap(apply_action::FORW)),
            Ie::Grouped(grouped(
                t::FORWARDING_PARAMETERS,
                vec![
                    Ie::DestinationInterface(0),
                    Ie::NetworkInstance(encode_labels("access")),
                    Ie::OuterHeaderCreation(OuterHeaderCreation {
                        description: ohc::GTPU_UDP_IPV4,
                        teid: Some(0x0000_1234),
                        ipv4: Some(GNB),
                        ..Default::default()
                    }),
                ],
            )),
        ],
    )
}

/// FAR 1 to N6: the request builders' ([`super::requests::far_n6`]).
pub fn create_far_ul() -> Grouped {
    super::requests::far_n6(1)
}

pub fn create_urr() -> Grouped {
    grouped(
        t::CREATE_URR,
        vec![
            Ie::UrrId(1),
            Ie::MeasurementMethod(Bitmap(
                measurement_method::VOLUM | measurement_method::DURAT,
            )),
            Ie::ReportingTriggers(Bitmap(0x0001 | 0x0100)),
            Ie::MeasurementPeriod(60),
            Ie::VolumeThreshold(Volume {
                total: Some(1_000_000),
                ..Default::default()
            }),
            Ie::VolumeQuota(Volume {
                total: Some(5_000_000),
                ul: Some(1),
                dl: Some(2),
                ..Default::default()
            }),
            Ie::TimeThreshold(3600),
        ],
    )
}

pub fn create_qer() -> Grouped {
    grouped(
        t::CREATE_QER,
        vec![
            Ie::QerId(1),
            Ie::GateStatus(GateStatus { ul: 0, dl: 0 }),
            Ie::Mbr(BitRate {
                ul: 100_000,
                dl: 200_000,
            }),
            Ie::Gbr(BitRate {
                ul: 1_000,
                dl: 2_000,
            }),
            Ie::Qfi(9),
        ],
    )
}

pub fn usage_report(ty: u16) -> Grouped {
    grouped(
        ty,
        vec![
            Ie::UrrId(1),
            Ie::UrSeqn(7),
            Ie::UsageReportTrigger(Bitmap(0x02)),
            Ie::StartTime(0xe6f0_0000),
            Ie::EndTime(0xe6f0_0020),
            Ie::VolumeMeasurement(Volume {
                total: Some(3000),
                ul: Some(1000),
                dl: Some(2000),
                total_packets: Some(30),
                ul_packets: Some(10),
                dl_packets: Some(20),
            }),
            Ie::DurationMeasurement(42),
            Ie::TimeOfFirstPacket(0xe6f0_0000),
            Ie::TimeOfLastPacket(0xe6f0_0010),
        ],
    )
}

fn node(seq: u32, body: Body) -> Message {
    Message {
        seq,
        seid: None,
        priority: None,
        fo: false,
        body,
    }
}

fn session(seq: u32, seid: u64, body: Body) -> Message {
    Message {
        seq,
        seid: Some(seid),
        priority: Some(5),
        fo: false,
        body,
    }
}

/// One message of every supported type.
pub fn all() -> Vec<Message> {
    let nid = NodeId::Ipv4(SMF);
    let upf = NodeId::fqdn("upf1.peregrine.example");
    let hb = Heartbeat {
        recovery_time_stamp: 0xe6f0_1234,
        extra: vec![],
    };
    let areq = AssociationRequest {
        node_id: nid.clone(),
        recovery_time_stamp: Some(0xe6f0_1234),
        up_function_features: None,
        extra: vec![],
    };
    let aresp = AssociationResponse {
        node_id: upf.clone(),
        cause: 1,
        recovery_time_stamp: Some(0xe6f0_5678),
        up_function_features: Some(Bitmap(0x0001_0010)),
        extra: vec![],
    };
    vec![
        node(1, Body::HeartbeatRequest(hb.clone())),
        node(1, Body::HeartbeatResponse(hb)),
        node(2, Body::AssociationSetupRequest(areq.clone())),
        node(2, Body::AssociationSetupResponse(aresp.clone())),
        node(
            3,
            Body::AssociationUpdateRequest(AssociationRequest {
                recovery_time_stamp: None,
                up_function_features: Some(Bitmap(0x10)),
                ..areq.clone()
            }),
        ),
        node(
            3,
            Body::AssociationUpdateResponse(AssociationResponse {
                recovery_time_stamp: None,
                up_function_features: None,
                ..aresp.clone()
            }),
        ),
        node(
            4,
            Body::AssociationReleaseRequest(AssociationRequest {
                recovery_time_stamp: None,
                ..areq
            }),
        ),
        node(
            4,
            Body::AssociationReleaseResponse(AssociationResponse {
                recovery_time_stamp: None,
                up_function_features: None,
                node_id: NodeId::Ipv6(V6),
                ..aresp
            }),
        ),
        node(5, Body::VersionNotSupportedResponse),
        session(
            10,
            0,
            Body::SessionEstablishmentRequest(SessionEstablishmentRequest {
                node_id: nid.clone(),
                cp_f_seid: FSeid {
                    seid: 0x1111,
                    ipv4: Some(SMF),
                    ipv6: None,
                },
                create_pdr: vec![create_pdr_ul(), create_pdr_dl()],
                create_far: vec![create_far_ul(), create_far_dl()],
                create_urr: vec![create_urr()],
                create_qer: vec![create_qer()],
                create_bar: Some(grouped(t::CREATE_BAR, vec![Ie::BarId(1)])),
                extra: vec![],
            }),
        ),
        session(
            10,
            0x1111,
            Body::SessionEstablishmentResponse(SessionEstablishmentResponse {
                node_id: NodeId::Ipv4(UPF),
                cause: 1,
                offending_ie: None,
                up_f_seid: Some(FSeid {
                    seid: 0x2222,
                    ipv4: Some(UPF),
                    ipv6: Some(V6),
                }),
                created_pdr: vec![grouped(
                    t::CREATED_PDR,
                    vec![
                        Ie::PdrId(1),
                        Ie::FTeid(FTeid::Assigned {
                            teid: 0x8000_0001,
                            ipv4: Some(UPF),
                            ipv6: None,
                        }),
                    ],
                )],
                extra: vec![],
            }),
        ),
        session(
            11,
            0x2222,
            Body::SessionModificationRequest(SessionModificationRequest {
                cp_f_seid: Some(FSeid {
                    seid: 0x1111,
                    ipv4: Some(SMF),
                    ipv6: None,
                }),
                remove_pdr: vec![grouped(t::REMOVE_PDR, vec![Ie::PdrId(3)])],
                remove_far: vec![grouped(t::REMOVE_FAR, vec![Ie::FarId(3)])],
                remove_urr: vec![grouped(t::REMOVE_URR, vec![Ie::UrrId(3)])],
                remove_qer: vec![grouped(t::REMOVE_QER, vec![Ie::QerId(3)])],
                remove_bar: Some(grouped(t::REMOVE_BAR, vec![Ie::BarId(1)])),
                create_pdr: vec![create_pdr_dl()],
                create_far: vec![create_far_dl()],
                create_urr: vec![create_urr()],
                create_qer: vec![create_qer()],
                create_bar: None,
                update_pdr: vec![grouped(
                    t::UPDATE_PDR,
                    vec![Ie::PdrId(2), Ie::Precedence(100)],
                )],
                update_far: vec![grouped(
                    t::UPDATE_FAR,
                    vec![
                        Ie::FarId(2),
                        Ie::ApplyAction(Bitmap(apply_action::FORW)),
                        Ie::Grouped(grouped(
                            t::UPDATE_FORWARDING_PARAMETERS,
                            vec![
                                Ie::DestinationInterface(0),
                                Ie::OuterHeaderCreation(OuterHeaderCreation {
                                    description: ohc::GTPU_UDP_IPV4,
                                    teid: Some(0x5678),
                                    ipv4: Some(GNB),
                                    ..Default::default()
                                }),
                            ],
                        )),
                    ],
                )],
                update_urr: vec![grouped(
                    t::UPDATE_URR,
                    vec![Ie::UrrId(1), Ie::TimeThreshold(60)],
                )],
                update_qer: vec![grouped(
                    t::UPDATE_QER,
                    vec![Ie::QerId(1), Ie::GateStatus(GateStatus { ul: 1, dl: 1 })],
                )],
                update_bar: Some(grouped(
                    t::UPDATE_BAR,
                    vec![Ie::BarId(1), Ie::SuggestedBufferingPacketsCount(20)],
                )),
                query_urr: vec![grouped(t::QUERY_URR, vec![Ie::UrrId(1)])],
                pfcpsm_req_flags: Some(Bitmap(smreq_flags::QAURR)),
                query_urr_reference: Some(0x0102_0304),
                extra: vec![],
            }),
        ),
        session(
            11,
            0x1111,
            Body::SessionModificationResponse(SessionResponse {
                cause: 1,
                offending_ie: None,
                created_pdr: vec![grouped(
                    t::CREATED_PDR,
                    vec![
                        Ie::PdrId(2),
                        Ie::FTeid(FTeid::Assigned {
                            teid: 9,
                            ipv4: Some(UPF),
                            ipv6: None,
                        }),
                    ],
                )],
                usage_report: vec![usage_report(t::USAGE_REPORT_SMR)],
                extra: vec![],
            }),
        ),
        session(
            12,
            0x2222,
            Body::SessionDeletionRequest(SessionDeletionRequest::default()),
        ),
        session(
            12,
            0x1111,
            Body::SessionDeletionResponse(SessionResponse {
                cause: 1,
                offending_ie: None,
                created_pdr: vec![],
                usage_report: vec![usage_report(t::USAGE_REPORT_SDR)],
                extra: vec![],
            }),
        ),
        session(
            13,
            0x1111,
            Body::SessionReportRequest(SessionReportRequest {
                report_type: Bitmap(report_type::DLDR | report_type::USAR),
                downlink_data_report: Some(grouped(t::DOWNLINK_DATA_REPORT, vec![Ie::PdrId(2)])),
                usage_report: vec![usage_report(t::USAGE_REPORT_SRR)],
                extra: vec![],
            }),
        ),
        session(
            13,
            0x2222,
            Body::SessionReportResponse(SessionResponse {
                cause: 64,
                offending_ie: Some(t::REPORT_TYPE),
                created_pdr: vec![],
                usage_report: vec![],
                extra: vec![Ie::Raw(RawIe {
                    ie_type: 0x83e7,
                    enterprise_id: Some(32473),
                    value: vec![1, 2],
                })],
            }),
        ),
    ]
}
