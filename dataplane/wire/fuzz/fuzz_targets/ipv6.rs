//! Fuzz `peregrine_wire::ipv6`: parse, read every field, round-trip the `Repr`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine_wire::ipv6::fuzz(data));
