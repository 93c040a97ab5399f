//! The per-key lookup maps of a rule-table shard (docs/upf.md, "Shape"): open addressing
//! over the shard's keys, each slot holding the key's candidate PDR range and, in the common
//! case, the flattened rules of its one PDR ([`FastPath`]), so a packet's lookup reads one
//! cache line.

use super::tables::{
    MeterRef, OuterHeader, MAX_QERS_PER_PDR, MAX_SHARD_BITS, MAX_URRS_PER_PDR, NONE,
};
use std::marker::PhantomData;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// The flattened rules of the common case, stored inline in the key's [`KeyMap`] slot so one
/// cache line gives the packet path everything but the per-worker meter and usage state: a
/// key with exactly one candidate PDR (TS 29.244 section 5.2.1), no SDF filter, open QER
/// gates (section 8.2.7) and a forwarding FAR (section 8.2.26) with an IPv4 Outer Header
/// Creation (section 8.2.56) or none. Anything else takes the general path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastPath {
    /// Meters of the PDR's metered QERs in QER order; slot [`NONE`] pads.
    pub meters: [MeterRef; MAX_QERS_PER_PDR],
    /// Shard QER index of each meter (for its config when a worker re-creates it).
    pub meter_qers: [u32; MAX_QERS_PER_PDR],
    /// URR slots; [`NONE`] pads.
    pub urrs: [u32; MAX_URRS_PER_PDR],
    /// Outer header (if [`Self::OUTER_V4`]): remote TEID, peer and local IPv4 address (the
    /// peer a number, for the route lookup; the local address its octets, as written).
    pub outer_teid: u32,
    pub outer_peer: u32,
    pub outer_local: [u8; 4],
    /// The PDR's PDI QFI, [`Self::NO_QFI`] if none (uplink: must match the packet's).
    pub pdr_qfi: u8,
    /// Downlink: the QFI to mark (first QER QFI, else the PDR's, else 0).
    pub mark_qfi: u8,
    /// [`Self::OUTER_V4`]; the high bits are the map's.
    pub flags: u8,
}

impl FastPath {
    pub const NO_QFI: u8 = 0xFF;
    /// No meters, URRs, outer header or QFI: an empty slot's record, and where a shard
    /// starts building a key's record.
    pub const EMPTY: FastPath = FastPath {
        meters: [MeterRef::NONE; MAX_QERS_PER_PDR],
        meter_qers: [NONE; MAX_QERS_PER_PDR],
        urrs: [NONE; MAX_URRS_PER_PDR],
        outer_teid: 0,
        outer_peer: 0,
        outer_local: [0; 4],
        pdr_qfi: FastPath::NO_QFI,
        mark_qfi: 0,
        flags: 0,
    };
    /// Encapsulate with the outer header fields.
    pub const OUTER_V4: u8 = 1;

    /// The outer header, if any.
    #[inline]
    pub fn outer(&self) -> Option<OuterHeader> {
        (self.flags & Self::OUTER_V4 != 0).then(|| OuterHeader {
            teid: self.outer_teid,
            peer: IpAddr::V4(Ipv4Addr::from(self.outer_peer)),
            local: IpAddr::V4(Ipv4Addr::from(self.outer_local)),
        })
    }
}

/// One slot of a [`KeyMap`]: the key, its candidate range and (if set) the fast-path record,
/// in one cache line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct KeySlot {
    key: u64,
    range: (u32, u32),
    /// `fast.flags` also carries [`Self::USED`] and [`Self::HAS_FAST`] (the line has no
    /// room for more fields).
    fast: FastPath,
}

impl KeySlot {
    const USED: u8 = 0x80;
    const HAS_FAST: u8 = 0x40;

    /// The `fast` field of a used slot whose fast-path record is `f`.
    fn fast_record(f: Option<FastPath>) -> FastPath {
        match f {
            Some(mut fp) => {
                fp.flags |= KeySlot::USED | KeySlot::HAS_FAST;
                fp
            }
            None => FastPath {
                flags: KeySlot::USED,
                ..KeySlot::EMPTY.fast
            },
        }
    }
    pub(crate) const EMPTY: KeySlot = KeySlot {
        key: 0,
        range: (0, 0),
        fast: FastPath::EMPTY,
    };

    /// A used slot of `key` with candidate range `range` and fast-path record `fast`
    /// (a direct page slot, `upf::pages`).
    pub fn new(key: u64, range: (u32, u32), fast: Option<FastPath>) -> KeySlot {
        KeySlot {
            key,
            range,
            fast: KeySlot::fast_record(fast),
        }
    }

    /// The candidate range into [`Shard::pdr_order`](super::tables::Shard::pdr_order).
    #[inline]
    pub fn range(&self) -> (u32, u32) {
        self.range
    }

    #[inline]
    fn used(&self) -> bool {
        self.fast.flags & Self::USED != 0
    }

    /// Whether the slot holds a key.
    #[inline]
    pub fn is_used(&self) -> bool {
        self.used()
    }

    /// The key (as its `u64`) of a used slot.
    #[inline]
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The fast-path record, if
    /// [`Shard::index_fast`](super::tables::Shard::index_fast) gave this key one.
    #[inline]
    pub fn fast(&self) -> Option<&FastPath> {
        (self.fast.flags & Self::HAS_FAST != 0).then_some(&self.fast)
    }
}

/// Exact-match map from a lookup key to its candidate PDR range, open addressing with
/// linear probing and everything inline: a hit usually reads one cache line (the slot
/// holds the key, the range and the [`FastPath`] record). Load factor at most 2/3; the slot
/// count is not rounded to a power of two (the home slot is a multiply-shift of the hash),
/// so a map sized for its keys (`with_capacity`, as the compiler builds every shard) is
/// 2/3 full instead of 1/3..2/3: at a million sessions the slots are most of the tables.
///
/// The slot array is shared (`Arc`): the table's shard directory keeps each shard's slot
/// arrays beside its shard pointer ([`ShardTable`](super::shards::ShardTable)), so a packet's
/// home slot is found without reading the shard's own line; a map written after a clone
/// copies its slots first (`Arc::make_mut`), as the boxed array was copied by the clone.
#[derive(Debug, Clone)]
pub struct KeyMap<K> {
    slots: Arc<[KeySlot]>,
    len: usize,
    /// Sized at load factor 1/2 instead of 2/3 ([`Self::with_capacity_loose`]; kept by
    /// [`Self::with_room`]).
    loose: bool,
    _k: PhantomData<K>,
}

impl<K> Default for KeyMap<K> {
    fn default() -> Self {
        KeyMap {
            slots: empty_slots(0),
            len: 0,
            loose: false,
            _k: PhantomData,
        }
    }
}

impl<K: Copy + Into<u64>> KeyMap<K> {
    /// A map that holds `n` keys without growing (load factor 2/3 when full).
    pub fn with_capacity(n: usize) -> Self {
        let cap = if n == 0 {
            0
        } else {
            (n * 3).div_ceil(2).max(8)
        };
        KeyMap {
            slots: empty_slots(cap),
            len: 0,
            loose: false,
            _k: PhantomData,
        }
    }

    /// A map that holds `n` keys at load factor 1/2 (two slots a key): with linear probing
    /// a key is found in its home slot more often than at 2/3 (the packet path reads one
    /// line, not two, more often), for 64 bytes more a key. The compiler sizes the uplink
    /// TEID maps so (the 100k-session uplink's key slots are its main random misses).
    pub fn with_capacity_loose(n: usize) -> Self {
        let cap = if n == 0 { 0 } else { (n * 2).max(8) };
        KeyMap {
            slots: empty_slots(cap),
            len: 0,
            loose: true,
            _k: PhantomData,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Heap bytes of the slot array (with the `Arc`'s counts, padded to the slots'
    /// alignment: one slot's size; none for a map without slots, which shares one).
    pub fn heap_bytes(&self) -> usize {
        match self.slots.len() {
            0 => 0,
            n => (n + 1) * std::mem::size_of::<KeySlot>(),
        }
    }

    /// The shared slot array (for the shard directory, [`ShardTable`](super::shards::ShardTable)).
    #[inline]
    pub fn slots_arc(&self) -> &Arc<[KeySlot]> {
        &self.slots
    }

    /// The slots to write: copied first if shared.
    fn slots_mut(&mut self) -> &mut [KeySlot] {
        Arc::make_mut(&mut self.slots)
    }

    /// The home slot of `key`: the bits of the same Fibonacci hash as [`shard_of_in`] below
    /// the most shard bits a table can use (those are equal for every key of a shard),
    /// scaled to the slot count by multiply-shift (Lemire, "Fast Random Integer Generation
    /// in an Interval": `(h * n) >> 64`), so any count works, not only powers of two.
    #[inline]
    fn home(&self, key: u64) -> usize {
        home_in(self.slots.len(), key)
    }

    /// The slot array, for [`prefetch_home_in`] and [`slot_from_in`] (the batched lookup
    /// picks one of a shard's maps and runs one copy of them on its slots).
    #[inline]
    pub fn slots(&self) -> &[KeySlot] {
        &self.slots
    }

    /// The slot after `i`, wrapping.
    #[inline]
    fn next(&self, i: usize) -> usize {
        next_in(self.slots.len(), i)
    }

    /// The slot holding `key`.
    #[inline]
    pub fn slot(&self, key: K) -> Option<&KeySlot> {
        if self.slots.is_empty() {
            return None;
        }
        let s = &self.slots[self.probe(key.into())];
        s.used().then_some(s)
    }

    /// The slot holding `key`, or the free slot its probe ends at (the map has slots; the
    /// load factor leaves free ones, so the probe ends).
    #[inline]
    fn probe(&self, key: u64) -> usize {
        self.probe_from(self.home(key), key)
    }

    /// [`Self::probe`] starting at slot `i` (`key`'s home slot).
    #[inline]
    fn probe_from(&self, mut i: usize, key: u64) -> usize {
        while self.slots[i].used() && self.slots[i].key != key {
            i = self.next(i);
        }
        i
    }

    /// Ask the CPU to start loading `key`'s home slot (a hint: never faults).
    #[inline]
    pub fn prefetch(&self, key: K) {
        self.prefetch_home(key);
    }

    /// [`Self::prefetch`] of the home slot and the one after it, answering `key`'s home slot
    /// for [`Self::slot_from`] (0 for a map without slots), so a batched lookup hashes the
    /// key once. Each slot is a cache line and a map sized for its keys is 2/3 full: with
    /// linear probing a hit reads past its home slot about every other lookup (0.57 slots
    /// per lookup measured at 10k sessions), so the second line is worth asking for too.
    #[inline]
    pub fn prefetch_home(&self, key: K) -> usize {
        prefetch_home_in(&self.slots, key.into())
    }

    /// [`Self::slot`] given `key`'s home slot `home` as [`Self::prefetch_home`] of this map
    /// answered it.
    #[inline]
    pub fn slot_from(&self, home: usize, key: K) -> Option<&KeySlot> {
        slot_from_in(&self.slots, home, key.into())
    }

    /// Every used slot, in slot order.
    pub fn used_slots(&self) -> impl Iterator<Item = &KeySlot> + '_ {
        self.slots.iter().filter(|s| s.used())
    }

    /// The candidate range of `key`.
    #[inline]
    pub fn get(&self, key: &K) -> Option<&(u32, u32)> {
        self.slot(*key).map(|s| &s.range)
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.slot(*key).is_some()
    }

    /// Insert or replace `key`'s range (clearing its fast-path record); returns the old one.
    pub fn insert(&mut self, key: K, range: (u32, u32)) -> Option<(u32, u32)> {
        if (self.len + 1) * 3 > self.slots.len() * 2 {
            self.grow();
        }
        let key = key.into();
        let mut i = self.home(key);
        let n = self.slots.len();
        let slots = self.slots_mut();
        loop {
            let next = next_in(n, i);
            let s = &mut slots[i];
            if !s.used() {
                *s = KeySlot {
                    key,
                    range,
                    ..KeySlot::EMPTY
                };
                s.fast.flags = KeySlot::USED;
                self.len += 1;
                return None;
            }
            if s.key == key {
                let old = s.range;
                s.range = range;
                s.fast = KeySlot::EMPTY.fast;
                s.fast.flags = KeySlot::USED;
                return Some(old);
            }
            i = next;
        }
    }

    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(8);
        let old = std::mem::replace(&mut self.slots, empty_slots(cap));
        place_all(self.slots_mut(), &old);
    }

    /// (key, range) of every entry, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, (u32, u32))> + '_ {
        self.slots
            .iter()
            .filter(|s| s.used())
            .map(|s| (s.key, s.range))
    }

    /// A copy sized for `extra` more keys (`with_capacity(len + extra)`, or
    /// `with_capacity_loose` for a loose map): every entry moved over whole, its fast-path
    /// record included, so a shard that only gains keys is copied at memory speed instead
    /// of being re-indexed key by key.
    pub fn with_room(&self, extra: usize) -> Self {
        self.with_room_at(extra, self.loose)
    }

    /// [`Self::with_room`], the copy sized as [`Self::with_capacity_loose`] whatever `self` is.
    pub fn with_room_loose(&self, extra: usize) -> Self {
        self.with_room_at(extra, true)
    }

    fn with_room_at(&self, extra: usize, loose: bool) -> Self {
        let mut m = if loose {
            Self::with_capacity_loose(self.len + extra)
        } else {
            Self::with_capacity(self.len + extra)
        };
        if m.slots.is_empty() {
            // No keys: the shared empty array stays shared.
            return m;
        }
        place_all(m.slots_mut(), &self.slots);
        m.len = self.len;
        m
    }

    pub(super) fn fill_fast(&mut self, mut f: impl FnMut((u32, u32)) -> Option<FastPath>) {
        if self.slots.is_empty() {
            // The shared empty array stays shared (`make_mut` would copy it).
            return;
        }
        for s in self.slots_mut().iter_mut().filter(|s| s.used()) {
            s.fast = KeySlot::fast_record(f(s.range));
        }
    }

    /// [`Self::fill_fast`] for the slots of `keys` only.
    pub(super) fn fill_fast_of(
        &mut self,
        keys: &[u64],
        mut f: impl FnMut((u32, u32)) -> Option<FastPath>,
    ) {
        for &k in keys {
            if self.slots.is_empty() {
                return;
            }
            let i = self.probe(k);
            if self.slots[i].used() {
                let s = &mut self.slots_mut()[i];
                s.fast = KeySlot::fast_record(f(s.range));
            }
        }
    }
}

/// `n` empty slots, built in place in their shared allocation; a map without slots shares
/// one allocation with every other (the counts of an `Arc<[KeySlot]>` take a slot's 64 bytes).
fn empty_slots(n: usize) -> Arc<[KeySlot]> {
    static NONE: std::sync::OnceLock<Arc<[KeySlot]>> = std::sync::OnceLock::new();
    if n == 0 {
        return NONE.get_or_init(|| Arc::new([])).clone();
    }
    std::iter::repeat_n(KeySlot::EMPTY, n).collect()
}

/// Every used slot of `from` moved whole (its fast-path record included) into `slots`, a
/// fresh array with room for them: keys are distinct, so each probe ends at a free slot.
fn place_all(slots: &mut [KeySlot], from: &[KeySlot]) {
    let n = slots.len();
    for s in from.iter().filter(|s| s.used()) {
        let mut i = home_in(n, s.key);
        while slots[i].used() {
            i = next_in(n, i);
        }
        slots[i] = *s;
    }
}

/// The slot after `i` in a map of `n` slots, wrapping.
#[inline(always)]
fn next_in(n: usize, i: usize) -> usize {
    if i + 1 == n {
        0
    } else {
        i + 1
    }
}

/// [`KeyMap::home`] in a map of `n` slots.
#[inline(always)]
fn home_in(n: usize, key: u64) -> usize {
    let h = key
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(MAX_SHARD_BITS);
    ((u128::from(h) * n as u128) >> 64) as usize
}

/// [`KeyMap::prefetch_home`] on a map's [`KeyMap::slots`], the key as its `u64` (`K`'s
/// `Into<u64>`), for a caller holding the keys of several maps in one word.
#[inline(always)]
pub fn prefetch_home_in(slots: &[KeySlot], key: u64) -> usize {
    // Below the slot count (0 for a map without slots, which `slot_from` never reads),
    // so the hints need no bounds check; and a hint never faults.
    let i = home_in(slots.len(), key);
    let home = slots.as_ptr().wrapping_add(i);
    crate::upf::prefetch::prefetch_addr(home.cast());
    // The slot after it; for the last slot the line past the array instead of slot 0
    // (a probe wraps in one lookup of `capacity`).
    crate::upf::prefetch::prefetch_addr(home.wrapping_add(1).cast());
    i
}

/// [`KeyMap::slot_from`] on a map's [`KeyMap::slots`], the key as its `u64` (a word no
/// `K` converts to is in no slot: `None`).
#[inline(always)]
pub fn slot_from_in(slots: &[KeySlot], home: usize, key: u64) -> Option<&KeySlot> {
    // `probe_from` written as one loop that answers the slot (no second bounds check
    // and used test after it; a map without slots has no slot `home`: `None`).
    let mut i = home;
    loop {
        let s = slots.get(i)?;
        if !s.used() {
            return None;
        }
        if s.key == key {
            return Some(s);
        }
        i = if i + 1 == slots.len() { 0 } else { i + 1 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_map_inserts_replaces_grows_and_misses() {
        let mut m = KeyMap::<u32>::default();
        assert!(m.get(&1).is_none() && m.is_empty());
        for k in 0..1000u32 {
            assert_eq!(m.insert(k * 7, (k, k + 1)), None);
        }
        assert_eq!(m.len(), 1000);
        assert!(m.capacity() * 2 >= m.len() * 3);
        for k in 0..1000u32 {
            assert_eq!(m.get(&(k * 7)), Some(&(k, k + 1)));
            assert!(!m.contains_key(&(k * 7 + 1)));
        }
        assert_eq!(m.insert(14, (5, 9)), Some((2, 3)));
        assert_eq!(m.get(&14), Some(&(5, 9)));
        assert_eq!(m.len(), 1000);
        assert_eq!(m.iter().count(), 1000);
        let mut w = KeyMap::<u64>::with_capacity(3);
        w.insert(u64::MAX, (0, 1));
        assert_eq!(w.get(&u64::MAX), Some(&(0, 1)));
        assert_eq!(std::mem::size_of::<KeySlot>(), 64);
    }

    #[test]
    fn maps_without_keys_share_one_empty_array() {
        let a = KeyMap::<u32>::default();
        let mut b = KeyMap::<u64>::with_capacity(0);
        b.fill_fast(|_| None);
        let c = a.with_room(0);
        assert!(std::ptr::eq(a.slots(), b.slots()) && std::ptr::eq(a.slots(), c.slots()));
        assert_eq!((a.heap_bytes(), b.heap_bytes(), c.heap_bytes()), (0, 0, 0));
    }

    #[test]
    fn loose_key_map_is_half_full_and_stays_loose() {
        for n in [1usize, 5, 30, 1000] {
            let mut m = KeyMap::<u32>::with_capacity_loose(n);
            assert_eq!(m.capacity(), (n * 2).max(8), "{n}");
            for k in 0..n as u32 {
                assert_eq!(m.insert(k.wrapping_mul(2_654_435_761), (k, k + 1)), None);
            }
            assert_eq!(m.capacity(), (n * 2).max(8), "{n}");
            // A copy with room keeps the load factor (and every entry); a tight map's
            // loose copy takes it.
            let r = m.with_room(n);
            assert_eq!(r.capacity(), (4 * n).max(8), "{n}");
            let t = KeyMap::<u32>::with_capacity(n).with_room_loose(n);
            assert_eq!(t.capacity(), (2 * n).max(8), "{n}");
            for k in 0..n as u32 {
                let key = k.wrapping_mul(2_654_435_761);
                assert_eq!(m.get(&key), Some(&(k, k + 1)));
                assert_eq!(r.get(&key), Some(&(k, k + 1)));
            }
            assert_eq!(r.len(), n);
        }
        // Written after a clone: the clone keeps its slots (copy on write).
        let mut a = KeyMap::<u32>::with_capacity_loose(4);
        a.insert(1, (0, 1));
        let b = a.clone();
        a.insert(1, (5, 6));
        assert_eq!((a.get(&1), b.get(&1)), (Some(&(5, 6)), Some(&(0, 1))));
    }

    #[test]
    fn key_map_sized_for_its_keys_is_two_thirds_full() {
        for n in [1usize, 5, 7, 30, 61, 100, 1000] {
            let mut m = KeyMap::<u32>::with_capacity(n);
            assert_eq!(m.capacity(), (n * 3).div_ceil(2).max(8), "{n}");
            for k in 0..n as u32 {
                assert_eq!(m.insert(k.wrapping_mul(2_654_435_761), (k, k + 1)), None);
            }
            // Exactly sized: no growth, every key found, misses end at an empty slot.
            assert_eq!(m.capacity(), (n * 3).div_ceil(2).max(8));
            for k in 0..n as u32 {
                assert_eq!(m.get(&k.wrapping_mul(2_654_435_761)), Some(&(k, k + 1)));
            }
            for k in n as u32..n as u32 + 500 {
                assert!(!m.contains_key(&k.wrapping_mul(2_654_435_761)));
            }
        }
        // Two keys whose home is the last slot: the second wraps around to the first slot.
        let mut m = KeyMap::<u32>::with_capacity(4);
        let mut last = (0..u32::MAX).filter(|&k| m.home(u64::from(k)) == m.capacity() - 1);
        let (a, b) = (last.next().unwrap(), last.next().unwrap());
        m.insert(a, (1, 2));
        m.insert(b, (3, 4));
        assert!(m.slots[0].used() && m.slots[0].key == u64::from(b));
        assert_eq!((m.get(&a), m.get(&b)), (Some(&(1, 2)), Some(&(3, 4))));
        // The batched lookup from the home slot answers as `slot`, wrapped keys included.
        for k in [a, b, a ^ 1, 7] {
            let home = m.prefetch_home(k);
            assert_eq!(home, m.home(u64::from(k)));
            assert_eq!(m.slot_from(home, k).map(|s| s.range()), m.get(&k).copied());
        }
        let empty = KeyMap::<u64>::default();
        assert_eq!(empty.prefetch_home(3), 0);
        assert!(empty.slot_from(0, 3).is_none());
    }
}
