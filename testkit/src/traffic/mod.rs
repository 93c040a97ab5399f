//! A deterministic 5G user-plane traffic generator.
//!
//! From a [`TrafficSpec`] it builds the frames a UPF sees on its two ports:
//!
//! * **uplink (N3)**: `Ethernet / IPv4|IPv6 (gNB -> UPF N3) / UDP 2152 -> 2152 / GTP-U G-PDU
//!   with a PDU Session Container (UL PDU SESSION INFORMATION, TS 38.415) carrying the QFI /
//!   inner IPv4|IPv6 (UE -> DN server) / UDP or TCP / payload`;
//! * **downlink (N6)**: `Ethernet / IPv4|IPv6 (DN server -> UE) / UDP or TCP / payload`;
//!
//! with every checksum valid (the outer UDP checksum is filled over IPv4 too), plus, on
//! request, a labelled set of bad or exception-path packets ([`Anomaly`]).
//!
//! # Determinism
//!
//! The same spec always yields the same bytes, on any platform: randomness comes from
//! [`Rng`], xoshiro256** (Blackman and Vigna) seeded by four splitmix64 outputs, both named
//! algorithms from `rand_xoshiro` (never `rand`'s `SmallRng`, whose algorithm may change). Packet `i` is drawn from a stream seeded by `(seed, i)` alone, and each UE's
//! flows from `(seed, ue, flow)`, so a packet does not depend on the ones before it.
//!
//! # Frame sizes
//!
//! A size is the Ethernet frame length without FCS (64 means a 64-byte frame). A size too
//! small for a packet's header stack is raised to the stack's length (no payload), and no
//! frame is shorter than 60 bytes, the Ethernet minimum without FCS; anything beyond the
//! headers is L4 payload. The smallest stacks are 42 bytes (DL IPv4/UDP) and 138 bytes (UL
//! IPv6 outer / IPv6 inner / TCP), so a 64-byte size gives 64-byte DL IPv4 frames but
//! longer UL frames. The payload starts with the packet's index (8 bytes, big-endian) when
//! there is room, then a counting pattern.
//!
//! # Flows
//!
//! One [`Session`] (PDU session, one N3 tunnel) per UE; each UE has [`FLOWS_PER_UE`]
//! transport flows with fixed 5-tuples to one of [`DN_SERVERS`] servers, each flow mapped
//! to one of the UE's QFIs. Every packet picks a direction (by `ul_ratio`), a UE and one of
//! its flows at random.

use crate::rng::{RngCore, SeedableRng, SplitMix64, Xoshiro256StarStar};
use peregrine_wire::ethernet::{self, Address as MacAddr};
use serde::{Serialize, Serializer};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

mod build;
mod generator;
pub mod parse;

pub use generator::{
    generate, manifest, manifest_with_summary, write_pcaps, DirCount, GenError, Generator, PerDir,
    Summary,
};

/// Transport flows per UE.
pub const FLOWS_PER_UE: u32 = 4;
/// DN servers per address family (the first addresses of the DN prefixes).
pub const DN_SERVERS: u32 = 16;
/// Default packet rate used to space timestamps.
pub const DEFAULT_RATE_PPS: f64 = 1_000_000.0;
/// Timestamp of the first packet: 2024-01-01T00:00:00Z, in nanoseconds since the Unix epoch.
pub const START_TS_NS: u64 = 1_704_067_200_000_000_000;
/// Shortest frame generated: the Ethernet minimum without FCS.
pub const MIN_FRAME_LEN: usize = 60;
/// EtherType of [`Anomaly::UnknownEthertype`] frames (IEEE 802 local experimental 1).
pub const UNKNOWN_ETHERTYPE: u16 = 0x88b5;
/// TEID of [`Anomaly::UnknownTeid`] G-PDUs; never a session's TEID.
pub const UNKNOWN_TEID: u32 = 0xdead_beef;
/// Destination of [`Anomaly::NoRoute`] packets (TEST-NET-3, routed nowhere).
pub const NO_ROUTE_V4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 99);
/// TTL / hop limit of generated packets.
pub const DEFAULT_TTL: u8 = 64;
/// IMIX cycle: 7 x 64, 4 x 576, 1 x 1500 bytes, interleaved.
pub const IMIX_CYCLE: [u16; 12] = [64, 576, 64, 64, 576, 64, 1500, 64, 576, 64, 576, 64];

const ETH_LEN: usize = ethernet::HEADER_LEN;

// ---------------------------------------------------------------------------------------
// Random numbers

/// One splitmix64 output (Steele, Lea, Flood 2014) from a generator in state `state`,
/// which advances: the numbering the static sessions of `peregrine-rules` share.
pub fn splitmix64(state: &mut u64) -> u64 {
    let mut g = SplitMix64::seed_from_u64(*state);
    let out = g.next_u64();
    // splitmix64's state advances by its fixed increment per output.
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    out
}

/// xoshiro256** 1.0 (Blackman and Vigna), seeded with splitmix64, with the two draws the
/// generator needs. The generator's output is part of its contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng(Xoshiro256StarStar);

impl Rng {
    /// A generator whose state is four splitmix64 outputs from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256StarStar::seed_from_u64(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n`; see [`crate::rng::below`]. `n` must not be 0.
    pub fn below(&mut self, n: u64) -> u64 {
        crate::rng::below(&mut self.0, n)
    }

    /// A number in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        crate::rng::unit_f64(&mut self.0)
    }
}

/// A 64-bit hash of `(seed, domain, x)`, for values derived independently of any stream.
fn hash(seed: u64, domain: u64, x: u64) -> u64 {
    let mut s =
        seed ^ domain.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ x.wrapping_mul(0xa076_1d64_78bd_642f);
    splitmix64(&mut s)
}

/// Hash domains, so that unrelated derivations never share a stream.
mod domain {
    pub const PACKET: u64 = 1;
    pub const FLOW: u64 = 2;
    pub const SESSION: u64 = 3;
    pub const ANOMALY: u64 = 4;
    pub const TEID_UL: u64 = 5;
    pub const TEID_DL: u64 = 6;
}

/// A bijection on 24 bits (odd multiplies and xor-shifts), keyed: scrambles TEIDs while
/// keeping them unique.
fn permute24(x: u32, key: u32) -> u32 {
    const M: u32 = 0x00ff_ffff;
    let mut x = (x ^ key) & M;
    x = x.wrapping_mul(0x9e_3779) & M;
    x ^= x >> 12;
    x = x.wrapping_mul(0x5b_d1e5) & M;
    x ^= x >> 11;
    x
}

// ---------------------------------------------------------------------------------------
// Specification

/// Frame sizes (Ethernet, without FCS) to draw from; see the module docs for clamping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sizes {
    /// These sizes in turn, cycling: packet `i` gets `sizes[i % len]`.
    Fixed(Vec<u16>),
    /// 64, 576 and 1500 bytes in proportion 7:4:1, cycling through [`IMIX_CYCLE`].
    Imix,
}

impl Sizes {
    /// The requested size of packet `index` (before clamping to its header stack).
    pub fn size_for(&self, index: u64) -> u16 {
        match self {
            Sizes::Fixed(v) if v.is_empty() => 0,
            Sizes::Fixed(v) => v[(index % v.len() as u64) as usize],
            Sizes::Imix => IMIX_CYCLE[(index % IMIX_CYCLE.len() as u64) as usize],
        }
    }
}

impl FromStr for Sizes {
    type Err = String;

    /// `imix`, or a comma-separated list of sizes such as `64,512,1400`.
    fn from_str(s: &str) -> Result<Sizes, String> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(Sizes::Imix);
        }
        let v = s
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u16>()
                    .map_err(|e| format!("bad size {p:?}: {e}"))
            })
            .collect::<Result<Vec<u16>, String>>()?;
        Ok(Sizes::Fixed(v))
    }
}

/// Which IP versions to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IpMix {
    V4,
    V6,
    /// Both: inner per flow, outer per session, chosen at random.
    #[default]
    Mixed,
}

impl FromStr for IpMix {
    type Err = String;

    fn from_str(s: &str) -> Result<IpMix, String> {
        match s.to_ascii_lowercase().as_str() {
            "v4" | "ipv4" | "4" => Ok(IpMix::V4),
            "v6" | "ipv6" | "6" => Ok(IpMix::V6),
            "mixed" | "mix" | "both" => Ok(IpMix::Mixed),
            _ => Err(format!("unknown IP mix {s:?} (expected v4, v6 or mixed)")),
        }
    }
}

/// An IPv4 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V4Prefix {
    pub addr: Ipv4Addr,
    pub len: u8,
}

/// An IPv6 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V6Prefix {
    pub addr: Ipv6Addr,
    pub len: u8,
}

impl fmt::Display for V4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl fmt::Display for V6Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

fn ser_display<T: fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

impl Serialize for V4Prefix {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_display(self, s)
    }
}

impl Serialize for V6Prefix {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_display(self, s)
    }
}

/// Addresses of the UPF, its peers, the UEs and the DN. The defaults use documentation
/// prefixes (RFC 5737, RFC 3849) and locally administered MACs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Addressing {
    /// UPF N3 IPv4 address (GTP-U endpoint).
    pub upf_n3_v4: Ipv4Addr,
    /// UPF N3 IPv6 address.
    pub upf_n3_v6: Ipv6Addr,
    /// N3 IPv4 address of gNB 0; gNB `i` has this plus `i`.
    pub gnb_n3_v4: Ipv4Addr,
    /// N3 IPv6 address of gNB 0; gNB `i` has this plus `i`.
    pub gnb_n3_v6: Ipv6Addr,
    /// UE IPv4 pool: UE `i` gets the pool's address plus `i + 1`.
    pub ue_pool_v4: V4Prefix,
    /// UE IPv6 pool: UE `i` gets the `i`-th /64 inside it, interface id `::1`.
    pub ue_pool_v6: V6Prefix,
    /// DN servers (IPv4): server `k` is the prefix's address plus `k + 1`.
    pub dn_v4: V4Prefix,
    /// DN servers (IPv6): server `k` is the prefix's address plus `k + 1`.
    pub dn_v6: V6Prefix,
    /// The UPF's N3 port.
    #[serde(serialize_with = "ser_display")]
    pub upf_n3_mac: MacAddr,
    /// The UPF's N6 port.
    #[serde(serialize_with = "ser_display")]
    pub upf_n6_mac: MacAddr,
    /// The next hop towards the gNBs on N3 (all gNBs sit behind it).
    #[serde(serialize_with = "ser_display")]
    pub gnb_peer_mac: MacAddr,
    /// The N6 router.
    #[serde(serialize_with = "ser_display")]
    pub n6_router_mac: MacAddr,
}

impl Default for Addressing {
    fn default() -> Self {
        Addressing {
            upf_n3_v4: Ipv4Addr::new(192, 0, 2, 1),
            upf_n3_v6: Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1),
            gnb_n3_v4: Ipv4Addr::new(192, 0, 2, 10),
            gnb_n3_v6: Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 0x10),
            ue_pool_v4: V4Prefix {
                addr: Ipv4Addr::new(10, 45, 0, 0),
                len: 16,
            },
            ue_pool_v6: V6Prefix {
                addr: Ipv6Addr::new(0x2001, 0xdb8, 0x45, 0, 0, 0, 0, 0),
                len: 48,
            },
            dn_v4: V4Prefix {
                addr: Ipv4Addr::new(198, 51, 100, 0),
                len: 24,
            },
            dn_v6: V6Prefix {
                addr: Ipv6Addr::new(0x2001, 0xdb8, 6, 0, 0, 0, 0, 0),
                len: 48,
            },
            upf_n3_mac: MacAddr([0x02, 0, 0, 0, 0, 0x03]),
            upf_n6_mac: MacAddr([0x02, 0, 0, 0, 0, 0x06]),
            gnb_peer_mac: MacAddr([0x02, 0, 0, 0, 0x03, 0x01]),
            n6_router_mac: MacAddr([0x02, 0, 0, 0, 0x06, 0x01]),
        }
    }
}

impl Addressing {
    /// N3 IPv4 address of gNB `i`.
    pub fn gnb_v4(&self, i: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.gnb_n3_v4).wrapping_add(i))
    }

    /// N3 IPv6 address of gNB `i`.
    pub fn gnb_v6(&self, i: u32) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.gnb_n3_v6).wrapping_add(i as u128))
    }

    /// IPv4 address of UE `i`.
    pub fn ue_v4(&self, i: u32) -> Ipv4Addr {
        Ipv4Addr::from(
            u32::from(self.ue_pool_v4.addr)
                .wrapping_add(i)
                .wrapping_add(1),
        )
    }

    /// IPv6 address of UE `i`: `::1` in the `i`-th /64 of the pool (added at bit 64, so
    /// distinct for every `i`; [`TrafficSpec::validate`] keeps `i` inside the pool).
    pub fn ue_v6(&self, i: u32) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.ue_pool_v6.addr).wrapping_add((i as u128) << 64) | 1)
    }

    /// IPv4 address of DN server `k`.
    pub fn dn_server_v4(&self, k: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.dn_v4.addr).wrapping_add(k).wrapping_add(1))
    }

    /// IPv6 address of DN server `k`.
    pub fn dn_server_v6(&self, k: u32) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.dn_v6.addr).wrapping_add(k as u128 + 1))
    }

    /// How many UEs the pools can number (the smaller of the two).
    pub fn ue_capacity(&self) -> u64 {
        let v4 = (1u64 << (32 - self.ue_pool_v4.len.min(32) as u32)).saturating_sub(2);
        let v6_bits = 64u32.saturating_sub(self.ue_pool_v6.len as u32).min(32);
        v4.min(1u64 << v6_bits)
    }
}

/// Everything that determines a traffic set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrafficSpec {
    /// Number of UEs, one PDU session each.
    pub ues: u32,
    /// Number of frames generated, anomalies included.
    pub packets: u64,
    pub sizes: Sizes,
    /// Fraction of the (non-anomalous) packets that are uplink, 0 to 1.
    pub ul_ratio: f64,
    /// IP version of the UE traffic (inner on N3, the packet itself on N6).
    pub inner: IpMix,
    /// IP version of the N3 transport (outer header of uplink packets).
    pub outer: IpMix,
    /// QFIs handed out to UEs: UE `i` gets `1 + i % len` of them (see [`Session::qfis`]).
    pub qfis: Vec<u8>,
    pub seed: u64,
    /// UEs are spread over this many gNBs, UE `i` on gNB `i % gnbs`.
    pub gnbs: u32,
    /// How many of the `packets` are [`Anomaly`] frames, the kinds in turn.
    pub anomalies: u32,
    /// Packet rate that spaces the timestamps; `None` means [`DEFAULT_RATE_PPS`].
    pub rate_pps: Option<f64>,
    pub addressing: Addressing,
}

impl Default for TrafficSpec {
    /// The [`Preset::Quickstart`] spec.
    fn default() -> Self {
        Preset::Quickstart.spec()
    }
}

/// Why a [`TrafficSpec`] cannot be generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid traffic spec: {}", self.0)
    }
}

impl std::error::Error for SpecError {}

impl TrafficSpec {
    /// Check the spec; [`generate`] panics on a spec this rejects.
    pub fn validate(&self) -> Result<(), SpecError> {
        let err = |m: String| Err(SpecError(m));
        if self.ues == 0 {
            return err("at least one UE is needed".into());
        }
        if self.addressing.ue_pool_v4.len > 30 || self.addressing.ue_pool_v6.len > 64 {
            return err("UE pools must be at most /30 (IPv4) and /64 (IPv6)".into());
        }
        if self.ues as u64 > self.addressing.ue_capacity() {
            return err(format!(
                "{} UEs do not fit the UE pools ({} addresses)",
                self.ues,
                self.addressing.ue_capacity()
            ));
        }
        if self.gnbs == 0 {
            return err("at least one gNB is needed".into());
        }
        if self.qfis.is_empty() {
            return err("at least one QFI is needed".into());
        }
        if let Some(q) = self.qfis.iter().find(|&&q| q > 63) {
            return err(format!("QFI {q} is above 63"));
        }
        if !(0.0..=1.0).contains(&self.ul_ratio) {
            return err(format!("ul_ratio {} is not within 0..=1", self.ul_ratio));
        }
        if matches!(&self.sizes, Sizes::Fixed(v) if v.is_empty()) {
            return err("at least one frame size is needed".into());
        }
        if let Some(r) = self.rate_pps {
            if !(r.is_finite() && r > 0.0) {
                return err(format!("rate {r} pps is not a positive number"));
            }
        }
        if self.anomalies as u64 > self.packets {
            return err(format!(
                "{} anomalies do not fit in {} packets",
                self.anomalies, self.packets
            ));
        }
        Ok(())
    }

    /// Nanoseconds between consecutive packets.
    pub fn period_ns(&self) -> f64 {
        1e9 / self.rate_pps.unwrap_or(DEFAULT_RATE_PPS)
    }

    /// Timestamp of packet `index`.
    pub fn ts_ns(&self, index: u64) -> u64 {
        START_TS_NS + (index as f64 * self.period_ns()).round() as u64
    }

    /// The PDU sessions, one per UE, in UE order.
    pub fn sessions(&self) -> Vec<Session> {
        let a = &self.addressing;
        let n = self.qfis.len().max(1);
        let key_ul = hash(self.seed, domain::TEID_UL, 0) as u32;
        let key_dl = hash(self.seed, domain::TEID_DL, 0) as u32;
        (0..self.ues)
            .map(|i| {
                let gnb_index = i % self.gnbs.max(1);
                let v6 = match self.outer {
                    IpMix::V4 => false,
                    IpMix::V6 => true,
                    IpMix::Mixed => hash(self.seed, domain::SESSION, i as u64) & 1 == 1,
                };
                let gnb_addr = if v6 {
                    IpAddr::V6(a.gnb_v6(gnb_index))
                } else {
                    IpAddr::V4(a.gnb_v4(gnb_index))
                };
                let first = i as usize % n;
                let qfis: Vec<u8> = (0..1 + first)
                    .map(|j| self.qfis.get((first + j) % n).copied().unwrap_or(0))
                    .collect();
                Session {
                    ue_index: i,
                    ue_ipv4: a.ue_v4(i),
                    ue_ipv6: a.ue_v6(i),
                    gnb_index,
                    gnb_addr,
                    ul_teid: 0x0100_0000 | permute24(i, key_ul),
                    dl_teid: 0x0200_0000 | permute24(i, key_dl),
                    qfi: qfis[0],
                    qfis,
                }
            })
            .collect()
    }
}

/// Named specs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// 64 UEs on 4 gNBs, 10 000 packets (40 of them anomalies), 60 % uplink, mixed IPv4/IPv6
    /// inner and outer, sizes 64/128/512/1400 cycling, QFIs 1, 5, 9, seed 1.
    Quickstart,
}

impl Preset {
    pub const ALL: [Preset; 1] = [Preset::Quickstart];

    pub const fn name(self) -> &'static str {
        match self {
            Preset::Quickstart => "quickstart",
        }
    }

    pub fn spec(self) -> TrafficSpec {
        match self {
            Preset::Quickstart => TrafficSpec {
                ues: 64,
                packets: 10_000,
                sizes: Sizes::Fixed(vec![64, 128, 512, 1400]),
                ul_ratio: 0.6,
                inner: IpMix::Mixed,
                outer: IpMix::Mixed,
                qfis: vec![1, 5, 9],
                seed: 1,
                gnbs: 4,
                anomalies: 40,
                rate_pps: None,
                addressing: Addressing::default(),
            },
        }
    }
}

impl FromStr for Preset {
    type Err = String;

    fn from_str(s: &str) -> Result<Preset, String> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown preset {s:?} (known: quickstart)"))
    }
}

/// A PDU session: one UE, one N3 tunnel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Session {
    pub ue_index: u32,
    pub ue_ipv4: Ipv4Addr,
    pub ue_ipv6: Ipv6Addr,
    /// The gNB serving the UE.
    pub gnb_index: u32,
    /// The gNB's N3 address used for this session's tunnel (its family is the outer one).
    pub gnb_addr: IpAddr,
    /// The UPF's F-TEID: the TEID of uplink G-PDUs. Unique, never [`UNKNOWN_TEID`].
    pub ul_teid: u32,
    /// The gNB's F-TEID, for downlink encapsulation. Unique.
    pub dl_teid: u32,
    /// The default QoS flow: `qfis[0]`.
    pub qfi: u8,
    /// All QoS flows of the session; every packet of the session carries one of these.
    pub qfis: Vec<u8>,
}

// ---------------------------------------------------------------------------------------
// Packets

/// Direction, i.e. the UPF port a frame arrives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Uplink: arrives on N3 from the gNB side.
    Ul,
    /// Downlink: arrives on N6 from the data network.
    Dl,
}

/// A deliberately bad or exception-path frame.
///
/// Kinds marked "UL or DL" alternate: of the anomalies, the `k`-th (in stream order) is of
/// kind `ALL[k % 8]`, in direction UL when `(k / 8)` is even and DL when odd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Anomaly {
    /// UL or DL: the IPv4 header checksum does not verify (UL: the outer header, which is
    /// IPv4 whatever the session's family; DL: the packet's header).
    BadIpv4Checksum,
    /// UL or DL: TTL / hop limit 1, so forwarding must not happen (UL: the inner header;
    /// DL: the packet's header).
    Ttl1,
    /// UL or DL: the frame ends inside the (outer) IP header.
    Truncated,
    /// UL or DL: EtherType [`UNKNOWN_ETHERTYPE`], to the port's own MAC.
    UnknownEthertype,
    /// UL: a broadcast ARP request from the gNB peer for the UPF's N3 IPv4 address.
    ArpRequest,
    /// UL or DL: IPv4 destination [`NO_ROUTE_V4`] (UL: the inner destination of a valid
    /// G-PDU; DL: a packet for no UE).
    NoRoute,
    /// UL: a well-formed G-PDU for TEID [`UNKNOWN_TEID`].
    UnknownTeid,
    /// UL: a valid GTP-U Echo Request to the UPF's N3 address.
    EchoRequest,
}

impl Anomaly {
    pub const ALL: [Anomaly; 8] = [
        Anomaly::BadIpv4Checksum,
        Anomaly::Ttl1,
        Anomaly::Truncated,
        Anomaly::UnknownEthertype,
        Anomaly::ArpRequest,
        Anomaly::NoRoute,
        Anomaly::UnknownTeid,
        Anomaly::EchoRequest,
    ];

    /// Stable snake_case name.
    pub const fn name(self) -> &'static str {
        match self {
            Anomaly::BadIpv4Checksum => "bad_ipv4_checksum",
            Anomaly::Ttl1 => "ttl1",
            Anomaly::Truncated => "truncated",
            Anomaly::UnknownEthertype => "unknown_ethertype",
            Anomaly::ArpRequest => "arp_request",
            Anomaly::NoRoute => "no_route",
            Anomaly::UnknownTeid => "unknown_teid",
            Anomaly::EchoRequest => "echo_request",
        }
    }

    /// Whether the kind comes in both directions (else it is UL only).
    pub const fn both_directions(self) -> bool {
        !matches!(
            self,
            Anomaly::ArpRequest | Anomaly::UnknownTeid | Anomaly::EchoRequest
        )
    }

    /// One-line description of the frame and what a UPF should make of it.
    pub const fn description(self) -> &'static str {
        match self {
            Anomaly::BadIpv4Checksum => "IPv4 header checksum does not verify (UL: outer header)",
            Anomaly::Ttl1 => "TTL/hop limit 1: not forwardable (UL: inner header)",
            Anomaly::Truncated => "frame cut inside the (outer) IP header",
            Anomaly::UnknownEthertype => "EtherType 0x88b5",
            Anomaly::ArpRequest => "broadcast ARP request for the UPF N3 IPv4 address",
            Anomaly::NoRoute => "IPv4 destination 203.0.113.99, routed nowhere (UL: inner)",
            Anomaly::UnknownTeid => "well-formed G-PDU to TEID 0xdeadbeef, no such session",
            Anomaly::EchoRequest => "valid GTP-U Echo Request to the UPF N3 address",
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One generated frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenPacket {
    /// Position in the stream, from 0.
    pub index: u64,
    pub dir: Dir,
    /// Timestamp: [`START_TS_NS`] plus `index` packet periods.
    pub ts_ns: u64,
    /// The Ethernet frame, without FCS.
    pub frame: Vec<u8>,
    /// Index into [`TrafficSpec::sessions`] of the session the frame belongs to. Anomalies
    /// built on a session's traffic keep it, except those claiming no session (an unknown
    /// TEID, a DL packet for no UE); ARP and Echo Request frames have none.
    pub session: Option<usize>,
    /// QoS flow: for UL the QFI in the PDU Session Container; for DL the QFI of the flow the
    /// packet's 5-tuple belongs to. `None` for frames carrying no user packet.
    pub qfi: Option<u8>,
    pub anomaly: Option<Anomaly>,
}

#[cfg(test)]
mod tests;
