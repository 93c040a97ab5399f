//! Decode and emit errors, and what a receiver should do about a decode error
//! (TS 29.244 section 7.6, "Error handling").

use crate::cause;

/// Why a PFCP message could not be decoded.
///
/// Every variant maps to an [`Action`]: silently discard, answer with Version Not Supported
/// Response (section 7.6.2), or reject with a Cause (section 8.2.1) and, where one is known, the
/// type of the Offending IE (section 8.2.22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Too short for the PFCP header (section 7.6.4: silently discarded).
    #[error("buffer shorter than the PFCP header")]
    Truncated,
    /// Version field is not 1 (section 7.6.2: answer with Version Not Supported Response).
    #[error("PFCP version {0} not supported")]
    UnsupportedVersion(u8),
    /// Message type not known to this implementation (section 7.6.3: discarded).
    #[error("unknown PFCP message type {0}")]
    UnknownMessageType(u8),
    /// The header length field claims more octets than the buffer holds, or fewer than the
    /// header itself.
    #[error("message length field {declared} inconsistent with {available} available octets")]
    InvalidLength { declared: usize, available: usize },
    /// S flag does not match the message type (node messages have S=0, session messages S=1,
    /// section 7.2.2.1).
    #[error("S flag wrong for message type {msg_type}")]
    SeidFlag { msg_type: u8 },
    /// An IE header or value runs past the end of its message or grouped IE.
    #[error("IE type {ie_type} runs past the end of its container")]
    IeLength { ie_type: u16 },
    /// A mandatory IE is absent (Cause 66).
    #[error("mandatory IE type {ie_type} missing")]
    MandatoryIeMissing { ie_type: u16 },
    /// A conditional IE whose condition holds is absent (Cause 67).
    #[error("conditional IE type {ie_type} missing")]
    ConditionalIeMissing { ie_type: u16 },
    /// An IE value could not be decoded (too short, inconsistent flags, bad enum value).
    #[error("IE type {ie_type} incorrect")]
    IeIncorrect { ie_type: u16 },
    /// Grouped IEs nested deeper than [`crate::ie::MAX_DEPTH`].
    #[error("grouped IE type {ie_type} nested too deep")]
    NestingTooDeep { ie_type: u16 },
}

/// What a receiver should do with a message that failed to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Drop the message without answering.
    Discard,
    /// Answer with a PFCP Version Not Supported Response (message type 11).
    VersionNotSupported,
    /// Answer a request with this Cause and, if known, an Offending IE.
    Reject {
        cause: u8,
        offending_ie: Option<u16>,
    },
}

impl DecodeError {
    /// What to do about it (section 7.6).
    pub fn action(&self) -> Action {
        match *self {
            DecodeError::Truncated | DecodeError::UnknownMessageType(_) => Action::Discard,
            DecodeError::UnsupportedVersion(_) => Action::VersionNotSupported,
            _ => Action::Reject {
                cause: self.cause().unwrap_or(cause::REQUEST_REJECTED),
                offending_ie: self.offending_ie(),
            },
        }
    }

    /// The Cause to answer a request with, `None` when the message is discarded or answered
    /// with Version Not Supported.
    pub fn cause(&self) -> Option<u8> {
        Some(match self {
            DecodeError::Truncated
            | DecodeError::UnknownMessageType(_)
            | DecodeError::UnsupportedVersion(_) => return None,
            DecodeError::InvalidLength { .. } | DecodeError::IeLength { .. } => {
                cause::INVALID_LENGTH
            }
            DecodeError::SeidFlag { .. } | DecodeError::NestingTooDeep { .. } => {
                cause::REQUEST_REJECTED
            }
            DecodeError::MandatoryIeMissing { .. } => cause::MANDATORY_IE_MISSING,
            DecodeError::ConditionalIeMissing { .. } => cause::CONDITIONAL_IE_MISSING,
            DecodeError::IeIncorrect { .. } => cause::MANDATORY_IE_INCORRECT,
        })
    }

    /// A stable short name of the variant, for metrics labels.
    pub fn kind(&self) -> &'static str {
        match self {
            DecodeError::Truncated => "truncated",
            DecodeError::UnsupportedVersion(_) => "unsupported_version",
            DecodeError::UnknownMessageType(_) => "unknown_message_type",
            DecodeError::InvalidLength { .. } => "invalid_length",
            DecodeError::SeidFlag { .. } => "seid_flag",
            DecodeError::IeLength { .. } => "ie_length",
            DecodeError::MandatoryIeMissing { .. } => "mandatory_ie_missing",
            DecodeError::ConditionalIeMissing { .. } => "conditional_ie_missing",
            DecodeError::IeIncorrect { .. } => "ie_incorrect",
            DecodeError::NestingTooDeep { .. } => "nesting_too_deep",
        }
    }

    /// Type of the IE to report in the Offending IE (section 8.2.22), if any.
    pub fn offending_ie(&self) -> Option<u16> {
        match *self {
            DecodeError::IeLength { ie_type }
            | DecodeError::MandatoryIeMissing { ie_type }
            | DecodeError::ConditionalIeMissing { ie_type }
            | DecodeError::IeIncorrect { ie_type }
            | DecodeError::NestingTooDeep { ie_type } => Some(ie_type),
            _ => None,
        }
    }
}

/// Why a message could not be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// The output buffer is shorter than the encoded message.
    #[error("buffer of {available} octets too small, need {needed}")]
    BufferTooSmall { needed: usize, available: usize },
    /// An IE value is longer than the 16-bit length field allows.
    #[error("IE type {ie_type} longer than 65535 octets")]
    IeTooLong { ie_type: u16 },
    /// The message is longer than the 16-bit header length field allows.
    #[error("message longer than 65535 octets after the first 4")]
    MessageTooLong,
    /// Sequence number above 24 bits, priority above 4 bits, or similar field overflow.
    #[error("field {0} out of range")]
    FieldRange(&'static str),
}
