//! Fuzz `peregrine_wire::roce`: BTH, RETH, AtomicETH, AETH and the ICRC paths.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| peregrine_wire::roce::fuzz(data));
