//! Entry points shared by the `cargo fuzz` targets and the `no_panic` tests, compiled only
//! with the `fuzzing` feature (never in release builds of the dataplane).
//!
//! Each module has a `fuzz(data)` that parses `data`, reads every field and round-trips the
//! `Repr` through `emit`; it must never panic. `all` runs them all; [`walk`] reads a whole
//! frame the way the dataplane does.

pub mod walk;

/// Run every parser in this crate over `data`. Used by the `all` fuzz target.
#[doc(hidden)]
pub fn all(data: &[u8]) {
    crate::ethernet::fuzz(data);
    crate::vlan::fuzz(data);
    crate::arp::fuzz(data);
    crate::ipv4::fuzz(data);
    crate::ipv6::fuzz(data);
    crate::ipv6ext::fuzz(data);
    crate::ipv6option::fuzz(data);
    crate::icmpv4::fuzz(data);
    crate::icmpv6::fuzz(data);
    crate::udp::fuzz(data);
    crate::tcp::fuzz(data);
    crate::gtpu::fuzz(data);
    crate::pdu_session::fuzz(data);
    crate::gtpu_msg::fuzz(data);
    crate::ioam::fuzz(data);
    crate::int::fuzz(data);
    crate::dta::fuzz(data);
    crate::roce::fuzz(data);
}
