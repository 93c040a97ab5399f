//! Port-scoped stages: run a stage only on the packets of given ports.
//!
//! A pipeline stage sees only packets still `Continue`, so a stage placed after one that
//! decides every packet's fate (the UPF stage: decap and route to N6, or encap toward a gNB)
//! sees nothing. [`OnEgress`] is the hook for "after the decision, before tx": it runs its
//! inner stage on the packets whose disposition is `Tx` to one of its ports, as if they were
//! still `Continue`, and then gives back to each the `Tx` disposition it had (egress queue
//! included) unless the inner stage decided otherwise (a drop, say). [`OnIngress`] runs its
//! inner stage only on batches received on its ports (a batch comes from one rx queue).
//!
//! Zero cost when unused: nothing in the worker loop or in [`Batch`] knows about them; a
//! pipeline without them runs as before. With one, a batch with no packet for its ports costs
//! one disposition check (uniform batch) or one pass over the dispositions.

use super::batch::{Action, Batch, Disposition};
use super::stage::{Context, Stage};
use crate::buffer::PacketBuf;
use crate::io::{PortId, MAX_BURST};

/// A per-port membership table (ports are numbered below 4096, `Disposition::tx`).
#[derive(Debug, Clone)]
struct PortSet(Vec<bool>);

impl PortSet {
    fn new(ports: &[PortId]) -> PortSet {
        let n = ports.iter().map(|&p| usize::from(p) + 1).max().unwrap_or(0);
        let mut v = vec![false; n];
        for &p in ports {
            v[usize::from(p)] = true;
        }
        PortSet(v)
    }

    #[inline]
    fn contains(&self, p: PortId) -> bool {
        self.0.get(usize::from(p)).copied().unwrap_or(false)
    }
}

/// Runs `S` only on batches received on one of `ports`.
#[derive(Debug)]
pub struct OnIngress<S> {
    ports: PortSet,
    inner: S,
}

impl<S> OnIngress<S> {
    pub fn new(ports: &[PortId], inner: S) -> OnIngress<S> {
        OnIngress {
            ports: PortSet::new(ports),
            inner,
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<B: PacketBuf, S: Stage<B>> Stage<B> for OnIngress<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    #[inline]
    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        if self.ports.contains(batch.rx_port) {
            self.inner.process(batch, cx);
        }
    }

    fn idle(&mut self) {
        self.inner.idle();
    }

    fn spare_buffers(&self) -> usize {
        self.inner.spare_buffers()
    }
}

/// What [`OnEgress`] did to packet `i` before running its inner stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// Not ours: left alone.
    Untouched,
    /// `Tx` to one of our ports: made `Continue`; this was its disposition.
    Egress(Disposition),
    /// Still `Continue` though not ours: hidden from the inner stage, made `Continue` again.
    Hidden,
}

/// Runs `S` on the packets leaving on one of `ports` (disposition `Tx(port)`), after the
/// stages that decided so and before the worker sends them. Packets the inner stage leaves
/// `Continue` get their `Tx` disposition back; what it decides otherwise stands.
#[derive(Debug)]
pub struct OnEgress<S> {
    ports: PortSet,
    inner: S,
    marks: [Mark; MAX_BURST],
}

impl<S> OnEgress<S> {
    pub fn new(ports: &[PortId], inner: S) -> OnEgress<S> {
        OnEgress {
            ports: PortSet::new(ports),
            inner,
            marks: [Mark::Untouched; MAX_BURST],
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    #[inline]
    fn ours(&self, d: Disposition) -> bool {
        matches!(d.action(), Action::Tx(p) if self.ports.contains(p))
    }
}

/// Parks the packets the inner stage must not see (they are not `Continue`, so it skips them).
const HIDE: Disposition = Disposition::TO_CONTROL;

impl<B: PacketBuf, S: Stage<B>> Stage<B> for OnEgress<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        if let Some(u) = batch.uniform() {
            // The common case (a batch all to one port): O(1) in and out.
            if self.ours(u) {
                batch.reset_dispositions();
                self.inner.process(batch, cx);
                batch.set_active(u);
            }
            return;
        }
        let n = batch.len();
        // Stages that decide packet by packet (the UPF) leave the batch mixed even when
        // every packet goes to one port: one compare per packet finds that case.
        if n > 0 {
            let d0 = batch.disposition(0);
            if (1..n).all(|i| batch.disposition(i) == d0) {
                if self.ours(d0) {
                    batch.reset_dispositions();
                    self.inner.process(batch, cx);
                    batch.set_active(d0);
                }
                return;
            }
        }
        let mut any = false;
        for i in 0..n {
            let d = batch.disposition(i);
            self.marks[i] = if self.ours(d) {
                any = true;
                Mark::Egress(d)
            } else if d.is_continue() {
                Mark::Hidden
            } else {
                Mark::Untouched
            };
        }
        if !any {
            return;
        }
        for i in 0..n {
            match self.marks[i] {
                Mark::Egress(_) => batch.set_disposition(i, Disposition::CONTINUE),
                Mark::Hidden => batch.set_disposition(i, HIDE),
                Mark::Untouched => {}
            }
        }
        self.inner.process(batch, cx);
        // Packets the inner stage appended (index >= n) keep the dispositions it gave them.
        for i in 0..n {
            match self.marks[i] {
                Mark::Egress(d) if batch.disposition(i).is_continue() => {
                    batch.set_disposition(i, d)
                }
                Mark::Hidden => batch.set_disposition(i, Disposition::CONTINUE),
                _ => {}
            }
        }
    }

    fn idle(&mut self) {
        self.inner.idle();
    }

    fn spare_buffers(&self) -> usize {
        self.inner.spare_buffers()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::DropReason;
    use crate::OwnedBuf;

    /// Appends 0xEE to every packet it sees; drops packets whose first byte is 0xDD.
    struct Mark8(usize);
    impl Stage<OwnedBuf> for Mark8 {
        fn name(&self) -> &'static str {
            "mark8"
        }
        fn process(&mut self, batch: &mut Batch<OwnedBuf>, _cx: &Context) {
            batch.for_each_active(|p| {
                self.0 += 1;
                if p.data()[0] == 0xDD {
                    return Disposition::drop_as(DropReason(5));
                }
                let n = p.len();
                p.append(1).expect("tailroom")[0] = 0xEE;
                debug_assert_eq!(p.len(), n + 1);
                Disposition::CONTINUE
            });
        }
    }

    fn batch(first: &[u8]) -> Batch<OwnedBuf> {
        let mut b = Batch::new();
        for &x in first {
            b.pkts.push(OwnedBuf::from_slice(&[x]));
        }
        b.reset_dispositions();
        b
    }

    #[test]
    fn egress_sees_only_its_ports_and_restores_their_queue() {
        let mut s = OnEgress::new(&[2], Mark8(0));
        let mut b = batch(&[1, 2, 0xDD, 4, 5]);
        let drop = Disposition::drop_as(DropReason(9));
        b.set_disposition(0, Disposition::tx_queue(2, 5));
        b.set_disposition(1, Disposition::tx(1));
        b.set_disposition(2, Disposition::tx(2));
        b.set_disposition(3, drop);
        // Packet 4 stays Continue: not leaving on port 2, so hidden.
        s.process(&mut b, &Context::fixed(0, 0));
        assert_eq!(s.inner().0, 2);
        let got: Vec<_> = b.dispositions().collect();
        assert_eq!(
            got,
            vec![
                Disposition::tx_queue(2, 5),
                Disposition::tx(1),
                Disposition::drop_as(DropReason(5)),
                drop,
                Disposition::CONTINUE
            ]
        );
        assert_eq!(b.pkts[0].data(), &[1, 0xEE]);
        assert_eq!(b.pkts[1].data(), &[2]);
        assert_eq!(b.pkts[4].data(), &[5]);
    }

    #[test]
    fn egress_uniform_batches() {
        let mut s = OnEgress::new(&[0, 3], Mark8(0));
        let mut b = batch(&[1, 2]);
        b.set_active(Disposition::tx(3));
        s.process(&mut b, &Context::fixed(0, 0));
        assert!(b.dispositions().all(|d| d == Disposition::tx(3)));
        assert!(b.pkts.iter().all(|p| p.data()[1] == 0xEE));
        // Another port, or still Continue: untouched.
        for d in [Disposition::tx(1), Disposition::CONTINUE] {
            let mut b = batch(&[1, 2]);
            b.set_active(d);
            s.process(&mut b, &Context::fixed(0, 0));
            assert_eq!(b.uniform(), Some(d));
            assert!(b.pkts.iter().all(|p| p.len() == 1));
        }
        assert_eq!(s.inner().0, 2);
    }

    #[test]
    fn ingress_runs_on_its_rx_ports_only() {
        let mut s = OnIngress::new(&[1], Mark8(0));
        let mut b = batch(&[1, 2]);
        b.rx_port = 0;
        s.process(&mut b, &Context::fixed(0, 0));
        assert_eq!(s.inner().0, 0);
        b.rx_port = 1;
        s.process(&mut b, &Context::fixed(0, 0));
        assert_eq!(s.inner().0, 2);
        // A port past the table is not ours.
        b.rx_port = 4000;
        s.process(&mut b, &Context::fixed(0, 0));
        assert_eq!(s.inner().0, 2);
    }
}
