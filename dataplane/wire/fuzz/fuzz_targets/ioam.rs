//! Fuzz `peregrine_wire::ioam`: parse, iterate, fill, round-trip the `Repr`s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine_wire::ioam::fuzz(data));
