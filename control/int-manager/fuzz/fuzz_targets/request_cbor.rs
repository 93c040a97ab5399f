//! Fuzz `peregrine_int_manager::codec::decode_cbor` and `Rule::from_cbor` (the 0x32 option payload):
//! decode; if it decodes, encode (CBOR) and decode again, and the request must be the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_int::request::{Request, Rule};
use peregrine_int_manager::codec::{decode_cbor, decode_json, RequestJson, RuleCbor};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = decode_cbor(data) {
        let again = decode_cbor(&req.to_cbor()).expect("re-encoded request must decode");
        assert_eq!(again, req);
        let via_json = decode_json(&req.to_json()).expect("json");
        assert_eq!(via_json, req);
    }
    if let Ok(rule) = Rule::from_cbor(data) {
        let payload = rule.to_option_payload();
        if let Ok(p) = payload {
            assert_eq!(Rule::from_cbor(&p).expect("option payload"), rule);
        }
        assert_eq!(decode_cbor(&rule.to_cbor()), Ok(Request::Install(rule)));
    }
});
