//! A batch of packets moving through the stages together, each with its disposition.

use super::reason::DropReason;
use crate::buffer::PacketBuf;
use crate::io::{Burst, PortId, MAX_BURST};

/// What happens to a packet once the pipeline is done with it.
///
/// Packed in one `u32` (kind in the high half, port or reason in the low half) so that the
/// per-batch loops over dispositions (fill, "still continuing?", "all to one port?") compile
/// to a few vector instructions; a forwarding budget of a few cycles per packet leaves no
/// room for a tagged enum's separate tag and payload accesses. Match on [`Disposition::action`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Disposition(u32);

/// A decoded [`Disposition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Still being processed: later stages look at it.
    Continue,
    /// Send on this port (on the worker's own tx queue).
    Tx(PortId),
    /// Drop, counted under this reason.
    Drop(DropReason),
    /// Hand a copy to the control thread (exception path), then free.
    ToControl,
}

impl Disposition {
    const KIND_TO_CONTROL: u32 = 1;
    const KIND_TX: u32 = 2;
    const KIND_DROP: u32 = 3;

    /// Still being processed.
    pub const CONTINUE: Disposition = Disposition(0);
    /// To the control thread.
    pub const TO_CONTROL: Disposition = Disposition(Self::KIND_TO_CONTROL << 16);

    /// Send on `port`.
    #[inline(always)]
    pub const fn tx(port: PortId) -> Disposition {
        Disposition(Self::KIND_TX << 16 | port as u32)
    }

    /// Drop, counted under `reason`.
    #[inline(always)]
    pub const fn drop_as(reason: DropReason) -> Disposition {
        Disposition(Self::KIND_DROP << 16 | reason.0 as u32)
    }

    #[inline(always)]
    pub const fn action(self) -> Action {
        match self.0 >> 16 {
            0 => Action::Continue,
            Self::KIND_TO_CONTROL => Action::ToControl,
            Self::KIND_TX => Action::Tx(self.0 as u16),
            _ => Action::Drop(DropReason(self.0 as u16)),
        }
    }

    #[inline(always)]
    pub const fn is_continue(self) -> bool {
        self.0 == 0
    }
}

impl std::fmt::Debug for Disposition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.action().fmt(f)
    }
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
            disp: [Disposition::CONTINUE; MAX_BURST],
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
        self.disp[..n].fill(Disposition::CONTINUE);
    }

    /// Run `f` on every packet still `Continue`; `f` returns its new disposition.
    #[inline]
    pub fn for_each_active(&mut self, mut f: impl FnMut(&mut B) -> Disposition) {
        for (pkt, d) in self.pkts.iter_mut().zip(self.disp.iter_mut()) {
            if d.is_continue() {
                *d = f(pkt);
            }
        }
    }

    /// Set every still-`Continue` packet to `d`.
    pub fn set_active(&mut self, d: Disposition) {
        let n = self.pkts.len();
        for x in &mut self.disp[..n] {
            // Branch-free so it vectorises.
            *x = if x.is_continue() { d } else { *x };
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
