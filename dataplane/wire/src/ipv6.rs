//! IPv6 fixed header (RFC 8200 section 3).

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
