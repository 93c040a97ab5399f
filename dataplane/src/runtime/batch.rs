//! A batch of packets moving through the stages together, each with its disposition.

use super::reason::DropReason;
use crate::buffer::PacketBuf;
use crate::io::{Burst, PortId, MAX_BURST};
use arrayvec::ArrayVec;

/// Most empty buffers a batch keeps for stages that make packets (see [`Batch::take_spare`]).
pub const MAX_SPARES: usize = 64;

/// What happens to a packet once the pipeline is done with it.
///
/// Packed in one `u32` so that the per-batch loops over dispositions (fill, "still
/// continuing?", "all to one port?") compile to a few vector instructions; a forwarding
/// budget of a few cycles per packet leaves no room for a tagged enum's separate tag and
/// payload accesses. Match on [`Disposition::action`]. Bit layout:
///
/// | bits   | Continue | ToControl | Tx                                   | Drop   | Handoff   |
/// |--------|----------|-----------|--------------------------------------|--------|-----------|
/// | 0..16  | 0        | 0         | port (0..12), QID (12..15), QID set (15) | reason | worker |
/// | 16..20 | kind 0   | kind 1    | kind 2                               | kind 3 | kind 4    |
/// | 20..28 | 0        | 0         | 0                                    | 0      | resume_at |
/// | 28..32 | 0        | 0         | 0                                    | 0      | 0         |
///
/// `Continue` is the all-zero word; `u32::MAX` is reserved (the batch's "mixed" sentinel).
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
    /// Hand to worker `worker`, which runs it through its own pipeline from stage index
    /// `resume_at` on (flow steering, see `stages::steer`).
    Handoff { worker: u16, resume_at: u8 },
}

impl Disposition {
    const KIND_TO_CONTROL: u32 = 1;
    const KIND_TX: u32 = 2;
    const KIND_DROP: u32 = 3;
    const KIND_HANDOFF: u32 = 4;
    /// Bits 16..20 of the word, shifted down.
    const KIND_MASK: u32 = 0xF;

    /// Still being processed.
    pub const CONTINUE: Disposition = Disposition(0);
    /// To the control thread.
    pub const TO_CONTROL: Disposition = Disposition(Self::KIND_TO_CONTROL << 16);

    /// Low-half bits of a `Tx` disposition that hold the port.
    const PORT_MASK: u32 = 0x0FFF;
    /// Set in a `Tx` disposition that names an egress queue (bits 12..=14).
    const QID_SET: u32 = 0x8000;
    /// The egress queue bits of a `Tx` disposition: [`Self::QID_SET`] and the queue id.
    const QUEUE_BITS: u32 = Self::QID_SET | 7 << 12;

    /// Send on `port` (on the port's default egress queue when it has a scheduler).
    /// Ports are numbered below 4096.
    #[inline(always)]
    pub const fn tx(port: PortId) -> Disposition {
        Disposition(Self::KIND_TX << 16 | (port as u32 & Self::PORT_MASK))
    }

    /// Send on `port` through egress queue `qid` (0..8) of the port's scheduler; the same
    /// as [`tx`](Self::tx) on a port without one.
    #[inline(always)]
    pub const fn tx_queue(port: PortId, qid: u8) -> Disposition {
        Disposition(
            Self::KIND_TX << 16
                | Self::QID_SET
                | ((qid as u32 & 7) << 12)
                | (port as u32 & Self::PORT_MASK),
        )
    }

    /// The egress queue a `Tx` disposition names, if it names one.
    #[inline(always)]
    pub const fn qid(self) -> Option<u8> {
        if self.0 >> 16 == Self::KIND_TX && self.0 & Self::QID_SET != 0 {
            Some(((self.0 >> 12) & 7) as u8)
        } else {
            None
        }
    }

    /// Drop, counted under `reason`.
    #[inline(always)]
    pub const fn drop_as(reason: DropReason) -> Disposition {
        Disposition(Self::KIND_DROP << 16 | reason.0 as u32)
    }

    /// Hand the packet to worker `worker` (its index in `RuntimeConfig::workers`), which runs
    /// it through its own copy of the pipeline from stage index `resume_at` on (normally the
    /// index after the stage that decided). A packet is handed off at most once: a resumed
    /// packet handed off again is dropped as `bad_handoff`, as is one to a worker that does
    /// not exist or to the deciding worker itself.
    #[inline(always)]
    pub const fn handoff(worker: u16, resume_at: u8) -> Disposition {
        Disposition((resume_at as u32) << 20 | Self::KIND_HANDOFF << 16 | worker as u32)
    }

    #[inline(always)]
    pub const fn action(self) -> Action {
        match (self.0 >> 16) & Self::KIND_MASK {
            0 => Action::Continue,
            Self::KIND_TO_CONTROL => Action::ToControl,
            Self::KIND_TX => Action::Tx((self.0 & Self::PORT_MASK) as u16),
            Self::KIND_HANDOFF => Action::Handoff {
                worker: self.0 as u16,
                resume_at: (self.0 >> 20) as u8,
            },
            _ => Action::Drop(DropReason(self.0 as u16)),
        }
    }

    #[inline(always)]
    pub const fn is_continue(self) -> bool {
        self.0 == 0
    }

    /// `Continue` or `Tx` (a packet still in the pipeline or about to be sent): kinds 0 and
    /// 2 are the two whose kind has bits 0, 2 and 3 clear, so one test of the word. (Every
    /// kind-0 word is `Continue`, the all-zero word.)
    #[inline(always)]
    pub const fn is_continue_or_tx(self) -> bool {
        self.0 & (0xD << 16) == 0
    }

    /// Whether every one of `ds` [`is_continue_or_tx`](Self::is_continue_or_tx): the words
    /// ORed together, then that one test (no branch per element: the compiler vectorises the
    /// OR), for a stage that then walks a burst of sent packets without a test per packet.
    #[inline]
    pub fn all_continue_or_tx(ds: &[Disposition]) -> bool {
        Disposition(ds.iter().fold(0, |a, d| a | d.0)).is_continue_or_tx()
    }
}

impl std::fmt::Debug for Disposition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.action().fmt(f)
    }
}

/// Up to [`MAX_BURST`] packets from one rx queue, with a disposition per packet.
///
/// Lives in the worker's state for the whole run: never allocated per burst.
///
/// Dispositions are kept lazily, like VPP's "whole frame to one next node": while every
/// packet shares one disposition (right after rx, or after a stage decided for the whole
/// batch) only that one value is stored, and the per-packet array is filled the first time a
/// stage asks for per-packet access. A cross-connect thus costs O(1) per batch, not O(n).
#[derive(Debug)]
pub struct Batch<B> {
    pub pkts: Burst<B>,
    disp: [Disposition; MAX_BURST],
    /// Not [`MIXED`]: every packet's disposition is this and `disp` is stale. A sentinel
    /// rather than an `Option` so it is written and read as one 32-bit word (an 8-byte
    /// `Option` written as two halves and read whole stalls store forwarding every batch).
    uniform: Disposition,
    /// Port the whole batch was received on.
    pub rx_port: PortId,
    /// Empty buffers from the worker's pool for stages that turn one packet into several
    /// (the UPF's fragmenter): the worker tops them up to `spares_wanted` after each batch,
    /// so taking one costs no allocator call on the packet path.
    spares: ArrayVec<B, MAX_SPARES>,
    spares_wanted: usize,
}

/// A batch's dispositions ([`Batch::disposition_view`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispositions<'a> {
    /// Every packet has this one.
    Uniform(Disposition),
    /// Packet `i` has element `i`.
    PerPacket(&'a [Disposition]),
}

/// `Batch::uniform` value meaning "dispositions differ; read the array".
const MIXED: Disposition = Disposition(u32::MAX);

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
            uniform: Disposition::CONTINUE,
            rx_port: 0,
            spares: ArrayVec::new(),
            spares_wanted: 0,
        }
    }

    /// Keep `n` (at most [`MAX_SPARES`]) empty buffers for the stages (the most any stage
    /// of the pipeline asks for, `Stage::spare_buffers`).
    pub fn want_spares(&mut self, n: usize) {
        self.spares_wanted = n.min(MAX_SPARES);
    }

    /// How many spare buffers the batch lacks: the worker allocates that many after a batch.
    #[inline]
    pub fn spares_missing(&self) -> usize {
        self.spares_wanted.saturating_sub(self.spares.len())
    }

    /// Add an empty buffer to the spares; returns it back if the spares are full.
    pub fn give_spare(&mut self, b: B) -> Result<(), B> {
        self.spares.try_push(b).map_err(|e| e.element())
    }

    /// An empty buffer from the spares (contents and metadata unspecified: reset by the
    /// pool), `None` if there is none left in this batch.
    #[inline]
    pub fn take_spare(&mut self) -> Option<B> {
        self.spares.pop()
    }

    /// Spare buffers left (how many [`take_spare`](Self::take_spare) can still give).
    #[inline]
    pub fn spares(&self) -> usize {
        self.spares.len()
    }

    /// Take every spare buffer out (the worker frees them at stop).
    pub fn drain_spares(&mut self) -> impl Iterator<Item = B> + '_ {
        self.spares.drain(..)
    }

    /// Room for packets made by a stage ([`push`](Self::push)).
    #[inline]
    pub fn room(&self) -> usize {
        self.pkts.remaining_capacity()
    }

    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Mark every packet `Continue`; called after rx, before the first stage. O(1).
    #[inline]
    pub fn reset_dispositions(&mut self) {
        self.uniform = Disposition::CONTINUE;
    }

    /// The disposition every packet shares, if they all share one.
    #[inline]
    pub fn uniform(&self) -> Option<Disposition> {
        (self.uniform != MIXED).then_some(self.uniform)
    }

    /// The port every packet is to be sent on, if every packet's disposition is `Tx` to one
    /// port (their egress queue ids may differ: a port without an egress scheduler has one
    /// queue, so the worker then sends the batch whole, as it does a uniform one). One pass
    /// over the per-packet array; `None` for an empty batch.
    #[inline]
    pub fn one_tx_port(&self) -> Option<PortId> {
        if self.uniform != MIXED {
            return match self.uniform.action() {
                Action::Tx(p) if !self.pkts.is_empty() => Some(p),
                _ => None,
            };
        }
        let d = &self.disp[..self.pkts.len()];
        let first = d.first()?.0 & !Disposition::QUEUE_BITS;
        if first >> 16 != Disposition::KIND_TX {
            return None;
        }
        // Words differing from the first's outside the queue bits, or-ed together.
        let differ = d
            .iter()
            .fold(0u32, |a, x| a | ((x.0 & !Disposition::QUEUE_BITS) ^ first));
        (differ == 0).then_some((first & Disposition::PORT_MASK) as PortId)
    }

    /// Packet `i`'s disposition.
    #[inline]
    pub fn disposition(&self, i: usize) -> Disposition {
        if self.uniform != MIXED {
            self.uniform
        } else {
            self.disp[i]
        }
    }

    /// Every packet's disposition in one read: the shared one, or the per-packet array (as
    /// long as the batch), so a stage reading them all zips it with the packets instead of
    /// indexing (no bounds check per packet) and tests for uniform once.
    #[inline]
    pub fn disposition_view(&self) -> Dispositions<'_> {
        if self.uniform != MIXED {
            Dispositions::Uniform(self.uniform)
        } else {
            Dispositions::PerPacket(&self.disp[..self.pkts.len()])
        }
    }

    /// Set packet `i`'s disposition.
    #[inline]
    pub fn set_disposition(&mut self, i: usize, d: Disposition) {
        self.materialize();
        self.disp[i] = d;
    }

    /// Which of packets `start..start + len` (`len <= 32`) are no longer `Continue`: bit
    /// `k` for packet `start + k`. One uniform test, or one pass over the chunk's words
    /// (for a stage that walks a chunk testing each packet's bit instead of calling
    /// [`disposition`](Self::disposition) on each).
    #[inline]
    pub fn decided_mask(&self, start: usize, len: usize) -> u32 {
        assert!(len <= 32, "one bit per packet of the chunk");
        if self.uniform != MIXED {
            return if self.uniform.is_continue() {
                0
            } else {
                ((1u64 << len) - 1) as u32
            };
        }
        self.disp[start..start + len]
            .iter()
            .enumerate()
            .fold(0u32, |m, (k, d)| m | u32::from(!d.is_continue()) << k)
    }

    /// Set the dispositions of packets `start..start + ds.len()` to `ds` (as
    /// [`set_disposition`](Self::set_disposition) on each), for a stage that decides a
    /// chunk of the batch at a time: when `ds` covers the whole batch and is one
    /// disposition, the batch stays uniform (one word written, no per-packet array).
    #[inline]
    pub fn set_chunk(&mut self, start: usize, ds: &[Disposition]) {
        let Some(&d0) = ds.first() else {
            return;
        };
        if start == 0 && ds.len() == self.pkts.len() && self.uniform != MIXED {
            // Dispositions differing from the first, or-ed together (0: all alike).
            let differ = ds.iter().fold(0u32, |a, d| a | (d.0 ^ d0.0));
            if differ == 0 {
                self.uniform = d0;
                return;
            }
        }
        self.materialize();
        self.disp[start..start + ds.len()].copy_from_slice(ds);
    }

    /// Every packet's disposition, in order.
    pub fn dispositions(&self) -> impl Iterator<Item = Disposition> + '_ {
        (0..self.pkts.len()).map(|i| self.disposition(i))
    }

    /// Write the shared disposition into the per-packet array.
    #[inline]
    fn materialize(&mut self) {
        if self.uniform != MIXED {
            let n = self.pkts.len();
            self.disp[..n].fill(self.uniform);
            self.uniform = MIXED;
        }
    }

    /// Run `f` on every packet still `Continue`; `f` returns its new disposition.
    #[inline]
    pub fn for_each_active(&mut self, mut f: impl FnMut(&mut B) -> Disposition) {
        if self.uniform != MIXED && !self.uniform.is_continue() {
            return;
        }
        self.materialize();
        for (pkt, d) in self.pkts.iter_mut().zip(self.disp.iter_mut()) {
            if d.is_continue() {
                *d = f(pkt);
            }
        }
    }

    /// [`for_each_active`](Self::for_each_active) for a stage that decides every packet
    /// one by one but mostly alike (a collector storing every report): when the batch is
    /// still wholly `Continue` and `f` returns the same disposition for every packet, the
    /// batch stays uniform, so the worker's dispatch sends (or frees) it whole instead of
    /// packet by packet. Otherwise the same as `for_each_active`.
    ///
    /// `f` is called from one place only, so a stage's per-packet code can be inlined into
    /// this loop (no call, prologue and epilogue per packet).
    #[inline]
    pub fn decide_each(&mut self, mut f: impl FnMut(&mut B) -> Disposition) {
        // Wholly `Continue`: every packet is decided, and the batch may stay uniform. Else,
        // as `for_each_active`: nothing when the batch is decided alike, the `Continue`
        // packets of a mixed one (whose per-packet array is then current).
        let whole = self.uniform.is_continue();
        if !whole && self.uniform != MIXED {
            return;
        }
        for (pkt, d) in self.pkts.iter_mut().zip(self.disp.iter_mut()) {
            if whole || d.is_continue() {
                *d = f(pkt);
            }
        }
        let n = self.pkts.len();
        if whole && n > 0 {
            let d0 = self.disp[0];
            // Dispositions differing from the first, or-ed together (0: all alike).
            let differ = self.disp[1..n].iter().fold(0u32, |a, d| a | (d.0 ^ d0.0));
            self.uniform = if differ == 0 { d0 } else { MIXED };
        }
    }

    /// Set every still-`Continue` packet to `d`. O(1) when the whole batch is still
    /// `Continue`.
    #[inline]
    pub fn set_active(&mut self, d: Disposition) {
        if self.uniform.is_continue() {
            self.uniform = d;
        } else if self.uniform == MIXED {
            let n = self.pkts.len();
            for x in &mut self.disp[..n] {
                // Branch-free so it vectorises.
                *x = if x.is_continue() { d } else { *x };
            }
        }
    }

    /// Append a packet made by a stage (a reply, say) with its disposition. Returns the
    /// packet back if the batch is full.
    pub fn push(&mut self, pkt: B, d: Disposition) -> Result<(), B> {
        if self.pkts.is_full() {
            return Err(pkt);
        }
        self.materialize();
        let i = self.pkts.len();
        self.pkts.push(pkt);
        self.disp[i] = d;
        Ok(())
    }

    /// Move the packets out with their dispositions (the worker's dispatch), leaving the
    /// batch empty.
    #[inline]
    pub fn drain(&mut self) -> impl Iterator<Item = (B, Disposition)> + '_ {
        self.materialize();
        let disp = &self.disp;
        self.pkts.drain(..).zip(disp.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::DropReason;
    use crate::OwnedBuf;

    fn batch(n: usize) -> Batch<OwnedBuf> {
        let mut b = Batch::new();
        for i in 0..n {
            b.pkts.push(OwnedBuf::from_slice(&[i as u8]));
        }
        b.reset_dispositions();
        b
    }

    /// `decided_mask` has bit `k` set exactly when packet `start + k` is not `Continue`.
    #[test]
    fn decided_mask_names_the_decided_packets() {
        let tx = Disposition::tx(1);
        let mut b = batch(40);
        assert_eq!(b.decided_mask(0, 32), 0);
        b.set_active(tx);
        assert_eq!(b.decided_mask(0, 32), u32::MAX);
        assert_eq!(b.decided_mask(32, 8), 0xff);
        let mut b = batch(40);
        b.set_disposition(3, tx);
        b.set_disposition(35, tx);
        assert_eq!(b.decided_mask(0, 32), 1 << 3);
        assert_eq!(b.decided_mask(32, 8), 1 << 3);
        assert_eq!(b.decided_mask(34, 0), 0);
    }

    /// `set_chunk` is `set_disposition` on each index, and keeps a whole batch decided
    /// alike as one word.
    #[test]
    fn set_chunk_is_set_disposition_on_each() {
        let tx = Disposition::tx(1);
        let drop = Disposition::drop_as(DropReason(7));
        // The whole batch, one disposition: uniform.
        let mut b = batch(4);
        b.set_chunk(0, &[tx; 4]);
        assert_eq!(b.uniform(), Some(tx));
        // The whole batch, mixed; then a part of a mixed batch.
        let mut b = batch(4);
        b.set_chunk(0, &[tx, drop, tx, tx]);
        assert_eq!(b.uniform(), None);
        b.set_chunk(2, &[drop]);
        let got: Vec<_> = b.dispositions().collect();
        assert_eq!(got, [tx, drop, drop, tx]);
        // A part of a uniform batch: the rest keep the uniform disposition.
        let mut b = batch(4);
        b.set_chunk(1, &[tx, tx]);
        let got: Vec<_> = b.dispositions().collect();
        let c = Disposition::CONTINUE;
        assert_eq!(got, [c, tx, tx, c]);
        // Nothing: unchanged.
        let mut b = batch(0);
        b.set_chunk(0, &[]);
        assert_eq!(b.uniform(), Some(Disposition::CONTINUE));
    }

    #[test]
    fn uniform_until_a_stage_goes_per_packet() {
        let mut b = batch(5);
        assert_eq!(b.uniform(), Some(Disposition::CONTINUE));
        b.set_active(Disposition::tx(3));
        assert_eq!(b.uniform(), Some(Disposition::tx(3)));
        assert!(b.dispositions().all(|d| d == Disposition::tx(3)));
        // Nothing is active any more: per-packet stages see nothing.
        let mut seen = 0;
        b.for_each_active(|_| {
            seen += 1;
            Disposition::CONTINUE
        });
        assert_eq!(seen, 0);
    }

    #[test]
    fn decide_each_keeps_a_batch_decided_alike_uniform() {
        let tx = Disposition::tx(1);
        let mut b = batch(4);
        b.decide_each(|_| tx);
        assert_eq!(b.uniform(), Some(tx));
        assert!(b.dispositions().all(|d| d == tx));
        // One packet decided otherwise: per packet, each as decided.
        let r = Disposition::drop_as(DropReason(7));
        let mut b = batch(4);
        b.decide_each(|p| if p.data()[0] == 2 { r } else { tx });
        assert_eq!(b.uniform(), None);
        let got: Vec<_> = b.dispositions().collect();
        assert_eq!(got, vec![tx, tx, r, tx]);
        // A batch already decided in part: only the still-active packets are asked.
        let mut b = batch(3);
        b.set_disposition(0, r);
        let mut seen = 0;
        b.decide_each(|_| {
            seen += 1;
            tx
        });
        assert_eq!(seen, 2);
        assert_eq!(b.dispositions().collect::<Vec<_>>(), vec![r, tx, tx]);
        // Empty: nothing asked, still Continue.
        let mut b = batch(0);
        b.decide_each(|_| tx);
        assert_eq!(b.uniform(), Some(Disposition::CONTINUE));
    }

    #[test]
    fn one_tx_port_ignores_queue_ids_only() {
        let mut b = batch(4);
        assert_eq!(b.one_tx_port(), None);
        b.set_active(Disposition::tx(3));
        assert_eq!(b.one_tx_port(), Some(3));
        let mut b = batch(4);
        for i in 0..4 {
            b.set_disposition(i, Disposition::tx_queue(2, i as u8));
        }
        assert_eq!(b.one_tx_port(), Some(2));
        b.set_disposition(3, Disposition::tx(2));
        assert_eq!(b.one_tx_port(), Some(2));
        b.set_disposition(1, Disposition::tx_queue(1, 1));
        assert_eq!(b.one_tx_port(), None);
        b.set_disposition(1, Disposition::drop_as(DropReason(2)));
        assert_eq!(b.one_tx_port(), None);
        let mut b = batch(3);
        for i in 0..3 {
            b.set_disposition(i, Disposition::TO_CONTROL);
        }
        assert_eq!(b.one_tx_port(), None);
        let mut b = batch(0);
        b.set_active(Disposition::tx(1));
        assert_eq!(b.one_tx_port(), None);
    }

    #[test]
    fn per_packet_decisions_then_set_active_fills_only_the_rest() {
        let mut b = batch(4);
        let r = Disposition::drop_as(DropReason(7));
        b.for_each_active(|p| {
            if p.data()[0] % 2 == 0 {
                r
            } else {
                Disposition::CONTINUE
            }
        });
        assert_eq!(b.uniform(), None);
        b.set_active(Disposition::TO_CONTROL);
        let got: Vec<_> = b.dispositions().collect();
        assert_eq!(
            got,
            vec![r, Disposition::TO_CONTROL, r, Disposition::TO_CONTROL]
        );
        b.set_disposition(1, Disposition::tx(0));
        assert_eq!(b.disposition(1), Disposition::tx(0));
        let drained: Vec<_> = b.drain().map(|(p, d)| (p.data()[0], d)).collect();
        assert_eq!(drained.len(), 4);
        assert_eq!(drained[1], (1, Disposition::tx(0)));
        assert!(b.is_empty());
    }

    /// One disposition of each kind, with the extremes of their fields, and [`MIXED`].
    const KINDS: [Disposition; 10] = [
        Disposition::CONTINUE,
        Disposition::tx(0),
        Disposition::tx(4095),
        Disposition::tx_queue(4095, 7),
        Disposition::TO_CONTROL,
        Disposition::drop_as(DropReason(0xffff)),
        Disposition::drop_as(DropReason(0)),
        Disposition::handoff(u16::MAX, u8::MAX),
        Disposition::handoff(0, 0),
        MIXED,
    ];

    #[test]
    fn continue_or_tx_and_the_view() {
        for d in &KINDS[..KINDS.len() - 1] {
            let d = *d;
            let want = matches!(d.action(), Action::Continue | Action::Tx(_));
            assert_eq!(d.is_continue_or_tx(), want, "{d:?}");
        }
        assert!(!MIXED.is_continue_or_tx());
        let mut b = batch(3);
        assert_eq!(
            b.disposition_view(),
            Dispositions::Uniform(Disposition::CONTINUE)
        );
        b.set_disposition(2, Disposition::tx(1));
        let want = [
            Disposition::CONTINUE,
            Disposition::CONTINUE,
            Disposition::tx(1),
        ];
        assert_eq!(b.disposition_view(), Dispositions::PerPacket(&want));
    }

    /// `all_continue_or_tx` is every element's `is_continue_or_tx`, over every pair and
    /// triple of these words and runs of them up to a burst's length.
    #[test]
    fn all_continue_or_tx_is_each() {
        let all = KINDS;
        let each = |ds: &[Disposition]| ds.iter().all(|d| d.is_continue_or_tx());
        assert!(Disposition::all_continue_or_tx(&[]));
        for a in all {
            for b in all {
                assert_eq!(Disposition::all_continue_or_tx(&[a, b]), each(&[a, b]));
                for c in all {
                    let v = [a, b, c];
                    assert_eq!(Disposition::all_continue_or_tx(&v), each(&v), "{v:?}");
                }
            }
        }
        for n in 0..=MAX_BURST {
            for odd in 0..all.len() {
                let mut v = vec![Disposition::tx(1); n];
                if n > 0 {
                    v[(odd * 7) % n] = all[odd];
                }
                assert_eq!(Disposition::all_continue_or_tx(&v), each(&v), "{n} {odd}");
            }
        }
    }

    #[test]
    fn tx_queue_carries_port_and_qid() {
        let d = Disposition::tx_queue(5, 6);
        assert_eq!(d.action(), Action::Tx(5));
        assert_eq!(d.qid(), Some(6));
        assert_eq!(Disposition::tx(5).qid(), None);
        assert_eq!(Disposition::tx(5).action(), Action::Tx(5));
        assert_eq!(Disposition::drop_as(DropReason(0x9fff)).qid(), None);
        assert_ne!(d, Disposition::tx(5));
    }

    #[test]
    fn handoff_packs_worker_and_stage() {
        for (w, r) in [(0u16, 0u8), (1, 2), (u16::MAX, u8::MAX), (513, 7)] {
            let d = Disposition::handoff(w, r);
            assert_eq!(
                d.action(),
                Action::Handoff {
                    worker: w,
                    resume_at: r
                }
            );
            assert!(!d.is_continue());
            assert_eq!(d.qid(), None);
            assert_ne!(d, MIXED);
        }
        assert_ne!(Disposition::handoff(1, 2), Disposition::handoff(2, 1));
        // The other kinds are unchanged by the wider kind field.
        assert_eq!(
            Disposition::drop_as(DropReason(0xffff)).action(),
            Action::Drop(DropReason(0xffff))
        );
        assert_eq!(Disposition::TO_CONTROL.action(), Action::ToControl);
        assert_eq!(Disposition::tx_queue(4095, 7).action(), Action::Tx(4095));
        assert_eq!(Disposition::CONTINUE.action(), Action::Continue);
    }

    #[test]
    fn reset_after_a_per_packet_batch_is_uniform_again() {
        let mut b = batch(3);
        b.set_disposition(0, Disposition::TO_CONTROL);
        b.reset_dispositions();
        assert!(b.dispositions().all(|d| d.is_continue()));
        assert!(b
            .push(OwnedBuf::from_slice(&[9]), Disposition::tx(1))
            .is_ok());
        assert_eq!(b.disposition(3), Disposition::tx(1));
        assert_eq!(b.disposition(0), Disposition::CONTINUE);
    }
}
