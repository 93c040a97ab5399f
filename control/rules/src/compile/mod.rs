//! The rule compiler: N4 sessions (TS 29.244 section 5.2) to the sharded [`UpfTables`].
//!
//! Mapping (see `dataplane/src/upf/tables.rs` for the contract):
//! * A PDR with a local F-TEID is filed under that TEID (uplink from ACCESS; from CORE it is
//!   N9 traffic, direction downlink). A PDR from CORE / SGi-LAN without F-TEID is filed under
//!   the UE IPv4 address and / or the UE IPv6 /64 of its PDI. A PDR from CP-function is not
//!   filed (those packets never reach the N3/N6 lookups). Candidates under one key are
//!   ordered by precedence (section 5.2.1: lower value first), ties by PDR ID.
//! * Outer Header Removal (section 8.2.64) descriptions 0, 1 and 6 are GTP-U decapsulation;
//!   any other is refused (we cannot remove it, and ignoring it would corrupt packets).
//! * Apply Action (section 8.2.26): exactly one of DROP / FORW / BUFF; NOCP is honoured with
//!   BUFF and ignored otherwise; DUPL is refused (duplication is not implemented, and ignoring
//!   it would silently lose the copies).
//! * Outer Header Creation (section 8.2.56) GTP-U/UDP/IPv4 or IPv6 gives an [`OuterHeader`]
//!   whose source is our local address of the peer's family (preferring one the session's
//!   F-TEIDs use); other descriptions are refused.
//! * A QER (section 7.5.2.5) becomes one [`QerRule`] per direction a PDR uses it in: gate,
//!   MBR → PIR and GBR → CIR with the bursts of the QFI's policy (`QerPolicy::meter_kbps`), a pacer when it shapes, QFI. Each metered direction owns a meter
//!   slot; a direction without MBR needs none (`MeterRef { slot: NONE, generation: 0 }`).
//! * Each URR of the session owns a usage-counter slot.
//!
//! Slots are stable for a rule's life. Freed slots are reused last-freed-first; a slot's
//! generation is bumped when it is handed out again and when its meter config changes, and
//! starts at 1, so a worker's zeroed state never matches a live rule.
//!
//! Errors (the Cause of section 8.2.1 and the Offending IE of section 8.2.22) are computed
//! before anything changes: [`Compiler::check`] and [`Compiler::upsert`] share [`plan`],
//! and a refused `upsert` leaves the compiler as it was.
//!
//! [`plan`]: Compiler::check

use crate::patch::Scratch;
use crate::sdf;
use arrayvec::ArrayVec;
use peregrine_dataplane::qos::trtcm::{ColourMode, TrTcmConfig};
use peregrine_dataplane::qos::QosPolicies;
use peregrine_dataplane::upf::shards::ShardDirs;
use peregrine_dataplane::upf::tables::{
    iface, shard_of_in, Direction, FarAction, FarRule, FlowFilter, MeterRef, OuterHeader, PdrRule,
    QerRule, SessionInfo, Shard, UpfTables, UrrRef, MAX_QERS_PER_PDR, MAX_SHARD_BITS,
    MAX_URRS_PER_PDR, NONE, SHARD_BITS,
};
use peregrine_n4::Session;
use peregrine_pfcp::cause;
use peregrine_pfcp::ie::{apply_action as aa, ie_type as t, ohc};
use rustc_hash::FxHashMap;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

mod error;
mod plan;
pub use error::{CompileError, CompileErrorKind};

/// Static configuration of a [`Compiler`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompilerConfig {
    /// Our N3/N9 GTP-U addresses: outer sources for encapsulation, and the addresses the
    /// workers treat as ours.
    pub local_v4: Vec<Ipv4Addr>,
    pub local_v6: Vec<Ipv6Addr>,
    /// Meter slots (one per metered QER direction) available in total.
    pub max_meter_slots: u32,
    /// Usage-counter slots (one per URR) available in total.
    pub max_urr_slots: u32,
    /// How QERs enforce their MBR (policing bursts or shaping), by QFI (`[upf.qos]`).
    pub qos: QosPolicies,
}

/// Sizes and counts, for monitoring and the memory budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompilerStats {
    pub sessions: usize,
    /// PDRs filed in the tables (CP-function PDRs are not).
    pub pdrs: usize,
    pub meter_slots_used: u32,
    pub urr_slots_used: u32,
    /// Estimated heap + inline bytes of the per-session compiled pieces and their map.
    pub compiled_bytes: usize,
    /// Estimated bytes of the current shards (rules, filters, maps).
    pub shard_bytes: usize,
    /// Estimated bytes of the key-owner maps and the slot allocators.
    pub index_bytes: usize,
}

impl CompilerStats {
    pub fn total_bytes(&self) -> usize {
        self.compiled_bytes + self.shard_bytes + self.index_bytes
    }
}

/// A lookup key; its shard is [`shard_of_in`] of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Key {
    Teid(u32),
    UeV4(u32),
    UeV6(u64),
}

impl Key {
    pub(crate) fn shard(self, bits: u32) -> usize {
        match self {
            Key::Teid(k) | Key::UeV4(k) => shard_of_in(u64::from(k), bits),
            Key::UeV6(k) => shard_of_in(k, bits),
        }
    }
}

/// Shard bits for tables sized for `max_urr_slots` URRs (about one per session, or two):
/// about 128 URRs' sessions per shard at capacity, between the default [`SHARD_BITS`] and
/// [`MAX_SHARD_BITS`], so that a rule change patches a shard of the same size at 10k and
/// at 1M sessions (copying a touched shard is what a request costs the compiler).
pub fn shard_bits_for(max_urr_slots: u32) -> u32 {
    let shards = (u64::from(max_urr_slots) / 128).max(1);
    (64 - (shards - 1).leading_zeros()).clamp(SHARD_BITS, MAX_SHARD_BITS)
}

/// Keys per shard above which the daemon's compiler doubles its shards
/// ([`Compiler::grow_shards_above`]): a request then copies shards of 16..32 keys' entries
/// (about 6..12 sessions' rules) at any table size. 32, not 16 (issue 9, session of
/// 2026-11-29): each shard also costs its directory entries and slot-array headers, and at
/// 16 a million sessions took 1,563 B each, past item 2's 1,536.
pub const GROW_KEYS_PER_SHARD: usize = 32;

/// A compiled PDR; FAR and QERs by index into its session's vectors.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CPdr {
    pub(crate) keys: ArrayVec<Key, 2>,
    pub(crate) precedence: u32,
    pub(crate) pdr_id: u16,
    pub(crate) direction: Direction,
    pub(crate) qfi: Option<u8>,
    pub(crate) remove_gtpu: bool,
    pub(crate) filters: Box<[FlowFilter]>,
    pub(crate) far: u16,
    pub(crate) qers: ArrayVec<u16, MAX_QERS_PER_PDR>,
    pub(crate) urrs: [UrrRef; MAX_URRS_PER_PDR],
}

/// A QER compiled for one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CQer {
    pub(crate) direction: Direction,
    pub(crate) rule: QerRule,
}

/// One session's compiled rules, staged between [`Compiler::upsert`] and the next
/// [`Compiler::build`], which files them into the session's shards and drops them: once
/// built, the shards hold the only copy.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pieces {
    pub(crate) pdrs: Vec<CPdr>,
    pub(crate) fars: Vec<FarRule>,
    pub(crate) qers: Vec<CQer>,
}

impl Pieces {
    fn bytes(&self) -> usize {
        size_of::<Pieces>()
            + self.pdrs.capacity() * size_of::<CPdr>()
            + self
                .pdrs
                .iter()
                .map(|p| p.filters.len() * size_of::<FlowFilter>())
                .sum::<usize>()
            + self.fars.capacity() * size_of::<FarRule>()
            + self.qers.capacity() * size_of::<CQer>()
    }
}

/// A metered QER direction of a session: its stable meter slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CMeter {
    qer_id: u32,
    direction: Direction,
    meter: MeterRef,
}

/// What the compiler keeps of a session besides its entries in the shards: the keys it
/// filed (to unfile them), its URR and meter slots (stable across modifications). Packed in
/// one allocation of words on purpose: at a million sessions every byte here is a megabyte.
/// Layout: `[keys, urrs, key (tag, low, high) x keys, (URR ID, slot) x urrs, (QER ID,
/// direction, slot, generation) x the rest]`.
#[derive(Debug, Clone, PartialEq)]
struct CSession(Box<[u32]>);

impl CSession {
    fn new(keys: &[Key], urrs: &[(u32, u32)], meters: &[CMeter]) -> CSession {
        let mut w = Vec::with_capacity(2 + 3 * keys.len() + 2 * urrs.len() + 4 * meters.len());
        w.extend([keys.len() as u32, urrs.len() as u32]);
        for k in keys {
            w.extend(match *k {
                Key::Teid(v) => [0, v, 0],
                Key::UeV4(v) => [1, v, 0],
                Key::UeV6(v) => [2, v as u32, (v >> 32) as u32],
            });
        }
        for &(id, slot) in urrs {
            w.extend([id, slot]);
        }
        for m in meters {
            w.extend([
                m.qer_id,
                m.direction as u32,
                m.meter.slot,
                m.meter.generation,
            ]);
        }
        CSession(w.into_boxed_slice())
    }

    fn counts(&self) -> (usize, usize) {
        (self.0[0] as usize, self.0[1] as usize)
    }

    fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        let (k, _) = self.counts();
        self.0[2..2 + 3 * k].chunks_exact(3).map(|w| match w[0] {
            0 => Key::Teid(w[1]),
            1 => Key::UeV4(w[1]),
            _ => Key::UeV6(u64::from(w[1]) | u64::from(w[2]) << 32),
        })
    }

    /// (URR ID, slot).
    fn urrs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let (k, u) = self.counts();
        let at = 2 + 3 * k;
        self.0[at..at + 2 * u].chunks_exact(2).map(|w| (w[0], w[1]))
    }

    fn meters(&self) -> impl Iterator<Item = CMeter> + '_ {
        let (k, u) = self.counts();
        self.0[2 + 3 * k + 2 * u..].chunks_exact(4).map(|w| CMeter {
            qer_id: w[0],
            direction: if w[1] == 0 {
                Direction::Uplink
            } else {
                Direction::Downlink
            },
            meter: MeterRef {
                slot: w[2],
                generation: w[3],
            },
        })
    }

    /// Shards the session's keys fall in (unsorted, may repeat).
    fn shards(&self, bits: u32) -> impl Iterator<Item = usize> + '_ {
        self.keys().map(move |k| k.shard(bits))
    }
}

/// Owner session of every filed key, in two maps of 16-byte entries (a map keyed by [`Key`]
/// has 24-byte entries): TEIDs and UE IPv4 addresses tagged into one `u64`, UE /64s apart.
#[derive(Debug, Default)]
struct Owners {
    narrow: FxHashMap<u64, u64>,
    v6: FxHashMap<u64, u64>,
}

impl Owners {
    fn slot(&mut self, k: Key) -> (&mut FxHashMap<u64, u64>, u64) {
        match k {
            Key::Teid(v) => (&mut self.narrow, u64::from(v)),
            Key::UeV4(v) => (&mut self.narrow, 1 << 32 | u64::from(v)),
            Key::UeV6(v) => (&mut self.v6, v),
        }
    }

    fn get(&self, k: Key) -> Option<u64> {
        match k {
            Key::Teid(v) => self.narrow.get(&u64::from(v)),
            Key::UeV4(v) => self.narrow.get(&(1 << 32 | u64::from(v))),
            Key::UeV6(v) => self.v6.get(&v),
        }
        .copied()
    }

    fn insert(&mut self, k: Key, seid: u64) {
        let (m, k) = self.slot(k);
        m.insert(k, seid);
    }

    fn remove(&mut self, k: Key) {
        let (m, k) = self.slot(k);
        m.remove(&k);
    }
}

/// Slot numbers with a free list and per-slot generations.
#[derive(Debug, Clone)]
struct Slots {
    max: u32,
    /// Next never-used slot (also the high-water mark).
    next: u32,
    free: Vec<u32>,
    gens: Vec<u32>,
}

impl Slots {
    fn new(max: u32) -> Slots {
        Slots {
            max,
            next: 0,
            free: Vec::new(),
            gens: Vec::new(),
        }
    }

    fn available(&self) -> u64 {
        self.free.len() as u64 + u64::from(self.max - self.next)
    }

    fn used(&self) -> u32 {
        self.next - self.free.len() as u32
    }

    fn gen(&self, slot: u32) -> u32 {
        self.gens.get(slot as usize).copied().unwrap_or(0)
    }

    /// The slot the `i`-th next [`Self::alloc`] returns (LIFO free list, then fresh ones),
    /// with the generation it will have. `i < available()`.
    fn peek(&self, i: usize) -> MeterRef {
        let slot = if i < self.free.len() {
            self.free[self.free.len() - 1 - i]
        } else {
            self.next + (i - self.free.len()) as u32
        };
        MeterRef {
            slot,
            generation: next_gen(self.gen(slot)),
        }
    }

    fn alloc(&mut self) -> MeterRef {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.next += 1;
                self.next - 1
            }
        };
        self.bump(slot)
    }

    fn bump(&mut self, slot: u32) -> MeterRef {
        let i = slot as usize;
        if self.gens.len() <= i {
            self.gens.resize(i + 1, 0);
        }
        self.gens[i] = next_gen(self.gens[i]);
        MeterRef {
            slot,
            generation: self.gens[i],
        }
    }

    fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }
}

fn next_gen(g: u32) -> u32 {
    g.wrapping_add(1).max(1)
}

/// Slot changes an accepted plan makes.
#[derive(Debug, Default)]
struct SlotDelta {
    new: usize,
    bumped: Vec<u32>,
    freed: Vec<u32>,
}

/// A checked, compiled session ready to commit.
#[derive(Debug)]
struct Plan {
    cs: CSession,
    pieces: Pieces,
    meters: SlotDelta,
    urrs: SlotDelta,
}

/// PFCP session state to [`UpfTables`] (module docs give the mapping).
#[derive(Debug)]
pub struct Compiler {
    cfg: CompilerConfig,
    tables: UpfTables,
    sessions: FxHashMap<u64, CSession>,
    /// Owner session of every filed key (TEIDs and UE addresses are exclusive).
    owners: Owners,
    /// Sessions changed since the last build, with their new compiled rules.
    staged: FxHashMap<u64, Pieces>,
    /// (shard, session) pairs to re-file at the next build: the shards of a changed
    /// session's old and new keys.
    pending: Vec<(u32, u64)>,
    /// The patched shards of a build, reused.
    updates: Vec<(usize, Arc<Shard>)>,
    /// Earlier versions' shard arrays, recycled by the builds (`ShardTable::update`).
    dirs: ShardDirs,
    scratch: Scratch,
    meters: Slots,
    urr_slots: Slots,
    /// Double the shard count when the filed keys exceed this many per shard (`None`: the
    /// count stays what the capacity gave; [`Self::grow_shards_above`]).
    grow_above: Option<usize>,
    /// Positions still sharing the shard they were doubled from (empty: none): patched
    /// after splitting their own keys off it.
    unsplit: Vec<bool>,
}

impl Compiler {
    pub fn new(cfg: CompilerConfig) -> Compiler {
        let tables = UpfTables {
            local_v4: cfg.local_v4.clone(),
            local_v6: cfg.local_v6.clone(),
            ..UpfTables::with_shard_bits(shard_bits_for(cfg.max_urr_slots))
        };
        Compiler {
            meters: Slots::new(cfg.max_meter_slots),
            urr_slots: Slots::new(cfg.max_urr_slots),
            cfg,
            tables,
            sessions: FxHashMap::default(),
            owners: Owners::default(),
            staged: FxHashMap::default(),
            pending: Vec::new(),
            updates: Vec::new(),
            dirs: ShardDirs::default(),
            scratch: Scratch::default(),
            grow_above: None,
            unsplit: Vec::new(),
        }
    }

    /// Let the shard count follow the sessions present: when the filed keys (TEIDs, UE
    /// addresses) exceed `keys_per_shard` per shard, the next [`Self::build`] doubles the
    /// shards (up to [`MAX_SHARD_BITS`]), splitting each in two. A request then copies a shard
    /// of at most about `keys_per_shard` keys' entries however many sessions exist (a fixed
    /// count lets shards fill as the table does, and a request's copy with them); a
    /// doubling copies nothing at once: each shard is split when a request first touches
    /// one of its halves (`build`). Without this call the count stays what the capacity gave
    /// ([`shard_bits_for`]).
    pub fn grow_shards_above(mut self, keys_per_shard: usize) -> Compiler {
        self.grow_above = Some(keys_per_shard.max(1));
        self
    }

    /// Double the shard count while the filed keys exceed the growth threshold. Nothing is
    /// copied here: both halves of a shard point to it (a lookup finds its key in it at
    /// either position) and are marked unsplit; a half is split off when a build first
    /// patches it (`build`), so the doubling is spread over the requests that follow.
    fn grow(&mut self, pending: &mut Vec<(u32, u64)>) {
        let Some(per) = self.grow_above else {
            return;
        };
        let keys = self.owners.narrow.len() + self.owners.v6.len();
        while self.tables.shard_bits < MAX_SHARD_BITS && keys > per << self.tables.shard_bits {
            let bits = self.tables.shard_bits + 1;
            self.tables.shards = self.tables.shards.doubled();
            self.tables.shard_bits = bits;
            self.unsplit.clear();
            self.unsplit.resize(1 << bits, true);
            // A change pending for a shard is pending for both its halves.
            *pending = pending
                .iter()
                .flat_map(|&(s, seid)| [(2 * s, seid), (2 * s + 1, seid)])
                .collect();
        }
    }

    /// Validate and compile `s` without changing anything: `Ok` means [`Self::upsert`] of
    /// the same session would succeed now.
    pub fn check(&self, s: &Session) -> Result<(), CompileError> {
        self.plan(s).map(|_| ())
    }

    /// Stage the new state of one session (after establishment or modification). On error
    /// nothing changes, the session's previous rules stay in force.
    pub fn upsert(&mut self, s: &Session) -> Result<(), CompileError> {
        let plan = self.plan(s)?;
        self.commit(s.up_seid, plan);
        Ok(())
    }

    /// Drop a session (deletion, or association loss). Unknown SEIDs are ignored.
    pub fn remove(&mut self, up_seid: u64) {
        let Some(old) = self.sessions.remove(&up_seid) else {
            return;
        };
        self.unfile(up_seid, &old);
        self.staged.remove(&up_seid);
        for m in old.meters() {
            self.meters.release(m.meter.slot);
        }
        for (_, slot) in old.urrs() {
            self.urr_slots.release(slot);
        }
    }

    /// Re-file the sessions changed since the last call in their shards and return the new
    /// snapshot; untouched shards are shared (`Arc`) with the previous one. A touched shard
    /// is copied from its previous version without the changed sessions' entries, then
    /// their new entries are appended (`patch`): no other session's state is read.
    pub fn build(&mut self) -> UpfTables {
        let mut pending = std::mem::take(&mut self.pending);
        self.grow(&mut pending);
        pending.sort_unstable();
        pending.dedup();
        let mut updates = std::mem::take(&mut self.updates);
        let mut i = 0;
        while i < pending.len() {
            let shard = pending[i].0;
            let j = i + pending[i..].iter().take_while(|p| p.0 == shard).count();
            let seids = pending[i..j].iter().map(|p| p.1);
            let idx = shard as usize;
            let bits = self.tables.shard_bits;
            let old: &Shard = &self.tables.shards[idx];
            let half;
            let (old, split) = match self.unsplit.get_mut(idx) {
                Some(u) if *u => {
                    *u = false;
                    half = crate::patch::split_shard(old, idx, bits, &mut self.scratch);
                    (&half, true)
                }
                _ => (old, false),
            };
            let mut new =
                crate::patch::patch_shard(old, idx, bits, seids, &self.staged, &mut self.scratch);
            if split {
                // The pages hold the slots of the shard the half was split from, not the
                // half's: none of the new shard's paged TEIDs is settled.
                new.paged_settled = 0;
            }
            updates.push((idx, Arc::new(new)));
            i = j;
        }
        // No copy of the shard array: an earlier version's that no snapshot holds any more
        // gets the entries changed since (a copy only if every kept one is still held).
        if !updates.is_empty() {
            self.tables.shards.update(updates.drain(..), &mut self.dirs);
        }
        self.updates = updates;
        pending.clear();
        self.pending = pending;
        self.staged.clear();
        // A first build of many sessions (static sessions, a restore) leaves big empty
        // tables behind: give them back instead of keeping them for the small builds after.
        if self.staged.capacity() > 4096 {
            self.staged.shrink_to(256);
        }
        if self.pending.capacity() > 16384 {
            self.pending.shrink_to(1024);
        }
        if self.updates.capacity() > 16384 {
            self.updates.shrink_to(1024);
        }
        self.tables.meter_slots = self.meters.next;
        self.tables.urr_slots = self.urr_slots.next;
        self.tables.clone()
    }

    /// Builds that recycled an earlier version's shard array, and builds that copied one
    /// (the first after a doubling, or every kept array still held by a snapshot).
    pub fn shard_array_counts(&self) -> (u64, u64) {
        self.dirs.counts()
    }

    /// The usage-counter slot of URR `urr_id` of session `up_seid`.
    pub fn urr_slot(&self, up_seid: u64, urr_id: u32) -> Option<u32> {
        let cs = self.sessions.get(&up_seid)?;
        cs.urrs().find(|u| u.0 == urr_id).map(|u| u.1)
    }

    /// The meter of QER `qer_id` of session `up_seid` in direction `dir`, if the QER is used
    /// in that direction and has an MBR there.
    pub fn meter(&self, up_seid: u64, qer_id: u32, dir: Direction) -> Option<MeterRef> {
        let cs = self.sessions.get(&up_seid)?;
        cs.meters()
            .find(|m| m.qer_id == qer_id && m.direction == dir)
            .map(|m| m.meter)
    }

    pub fn stats(&self) -> CompilerStats {
        let map_bytes = |cap: usize, entry: usize| {
            // hashbrown: buckets = capacity * 8 / 7 rounded up, one control byte each.
            let buckets = (cap * 8).div_ceil(7).next_power_of_two();
            if cap == 0 {
                0
            } else {
                buckets * (entry + 1)
            }
        };
        // Each non-empty boxed slice is one allocation: glibc adds 8 bytes and rounds to 16
        // (at least 32).
        let alloc = |b: usize| {
            if b == 0 {
                0
            } else {
                (b + 8).div_ceil(16).max(2) * 16
            }
        };
        let compiled_bytes = map_bytes(self.sessions.capacity(), size_of::<(u64, CSession)>())
            + self
                .sessions
                .values()
                .map(|c| alloc(c.0.len() * 4))
                .sum::<usize>()
            + self.staged.values().map(Pieces::bytes).sum::<usize>();
        let mut shard_bytes = 0;
        let mut pdrs = 0;
        let mut prev: Option<&Arc<Shard>> = None;
        for sh in &self.tables.shards {
            // Halves not split yet share their shard (adjacent positions): count it once.
            if prev.is_some_and(|p| Arc::ptr_eq(p, sh)) {
                continue;
            }
            prev = Some(sh);
            pdrs += sh.pdrs.len();
            shard_bytes += size_of::<Shard>()
                + sh.by_teid.heap_bytes()
                + sh.paged_teids.capacity() * size_of::<(u32, (u32, u32))>()
                + sh.by_ue_v4.heap_bytes()
                + sh.by_ue_v6.heap_bytes()
                + sh.pdr_order.capacity() * 4
                + sh.pdrs.capacity() * size_of::<PdrRule>()
                + sh.filters.capacity() * size_of::<FlowFilter>()
                + sh.fars.capacity() * size_of::<FarRule>()
                + sh.qers.capacity() * size_of::<QerRule>()
                + sh.sessions.capacity() * size_of::<SessionInfo>();
        }
        // The directory arrays (shard pointers and the maps' slot arrays beside them), the
        // current version and the earlier ones kept for recycling.
        shard_bytes += self.tables.shards.heap_bytes() * self.dirs.arrays().max(1);
        // The direct TEID pages (shared by the kept versions but for the few a build wrote).
        shard_bytes += self.tables.shards.page_bytes();
        let index_bytes = map_bytes(self.owners.narrow.capacity(), 16)
            + map_bytes(self.owners.v6.capacity(), 16)
            + (self.meters.gens.capacity() + self.meters.free.capacity()) * 4
            + (self.urr_slots.gens.capacity() + self.urr_slots.free.capacity()) * 4;
        CompilerStats {
            sessions: self.sessions.len(),
            pdrs,
            meter_slots_used: self.meters.used(),
            urr_slots_used: self.urr_slots.used(),
            compiled_bytes,
            shard_bytes,
            index_bytes,
        }
    }

    // ---- internals ----

    fn unfile(&mut self, seid: u64, cs: &CSession) {
        for k in cs.keys() {
            if self.owners.get(k) == Some(seid) {
                self.owners.remove(k);
            }
        }
        let bits = self.tables.shard_bits;
        self.pending
            .extend(cs.shards(bits).map(|sh| (sh as u32, seid)));
    }

    fn commit(&mut self, seid: u64, plan: Plan) {
        let Plan {
            cs,
            pieces,
            meters,
            urrs,
        } = plan;
        // Allocate first, free after: the plan peeked at the allocators in this order.
        for _ in 0..meters.new {
            self.meters.alloc();
        }
        for &s in &meters.bumped {
            self.meters.bump(s);
        }
        for _ in 0..urrs.new {
            self.urr_slots.alloc();
        }
        for &s in &meters.freed {
            self.meters.release(s);
        }
        for &s in &urrs.freed {
            self.urr_slots.release(s);
        }
        if let Some(old) = self.sessions.remove(&seid) {
            self.unfile(seid, &old);
        }
        for k in cs.keys() {
            self.owners.insert(k, seid);
        }
        let bits = self.tables.shard_bits;
        self.pending
            .extend(cs.shards(bits).map(|sh| (sh as u32, seid)));
        self.sessions.insert(seid, cs);
        self.staged.insert(seid, pieces);
    }

    /// The rule of the QER direction metered in `slot` as last compiled for `seid`: staged
    /// if the session changed since the last build, else from its shards (slots are unique,
    /// so the slot identifies it). `None` if it is filed nowhere (a QER only CP-function
    /// PDRs use).
    fn compiled_qer(&self, seid: u64, cs: &CSession, slot: u32) -> Option<QerRule> {
        if let Some(p) = self.staged.get(&seid) {
            return p
                .qers
                .iter()
                .find(|q| q.rule.meter.slot == slot)
                .map(|q| q.rule);
        }
        let bits = self.tables.shard_bits;
        cs.shards(bits).find_map(|i| {
            self.tables.shards[i]
                .qers
                .iter()
                .find(|q| q.meter.slot == slot)
                .copied()
        })
    }
}

/// Estimated bytes of a [`BTreeMap`](std::collections::BTreeMap) with `n` entries: std's
/// B-tree leaves hold up to 11 entries (a full node is allocated even for one), internal
/// nodes add 12 child pointers.
fn btree_bytes<K, V>(n: usize) -> usize {
    const CAP: usize = 11;
    if n == 0 {
        return 0;
    }
    let leaf = 16 + CAP * (size_of::<K>() + size_of::<V>());
    // Sequentially built trees end up about 2/3 full.
    let leaves = if n <= CAP { 1 } else { n.div_ceil(8) };
    let internal = if leaves > 1 { leaves.div_ceil(8) } else { 0 };
    leaves * leaf + internal * (leaf + (CAP + 1) * 8)
}

/// Estimated bytes of one N4 session as the node stores it (the struct, its four B-tree
/// maps, and the heap behind PDIs and forwarding parameters), for the memory budget.
pub fn session_bytes_estimate(s: &Session) -> usize {
    use peregrine_n4::{Far, Pdr, Qer, Urr};
    let mut b = size_of::<Session>()
        + btree_bytes::<u16, Pdr>(s.pdrs.len())
        + btree_bytes::<u32, Far>(s.fars.len())
        + btree_bytes::<u32, Qer>(s.qers.len())
        + btree_bytes::<u32, Urr>(s.urrs.len());
    for p in s.pdrs.values() {
        b += p.pdi.sdf_filters.capacity() * size_of::<peregrine_pfcp::ie::SdfFilter>();
        b += p
            .pdi
            .sdf_filters
            .iter()
            .filter_map(|f| f.flow_description.as_ref().map(Vec::capacity))
            .sum::<usize>();
        b += p.pdi.network_instance.as_ref().map_or(0, Vec::capacity);
        b += (p.qer_ids.capacity() + p.urr_ids.capacity()) * 4;
    }
    for f in s.fars.values() {
        b += f
            .forwarding
            .as_ref()
            .and_then(|f| f.network_instance.as_ref())
            .map_or(0, Vec::capacity);
    }
    b
}
