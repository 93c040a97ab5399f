//! PFCP messages (TS 29.244 section 7.3, table 7.3-1; node messages section 7.4, session
//! messages section 7.5).
//!
//! [`Message::parse`] checks the header, decodes every IE (grouped ones recursively), and
//! moves the IEs each message defines into typed fields. IEs a message does not define,
//! unknown and vendor IEs, and further instances of IEs expected once, are kept in
//! `extra`, in wire order, so they can be ignored as section 7.6 requires or reported.
//! Missing mandatory IEs are [`DecodeError::MandatoryIeMissing`] with the missing type.
//!
//! [`Message::emit`] writes the typed fields in the order of the section 7.4 / 7.5 tables,
//! then `extra`; so `parse(emit(m)) == m` for every `m` that `parse` produced.

use crate::error::{DecodeError, EmitError};
use crate::header::{self, Header};
use crate::ie::{self, ie_type as t, Bitmap, FSeid, Grouped, Ie, NodeId};

/// Message types (section 7.3, table 7.3-1).
pub mod msg_type {
    pub const HEARTBEAT_REQUEST: u8 = 1;
    pub const HEARTBEAT_RESPONSE: u8 = 2;
    pub const ASSOCIATION_SETUP_REQUEST: u8 = 5;
    pub const ASSOCIATION_SETUP_RESPONSE: u8 = 6;
    pub const ASSOCIATION_UPDATE_REQUEST: u8 = 7;
    pub const ASSOCIATION_UPDATE_RESPONSE: u8 = 8;
    pub const ASSOCIATION_RELEASE_REQUEST: u8 = 9;
    pub const ASSOCIATION_RELEASE_RESPONSE: u8 = 10;
    pub const VERSION_NOT_SUPPORTED_RESPONSE: u8 = 11;
    pub const NODE_REPORT_REQUEST: u8 = 12;
    pub const NODE_REPORT_RESPONSE: u8 = 13;
    pub const SESSION_ESTABLISHMENT_REQUEST: u8 = 50;
    pub const SESSION_ESTABLISHMENT_RESPONSE: u8 = 51;
    pub const SESSION_MODIFICATION_REQUEST: u8 = 52;
    pub const SESSION_MODIFICATION_RESPONSE: u8 = 53;
    pub const SESSION_DELETION_REQUEST: u8 = 54;
    pub const SESSION_DELETION_RESPONSE: u8 = 55;
    pub const SESSION_REPORT_REQUEST: u8 = 56;
    pub const SESSION_REPORT_RESPONSE: u8 = 57;

    /// Session-related messages (50..=99) carry a SEID (S = 1, section 7.2.2.1).
    pub const fn is_session(t: u8) -> bool {
        t >= 50 && t < 100
    }
}

/// Heartbeat Request / Response (sections 7.4.2.1, 7.4.2.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// Mandatory.
    pub recovery_time_stamp: u32,
    pub extra: Vec<Ie>,
}

/// Association Setup / Update / Release Request (sections 7.4.4.1, 7.4.4.3, 7.4.4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssociationRequest {
    /// Mandatory.
    pub node_id: NodeId,
    /// Mandatory in Association Setup Request.
    pub recovery_time_stamp: Option<u32>,
    pub up_function_features: Option<Bitmap>,
    pub extra: Vec<Ie>,
}

/// Association Setup / Update / Release Response (sections 7.4.4.2, 7.4.4.4, 7.4.4.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssociationResponse {
    /// Mandatory.
    pub node_id: NodeId,
    /// Mandatory.
    pub cause: u8,
    /// Mandatory in Association Setup Response.
    pub recovery_time_stamp: Option<u32>,
    pub up_function_features: Option<Bitmap>,
    pub extra: Vec<Ie>,
}

/// Session Establishment Request (section 7.5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEstablishmentRequest {
    /// Mandatory.
    pub node_id: NodeId,
    /// CP F-SEID, mandatory.
    pub cp_f_seid: FSeid,
    /// At least one.
    pub create_pdr: Vec<Grouped>,
    /// At least one.
    pub create_far: Vec<Grouped>,
    pub create_urr: Vec<Grouped>,
    pub create_qer: Vec<Grouped>,
    pub create_bar: Option<Grouped>,
    pub extra: Vec<Ie>,
}

/// Session Establishment Response (section 7.5.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEstablishmentResponse {
    /// Mandatory.
    pub node_id: NodeId,
    /// Mandatory.
    pub cause: u8,
    pub offending_ie: Option<u16>,
    /// UP F-SEID; conditional: present when the cause is an acceptance.
    pub up_f_seid: Option<FSeid>,
    pub created_pdr: Vec<Grouped>,
    pub extra: Vec<Ie>,
}

/// Session Modification Request (section 7.5.4).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionModificationRequest {
    pub cp_f_seid: Option<FSeid>,
    pub remove_pdr: Vec<Grouped>,
    pub remove_far: Vec<Grouped>,
    pub remove_urr: Vec<Grouped>,
    pub remove_qer: Vec<Grouped>,
    pub remove_bar: Option<Grouped>,
    pub create_pdr: Vec<Grouped>,
    pub create_far: Vec<Grouped>,
    pub create_urr: Vec<Grouped>,
    pub create_qer: Vec<Grouped>,
    pub create_bar: Option<Grouped>,
    pub update_pdr: Vec<Grouped>,
    pub update_far: Vec<Grouped>,
    pub update_urr: Vec<Grouped>,
    pub update_qer: Vec<Grouped>,
    pub update_bar: Option<Grouped>,
    /// Query URR (table 7.5.4.10-1): report these URRs' usage in the response.
    pub query_urr: Vec<Grouped>,
    /// PFCPSMReq-Flags (section 8.2.58): DROBU, QAURR.
    pub pfcpsm_req_flags: Option<Bitmap>,
    /// Query URR Reference (section 8.2.98): echoed in the reports that answer the query.
    pub query_urr_reference: Option<u32>,
    pub extra: Vec<Ie>,
}

/// Session Modification / Deletion / Report Response (sections 7.5.5, 7.5.7, 7.5.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionResponse {
    /// Mandatory.
    pub cause: u8,
    pub offending_ie: Option<u16>,
    /// Created PDR (Modification Response only).
    pub created_pdr: Vec<Grouped>,
    /// Usage Report of the message's own type (78 in Modification, 79 in Deletion Response;
    /// always empty in Report Response).
    pub usage_report: Vec<Grouped>,
    pub extra: Vec<Ie>,
}

/// Session Deletion Request (section 7.5.6): no IEs of its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionDeletionRequest {
    pub extra: Vec<Ie>,
}

/// Session Report Request (section 7.5.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionReportRequest {
    /// Mandatory.
    pub report_type: Bitmap,
    /// Conditional: present when Report Type has DLDR.
    pub downlink_data_report: Option<Grouped>,
    /// Usage Report (type 80); conditional: at least one when Report Type has USAR.
    pub usage_report: Vec<Grouped>,
    pub extra: Vec<Ie>,
}

/// Node Report Request (section 7.4.5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReportRequest {
    /// Mandatory.
    pub node_id: NodeId,
    /// Mandatory, see [`ie::node_report_type`].
    pub node_report_type: Bitmap,
    /// Conditional: present when Node Report Type has UPFR (table 7.4.5.1.2-1).
    pub path_failure: Option<Grouped>,
    /// Conditional: present when Node Report Type has UPRR (table 7.4.5.1.3-1).
    pub path_recovery: Option<Grouped>,
    pub extra: Vec<Ie>,
}

/// Node Report Response (section 7.4.5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReportResponse {
    /// Mandatory.
    pub node_id: NodeId,
    /// Mandatory.
    pub cause: u8,
    pub offending_ie: Option<u16>,
    pub extra: Vec<Ie>,
}

/// The message body, by type.
// One body per datagram on the control plane: the size difference costs nothing worth a Box
// in every match of every user.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    HeartbeatRequest(Heartbeat),
    HeartbeatResponse(Heartbeat),
    AssociationSetupRequest(AssociationRequest),
    AssociationSetupResponse(AssociationResponse),
    AssociationUpdateRequest(AssociationRequest),
    AssociationUpdateResponse(AssociationResponse),
    AssociationReleaseRequest(AssociationRequest),
    AssociationReleaseResponse(AssociationResponse),
    /// Version Not Supported Response (section 7.4.4.7): header only; IEs are ignored.
    VersionNotSupportedResponse,
    NodeReportRequest(NodeReportRequest),
    NodeReportResponse(NodeReportResponse),
    SessionEstablishmentRequest(SessionEstablishmentRequest),
    SessionEstablishmentResponse(SessionEstablishmentResponse),
    SessionModificationRequest(SessionModificationRequest),
    SessionModificationResponse(SessionResponse),
    SessionDeletionRequest(SessionDeletionRequest),
    SessionDeletionResponse(SessionResponse),
    SessionReportRequest(SessionReportRequest),
    SessionReportResponse(SessionResponse),
}

/// A PFCP message: header fields plus typed body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// 24-bit sequence number.
    pub seq: u32,
    /// SEID; must be `Some` for session messages and `None` for node messages.
    pub seid: Option<u64>,
    /// Message priority (section 7.2.2.3), 0..=15.
    pub priority: Option<u8>,
    /// Follow On: another message follows in the datagram.
    pub fo: bool,
    pub body: Body,
}

/// Parse one message; see [`Message::parse`].
pub fn parse(buf: &[u8]) -> Result<Message, DecodeError> {
    Message::parse(buf)
}

/// Decoded IEs of a message, drained into typed fields.
struct Ies(Vec<Ie>);

macro_rules! take {
    ($ies:expr, $ty:expr, $pat:path) => {
        $ies.take($ty).and_then(|ie| match ie {
            $pat(v) => Some(v),
            _ => None,
        })
    };
}

macro_rules! take_all {
    ($ies:expr, $ty:expr) => {
        $ies.take_all($ty)
    };
}

fn mandatory<T>(v: Option<T>, ie_type: u16) -> Result<T, DecodeError> {
    v.ok_or(DecodeError::MandatoryIeMissing { ie_type })
}

impl Ies {
    /// Remove and return the first IE of type `ty`.
    fn take(&mut self, ty: u16) -> Option<Ie> {
        let i = self.0.iter().position(|ie| ie.ie_type() == ty)?;
        Some(self.0.remove(i))
    }

    /// Remove and return all grouped IEs of type `ty`.
    fn take_all(&mut self, ty: u16) -> Vec<Grouped> {
        let mut out = Vec::new();
        let mut rest = Vec::with_capacity(self.0.len());
        for ie in self.0.drain(..) {
            match ie {
                Ie::Grouped(g) if g.ie_type == ty => out.push(g),
                other => rest.push(other),
            }
        }
        self.0 = rest;
        out
    }
}

impl Body {
    /// Message type (table 7.3-1).
    pub fn msg_type(&self) -> u8 {
        use msg_type as m;
        match self {
            Body::HeartbeatRequest(_) => m::HEARTBEAT_REQUEST,
            Body::HeartbeatResponse(_) => m::HEARTBEAT_RESPONSE,
            Body::AssociationSetupRequest(_) => m::ASSOCIATION_SETUP_REQUEST,
            Body::AssociationSetupResponse(_) => m::ASSOCIATION_SETUP_RESPONSE,
            Body::AssociationUpdateRequest(_) => m::ASSOCIATION_UPDATE_REQUEST,
            Body::AssociationUpdateResponse(_) => m::ASSOCIATION_UPDATE_RESPONSE,
            Body::AssociationReleaseRequest(_) => m::ASSOCIATION_RELEASE_REQUEST,
            Body::AssociationReleaseResponse(_) => m::ASSOCIATION_RELEASE_RESPONSE,
            Body::VersionNotSupportedResponse => m::VERSION_NOT_SUPPORTED_RESPONSE,
            Body::NodeReportRequest(_) => m::NODE_REPORT_REQUEST,
            Body::NodeReportResponse(_) => m::NODE_REPORT_RESPONSE,
            Body::SessionEstablishmentRequest(_) => m::SESSION_ESTABLISHMENT_REQUEST,
            Body::SessionEstablishmentResponse(_) => m::SESSION_ESTABLISHMENT_RESPONSE,
            Body::SessionModificationRequest(_) => m::SESSION_MODIFICATION_REQUEST,
            Body::SessionModificationResponse(_) => m::SESSION_MODIFICATION_RESPONSE,
            Body::SessionDeletionRequest(_) => m::SESSION_DELETION_REQUEST,
            Body::SessionDeletionResponse(_) => m::SESSION_DELETION_RESPONSE,
            Body::SessionReportRequest(_) => m::SESSION_REPORT_REQUEST,
            Body::SessionReportResponse(_) => m::SESSION_REPORT_RESPONSE,
        }
    }

    /// Whether the message is a request (odd types in table 7.3-1, except 11).
    pub fn is_request(&self) -> bool {
        let m = self.msg_type();
        m % 2 == 1 && m != msg_type::VERSION_NOT_SUPPORTED_RESPONSE
    }

    fn parse(mt: u8, ies: Vec<Ie>) -> Result<Body, DecodeError> {
        use msg_type as m;
        let mut s = Ies(ies);
        let body = match mt {
            m::HEARTBEAT_REQUEST | m::HEARTBEAT_RESPONSE => {
                let hb = Heartbeat {
                    recovery_time_stamp: mandatory(
                        take!(s, t::RECOVERY_TIME_STAMP, Ie::RecoveryTimeStamp),
                        t::RECOVERY_TIME_STAMP,
                    )?,
                    extra: Vec::new(),
                };
                if mt == m::HEARTBEAT_REQUEST {
                    Body::HeartbeatRequest(hb)
                } else {
                    Body::HeartbeatResponse(hb)
                }
            }
            m::ASSOCIATION_SETUP_REQUEST
            | m::ASSOCIATION_UPDATE_REQUEST
            | m::ASSOCIATION_RELEASE_REQUEST => {
                let r = AssociationRequest {
                    node_id: mandatory(take!(s, t::NODE_ID, Ie::NodeId), t::NODE_ID)?,
                    recovery_time_stamp: take!(s, t::RECOVERY_TIME_STAMP, Ie::RecoveryTimeStamp),
                    up_function_features: take!(s, t::UP_FUNCTION_FEATURES, Ie::UpFunctionFeatures),
                    extra: Vec::new(),
                };
                match mt {
                    m::ASSOCIATION_SETUP_REQUEST => {
                        mandatory(r.recovery_time_stamp, t::RECOVERY_TIME_STAMP)?;
                        Body::AssociationSetupRequest(r)
                    }
                    m::ASSOCIATION_UPDATE_REQUEST => Body::AssociationUpdateRequest(r),
                    _ => Body::AssociationReleaseRequest(r),
                }
            }
            m::ASSOCIATION_SETUP_RESPONSE
            | m::ASSOCIATION_UPDATE_RESPONSE
            | m::ASSOCIATION_RELEASE_RESPONSE => {
                let r = AssociationResponse {
                    node_id: mandatory(take!(s, t::NODE_ID, Ie::NodeId), t::NODE_ID)?,
                    cause: mandatory(take!(s, t::CAUSE, Ie::Cause), t::CAUSE)?,
                    recovery_time_stamp: take!(s, t::RECOVERY_TIME_STAMP, Ie::RecoveryTimeStamp),
                    up_function_features: take!(s, t::UP_FUNCTION_FEATURES, Ie::UpFunctionFeatures),
                    extra: Vec::new(),
                };
                match mt {
                    m::ASSOCIATION_SETUP_RESPONSE => {
                        mandatory(r.recovery_time_stamp, t::RECOVERY_TIME_STAMP)?;
                        Body::AssociationSetupResponse(r)
                    }
                    m::ASSOCIATION_UPDATE_RESPONSE => Body::AssociationUpdateResponse(r),
                    _ => Body::AssociationReleaseResponse(r),
                }
            }
            m::VERSION_NOT_SUPPORTED_RESPONSE => return Ok(Body::VersionNotSupportedResponse),
            m::NODE_REPORT_REQUEST => {
                let r = NodeReportRequest {
                    node_id: mandatory(take!(s, t::NODE_ID, Ie::NodeId), t::NODE_ID)?,
                    node_report_type: mandatory(
                        take!(s, t::NODE_REPORT_TYPE, Ie::NodeReportType),
                        t::NODE_REPORT_TYPE,
                    )?,
                    path_failure: take!(s, t::USER_PLANE_PATH_FAILURE_REPORT, Ie::Grouped),
                    path_recovery: take!(s, t::USER_PLANE_PATH_RECOVERY_REPORT, Ie::Grouped),
                    extra: Vec::new(),
                };
                let nrt = r.node_report_type;
                for (bit, present, ie_type) in [
                    (
                        ie::node_report_type::UPFR,
                        r.path_failure.is_some(),
                        t::USER_PLANE_PATH_FAILURE_REPORT,
                    ),
                    (
                        ie::node_report_type::UPRR,
                        r.path_recovery.is_some(),
                        t::USER_PLANE_PATH_RECOVERY_REPORT,
                    ),
                ] {
                    if nrt.contains(bit) && !present {
                        return Err(DecodeError::ConditionalIeMissing { ie_type });
                    }
                }
                Body::NodeReportRequest(r)
            }
            m::NODE_REPORT_RESPONSE => Body::NodeReportResponse(NodeReportResponse {
                node_id: mandatory(take!(s, t::NODE_ID, Ie::NodeId), t::NODE_ID)?,
                cause: mandatory(take!(s, t::CAUSE, Ie::Cause), t::CAUSE)?,
                offending_ie: take!(s, t::OFFENDING_IE, Ie::OffendingIe),
                extra: Vec::new(),
            }),
            m::SESSION_ESTABLISHMENT_REQUEST => {
                let r = SessionEstablishmentRequest {
                    node_id: mandatory(take!(s, t::NODE_ID, Ie::NodeId), t::NODE_ID)?,
                    cp_f_seid: mandatory(take!(s, t::F_SEID, Ie::FSeid), t::F_SEID)?,
                    create_pdr: take_all!(s, t::CREATE_PDR),
                    create_far: take_all!(s, t::CREATE_FAR),
                    create_urr: take_all!(s, t::CREATE_URR),
                    create_qer: take_all!(s, t::CREATE_QER),
                    create_bar: take!(s, t::CREATE_BAR, Ie::Grouped),
                    extra: Vec::new(),
                };
                mandatory(r.create_pdr.first(), t::CREATE_PDR)?;
                mandatory(r.create_far.first(), t::CREATE_FAR)?;
                Body::SessionEstablishmentRequest(r)
            }
            m::SESSION_ESTABLISHMENT_RESPONSE => {
                let r = SessionEstablishmentResponse {
                    node_id: mandatory(take!(s, t::NODE_ID, Ie::NodeId), t::NODE_ID)?,
                    cause: mandatory(take!(s, t::CAUSE, Ie::Cause), t::CAUSE)?,
                    offending_ie: take!(s, t::OFFENDING_IE, Ie::OffendingIe),
                    up_f_seid: take!(s, t::F_SEID, Ie::FSeid),
                    created_pdr: take_all!(s, t::CREATED_PDR),
                    extra: Vec::new(),
                };
                if crate::cause::is_accepted(r.cause) && r.up_f_seid.is_none() {
                    return Err(DecodeError::ConditionalIeMissing { ie_type: t::F_SEID });
                }
                Body::SessionEstablishmentResponse(r)
            }
            m::SESSION_MODIFICATION_REQUEST => {
                Body::SessionModificationRequest(SessionModificationRequest {
                    cp_f_seid: take!(s, t::F_SEID, Ie::FSeid),
                    remove_pdr: take_all!(s, t::REMOVE_PDR),
                    remove_far: take_all!(s, t::REMOVE_FAR),
                    remove_urr: take_all!(s, t::REMOVE_URR),
                    remove_qer: take_all!(s, t::REMOVE_QER),
                    remove_bar: take!(s, t::REMOVE_BAR, Ie::Grouped),
                    create_pdr: take_all!(s, t::CREATE_PDR),
                    create_far: take_all!(s, t::CREATE_FAR),
                    create_urr: take_all!(s, t::CREATE_URR),
                    create_qer: take_all!(s, t::CREATE_QER),
                    create_bar: take!(s, t::CREATE_BAR, Ie::Grouped),
                    update_pdr: take_all!(s, t::UPDATE_PDR),
                    update_far: take_all!(s, t::UPDATE_FAR),
                    update_urr: take_all!(s, t::UPDATE_URR),
                    update_qer: take_all!(s, t::UPDATE_QER),
                    update_bar: take!(s, t::UPDATE_BAR, Ie::Grouped),
                    query_urr: take_all!(s, t::QUERY_URR),
                    pfcpsm_req_flags: take!(s, t::PFCPSMREQ_FLAGS, Ie::PfcpsmReqFlags),
                    query_urr_reference: take!(s, t::QUERY_URR_REFERENCE, Ie::QueryUrrReference),
                    extra: Vec::new(),
                })
            }
            m::SESSION_MODIFICATION_RESPONSE
            | m::SESSION_DELETION_RESPONSE
            | m::SESSION_REPORT_RESPONSE => {
                let cause = mandatory(take!(s, t::CAUSE, Ie::Cause), t::CAUSE)?;
                let offending_ie = take!(s, t::OFFENDING_IE, Ie::OffendingIe);
                let (created_pdr, usage_report) = match mt {
                    m::SESSION_MODIFICATION_RESPONSE => (
                        take_all!(s, t::CREATED_PDR),
                        take_all!(s, t::USAGE_REPORT_SMR),
                    ),
                    m::SESSION_DELETION_RESPONSE => (Vec::new(), take_all!(s, t::USAGE_REPORT_SDR)),
                    _ => (Vec::new(), Vec::new()),
                };
                let r = SessionResponse {
                    cause,
                    offending_ie,
                    created_pdr,
                    usage_report,
                    extra: Vec::new(),
                };
                match mt {
                    m::SESSION_MODIFICATION_RESPONSE => Body::SessionModificationResponse(r),
                    m::SESSION_DELETION_RESPONSE => Body::SessionDeletionResponse(r),
                    _ => Body::SessionReportResponse(r),
                }
            }
            m::SESSION_DELETION_REQUEST => {
                Body::SessionDeletionRequest(SessionDeletionRequest { extra: Vec::new() })
            }
            m::SESSION_REPORT_REQUEST => {
                let r = SessionReportRequest {
                    report_type: mandatory(
                        take!(s, t::REPORT_TYPE, Ie::ReportType),
                        t::REPORT_TYPE,
                    )?,
                    downlink_data_report: take!(s, t::DOWNLINK_DATA_REPORT, Ie::Grouped),
                    usage_report: take_all!(s, t::USAGE_REPORT_SRR),
                    extra: Vec::new(),
                };
                if r.report_type.contains(ie::report_type::DLDR) && r.downlink_data_report.is_none()
                {
                    return Err(DecodeError::ConditionalIeMissing {
                        ie_type: t::DOWNLINK_DATA_REPORT,
                    });
                }
                if r.report_type.contains(ie::report_type::USAR) && r.usage_report.is_empty() {
                    return Err(DecodeError::ConditionalIeMissing {
                        ie_type: t::USAGE_REPORT_SRR,
                    });
                }
                Body::SessionReportRequest(r)
            }
            other => return Err(DecodeError::UnknownMessageType(other)),
        };
        let mut body = body;
        if let Some(extra) = body.extra_mut() {
            *extra = s.0;
        }
        Ok(body)
    }

    fn extra_mut(&mut self) -> Option<&mut Vec<Ie>> {
        Some(match self {
            Body::HeartbeatRequest(b) | Body::HeartbeatResponse(b) => &mut b.extra,
            Body::AssociationSetupRequest(b)
            | Body::AssociationUpdateRequest(b)
            | Body::AssociationReleaseRequest(b) => &mut b.extra,
            Body::AssociationSetupResponse(b)
            | Body::AssociationUpdateResponse(b)
            | Body::AssociationReleaseResponse(b) => &mut b.extra,
            Body::VersionNotSupportedResponse => return None,
            Body::NodeReportRequest(b) => &mut b.extra,
            Body::NodeReportResponse(b) => &mut b.extra,
            Body::SessionEstablishmentRequest(b) => &mut b.extra,
            Body::SessionEstablishmentResponse(b) => &mut b.extra,
            Body::SessionModificationRequest(b) => &mut b.extra,
            Body::SessionModificationResponse(b)
            | Body::SessionDeletionResponse(b)
            | Body::SessionReportResponse(b) => &mut b.extra,
            Body::SessionDeletionRequest(b) => &mut b.extra,
            Body::SessionReportRequest(b) => &mut b.extra,
        })
    }

    /// The IEs of the body in emission order.
    pub fn to_ies(&self) -> Vec<Ie> {
        let mut v: Vec<Ie> = Vec::new();
        let g = |v: &mut Vec<Ie>, gs: &[Grouped]| v.extend(gs.iter().cloned().map(Ie::Grouped));
        match self {
            Body::HeartbeatRequest(b) | Body::HeartbeatResponse(b) => {
                v.push(Ie::RecoveryTimeStamp(b.recovery_time_stamp));
                v.extend(b.extra.iter().cloned());
            }
            Body::AssociationSetupRequest(b)
            | Body::AssociationUpdateRequest(b)
            | Body::AssociationReleaseRequest(b) => {
                v.push(Ie::NodeId(b.node_id.clone()));
                v.extend(b.recovery_time_stamp.map(Ie::RecoveryTimeStamp));
                v.extend(b.up_function_features.map(Ie::UpFunctionFeatures));
                v.extend(b.extra.iter().cloned());
            }
            Body::AssociationSetupResponse(b)
            | Body::AssociationUpdateResponse(b)
            | Body::AssociationReleaseResponse(b) => {
                v.push(Ie::NodeId(b.node_id.clone()));
                v.push(Ie::Cause(b.cause));
                v.extend(b.recovery_time_stamp.map(Ie::RecoveryTimeStamp));
                v.extend(b.up_function_features.map(Ie::UpFunctionFeatures));
                v.extend(b.extra.iter().cloned());
            }
            Body::VersionNotSupportedResponse => {}
            Body::NodeReportRequest(b) => {
                v.push(Ie::NodeId(b.node_id.clone()));
                v.push(Ie::NodeReportType(b.node_report_type));
                v.extend(b.path_failure.clone().map(Ie::Grouped));
                v.extend(b.path_recovery.clone().map(Ie::Grouped));
                v.extend(b.extra.iter().cloned());
            }
            Body::NodeReportResponse(b) => {
                v.push(Ie::NodeId(b.node_id.clone()));
                v.push(Ie::Cause(b.cause));
                v.extend(b.offending_ie.map(Ie::OffendingIe));
                v.extend(b.extra.iter().cloned());
            }
            Body::SessionEstablishmentRequest(b) => {
                v.push(Ie::NodeId(b.node_id.clone()));
                v.push(Ie::FSeid(b.cp_f_seid));
                g(&mut v, &b.create_pdr);
                g(&mut v, &b.create_far);
                g(&mut v, &b.create_urr);
                g(&mut v, &b.create_qer);
                v.extend(b.create_bar.clone().map(Ie::Grouped));
                v.extend(b.extra.iter().cloned());
            }
            Body::SessionEstablishmentResponse(b) => {
                v.push(Ie::NodeId(b.node_id.clone()));
                v.push(Ie::Cause(b.cause));
                v.extend(b.offending_ie.map(Ie::OffendingIe));
                v.extend(b.up_f_seid.map(Ie::FSeid));
                g(&mut v, &b.created_pdr);
                v.extend(b.extra.iter().cloned());
            }
            Body::SessionModificationRequest(b) => {
                v.extend(b.cp_f_seid.map(Ie::FSeid));
                g(&mut v, &b.remove_pdr);
                g(&mut v, &b.remove_far);
                g(&mut v, &b.remove_urr);
                g(&mut v, &b.remove_qer);
                v.extend(b.remove_bar.clone().map(Ie::Grouped));
                g(&mut v, &b.create_pdr);
                g(&mut v, &b.create_far);
                g(&mut v, &b.create_urr);
                g(&mut v, &b.create_qer);
                v.extend(b.create_bar.clone().map(Ie::Grouped));
                g(&mut v, &b.update_pdr);
                g(&mut v, &b.update_far);
                g(&mut v, &b.update_urr);
                g(&mut v, &b.update_qer);
                v.extend(b.update_bar.clone().map(Ie::Grouped));
                g(&mut v, &b.query_urr);
                v.extend(b.pfcpsm_req_flags.map(Ie::PfcpsmReqFlags));
                v.extend(b.query_urr_reference.map(Ie::QueryUrrReference));
                v.extend(b.extra.iter().cloned());
            }
            Body::SessionModificationResponse(b)
            | Body::SessionDeletionResponse(b)
            | Body::SessionReportResponse(b) => {
                v.push(Ie::Cause(b.cause));
                v.extend(b.offending_ie.map(Ie::OffendingIe));
                g(&mut v, &b.created_pdr);
                g(&mut v, &b.usage_report);
                v.extend(b.extra.iter().cloned());
            }
            Body::SessionDeletionRequest(b) => v.extend(b.extra.iter().cloned()),
            Body::SessionReportRequest(b) => {
                v.push(Ie::ReportType(b.report_type));
                v.extend(b.downlink_data_report.clone().map(Ie::Grouped));
                g(&mut v, &b.usage_report);
                v.extend(b.extra.iter().cloned());
            }
        }
        v
    }
}

impl Message {
    /// Parse the first message of `buf`; bytes after it (FO) are ignored.
    pub fn parse(buf: &[u8]) -> Result<Message, DecodeError> {
        Self::parse_prefix(buf).map(|(m, _)| m)
    }

    /// Parse the first message of `buf` and return it with its length, so that messages
    /// chained with FO (section 7.2.2.1) can be walked.
    pub fn parse_prefix(buf: &[u8]) -> Result<(Message, usize), DecodeError> {
        let h = Header::new_checked(buf)?;
        let mt = h.msg_type();
        let known = matches!(mt, 1 | 2 | 5..=13 | 50..=57);
        if !known {
            return Err(DecodeError::UnknownMessageType(mt));
        }
        if h.s_flag() != msg_type::is_session(mt) {
            return Err(DecodeError::SeidFlag { msg_type: mt });
        }
        let ies = if mt == msg_type::VERSION_NOT_SUPPORTED_RESPONSE {
            Vec::new()
        } else {
            ie::parse_list(h.payload(), 0)?
        };
        let body = Body::parse(mt, ies)?;
        Ok((
            Message {
                seq: h.seq(),
                seid: h.seid(),
                priority: h.priority(),
                fo: h.fo_flag(),
                body,
            },
            h.total_len(),
        ))
    }

    /// Encode to a new vector.
    pub fn to_vec(&self) -> Result<Vec<u8>, EmitError> {
        let mt = self.body.msg_type();
        if self.seid.is_some() != msg_type::is_session(mt) {
            return Err(EmitError::FieldRange("SEID presence vs message type"));
        }
        let mut hdr = header::Repr {
            msg_type: mt,
            fo: self.fo,
            seid: self.seid,
            seq: self.seq,
            priority: self.priority,
            payload_len: 0,
        };
        // Most N4 messages fit in 256 bytes: one allocation instead of doubling from the
        // header's 16 (three or four reallocations per response otherwise).
        let mut out = Vec::with_capacity(256);
        out.resize(hdr.header_len(), 0);
        for ie in self.body.to_ies() {
            ie.emit(&mut out)?;
        }
        hdr.payload_len = out.len() - hdr.header_len();
        hdr.emit(&mut out)?;
        Ok(out)
    }

    /// Encode into `buf`, returning the length written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let v = self.to_vec()?;
        let available = buf.len();
        let dst = buf.get_mut(..v.len()).ok_or(EmitError::BufferTooSmall {
            needed: v.len(),
            available,
        })?;
        dst.copy_from_slice(&v);
        Ok(v.len())
    }
}
