//! Post-dequeue taps: per-port observers of the packets a worker is about to transmit.
//!
//! On a port with an egress scheduler a tap sees each burst just dequeued, with
//! [`PacketMeta::sojourn_ns`](crate::meta::PacketMeta) stamped; on a port without one it sees
//! each burst about to be sent. It is where telemetry that needs queueing facts (sojourn,
//! QID, colour, TEID, QFI) reads them from the packet metadata, without parsing again.
//! Frames the control side injects bypass taps, as they bypass the scheduler.

use super::stage::Context;
use crate::buffer::PacketBuf;
use crate::io::PortId;

/// A post-dequeue observer (or editor) of one egress port's bursts.
///
/// Like a stage it must not allocate, lock or make syscalls. It may rewrite packet bytes in
/// place (an INT sink, say) but cannot drop packets: every packet handed to it is sent.
pub trait Tap<B: PacketBuf>: Send {
    /// Short snake_case name, shown in logs.
    fn name(&self) -> &'static str;
    /// Packets just dequeued from `port`'s egress scheduler (sojourn stamped), or on a port
    /// without a scheduler the packets about to be sent; called once per burst before tx.
    fn on_burst(&mut self, port: PortId, pkts: &mut [B], cx: &Context);
    /// Called now and then while the worker has no traffic (see `Stage::idle`).
    fn idle(&mut self) {}
    /// On a recorded clock (a replay, which can wait): whether the next burst can be taken
    /// without degrading what the tap records (Kestrel: a spare bank is back, so the next
    /// window edge switches banks instead of merging windows). While a tap says no, the
    /// worker holds its rx, up to `runtime::worker::TAP_WAIT_LIMIT`; a live port never waits.
    fn ready(&self) -> bool {
        true
    }
    /// The worker reached the end of its run (`super::end`, runtimes that hold their
    /// workers): hand over whatever is held for the control side (a partly filled window).
    /// False while something is still held (no room to hand it over yet): the worker calls
    /// again until true.
    fn end(&mut self) -> bool {
        true
    }
}
