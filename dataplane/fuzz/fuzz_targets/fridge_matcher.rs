//! Fuzz the fridge's request/response matcher: classify any frame, then read its roles with
//! every kind enabled, both with the classifier's record and with a stale one (the first
//! bytes of the input as offsets). Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_dataplane::classify::classify;
use peregrine_dataplane::meta::{flags, PacketMeta};
use peregrine_dataplane::telemetry::fridge::matcher::roles;

fuzz_target!(|data: &[u8]| {
    let mut m = PacketMeta::EMPTY;
    let _ = classify(data, &mut m);
    let _ = roles(data, &m, 0x1f);
    if data.len() >= 8 {
        let o = |i: usize| u16::from_le_bytes([data[i], data[i + 1]]);
        let stale = PacketMeta {
            l3_off: o(0),
            l4_off: o(2),
            inner_l3_off: o(4),
            inner_l4_off: o(6),
            flags: flags::CLASSIFIED | u16::from(data[0] & 0x3e),
            proto: data[1],
            ..PacketMeta::EMPTY
        };
        let _ = roles(data, &stale, 0x1f);
    }
});
