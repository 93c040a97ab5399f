//! The pcap/pcapng reader over arbitrary bytes: never panics, never loops forever.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    peregrine_dataplane::io::pcapfile::fuzz(data);
});
