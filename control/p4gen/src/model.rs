//! What the P4 tables hold for one config: built from the same compiled [`UpfTables`] the
//! workers read (static and synthetic sessions through `peregrine-rules`), the routes, the
//! QFI -> queue map and the `[int]` section. Renderers (`crate::bfrt`, `crate::bmv2`) only
//! format this.
//!
//! What is offloaded: a lookup key (TEID, UE IPv4 address, UE IPv6 /64) whose candidate list
//! is one PDR without SDF filters, with at most one metered QER and at most one URR (the
//! shape of an SMF's default PDU session). Every other key gets `pdr_to_cpu`: the packet goes
//! to the software UPF, which evaluates precedence and SDF filters (TS 29.244 5.2.1).

use crate::config::{Config, ConfigError, ParsedRoute};
use peregrine_dataplane::qos::scheduler::NUM_QFI;
use peregrine_dataplane::qos::trtcm::TrTcmConfig;
use peregrine_dataplane::upf::tables::{
    Direction, FarAction, KeyMap, PdrRule, Shard, UpfTables, NONE,
};
use peregrine_rules::{Compiler, CompilerConfig};
use peregrine_wire::ethernet::Address as MacAddr;
use peregrine_wire::ioam::{NodeData, TraceType};
use peregrine_wire::pdu_session::pdu_type;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Verdict codes of the P4 ingress (`pg_meta_t.verdict`), indices of its drop counter. Each
/// drop code carries the Rust dataplane's drop-reason name, so both count under one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict;

impl Verdict {
    /// (P4 constant, code). Codes >= `FIRST_DROP` are drops.
    pub const ALL: [(&'static str, u8); 13] = [
        ("PG_V_FORWARD", 0),
        ("PG_V_TO_CPU", 1),
        ("PG_V_DROP_L2_NOT_FOR_US", 2),
        ("PG_V_DROP_UNSUPPORTED_ETHERTYPE", 3),
        ("PG_V_DROP_IPV4_BAD_CHECKSUM", 4),
        ("PG_V_DROP_END_MARKER", 5),
        ("PG_V_DROP_UPLINK_NO_PDR", 6),
        ("PG_V_DROP_GATE_CLOSED", 7),
        ("PG_V_DROP_MBR_EXCEEDED", 8),
        ("PG_V_DROP_FAR_DROP", 9),
        ("PG_V_DROP_NO_ROUTE", 10),
        ("PG_V_DROP_TTL_EXCEEDED", 11),
        ("PG_V_DROP_DOWNLINK_NO_SESSION", 12),
    ];
    pub const FIRST_DROP: u8 = 2;

    /// The Rust drop-reason name (`dataplane/src/upf/stage.rs`) of a drop code.
    pub fn reason_name(code: u8) -> Option<String> {
        let (n, _) = Self::ALL.iter().find(|(_, c)| *c == code)?;
        n.strip_prefix("PG_V_DROP_").map(str::to_ascii_lowercase)
    }
}

/// The action of a PDR table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PdrAction {
    Apply(PdrApply),
    /// The general path: the software UPF decides.
    ToCpu,
}

/// Parameters of `pdr_apply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdrApply {
    /// Index into the `far` table.
    pub far_idx: u32,
    pub gate_open: bool,
    /// Meter slot (`qer_meter` index), if the PDR has a metered QER.
    pub meter: Option<u32>,
    /// URR slot; the counter index is `2 * slot + direction`.
    pub urr: Option<u32>,
    /// PDI QFI the packet's PSC QFI must equal (uplink), if any.
    pub pdr_qfi: Option<u8>,
    /// The QFI marked (downlink) or counted when the packet carries none (uplink).
    pub mark_qfi: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdrEntry<K> {
    pub key: K,
    pub action: PdrAction,
}

/// A `far` table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FarEntry {
    /// Forward without an outer header: route the inner packet on N6.
    Route,
    EncapV4 {
        teid: u32,
        peer: Ipv4Addr,
        local: Ipv4Addr,
        psc_type: u8,
    },
    EncapV6 {
        teid: u32,
        peer: Ipv6Addr,
        local: Ipv6Addr,
        psc_type: u8,
    },
    Drop,
    /// BUFF: to the control core (buffering and Downlink Data Reports stay in software).
    Buffer,
}

/// A meter slot's rates in the units of both targets (RFC 2698 TrTCM, colour-blind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeterEntry {
    pub index: u32,
    /// The Rust meter config it comes from: bytes/s and bytes.
    pub cfg: TrTcmConfig,
}

impl MeterEntry {
    /// Tofino byte meters take kbit/s and kbit bursts (`$METER_SPEC_CIR_KBPS`, ...):
    /// `kbps = bytes/s * 8 / 1000`, rounded up so a configured rate never shrinks; bursts
    /// likewise (`kbits = bytes * 8 / 1000`, rounded up).
    pub fn tofino_kbps_kbits(&self) -> (u64, u64, u64, u64) {
        let k = |b: u64| (b * 8).div_ceil(1000);
        (
            k(self.cfg.cir),
            k(self.cfg.cbs),
            k(self.cfg.pir),
            k(self.cfg.pbs),
        )
    }

    /// BMv2 byte meters take bytes per microsecond and bursts in bytes
    /// (`meter_set_rates <m> <i> <cir>:<cbs> <pir>:<pbs>`).
    pub fn bmv2_rates(&self) -> ((f64, u64), (f64, u64)) {
        let per_us = |b: u64| b as f64 / 1e6;
        (
            (per_us(self.cfg.cir), self.cfg.cbs),
            (per_us(self.cfg.pir), self.cfg.pbs),
        )
    }
}

/// A route entry: LPM prefix to (port, next-hop MAC, our port MAC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteEntry {
    pub addr: IpAddr,
    pub len: u8,
    pub port: u16,
    pub dmac: MacAddr,
    pub smac: MacAddr,
}

/// What to write into each of the first four words of an IOAM node entry (the rest are
/// all-ones): codes of `int_set_layout`.
pub mod word {
    pub const ONES: u8 = 0;
    pub const HOP_LIM_NODE_ID: u8 = 1;
    pub const TS_SECS: u8 = 2;
    pub const TS_FRAC: u8 = 3;
}

/// One `int_layout` entry: trace types matching `value & mask` place the fields at `words`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayoutEntry {
    pub value: u32,
    pub mask: u32,
    pub words: [u8; 4],
}

/// INT transit settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntEntries {
    pub node_id: u16,
    /// The hop limit written is the received one minus 1 (the daemon sets
    /// `hop_limit_after_forward`).
    pub hop_lim_dec: bool,
    /// Timestamp fraction in microseconds (POSIX) rather than nanoseconds (PTP).
    pub ts_posix: bool,
    /// Namespaces whose hop data this node adds.
    pub namespaces: Vec<u16>,
    pub layout: Vec<LayoutEntry>,
}

/// Everything the generator writes for one config.
#[derive(Debug, Clone, PartialEq)]
pub struct Entries {
    pub n3_v4: Vec<Ipv4Addr>,
    pub n3_v6: Vec<Ipv6Addr>,
    pub ul: Vec<PdrEntry<u32>>,
    pub dl_v4: Vec<PdrEntry<Ipv4Addr>>,
    /// Keyed by the upper 64 bits of the UE address.
    pub dl_v6: Vec<PdrEntry<u64>>,
    pub fars: Vec<FarEntry>,
    pub meters: Vec<MeterEntry>,
    /// Meter and URR array sizes.
    pub meter_slots: u32,
    pub urr_slots: u32,
    pub qfi_qid: [u8; NUM_QFI],
    /// `[upf] mtu`: the largest outer IP packet sent.
    pub mtu: u16,
    pub routes: Vec<RouteEntry>,
    pub int: Option<IntEntries>,
}

/// Options that are not in the Peregrine config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// INT namespaces to enable at this node (the INT manager sends rules at run time; the
    /// P4 twin takes them here).
    pub int_namespaces: Vec<u16>,
}

/// The compiled tables of a config's static and synthetic sessions, as the daemon builds
/// them.
pub fn compile(cfg: &Config) -> Result<UpfTables, ConfigError> {
    let Some(u) = &cfg.upf else {
        return Ok(UpfTables::default());
    };
    let sessions = u.static_sessions()?;
    let slots = u32::try_from(sessions.len().saturating_mul(2).max(1)).unwrap_or(u32::MAX);
    let mut c = Compiler::new(CompilerConfig {
        local_v4: u.n3_v4().into_iter().collect(),
        local_v6: u.n3_v6().into_iter().collect(),
        max_meter_slots: slots,
        max_urr_slots: slots,
        qos: peregrine_dataplane::qos::QosPolicies::new(
            peregrine_dataplane::qos::QerPolicy::legacy_policing(),
        ),
    });
    for s in &sessions {
        c.upsert(s).map_err(|e| ConfigError::Invalid {
            field: "upf.session".into(),
            reason: format!("session {:#x}: {e}", s.up_seid),
        })?;
    }
    Ok(c.build())
}

struct Builder<'a> {
    fars: Vec<FarEntry>,
    /// FAR contents -> index (equal FARs share one entry).
    far_ids: BTreeMap<FarEntry, u32>,
    meters: BTreeMap<u32, TrTcmConfig>,
    t: &'a UpfTables,
}

impl Builder<'_> {
    /// The entry for candidate range `range` of shard `si` (direction `dir`).
    fn pdr(&mut self, si: usize, range: (u32, u32), dir: Direction) -> PdrAction {
        let s: &Shard = &self.t.shards[si];
        if range.1.checked_sub(range.0) != Some(1) {
            return PdrAction::ToCpu;
        }
        let Some(pdr) = s
            .pdr_order
            .get(range.0 as usize)
            .and_then(|&i| s.pdrs.get(i as usize))
        else {
            return PdrAction::ToCpu;
        };
        if pdr.direction != dir || pdr.filters.0 != pdr.filters.1 {
            return PdrAction::ToCpu;
        }
        let urrs: Vec<u32> = pdr
            .urrs
            .iter()
            .filter(|u| u.slot != NONE)
            .map(|u| u.slot)
            .collect();
        let qers: Vec<_> = pdr
            .qers
            .iter()
            .filter(|&&i| i != NONE)
            .filter_map(|&i| s.qers.get(i as usize))
            .collect();
        let metered: Vec<_> = qers.iter().filter(|q| q.meter_cfg.is_some()).collect();
        if urrs.len() > 1 || metered.len() > 1 {
            return PdrAction::ToCpu;
        }
        let Some(far) = s.fars.get(pdr.far as usize) else {
            return PdrAction::ToCpu;
        };
        // Uplink without Outer Header Removal is dropped in software (`ul_without_decap`);
        // not offloaded.
        if dir == Direction::Uplink && !pdr.remove_gtpu && far.action == FarAction::Forward {
            return PdrAction::ToCpu;
        }
        let far_entry = match (far.action, far.outer) {
            (FarAction::Drop, _) => FarEntry::Drop,
            (FarAction::Buffer { .. }, _) => FarEntry::Buffer,
            (FarAction::Forward, None) => FarEntry::Route,
            (FarAction::Forward, Some(o)) => {
                let psc_type = match dir {
                    Direction::Downlink => pdu_type::DL,
                    Direction::Uplink => pdu_type::UL,
                };
                match (o.peer, o.local) {
                    (IpAddr::V4(peer), IpAddr::V4(local)) => FarEntry::EncapV4 {
                        teid: o.teid,
                        peer,
                        local,
                        psc_type,
                    },
                    (IpAddr::V6(peer), IpAddr::V6(local)) => FarEntry::EncapV6 {
                        teid: o.teid,
                        peer,
                        local,
                        psc_type,
                    },
                    _ => return PdrAction::ToCpu,
                }
            }
        };
        let far_idx = match self.far_ids.get(&far_entry) {
            Some(&i) => i,
            None => {
                let i = self.fars.len() as u32;
                self.fars.push(far_entry);
                self.far_ids.insert(far_entry, i);
                i
            }
        };
        let meter = metered.first().map(|q| {
            self.meters
                .insert(q.meter.slot, q.meter_cfg.unwrap_or_else(unlimited));
            q.meter.slot
        });
        PdrAction::Apply(PdrApply {
            far_idx,
            gate_open: qers.iter().all(|q| q.gate_open),
            meter,
            urr: urrs.first().copied(),
            pdr_qfi: pdr.qfi,
            mark_qfi: mark_qfi(s, pdr, dir),
        })
    }
}

fn unlimited() -> TrTcmConfig {
    TrTcmConfig {
        cir: 0,
        cbs: 0,
        pir: u64::MAX / 8,
        pbs: u64::MAX / 8,
        mode: peregrine_dataplane::qos::ColourMode::Blind,
    }
}

/// The QFI the software UPF marks (downlink) or counts for a packet without a PSC (uplink):
/// `upf/enforce.rs` `apply` — downlink: the first QER's QFI, else the PDR's, else 0.
fn mark_qfi(s: &Shard, pdr: &PdrRule, dir: Direction) -> u8 {
    let from_qer = pdr
        .qers
        .iter()
        .filter(|&&i| i != NONE)
        .find_map(|&i| s.qers.get(i as usize).and_then(|q| q.qfi));
    match dir {
        Direction::Downlink => from_qer.or(pdr.qfi).unwrap_or(0),
        Direction::Uplink => pdr.qfi.unwrap_or(0),
    }
}

fn keys<K: Copy + Into<u64>>(m: &KeyMap<K>) -> impl Iterator<Item = (u64, (u32, u32))> + '_ {
    m.iter()
}

/// The IOAM node-entry layouts, derived from the Rust transit's encoder: for each of the 16
/// combinations of trace-type bits 0-3 (the only ones that move the fields the P4 transit
/// fills), emit a node entry with `NodeData::emit` and see where each field lands.
pub fn ioam_layouts() -> Vec<LayoutEntry> {
    let top4 = TraceType::HOP_LIM_NODE_ID
        | TraceType::IF_IDS
        | TraceType::TIMESTAMP_SECS
        | TraceType::TIMESTAMP_FRAC;
    let mut out = Vec::new();
    for bits in 0u32..16 {
        let value = bits << 20;
        let tt = TraceType(value);
        // Sentinels no other field can produce.
        let d = NodeData {
            hop_limit: tt.has(TraceType::HOP_LIM_NODE_ID).then_some(0x11),
            node_id: tt.has(TraceType::HOP_LIM_NODE_ID).then_some(0x22_2222),
            timestamp_secs: tt.has(TraceType::TIMESTAMP_SECS).then_some(0x3333_3333),
            timestamp_frac: tt.has(TraceType::TIMESTAMP_FRAC).then_some(0x0444_4444),
            ..NodeData::default()
        };
        let mut buf = [0u8; 64];
        let n = d.emit(tt, &mut buf).unwrap_or(0);
        let mut words = [word::ONES; 4];
        for (i, w) in words.iter_mut().enumerate() {
            if (i + 1) * 4 > n {
                break;
            }
            *w = match u32::from_be_bytes([
                buf[4 * i],
                buf[4 * i + 1],
                buf[4 * i + 2],
                buf[4 * i + 3],
            ]) {
                0x1122_2222 => word::HOP_LIM_NODE_ID,
                0x3333_3333 => word::TS_SECS,
                0x0444_4444 => word::TS_FRAC,
                _ => word::ONES,
            };
        }
        out.push(LayoutEntry {
            value,
            mask: top4,
            words,
        });
    }
    out
}

/// Build every entry for `cfg`.
pub fn build(cfg: &Config, opts: &Options) -> Result<Entries, ConfigError> {
    let t = compile(cfg)?;
    let macs = cfg.macs()?;
    let mut b = Builder {
        fars: Vec::new(),
        far_ids: BTreeMap::new(),
        meters: BTreeMap::new(),
        t: &t,
    };
    let mut ul = Vec::new();
    let mut dl_v4 = Vec::new();
    let mut dl_v6 = Vec::new();
    for si in 0..t.shards.len() {
        let s = t.shards[si].clone();
        for (k, r) in s.teids() {
            ul.push(PdrEntry {
                key: k as u32,
                action: b.pdr(si, r, Direction::Uplink),
            });
        }
        for (k, r) in keys(&s.by_ue_v4) {
            dl_v4.push(PdrEntry {
                key: Ipv4Addr::from(k as u32),
                action: b.pdr(si, r, Direction::Downlink),
            });
        }
        for (k, r) in keys(&s.by_ue_v6) {
            dl_v6.push(PdrEntry {
                key: k,
                action: b.pdr(si, r, Direction::Downlink),
            });
        }
    }
    ul.sort_by_key(|e| e.key);
    dl_v4.sort_by_key(|e| e.key);
    dl_v6.sort_by_key(|e| e.key);
    let routes = cfg
        .routes()?
        .into_iter()
        .map(|r: ParsedRoute| RouteEntry {
            addr: r.addr,
            len: r.len,
            port: r.port,
            dmac: r.next_hop,
            smac: macs[usize::from(r.port)],
        })
        .collect();
    let qfi_qid = match &cfg.upf {
        Some(u) => *u.qfi_map().table(),
        None => *peregrine_dataplane::qos::QfiMap::default().table(),
    };
    let int = cfg.int.as_ref().map(|i| {
        let mut namespaces = opts.int_namespaces.clone();
        namespaces.sort_unstable();
        namespaces.dedup();
        IntEntries {
            node_id: i.node_id,
            hop_lim_dec: true,
            ts_posix: i.timestamp == peregrine_control::int::TimestampFormat::Posix,
            namespaces,
            layout: ioam_layouts(),
        }
    });
    Ok(Entries {
        n3_v4: t.local_v4.clone(),
        n3_v6: t.local_v6.clone(),
        ul,
        dl_v4,
        dl_v6,
        fars: b.fars,
        meters: b
            .meters
            .into_iter()
            .map(|(index, cfg)| MeterEntry { index, cfg })
            .collect(),
        meter_slots: t.meter_slots.max(1),
        urr_slots: t.urr_slots.max(1),
        qfi_qid,
        mtu: cfg.upf.as_ref().map_or(1500, |u| u.mtu),
        routes,
        int,
    })
}
