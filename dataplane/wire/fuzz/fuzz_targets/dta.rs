//! Fuzz `peregrine_wire::dta`: DTA reports in both base-header variants and ACK/NACKs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine_wire::dta::fuzz(data));
