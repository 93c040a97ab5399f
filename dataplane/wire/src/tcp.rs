//! TCP header (RFC 9293): ports, sequence numbers, flags; options are skipped.

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
