//! Fuzz the INT manager's message dispatch (`ManagerCore::handle_message`, Miranda et al., III-B): the
//! input is split on the byte sequence `\n--\n` into up to 8 messages applied in turn to one
//! manager (so installs are followed by modifies/removes of the same namespace). Every message must
//! get a non-empty reply that decodes in the message's encoding; an error reply must not change
//! the table; the counters must account for every message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_int::request::Reply;
use peregrine_int_manager::codec::ReplyCodec;
use peregrine_int_manager::dispatch::detect_encoding;
use peregrine_int_manager::{Encoding, ManagerCore};

fn split(data: &[u8]) -> Vec<&[u8]> {
    let sep = b"\n--\n";
    let mut out = Vec::new();
    let mut rest = data;
    while out.len() < 7 {
        match rest.windows(sep.len()).position(|w| w == sep) {
            Some(i) => {
                out.push(&rest[..i]);
                rest = &rest[i + sep.len()..];
            }
            None => break,
        }
    }
    out.push(rest);
    out
}

fuzz_target!(|data: &[u8]| {
    let mut core = ManagerCore::new(Default::default(), Default::default(), Encoding::Json, 0);
    let msgs = split(data);
    for m in &msgs {
        let before = core.table().list();
        let h = core.handle_message(m);
        assert!(!h.reply.is_empty());
        let reply = match detect_encoding(m) {
            Encoding::Json => Reply::from_json(&h.reply),
            Encoding::Cbor => Reply::from_cbor(&h.reply),
        }
        .expect("the reply decodes in the request's encoding");
        if let Reply::Error { .. } = reply {
            assert!(!h.changed);
            assert_eq!(
                core.table().list(),
                before,
                "a rejected request changed the table"
            );
        }
    }
    let k = core.counters();
    assert_eq!(k.requests, msgs.len() as u64);
    assert_eq!(k.ok + k.rejected.total(), k.requests);
});
