//! The session `peregrine_testkit::daemon::UPF_ONE_SESSION` has the daemon make
//! (`[upf.synthetic]`: one session, seed 1, QFI 9, one gNB, IPv4 outer), for the tests that
//! write its traffic (`dta_feeds.rs`, `fridge_daemon.rs`). Here rather than in the test kit:
//! it takes the rule compiler's `synthetic`, and `peregrine-rules` dev-depends on the kit.

use peregrine_rules::static_sessions::{synthetic, OuterMix, StaticSession, SyntheticParams};
use std::net::IpAddr;

/// The session, its UE's address and the data network server's
/// (`peregrine_testkit::upf::server_v4`).
pub fn one_session() -> (StaticSession, IpAddr, IpAddr) {
    let s = synthetic(
        1,
        &SyntheticParams {
            seed: 1,
            qfis: vec![9],
            gnbs: 1,
            outer: OuterMix::V4,
            ..SyntheticParams::default()
        },
    )
    .remove(0);
    let ue = IpAddr::V4(s.ue_ipv4.expect("an IPv4 UE"));
    (s, ue, IpAddr::V4(peregrine_testkit::upf::server_v4()))
}
