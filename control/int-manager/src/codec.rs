//! Rule API messages from and to bytes: JSON (RFC 8259) and CBOR (RFC 8949), the two
//! encodings of the INTManager's rule API (Miranda et al., "A Flexible In-band Network
//! Telemetry Framework", section III-B, Listing 1; schema in `peregrine_int::request`).
//!
//! The dataplane crate holds the validated model and the in-band 0x32 encoder; reading
//! untrusted bytes is control-side work and lives here. Both decoders reject unknown fields,
//! duplicate fields, trailing bytes, payloads over [`MAX_PAYLOAD`] and nesting deeper than
//! [`MAX_DEPTH`] (JSON: checked on the raw bytes before parsing; CBOR: a recursion limit).
//!
//! The methods come as extension traits so that call sites read `Reply::from_json(b)`,
//! `req.to_json()` and `Rule::from_cbor(b)` with the trait in scope.

use peregrine_int::request::{Reply, Request, RequestError, Rule, WireRequest, MAX_OPTION_PAYLOAD};
use serde::de::DeserializeOwned;

pub use peregrine_int::request::{MAX_DEPTH, MAX_PAYLOAD};

/// Rejects oversized payloads and JSON nested deeper than [`MAX_DEPTH`] before parsing.
fn check_json(bytes: &[u8]) -> Result<(), RequestError> {
    if bytes.len() > MAX_PAYLOAD {
        return Err(RequestError::PayloadTooLarge {
            len: bytes.len(),
            max: MAX_PAYLOAD,
        });
    }
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for &b in bytes {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(RequestError::NestingTooDeep { max: MAX_DEPTH });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Decodes and validates a JSON request (schema in `peregrine_int::request`; install = the
/// paper's Listing 1).
pub fn decode_json(bytes: &[u8]) -> Result<Request, RequestError> {
    check_json(bytes)?;
    let wire: WireRequest =
        serde_json::from_slice(bytes).map_err(|e| RequestError::Malformed(e.to_string()))?;
    Request::try_from(wire)
}

fn cbor_from<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, RequestError> {
    if bytes.len() > MAX_PAYLOAD {
        return Err(RequestError::PayloadTooLarge {
            len: bytes.len(),
            max: MAX_PAYLOAD,
        });
    }
    let mut rest = bytes;
    // ciborium counts the top-level item too, hence + 1.
    let v =
        ciborium::de::from_reader_with_recursion_limit(&mut rest, MAX_DEPTH + 1).map_err(|e| {
            match e {
                ciborium::de::Error::RecursionLimitExceeded => {
                    RequestError::NestingTooDeep { max: MAX_DEPTH }
                }
                ciborium::de::Error::Semantic(_, m) => RequestError::Malformed(m),
                ciborium::de::Error::Syntax(off) => {
                    RequestError::Malformed(format!("invalid CBOR at byte {off}"))
                }
                ciborium::de::Error::Io(_) => RequestError::Malformed("truncated CBOR".into()),
            }
        })?;
    if !rest.is_empty() {
        return Err(RequestError::Malformed(format!(
            "{} trailing bytes after the CBOR item",
            rest.len()
        )));
    }
    Ok(v)
}

/// Decodes and validates a CBOR request (same logical schema as JSON, RFC 8949).
pub fn decode_cbor(bytes: &[u8]) -> Result<Request, RequestError> {
    Request::try_from(cbor_from::<WireRequest>(bytes)?)
}

/// JSON for a request (the CBOR encoder, `Request::to_cbor`, is in the model crate because
/// the INT source needs it for the 0x32 option).
pub trait RequestJson {
    /// JSON encoding (the schema in `peregrine_int::request`).
    fn to_json(&self) -> Vec<u8>;
}

impl RequestJson for Request {
    fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&WireRequest::from(self)).unwrap_or_default()
    }
}

/// Reply encoding and decoding.
pub trait ReplyCodec: Sized {
    /// JSON encoding.
    fn to_json(&self) -> Vec<u8>;
    /// CBOR encoding.
    fn to_cbor(&self) -> Vec<u8>;
    /// Decodes a JSON reply (for clients and tests).
    fn from_json(bytes: &[u8]) -> Result<Self, RequestError>;
    /// Decodes a CBOR reply (for clients and tests).
    fn from_cbor(bytes: &[u8]) -> Result<Self, RequestError>;
}

impl ReplyCodec for Reply {
    fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
    fn to_cbor(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail and every value here is serializable.
        let _ = ciborium::ser::into_writer(self, &mut out);
        out
    }
    fn from_json(bytes: &[u8]) -> Result<Reply, RequestError> {
        check_json(bytes)?;
        serde_json::from_slice(bytes).map_err(|e| RequestError::Malformed(e.to_string()))
    }
    fn from_cbor(bytes: &[u8]) -> Result<Reply, RequestError> {
        cbor_from(bytes)
    }
}

/// Decoding the in-band request (the 0x32 option payload a transit or sink saw).
pub trait RuleCbor: Sized {
    /// Parses a 0x32 option payload: at most [`MAX_OPTION_PAYLOAD`] bytes, an `int_request`.
    fn from_cbor(bytes: &[u8]) -> Result<Self, RequestError>;
}

impl RuleCbor for Rule {
    fn from_cbor(bytes: &[u8]) -> Result<Rule, RequestError> {
        if bytes.len() > MAX_OPTION_PAYLOAD {
            return Err(RequestError::OptionTooLarge {
                len: bytes.len(),
                max: MAX_OPTION_PAYLOAD,
            });
        }
        match decode_cbor(bytes)? {
            Request::Install(r) => Ok(r),
            _ => Err(RequestError::NotAnInstall),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_depth_scan_ignores_brackets_in_strings() {
        let s = format!("{{\"a\":\"{}\"}}", "[".repeat(100));
        assert!(check_json(s.as_bytes()).is_ok());
        let s = "[".repeat(MAX_DEPTH + 1);
        assert_eq!(
            check_json(s.as_bytes()),
            Err(RequestError::NestingTooDeep { max: MAX_DEPTH })
        );
    }

    #[test]
    fn scalar_rejects_nested_values_by_kind() {
        let r = decode_json(br#"{"int_remove":{"ns_id":[1,[2]]}}"#);
        assert_eq!(
            r,
            Err(RequestError::WrongType {
                field: "ns_id",
                expected: "number",
                got: "array"
            })
        );
    }
}
