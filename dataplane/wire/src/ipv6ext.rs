//! IPv6 extension headers (RFC 8200 section 4): Hop-by-Hop, Destination Options, Routing, Fragment, and the chain walk.

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
