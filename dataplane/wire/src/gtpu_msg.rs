//! GTP-U signalling messages (3GPP TS 29.281 section 7): Echo Request/Response with Recovery IE, Error Indication, End Marker.

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
