//! Fixtures for the UPF stage tests and benches: addresses, hand-built rule tables (filled
//! into the right shards with `shard_of`), N3 / N6 frames built with the wire crate, and a
//! rig that runs a `Pipeline` of `Upf` (alone, after the `Classify` stage, or on its general
//! path only) over `Batch<OwnedBuf>` on a fixed clock.

use peregrine_dataplane::classify::Classify;
use peregrine_dataplane::meta::PacketMeta;
use peregrine_dataplane::qos::TrTcmConfig;
use peregrine_dataplane::runtime::{
    Action, Batch, Context, Disposition, Pipeline, Publisher, Reasons, Stage,
};
use peregrine_dataplane::stages::l3fwd::{NextHop, RouteTable};
use peregrine_dataplane::upf::tables::{
    shard_of, Direction, FarAction, FarRule, FlowFilter, MeterRef, OuterHeader, PdrRule, QerRule,
    SessionInfo, UrrRef, NONE, NUM_SHARDS,
};
use peregrine_dataplane::upf::{Shard, Upf, UpfConfig, UpfStats, UpfTables};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_wire::ethernet::Address as Mac;
use peregrine_wire::gtpu;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

pub use crate::frames::{eth, gpdu, ip_packet, ip_udp, udp4, udp6};

pub const N3_MAC: Mac = Mac([2, 0, 0, 0, 0, 3]);
pub const N6_MAC: Mac = Mac([2, 0, 0, 0, 0, 6]);
pub const N9_MAC: Mac = Mac([2, 0, 0, 0, 0, 9]);
pub const GNB_MAC: Mac = Mac([2, 0, 0, 0, 3, 1]);
pub const ROUTER_MAC: Mac = Mac([2, 0, 0, 0, 6, 1]);
pub const PEER_UPF_MAC: Mac = Mac([2, 0, 0, 0, 9, 1]);

pub fn upf_v4() -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, 1)
}
pub fn upf_v6() -> Ipv6Addr {
    "2001:db8:3::1".parse().unwrap()
}
pub fn gnb_v4() -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, 10)
}
pub fn gnb_v6() -> Ipv6Addr {
    "2001:db8:3::10".parse().unwrap()
}
pub fn ue_v4(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 45, 0, 0)) + i)
}
pub fn ue_v6(i: u32) -> Ipv6Addr {
    Ipv6Addr::from((0x2001_0db8_00ee_0000u128 + u128::from(i)) << 64 | 7)
}
pub fn server_v4() -> Ipv4Addr {
    Ipv4Addr::new(198, 51, 100, 9)
}
pub fn server_v6() -> Ipv6Addr {
    "2001:db8:6::9".parse().unwrap()
}
pub fn n6_v4() -> Ipv4Addr {
    Ipv4Addr::new(198, 51, 100, 1)
}
pub fn n6_v6() -> Ipv6Addr {
    "2001:db8:6::1".parse().unwrap()
}
pub fn peer_upf_v4() -> Ipv4Addr {
    Ipv4Addr::new(203, 0, 113, 5)
}

/// Routes: N3 subnets on port 0 (gNB), N9 peer on port 2, default on N6 (port 1).
pub fn routes() -> RouteTable {
    let mut t = RouteTable::default();
    let gnb = NextHop {
        port: 0,
        mac: GNB_MAC,
    };
    let n6 = NextHop {
        port: 1,
        mac: ROUTER_MAC,
    };
    t.insert(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 0)), 24, gnb);
    t.insert(IpAddr::V6("2001:db8:3::".parse().unwrap()), 48, gnb);
    t.insert(
        IpAddr::V4(Ipv4Addr::new(203, 0, 113, 0)),
        24,
        NextHop {
            port: 2,
            mac: PEER_UPF_MAC,
        },
    );
    t.insert(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, n6);
    t.insert(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0, n6);
    t
}

/// One PDR to file, with the rules it references.
#[derive(Debug, Clone)]
pub struct P {
    pub dir: Direction,
    pub qfi: Option<u8>,
    pub filters: Vec<FlowFilter>,
    pub remove_gtpu: bool,
    pub far: FarRule,
    pub qers: Vec<QerRule>,
    pub urrs: Vec<u32>,
}

pub fn far_fwd(outer: Option<OuterHeader>) -> FarRule {
    FarRule {
        far_id: 1,
        action: FarAction::Forward,
        dst_iface: 0,
        outer,
    }
}

/// An uplink PDR (OHR) forwarding to N6.
pub fn ul(qfi: Option<u8>) -> P {
    P {
        dir: Direction::Uplink,
        qfi,
        filters: vec![],
        remove_gtpu: true,
        far: far_fwd(None),
        qers: vec![],
        urrs: vec![],
    }
}

/// A downlink PDR encapsulating toward the gNB with TEID `teid` over `gnb`.
pub fn dl(teid: u32, gnb: IpAddr) -> P {
    let local = match gnb {
        IpAddr::V4(_) => IpAddr::V4(upf_v4()),
        IpAddr::V6(_) => IpAddr::V6(upf_v6()),
    };
    P {
        dir: Direction::Downlink,
        qfi: None,
        filters: vec![],
        remove_gtpu: false,
        far: far_fwd(Some(OuterHeader {
            teid,
            peer: gnb,
            local,
        })),
        qers: vec![],
        urrs: vec![],
    }
}

pub fn qer(qfi: Option<u8>, gate_open: bool, meter: Option<(TrTcmConfig, u32, u32)>) -> QerRule {
    QerRule {
        qer_id: 1,
        gate_open,
        meter_cfg: meter.map(|m| m.0),
        pacer: None,
        meter: meter.map_or(
            MeterRef {
                slot: 0,
                generation: 0,
            },
            |m| MeterRef {
                slot: m.1,
                generation: m.2,
            },
        ),
        qfi,
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Key {
    Teid(u32),
    Ue4(Ipv4Addr),
    Ue6(Ipv6Addr),
}

/// Builds a `UpfTables` by hand.
#[allow(missing_debug_implementations)]
pub struct TableBuilder {
    pub shards: Vec<Shard>,
    pub meter_slots: u32,
    pub urr_slots: u32,
}

impl Default for TableBuilder {
    fn default() -> Self {
        TableBuilder {
            shards: vec![Shard::default(); NUM_SHARDS],
            meter_slots: 0,
            urr_slots: 0,
        }
    }
}

impl TableBuilder {
    /// File `ps` (already in precedence order) as the candidate list of `key`.
    pub fn add(&mut self, key: Key, ps: &[P]) -> &mut Self {
        let k = match key {
            Key::Teid(t) => u64::from(t),
            Key::Ue4(a) => u64::from(u32::from(a)),
            Key::Ue6(a) => (u128::from(a) >> 64) as u64,
        };
        let s = &mut self.shards[shard_of(k)];
        let session = s.sessions.len() as u32;
        s.sessions.push(SessionInfo {
            up_seid: u64::from(session) + 1,
        });
        let start = s.pdr_order.len() as u32;
        for p in ps {
            let f0 = s.filters.len() as u32;
            s.filters.extend(p.filters.iter().copied());
            let f1 = s.filters.len() as u32;
            let far = s.fars.len() as u32;
            s.fars.push(p.far);
            let mut qers = [NONE; 2];
            for (i, q) in p.qers.iter().enumerate() {
                qers[i] = s.qers.len() as u32;
                s.qers.push(*q);
                if q.meter_cfg.is_some() {
                    self.meter_slots = self.meter_slots.max(q.meter.slot + 1);
                }
            }
            let mut urrs = [UrrRef::NONE; 2];
            for (i, u) in p.urrs.iter().enumerate() {
                urrs[i] = UrrRef { slot: *u };
                self.urr_slots = self.urr_slots.max(u + 1);
            }
            s.pdr_order.push(s.pdrs.len() as u32);
            s.pdrs.push(PdrRule {
                pdr_id: s.pdrs.len() as u16 + 1,
                session,
                direction: p.dir,
                qfi: p.qfi,
                filters: (f0, f1),
                remove_gtpu: p.remove_gtpu,
                far,
                qers,
                urrs,
            });
        }
        let end = s.pdr_order.len() as u32;
        match key {
            Key::Teid(t) => s.by_teid.insert(t, (start, end)),
            Key::Ue4(a) => s.by_ue_v4.insert(u32::from(a), (start, end)),
            Key::Ue6(a) => s
                .by_ue_v6
                .insert((u128::from(a) >> 64) as u64, (start, end)),
        };
        self
    }

    /// The tables with the common case flattened (`Shard::index_fast`), as the compiler
    /// publishes them.
    pub fn build(&self) -> UpfTables {
        self.build_with(true)
    }

    /// `fast: false` leaves the fast-path records out: every packet takes the general path.
    pub fn build_with(&self, fast: bool) -> UpfTables {
        UpfTables {
            local_v4: vec![upf_v4()],
            local_v6: vec![upf_v6()],
            shards: self
                .shards
                .iter()
                .cloned()
                .map(|mut s| {
                    if fast {
                        s.index_fast();
                    }
                    Arc::new(s)
                })
                .collect(),
            shard_bits: peregrine_dataplane::upf::tables::SHARD_BITS,
            meter_slots: self.meter_slots,
            urr_slots: self.urr_slots,
        }
    }
}

/// An outer IP/UDP datagram carrying `gtp` (a whole GTP-U message) from `src` to `dst`.
pub fn udp_frame(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, body: &[u8]) -> Vec<u8> {
    eth(N3_MAC, GNB_MAC, &ip_udp(src, dst, sport, dport, body))
}

/// An uplink N3 frame: gNB -> UPF, G-PDU with `teid`/`qfi` around `inner`; IPv6 outer if
/// `v6_outer`.
pub fn ul_frame(v6_outer: bool, teid: u32, qfi: Option<u8>, inner: &[u8]) -> Vec<u8> {
    let (s, d) = if v6_outer {
        (IpAddr::V6(gnb_v6()), IpAddr::V6(upf_v6()))
    } else {
        (IpAddr::V4(gnb_v4()), IpAddr::V4(upf_v4()))
    };
    udp_frame(s, d, gtpu::PORT, gtpu::PORT, &gpdu(teid, qfi, inner))
}

/// A downlink N6 frame (router -> UPF) around `ip`.
pub fn dl_frame(ip: &[u8]) -> Vec<u8> {
    eth(N6_MAC, ROUTER_MAC, ip)
}

/// The Upf stage in a pipeline, with its publishers, reasons and stats.
#[allow(missing_debug_implementations)]
pub struct Rig {
    pub pipe: Pipeline<OwnedBuf>,
    pub reasons: Reasons,
    pub stats: Arc<UpfStats>,
    pub tables: Publisher<UpfTables>,
    pub routes: Publisher<RouteTable>,
    pub batch: Batch<OwnedBuf>,
}

pub fn cfg() -> UpfConfig {
    UpfConfig {
        n6_v4: Some(n6_v4()),
        n6_v6: Some(n6_v6()),
        max_meter_slots: 64,
        ..UpfConfig::default()
    }
}

/// How a [`Rig`] runs the UPF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The UPF alone: it classifies every packet itself.
    Alone,
    /// A `Classify` stage first; the UPF reads the packet metadata it fills.
    Classified,
    /// The UPF's per-packet general path end to end, classification included.
    General,
}

impl Rig {
    pub fn new(t: UpfTables, cfg: UpfConfig) -> Rig {
        Rig::with_mode(t, cfg, Mode::Alone)
    }

    pub fn with_mode(t: UpfTables, cfg: UpfConfig, mode: Mode) -> Rig {
        let tables = Publisher::new(t);
        let routes = Publisher::new(routes());
        let mut reasons = Reasons::new();
        let stats = Arc::new(UpfStats::new(64));
        let upf = Upf::new(
            tables.reader(),
            routes.reader(),
            vec![N3_MAC, N6_MAC, N9_MAC],
            cfg,
            stats.clone(),
            &mut reasons,
        );
        let stages: Vec<Box<dyn Stage<OwnedBuf>>> = match mode {
            Mode::Alone => vec![Box::new(upf)],
            Mode::Classified => vec![Box::new(Classify::new()), Box::new(upf.after_classifier())],
            Mode::General => vec![Box::new(upf.general_path_only())],
        };
        let pipe = Pipeline::new(stages);
        let mut batch = Batch::new();
        batch.want_spares(pipe.spare_buffers());
        Rig {
            pipe,
            reasons,
            stats,
            tables,
            routes,
            batch,
        }
    }

    /// [`Rig::run`] with each packet's metadata as the pipeline left it.
    pub fn run_meta(
        &mut self,
        frames: &[Vec<u8>],
        rx_port: u16,
        now_ns: u64,
    ) -> Vec<(Vec<u8>, Disposition, PacketMeta)> {
        self.batch.rx_port = rx_port;
        for f in frames {
            self.batch
                .push(OwnedBuf::from_slice(f), Disposition::CONTINUE)
                .expect("batch room");
        }
        // The worker's top-up of spare buffers (stages that make packets take them).
        for _ in 0..self.batch.spares_missing() {
            let _ = self.batch.give_spare(OwnedBuf::new());
        }
        let cx = Context::fixed(now_ns, 0);
        self.pipe.run(&mut self.batch, &cx);
        self.batch
            .drain()
            .map(|(b, d)| (b.data().to_vec(), d, *b.pkt_meta()))
            .collect()
    }

    /// Run `frames` received on `rx_port` as one batch at time `now_ns`.
    pub fn run(
        &mut self,
        frames: &[Vec<u8>],
        rx_port: u16,
        now_ns: u64,
    ) -> Vec<(Vec<u8>, Disposition)> {
        self.run_meta(frames, rx_port, now_ns)
            .into_iter()
            .map(|(b, d, _)| (b, d))
            .collect()
    }

    pub fn one(&mut self, frame: Vec<u8>, rx_port: u16, now_ns: u64) -> (Vec<u8>, Disposition) {
        self.run(&[frame], rx_port, now_ns).pop().unwrap()
    }

    /// Run one frame and return its drop reason's name ("" if not dropped).
    pub fn why(&mut self, frame: Vec<u8>, rx_port: u16, now_ns: u64) -> &'static str {
        let d = self.one(frame, rx_port, now_ns).1;
        self.reason(d)
    }

    /// The drop reason's name, or "" if not a drop.
    pub fn reason(&self, d: Disposition) -> &'static str {
        match d.action() {
            Action::Drop(r) => self.reasons.name(r),
            _ => "",
        }
    }
}

/// Config helpers.
#[allow(missing_debug_implementations)]
pub struct UpfConfigExt;

impl UpfConfigExt {
    pub fn with_pps(pps: u32) -> UpfConfig {
        UpfConfig {
            error_indication_pps: pps,
            ..cfg()
        }
    }
}
