//! PDU Session Container extension header (3GPP TS 38.415 section 5.5.2, GTP-U ext type 0x85).

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
