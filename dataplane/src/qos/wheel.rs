//! A timing wheel of packets waiting for their departure time (Carousel, Saeed et al.,
//! SIGCOMM 2017): the egress scheduler's holding area for shaped packets (`qos::pacer`).
//!
//! [`SLOTS`] slots of 2^[`SLOT_SHIFT`] ns each (32.8 us; a horizon of 268 ms), each a FIFO
//! linked through a node pool allocated at construction: insertion and release are O(1) per
//! packet and nothing allocates after construction. A slot is released when the clock
//! reaches it, so a packet leaves at most one slot (32.8 us) early; packets of one session
//! have non-decreasing departure times, so FIFO slots keep each session in order.

/// Slot width: 2^15 ns = 32.768 us.
pub const SLOT_SHIFT: u32 = 15;
/// Slots on the wheel: 8192 x 32.8 us = 268 ms ahead.
pub const SLOTS: usize = 8192;
/// The farthest departure the wheel accepts, ns after the current slot.
pub const HORIZON_NS: u64 = ((SLOTS as u64) - 1) << SLOT_SHIFT;

const NIL: u32 = u32::MAX;

#[derive(Debug)]
struct Node<B> {
    item: Option<(B, u8)>,
    next: u32,
}

/// The wheel: packets with a queue id each, released in departure order.
#[derive(Debug)]
pub struct Wheel<B> {
    head: Box<[u32]>,
    tail: Box<[u32]>,
    nodes: Box<[Node<B>]>,
    free: u32,
    len: usize,
    /// Absolute index (time >> SLOT_SHIFT) of the first slot not yet released.
    cursor: u64,
}

impl<B> Wheel<B> {
    /// A wheel for at most `capacity` packets, its clock at `now_ns`.
    pub fn new(capacity: usize, now_ns: u64) -> Wheel<B> {
        let capacity = capacity.min(NIL as usize - 1);
        let nodes: Box<[Node<B>]> = (0..capacity)
            .map(|i| Node {
                item: None,
                next: if i + 1 < capacity { i as u32 + 1 } else { NIL },
            })
            .collect();
        Wheel {
            head: vec![NIL; SLOTS].into_boxed_slice(),
            tail: vec![NIL; SLOTS].into_boxed_slice(),
            free: if capacity == 0 { NIL } else { 0 },
            nodes,
            len: 0,
            cursor: (now_ns >> SLOT_SHIFT) + 1,
        }
    }

    /// Packets held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether a packet departing at `depart_ns` is due already (its slot was released): the
    /// caller queues it directly. Call after [`advance`](Self::advance) to the present.
    #[inline]
    pub fn is_due(&self, depart_ns: u64) -> bool {
        depart_ns >> SLOT_SHIFT < self.cursor
    }

    /// Hold `pkt` for queue `qid` until `depart_ns` (clamped to the horizon). A full pool
    /// hands the packet back.
    pub fn insert(&mut self, pkt: B, qid: u8, depart_ns: u64) -> Result<(), B> {
        if self.free == NIL {
            return Err(pkt);
        }
        let idx = (depart_ns >> SLOT_SHIFT)
            .max(self.cursor)
            .min(self.cursor + SLOTS as u64 - 1);
        let s = (idx % SLOTS as u64) as usize;
        let n = self.free;
        let node = &mut self.nodes[n as usize];
        self.free = node.next;
        node.item = Some((pkt, qid));
        node.next = NIL;
        match self.tail[s] {
            NIL => self.head[s] = n,
            t => self.nodes[t as usize].next = n,
        }
        self.tail[s] = n;
        self.len += 1;
        Ok(())
    }

    /// Release, in departure order, every packet whose slot the clock has reached at `now_ns`.
    #[inline]
    pub fn advance(&mut self, now_ns: u64, mut f: impl FnMut(B, u8)) {
        let end = (now_ns >> SLOT_SHIFT).saturating_add(1);
        if end <= self.cursor {
            return;
        }
        if self.len != 0 {
            // Every held packet is in [cursor, cursor + SLOTS): one turn covers them all.
            let n = (end - self.cursor).min(SLOTS as u64);
            for i in 0..n {
                let s = ((self.cursor + i) % SLOTS as u64) as usize;
                self.release_slot(s, &mut f);
                if self.len == 0 {
                    break;
                }
            }
        }
        self.cursor = end;
    }

    /// Release every held packet in departure order, whatever the time (shutdown).
    pub fn release_all(&mut self, mut f: impl FnMut(B, u8)) {
        let mut i = 0;
        while self.len != 0 && i < SLOTS as u64 {
            let s = ((self.cursor + i) % SLOTS as u64) as usize;
            self.release_slot(s, &mut f);
            i += 1;
        }
    }

    fn release_slot(&mut self, s: usize, f: &mut impl FnMut(B, u8)) {
        let mut n = self.head[s];
        while n != NIL {
            let node = &mut self.nodes[n as usize];
            let next = node.next;
            if let Some((pkt, qid)) = node.item.take() {
                f(pkt, qid);
            }
            node.next = self.free;
            self.free = n;
            self.len -= 1;
            n = next;
        }
        self.head[s] = NIL;
        self.tail[s] = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1000;

    #[test]
    fn releases_in_departure_order_and_reuses_nodes() {
        let mut w: Wheel<u32> = Wheel::new(4, 0);
        assert!(w.is_due(10 * US), "the first slot is the present");
        w.insert(1, 0, 100 * US).unwrap();
        w.insert(2, 1, 100 * US).unwrap();
        w.insert(3, 0, 50 * US).unwrap();
        w.insert(4, 0, 10_000 * US).unwrap();
        assert_eq!(w.insert(5, 0, 60 * US), Err(5), "pool full");
        let mut out = Vec::new();
        w.advance(20 * US, |p, q| out.push((p, q)));
        assert!(out.is_empty());
        w.advance(120 * US, |p, q| out.push((p, q)));
        assert_eq!(out, vec![(3, 0), (1, 0), (2, 1)]);
        assert_eq!(w.len(), 1);
        // A long stall: one turn releases what is left.
        w.advance(10 * 1_000_000_000, |p, q| out.push((p, q)));
        assert_eq!(out.last(), Some(&(4, 0)));
        assert!(w.is_empty());
        for i in 0..4 {
            w.insert(i, 0, 20_000_000_000).unwrap();
        }
        let mut all = Vec::new();
        w.release_all(|p, _| all.push(p));
        assert_eq!(all, vec![0, 1, 2, 3]);
    }
}
