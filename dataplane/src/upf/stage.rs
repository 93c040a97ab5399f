//! The per-packet UPF path (TS 23.501 section 5.8.2, TS 29.244 section 5.2) as a runtime
//! stage: GTP-U termination and path management (TS 29.281), PDR lookup, QER gating and
//! MBR metering (RFC 2698 TrTCM), URR volume counting, FAR forwarding with GTP-U
//! encapsulation / decapsulation and N6 routing.
//!
//! # Phases
//! The stage reads top to bottom like a pipeline of phases, one file each:
//! [`parse`](super::parse) (the packet's [`PacketMeta`] from the shared classifier,
//! `crate::classify`, run here when no classifier stage ran before), [`lookup`](super::lookup)
//! (PDR by TEID or UE address, SDF filters), [`enforce`](super::enforce) (gate, QER meters,
//! URRs) and [`emit`](super::emit) (decapsulation, encapsulation, routing, replies). On the
//! common path a chunk of the batch goes through parse and lookup together, so the chunk's
//! cache misses overlap; anything unusual takes the per-packet general path in the last pass.
//! The stage leaves the record describing the bytes it sends: direction, TEID, URR slot
//! (`session`), QFI, queue and meter colour, and the offsets after decap / encap.
//!
//! # Classification
//! * L2: multicast (ARP broadcasts, IPv6 ND) and ARP go to the control core; unicast to
//!   another MAC is dropped (`l2_not_for_us`) unless the stage is promiscuous.
//! * UDP to port 2152 addressed to one of the tables' `local_v4` / `local_v6` is GTP-U;
//!   anything else to one of our addresses (local or N6) goes to the control core (exception
//!   path). Outer IPv4 / IPv6 fragments to one of our GTP-U addresses are reassembled
//!   ([`reasm`](super::reasm), per worker, off the chunked path) and the datagram goes on as
//!   if received whole. All other traffic is N6 downlink traffic, looked up by destination
//!   UE address.
//! * GTP-U: Echo Request is answered in place (Echo Response, Recovery 0); Echo Response and
//!   received Error Indications go to the control core; End Marker is counted and dropped;
//!   G-PDUs are looked up by TEID; an unknown TEID is answered with an Error Indication
//!   (rate-limited, see below).
//!
//! # Forwarding
//! Uplink with Outer Header Removal strips Ethernet / IP / UDP / GTP-U (with extension
//! headers) and either re-encapsulates (N9 relay, UL PDU Session Container, inner TTL left
//! alone: a relay is not an IP hop) or routes the inner packet on N6 (TTL / hop limit
//! decremented, RFC 1812 section 5.3.1). An uplink PDR without Outer Header Removal is not
//! supported and dropped as `ul_without_decap`. Downlink decrements the inner TTL / hop limit
//! and encapsulates toward `far.outer` (DL PDU Session Container with the QER's QFI, else
//! the PDR's); a downlink FAR without an outer header routes the packet on N6. Egress frames
//! are untagged. The outer UDP source port is a hash of the inner 5-tuple (RFC 9300 style
//! entropy for ECMP), in 49152..=65535.
//!
//! # MTU policy
//! `UpfConfig::mtu` bounds the outer IP packet sent. An IPv4 packet without DF that would
//! exceed it after encapsulation (or, routed on N6, on its own) is fragmented before
//! encapsulation, each piece a whole G-PDU ([`frag`](super::frag), RFC 791 section 3.2;
//! `docs/upf.md` argues the choice with RFC 4459 section 3). Otherwise the packet is not
//! sent: an inner IPv6 packet
//! is answered with ICMPv6 Packet Too Big (RFC 4443 section 3.2) and an inner IPv4 packet
//! with DF with ICMPv4 Fragmentation Needed (RFC 1191 section 4), both carrying
//! MTU = `mtu` minus the encapsulation overhead (44 bytes over IPv4, 64 over IPv6), sent
//! from our N6 address (`n6_v4` / `n6_v6`) toward the sender, quoting as much of the packet
//! as fits (576 / 1280 bytes), built in place in the packet's buffer. A packet that is
//! itself an ICMP error, a packet when we have no N6 address of its family, and replies over
//! the rate limit are dropped as `mtu_exceeded`. Uplink packets shrink on decapsulation; an
//! uplink packet that would still exceed the MTU (an N9 relay of a full-size packet) is
//! fragmented as above without DF, else dropped as `mtu_exceeded` without ICMP.
//!
//! # Rate limit
//! Error Indications and ICMP errors share one token bucket per worker filled at
//! `error_indication_pps` with a depth of a tenth of that (at least 1), so a flood of unknown
//! TEIDs costs the peer at most that many replies per second.
//!
//! # Counting
//! Every drop has a named reason. Per direction x QFI, `drops` counts every drop made once
//! the QFI is known (uplink: the PDU Session Container's QFI, else 0; downlink: the QFI to be
//! marked, known after the PDR match). Volumes (URR, QFI bytes, meter) are the inner IP
//! packet length (TS 29.244 section 5.2.2.2: the T-PDU, without GTP-U encapsulation).

use crate::buffer::PacketBuf;
use crate::classify::{self, PacketMeta};
use crate::qos::TokenBucket;
use crate::runtime::{Batch, Context, Disposition, Reader, Reasons, Stage};
use crate::stages::l3fwd::RouteTable;
pub use crate::upf::config::UpfConfig;
use crate::upf::lookup::Probe;
use crate::upf::parse::{Flow, Pre, KIND_SKIP};
use crate::upf::reasm::Reassembler;
use crate::upf::stats::UpfStats;
use crate::upf::tables::{KeySlot, Shard, UpfTables};
use crate::upf::work::{Drops, MeterSlot, RouteCache, Work};
use peregrine_wire::ethernet::Address as MacAddr;
use std::sync::Arc;

/// The UPF stage. See the module docs.
#[derive(Debug)]
pub struct Upf {
    tables: Reader<UpfTables>,
    routes: Reader<RouteTable>,
    port_macs: Vec<MacAddr>,
    cfg: UpfConfig,
    stats: Arc<UpfStats>,
    drops: Drops,
    meters: Vec<MeterSlot>,
    replies: TokenBucket,
    reasm: Reassembler,
    trust_meta: bool,
    general: bool,
    route_cache: RouteCache,
    /// Pass 1's results for one chunk: scratch kept across batches so no batch pays for
    /// initialising it (pass 1 writes every entry it covers).
    pre: Box<[Pre; CHUNK]>,
    /// The inner flows pass 1 keeps beside a chunk's records (`Pre::flow`): scratch as `pre`.
    flows: Box<[Flow; CHUNK]>,
}

impl Upf {
    /// `port_macs[p]` is port `p`'s own MAC address. `stats` is this worker's counters.
    pub fn new(
        tables: Reader<UpfTables>,
        routes: Reader<RouteTable>,
        port_macs: Vec<MacAddr>,
        cfg: UpfConfig,
        stats: Arc<UpfStats>,
        reasons: &mut Reasons,
    ) -> Upf {
        let pps = u64::from(cfg.error_indication_pps);
        let burst = if pps == 0 { 0 } else { (pps / 10).max(1) };
        let meters = vec![MeterSlot::EMPTY; cfg.max_meter_slots as usize];
        Upf {
            tables,
            routes,
            port_macs,
            stats,
            drops: Drops::register(reasons),
            meters,
            replies: TokenBucket::new(pps, burst, 0),
            reasm: Reassembler::new(cfg.reassembly),
            cfg,
            trust_meta: false,
            general: false,
            route_cache: RouteCache::new(),
            pre: Box::new([Pre::SLOW; CHUNK]),
            flows: Box::new([Flow::NONE; CHUNK]),
        }
    }

    /// A [`classify::Classify`] stage runs before this one in the pipeline: read each
    /// packet's [`PacketMeta`] when it is marked classified instead of classifying again.
    /// Without this the stage classifies every packet itself (a record is stale on rx: a
    /// recycled mbuf may still carry a previous packet's).
    pub fn after_classifier(mut self) -> Upf {
        self.trust_meta = true;
        self
    }

    /// Force the per-packet general path end to end, classification included (for the
    /// differential tests: the chunked fast path must give the same results).
    pub fn general_path_only(mut self) -> Upf {
        self.general = true;
        self
    }

    /// This worker's counters.
    pub fn stats(&self) -> &Arc<UpfStats> {
        &self.stats
    }
}

/// Classify `p` into its record (unless `trust` and it is already classified). An error
/// leaves the record unclassified; the general path classifies again to name the drop.
#[inline]
fn ensure_classified<B: PacketBuf>(p: &mut B, trust: bool) {
    if trust && p.pkt_meta().is_classified() {
        return;
    }
    let mut m = PacketMeta::EMPTY;
    let _ = classify::classify(p.data(), &mut m);
    *p.pkt_meta_mut() = m;
}

impl<B: PacketBuf> Stage<B> for Upf {
    fn name(&self) -> &'static str {
        "upf"
    }

    fn idle(&mut self) {
        self.tables.get();
        self.routes.get();
    }

    fn spare_buffers(&self) -> usize {
        crate::upf::frag::SPARES
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        let now = cx.now_ns();
        let rx = batch.rx_port;
        let Upf {
            tables,
            routes,
            port_macs,
            cfg,
            stats,
            drops,
            meters,
            replies,
            reasm,
            trust_meta,
            general,
            route_cache,
            pre,
            flows,
        } = self;
        routes.get();
        route_cache.sync(routes.generation());
        let fix_l4 = rx < 64 && cfg.fix_l4_checksums & (1 << rx) != 0;
        let t = tables.get();
        let own_v4 = match t.local_v4.as_slice() {
            [one] => {
                let local = u32::from(*one);
                Some([local, cfg.n6_v4.map_or(local, u32::from)])
            }
            _ => None,
        };
        let mut w = Work {
            t,
            r: routes.cached(),
            macs: port_macs,
            cfg,
            stats,
            qfi: stats.qfi_cells(),
            d: *drops,
            meters,
            replies,
            reasm,
            now,
            rx,
            fix_l4,
            rx_mac: port_macs.get(rx as usize).map_or(u64::MAX, |m| {
                u64::from_le_bytes([0, 0, m.0[0], m.0[1], m.0[2], m.0[3], m.0[4], m.0[5]])
            }),
            fast_mtu: if fix_l4 { 0 } else { usize::from(cfg.mtu) },
            own_v4,
            routes: route_cache,
            frag: None,
        };
        let n = batch.len();
        if *general {
            for i in 0..n {
                if batch.disposition(i).is_continue() {
                    let p = &mut batch.pkts[i];
                    ensure_classified(p, false);
                    let mut d = w.packet(p);
                    if let Some(job) = w.frag.take() {
                        d = w.fragment(batch, i, &job);
                    }
                    batch.set_disposition(i, d);
                }
            }
            return;
        }
        // Three passes per chunk of the batch so the chunk's cache misses overlap instead of
        // queueing behind one packet at a time: parse every packet and prefetch its key's
        // table slot; look the slots up and prefetch the meter and usage lines they name
        // (for a key without a fast-path record, pass 2b prefetches the general path's rule
        // lines instead); then apply. Anything unusual takes the full per-packet path in pass 3.
        let trust = *trust_meta;
        // The scratch arrays themselves, not their boxes in `self`: one pointer each for the
        // passes below instead of a load of the box through `self` at each packet.
        let pre: &mut [Pre; CHUNK] = pre;
        let flows: &mut [Flow; CHUNK] = flows;
        let mut base = 0;
        while base < n {
            let end = (base + CHUNK).min(n);
            // At most CHUNK (said so the chunk arrays' indexing needs no bounds checks).
            let len = (end - base).min(CHUNK);
            // The chunk's packets already decided (bit `j`: packet `base + j`), read once:
            // none when the batch is uniformly `Continue` (what the worker's rx leaves).
            let decided = batch.decided_mask(base, len);
            // The chunk's packets, bounds-checked once for pass 1.
            let pkts = &mut batch.pkts[base..base + len];
            // Each packet's shard and map probe (pass 1) and slot (pass 2), by chunk index.
            let mut shard: [Option<&Shard>; CHUNK] = [None; CHUNK];
            let mut probe = [Probe::NONE; CHUNK];
            let mut hit: [Option<&KeySlot>; CHUNK] = [None; CHUNK];
            for j in 0..len {
                let pr = &mut pre[j];
                if decided >> j & 1 != 0 {
                    *pr = Pre::SKIP;
                } else {
                    let p = &mut pkts[j];
                    let mut quick = false;
                    if !(trust && p.pkt_meta().is_classified()) {
                        // The UPF's own classifier for its common shapes (leaving the record
                        // to pass 3), else the shared one (which writes all of it).
                        quick = w.pre_quick(p.data(), pr);
                        if !quick {
                            ensure_classified(p, false);
                        }
                    }
                    if !quick {
                        // One call site, so it stays inlined.
                        *pr = w.pre(p.data(), p.pkt_meta(), &mut flows[j]);
                    }
                    // Starts loading the key's home slot, so pass 2 finds every slot well
                    // ahead of its read.
                    shard[j] = w.key_shard(pr, &mut probe[j]);
                }
            }
            // Chunk indices whose key has rules but no fast-path record (CHUNK <= 32).
            let mut slow = 0u32;
            for k in 0..len {
                if let Some(s) = shard[k] {
                    hit[k] = w.lookup(&pre[k], s, &probe[k], &mut slow, k);
                }
            }
            if slow != 0 {
                w.prefetch_rules(slow, &shard, &hit);
            }
            // The chunk's dispositions, written to the batch once after pass 3 (a batch
            // decided alike stays one word: `Batch::set_chunk`).
            let mut out = [Disposition::CONTINUE; CHUNK];
            // The packets already decided keep theirs (the others are `Continue`), read
            // here so that the loop below borrows only the chunk's packets.
            if decided != 0 {
                for (j, o) in out[..len].iter_mut().enumerate() {
                    if decided >> j & 1 != 0 {
                        *o = batch.disposition(base + j);
                    }
                }
            }
            let mut j = 0;
            while j < len {
                // The chunk's packets, bounds-checked once (and again after a packet was
                // fragmented: that takes the whole batch).
                let pkts = &mut batch.pkts[base..base + len];
                // `pkts` holds `len` packets: the loop's test is the index's bounds check.
                while let Some(p) = pkts.get_mut(j) {
                    match (shard[j], hit[j]) {
                        (Some(s), Some(slot)) => {
                            let d = w.resolved_fast(p, &pre[j], slot);
                            if !d.is_continue() {
                                // The fast path never fragments: no job to test for.
                                out[j] = d;
                                j += 1;
                                continue;
                            }
                            out[j] = w.resolved(p, &pre[j], &flows[j], s, slot);
                        }
                        // Left as it was.
                        _ if pre[j].kind == KIND_SKIP => {}
                        _ => {
                            pre[j].settle(p);
                            out[j] = w.packet(p);
                        }
                    }
                    j += 1;
                    if w.frag.is_some() {
                        break;
                    }
                }
                // Tested before taken: no store for the packets that have none.
                if let Some(job) = w.frag.is_some().then(|| w.frag.take()).flatten() {
                    out[j - 1] = w.fragment(batch, base + j - 1, &job);
                }
            }
            batch.set_chunk(base, &out[..len]);
            base = end;
        }
    }
}

/// Packets per pass of [`Upf::process`]: enough in flight to overlap the misses, few enough
/// that the lines fetched in pass 1 are still cached in pass 3.
const CHUNK: usize = 32;
const _: () = assert!(
    CHUNK <= 32,
    "pass 2's `slow` mask has one bit per chunk index"
);
