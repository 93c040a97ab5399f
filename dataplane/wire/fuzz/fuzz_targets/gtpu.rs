//! Fuzz `peregrine_wire::gtpu`: parse, read every field, round-trip the `Repr`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine_wire::gtpu::fuzz(data));
