//! The INT manager's rule requests and replies (Miranda et al., "A Flexible In-band Network
//! Telemetry Framework", section III-B "INTManager"): the message model, I/O-free.
//!
//! The controller sends the INTManager requests over a request/reply socket and "every
//! configuration sent by the control plane gets an immediate confirmation" (III-B). This module is
//! the validated model: [`Request`], [`Rule`], [`Reply`], their serde form ([`WireRequest`]) and
//! the validation that names the offending field ([`RequestError`]). Reading requests from bytes
//! (JSON or CBOR, with the size and depth limits below) is the control side's job:
//! `peregrine_int_manager::codec`. Applying a request to the namespace table is
//! [`crate::namespace::NamespaceTable::handle`]. The dataplane needs only the encoder:
//! [`Rule::to_option_payload`] for the in-band 0x32 option.
//!
//! # Schema
//! A message is a map with exactly one key naming the request, whose value is a map of fields.
//! The install message is the seed's **Listing 1** ("INT Request message format"), with its field
//! names reproduced exactly:
//!
//! ```text
//! "int_request": {
//!   "ns_id":        <number, namespace id>,                   1..=65535
//!   "app_id":       <number, application id>,                 0..=2^32-1
//!   "src_ip":       <string, IPv6 source address>,
//!   "dst_ip":       <string, IPv6 destination address>,
//!   "src_port":     <number, source port, 0 for any>,         0..=65535
//!   "dst_port":     <number, dest. port, 0 for any>,          0..=65535
//!   "protocol":     <string, TCP/UDP/ICMP>,                   case-insensitive
//!   "trace_type":   <string, trace type in hex>,              e.g. "0x7000E000", Table I bits only
//!   "mode":         <string, count/frequency/probability>,
//!   "mode_setting": <number, value for mode> }
//! ```
//!
//! (The seed's text has OCR damage: `"src ip"` and `"mode setting"` are `src_ip` and
//! `mode_setting`, like their neighbours.) Listing 1 is a template with placeholders, not a
//! concrete message; the seed's experiments (section IV-A) use trace type `0x7000E000`.
//!
//! Optional extensions of the install message (not in Listing 1; they are the modifiable fields of
//! **Listing 2**, lines 6-9, so that a rule can be installed already configured; omitted means the
//! default shown): `"transmit_report": bool` (true), `"piggyback_report": bool` (false),
//! `"extract_report": bool` (false), `"hop_enabled": bool` (true).
//!
//! The other requests (the seed names the operations in III-B but gives no message format; these
//! are ours, in the same style):
//!
//! ```text
//! {"int_modify": {"ns_id": n, any non-empty subset of:
//!     "mode", "mode_setting", "trace_type", "transmit_report", "piggyback_report",
//!     "extract_report", "hop_enabled",
//!     "enable_hops": [node id, ...], "disable_hops": [node id, ...] }}
//! {"int_remove": {"ns_id": n}}
//! {"int_list":   {}}
//! {"int_stats":  {} | {"ns_id": n}}
//! ```
//!
//! Modes (III-B): `count` = one INT packet every N packets (N integer, 1..=2^32-1); `frequency` =
//! one INT packet every N milliseconds (N integer, 1..=[`MAX_FREQUENCY_MS`]); `probability` =
//! "with a probability of N%" (N a number in (0, 100]; the seed states it in percent, so the
//! setting is a percentage, not a fraction; [`Mode::probability`] gives the fraction in [0, 1]).
//!
//! CBOR (RFC 8949) uses the same logical schema: text-string keys, the same values. Both decoders
//! reject unknown fields, duplicate fields, trailing bytes, payloads over [`MAX_PAYLOAD`] and
//! nesting deeper than [`MAX_DEPTH`] (JSON: checked on the raw bytes before parsing; CBOR: a
//! recursion limit, and anywhere the schema expects a map or scalar a nested array is rejected by
//! type before it is descended). A `null` value counts as an absent field.
//!
//! # In-band form
//! After installation the INTSource sends the request in-band in the first data packet, as IPv6
//! option type [`OPTION_TYPE_INT_REQUEST`] (0x32) carrying "the JSON message ... encoded ... using
//! CBOR" (III-B, Fig. 3). [`Rule::to_cbor`] produces exactly that: the CBOR encoding of the
//! `{"int_request": {...}}` message, with optional flags left out when they are at their default.
//! The option data must fit [`MAX_OPTION_PAYLOAD`] bytes ([`Rule::to_option_payload`]). 0x32 is not
//! IANA-assigned: experimental (docs/int.md, "In-band request and report").

use serde::{Deserialize, Serialize};

mod wire;

use std::fmt;
use std::net::Ipv6Addr;
pub use wire::WireRequest;
use wire::WireRule;

/// IPv6 option type of the in-band INT request (seed III-B, Fig. 3). Experimental, unassigned.
pub const OPTION_TYPE_INT_REQUEST: u8 = 0x32;
/// Largest in-band request payload: the option's data length is one byte, and we keep the whole
/// option (type, length, data) within 255 bytes.
pub const MAX_OPTION_PAYLOAD: usize = 253;
/// Largest request message the decoders accept (`peregrine_int_manager::codec`'s
/// `decode_json` / `decode_cbor`).
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// Deepest nesting of arrays/maps accepted (the schema itself needs 3).
pub const MAX_DEPTH: usize = 8;
/// Largest `frequency` mode setting: one INT packet per hour.
pub const MAX_FREQUENCY_MS: u64 = 3_600_000;
/// Most node ids in one `enable_hops` / `disable_hops` list.
pub const MAX_HOP_LIST: usize = 64;

pub use peregrine_wire::int::TraceType;

/// A trace type as Listing 1 writes it: `"0x7000E000"`.
fn to_hex(t: TraceType) -> String {
    format!("0x{:08X}", t.0)
}

/// Transport protocol of the 5-tuple (Listing 1: "TCP/UDP/ICMP"; ICMP means ICMPv6 on IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// ICMPv6 (58).
    Icmp,
}

impl Protocol {
    /// IPv6 next-header value.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Icmp => 58,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Icmp => "icmp",
        }
    }
}

/// Which sampling mode (III-B), without its setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModeKind {
    /// `"count"`.
    Count,
    /// `"frequency"`.
    Frequency,
    /// `"probability"`.
    Probability,
}

impl ModeKind {
    fn name(self) -> &'static str {
        match self {
            ModeKind::Count => "count",
            ModeKind::Frequency => "frequency",
            ModeKind::Probability => "probability",
        }
    }
    fn parse(s: &str) -> Result<Self, RequestError> {
        match s {
            "count" => Ok(ModeKind::Count),
            "frequency" => Ok(ModeKind::Frequency),
            "probability" => Ok(ModeKind::Probability),
            _ => Err(RequestError::UnknownMode { value: truncate(s) }),
        }
    }
}

/// Sampling mode with its setting (III-B: "the mode defines the sampling method (i.e. when the
/// INTSource will generate a packet with INT headers)").
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// One INT packet every `n` packets.
    Count(u32),
    /// One INT packet every `ms` milliseconds.
    Frequency(u32),
    /// INT on each packet with probability `percent` % (0 < percent <= 100).
    Probability(f64),
}

impl Mode {
    /// The mode's kind.
    pub fn kind(self) -> ModeKind {
        match self {
            Mode::Count(_) => ModeKind::Count,
            Mode::Frequency(_) => ModeKind::Frequency,
            Mode::Probability(_) => ModeKind::Probability,
        }
    }
    /// The `mode_setting` value.
    pub fn setting(self) -> f64 {
        match self {
            Mode::Count(n) | Mode::Frequency(n) => n as f64,
            Mode::Probability(p) => p,
        }
    }
    /// For [`Mode::Probability`], the probability as a fraction in [0, 1].
    pub fn probability(self) -> Option<f64> {
        match self {
            Mode::Probability(p) => Some(p / 100.0),
            _ => None,
        }
    }

    /// Builds and validates a mode from its kind and `mode_setting`.
    pub fn from_parts(kind: ModeKind, setting: f64) -> Result<Mode, RequestError> {
        match kind {
            ModeKind::Count => {
                if setting == 0.0 {
                    return Err(RequestError::ZeroPacketCount);
                }
                match exact_uint(setting) {
                    Some(n) if n <= u32::MAX as u64 => Ok(Mode::Count(n as u32)),
                    _ => Err(RequestError::BadModeSetting {
                        mode: "count",
                        value: setting,
                        reason: "packet count must be an integer in 1..=4294967295",
                    }),
                }
            }
            ModeKind::Frequency => match exact_uint(setting) {
                Some(0) => Err(RequestError::FrequencyOutOfRange { value: setting }),
                Some(n) if n <= MAX_FREQUENCY_MS => Ok(Mode::Frequency(n as u32)),
                _ => Err(RequestError::FrequencyOutOfRange { value: setting }),
            },
            ModeKind::Probability => {
                if setting.is_finite() && setting > 0.0 && setting <= 100.0 {
                    Ok(Mode::Probability(setting))
                } else {
                    Err(RequestError::ProbabilityOutOfRange { value: setting })
                }
            }
        }
    }
}

fn exact_uint(v: f64) -> Option<u64> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 9_007_199_254_740_992.0 {
        Some(v as u64)
    } else {
        None
    }
}

/// What the INTSink does with reports and whether INTInter collects (Listing 2, lines 6-9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flags {
    /// Publish the report to the controller.
    pub transmit_report: bool,
    /// Send the report in-band back to the source.
    pub piggyback_report: bool,
    /// An intermediate node removes an in-band report and transmits it to the controller.
    pub extract_report: bool,
    /// INTInter elements collect HbH metadata for this namespace.
    pub hop_enabled: bool,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            transmit_report: true,
            piggyback_report: false,
            extract_report: false,
            hop_enabled: true,
        }
    }
}

/// A validated INT rule: the fields of Listing 1 plus the flags of Listing 2 lines 6-9.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WireRule", into = "WireRule")]
pub struct Rule {
    /// `ns_id`: the namespace, unique key of the rule (III-A), 1..=65535.
    pub ns_id: u16,
    /// `app_id`: correlates the rules of one application.
    pub app_id: u32,
    /// `src_ip`.
    pub src_ip: Ipv6Addr,
    /// `dst_ip`.
    pub dst_ip: Ipv6Addr,
    /// `src_port`, 0 = any.
    pub src_port: u16,
    /// `dst_port`, 0 = any.
    pub dst_port: u16,
    /// `protocol`.
    pub protocol: Protocol,
    /// `trace_type`.
    pub trace_type: TraceType,
    /// `mode` and `mode_setting`.
    pub mode: Mode,
    /// Report handling and hop collection flags.
    pub flags: Flags,
}

/// The fields a modify request may change (III-B: "the items of lines 6 to 9 of Listing 2 can be
/// modified through API calls ... (also mode and mode setting)"), plus trace type and per-node
/// hop enable/disable. `None` / empty = unchanged.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModifyFields {
    /// New sampling mode kind.
    pub mode: Option<ModeKind>,
    /// New `mode_setting`; validated against the resulting mode when applied.
    pub mode_setting: Option<f64>,
    /// New trace type.
    pub trace_type: Option<TraceType>,
    /// New `transmit_report`.
    pub transmit_report: Option<bool>,
    /// New `piggyback_report`.
    pub piggyback_report: Option<bool>,
    /// New `extract_report`.
    pub extract_report: Option<bool>,
    /// New namespace-wide `hop_enabled`.
    pub hop_enabled: Option<bool>,
    /// Node ids whose collection is forced on (overrides `hop_enabled`).
    pub enable_hops: Vec<u16>,
    /// Node ids whose collection is forced off (overrides `hop_enabled`).
    pub disable_hops: Vec<u16>,
}

impl ModifyFields {
    /// True if nothing would change.
    pub fn is_empty(&self) -> bool {
        *self == ModifyFields::default()
    }
}

/// A request to the INT manager.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// `int_request`: install a rule (Listing 1).
    Install(Rule),
    /// `int_modify`: change some fields of an installed rule.
    Modify {
        /// Namespace to modify.
        namespace: u16,
        /// What to change.
        changes: ModifyFields,
    },
    /// `int_remove`: remove a rule.
    Remove {
        /// Namespace to remove.
        namespace: u16,
    },
    /// `int_list`: list installed rules.
    List,
    /// `int_stats`: counters of one namespace or all.
    Stats {
        /// Namespace, or all if `None`.
        namespace: Option<u16>,
    },
}

/// Counters and in-band request state of one namespace (Listing 2, lines 3-5 and 10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct NamespaceStats {
    /// Namespace.
    pub ns_id: u16,
    /// Application id.
    pub app_id: u32,
    /// Packets of the flow transmitted (seen at the source).
    pub tx_packets: u64,
    /// Bytes of the flow transmitted.
    pub tx_bytes: u64,
    /// Packets of the flow received.
    pub rx_packets: u64,
    /// Bytes of the flow received.
    pub rx_bytes: u64,
    /// INT-carrying packets generated.
    pub int_packets: u64,
    /// `request_sent`.
    pub request_sent: bool,
    /// `last_request_tx`, ns.
    pub last_request_tx_ns: Option<u64>,
    /// `last_int_tx`, ns.
    pub last_int_tx_ns: Option<u64>,
}

/// Successful reply payloads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ReplyBody {
    /// Rule installed.
    Installed {
        /// Namespace.
        ns_id: u16,
    },
    /// Rule modified.
    Modified {
        /// Namespace.
        ns_id: u16,
    },
    /// Rule removed.
    Removed {
        /// Namespace.
        ns_id: u16,
    },
    /// Installed rules, by namespace.
    List {
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Counters.
    Stats {
        /// Per namespace.
        stats: Vec<NamespaceStats>,
    },
}

/// The immediate reply to every request (III-B).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    /// Success.
    Ok(ReplyBody),
    /// Failure, with an HTTP-like code (400 invalid request, 404 unknown namespace, 409 duplicate
    /// namespace, 413 too large, 507 table full) and a message naming the field and the reason.
    Error {
        /// Error class.
        code: u16,
        /// Human-readable reason.
        message: String,
    },
}

impl Reply {
    /// Error reply from anything with a code and a message.
    pub fn error(code: u16, message: impl fmt::Display) -> Reply {
        Reply::Error {
            code,
            message: message.to_string(),
        }
    }
}

/// Why a request was rejected. Every variant names the offending field and the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// Message longer than [`MAX_PAYLOAD`].
    #[error("payload too large: {len} bytes, limit {max}")]
    PayloadTooLarge {
        /// Length.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// Arrays/maps nested deeper than [`MAX_DEPTH`].
    #[error("nesting too deep: limit {max} levels")]
    NestingTooDeep {
        /// Limit.
        max: usize,
    },
    /// Not valid JSON/CBOR, or not the schema's shape: unknown request or unknown field,
    /// duplicate field, trailing bytes (the decoder's message names the field where it can).
    #[error("malformed request: {0}")]
    Malformed(String),
    /// A required field is absent.
    #[error("missing field `{field}`")]
    MissingField {
        /// Field.
        field: &'static str,
    },
    /// A field has the wrong JSON/CBOR type.
    #[error("field `{field}`: expected {expected}, got {got}")]
    WrongType {
        /// Field.
        field: &'static str,
        /// Expected type.
        expected: &'static str,
        /// Actual type.
        got: &'static str,
    },
    /// `ns_id` not in 1..=65535.
    #[error("field `ns_id`: namespace {value} out of range 1..=65535")]
    NamespaceOutOfRange {
        /// Value.
        value: String,
    },
    /// `app_id` not in 0..=2^32-1.
    #[error("field `app_id`: {value} out of range 0..=4294967295")]
    AppIdOutOfRange {
        /// Value.
        value: String,
    },
    /// `src_ip` / `dst_ip` is not an IPv6 address.
    #[error("field `{field}`: {value:?} is not an IPv6 address")]
    BadIpAddress {
        /// Field.
        field: &'static str,
        /// Value.
        value: String,
    },
    /// Port above 65535 (or negative / fractional).
    #[error("field `{field}`: port {value} out of range 0..=65535")]
    PortOutOfRange {
        /// Field.
        field: &'static str,
        /// Value.
        value: String,
    },
    /// Non-zero port with ICMP.
    #[error("field `{field}`: ICMP has no ports, must be 0")]
    PortWithIcmp {
        /// Field.
        field: &'static str,
    },
    /// `protocol` not TCP/UDP/ICMP.
    #[error("field `protocol`: unknown protocol {value:?} (expected TCP, UDP or ICMP)")]
    UnknownProtocol {
        /// Value.
        value: String,
    },
    /// `trace_type` not a hex string of at most 32 bits, or zero.
    #[error("field `trace_type`: {value:?} {reason}")]
    BadTraceType {
        /// Value.
        value: String,
        /// Reason.
        reason: &'static str,
    },
    /// `trace_type` sets bits Table I does not allocate.
    #[error(
        "field `trace_type`: bits {unknown:#010X} are not allocated in Table I (allowed {:#010X})",
        TraceType::KNOWN
    )]
    UnknownTraceTypeBits {
        /// The unallocated bits that were set.
        unknown: u32,
    },
    /// `mode` not count/frequency/probability.
    #[error("field `mode`: unknown mode {value:?} (expected count, frequency or probability)")]
    UnknownMode {
        /// Value.
        value: String,
    },
    /// `mode_setting` 0 with mode count.
    #[error("field `mode_setting`: packet count must not be 0")]
    ZeroPacketCount,
    /// `mode_setting` with mode frequency is 0, fractional or above [`MAX_FREQUENCY_MS`].
    #[error(
        "field `mode_setting`: frequency {value} ms out of range 1..={MAX_FREQUENCY_MS} (integer)"
    )]
    FrequencyOutOfRange {
        /// Value.
        value: f64,
    },
    /// `mode_setting` with mode probability is not in (0, 100] percent.
    #[error("field `mode_setting`: probability {value} % out of range (0, 100] (the seed's N%; 100 = every packet)")]
    ProbabilityOutOfRange {
        /// Value.
        value: f64,
    },
    /// Other invalid `mode_setting`.
    #[error("field `mode_setting`: {value} invalid for mode {mode}: {reason}")]
    BadModeSetting {
        /// Mode.
        mode: &'static str,
        /// Value.
        value: f64,
        /// Reason.
        reason: &'static str,
    },
    /// `enable_hops` / `disable_hops` list problem.
    #[error("field `{field}`: {reason}")]
    BadHopList {
        /// Field.
        field: &'static str,
        /// Reason.
        reason: String,
    },
    /// `int_modify` with nothing to change.
    #[error("int_modify for namespace {ns_id} changes nothing")]
    EmptyModify {
        /// Namespace.
        ns_id: u16,
    },
    /// In-band payload larger than [`MAX_OPTION_PAYLOAD`].
    #[error("in-band INT request is {len} bytes, the 0x32 option holds at most {max}")]
    OptionTooLarge {
        /// Length.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// CBOR in-band payload was a valid request but not `int_request`.
    #[error("in-band payload is not an int_request")]
    NotAnInstall,
}

impl RequestError {
    /// HTTP-like code for [`Reply::Error`]: 413 for size limits, 400 otherwise.
    pub fn code(&self) -> u16 {
        match self {
            RequestError::PayloadTooLarge { .. } | RequestError::OptionTooLarge { .. } => 413,
            _ => 400,
        }
    }
    /// The matching error reply.
    pub fn to_reply(&self) -> Reply {
        Reply::error(self.code(), self)
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

impl Rule {
    /// The in-band INT request payload (seed III-B, Fig. 3, option 0x32): the CBOR encoding of
    /// the Listing 1 message `{"int_request": {...}}`. Not size-checked; see
    /// [`Rule::to_option_payload`].
    pub fn to_cbor(&self) -> Vec<u8> {
        Request::Install(self.clone()).to_cbor()
    }

    /// [`Rule::to_cbor`], checked to fit the 0x32 option ([`MAX_OPTION_PAYLOAD`] bytes).
    pub fn to_option_payload(&self) -> Result<Vec<u8>, RequestError> {
        let v = self.to_cbor();
        if v.len() > MAX_OPTION_PAYLOAD {
            return Err(RequestError::OptionTooLarge {
                len: v.len(),
                max: MAX_OPTION_PAYLOAD,
            });
        }
        Ok(v)
    }

    /// Does this rule match a packet's 5-tuple? Ports 0 in the rule match any port (Listing 1).
    pub fn matches(&self, src: Ipv6Addr, dst: Ipv6Addr, proto: u8, sport: u16, dport: u16) -> bool {
        self.src_ip == src
            && self.dst_ip == dst
            && self.protocol.number() == proto
            && (self.src_port == 0 || self.src_port == sport)
            && (self.dst_port == 0 || self.dst_port == dport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_type_halves() {
        let t = TraceType::SEED_EXPERIMENTS;
        assert_eq!(t.e2e(), 0x7000);
        assert_eq!(t.hbh(), 0xE000);
        assert_eq!(to_hex(t), "0x7000E000");
    }

    #[test]
    fn mode_bounds() {
        assert_eq!(Mode::from_parts(ModeKind::Count, 1.0), Ok(Mode::Count(1)));
        assert_eq!(
            Mode::from_parts(ModeKind::Count, 0.0),
            Err(RequestError::ZeroPacketCount)
        );
        assert!(Mode::from_parts(ModeKind::Count, 1.5).is_err());
        assert!(Mode::from_parts(ModeKind::Frequency, MAX_FREQUENCY_MS as f64).is_ok());
        assert!(Mode::from_parts(ModeKind::Frequency, MAX_FREQUENCY_MS as f64 + 1.0).is_err());
        assert_eq!(
            Mode::from_parts(ModeKind::Probability, 12.5)
                .unwrap()
                .probability(),
            Some(0.125)
        );
        for bad in [0.0, -1.0, 100.5, f64::NAN, f64::INFINITY] {
            assert!(Mode::from_parts(ModeKind::Probability, bad).is_err());
        }
    }
}
