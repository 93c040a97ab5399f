//! Parse arbitrary bytes as a PFCP message; whatever parses must emit, and the emitted
//! bytes must parse back to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_pfcp::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse(data) {
        let bytes = m.to_vec().expect("a parsed message must emit");
        let again = Message::parse(&bytes).expect("emitted bytes must parse");
        assert_eq!(again, m);
    }
});
