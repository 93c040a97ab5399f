//! Fuzz the outer-fragment reassembly (`peregrine_dataplane::upf::reasm`): the input is a
//! stream of fragments, each a 2-byte length, a time step and the IP packet, fed to a small
//! reassembler whose completed datagrams are written out. Must never panic, and the bytes
//! held never exceed the configured bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    peregrine_dataplane::upf::reasm::fuzz(data);
});
