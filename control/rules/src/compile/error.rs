//! What a refused session gets: the Cause (TS 29.244 section 8.2.1) and Offending IE
//! (section 8.2.22) of the PFCP response, and the exact reason for the log.

use crate::sdf::SdfError;
use peregrine_dataplane::upf::tables::{MAX_QERS_PER_PDR, MAX_URRS_PER_PDR};
use peregrine_n4::Reject;
use peregrine_pfcp::cause;
use thiserror::Error;

/// What exactly was wrong, for logs.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompileErrorKind {
    #[error("PDR {pdr_id}: SDF filter: {error}")]
    Sdf { pdr_id: u16, error: SdfError },
    #[error("PDR {pdr_id}: SDF filter without flow description or with ToS/SPI/flow label, which are not supported")]
    SdfUnsupported { pdr_id: u16 },
    #[error("PDR {pdr_id}: no F-TEID (access) or UE IP address (core) to file it under")]
    NoLookupKey { pdr_id: u16 },
    #[error("PDR {pdr_id}: source interface {value} is not supported")]
    SourceInterface { pdr_id: u16, value: u8 },
    #[error("PDR {pdr_id}: its TEID or UE address belongs to session {owner:#x}")]
    KeyInUse { pdr_id: u16, owner: u64 },
    #[error("PDR {pdr_id}: outer header removal description {description} is not supported")]
    OuterHeaderRemoval { pdr_id: u16, description: u8 },
    #[error("PDR {pdr_id}: more than {MAX_QERS_PER_PDR} QERs")]
    TooManyQers { pdr_id: u16 },
    #[error("PDR {pdr_id}: more than {MAX_URRS_PER_PDR} URRs")]
    TooManyUrrs { pdr_id: u16 },
    #[error("PDR {pdr_id}: refers to a missing rule (IE type {ie})")]
    DanglingReference { pdr_id: u16, ie: u16 },
    #[error("FAR {far_id}: apply action {bits:#x} is not exactly one of DROP, FORW, BUFF, or asks for DUPL")]
    ApplyAction { far_id: u32, bits: u64 },
    #[error(
        "FAR {far_id}: destination interface {value} is a spare value (TS 29.244 section 8.2.24)"
    )]
    DestinationInterface { far_id: u32, value: u8 },
    #[error("FAR {far_id}: FORW without forwarding parameters")]
    NoForwardingParameters { far_id: u32 },
    #[error("FAR {far_id}: outer header creation {description:#06x} is not GTP-U/UDP/IP with TEID and address")]
    OuterHeaderCreation { far_id: u32, description: u16 },
    #[error("FAR {far_id}: no local {family} address for the outer header")]
    NoLocalAddress { far_id: u32, family: &'static str },
    #[error("no meter slot left")]
    MeterSlotsExhausted,
    #[error("no usage-counter slot left")]
    UrrSlotsExhausted,
}

/// A refused session: the PFCP Cause and Offending IE for the response, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("cause {cause}, offending IE {offending_ie:?}: {kind}")]
pub struct CompileError {
    pub cause: u8,
    pub offending_ie: Option<u16>,
    pub kind: CompileErrorKind,
}

impl CompileError {
    /// Cause 73 "Rule creation/modification failure" with Offending IE `ie`.
    pub(super) fn rule(ie: u16, kind: CompileErrorKind) -> CompileError {
        CompileError {
            cause: cause::RULE_CREATION_MODIFICATION_FAILURE,
            offending_ie: Some(ie),
            kind,
        }
    }

    /// The N4 node's form of the error, for its response.
    pub fn reject(&self) -> Reject {
        use peregrine_pfcp::ie::FailedRuleId as F;
        use CompileErrorKind as K;
        let failed_rule = match self.kind {
            K::Sdf { pdr_id, .. }
            | K::SdfUnsupported { pdr_id }
            | K::NoLookupKey { pdr_id }
            | K::SourceInterface { pdr_id, .. }
            | K::KeyInUse { pdr_id, .. }
            | K::OuterHeaderRemoval { pdr_id, .. }
            | K::TooManyQers { pdr_id }
            | K::TooManyUrrs { pdr_id }
            | K::DanglingReference { pdr_id, .. } => Some(F::Pdr(pdr_id)),
            K::ApplyAction { far_id, .. }
            | K::DestinationInterface { far_id, .. }
            | K::NoForwardingParameters { far_id }
            | K::OuterHeaderCreation { far_id, .. }
            | K::NoLocalAddress { far_id, .. } => Some(F::Far(far_id)),
            K::MeterSlotsExhausted | K::UrrSlotsExhausted => None,
        };
        Reject {
            cause: self.cause,
            offending_ie: self.offending_ie,
            // Section 8.2.80: only with cause 73.
            failed_rule: failed_rule.filter(|_| {
                self.cause == peregrine_pfcp::cause::RULE_CREATION_MODIFICATION_FAILURE
            }),
        }
    }
}
