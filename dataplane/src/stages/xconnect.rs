//! Port cross-connect: every packet received on port A leaves on port B, untouched.
//!
//! The runtime's equivalent of `dpdk-testpmd --forward-mode=io`, used to measure what the
//! runtime itself costs, and as a patch-panel pipeline.

use crate::buffer::PacketBuf;
use crate::io::PortId;
use crate::runtime::{Batch, Context, Disposition, DropReason, Reasons, Stage};

/// See the module docs.
#[derive(Debug, Clone)]
pub struct XConnect {
    /// `peer[rx_port]` is the tx port, `None` drops as `xconnect_unmapped`.
    peer: Vec<Option<PortId>>,
    unmapped: DropReason,
}

impl XConnect {
    /// `pairs` are bidirectional (a, b) links.
    pub fn new(pairs: &[(PortId, PortId)], reasons: &mut Reasons) -> XConnect {
        let n = pairs
            .iter()
            .map(|&(a, b)| a.max(b) as usize + 1)
            .max()
            .unwrap_or(0);
        let mut peer = vec![None; n];
        for &(a, b) in pairs {
            peer[a as usize] = Some(b);
            peer[b as usize] = Some(a);
        }
        XConnect {
            peer,
            unmapped: reasons.register("xconnect_unmapped"),
        }
    }
}

impl<B: PacketBuf> Stage<B> for XConnect {
    fn name(&self) -> &'static str {
        "xconnect"
    }

    #[inline]
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        // The whole batch came from one port, so the decision is per batch: the packets
        // themselves are never touched, exactly like testpmd's io mode.
        let d = match self.peer.get(batch.rx_port as usize).copied().flatten() {
            Some(p) => Disposition::tx(p),
            None => Disposition::drop_as(self.unmapped),
        };
        batch.set_active(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OwnedBuf;

    #[test]
    fn maps_both_directions_and_counts_unmapped() {
        let mut r = Reasons::new();
        let mut x = XConnect::new(&[(0, 1)], &mut r);
        let mut b: Batch<OwnedBuf> = Batch::new();
        let cx = Context::fixed(0, 0);
        for (rx, want) in [
            (0, Disposition::tx(1)),
            (1, Disposition::tx(0)),
            (2, Disposition::drop_as(r.register("xconnect_unmapped"))),
        ] {
            b.pkts.clear();
            b.pkts.push(OwnedBuf::from_slice(&[0u8; 60]));
            b.rx_port = rx;
            b.reset_dispositions();
            Stage::<OwnedBuf>::process(&mut x, &mut b, &cx);
            assert_eq!(b.disposition(0), want);
        }
    }
}
