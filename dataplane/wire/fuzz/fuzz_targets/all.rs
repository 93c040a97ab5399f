//! Fuzz every parser in `peregrine_wire` over the same input (`peregrine_wire::fuzz::all`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine_wire::fuzz::all(data));
