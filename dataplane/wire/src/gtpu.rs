//! GTP-U v1 header (3GPP TS 29.281 section 5): flags, optional fields, extension-header chain.

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
