//! ICMPv6 (RFC 4443): echo request/reply and the error types we emit.

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
