//! A batch of packets moving through the stages together, each with its disposition.

use super::reason::DropReason;
use crate::buffer::PacketBuf;
use crate::io::{Burst, PortId, MAX_BURST};

/// What happens to a packet once the pipeline is done with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Still being processed: later stages look at it.
    Continue,
    /// Send on this port (on the worker's own tx queue).
    Tx(PortId),
    /// Drop, counted under this reason.
    Drop(DropReason),
    /// Hand a copy to the control thread (exception path), then free.
    ToControl,
}

/// Up to [`MAX_BURST`] packets from one rx queue, with a disposition per packet.
///
/// Lives on the worker's stack or in its state for the whole run: never allocated per burst.
#[derive(Debug)]
pub struct Batch<B> {
    pub pkts: Burst<B>,
    pub disp: [Disposition; MAX_BURST],
    /// Port the whole batch was received on.
    pub rx_port: PortId,
}

impl<B: PacketBuf> Default for Batch<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: PacketBuf> Batch<B> {
    pub fn new() -> Self {
        Batch {
            pkts: Burst::new(),
            disp: [Disposition::Continue; MAX_BURST],
            rx_port: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Mark every packet `Continue`; called after rx, before the first stage.
    pub fn reset_dispositions(&mut self) {
        let n = self.pkts.len();
        self.disp[..n].fill(Disposition::Continue);
    }

    /// Run `f` on every packet still `Continue`; `f` returns its new disposition.
    #[inline]
    pub fn for_each_active(&mut self, mut f: impl FnMut(&mut B) -> Disposition) {
        for (pkt, d) in self.pkts.iter_mut().zip(self.disp.iter_mut()) {
            if *d == Disposition::Continue {
                *d = f(pkt);
            }
        }
    }

    /// Set every still-`Continue` packet to `d`.
    pub fn set_active(&mut self, d: Disposition) {
        let n = self.pkts.len();
        for x in &mut self.disp[..n] {
            if *x == Disposition::Continue {
                *x = d;
            }
        }
    }

    /// Append a packet made by a stage (a reply, say) with its disposition. Returns the
    /// packet back if the batch is full.
    pub fn push(&mut self, pkt: B, d: Disposition) -> Result<(), B> {
        let i = self.pkts.len();
        self.pkts.try_push(pkt).map_err(|e| e.element())?;
        self.disp[i] = d;
        Ok(())
    }
}
