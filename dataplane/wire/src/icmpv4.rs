//! ICMPv4 (RFC 792): echo request/reply and the error types we emit.

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
