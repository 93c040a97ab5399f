//! IEEE 802.1Q VLAN tags (and 802.1ad outer tags).

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
