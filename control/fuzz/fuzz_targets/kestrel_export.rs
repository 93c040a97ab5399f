//! The Kestrel export decoder and collector over untrusted bytes (a collector subscribes to
//! whatever publishes on its endpoint, and reads windows files it did not write).
//!
//! Input: messages separated by `\n--\n`. Each goes through `decode`; a message that decodes
//! must re-encode to bytes that decode to the same message, answer queries without panicking,
//! and be accepted or refused by a `Collector` (late parts merged into kept windows). The
//! whole input also goes through `read_file` as a CBOR sequence. A sketch message that
//! decodes also goes through the online detectors' feature code (`features::MsgView`, what
//! `peregrine run` computes per window), and every message through the alarm decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_control::kestrel::collector::Collector;
use peregrine_control::kestrel::export::{decode, encode, read_file, Msg};
use peregrine_control::kestrel::{detect, features};
use peregrine_control_fuzz::split_messages as split;

fuzz_target!(|data: &[u8]| {
    let _ = read_file(data);
    let mut c = Collector::new(4);
    for m in split(data).into_iter().take(8) {
        if let Ok(a) = detect::decode(m) {
            assert_eq!(detect::decode(&detect::encode(&a)), Ok(a));
        }
        let Ok(msg) = decode(m) else {
            assert!(c.add_bytes(m).is_err());
            continue;
        };
        let again = match &msg {
            Msg::Sketch(s) => {
                for s2 in &s.sketches {
                    for key in [(0u32, 0u8), (1, 9), (u32::MAX, 63)] {
                        let _ = s.query(s2.dir, s2.qid, key.0, key.1);
                    }
                }
                if let Ok(v) = features::MsgView::new(s) {
                    for dir in 0..2 {
                        let port = features::port_context(&v, dir);
                        for qid in [0usize, 7, 63] {
                            let x = features::qfi_base(&v, dir, qid, 9, &[0, 1, 7, u32::MAX], &port);
                            assert_eq!(x.len(), features::BASE_NAMES.len());
                        }
                    }
                }
                decode(&encode(s))
            }
            Msg::Pm(p) => decode(&encode(p)),
            Msg::Postcards(p) => decode(&encode(p)),
        };
        assert_eq!(
            again.as_ref(),
            Ok(&msg),
            "re-encoded message decodes differently"
        );
        let _ = c.add_bytes(m);
        for w in c.windows() {
            for s in &w.sketches {
                let _ = c.query(s.dir, s.qid, (7, 9));
            }
        }
    }
});
