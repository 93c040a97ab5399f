//! IPv6 Hop-by-Hop / Destination option TLVs (RFC 8200 section 4.2): Pad1, PadN, unknown.

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
