//! The detectors' model loader over untrusted bytes (`[kestrel.detect]` names files the
//! operator supplies): `gbt::Model::from_json` must refuse what it cannot evaluate, and a
//! model it accepts must evaluate any input vector (short, long, NaN) without panicking or
//! looping, to a probability.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_control::kestrel::gbt::Model;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = Model::from_json(text) else {
        return;
    };
    for x in [
        vec![],
        vec![0.0f32; m.num_feature.min(4096)],
        vec![f32::NAN; m.num_feature.min(4096)],
        vec![1e30f32; m.num_feature.min(4096) + 3],
    ] {
        let p = m.predict(&x);
        assert!(p.is_nan() || (0.0..=1.0).contains(&p), "{p}");
    }
});
