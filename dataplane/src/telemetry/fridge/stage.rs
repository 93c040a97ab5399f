//! The fridge as a pipeline stage: each packet's request/response roles (from [`matcher`])
//! go to the first slice whose kind, vantage and filter (QFI, port class) match; each slice
//! has its own [`FridgeSet`] and per-fridge histograms, published per window ([`window`]).
//! The stage only observes: every packet leaves with the disposition it came with.
//!
//! Vantage (which leg of the round trip a slice measures): `N6` pairs uplink requests (from
//! the UE) with downlink responses, the delay from the UPF towards the internet and back;
//! `N3` pairs downlink requests with uplink responses, the leg towards the UE. Direction is
//! the UPF's (`PacketMeta::dir`); in a pipeline without the UPF, packets received on the
//! configured uplink ports are uplink and the others downlink.
//!
//! [`matcher`]: super::matcher
//! [`window`]: super::window

use super::hist::LogHist;
use super::kernel::{FridgeSet, FridgeSpec, SpecError};
use super::matcher::{
    addr_key, other_roles, outer_addrs, plain_dns, record_word, single_role, Kind, Role, RoleSink,
    Skip, GTPU_DNS_HEAD, GTPU_DOWNLINK_UDP, PLAIN_DNS_HEAD, PLAIN_UPLINK_UDP,
};
use super::weight::XMode;
use super::window::SlicePub;
use crate::buffer::PacketBuf;
use crate::io::PortId;
use crate::meta::{Direction, PacketMeta};
use crate::runtime::{Batch, Context, Disposition, Dispositions, Stage};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[path = "stage_sink.rs"]
mod sink;
use sink::{Bytes, Frame, Sink};

/// One matched response as it was tallied, for offline analysis (`[fridge] raw_file`):
/// the seed's `(delay, x)` with the fridge it came from and its correction factor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawSample {
    /// When the response was seen (the worker's clock, ns).
    pub at_ns: u64,
    pub delay_ns: u64,
    /// Insertions (or requests, per `x_counts`) between request and response.
    pub x: u64,
    /// The weight tallied, `p^-1 (1 - 1/M)^-x` or `p^-1 (1 - p/M)^-x`.
    pub weight: f64,
    /// Index of the slice in the spec.
    pub slice: u16,
    /// Index of the fridge in its slice.
    pub fridge: u8,
}

/// The worker's end of its raw-sample ring (single producer, single consumer, bounded: a
/// full ring drops the sample and counts it in [`WorkerPub::raw_dropped`]).
pub type RawProducer = rtrb::Producer<RawSample>;
/// The control thread's end.
pub type RawConsumer = rtrb::Consumer<RawSample>;

/// A bounded raw-sample ring of `capacity` samples.
pub fn raw_ring(capacity: usize) -> (RawProducer, RawConsumer) {
    rtrb::RingBuffer::new(capacity.max(1))
}

/// Which leg a slice measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    /// Requests uplink, responses downlink.
    N6,
    /// Requests downlink, responses uplink.
    N3,
}

impl Vantage {
    pub const fn name(self) -> &'static str {
        match self {
            Vantage::N6 => "n6",
            Vantage::N3 => "n3",
        }
    }
}

/// One slice: what it matches and its fridges.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceSpec {
    pub name: String,
    pub kind: Kind,
    pub vantage: Vantage,
    /// QFIs of the slice (empty: any).
    pub qfi: Vec<u8>,
    /// Port class: a packet matches if either port is listed (empty: any).
    pub ports: Vec<u16>,
    /// `gtp_echo` slices: the GTP-U peers (gNBs) whose echoes the slice takes, either
    /// address of the echo (empty: any). One slice per gNB gives per-gNB path delays.
    pub peers: Vec<std::net::IpAddr>,
    pub fridges: Vec<FridgeSpec>,
}

/// Everything the stage needs (shared by every worker's copy).
#[derive(Debug, Clone, PartialEq)]
pub struct StageSpec {
    pub slices: Vec<SliceSpec>,
    pub mode: XMode,
    pub window_ns: u64,
    pub seed: u64,
    /// Ports whose received packets are uplink when the UPF has not set a direction.
    pub uplink_ports: Vec<PortId>,
}

/// Per-worker counters of packets that played no role, by [`Skip`] reason (cumulative,
/// published with every window).
#[derive(Debug, Default)]
pub struct SkipPub {
    pub counts: [AtomicU64; Skip::COUNT],
    /// Roles that matched no slice.
    pub unsliced: AtomicU64,
}

/// One slice's two channels: `done` gets each window once it has ended (the control thread
/// merges and exports those; one it reads too late is counted as missed), `total` the
/// worker's histograms since start, at every window end and whenever the worker is idle (so
/// whole-run figures are exact even when windows are missed, and include the last window,
/// which never ends).
#[derive(Debug)]
pub struct SliceChannels {
    pub done: SlicePub,
    pub total: SlicePub,
}

/// What one worker shares with the control thread.
#[derive(Debug)]
pub struct WorkerPub {
    pub slices: Vec<SliceChannels>,
    pub skips: SkipPub,
    /// Raw samples dropped because the ring to the control thread was full (cumulative).
    pub raw_dropped: AtomicU64,
}

impl WorkerPub {
    pub fn new(spec: &StageSpec) -> WorkerPub {
        WorkerPub {
            slices: spec
                .slices
                .iter()
                .map(|s| SliceChannels {
                    done: SlicePub::new(s.fridges.len()),
                    total: SlicePub::new(s.fridges.len()),
                })
                .collect(),
            skips: SkipPub::default(),
            raw_dropped: AtomicU64::new(0),
        }
    }
}

struct SliceRt {
    kind_bit: u8,
    vantage: Vantage,
    qfi: u64,
    any_qfi: bool,
    ports: Vec<u16>,
    /// [`SliceSpec::peers`] as [`matcher::addr_key`]s.
    peers: Vec<u128>,
    set: FridgeSet,
    hists: Vec<LogHist>,
    /// Something was added to `hists` this window (else they are still clear: a window
    /// without samples clears nothing).
    sampled: bool,
    /// Since start (the window's samples included).
    total: Vec<LogHist>,
}

/// Per [`PacketMeta::dir`] byte, whether the packet went uplink: `[0]` for packets received
/// on a port that is not an uplink port (the `Unknown` bytes read as downlink), `[1]` for
/// those received on one (`Unknown` reads as uplink); the UPF's `Uplink` and `Downlink`
/// bytes read as themselves in both. What [`FridgeStage::uplink`] answers, as one load per
/// packet with a role and no branch on the direction; built at compile time, so a batch only
/// picks one of the two (a table rebuilt per rx port cost ~900 instructions per batch where
/// the rx port alternates, as with two ports: perf/results/fridge-bench.md, round 8). The
/// stage folds them into its [`Routes`].
static DIR_UP: [[bool; 256]; 2] = dir_up_tables();

const fn dir_up_tables() -> [[bool; 256]; 2] {
    let mut t = [[false; 256]; 2];
    let mut b = 0;
    while b < 256 {
        let d = Direction::from_u8(b as u8);
        t[0][b] = matches!(d, Direction::Uplink);
        t[1][b] = !matches!(d, Direction::Downlink);
        b += 1;
    }
    t
}

/// What the stage reads once per batch about its rx port.
#[derive(Clone, Copy)]
struct Rx {
    /// The port is an uplink port ([`FridgeStage::rx_up`]).
    up: bool,
    /// The [`Routes`] of DNS roles at that port, `[uplink, downlink][response, request]`.
    dns: [[u32; 2]; 2],
}

/// Where a role goes: a slice index, or one of these.
mod route {
    /// No slice takes it.
    pub const NONE: u32 = u32::MAX;
    /// Scan the slices in file order (the first candidate has a filter): per kind and
    /// vantage, and in [`Routes`](super::Routes) for each vantage.
    pub const SCAN: u32 = u32::MAX - 1;
    pub const SCAN_N6: u32 = SCAN;
    pub const SCAN_N3: u32 = u32::MAX - 2;
}

/// Per rx port class (`[0]` not an uplink port, `[1]` an uplink port), kind, request flag
/// (`[0]` response, `[1]` request) and [`PacketMeta::dir`] byte: the slice a role goes to,
/// or [`route::NONE`], [`route::SCAN_N6`], [`route::SCAN_N3`]. The direction ([`DIR_UP`])
/// and the vantage folded into the route at construction: one load per role (20 KB, of
/// which a packet stream touches the lines of its few direction bytes).
type Routes = [[[[u32; 256]; 2]; Kind::ALL.len()]; 2];

/// [`Routes`] from the routes per kind and vantage (`[Kind as usize][Vantage::N6 = 0, N3 =
/// 1]`): the first slice of that kind and vantage, when it has no filter (QFI, ports, peers),
/// so it takes every such role (the slice's index: no scan), else [`route::SCAN`] or
/// [`route::NONE`].
fn routes(route: &[[u32; 2]; Kind::ALL.len()]) -> Routes {
    let mut t = [[[[route::NONE; 256]; 2]; Kind::ALL.len()]; 2];
    for (up, by_kind) in t.iter_mut().enumerate() {
        for (kind, by_req) in by_kind.iter_mut().enumerate() {
            for (req, by_dir) in by_req.iter_mut().enumerate() {
                for (dir, r) in by_dir.iter_mut().enumerate() {
                    // N6: requests go up, responses come down; N3 the other way.
                    let vantage = if (req == 1) == DIR_UP[up][dir] {
                        Vantage::N6
                    } else {
                        Vantage::N3
                    };
                    *r = match route[kind][vantage as usize] {
                        route::SCAN if vantage == Vantage::N3 => route::SCAN_N3,
                        x => x,
                    };
                }
            }
        }
    }
    t
}

/// A worker's fridge stage.
pub struct FridgeStage {
    slices: Vec<SliceRt>,
    /// Per rx port class, kind, request flag and direction byte, where a role goes (built
    /// from the routes per kind and vantage, [`routes`]).
    routes: Routes,
    kinds: u8,
    /// Some slice is keyed by GTP-U peer.
    peer_slices: bool,
    window_ns: u64,
    window: u64,
    /// `[start, end)` of `window` in ns: the per-batch test without a division.
    window_span: (u64, u64),
    /// Requests and responses tallied (over every slice's set) as of the last publish or
    /// window start: something was tallied since if [`tallied`](Self::tallied) differs. Kept
    /// as a mark rather than a flag set per packet (a store per packet).
    mark: u64,
    /// The window in progress was published as running (so it must also end as done).
    idle_published: bool,
    uplink: Vec<bool>,
    skips: [u64; Skip::COUNT],
    unsliced: u64,
    publ: Arc<WorkerPub>,
    /// Raw samples out, when exported.
    raw: Option<RawProducer>,
    raw_dropped: u64,
}

impl std::fmt::Debug for FridgeStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FridgeStage")
            .field("slices", &self.slices.len())
            .field("window", &self.window)
            .finish()
    }
}

impl FridgeStage {
    /// Worker `worker`'s stage publishing into `publ` (made by [`WorkerPub::new`] from the
    /// same spec). Each worker hashes with its own seed.
    pub fn new(
        spec: &StageSpec,
        worker: usize,
        publ: Arc<WorkerPub>,
    ) -> Result<FridgeStage, SpecError> {
        let mut slices = Vec::new();
        let mut kinds = 0;
        for s in &spec.slices {
            kinds |= s.kind.bit();
            let seed = spec.seed ^ (worker as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            slices.push(SliceRt {
                kind_bit: s.kind.bit(),
                vantage: s.vantage,
                qfi: s.qfi.iter().fold(0u64, |a, &q| a | 1u64 << (q & 63)),
                any_qfi: s.qfi.is_empty(),
                ports: s.ports.clone(),
                peers: s.peers.iter().map(|&a| addr_key(a)).collect(),
                set: FridgeSet::new(&s.fridges, spec.mode, seed)?,
                hists: s.fridges.iter().map(|_| LogHist::new()).collect(),
                sampled: false,
                total: s.fridges.iter().map(|_| LogHist::new()).collect(),
            });
        }
        let n = spec
            .uplink_ports
            .iter()
            .map(|&p| usize::from(p) + 1)
            .max()
            .unwrap_or(0);
        let mut uplink = vec![false; n];
        for &p in &spec.uplink_ports {
            uplink[usize::from(p)] = true;
        }
        let mut route = [[route::NONE; 2]; 5];
        for (i, sl) in spec.slices.iter().enumerate() {
            let r = &mut route[sl.kind as usize][sl.vantage as usize];
            if *r == route::NONE {
                let plain = sl.qfi.is_empty() && sl.ports.is_empty() && sl.peers.is_empty();
                *r = match u32::try_from(i) {
                    Ok(i) if plain && i < route::SCAN => i,
                    _ => route::SCAN,
                };
            }
        }
        Ok(FridgeStage {
            peer_slices: spec.slices.iter().any(|s| !s.peers.is_empty()),
            routes: routes(&route),
            slices,
            kinds,
            window_ns: spec.window_ns.max(1),
            window: 0,
            window_span: (0, spec.window_ns.max(1)),
            mark: 0,
            idle_published: false,
            uplink,
            skips: [0; Skip::COUNT],
            unsliced: 0,
            publ,
            raw: None,
            raw_dropped: 0,
        })
    }

    /// Also push every matched sample into `ring` (see [`RawSample`]).
    pub fn with_raw(mut self, ring: RawProducer) -> FridgeStage {
        self.raw = Some(ring);
        self
    }

    /// Publish every slice's totals, the window too if it `ended`, and the skip counters.
    /// Histograms known empty (a window without samples, a slice without a match since
    /// start: every sample is added to both) are published as such, without a copy.
    fn publish(&self, ended: bool) {
        for (s, p) in self.slices.iter().zip(&self.publ.slices) {
            let stats = s.set.stats();
            if ended {
                p.done
                    .publish_hists(self.window, s.sampled.then_some(&s.hists[..]), &stats);
            }
            let total = (stats.matched != 0).then_some(&s.total[..]);
            p.total.publish_hists(self.window, total, &stats);
        }
        for (a, &v) in self.publ.skips.counts.iter().zip(&self.skips) {
            a.store(v, Ordering::Relaxed);
        }
        self.publ
            .skips
            .unsliced
            .store(self.unsliced, Ordering::Relaxed);
        self.publ
            .raw_dropped
            .store(self.raw_dropped, Ordering::Relaxed);
    }

    /// Requests and responses tallied so far, over every slice (each tally counts one in its
    /// set's stats; cold: at window ends and when idle).
    fn tallied(&self) -> u64 {
        self.slices
            .iter()
            .map(|s| {
                let st = s.set.stats();
                st.requests.wrapping_add(st.responses)
            })
            .fold(0, u64::wrapping_add)
    }

    /// Something was tallied since the last publish or window start.
    fn dirty(&self) -> bool {
        self.tallied() != self.mark
    }

    /// Move to the window of `now_ns`: publish the one that ended, start empty.
    #[inline(always)]
    fn roll(&mut self, now_ns: u64) {
        let (lo, hi) = self.window_span;
        if now_ns < lo || now_ns >= hi {
            self.roll_to(now_ns);
        }
    }

    #[cold]
    fn roll_to(&mut self, now_ns: u64) {
        let w = now_ns / self.window_ns;
        let lo = w * self.window_ns;
        self.window_span = (lo, lo.saturating_add(self.window_ns));
        if w != self.window {
            let tallied = self.tallied();
            if tallied != self.mark || self.idle_published {
                self.publish(true);
            }
            self.idle_published = false;
            for s in self.slices.iter_mut().filter(|s| s.sampled) {
                for h in &mut s.hists {
                    h.clear();
                }
                s.sampled = false;
            }
            self.window = w;
            self.mark = tallied;
        }
    }

    /// One packet (its bytes, metadata and rx port) at `now_ns`.
    #[inline(always)]
    pub fn observe(&mut self, data: &[u8], m: &crate::meta::PacketMeta, rx: PortId, now_ns: u64) {
        let rx = self.rx(rx);
        self.observe_kinds(self.kinds, &Bytes { data, m }, rx, now_ns);
    }

    /// What a batch from `rx` reads once: the port's class and its plain DNS routes.
    #[inline(always)]
    fn rx(&self, rx: PortId) -> Rx {
        let up = self.rx_up(rx);
        let dns = &self.routes[usize::from(up)][Kind::Dns as usize];
        let at = |dir: Direction| [dns[0][dir as usize], dns[1][dir as usize]];
        Rx {
            up,
            dns: [at(Direction::Uplink), at(Direction::Downlink)],
        }
    }

    /// [`observe`](Self::observe) with the stage's kinds read once per batch by the caller
    /// (read per packet, they are reloaded after every store through `self`), of a packet's
    /// bytes `p` (a slice, or a buffer: [`Frame`]).
    #[inline(always)]
    fn observe_kinds<F: Frame + ?Sized>(&mut self, kinds: u8, p: &F, rx: Rx, now_ns: u64) {
        let m = p.meta();
        // The usual uplink datagram with DNS and without GTP-U echo among the kinds (the
        // loop built for that mask folds the kinds' test away): one compare of the record
        // for the flags, protocol, offsets and direction, then the DNS header at fixed
        // offsets in the frame's prefix (one length check) and the route at a known
        // direction (what `single_role` and the route by the direction byte give such a
        // packet; tests hold them equal). A frame shorter than the prefix takes the general
        // path out of line, which says why.
        const UDP: u8 = Kind::GtpEcho.bit() | Kind::Dns.bit();
        if kinds & UDP == Kind::Dns.bit() {
            let w = record_word(m);
            // (In this order, the compiler tests the uplink word first.)
            if w == GTPU_DOWNLINK_UDP {
                return match p.head(GTPU_DNS_HEAD) {
                    Some(h) => self.observe_plain_dns(true, h, p, rx, now_ns),
                    None => self.observe_short(kinds, p, rx.up, now_ns),
                };
            }
            if w == PLAIN_UPLINK_UDP {
                return match p.head(PLAIN_DNS_HEAD) {
                    Some(h) => self.observe_plain_dns(false, h, p, rx, now_ns),
                    None => self.observe_short(kinds, p, rx.up, now_ns),
                };
            }
        }
        self.observe_general(kinds, p.bytes(), m, rx.up, now_ns);
    }

    /// A usual record whose frame is shorter than the headers it names: the general path,
    /// out of line (no register of the common path is kept for it).
    #[cold]
    #[inline(never)]
    fn observe_short<F: Frame + ?Sized>(&mut self, kinds: u8, p: &F, rx_up: bool, now_ns: u64) {
        self.observe_general(kinds, p.bytes(), p.meta(), rx_up, now_ns);
    }

    /// A packet the usual records' path does not take: its roles from the classifier's
    /// offsets ([`single_role`], then [`observe_other`](Self::observe_other)).
    #[inline(always)]
    fn observe_general(
        &mut self,
        kinds: u8,
        data: &[u8],
        m: &PacketMeta,
        rx_up: bool,
        now_ns: u64,
    ) {
        let frame = Bytes { data, m };
        let mut sink = Sink::of_bytes(self, rx_up, &frame, now_ns);
        match single_role(data, m, kinds, &mut sink) {
            Ok(true) => {}
            Ok(false) => self.observe_other(data, m, rx_up, now_ns),
            Err(s) => self.skips[s as usize] += 1,
        }
    }

    /// A packet whose record is [`GTPU_DOWNLINK_UDP`] (`down`) or [`PLAIN_UPLINK_UDP`], with
    /// DNS and without GTP-U echo among the kinds: its direction is known. `data` is the
    /// frame's prefix the record names, `p` the packet.
    #[inline(always)]
    fn observe_plain_dns<F: Frame + ?Sized>(
        &mut self,
        down: bool,
        data: &[u8],
        p: &F,
        rx: Rx,
        now_ns: u64,
    ) {
        let dir = if down {
            Direction::Downlink
        } else {
            Direction::Uplink
        };
        let mut sink = Sink {
            st: self,
            rx_up: rx.up,
            dir: dir as u8,
            fixed: Some(rx.dns[usize::from(down)]),
            data,
            frame: p,
            now_ns,
        };
        if let Err(s) = plain_dns(data, down, &mut sink) {
            self.skips[s as usize] += 1;
        }
    }

    /// A packet that is not UDP: a TCP segment's roles (up to two) or an ICMP echo's,
    /// handed over as they are found.
    #[inline(never)]
    fn observe_other(&mut self, data: &[u8], m: &PacketMeta, rx_up: bool, now_ns: u64) {
        let kinds = self.kinds;
        let frame = Bytes { data, m };
        let mut sink = Sink::of_bytes(self, rx_up, &frame, now_ns);
        match other_roles(data, m, kinds, &mut sink) {
            Ok(0) => self.skips[Skip::Other as usize] += 1,
            Ok(_) => {}
            Err(s) => self.skips[s as usize] += 1,
        }
    }

    /// Whether `rx` is an uplink port: which of the [`Routes`] (and [`DIR_UP`]) tables its
    /// packets take (once per batch: a lookup, no state, so batches from alternating rx
    /// ports cost nothing more).
    #[inline(always)]
    fn rx_up(&self, rx: PortId) -> bool {
        self.uplink.get(usize::from(rx)).copied().unwrap_or(false)
    }

    /// Whether the packet went uplink: the UPF's direction, else its rx port's (what
    /// [`DIR_UP`] answers per direction byte; tests hold them equal).
    #[cfg(test)]
    fn uplink(&self, m: &PacketMeta, rx: PortId) -> bool {
        match m.direction() {
            Direction::Uplink => true,
            Direction::Downlink => false,
            Direction::Unknown => self.uplink.get(usize::from(rx)).copied().unwrap_or(false),
        }
    }

    /// One role of a packet, whose [`Routes`] entry is `route`: to its slice's fridges.
    #[inline(always)]
    fn role<F: Frame + ?Sized>(
        &mut self,
        role: Role,
        route: u32,
        data: &[u8],
        frame: &F,
        now_ns: u64,
    ) {
        let r = route as usize;
        // One compare for the common case: a direct route is a slice index, and `NONE` and
        // `SCAN` are past every index (no stage has 2^32 - 2 slices).
        if r < self.slices.len() {
            self.tally(r, role, now_ns);
        } else {
            // The role's fields as scalars: a `Role` passed whole is built in memory before
            // the compare, on the common path too.
            let Role {
                kind,
                request,
                id,
                ports,
            } = role;
            let m = frame.meta();
            self.unrouted(route, kind, request, id, ports, (data, m), now_ns);
        }
    }

    /// A role without a direct route: the first slice that takes it, if any.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn unrouted(
        &mut self,
        r: u32,
        kind: Kind,
        request: bool,
        id: u64,
        ports: [u16; 2],
        (data, m): (&[u8], &PacketMeta),
        now_ns: u64,
    ) {
        let role = Role {
            kind,
            request,
            id,
            ports,
        };
        let vantage = match r {
            route::SCAN_N6 => Some(Vantage::N6),
            route::SCAN_N3 => Some(Vantage::N3),
            _ => None,
        };
        match vantage.map(|v| self.scan(role, v, data, m)) {
            Some(Some(i)) => self.tally(i, role, now_ns),
            _ => self.unsliced += 1,
        }
    }

    /// A role to slice `slice`'s fridges.
    #[inline(always)]
    fn tally(&mut self, slice: usize, role: Role, now_ns: u64) {
        let s = &mut self.slices[slice];
        if role.request {
            s.set.request_sparse(role.id, now_ns);
        } else if let Some(x) = s.set.response(role.id, now_ns) {
            let k = usize::from(x.fridge);
            s.sampled = true;
            s.hists[k].add(x.delay_ns, x.weight);
            s.total[k].add(x.delay_ns, x.weight);
            if let Some(ring) = &mut self.raw {
                let r = RawSample {
                    at_ns: now_ns,
                    delay_ns: x.delay_ns,
                    x: x.x,
                    weight: x.weight,
                    slice: slice as u16,
                    fridge: x.fridge,
                };
                if ring.push(r).is_err() {
                    // Only this worker writes it: a plain store, on the drop path only.
                    self.raw_dropped += 1;
                    self.publ
                        .raw_dropped
                        .store(self.raw_dropped, Ordering::Relaxed);
                }
            }
        }
    }

    /// The first slice, in file order, whose kind, vantage, QFI, ports and peers take `role`.
    #[cold]
    fn scan(&self, role: Role, vantage: Vantage, data: &[u8], m: &PacketMeta) -> Option<usize> {
        // The echo's peers, read only when a slice is keyed by them.
        let peers = if role.kind == Kind::GtpEcho && self.peer_slices {
            outer_addrs(data, m)
        } else {
            None
        };
        let bit = role.kind.bit();
        self.slices.iter().position(|s| {
            s.kind_bit == bit
                && s.vantage == vantage
                && (s.any_qfi || s.qfi & (1u64 << (m.qfi & 63)) != 0)
                && (s.ports.is_empty() || s.ports.iter().any(|p| role.ports.contains(p)))
                && (s.peers.is_empty()
                    || peers.is_some_and(|(a, b)| s.peers.contains(&a) || s.peers.contains(&b)))
        })
    }
}

impl FridgeStage {
    /// Every packet of `batch` the stage observes (see [`Stage::process`]), with `kinds`
    /// as the caller built it.
    #[inline(always)]
    fn observe_batch<B: PacketBuf>(&mut self, batch: &Batch<B>, kinds: u8, now: u64) {
        let rx = self.rx(batch.rx_port);
        let every = match batch.disposition_view() {
            Dispositions::Uniform(u) => u.is_continue_or_tx(),
            // A burst whose packets are all sent (the usual one: the UPF writes each its
            // port) takes the loop without a test per packet, after one pass over the
            // dispositions (no branch in it: the compiler vectorises it).
            Dispositions::PerPacket(ds) => {
                if !Disposition::all_continue_or_tx(ds) {
                    // Zipped, not indexed: no bounds check per packet.
                    for (p, d) in batch.pkts.iter().zip(ds) {
                        if d.is_continue_or_tx() {
                            self.observe_kinds(kinds, p, rx, now);
                        }
                    }
                    return;
                }
                true
            }
        };
        if every {
            for p in batch.pkts.iter() {
                self.observe_kinds(kinds, p, rx, now);
            }
        }
    }
}

impl<B: PacketBuf> Stage<B> for FridgeStage {
    fn name(&self) -> &'static str {
        "fridge"
    }

    /// Observes every packet about to be sent (`Tx`, any port) and every packet still
    /// `Continue` (what a scope such as `OnEgress` hands it), and changes no disposition:
    /// placed after the main stage it sees what `OnEgress` over every port would give it,
    /// without rewriting dispositions to hide and restore the others.
    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        let now = cx.now_ns();
        self.roll(now);
        // DNS without GTP-U echo (the usual UDP configuration): the loop is built for that
        // mask, so the per-packet tests of the two UDP kinds fold away (four instructions
        // per DNS packet); any other mask takes the general loop. The mask is rebuilt from
        // constants with bit 7 (no kind: nothing tests it) set, so it differs from `kinds`
        // and the compiler keeps two loops (the same value, it merges them back into one).
        const UDP: u8 = Kind::GtpEcho.bit() | Kind::Dns.bit();
        const NO_KIND: u8 = 0x80;
        const _: () = assert!(Kind::ALL.len() < 7);
        let kinds = self.kinds;
        if kinds & UDP == Kind::Dns.bit() {
            self.observe_batch(batch, kinds & !UDP | Kind::Dns.bit() | NO_KIND, now);
        } else {
            self.observe_batch(batch, kinds, now);
        }
    }

    /// No traffic: let the control thread see the totals so far.
    fn idle(&mut self) {
        if self.dirty() {
            self.publish(false);
            self.mark = self.tallied();
            self.idle_published = true;
        }
    }
}

#[cfg(test)]
#[path = "stage_tests.rs"]
mod tests;
