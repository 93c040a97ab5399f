//! PFCP messages for tests (TS 29.244): [`samples`] holds one of every message type with
//! most typed IEs somewhere inside; [`requests`] builds the requests an SMF sends; `node`
//! (feature `n4`) drives an N4 node with them; `compile` (feature `n4`) has the builders with
//! every knob that the rule compiler's tests use.

#[cfg(feature = "n4")]
pub mod compile;
#[cfg(feature = "n4")]
pub mod node;
pub mod requests;
pub mod samples;
