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
//! The same spec always yields the same bytes, on any platform and with any version of the
//! `rand` crate: randomness comes from the crate's own [`Rng`] (xoshiro256** seeded by
//! splitmix64). Packet `i` is drawn from a stream seeded by `(seed, i)` alone, and each UE's
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

use peregrine_dataplane::io::pcapfile::{PcapFileError, PcapWriter, Resolution};
use peregrine_wire::ethernet::{self, ethertype, Address as MacAddr};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{arp, gtpu, gtpu_msg, ipv4, ipv6, pdu_session, tcp, udp};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::str::FromStr;

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

/// One step of splitmix64 (Steele, Lea, Flood 2014): advances `state`, returns the output.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// xoshiro256** 1.0 (Blackman and Vigna), seeded with splitmix64.
///
/// Used instead of `rand`'s `SmallRng`, whose algorithm may change between versions: the
/// generator's output is part of its contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose state is four splitmix64 outputs from `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        Rng {
            s: std::array::from_fn(|_| splitmix64(&mut sm)),
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A number in `0..n` (Lemire's multiply-shift; the bias, below `n / 2^64`, is
    /// irrelevant here). `n` must not be 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A number in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
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

    /// IPv6 address of UE `i`: `::1` in the `i`-th /64 of the pool.
    pub fn ue_v6(&self, i: u32) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.ue_pool_v6.addr) | ((i as u128) << 64) | 1)
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

// ---------------------------------------------------------------------------------------
// Flows and frame building

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L4 {
    Udp,
    Tcp,
}

impl L4 {
    const fn header_len(self) -> usize {
        match self {
            L4::Udp => udp::HEADER_LEN,
            L4::Tcp => tcp::HEADER_LEN,
        }
    }

    const fn protocol(self) -> u8 {
        match self {
            L4::Udp => ip_protocol::UDP,
            L4::Tcp => ip_protocol::TCP,
        }
    }
}

/// Server ports and their transport: web over TCP and QUIC, RTP media, SIP, STUN, a game
/// server. (Ports whose payload Wireshark would dissect, such as DNS, are avoided: the
/// payload is a pattern, not a valid message.)
const SERVICES: [(u16, L4); 8] = [
    (443, L4::Tcp),
    (443, L4::Udp),
    (80, L4::Tcp),
    (5004, L4::Udp),
    (5060, L4::Udp),
    (8080, L4::Tcp),
    (3478, L4::Udp),
    (27015, L4::Udp),
];

/// One transport flow of a UE.
#[derive(Debug, Clone, Copy)]
struct Flow {
    v6: bool,
    l4: L4,
    ue_port: u16,
    server_port: u16,
    server: u32,
    qfi: u8,
    flow_label: u32,
    isn: u32,
}

/// An IP packet to write: addresses, TTL and transport.
#[derive(Debug, Clone, Copy)]
struct IpSpec {
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    l4: L4,
    src_port: u16,
    dst_port: u16,
    ident: u16,
    flow_label: u32,
    seq: u32,
    ack: u32,
    /// Written at the start of the payload when there is room.
    tag: u64,
}

const fn ip_header_len(a: IpAddr) -> usize {
    match a {
        IpAddr::V4(_) => ipv4::HEADER_LEN,
        IpAddr::V6(_) => ipv6::HEADER_LEN,
    }
}

const fn ethertype_of(a: IpAddr) -> u16 {
    match a {
        IpAddr::V4(_) => ethertype::IPV4,
        IpAddr::V6(_) => ethertype::IPV6,
    }
}

/// GTP-U header length of a G-PDU with a UL PDU Session Container: 8 + 4 + 4.
const GTPU_UL_HEADER_LEN: usize = gtpu::OPT_HEADER_LEN + 4;

/// A zeroed frame of `len` bytes with its Ethernet header.
fn new_frame(len: usize, dst: MacAddr, src: MacAddr, ethertype: u16) -> Vec<u8> {
    let mut f = vec![0u8; len];
    ethernet::Repr {
        src,
        dst,
        ethertype,
    }
    .emit(&mut f)
    .expect("frames are longer than the Ethernet header");
    f
}

/// Write an IP header (no options, checksum filled) in front of the payload already in
/// `pkt[header..]`; `pkt` is exactly the IP packet.
fn write_ip_header(
    pkt: &mut [u8],
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    ttl: u8,
    ident: u16,
    flow_label: u32,
) {
    let payload_len = pkt.len() - ip_header_len(src);
    let r = match (src, dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => ipv4::Repr {
            src,
            dst,
            protocol,
            payload_len,
            ttl,
            dscp_ecn: 0,
            ident,
            dont_frag: true,
        }
        .emit(pkt),
        (IpAddr::V6(src), IpAddr::V6(dst)) => ipv6::Repr {
            src,
            dst,
            next_header: protocol,
            payload_len,
            hop_limit: ttl,
            traffic_class: 0,
            flow_label: flow_label & ipv6::FLOW_LABEL_MAX,
        }
        .emit(pkt),
        _ => panic!("address families differ: {src} -> {dst}"),
    };
    r.expect("IP header fits and lengths are in range");
}

/// Payload: the tag (big-endian) if it fits, then a counting pattern.
fn fill_payload(p: &mut [u8], tag: u64) {
    let t = tag.to_be_bytes();
    let n = if p.len() >= t.len() { t.len() } else { 0 };
    p[..n].copy_from_slice(&t[..n]);
    for (i, b) in p[n..].iter_mut().enumerate() {
        *b = i as u8;
    }
}

/// Write a whole IP packet (header, transport header, payload, all checksums) filling
/// `pkt`.
fn write_ip_packet(pkt: &mut [u8], s: &IpSpec) {
    let hl = ip_header_len(s.src);
    let seg = &mut pkt[hl..];
    let l4_hl = s.l4.header_len();
    let payload_len = seg.len() - l4_hl;
    match s.l4 {
        L4::Udp => udp::Repr {
            src_port: s.src_port,
            dst_port: s.dst_port,
            payload_len,
        }
        .emit(seg),
        L4::Tcp => tcp::Repr {
            src_port: s.src_port,
            dst_port: s.dst_port,
            seq_number: s.seq,
            ack_number: s.ack,
            flags: tcp::Flags::ACK | tcp::Flags::PSH,
            window_len: 65535,
            urgent_ptr: 0,
            payload_len,
        }
        .emit(seg),
    }
    .expect("transport header fits");
    fill_payload(&mut seg[l4_hl..], s.tag);
    let filled = match s.l4 {
        L4::Udp => udp::Packet::new_unchecked(&mut *seg).fill_checksum(s.src, s.dst),
        L4::Tcp => tcp::Packet::new_unchecked(&mut *seg).fill_checksum(s.src, s.dst),
    };
    filled.expect("same address family");
    write_ip_header(
        pkt,
        s.src,
        s.dst,
        s.l4.protocol(),
        s.ttl,
        s.ident,
        s.flow_label,
    );
}

/// Write UDP and IP headers in front of a UDP payload already in place at
/// `pkt[ip header + 8..]`; `pkt` is exactly the IP packet. The UDP checksum is filled.
fn write_ip_udp(
    pkt: &mut [u8],
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    port: u16,
    ident: u16,
    flow_label: u32,
) {
    let hl = ip_header_len(src);
    let seg = &mut pkt[hl..];
    udp::Repr {
        src_port: port,
        dst_port: port,
        payload_len: seg.len() - udp::HEADER_LEN,
    }
    .emit(seg)
    .expect("UDP header fits");
    udp::Packet::new_unchecked(&mut *seg)
        .fill_checksum(src, dst)
        .expect("same address family");
    write_ip_header(pkt, src, dst, ip_protocol::UDP, ttl, ident, flow_label);
}

/// The pieces of an uplink G-PDU.
#[derive(Debug, Clone, Copy)]
struct Tunnel {
    outer_src: IpAddr,
    outer_dst: IpAddr,
    teid: u32,
    qfi: u8,
}

/// An uplink G-PDU frame of `len` bytes (clamped to its header stack and 60).
fn build_ul(len: usize, a: &Addressing, t: &Tunnel, inner: &IpSpec) -> Vec<u8> {
    let ohl = ip_header_len(t.outer_src);
    let inner_off = ETH_LEN + ohl + udp::HEADER_LEN + GTPU_UL_HEADER_LEN;
    let min = inner_off + ip_header_len(inner.src) + inner.l4.header_len();
    let len = len.max(min).max(MIN_FRAME_LEN);
    let mut f = new_frame(len, a.upf_n3_mac, a.gnb_peer_mac, ethertype_of(t.outer_src));
    write_ip_packet(&mut f[inner_off..], inner);
    let gtp_off = ETH_LEN + ohl + udp::HEADER_LEN;
    gtpu::Repr {
        msg_type: gtpu::msg_type::G_PDU,
        teid: t.teid,
        seq: None,
        npdu: None,
        ext: Some(pdu_session::Repr::Ul { qfi: t.qfi }),
        payload_len: len - inner_off,
    }
    .emit(&mut f[gtp_off..])
    .expect("GTP-U header fits");
    write_ip_udp(
        &mut f[ETH_LEN..],
        t.outer_src,
        t.outer_dst,
        DEFAULT_TTL,
        gtpu::PORT,
        inner.ident,
        inner.flow_label,
    );
    f
}

/// A downlink frame of `len` bytes (clamped to its header stack and 60).
fn build_dl(len: usize, a: &Addressing, p: &IpSpec) -> Vec<u8> {
    let min = ETH_LEN + ip_header_len(p.src) + p.l4.header_len();
    let len = len.max(min).max(MIN_FRAME_LEN);
    let mut f = new_frame(len, a.upf_n6_mac, a.n6_router_mac, ethertype_of(p.src));
    write_ip_packet(&mut f[ETH_LEN..], p);
    f
}

/// A GTP-U Echo Request from `src` to the UPF, padded to 60 bytes.
fn build_echo(a: &Addressing, src: IpAddr, dst: IpAddr, seq: u16) -> Vec<u8> {
    let msg = gtpu_msg::Repr::EchoRequest { seq };
    let ip_len = ip_header_len(src) + udp::HEADER_LEN + msg.buffer_len();
    let len = (ETH_LEN + ip_len).max(MIN_FRAME_LEN);
    let mut f = new_frame(len, a.upf_n3_mac, a.gnb_peer_mac, ethertype_of(src));
    let pkt = &mut f[ETH_LEN..ETH_LEN + ip_len];
    msg.emit(&mut pkt[ip_header_len(src) + udp::HEADER_LEN..])
        .expect("echo fits");
    write_ip_udp(pkt, src, dst, DEFAULT_TTL, gtpu::PORT, seq, 0);
    f
}

/// A broadcast ARP request from gNB `gnb` for the UPF's N3 IPv4 address.
fn build_arp(a: &Addressing, gnb: u32) -> Vec<u8> {
    let mut f = new_frame(
        MIN_FRAME_LEN,
        MacAddr::BROADCAST,
        a.gnb_peer_mac,
        ethertype::ARP,
    );
    arp::Repr {
        operation: arp::Operation::Request,
        sender_hardware_addr: a.gnb_peer_mac,
        sender_protocol_addr: a.gnb_v4(gnb),
        target_hardware_addr: MacAddr([0; 6]),
        target_protocol_addr: a.upf_n3_v4,
    }
    .emit(&mut f[ETH_LEN..])
    .expect("ARP fits");
    f
}

// ---------------------------------------------------------------------------------------
// The generator

/// Iterator over the frames of a spec; see [`generate`].
#[derive(Debug, Clone)]
pub struct Generator {
    spec: TrafficSpec,
    sessions: Vec<Session>,
    /// Stream positions of the anomalies, ascending.
    anomaly_at: Vec<u64>,
    /// Anomalies emitted so far (index into `anomaly_at`).
    next_anomaly: usize,
    index: u64,
}

/// Generate the frames of `spec`, in timestamp order.
///
/// # Panics
///
/// If the spec does not pass [`TrafficSpec::validate`].
pub fn generate(spec: &TrafficSpec) -> Generator {
    if let Err(e) = spec.validate() {
        panic!("{e}");
    }
    Generator {
        sessions: spec.sessions(),
        anomaly_at: anomaly_positions(spec),
        next_anomaly: 0,
        index: 0,
        spec: spec.clone(),
    }
}

/// Choose `anomalies` distinct positions in `0..packets` (Floyd's algorithm), sorted.
fn anomaly_positions(spec: &TrafficSpec) -> Vec<u64> {
    let (m, n) = (spec.anomalies as u64, spec.packets);
    let mut rng = Rng::new(hash(spec.seed, domain::ANOMALY, 0));
    let mut set = std::collections::BTreeSet::new();
    for j in n - m..n {
        let t = rng.below(j + 1);
        if !set.insert(t) {
            set.insert(j);
        }
    }
    set.into_iter().collect()
}

impl Generator {
    /// The sessions the frames belong to ([`GenPacket::session`] indexes this).
    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    /// The spec being generated.
    pub fn spec(&self) -> &TrafficSpec {
        &self.spec
    }

    fn flow(&self, s: &Session, f: u32) -> Flow {
        let h = hash(
            self.spec.seed,
            domain::FLOW,
            ((s.ue_index as u64) << 8) | f as u64,
        );
        let v6 = match self.spec.inner {
            IpMix::V4 => false,
            IpMix::V6 => true,
            IpMix::Mixed => h & 1 == 1,
        };
        let (server_port, l4) = SERVICES[((h >> 1) % SERVICES.len() as u64) as usize];
        Flow {
            v6,
            l4,
            ue_port: 32768 + ((h >> 8) % 28232) as u16,
            server_port,
            server: ((h >> 24) % DN_SERVERS as u64) as u32,
            qfi: s.qfis[f as usize % s.qfis.len()],
            flow_label: (h >> 32) as u32 & ipv6::FLOW_LABEL_MAX,
            isn: (h >> 40) as u32,
        }
    }

    /// The IP packet of flow `fl` of session `s` in direction `dir`.
    fn ip_spec(&self, s: &Session, fl: &Flow, dir: Dir, rng: &mut Rng) -> IpSpec {
        let a = &self.spec.addressing;
        let (ue, server) = if fl.v6 {
            (IpAddr::V6(s.ue_ipv6), IpAddr::V6(a.dn_server_v6(fl.server)))
        } else {
            (IpAddr::V4(s.ue_ipv4), IpAddr::V4(a.dn_server_v4(fl.server)))
        };
        let ((src, sp), (dst, dp)) = match dir {
            Dir::Ul => ((ue, fl.ue_port), (server, fl.server_port)),
            Dir::Dl => ((server, fl.server_port), (ue, fl.ue_port)),
        };
        let index = self.index;
        IpSpec {
            src,
            dst,
            ttl: DEFAULT_TTL,
            l4: fl.l4,
            src_port: sp,
            dst_port: dp,
            ident: index as u16,
            flow_label: fl.flow_label,
            seq: fl.isn.wrapping_add((index as u32).wrapping_mul(1000)),
            ack: rng.next_u64() as u32,
            tag: index,
        }
    }

    fn tunnel(&self, s: &Session, qfi: u8) -> Tunnel {
        let a = &self.spec.addressing;
        Tunnel {
            outer_src: s.gnb_addr,
            outer_dst: match s.gnb_addr {
                IpAddr::V4(_) => IpAddr::V4(a.upf_n3_v4),
                IpAddr::V6(_) => IpAddr::V6(a.upf_n3_v6),
            },
            teid: s.ul_teid,
            qfi,
        }
    }

    fn make(&self, anomaly: Option<(Anomaly, Dir)>) -> GenPacket {
        let spec = &self.spec;
        let a = &spec.addressing;
        let index = self.index;
        let mut rng = Rng::new(hash(spec.seed, domain::PACKET, index));
        let ul = rng.next_f64() < spec.ul_ratio;
        let si = rng.below(spec.ues as u64) as usize;
        let fi = rng.below(FLOWS_PER_UE as u64) as u32;
        let s = &self.sessions[si];
        let mut fl = self.flow(s, fi);
        let size = spec.sizes.size_for(index) as usize;
        let mut pkt = GenPacket {
            index,
            dir: if ul { Dir::Ul } else { Dir::Dl },
            ts_ns: spec.ts_ns(index),
            frame: Vec::new(),
            session: Some(si),
            qfi: Some(fl.qfi),
            anomaly: anomaly.map(|(k, _)| k),
        };
        let Some((kind, dir)) = anomaly else {
            let ip = self.ip_spec(s, &fl, pkt.dir, &mut rng);
            pkt.frame = match pkt.dir {
                Dir::Ul => build_ul(size, a, &self.tunnel(s, fl.qfi), &ip),
                Dir::Dl => build_dl(size, a, &ip),
            };
            return pkt;
        };
        pkt.dir = dir;
        if matches!(kind, Anomaly::BadIpv4Checksum | Anomaly::NoRoute) {
            fl.v6 = false;
        }
        let mut ip = self.ip_spec(s, &fl, dir, &mut rng);
        let mut tunnel = self.tunnel(s, fl.qfi);
        let mut frame = match kind {
            Anomaly::BadIpv4Checksum if dir == Dir::Ul => {
                tunnel.outer_src = IpAddr::V4(a.gnb_v4(s.gnb_index));
                tunnel.outer_dst = IpAddr::V4(a.upf_n3_v4);
                build_ul(size, a, &tunnel, &ip)
            }
            Anomaly::Ttl1 => {
                ip.ttl = 1;
                match dir {
                    Dir::Ul => build_ul(size, a, &tunnel, &ip),
                    Dir::Dl => build_dl(size, a, &ip),
                }
            }
            Anomaly::NoRoute => {
                ip.dst = IpAddr::V4(NO_ROUTE_V4);
                match dir {
                    Dir::Ul => build_ul(size, a, &tunnel, &ip),
                    Dir::Dl => {
                        pkt.session = None;
                        pkt.qfi = None;
                        build_dl(size, a, &ip)
                    }
                }
            }
            Anomaly::UnknownTeid => {
                tunnel.teid = UNKNOWN_TEID;
                pkt.session = None;
                build_ul(size, a, &tunnel, &ip)
            }
            Anomaly::EchoRequest => {
                (pkt.session, pkt.qfi) = (None, None);
                build_echo(a, tunnel.outer_src, tunnel.outer_dst, index as u16)
            }
            Anomaly::ArpRequest => {
                (pkt.session, pkt.qfi) = (None, None);
                build_arp(a, s.gnb_index)
            }
            Anomaly::BadIpv4Checksum | Anomaly::Truncated | Anomaly::UnknownEthertype => {
                match dir {
                    Dir::Ul => build_ul(size, a, &tunnel, &ip),
                    Dir::Dl => build_dl(size, a, &ip),
                }
            }
        };
        match kind {
            Anomaly::BadIpv4Checksum => {
                // Flip low-order bits: never turns the field into the other one's-complement
                // zero, so the header cannot verify.
                frame[ETH_LEN + 11] ^= 0xff;
            }
            Anomaly::Truncated => {
                let hl = match dir {
                    Dir::Ul => ip_header_len(tunnel.outer_src),
                    Dir::Dl => ip_header_len(ip.src),
                };
                frame.truncate(ETH_LEN + hl / 2);
            }
            Anomaly::UnknownEthertype => {
                ethernet::Frame::new_unchecked(&mut frame[..]).set_ethertype(UNKNOWN_ETHERTYPE);
            }
            _ => {}
        }
        pkt.frame = frame;
        pkt
    }
}

impl Iterator for Generator {
    type Item = GenPacket;

    fn next(&mut self) -> Option<GenPacket> {
        if self.index >= self.spec.packets {
            return None;
        }
        let anomaly = if self.anomaly_at.get(self.next_anomaly) == Some(&self.index) {
            let k = self.next_anomaly;
            self.next_anomaly += 1;
            let kind = Anomaly::ALL[k % Anomaly::ALL.len()];
            let dir = if kind.both_directions() && (k / Anomaly::ALL.len()) % 2 == 1 {
                Dir::Dl
            } else {
                Dir::Ul
            };
            Some((kind, dir))
        } else {
            None
        };
        let p = self.make(anomaly);
        self.index += 1;
        Some(p)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.spec.packets - self.index).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Generator {}

// ---------------------------------------------------------------------------------------
// Output

/// Packets and bytes of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DirCount {
    pub packets: u64,
    pub bytes: u64,
    /// Of `packets`, how many are anomalies.
    pub anomalies: u64,
}

/// Per-direction count of one anomaly kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PerDir {
    pub ul: u64,
    pub dl: u64,
}

/// Counts over a generated stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub packets: u64,
    pub ul: DirCount,
    pub dl: DirCount,
    /// By [`Anomaly::name`].
    pub anomalies: BTreeMap<&'static str, PerDir>,
}

impl Summary {
    /// Count one packet.
    pub fn add(&mut self, p: &GenPacket) {
        self.packets += 1;
        let c = match p.dir {
            Dir::Ul => &mut self.ul,
            Dir::Dl => &mut self.dl,
        };
        c.packets += 1;
        c.bytes += p.frame.len() as u64;
        if let Some(k) = p.anomaly {
            c.anomalies += 1;
            let e = self.anomalies.entry(k.name()).or_default();
            match p.dir {
                Dir::Ul => e.ul += 1,
                Dir::Dl => e.dl += 1,
            }
        }
    }

    /// Generate `spec` and count it.
    ///
    /// # Panics
    ///
    /// As [`generate`].
    pub fn of(spec: &TrafficSpec) -> Summary {
        let mut s = Summary::default();
        generate(spec).for_each(|p| s.add(&p));
        s
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} packets: {} UL ({} bytes), {} DL ({} bytes), {} anomalies",
            self.packets,
            self.ul.packets,
            self.ul.bytes,
            self.dl.packets,
            self.dl.bytes,
            self.ul.anomalies + self.dl.anomalies
        )
    }
}

/// Why writing the capture files failed.
#[derive(Debug)]
pub enum GenError {
    Spec(SpecError),
    Pcap(PcapFileError),
}

impl fmt::Display for GenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenError::Spec(e) => e.fmt(f),
            GenError::Pcap(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for GenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GenError::Spec(e) => Some(e),
            GenError::Pcap(e) => Some(e),
        }
    }
}

impl From<SpecError> for GenError {
    fn from(e: SpecError) -> Self {
        GenError::Spec(e)
    }
}

impl From<PcapFileError> for GenError {
    fn from(e: PcapFileError) -> Self {
        GenError::Pcap(e)
    }
}

/// Write the uplink frames to `ul_path` and the downlink frames to `dl_path`, as classic
/// pcap with nanosecond timestamps. Returns the counts.
pub fn write_pcaps(
    spec: &TrafficSpec,
    ul_path: impl AsRef<Path>,
    dl_path: impl AsRef<Path>,
) -> Result<Summary, GenError> {
    spec.validate()?;
    let mut ul = PcapWriter::create(ul_path, Resolution::Nano)?;
    let mut dl = PcapWriter::create(dl_path, Resolution::Nano)?;
    let mut summary = Summary::default();
    for p in generate(spec) {
        match p.dir {
            Dir::Ul => ul.write(p.ts_ns, &p.frame)?,
            Dir::Dl => dl.write(p.ts_ns, &p.frame)?,
        }
        summary.add(&p);
    }
    ul.flush()?;
    dl.flush()?;
    Ok(summary)
}

/// A JSON description of the traffic: the spec, every session, the anomaly kinds and the
/// counts per direction and anomaly. Generates the stream once to count it.
///
/// # Panics
///
/// As [`generate`].
pub fn manifest(spec: &TrafficSpec) -> serde_json::Value {
    manifest_with_summary(spec, &Summary::of(spec))
}

/// [`manifest`] with counts already at hand (from [`write_pcaps`]).
pub fn manifest_with_summary(spec: &TrafficSpec, summary: &Summary) -> serde_json::Value {
    let kinds: serde_json::Map<String, serde_json::Value> = Anomaly::ALL
        .iter()
        .map(|k| (k.name().to_owned(), k.description().into()))
        .collect();
    serde_json::json!({
        "format": "peregrine-traffic-manifest",
        "version": 1,
        "start_ts_ns": START_TS_NS,
        "period_ns": spec.period_ns(),
        "spec": spec,
        "sessions": spec.sessions(),
        "anomaly_kinds": kinds,
        "counts": summary,
    })
}

// ---------------------------------------------------------------------------------------
// Parsing back

/// Full-stack parsers for the frames the generator makes, verifying every checksum on the
/// way: what the tests, the benchmarks and UPF tests check generated traffic with.
pub mod parse {
    use peregrine_wire::ethernet::ethertype;
    use peregrine_wire::ipv4::ip_protocol;
    use peregrine_wire::{gtpu, ipv4, ipv6, ipv6ext, pdu_session, tcp, udp, vlan, Error};
    use std::fmt;
    use std::net::IpAddr;

    /// The header a parse failed in.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Layer {
        Ethernet,
        /// The N3 transport IP header (or the only IP header, for [`dl_frame`]).
        OuterIp,
        OuterUdp,
        Gtpu,
        /// The user packet's IP header.
        InnerIp,
        /// The user packet's transport header.
        InnerL4,
    }

    /// A parse failure: where, and why ([`Error::Checksum`] for a checksum that does not
    /// verify, [`Error::Unsupported`] for a header of a kind the parser does not follow).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ParseError {
        pub layer: Layer,
        pub error: Error,
    }

    impl fmt::Display for ParseError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{:?}: {}", self.layer, self.error)
        }
    }

    impl std::error::Error for ParseError {}

    fn at(layer: Layer) -> impl Fn(Error) -> ParseError {
        move |error| ParseError { layer, error }
    }

    /// An IP header, extension headers walked.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct IpInfo {
        pub src: IpAddr,
        pub dst: IpAddr,
        /// TTL or hop limit.
        pub ttl: u8,
        /// The upper-layer protocol (after any IPv6 extension headers).
        pub protocol: u8,
        /// Header length, IPv6 extension headers included.
        pub header_len: usize,
        /// Total Length, or 40 + Payload Length.
        pub total_len: usize,
    }

    /// A UDP or TCP header.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct L4Info {
        pub protocol: u8,
        pub src_port: u16,
        pub dst_port: u16,
        pub payload_len: usize,
    }

    /// An IP packet carrying UDP or TCP.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct IpPacketInfo {
        pub ip: IpInfo,
        pub l4: L4Info,
    }

    /// An uplink G-PDU.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct UlInfo {
        pub outer: IpInfo,
        pub teid: u32,
        pub pdu_session: Option<pdu_session::Repr>,
        pub inner: IpPacketInfo,
    }

    /// Parse an IPv4 (checksum verified, fragments `Unsupported`) or IPv6 header (extension
    /// headers walked); returns it and the upper-layer bytes.
    pub fn ip(bytes: &[u8], layer: Layer) -> Result<(IpInfo, &[u8]), ParseError> {
        let e = at(layer);
        match bytes.first().map(|b| b >> 4) {
            Some(4) => {
                let p = ipv4::Packet::new_checked(bytes).map_err(&e)?;
                let r = ipv4::Repr::parse(&p).map_err(&e)?;
                let info = IpInfo {
                    src: r.src.into(),
                    dst: r.dst.into(),
                    ttl: r.ttl,
                    protocol: r.protocol,
                    header_len: p.header_len(),
                    total_len: p.total_len() as usize,
                };
                // Bounds checked by `new_checked`; sliced from `bytes` to keep its lifetime.
                Ok((info, &bytes[info.header_len..info.total_len]))
            }
            Some(6) => {
                let p = ipv6::Packet::new_checked(bytes).map_err(&e)?;
                let payload = &bytes[ipv6::HEADER_LEN..p.total_len()];
                let mut w = ipv6ext::walk(p.next_header(), payload);
                for h in &mut w {
                    h.map_err(&e)?;
                }
                if w.later_fragment() {
                    return Err(e(Error::Unsupported));
                }
                let (protocol, off) = w.upper().ok_or(e(Error::Malformed))?;
                let info = IpInfo {
                    src: p.src_addr().into(),
                    dst: p.dst_addr().into(),
                    ttl: p.hop_limit(),
                    protocol,
                    header_len: ipv6::HEADER_LEN + off,
                    total_len: p.total_len(),
                };
                Ok((info, payload.get(off..).unwrap_or(&[])))
            }
            Some(_) => Err(e(Error::Malformed)),
            None => Err(e(Error::Truncated)),
        }
    }

    /// Parse a UDP or TCP header over `seg` (the IP payload) and verify its checksum.
    pub fn l4(ip: &IpInfo, seg: &[u8], layer: Layer) -> Result<L4Info, ParseError> {
        let e = at(layer);
        match ip.protocol {
            ip_protocol::UDP => {
                let p = udp::Packet::new_checked(seg).map_err(&e)?;
                if !p.verify_checksum(ip.src, ip.dst) {
                    return Err(e(Error::Checksum));
                }
                Ok(L4Info {
                    protocol: ip.protocol,
                    src_port: p.src_port(),
                    dst_port: p.dst_port(),
                    payload_len: p.payload().len(),
                })
            }
            ip_protocol::TCP => {
                let p = tcp::Packet::new_checked(seg).map_err(&e)?;
                if !p.verify_checksum(ip.src, ip.dst) {
                    return Err(e(Error::Checksum));
                }
                Ok(L4Info {
                    protocol: ip.protocol,
                    src_port: p.src_port(),
                    dst_port: p.dst_port(),
                    payload_len: p.payload().len(),
                })
            }
            _ => Err(e(Error::Unsupported)),
        }
    }

    /// Parse a user IP packet (IP, then UDP or TCP), reporting failures at `ip_layer` and
    /// `l4_layer`.
    pub fn ip_packet(
        bytes: &[u8],
        ip_layer: Layer,
        l4_layer: Layer,
    ) -> Result<IpPacketInfo, ParseError> {
        let (ip, seg) = ip(bytes, ip_layer)?;
        let l4 = l4(&ip, seg, l4_layer)?;
        Ok(IpPacketInfo { ip, l4 })
    }

    /// The IP packet of an Ethernet frame (802.1Q tags skipped); `Unsupported` at the
    /// Ethernet layer for other EtherTypes.
    pub fn l3(frame: &[u8]) -> Result<&[u8], ParseError> {
        let e = at(Layer::Ethernet);
        let (off, ty) = vlan::l3_offset(frame).map_err(&e)?;
        match ty {
            ethertype::IPV4 | ethertype::IPV6 => Ok(&frame[off..]),
            _ => Err(e(Error::Unsupported)),
        }
    }

    /// A downlink frame: Ethernet / IP / UDP or TCP.
    pub fn dl_frame(frame: &[u8]) -> Result<IpPacketInfo, ParseError> {
        ip_packet(l3(frame)?, Layer::OuterIp, Layer::InnerL4)
    }

    /// An N3 frame up to its GTP-U header: Ethernet / IP / UDP to port 2152 (checksum
    /// verified) / GTP-U (validated, extension chain walked).
    pub fn n3_gtpu(frame: &[u8]) -> Result<(IpInfo, gtpu::Header<&[u8]>), ParseError> {
        let (outer, seg) = ip(l3(frame)?, Layer::OuterIp)?;
        let e = at(Layer::OuterUdp);
        if outer.protocol != ip_protocol::UDP {
            return Err(e(Error::Unsupported));
        }
        let u = udp::Packet::new_checked(seg).map_err(&e)?;
        if u.dst_port() != gtpu::PORT {
            return Err(e(Error::Unsupported));
        }
        if !u.verify_checksum(outer.src, outer.dst) {
            return Err(e(Error::Checksum));
        }
        let h = gtpu::Header::new_checked(&seg[udp::HEADER_LEN..u.length() as usize])
            .map_err(at(Layer::Gtpu))?;
        Ok((outer, h))
    }

    /// An uplink G-PDU frame, down to the user packet's transport header.
    pub fn ul_frame(frame: &[u8]) -> Result<UlInfo, ParseError> {
        let (outer, h) = n3_gtpu(frame)?;
        let e = at(Layer::Gtpu);
        if h.msg_type() != gtpu::msg_type::G_PDU {
            return Err(e(Error::Unsupported));
        }
        let pdu_session = h.pdu_session().map_err(&e)?;
        let inner = ip_packet(h.payload(), Layer::InnerIp, Layer::InnerL4)?;
        Ok(UlInfo {
            outer,
            teid: h.teid(),
            pdu_session,
            inner,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values computed with an independent implementation of splitmix64 and
    /// xoshiro256** (state seeded by four splitmix64 outputs from 0).
    #[test]
    fn prng_reference_values() {
        let mut s = 0;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0x99ec_5f36_cb75_f2b4);
        assert_eq!(r.next_u64(), 0xbf6e_1f78_4956_452a);
        assert_eq!(r.next_u64(), 0x1a5f_849d_4933_e6e0);
    }

    #[test]
    fn below_and_f64_in_range() {
        let mut r = Rng::new(7);
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            for _ in 0..100 {
                assert!(r.below(n) < n);
            }
        }
        for _ in 0..1000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }

    #[test]
    fn permute24_is_a_bijection_on_small_ranges() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..70_000 {
            let v = permute24(i, 0x1234_5678);
            assert!(v <= 0x00ff_ffff);
            assert!(seen.insert(v), "collision at {i}");
        }
    }

    #[test]
    fn imix_proportions() {
        let count = |s| IMIX_CYCLE.iter().filter(|&&x| x == s).count();
        assert_eq!((count(64), count(576), count(1500)), (7, 4, 1));
        assert_eq!(Sizes::Imix.size_for(6), 1500);
        assert_eq!(Sizes::Fixed(vec![1, 2, 3]).size_for(4), 2);
    }

    #[test]
    fn parse_cli_values() {
        assert_eq!("imix".parse::<Sizes>(), Ok(Sizes::Imix));
        assert_eq!("64, 512".parse::<Sizes>(), Ok(Sizes::Fixed(vec![64, 512])));
        assert!("64,x".parse::<Sizes>().is_err());
        assert_eq!("V6".parse::<IpMix>(), Ok(IpMix::V6));
        assert!("v5".parse::<IpMix>().is_err());
        assert_eq!("quickstart".parse::<Preset>(), Ok(Preset::Quickstart));
    }

    #[test]
    fn default_addresses() {
        let a = Addressing::default();
        assert_eq!(a.gnb_v4(2), Ipv4Addr::new(192, 0, 2, 12));
        assert_eq!(a.gnb_v6(1), "2001:db8:3::11".parse::<Ipv6Addr>().unwrap());
        assert_eq!(a.ue_v4(0), Ipv4Addr::new(10, 45, 0, 1));
        assert_eq!(a.ue_v4(300), Ipv4Addr::new(10, 45, 1, 45));
        assert_eq!(
            a.ue_v6(0x1234),
            "2001:db8:45:1234::1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(a.dn_server_v4(0), Ipv4Addr::new(198, 51, 100, 1));
        assert_eq!(
            a.dn_server_v6(1),
            "2001:db8:6::2".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(a.ue_capacity(), 65534);
    }

    #[test]
    fn sessions_have_unique_teids_and_spread_qfis() {
        let spec = TrafficSpec {
            ues: 5000,
            gnbs: 7,
            ..TrafficSpec::default()
        };
        let ss = spec.sessions();
        let ul: std::collections::HashSet<u32> = ss.iter().map(|s| s.ul_teid).collect();
        let dl: std::collections::HashSet<u32> = ss.iter().map(|s| s.dl_teid).collect();
        assert_eq!((ul.len(), dl.len()), (5000, 5000));
        assert!(!ul.contains(&UNKNOWN_TEID) && !ul.contains(&0));
        assert!(ss.iter().all(|s| s.gnb_index == s.ue_index % 7));
        assert!(ss.iter().all(|s| s.qfis.first() == Some(&s.qfi)));
        assert_eq!(ss[2].qfis, vec![9, 1, 5]);
        assert!(ss.iter().any(|s| s.gnb_addr.is_ipv4()) && ss.iter().any(|s| s.gnb_addr.is_ipv6()));
    }

    #[test]
    fn validate_rejects_bad_specs() {
        let ok = TrafficSpec::default();
        assert!(ok.validate().is_ok());
        let breakers: [fn(&mut TrafficSpec); 10] = [
            |s| s.ues = 0,
            |s| s.ues = 70_000,
            |s| s.gnbs = 0,
            |s| s.qfis.clear(),
            |s| s.qfis = vec![64],
            |s| s.ul_ratio = 1.5,
            |s| s.ul_ratio = f64::NAN,
            |s| s.sizes = Sizes::Fixed(vec![]),
            |s| s.rate_pps = Some(0.0),
            |s| (s.anomalies, s.packets) = (11, 10),
        ];
        for (i, brk) in breakers.iter().enumerate() {
            let mut b = ok.clone();
            brk(&mut b);
            assert!(b.validate().is_err(), "case {i}: {b:?}");
        }
    }

    #[test]
    fn anomaly_positions_are_distinct_and_in_range() {
        let spec = TrafficSpec {
            packets: 100,
            anomalies: 100,
            ..TrafficSpec::default()
        };
        assert_eq!(anomaly_positions(&spec), (0..100).collect::<Vec<u64>>());
        let spec = TrafficSpec {
            packets: 1000,
            anomalies: 37,
            ..TrafficSpec::default()
        };
        let p = anomaly_positions(&spec);
        assert_eq!(p.len(), 37);
        assert!(p.windows(2).all(|w| w[0] < w[1]) && p[36] < 1000);
    }

    #[test]
    fn timestamps_follow_the_rate() {
        let spec = TrafficSpec {
            rate_pps: Some(250_000.0),
            ..TrafficSpec::default()
        };
        assert_eq!(spec.ts_ns(0), START_TS_NS);
        assert_eq!(spec.ts_ns(3), START_TS_NS + 12_000);
        assert_eq!(TrafficSpec::default().ts_ns(5), START_TS_NS + 5_000);
    }
}
