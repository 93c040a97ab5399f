//! The co-design gate's window export decoder and the collector's merge over untrusted bytes
//! (`peregrinectl codesign collect` subscribes to whatever publishes on its endpoint).
//!
//! Input: messages separated by `\n--\n`. Each goes through `GateWindowMsg::decode`; a message
//! that decodes must re-encode to bytes that decode to the same message and is merged into one
//! `Merger`, whose records must then hold a count at least their sketch part.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_control::codesign::{FlowKey, GateWindowMsg, Merger};
use peregrine_control_fuzz::split_messages as split;
use std::net::Ipv6Addr;

fuzz_target!(|data: &[u8]| {
    let mut m = Merger::new();
    m.on_report(
        FlowKey {
            src: Ipv6Addr::LOCALHOST,
            dst: Ipv6Addr::LOCALHOST,
            proto: 17,
            sport: 1,
            dport: 2,
        },
        100,
    );
    for b in split(data).into_iter().take(8) {
        let Ok(w) = GateWindowMsg::decode(b) else {
            continue;
        };
        assert_eq!(
            GateWindowMsg::decode(&w.encode()).as_ref(),
            Ok(&w),
            "re-encoded window decodes differently"
        );
        m.on_window(&w);
    }
    let unit = m.unit();
    for f in m.flows() {
        assert!(f.total(unit) >= f.sketch);
    }
});
