//! PFCP (Packet Forwarding Control Protocol, 3GPP TS 29.244 Release 16/17) wire format.
//!
//! I/O-free codec for the N4/Sx interface between the SMF (CP function) and the UPF:
//!
//! * [`header`]: the message header (section 7.2.2) as a checked view plus [`header::Repr`];
//! * [`ie`]: the generic TLV (section 8.1.1), an IE iterator, typed IEs (section 8.2) and grouped
//!   IEs (section 7.5), with unknown IEs preserved as raw bytes;
//! * [`message`]: the node and session messages of section 7.4 / 7.5 as [`message::Message`].
//!
//! Decoding never panics on any input; errors ([`DecodeError`]) name the PFCP Cause a receiver
//! should answer with (section 7.6 error handling, cause values of section 8.2.1).
#![forbid(unsafe_code)]

// Lets the shared test samples name the crate the same way inside and outside it.
#[cfg(test)]
extern crate self as peregrine_pfcp;

pub mod error;
pub mod header;
pub mod ie;
pub mod message;

pub use error::{Action, DecodeError, EmitError};
pub use header::Repr as HeaderRepr;
pub use ie::{Grouped, Ie, RawIe};
pub use message::{Body, Message};

/// UDP port of PFCP (TS 29.244 section 4.2.2).
pub const PORT: u16 = 8805;

/// Cause values (TS 29.244 section 8.2.1, table 8.2.1-1).
pub mod cause {
    pub const REQUEST_ACCEPTED: u8 = 1;
    pub const MORE_USAGE_REPORT_TO_SEND: u8 = 2;
    pub const REQUEST_PARTIALLY_ACCEPTED: u8 = 3;
    pub const REQUEST_REJECTED: u8 = 64;
    pub const SESSION_CONTEXT_NOT_FOUND: u8 = 65;
    pub const MANDATORY_IE_MISSING: u8 = 66;
    pub const CONDITIONAL_IE_MISSING: u8 = 67;
    pub const INVALID_LENGTH: u8 = 68;
    pub const MANDATORY_IE_INCORRECT: u8 = 69;
    pub const INVALID_FORWARDING_POLICY: u8 = 70;
    pub const INVALID_F_TEID_ALLOCATION_OPTION: u8 = 71;
    pub const NO_ESTABLISHED_PFCP_ASSOCIATION: u8 = 72;
    pub const RULE_CREATION_MODIFICATION_FAILURE: u8 = 73;
    pub const PFCP_ENTITY_IN_CONGESTION: u8 = 74;
    pub const NO_RESOURCES_AVAILABLE: u8 = 75;
    pub const SERVICE_NOT_SUPPORTED: u8 = 76;
    pub const SYSTEM_FAILURE: u8 = 77;
    pub const REDIRECTION_REQUESTED: u8 = 78;
    pub const ALL_DYNAMIC_ADDRESSES_ARE_OCCUPIED: u8 = 79;

    /// Values 1..=63 are acceptance causes; 64 and up are rejections (section 8.2.1).
    pub const fn is_accepted(c: u8) -> bool {
        c >= 1 && c < 64
    }
}
