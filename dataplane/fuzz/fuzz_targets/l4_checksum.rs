//! `upf::csum::fix_l4_checksum` over arbitrary IP packets: never panics, and a second pass
//! changes nothing (the checksum it wrote verifies).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut p = data.to_vec();
    peregrine_dataplane::upf::csum::fix_l4_checksum(&mut p);
    let once = p.clone();
    assert!(!peregrine_dataplane::upf::csum::fix_l4_checksum(&mut p));
    assert_eq!(p, once);
});
