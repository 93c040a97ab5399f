//! Pipeline stages of the platform. The UPF, INT and telemetry stages live beside these as
//! they land.

pub mod l3fwd;
pub mod steer;
pub mod xconnect;
