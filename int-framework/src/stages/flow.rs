//! The flow of a packet as the INT stages see it (the outer IPv6 header's 5-tuple, seed
//! 003 Listing 1), read from the packet's [`PacketMeta`] (the shared classifier's record) —
//! the rule index keyed by the classifier's [`flow_hash`] — and the per-namespace state.

use super::L3Offset;
use crate::namespace::TableSnapshot;
use peregrine_dataplane::buffer::PacketBuf;
use peregrine_dataplane::classify::{classify, classify_at, flow_hash};
use peregrine_dataplane::meta::{flags, PacketMeta};
use peregrine_wire::ipv6::ip_protocol;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rustc_hash::FxHashMap;
use std::net::Ipv6Addr;

/// The flow of an IPv6 packet: addresses, upper protocol, ports (0 when none: not TCP/UDP,
/// or a non-first fragment).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flow {
    /// Offset of the (outer) IPv6 header.
    pub off: usize,
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    /// IPv6 total length.
    pub len: usize,
    pub next_header: u8,
    pub hop_limit: u8,
    /// [`flow_hash`] of the 5-tuple above.
    pub hash: u32,
}

/// The packet's flow: from its record when `trust` (a classifier ran before this stage)
/// and the record is classified, else the stage classifies the packet itself and leaves
/// the record for the stages after it. `None`: not an IPv6 packet, or one that does not
/// parse (left alone).
#[inline]
pub(crate) fn locate<B: PacketBuf>(l3: L3Offset, trust: bool, b: &mut B) -> Option<Flow> {
    if !(trust && b.pkt_meta().is_classified()) {
        let mut m = PacketMeta::EMPTY;
        let r = match l3 {
            L3Offset::Ethernet => classify(b.data(), &mut m),
            L3Offset::Raw => classify_at(b.data(), 0, true, &mut m),
        };
        *b.pkt_meta_mut() = m;
        r.ok()?;
    }
    let m = b.pkt_meta();
    if !m.has(flags::OUTER_V6) {
        return None;
    }
    Some(Flow::read(b.data(), m))
}

impl Flow {
    /// The outer IPv6 header's flow of a classified record (the classifier checked the
    /// offsets; for a G-PDU the flow is the outer UDP datagram, not the inner packet).
    #[inline]
    fn read(d: &[u8], m: &PacketMeta) -> Flow {
        let off = usize::from(m.l3_off);
        let h: &[u8; 40] = d[off..off + 40].try_into().expect("40 bytes");
        let addr = |i: usize| {
            let a: [u8; 16] = h[i..i + 16].try_into().expect("16 bytes");
            Ipv6Addr::from(a)
        };
        let (src, dst) = (addr(8), addr(24));
        let (proto, ports_at, hash) = if m.has(flags::GPDU) {
            (ip_protocol::UDP, Some(m.l4_off), None)
        } else {
            let tcp_udp = matches!(m.proto, ip_protocol::TCP | ip_protocol::UDP);
            let at = (tcp_udp && m.has(flags::L4)).then_some(m.inner_l4_off);
            (m.proto, at, Some(m.flow_hash))
        };
        let (sport, dport) = match ports_at {
            Some(at) => {
                let at = usize::from(at);
                let p: &[u8; 4] = d[at..at + 4].try_into().expect("4 bytes");
                (
                    u16::from_be_bytes([p[0], p[1]]),
                    u16::from_be_bytes([p[2], p[3]]),
                )
            }
            None => (0, 0),
        };
        let hash = hash
            .unwrap_or_else(|| flow_hash(u128::from(src), u128::from(dst), sport, dport, proto));
        Flow {
            off,
            src,
            dst,
            proto,
            sport,
            dport,
            len: 40 + usize::from(u16::from_be_bytes([h[4], h[5]])),
            next_header: h[6],
            hop_limit: h[7],
            hash,
        }
    }
}

/// A rule's 5-tuple as a hash key. `wild` says which ports the rule leaves open (bit 0:
/// source, bit 1: destination; Listing 1: port 0 matches any); those ports are 0 here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowKey {
    src: u128,
    dst: u128,
    ports: u32,
    proto: u8,
    wild: u8,
    /// [`flow_hash`] of the key's 5-tuple (wildcard ports 0): for an exact key the packet's
    /// `flow_hash`, which the classifier already computed.
    hash: u32,
}

impl std::hash::Hash for FlowKey {
    /// One word for the hasher: the precomputed flow hash.
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u32(self.hash);
    }
}

impl FlowKey {
    fn new(src: u128, dst: u128, sport: u16, dport: u16, proto: u8, wild: u8) -> FlowKey {
        FlowKey {
            src,
            dst,
            ports: (sport as u32) << 16 | dport as u32,
            proto,
            wild,
            hash: flow_hash(src, dst, sport, dport, proto),
        }
    }

    #[inline]
    fn of_flow(f: &Flow, wild: u8) -> FlowKey {
        if wild == 0 {
            return FlowKey {
                src: u128::from(f.src),
                dst: u128::from(f.dst),
                ports: (f.sport as u32) << 16 | f.dport as u32,
                proto: f.proto,
                wild,
                hash: f.hash,
            };
        }
        let sport = if wild & 1 != 0 { 0 } else { f.sport };
        let dport = if wild & 2 != 0 { 0 } else { f.dport };
        FlowKey::new(
            u128::from(f.src),
            u128::from(f.dst),
            sport,
            dport,
            f.proto,
            wild,
        )
    }
}

/// The INTSource lookup ([`TableSnapshot::lookup_flow`], seed Listing 1 matching) as a
/// tuple-space hash: one table keyed by the 5-tuple with the rule's wildcard ports zeroed,
/// probed once per wildcard pattern present (one probe when every rule is exact or all
/// rules share a pattern, at most four). Gives the index of the first (lowest-id) matching
/// namespace in the snapshot. Rebuilt when the snapshot changes, checked once per batch.
///
/// In front of it, a direct-mapped cache of exact 5-tuples (hit or miss) indexed by the
/// packet's `flow_hash`, which the classifier already computed: a packet of a flow seen
/// recently costs one line and a 37-byte compare instead of hashing once per wildcard
/// pattern (OVS's exact-match cache idea). A snapshot change invalidates it by generation.
#[derive(Debug)]
pub(crate) struct FlowIndex {
    /// Which snapshot this indexes: its address and generation.
    of: (usize, u64),
    map: FxHashMap<FlowKey, u32>,
    patterns: [u8; 4],
    n_patterns: usize,
    cache: Box<[CacheEntry; CACHE_ENTRIES]>,
    /// Generation of the cache's entries; bumped on every rebuild (entries of older
    /// generations are misses). Starts at 1: a zeroed entry is never valid.
    cache_gen: u32,
}

/// Entries of [`FlowIndex`]'s exact-match cache (a power of two).
const CACHE_ENTRIES: usize = 1024;

/// One cached answer: the exact 5-tuple, its hash and the namespace index (`u32::MAX`:
/// no rule matches).
#[derive(Debug, Clone, Copy)]
struct CacheEntry {
    gen: u32,
    hash: u32,
    ports: u32,
    slot: u32,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    proto: u8,
}

impl CacheEntry {
    const EMPTY: CacheEntry = CacheEntry {
        gen: 0,
        hash: 0,
        ports: 0,
        slot: u32::MAX,
        src: Ipv6Addr::UNSPECIFIED,
        dst: Ipv6Addr::UNSPECIFIED,
        proto: 0,
    };
}

impl FlowIndex {
    pub(crate) fn new() -> FlowIndex {
        FlowIndex {
            of: (0, u64::MAX),
            map: FxHashMap::with_capacity_and_hasher(NS_CAPACITY, Default::default()),
            patterns: [0; 4],
            n_patterns: 0,
            cache: Box::new([CacheEntry::EMPTY; CACHE_ENTRIES]),
            cache_gen: 1,
        }
    }

    /// Re-index `t` if it is not the snapshot indexed; returns whether it was rebuilt.
    /// A rebuild happens on a table change only (a control-plane event), so the rare
    /// allocation of a table grown past its capacity is not per packet.
    pub(crate) fn sync(&mut self, t: &TableSnapshot) -> bool {
        let of = (t as *const TableSnapshot as usize, t.generation);
        if of == self.of {
            return false;
        }
        self.of = of;
        self.cache_gen = self.cache_gen.wrapping_add(1).max(1);
        self.map.clear();
        self.n_patterns = 0;
        for (i, n) in t.namespaces.iter().enumerate() {
            if n.in_band {
                // Learned from an in-band request: not a source rule (`lookup_flow`).
                continue;
            }
            let r = &n.rule;
            let wild = (r.src_port == 0) as u8 | ((r.dst_port == 0) as u8) << 1;
            let key = FlowKey::new(
                u128::from(r.src_ip),
                u128::from(r.dst_ip),
                r.src_port,
                r.dst_port,
                r.protocol.number(),
                wild,
            );
            // Sorted by id: the first rule with a key is the lowest id, as lookup_flow.
            self.map.entry(key).or_insert(i as u32);
            if !self.patterns[..self.n_patterns].contains(&wild) {
                self.patterns[self.n_patterns] = wild;
                self.n_patterns += 1;
            }
        }
        true
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.n_patterns == 0
    }

    /// The cached answer for the packet whose current classified record is `m`, compared
    /// in place (nothing copied out of the packet): `Some(hit)` on a cache hit; `None` when
    /// the cache cannot answer (a miss, an unclassified or non-IPv6 record, a G-PDU, whose
    /// flow is the outer UDP datagram and not the record's hash): the caller then takes the
    /// full path ([`locate`] and [`FlowIndex::lookup`], which fills the cache).
    #[inline]
    pub(crate) fn cached(&self, d: &[u8], m: &PacketMeta) -> Option<Option<usize>> {
        if !m.is_classified() || !m.has(flags::OUTER_V6) || m.has(flags::GPDU) {
            return None;
        }
        let e = &self.cache[m.flow_hash as usize & (CACHE_ENTRIES - 1)];
        if e.gen != self.cache_gen || e.hash != m.flow_hash || e.proto != m.proto {
            return None;
        }
        let off = usize::from(m.l3_off);
        let a: &[u8; 32] = d.get(off + 8..off + 40)?.try_into().ok()?;
        if a[..16] != e.src.octets() || a[16..] != e.dst.octets() {
            return None;
        }
        let tcp_udp = matches!(m.proto, ip_protocol::TCP | ip_protocol::UDP);
        let ports = if tcp_udp && m.has(flags::L4) {
            let at = usize::from(m.inner_l4_off);
            let p: &[u8; 4] = d.get(at..at + 4)?.try_into().ok()?;
            u32::from_be_bytes(*p)
        } else {
            0
        };
        if ports != e.ports {
            return None;
        }
        Some((e.slot != u32::MAX).then_some(e.slot as usize))
    }

    /// Index (in the snapshot) of the first namespace whose rule matches `f`.
    #[inline]
    pub(crate) fn lookup(&mut self, f: &Flow) -> Option<usize> {
        let ports = (f.sport as u32) << 16 | f.dport as u32;
        let e = &mut self.cache[f.hash as usize & (CACHE_ENTRIES - 1)];
        if e.gen == self.cache_gen
            && e.hash == f.hash
            && e.ports == ports
            && e.proto == f.proto
            && e.src == f.src
            && e.dst == f.dst
        {
            return (e.slot != u32::MAX).then_some(e.slot as usize);
        }
        let mut best: Option<u32> = None;
        for &w in &self.patterns[..self.n_patterns] {
            if let Some(&i) = self.map.get(&FlowKey::of_flow(f, w)) {
                best = Some(best.map_or(i, |b| b.min(i)));
            }
        }
        *e = CacheEntry {
            gen: self.cache_gen,
            hash: f.hash,
            ports,
            slot: best.unwrap_or(u32::MAX),
            src: f.src,
            dst: f.dst,
            proto: f.proto,
        };
        best.map(|i| i as usize)
    }
}

/// Index of namespace `ns` in the snapshot (sorted by id).
pub(crate) fn ns_index(t: &TableSnapshot, ns: u16) -> Option<usize> {
    t.namespaces
        .binary_search_by_key(&ns, |n| n.rule.ns_id)
        .ok()
}

/// Per-namespace state of a stage, in the snapshot's order (so a [`FlowIndex`] hit is a
/// direct index), carried over by namespace id when the table changes.
#[derive(Debug)]
pub(crate) struct NsSlots<T> {
    ids: Vec<u16>,
    pub vals: Vec<T>,
    next_ids: Vec<u16>,
    next_vals: Vec<T>,
}

impl<T: Copy> NsSlots<T> {
    pub(crate) fn new() -> NsSlots<T> {
        NsSlots {
            ids: Vec::new(),
            vals: Vec::new(),
            next_ids: Vec::new(),
            next_vals: Vec::new(),
        }
    }

    /// Lay the slots out as `t`'s namespaces, keeping the state of those that remain.
    pub(crate) fn sync(&mut self, t: &TableSnapshot, init: T) {
        self.next_ids.clear();
        self.next_vals.clear();
        for n in &t.namespaces {
            let id = n.rule.ns_id;
            let v = match self.ids.binary_search(&id) {
                Ok(i) => self.vals[i],
                Err(_) => init,
            };
            self.next_ids.push(id);
            self.next_vals.push(v);
        }
        std::mem::swap(&mut self.ids, &mut self.next_ids);
        std::mem::swap(&mut self.vals, &mut self.next_vals);
    }

    pub(crate) fn get(&self, ns: u16) -> Option<&T> {
        self.ids.binary_search(&ns).ok().map(|i| &self.vals[i])
    }
}

/// Per-namespace packet/byte counters kept by a node (Listing 2 counters), wrapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounters {
    pub packets: u32,
    pub bytes: u32,
}

impl FlowCounters {
    pub(crate) fn add(&mut self, len: usize) {
        self.packets = self.packets.wrapping_add(1);
        self.bytes = self.bytes.wrapping_add(len as u32);
    }
}

/// Most namespaces a stage keeps state for (the namespace table's default cap); the maps
/// are allocated for this many up front so a new namespace does not allocate.
pub(crate) const NS_CAPACITY: usize = crate::namespace::DEFAULT_MAX_NAMESPACES;

/// The per-worker PRNG of the probability mode: xoshiro256++ (`rand_xoshiro`), seeded by
/// SplitMix64 from `prng_seed` mixed with the worker index (deterministic under test).
#[derive(Debug, Clone)]
pub(crate) struct Prng(Xoshiro256PlusPlus);

impl Prng {
    pub(crate) fn new(seed: u64, worker: usize) -> Prng {
        let s = seed ^ (worker as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
        Prng(Xoshiro256PlusPlus::seed_from_u64(s))
    }
    /// Uniform in [0, 1): the top 53 bits of one output.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namespace::NamespaceTable;
    use crate::request::{Flags, Mode, Protocol, Rule, TraceType};

    fn addr(i: u8) -> Ipv6Addr {
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i as u16)
    }

    fn rule(ns: u16, src: u8, dst: u8, sport: u16, dport: u16, protocol: Protocol) -> Rule {
        Rule {
            ns_id: ns,
            app_id: 1,
            src_ip: addr(src),
            dst_ip: addr(dst),
            src_port: sport,
            dst_port: dport,
            protocol,
            trace_type: TraceType::SEED_EXPERIMENTS,
            mode: Mode::Count(10),
            flags: Flags::default(),
        }
    }

    fn flow(src: u8, dst: u8, proto: u8, sport: u16, dport: u16) -> Flow {
        Flow {
            off: 14,
            src: addr(src),
            dst: addr(dst),
            proto,
            sport,
            dport,
            len: 100,
            next_header: proto,
            hop_limit: 64,
            hash: flow_hash(
                u128::from(addr(src)),
                u128::from(addr(dst)),
                sport,
                dport,
                proto,
            ),
        }
    }

    /// The hash index answers exactly as the snapshot's linear `lookup_flow` (first match,
    /// lowest id), over exact rules, every wildcard pattern and overlapping rules.
    #[test]
    fn flow_index_agrees_with_linear_lookup() {
        let mut t = NamespaceTable::default();
        let rules = [
            rule(9, 1, 2, 1000, 2000, Protocol::Udp), // exact
            rule(5, 1, 2, 0, 2000, Protocol::Udp),    // any source port, overlaps 9
            rule(7, 1, 2, 1000, 0, Protocol::Udp),    // any destination port
            rule(3, 3, 4, 0, 0, Protocol::Tcp),       // any ports
            rule(11, 3, 4, 80, 443, Protocol::Tcp),   // exact, shadowed by 3
            rule(2, 5, 6, 1, 2, Protocol::Icmp),      // exact, ICMP has no ports
            rule(4, 5, 6, 0, 0, Protocol::Icmp),
        ];
        for r in rules {
            t.install(r).unwrap();
        }
        let snap = t.snapshot();
        let mut idx = FlowIndex::new();
        assert!(idx.sync(&snap));
        assert!(!idx.sync(&snap), "same snapshot: no rebuild");
        assert_eq!(idx.n_patterns, 4);
        let mut hits = 0;
        for src in 0..8 {
            for dst in 0..8 {
                for proto in [ip_protocol::UDP, ip_protocol::TCP, 58] {
                    for sport in [0, 1, 80, 1000, 1001] {
                        for dport in [0, 2, 443, 2000, 2001] {
                            let f = flow(src, dst, proto, sport, dport);
                            let want = snap
                                .lookup_flow(f.src, f.dst, f.proto, f.sport, f.dport)
                                .map(|n| n.ns_id());
                            let got = idx.lookup(&f).map(|i| snap.namespaces[i].ns_id());
                            assert_eq!(got, want, "{f:?}");
                            hits += want.is_some() as usize;
                        }
                    }
                }
            }
        }
        assert!(hits > 50, "the grid must exercise matches, got {hits}");
        // Exact rule 9 is shadowed by the lower id 5 (any source port).
        let f = flow(1, 2, ip_protocol::UDP, 1000, 2000);
        assert_eq!(idx.lookup(&f).map(|i| snap.namespaces[i].ns_id()), Some(5));
    }

    #[test]
    fn flow_index_follows_table_changes() {
        let mut t = NamespaceTable::default();
        let mut idx = FlowIndex::new();
        assert!(idx.sync(&t.snapshot()));
        assert!(idx.is_empty());
        t.install(rule(1, 1, 2, 0, 5000, Protocol::Udp)).unwrap();
        let snap = t.snapshot();
        assert!(idx.sync(&snap));
        assert!(!idx.is_empty());
        assert!(idx.lookup(&flow(1, 2, ip_protocol::UDP, 7, 5000)).is_some());
        t.remove(1).unwrap();
        assert!(idx.sync(&t.snapshot()));
        assert!(idx.is_empty());
        assert!(idx.lookup(&flow(1, 2, ip_protocol::UDP, 7, 5000)).is_none());
    }

    #[test]
    fn slots_keep_state_of_remaining_namespaces() {
        let mut t = NamespaceTable::default();
        t.install(rule(4, 1, 2, 0, 1, Protocol::Udp)).unwrap();
        t.install(rule(8, 1, 2, 0, 2, Protocol::Udp)).unwrap();
        let mut s: NsSlots<u32> = NsSlots::new();
        s.sync(&t.snapshot(), 0);
        s.vals[0] = 40;
        s.vals[1] = 80;
        t.install(rule(6, 1, 2, 0, 3, Protocol::Udp)).unwrap();
        t.remove(4).unwrap();
        s.sync(&t.snapshot(), 1);
        assert_eq!(s.ids, [6, 8]);
        assert_eq!(s.vals, [1, 80]);
        assert_eq!(s.get(8), Some(&80));
        assert_eq!(s.get(4), None);
    }
}
