//! Pipeline stages of the platform. The UPF, INT and telemetry stages live beside these as
//! they land.

pub mod impair;
pub mod impair_link;
pub mod l3fwd;
pub mod steer;
pub mod xconnect;
