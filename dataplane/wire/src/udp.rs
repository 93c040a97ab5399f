//! UDP (RFC 768) with checksums over IPv4 and IPv6 pseudo-headers.

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
