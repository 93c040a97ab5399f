//! The P4 twin's generator (issue 16): one source of truth for the P4 programs in `p4/`.
//!
//! * [`constants`]: `p4/include/constants.p4` from the Rust definitions.
//! * [`config`] + [`model`]: a Peregrine config, read with the daemon's own config types
//!   (`peregrine_control`: one schema, its defaults, unknown keys refused), its sessions
//!   compiled by `peregrine-rules` into the same tables the workers read, then flattened into
//!   P4 table entries.
//! * [`bfrt`] (Tofino BF Runtime JSON) and [`bmv2`] (`simple_switch_CLI` commands) render
//!   them; [`names`] holds every P4 name they use.
//! * [`telemetry`]: Kestrel, fridge and DTA reporter entries of the TNA telemetry program;
//!   [`kestrel_regs`] reads its Kestrel registers back into the software's bucket layout.
//! * [`p4decl`] + [`check`]: a structural check that the P4 text declares those names (not
//!   a compiler; `scripts/p4-check.sh` runs p4c when one is installed).
#![forbid(unsafe_code)]

pub mod bfrt;
pub mod bmv2;
pub mod check;
pub mod config;
pub mod constants;
pub mod kestrel_regs;
pub mod model;
pub mod names;
pub mod p4decl;
pub mod telemetry;
