//! Fuzz the INT option parsers (`peregrine_wire::int::fuzz`): the seed Hop-by-Hop header,
//! 0x31 option data, hop entries, 0x11 E2E data, 0x32/0x33 in-band options and the IOAM
//! mapping; every parse that succeeds must re-emit and re-parse to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    peregrine_wire::int::fuzz(data);
});
