//! SDF Filter Flow Description parser (TS 29.244 section 8.2.5: "Flow Description ... encoded
//! as specified in 3GPP TS 29.212 section 5.4.2", which uses the IPFilterRule of RFC 6733
//! section 4.3):
//!
//! ```text
//! action dir proto from src [ports] to dst [ports]
//! permit out 17 from 198.51.100.0/24 5000-5010 to assigned 4000,4002
//! ```
//!
//! * `action` must be `permit` (TS 29.212: "The 'action' shall be set to 'permit'"); `deny`
//!   is rejected.
//! * `dir` is `out` (the rule is written toward the UE: `from` = remote, `to` = UE) or `in`
//!   (written from the UE: `from` = UE, `to` = remote). [`FlowDescription::orient`] turns
//!   either into packet orientation for an uplink or downlink PDR.
//! * `proto` is `ip` (any), a number 0-255, or a name (`tcp`, `udp`, `icmp`, `icmp6` /
//!   `ipv6-icmp`, `sctp`, `gre`, `esp`, `ah`).
//! * An address is `any`, `assigned` (the UE's address: the lookup key already fixes it, so
//!   it matches like `any`), or an IPv4 / IPv6 address with an optional `/len`. Host bits past
//!   the prefix length are cleared. The two sides must not be of different families.
//! * Ports: `p`, `p1-p2`, or a comma list of these. **Choice:** a comma list expands into one
//!   [`FlowFilter`] per port range (the cross product of the source and destination lists),
//!   at most [`MAX_FILTERS_PER_DESCRIPTION`]; a packet matching any of them matches the SDF
//!   filter, which is exactly what the list means.
//! * Negation (`!`) and the RFC 6733 options (`frag`, `ipoptions`, `tcpoptions`,
//!   `established`, `setup`, `tcpflags`, `icmptypes`) are rejected rather than ignored:
//!   ignoring one would widen the match.
//!
//! Keywords are matched ASCII case-insensitively; tokens are separated by any ASCII
//! whitespace; trailing NUL octets (padding sent by some SMFs) are ignored.

use arrayvec::ArrayVec;
use ipnet::IpNet;
use peregrine_dataplane::upf::tables::{Direction, FlowFilter, IpPrefix};
use std::net::IpAddr;
use thiserror::Error;

/// Most [`FlowFilter`]s one Flow Description may expand into (port lists).
pub const MAX_FILTERS_PER_DESCRIPTION: usize = 16;

/// Why a Flow Description was refused. The compiler reports every one as PFCP cause 73
/// "Rule creation/modification failure" with Offending IE SDF Filter (23).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SdfError {
    #[error("flow description is not ASCII text")]
    NotText,
    #[error("flow description is empty or truncated: expected {0}")]
    Missing(&'static str),
    #[error("unsupported action {0:?} (only \"permit\")")]
    Action(String),
    #[error("bad direction {0:?} (expected \"in\" or \"out\")")]
    Direction(String),
    #[error("bad protocol {0:?}")]
    Protocol(String),
    #[error("expected {expected:?}, found {found:?}")]
    Keyword {
        expected: &'static str,
        found: String,
    },
    #[error("bad address {0:?}")]
    Address(String),
    #[error("negated address {0:?} is not supported")]
    Negation(String),
    #[error("bad prefix length in {0:?}")]
    PrefixLength(String),
    #[error("source and destination are of different IP versions")]
    MixedFamilies,
    #[error("bad port or port range {0:?}")]
    Port(String),
    #[error("unsupported option {0:?}")]
    Option(String),
    #[error("port lists expand to more than {MAX_FILTERS_PER_DESCRIPTION} filters")]
    TooManyFilters,
}

/// One side of the rule as written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    addr: Option<IpPrefix>,
    /// Empty = any port.
    ports: ArrayVec<(u16, u16), MAX_FILTERS_PER_DESCRIPTION>,
}

/// A parsed Flow Description, still in the orientation it was written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowDescription {
    /// `true` for `out` (toward the UE), `false` for `in`.
    pub out: bool,
    pub proto: Option<u8>,
    from: Endpoint,
    to: Endpoint,
}

fn proto_by_name(s: &str) -> Option<Option<u8>> {
    let p = match s.to_ascii_lowercase().as_str() {
        "ip" => return Some(None),
        "icmp" => 1,
        "tcp" => 6,
        "udp" => 17,
        "gre" => 47,
        "esp" => 50,
        "ah" => 51,
        "icmp6" | "ipv6-icmp" | "icmpv6" => 58,
        "sctp" => 132,
        n => return n.parse::<u8>().ok().map(Some),
    };
    Some(Some(p))
}

fn parse_addr(tok: &str) -> Result<Option<IpPrefix>, SdfError> {
    if tok.eq_ignore_ascii_case("any") || tok.eq_ignore_ascii_case("assigned") {
        return Ok(None);
    }
    if tok.starts_with('!') {
        return Err(SdfError::Negation(tok.into()));
    }
    // A bare address is a host prefix; the prefix itself is `ipnet`'s.
    let net = match tok.split_once('/') {
        None => IpNet::from(
            tok.parse::<IpAddr>()
                .map_err(|_| SdfError::Address(tok.into()))?,
        ),
        Some((a, _)) => {
            a.parse::<IpAddr>()
                .map_err(|_| SdfError::Address(tok.into()))?;
            tok.parse::<IpNet>()
                .map_err(|_| SdfError::PrefixLength(tok.into()))?
        }
    };
    // Host bits past the prefix length are cleared (module docs).
    Ok(Some(match net.trunc() {
        IpNet::V4(n) => IpPrefix::V4(n.addr(), n.prefix_len()),
        IpNet::V6(n) => IpPrefix::V6(n.addr(), n.prefix_len()),
    }))
}

fn parse_port(s: &str) -> Result<u16, SdfError> {
    // Digits only: `u16::from_str` would also take a leading '+'.
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SdfError::Port(s.into()));
    }
    s.parse().map_err(|_| SdfError::Port(s.into()))
}

/// `p`, `p1-p2` or a comma list of those.
fn parse_ports(tok: &str) -> Result<ArrayVec<(u16, u16), MAX_FILTERS_PER_DESCRIPTION>, SdfError> {
    let mut out = ArrayVec::new();
    for part in tok.split(',') {
        let r = match part.split_once('-') {
            Some((a, b)) => (parse_port(a)?, parse_port(b)?),
            None => {
                let p = parse_port(part)?;
                (p, p)
            }
        };
        if r.0 > r.1 {
            return Err(SdfError::Port(part.into()));
        }
        out.try_push(r).map_err(|_| SdfError::TooManyFilters)?;
    }
    Ok(out)
}

fn is_ports(tok: &str) -> bool {
    tok.bytes().next().is_some_and(|b| b.is_ascii_digit())
}

fn family(p: &Option<IpPrefix>) -> Option<bool> {
    p.map(|p| matches!(p, IpPrefix::V6(..)))
}

impl FlowDescription {
    /// Parse the octets of a Flow Description (the FD field of the SDF Filter IE).
    pub fn parse(bytes: &[u8]) -> Result<FlowDescription, SdfError> {
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        let text = std::str::from_utf8(&bytes[..end]).map_err(|_| SdfError::NotText)?;
        if !text.is_ascii() {
            return Err(SdfError::NotText);
        }
        let mut it = text.split_ascii_whitespace().peekable();
        let mut next = |what: &'static str| it.next().ok_or(SdfError::Missing(what));

        let action = next("action")?;
        if !action.eq_ignore_ascii_case("permit") {
            return Err(SdfError::Action(action.into()));
        }
        let dir = next("direction")?;
        let out = if dir.eq_ignore_ascii_case("out") {
            true
        } else if dir.eq_ignore_ascii_case("in") {
            false
        } else {
            return Err(SdfError::Direction(dir.into()));
        };
        let p = next("protocol")?;
        let proto = proto_by_name(p).ok_or_else(|| SdfError::Protocol(p.into()))?;
        let kw = next("from")?;
        if !kw.eq_ignore_ascii_case("from") {
            return Err(SdfError::Keyword {
                expected: "from",
                found: kw.into(),
            });
        }
        let from_addr = parse_addr(next("source address")?)?;
        let mut tok = next("to")?;
        let mut from_ports = ArrayVec::new();
        if is_ports(tok) {
            from_ports = parse_ports(tok)?;
            tok = next("to")?;
        }
        if !tok.eq_ignore_ascii_case("to") {
            return Err(SdfError::Keyword {
                expected: "to",
                found: tok.into(),
            });
        }
        let to_addr = parse_addr(next("destination address")?)?;
        let mut to_ports = ArrayVec::new();
        let mut rest = it;
        if let Some(t) = rest.peek() {
            if is_ports(t) {
                to_ports = parse_ports(t)?;
                rest.next();
            }
        }
        if let Some(opt) = rest.next() {
            return Err(SdfError::Option(opt.into()));
        }
        if let (Some(a), Some(b)) = (family(&from_addr), family(&to_addr)) {
            if a != b {
                return Err(SdfError::MixedFamilies);
            }
        }
        if from_ports.len().max(1) * to_ports.len().max(1) > MAX_FILTERS_PER_DESCRIPTION {
            return Err(SdfError::TooManyFilters);
        }
        Ok(FlowDescription {
            out,
            proto,
            from: Endpoint {
                addr: from_addr,
                ports: from_ports,
            },
            to: Endpoint {
                addr: to_addr,
                ports: to_ports,
            },
        })
    }

    /// The filters in the orientation of packets of `dir`: `src` is the packet's source.
    /// A downlink packet comes from the remote side, an uplink one from the UE; an `out`
    /// rule names the remote side in `from`, an `in` rule names the UE there. Appends to
    /// `out` (one filter per combination of listed port ranges).
    pub fn orient(&self, dir: Direction, out: &mut Vec<FlowFilter>) {
        // `from` is the remote side for `out` rules; downlink packets come from remote.
        let from_is_src = self.out == (dir == Direction::Downlink);
        let (src, dst) = if from_is_src {
            (&self.from, &self.to)
        } else {
            (&self.to, &self.from)
        };
        let any = [None];
        let sp: Vec<Option<(u16, u16)>> = src.ports.iter().copied().map(Some).collect();
        let dp: Vec<Option<(u16, u16)>> = dst.ports.iter().copied().map(Some).collect();
        let sp: &[Option<(u16, u16)>] = if sp.is_empty() { &any } else { &sp };
        let dp: &[Option<(u16, u16)>] = if dp.is_empty() { &any } else { &dp };
        for s in sp {
            for d in dp {
                out.push(FlowFilter {
                    proto: self.proto,
                    src: src.addr,
                    dst: dst.addr,
                    src_ports: *s,
                    dst_ports: *d,
                });
            }
        }
    }
}

/// Parse `bytes` and return its filters for a PDR of direction `dir`.
pub fn parse_flow_description(bytes: &[u8], dir: Direction) -> Result<Vec<FlowFilter>, SdfError> {
    let d = FlowDescription::parse(bytes)?;
    let mut v = Vec::new();
    d.orient(dir, &mut v);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_testkit::rng::{self, RngCore};
    use std::net::Ipv4Addr;
    use Direction::{Downlink as DL, Uplink as UL};

    fn v4(a: [u8; 4], l: u8) -> Option<IpPrefix> {
        Some(IpPrefix::V4(Ipv4Addr::from(a), l))
    }

    fn one(s: &str, d: Direction) -> FlowFilter {
        let v = parse_flow_description(s.as_bytes(), d).unwrap();
        assert_eq!(v.len(), 1, "{s}");
        v[0]
    }

    #[test]
    fn open5gs_default_rule_matches_everything() {
        // Open5GS and free5GC install this on the default PDRs of both directions.
        for d in [UL, DL] {
            let f = one("permit out ip from any to assigned", d);
            assert_eq!(
                f,
                FlowFilter {
                    proto: None,
                    src: None,
                    dst: None,
                    src_ports: None,
                    dst_ports: None
                }
            );
        }
    }

    #[test]
    fn downlink_keeps_and_uplink_swaps() {
        let s = "permit out 17 from 198.51.100.0/24 5000-5010 to 10.45.0.1 4000";
        let dl = one(s, DL);
        assert_eq!(dl.proto, Some(17));
        assert_eq!(dl.src, v4([198, 51, 100, 0], 24));
        assert_eq!(dl.src_ports, Some((5000, 5010)));
        assert_eq!(dl.dst, v4([10, 45, 0, 1], 32));
        assert_eq!(dl.dst_ports, Some((4000, 4000)));
        let ul = one(s, UL);
        assert_eq!((ul.src, ul.dst), (dl.dst, dl.src));
        assert_eq!((ul.src_ports, ul.dst_ports), (dl.dst_ports, dl.src_ports));
        // `in` rules are written from the UE: the mirror image.
        let i = one(
            "permit in 17 from 10.45.0.1 4000 to 198.51.100.0/24 5000-5010",
            UL,
        );
        assert_eq!(i, ul);
    }

    #[test]
    fn free5gc_style_and_names_and_ipv6() {
        let f = one("permit out tcp from 8.8.8.8/32 443 to assigned", DL);
        assert_eq!(f.proto, Some(6));
        assert_eq!(f.src_ports, Some((443, 443)));
        assert_eq!(f.dst, None);
        let f = one(
            "permit out icmp6 from 2001:db8:6::/48 to 2001:db8:45:1::1",
            DL,
        );
        assert_eq!(f.proto, Some(58));
        assert_eq!(
            f.src,
            Some(IpPrefix::V6("2001:db8:6::".parse().unwrap(), 48))
        );
        assert_eq!(
            f.dst,
            Some(IpPrefix::V6("2001:db8:45:1::1".parse().unwrap(), 128))
        );
        // Host bits are cleared, case and spacing are free, NUL padding is ignored.
        let f = one("PERMIT  OUT\tUDP from 10.1.2.3/8 to any\0\0", DL);
        assert_eq!(f.src, v4([10, 0, 0, 0], 8));
        assert_eq!(f.proto, Some(17));
        let f = one("permit out 0 from 0.0.0.0/0 to any", DL);
        assert_eq!((f.proto, f.src), (Some(0), v4([0, 0, 0, 0], 0)));
    }

    #[test]
    fn port_lists_expand() {
        let v = parse_flow_description(
            b"permit out udp from any 53,5353 to assigned 1000-2000,3000",
            DL,
        )
        .unwrap();
        assert_eq!(v.len(), 4);
        let pairs: Vec<_> = v.iter().map(|f| (f.src_ports, f.dst_ports)).collect();
        assert_eq!(
            pairs,
            vec![
                (Some((53, 53)), Some((1000, 2000))),
                (Some((53, 53)), Some((3000, 3000))),
                (Some((5353, 5353)), Some((1000, 2000))),
                (Some((5353, 5353)), Some((3000, 3000))),
            ]
        );
    }

    #[test]
    fn hostile_strings_are_typed_errors() {
        use SdfError as E;
        let cases: &[(&[u8], E)] = &[
            (b"", E::Missing("action")),
            (b"\0\0", E::Missing("action")),
            (b"deny out ip from any to any", E::Action("deny".into())),
            (
                b"permit sideways ip from any to any",
                E::Direction("sideways".into()),
            ),
            (b"permit out 256 from any to any", E::Protocol("256".into())),
            (
                b"permit out ip to any",
                E::Keyword {
                    expected: "from",
                    found: "to".into(),
                },
            ),
            (b"permit out ip from to any", E::Address("to".into())),
            (b"permit out ip from any", E::Missing("to")),
            (
                b"permit out ip from any to",
                E::Missing("destination address"),
            ),
            (
                b"permit out ip from 1.2.3.4/33 to any",
                E::PrefixLength("1.2.3.4/33".into()),
            ),
            (
                b"permit out ip from 1.2.3.4/ to any",
                E::PrefixLength("1.2.3.4/".into()),
            ),
            (
                b"permit out ip from ::/129 to any",
                E::PrefixLength("::/129".into()),
            ),
            (
                b"permit out ip from 1.2.3 to any",
                E::Address("1.2.3".into()),
            ),
            (
                b"permit out ip from !1.2.3.4 to any",
                E::Negation("!1.2.3.4".into()),
            ),
            (b"permit out ip from 1.2.3.4 to ::1", E::MixedFamilies),
            (
                b"permit out udp from any 70000 to any",
                E::Port("70000".into()),
            ),
            (b"permit out udp from any 9-8 to any", E::Port("9-8".into())),
            (b"permit out udp from any 1,,2 to any", E::Port("".into())),
            (
                b"permit out udp from any +1 to any",
                E::Keyword {
                    expected: "to",
                    found: "+1".into(),
                },
            ),
            (
                b"permit out tcp from any to any established",
                E::Option("established".into()),
            ),
            (
                b"permit out tcp from any to any 80 frag",
                E::Option("frag".into()),
            ),
            (
                b"permit out ip frm any to any",
                E::Keyword {
                    expected: "from",
                    found: "frm".into(),
                },
            ),
            (b"permit out ip from \xff to any", E::NotText),
            (
                b"permit out ip from any to any\0x",
                E::Address("any\0x".into()),
            ),
            (
                b"permit out udp from any 1,2,3,4,5 to any 1,2,3,4",
                E::TooManyFilters,
            ),
            (
                b"permit out udp from any 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17 to any",
                E::TooManyFilters,
            ),
        ];
        for (s, e) in cases {
            assert_eq!(
                parse_flow_description(s, DL).as_ref(),
                Err(e),
                "{:?}",
                String::from_utf8_lossy(s)
            );
        }
    }

    /// Deterministic mutations of real rules (byte flips, truncations, splices, token
    /// repeats): none may panic, and whatever parses must orient without panicking.
    #[test]
    fn mutations_never_panic() {
        let seeds: &[&[u8]] = &[
            b"permit out ip from any to assigned",
            b"permit out 17 from 198.51.100.0/24 5000-5010 to 10.45.0.1 4000,4002",
            b"permit in tcp from 2001:db8:45:1::1/64 1-65535 to 2001:db8::/32 443",
            b"permit out icmp from 0.0.0.0/0 to assigned",
        ];
        let alphabet = b" ,-/:.!0123456789abcdefipnotuany\0\xff";
        let mut g = rng::seeded(0x1234_5678_9abc_def0);
        let mut rnd = || g.next_u64();
        let (mut ok, mut err) = (0u32, 0u32);
        for i in 0..20_000u32 {
            let mut m = seeds[i as usize % seeds.len()].to_vec();
            for _ in 0..1 + rnd() % 4 {
                let pos = (rnd() as usize) % (m.len() + 1);
                match rnd() % 4 {
                    0 if pos < m.len() => m[pos] = alphabet[rnd() as usize % alphabet.len()],
                    1 => m.insert(pos, alphabet[rnd() as usize % alphabet.len()]),
                    2 => m.truncate(pos),
                    _ => {
                        let other = seeds[rnd() as usize % seeds.len()];
                        let cut = rnd() as usize % (other.len() + 1);
                        m.splice(pos..pos, other[cut..].iter().copied());
                    }
                }
            }
            for d in [UL, DL] {
                match parse_flow_description(&m, d) {
                    Ok(v) => {
                        assert!(!v.is_empty() && v.len() <= MAX_FILTERS_PER_DESCRIPTION);
                        ok += 1;
                    }
                    Err(_) => err += 1,
                }
            }
        }
        // The mutator must exercise both outcomes, or the test proves nothing.
        assert!(ok > 100 && err > 100, "ok {ok} err {err}");
    }
}
