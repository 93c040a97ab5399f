//! Sessions configured in the daemon's config file, so the UPF forwards without an SMF, and
//! synthetic ones numbered exactly like `pg-gen`'s traffic (perf/src/traffic.rs).
//!
//! Each becomes a plain [`peregrine_n4::Session`] shaped like an SMF's default PDU session
//! (TS 29.244 section 5.2, the rules Open5GS and free5GC install):
//! * PDR 1 (uplink): source ACCESS, F-TEID `ul_teid` on our N3 address of the gNB's family,
//!   UE IP, the SDF filters, Outer Header Removal 0 (IPv4 gNB) or 1 (IPv6 gNB), FAR 1, QER 1,
//!   URR 1. It has no PDI QFI, so every QoS flow of the UE matches.
//! * PDR 2 (downlink): source CORE, UE IP (destination), the SDF filters, FAR 2, QER 1, URR 1.
//! * FAR 1: FORW to CORE. FAR 2: FORW to ACCESS with Outer Header Creation GTP-U/UDP/IP to
//!   `gnb` / `dl_teid`.
//! * QER 1: gates open, MBR / GBR when configured, QFI `qfi` (marked on downlink).
//! * URR 1: volume measurement, no triggers (counted, read on demand).
//!
//! ```toml
//! [[session]]
//! seid = 1
//! ue_ipv4 = "10.45.0.2"
//! ue_ipv6 = "2001:db8:45::1"      # its /64 is the UE prefix
//! ul_teid = 0x01000001            # our F-TEID
//! gnb = "192.0.2.10"
//! dl_teid = 0x02000001            # the gNB's F-TEID
//! qfi = 9
//! mbr_ul_kbps = 100000            # optional, with mbr_dl_kbps
//! mbr_dl_kbps = 200000
//! sdf = ["permit out ip from any to assigned"]   # optional
//! ```

use crate::sdf::FlowDescription;
use peregrine_n4::{Far, ForwardingParameters, LocalFTeid, Pdi, Pdr, Qer, Session, Urr};
use peregrine_pfcp::ie::{
    apply_action, measurement_method, ohc, BitRate, Bitmap, FSeid, GateStatus, OuterHeaderCreation,
    OuterHeaderRemoval, SdfFilter, UeIpAddress,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One statically configured PDU session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticSession {
    /// Our SEID (non-zero, unique).
    pub seid: u64,
    pub ue_ipv4: Option<Ipv4Addr>,
    /// A UE address; the session owns its /64.
    pub ue_ipv6: Option<Ipv6Addr>,
    /// Local TEID of uplink G-PDUs (non-zero, unique).
    pub ul_teid: u32,
    /// The gNB's N3 address (its family selects the outer IP version).
    pub gnb: IpAddr,
    /// The gNB's TEID for downlink G-PDUs (non-zero).
    pub dl_teid: u32,
    /// QoS flow marked on downlink, 0-63.
    pub qfi: u8,
    pub mbr_ul_kbps: Option<u64>,
    pub mbr_dl_kbps: Option<u64>,
    pub gbr_ul_kbps: Option<u64>,
    pub gbr_dl_kbps: Option<u64>,
    /// SDF filter flow descriptions, applied to both PDRs.
    #[serde(default)]
    pub sdf: Vec<String>,
}

/// The `[[session]]` tables of a config file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticSessions {
    #[serde(default)]
    pub session: Vec<StaticSession>,
}

/// Our N3 addresses, for the uplink F-TEIDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct N3Addresses {
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
}

fn pair(ul: Option<u64>, dl: Option<u64>, what: &str, i: usize) -> Result<Option<BitRate>, String> {
    match (ul, dl) {
        (None, None) => Ok(None),
        (Some(ul), Some(dl)) => Ok(Some(BitRate { ul, dl })),
        _ => Err(format!(
            "session[{i}].{what}_ul_kbps and .{what}_dl_kbps must be given together"
        )),
    }
}

/// Build n4 sessions from the config. Errors name the offending field, e.g.
/// `session[2].ul_teid: 7 is used by session[0]`.
pub fn to_sessions(cfg: &[StaticSession], n3: N3Addresses) -> Result<Vec<Session>, String> {
    let mut seids = BTreeMap::new();
    let mut teids = BTreeMap::new();
    let mut out = Vec::with_capacity(cfg.len());
    for (i, c) in cfg.iter().enumerate() {
        let field = |f: &str, m: String| format!("session[{i}].{f}: {m}");
        if c.seid == 0 {
            return Err(field("seid", "must not be 0".into()));
        }
        if let Some(j) = seids.insert(c.seid, i) {
            return Err(field("seid", format!("{} is used by session[{j}]", c.seid)));
        }
        if c.ul_teid == 0 {
            return Err(field("ul_teid", "must not be 0".into()));
        }
        if let Some(j) = teids.insert(c.ul_teid, i) {
            return Err(field(
                "ul_teid",
                format!("{} is used by session[{j}]", c.ul_teid),
            ));
        }
        if c.dl_teid == 0 {
            return Err(field("dl_teid", "must not be 0".into()));
        }
        if c.ue_ipv4.is_none() && c.ue_ipv6.is_none() {
            return Err(format!("session[{i}]: needs ue_ipv4 or ue_ipv6"));
        }
        if c.qfi > 63 {
            return Err(field("qfi", format!("{} is above 63", c.qfi)));
        }
        let mbr = pair(c.mbr_ul_kbps, c.mbr_dl_kbps, "mbr", i)?;
        let gbr = pair(c.gbr_ul_kbps, c.gbr_dl_kbps, "gbr", i)?;
        let mut sdf_filters = Vec::with_capacity(c.sdf.len());
        for (k, s) in c.sdf.iter().enumerate() {
            FlowDescription::parse(s.as_bytes())
                .map_err(|e| field(&format!("sdf[{k}]"), e.to_string()))?;
            sdf_filters.push(SdfFilter {
                flow_description: Some(s.as_bytes().to_vec()),
                ..SdfFilter::default()
            });
        }
        let (f_teid, ohr, ohc_ie) = match c.gnb {
            IpAddr::V4(g) => {
                let local = n3
                    .v4
                    .ok_or_else(|| field("gnb", "IPv4, but no local N3 IPv4 address".into()))?;
                (
                    LocalFTeid {
                        teid: c.ul_teid,
                        ipv4: Some(local),
                        ipv6: None,
                    },
                    0,
                    OuterHeaderCreation {
                        description: ohc::GTPU_UDP_IPV4,
                        teid: Some(c.dl_teid),
                        ipv4: Some(g),
                        ..OuterHeaderCreation::default()
                    },
                )
            }
            IpAddr::V6(g) => {
                let local = n3
                    .v6
                    .ok_or_else(|| field("gnb", "IPv6, but no local N3 IPv6 address".into()))?;
                (
                    LocalFTeid {
                        teid: c.ul_teid,
                        ipv4: None,
                        ipv6: Some(local),
                    },
                    1,
                    OuterHeaderCreation {
                        description: ohc::GTPU_UDP_IPV6,
                        teid: Some(c.dl_teid),
                        ipv6: Some(g),
                        ..OuterHeaderCreation::default()
                    },
                )
            }
        };
        let ue_ip = |dst: bool| UeIpAddress {
            sd: dst,
            ipv4: c.ue_ipv4,
            ipv6: c.ue_ipv6,
            ..UeIpAddress::default()
        };
        let pdr = |id: u16, pdi: Pdi, ohr: Option<u8>, far_id: u32| Pdr {
            id,
            precedence: 255,
            pdi,
            outer_header_removal: ohr.map(|description| OuterHeaderRemoval {
                description,
                ext_header_deletion: None,
            }),
            far_id,
            qer_ids: vec![1],
            urr_ids: vec![1],
        };
        let ul = pdr(
            1,
            Pdi {
                source_interface: 0,
                f_teid: Some(f_teid),
                ue_ip: Some(ue_ip(false)),
                sdf_filters: sdf_filters.clone(),
                ..Pdi::default()
            },
            Some(ohr),
            1,
        );
        let dl = pdr(
            2,
            Pdi {
                source_interface: 1,
                ue_ip: Some(ue_ip(true)),
                sdf_filters,
                ..Pdi::default()
            },
            None,
            2,
        );
        let far = |id: u32, dest: u8, ohc: Option<OuterHeaderCreation>| Far {
            id,
            apply_action: Bitmap(apply_action::FORW),
            forwarding: Some(ForwardingParameters {
                destination_interface: dest,
                network_instance: None,
                outer_header_creation: ohc,
            }),
            bar_id: None,
        };
        out.push(Session {
            up_seid: c.seid,
            cp_f_seid: FSeid {
                seid: c.seid,
                ipv4: None,
                ipv6: None,
            },
            // No CP function owns a static session.
            peer: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            bar: None,
            pdrs: peregrine_n4::RuleMap::from([(1, ul), (2, dl)]),
            fars: peregrine_n4::RuleMap::from([(1, far(1, 1, None)), (2, far(2, 0, Some(ohc_ie)))]),
            qers: peregrine_n4::RuleMap::from([(
                1,
                Qer {
                    id: 1,
                    gate: GateStatus::default(),
                    mbr,
                    gbr,
                    qfi: Some(c.qfi),
                },
            )]),
            urrs: peregrine_n4::RuleMap::from([(
                1,
                Urr {
                    id: 1,
                    measurement_method: Bitmap(measurement_method::VOLUM),
                    reporting_triggers: Bitmap(0),
                    volume_threshold: None,
                    time_threshold: None,
                    volume_quota: None,
                    time_quota: None,
                    measurement_period: None,
                },
            )]),
        });
    }
    Ok(out)
}

/// Outer (N3) IP version of synthetic sessions, as `pg-gen --outer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OuterMix {
    V4,
    V6,
    /// Per session, by the same hash `pg-gen` uses.
    #[default]
    Mixed,
}

/// Parameters of [`synthetic`]; the defaults are `pg-gen`'s quickstart addressing (seed 1,
/// QFIs 1, 5, 9, 4 gNBs, mixed outer), so `synthetic(64, &Default::default())` serves the
/// quickstart traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticParams {
    pub seed: u64,
    pub qfis: Vec<u8>,
    pub gnbs: u32,
    pub outer: OuterMix,
    /// UE IPv4 pool base: UE `i` gets base + i + 1.
    pub ue_pool_v4: Ipv4Addr,
    /// UE IPv6 pool base: UE `i` gets `::1` in the `i`-th /64 above it (`i` is added at
    /// bit 64, as `pg-gen` does: distinct for every `i`, and beyond the pool's size the
    /// numbering carries into the prefix rather than wrapping onto UE 0).
    pub ue_pool_v6: Ipv6Addr,
    /// gNB 0's N3 addresses; gNB `i` has these plus `i`.
    pub gnb_v4: Ipv4Addr,
    pub gnb_v6: Ipv6Addr,
    /// MBR for both directions, if any.
    pub mbr_kbps: Option<u64>,
}

impl Default for SyntheticParams {
    fn default() -> Self {
        SyntheticParams {
            seed: 1,
            qfis: vec![1, 5, 9],
            gnbs: 4,
            outer: OuterMix::Mixed,
            ue_pool_v4: Ipv4Addr::new(10, 45, 0, 0),
            ue_pool_v6: Ipv6Addr::new(0x2001, 0xdb8, 0x45, 0, 0, 0, 0, 0),
            gnb_v4: Ipv4Addr::new(192, 0, 2, 10),
            gnb_v6: Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 0x10),
            mbr_kbps: None,
        }
    }
}

// The next two functions match the test kit's traffic generator (`hash`, `permute24` in
// testkit/src/traffic) bit for bit; perf/tests/rules_numbering.rs checks that both agree.
/// One splitmix64 output (Steele, Lea, Flood 2014) keyed by `(seed, domain, x)`.
fn hash(seed: u64, domain: u64, x: u64) -> u64 {
    use rand_core::{RngCore, SeedableRng};
    let s =
        seed ^ domain.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ x.wrapping_mul(0xa076_1d64_78bd_642f);
    rand_xoshiro::SplitMix64::seed_from_u64(s).next_u64()
}

fn permute24(x: u32, key: u32) -> u32 {
    const M: u32 = 0x00ff_ffff;
    let mut x = (x ^ key) & M;
    x = x.wrapping_mul(0x9e_3779) & M;
    x ^= x >> 12;
    x = x.wrapping_mul(0x5b_d1e5) & M;
    x ^= x >> 11;
    x
}

/// UE `i`'s IPv6 address: `::1` in the `i`-th /64 above `base`. Added, not OR-ed: with
/// the default `2001:db8:45::/48` pool an OR put UE 65,536 on UE 0's address.
pub fn ue_v6(base: Ipv6Addr, i: u32) -> Ipv6Addr {
    Ipv6Addr::from(u128::from(base).wrapping_add(u128::from(i) << 64) | 1)
}

/// `pg-gen`'s hash domains.
const DOMAIN_SESSION: u64 = 3;
const DOMAIN_TEID_UL: u64 = 5;
const DOMAIN_TEID_DL: u64 = 6;

/// `n` sessions numbered as `pg-gen` numbers its UEs (`TrafficSpec::sessions`): UE `i` has
/// SEID `i + 1`, the `i`-th UE addresses, gNB `i % gnbs`, TEIDs `0x01xxxxxx` (uplink) and
/// `0x02xxxxxx` (downlink) from a keyed 24-bit permutation of `i`, QFI `qfis[i % len]`.
/// At most 2^24 sessions (the TEID permutation's range).
pub fn synthetic(n: usize, p: &SyntheticParams) -> Vec<StaticSession> {
    let key_ul = hash(p.seed, DOMAIN_TEID_UL, 0) as u32;
    let key_dl = hash(p.seed, DOMAIN_TEID_DL, 0) as u32;
    let nq = p.qfis.len().max(1);
    (0..n.min(1 << 24) as u32)
        .map(|i| {
            let g = i % p.gnbs.max(1);
            let v6 = match p.outer {
                OuterMix::V4 => false,
                OuterMix::V6 => true,
                OuterMix::Mixed => hash(p.seed, DOMAIN_SESSION, u64::from(i)) & 1 == 1,
            };
            let gnb = if v6 {
                IpAddr::V6(Ipv6Addr::from(
                    u128::from(p.gnb_v6).wrapping_add(u128::from(g)),
                ))
            } else {
                IpAddr::V4(Ipv4Addr::from(u32::from(p.gnb_v4).wrapping_add(g)))
            };
            StaticSession {
                seid: u64::from(i) + 1,
                ue_ipv4: Some(Ipv4Addr::from(
                    u32::from(p.ue_pool_v4).wrapping_add(i).wrapping_add(1),
                )),
                ue_ipv6: Some(ue_v6(p.ue_pool_v6, i)),
                ul_teid: 0x0100_0000 | permute24(i, key_ul),
                gnb,
                dl_teid: 0x0200_0000 | permute24(i, key_dl),
                qfi: p.qfis.get(i as usize % nq).copied().unwrap_or(0),
                mbr_ul_kbps: p.mbr_kbps,
                mbr_dl_kbps: p.mbr_kbps,
                gbr_ul_kbps: None,
                gbr_dl_kbps: None,
                sdf: Vec::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const N3: N3Addresses = N3Addresses {
        v4: Some(Ipv4Addr::new(192, 0, 2, 1)),
        v6: Some(Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1)),
    };

    fn parse(s: &str) -> Result<Vec<Session>, String> {
        let c: StaticSessions = toml::from_str(s).map_err(|e| e.to_string())?;
        to_sessions(&c.session, N3)
    }

    const ONE: &str = r#"
[[session]]
seid = 1
ue_ipv4 = "10.45.0.2"
ue_ipv6 = "2001:db8:45::1"
ul_teid = 0x01000001
gnb = "2001:db8:3::10"
dl_teid = 0x02000001
qfi = 9
mbr_ul_kbps = 100000
mbr_dl_kbps = 200000
sdf = ["permit out ip from any to assigned"]
"#;

    #[test]
    fn toml_session_becomes_default_pdu_session() {
        let s = parse(ONE).unwrap().remove(0);
        let ul = &s.pdrs[&1];
        assert_eq!(ul.pdi.source_interface, 0);
        assert_eq!(ul.pdi.f_teid.unwrap().teid, 0x0100_0001);
        assert_eq!(ul.pdi.f_teid.unwrap().ipv6, N3.v6);
        assert_eq!(ul.outer_header_removal.unwrap().description, 1);
        assert_eq!(ul.pdi.sdf_filters.len(), 1);
        let dl = &s.pdrs[&2];
        assert_eq!(dl.pdi.source_interface, 1);
        assert_eq!(
            dl.pdi.ue_ip.unwrap().ipv4,
            Some(Ipv4Addr::new(10, 45, 0, 2))
        );
        let o = s.fars[&2]
            .forwarding
            .as_ref()
            .unwrap()
            .outer_header_creation
            .unwrap();
        assert_eq!(o.description, ohc::GTPU_UDP_IPV6);
        assert_eq!(o.teid, Some(0x0200_0001));
        assert_eq!(
            s.qers[&1].mbr,
            Some(BitRate {
                ul: 100_000,
                dl: 200_000
            })
        );
        assert_eq!(s.qers[&1].qfi, Some(9));
        assert_eq!(
            s.fars[&1]
                .forwarding
                .as_ref()
                .unwrap()
                .destination_interface,
            1
        );
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (ONE.replace("seid = 1", "seid = 0"), "session[0].seid"),
            (ONE.replace("qfi = 9", "qfi = 64"), "session[0].qfi"),
            (
                ONE.replace("mbr_dl_kbps = 200000", ""),
                "session[0].mbr_ul_kbps",
            ),
            (ONE.replace("from any", "form any"), "session[0].sdf[0]"),
            (
                ONE.replace("dl_teid = 0x02000001", "dl_teid = 0"),
                "session[0].dl_teid",
            ),
            (
                format!("{ONE}{}", ONE.replace("seid = 1", "seid = 2")),
                "session[1].ul_teid",
            ),
            (format!("{ONE}{ONE}"), "session[1].seid"),
            (
                ONE.replace("ue_ipv4 = \"10.45.0.2\"\nue_ipv6 = \"2001:db8:45::1\"", ""),
                "session[0]: needs",
            ),
            (ONE.replace("qfi = 9", "qfi = 9\nbogus = 1"), "bogus"),
        ];
        for (text, want) in cases {
            let e = parse(&text).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
        }
        let no_v6 = N3Addresses {
            v4: N3.v4,
            v6: None,
        };
        let c: StaticSessions = toml::from_str(ONE).unwrap();
        assert!(to_sessions(&c.session, no_v6)
            .unwrap_err()
            .contains("session[0].gnb"));
    }

    #[test]
    fn synthetic_numbering() {
        let v = synthetic(300, &SyntheticParams::default());
        assert_eq!(v.len(), 300);
        assert_eq!(v[0].ue_ipv4, Some(Ipv4Addr::new(10, 45, 0, 1)));
        assert_eq!(v[257].ue_ipv4, Some(Ipv4Addr::new(10, 45, 1, 2)));
        assert_eq!(v[2].ue_ipv6, Some("2001:db8:45:2::1".parse().unwrap()));
        assert_eq!(
            v.iter().map(|s| s.qfi).take(4).collect::<Vec<_>>(),
            [1, 5, 9, 1]
        );
        let ul: BTreeSet<u32> = v.iter().map(|s| s.ul_teid).collect();
        let dl: BTreeSet<u32> = v.iter().map(|s| s.dl_teid).collect();
        assert_eq!((ul.len(), dl.len()), (300, 300));
        assert!(ul.iter().all(|t| t >> 24 == 1) && dl.iter().all(|t| t >> 24 == 2));
        assert!(v.iter().any(|s| s.gnb.is_ipv4()) && v.iter().any(|s| s.gnb.is_ipv6()));
        assert_eq!(to_sessions(&v, N3).unwrap().len(), 300);
    }

    #[test]
    fn synthetic_ipv6_ues_stay_distinct_beyond_65536() {
        // The default pool is a /48: 16 bits of /64s. An OR of the index put UE 65,536 on
        // UE 0's address (2001:db8:45::1); now the numbering carries on.
        let p = SyntheticParams::default();
        assert_eq!(
            ue_v6(p.ue_pool_v6, 0),
            "2001:db8:45::1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            ue_v6(p.ue_pool_v6, 65_535),
            "2001:db8:45:ffff::1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            ue_v6(p.ue_pool_v6, 65_536),
            "2001:db8:46::1".parse::<Ipv6Addr>().unwrap()
        );
        let n = 200_000;
        let v = synthetic(n, &p);
        let v6: BTreeSet<Ipv6Addr> = v.iter().filter_map(|s| s.ue_ipv6).collect();
        let v4: BTreeSet<Ipv4Addr> = v.iter().filter_map(|s| s.ue_ipv4).collect();
        assert_eq!((v6.len(), v4.len()), (n, n));
    }
}
