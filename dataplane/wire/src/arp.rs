//! ARP for IPv4 over Ethernet (RFC 826).

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
