//! Zero-copy wire formats for the Peregrine dataplane.
//!
//! One module per header, in the style of smoltcp's `wire`: each has a `field` module of
//! byte ranges, a checked view `Packet<T: AsRef<[u8]>>` (`new_checked` validates lengths so
//! that every accessor after it is in bounds), and where useful a `Repr` with `parse` and
//! `emit`. No function in this crate panics on any input bytes: the fuzz targets in
//! `dataplane/wire/fuzz` and the `no_panic` tests hold us to that.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod arp;
pub mod checksum;
pub mod dta;
mod error;
pub mod ethernet;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod gtpu;
pub mod gtpu_msg;
pub mod icmpv4;
pub mod icmpv6;
pub mod int;
pub mod ioam;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6ext;
pub mod ipv6option;
pub mod pdu_session;
pub mod roce;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use error::{Error, Result};

/// Read a big-endian u16 from the start of `b` (caller guarantees `b.len() >= 2`).
#[inline(always)]
pub(crate) fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Read a big-endian u32 from the start of `b` (caller guarantees `b.len() >= 4`).
#[inline(always)]
pub(crate) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[inline(always)]
pub(crate) fn put16(b: &mut [u8], v: u16) {
    b[..2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn put32(b: &mut [u8], v: u32) {
    b[..4].copy_from_slice(&v.to_be_bytes());
}
