//! Fuzz the INT manager's message dispatch (`ManagerCore::handle_message`, Miranda et al., III-B): the
//! input is split on the byte sequence `\n--\n` into up to 8 messages applied in turn to one
//! manager (so installs are followed by modifies/removes of the same namespace). Every message must
//! get a non-empty reply that decodes in the message's encoding; an error reply must not change
//! the table; the counters must account for every message. A message starting with 0x00 is an
//! in-band 0x32 payload instead (the rest of it): decoded as the daemon does
//! (`Rule::from_cbor`) and applied with `ManagerCore::on_inband_request`; it must never change a
//! namespace the controller installed, and "changed" must match the table.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_int::request::Reply;
use peregrine_int::namespace::Origin;
use peregrine_int::request::Rule;
use peregrine_int_manager::codec::{ReplyCodec, RuleCbor};
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
    let mut inband = 0u64;
    for m in &msgs {
        let before = core.table().list();
        if let Some((&0, payload)) = m.split_first() {
            inband += 1;
            let Ok(rule) = Rule::from_cbor(payload) else {
                continue;
            };
            let ns = rule.ns_id;
            let owner = core.table().get(ns).map(|s| (s.origin, s.request.clone()));
            let changed = core.on_inband_request(rule.clone());
            assert_eq!(changed, core.table().list() != before);
            match owner {
                Some((Origin::Controller, r)) => {
                    assert!(!changed);
                    assert_eq!(core.table().get(ns).unwrap().request, r);
                }
                _ => {
                    if let Some(s) = core.table().get(ns) {
                        assert_eq!((s.origin, &s.request), (Origin::InBand, &rule));
                    }
                }
            }
            continue;
        }
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
    assert_eq!(k.requests + inband, msgs.len() as u64);
    let i = k.inband;
    let applied = i.installed + i.refreshed + i.replaced + i.conflict + i.table_full;
    assert!(applied <= inband);
    assert_eq!(k.ok + k.rejected.total(), k.requests);
});
