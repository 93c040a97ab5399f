//! Fuzz `peregrine_int_manager::codec::decode_json`: decode; if it decodes, encode (JSON) and decode
//! again, and the request must be the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_int_manager::codec::{decode_cbor, decode_json, RequestJson};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = decode_json(data) {
        let again = decode_json(&req.to_json()).expect("re-encoded request must decode");
        assert_eq!(again, req);
        // The CBOR form of a valid request is valid too.
        let via_cbor = decode_cbor(&req.to_cbor()).expect("cbor");
        assert_eq!(via_cbor, req);
    }
});
