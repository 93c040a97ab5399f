//! Arbitrary datagrams into an N4 node (TS 29.244 section 7.6: no input may crash or hang the
//! endpoint) that already has an association and three sessions (UP SEIDs 1, 2, 3), then
//! `Node::check_consistency()`; every datagram the node sends must parse as PFCP.
//!
//! Input: the first byte picks the mode.
//! * even: the rest is one datagram from the associated SMF.
//! * odd: the rest is a sequence of datagrams, each `[flags u8][len u16 BE][len bytes]`
//!   (the last one takes what is left if `len` overruns). Flags bit 0: from a second,
//!   unassociated peer; bits 1-7: time advanced before it, in 100 ms steps (timers are
//!   polled, so heartbeats, report retransmissions and the response cache expire).
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_n4::{Node, Output};
use peregrine_pfcp::Message;

use peregrine_testkit::pfcp::node as common;
use peregrine_testkit::pfcp::requests::{smf, smf2};

/// The associated node with three standard sessions, as the tests build it.
fn node() -> Node {
    let mut n = common::associated();
    for i in 0..3u64 {
        let seid = common::establish(&mut n, 0, 10 + i as u32, 0x100 + i);
        assert_eq!(
            seid,
            i + 1,
            "SEIDs are allocated from 1 (the seeds rely on it)"
        );
    }
    n
}

fn check(n: &Node, out: &[Output]) {
    for o in out {
        if let Output::Send { bytes, .. } = o {
            if let Err(e) = Message::parse(bytes) {
                panic!("the node sent a datagram that does not parse: {e:?}: {bytes:02x?}");
            }
        }
    }
    if let Err(e) = n.check_consistency() {
        panic!("inconsistent after input: {e}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut n = node();
    if mode & 1 == 0 {
        let out = n.handle(0, smf(), rest);
        check(&n, &out);
        return;
    }
    let mut now = 0u64;
    let mut rest = rest;
    while rest.len() >= 3 {
        let flags = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
        let body = &rest[3..];
        let (dgram, tail) = body.split_at(len.min(body.len()));
        rest = tail;
        now += u64::from(flags >> 1) * 100_000_000;
        if n.next_timer().is_some_and(|t| t <= now) {
            let out = n.poll_timers(now);
            check(&n, &out);
        }
        let peer = if flags & 1 == 0 {
            smf()
        } else {
            smf2()
        };
        let out = n.handle(now, peer, dgram);
        check(&n, &out);
    }
});
