//! Next hops of routes given by gateway address (`via`, no `next_hop_mac`), resolved from
//! ARP (RFC 826) and IPv6 Neighbour Discovery (RFC 4861), I/O-free with time passed in.
//!
//! One entry per (gateway, port), in the simple form of the RFC 4861 section 7.3.2 state
//! machine:
//!
//! ```text
//!  INCOMPLETE --answer--> REACHABLE --reachable_ms--> STALE --delay_ms--> PROBE
//!   |  ^  broadcast ARP /     ^  (MAC in use)          (MAC in use)        | unicast ARP / NS
//!   |  |  multicast NS every  +------------------- answer -----------------+ every retrans_ms
//!   |  |  retrans_ms                                                        |
//!   |  +------------- max_unicast_solicit unanswered: MAC withdrawn --------+
//!   | max_multicast_solicit unanswered
//!   v
//!  FAILED --failed_retry_ms--> INCOMPLETE
//! ```
//!
//! An answer is an ARP reply or a Neighbour Advertisement with the Solicited flag (section
//! 7.3.1: reachability confirmed); an ARP request, a solicitation or an unsolicited
//! advertisement from the gateway carrying a new MAC sets STALE with that MAC (section
//! 7.2.3/7.2.5), so a changed MAC is used at once and then confirmed by a probe.
//!
//! A route is the demand: every configured gateway is solicited from start (and from a
//! SIGHUP reload that adds it), as a router resolves a static route's gateway; it is not
//! driven per packet. While an entry has no MAC (INCOMPLETE, FAILED) its routes carry
//! [`NextHop::UNRESOLVED`] and the workers drop their packets as `next_hop_unresolved`
//! (nothing is queued). Workers get the MACs in the daemon's route table, republished by
//! snapshot swap when a MAC appears, changes or is withdrawn.
//!
//! Solicitations are sent from the port's MAC and from our local address of the gateway's
//! family sharing the longest prefix with it (IPv4 without one: 0.0.0.0, an RFC 5227 probe;
//! IPv6 without one: the unspecified address, answered to all-nodes).

use crate::neighbour::{arp_request_to, neighbour_solicit_to, Heard};
use crate::platform::{NeighbourSection, ParsedRoute};
use peregrine_dataplane::io::PortId;
use peregrine_dataplane::stages::l3fwd::{NextHop, RouteTable};
use peregrine_wire::ethernet::Address as Mac;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Where an entry is in the state machine (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Resolving: `sent` broadcast / multicast solicitations so far.
    Incomplete {
        sent: u32,
    },
    Reachable,
    Stale,
    /// Probing the known MAC: `sent` unicast solicitations so far.
    Probe {
        sent: u32,
    },
    Failed,
}

/// One gateway's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub state: State,
    /// The MAC the workers use (none while INCOMPLETE or FAILED).
    pub mac: Option<Mac>,
    /// When the state's timer fires (ns, the caller's clock).
    pub deadline: u64,
}

/// Counters of the resolver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NextHopStats {
    /// Broadcast ARP requests and multicast Neighbour Solicitations sent.
    pub solicits_multicast: u64,
    /// Unicast probes (ARP request / NS to the known MAC).
    pub solicits_unicast: u64,
    /// Entries that got a MAC or a new MAC.
    pub resolved: u64,
    /// Confirmations (ARP reply, solicited NA) of a gateway.
    pub confirmed: u64,
    /// INCOMPLETE entries that gave up (FAILED).
    pub failed: u64,
    /// PROBE entries whose MAC was withdrawn (aged out).
    pub aged_out: u64,
    /// Route tables republished because a next-hop MAC changed.
    pub republished: u64,
}

/// A solicitation to send on `port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Solicit {
    pub port: PortId,
    pub frame: Vec<u8>,
}

/// The resolver: see the module docs.
#[derive(Debug, Clone)]
pub struct Resolver {
    timers: NeighbourSection,
    routes: Vec<ParsedRoute>,
    entries: BTreeMap<(IpAddr, PortId), Entry>,
    local: Vec<IpAddr>,
    /// Our MAC per port.
    macs: Vec<Mac>,
    stats: NextHopStats,
    dirty: bool,
}

const MS: u64 = 1_000_000;

impl Resolver {
    /// Resolve the gateways of `routes` (routes with a static MAC are passed through),
    /// soliciting from `local` addresses and the port MACs `macs`, starting at `now`.
    pub fn new(
        routes: &[ParsedRoute],
        local: &[IpAddr],
        macs: Vec<Mac>,
        timers: NeighbourSection,
        now: u64,
    ) -> Resolver {
        let mut r = Resolver {
            timers,
            routes: Vec::new(),
            entries: BTreeMap::new(),
            local: local.to_vec(),
            macs,
            stats: NextHopStats::default(),
            dirty: false,
        };
        r.set_routes(routes, now);
        r
    }

    /// Replace the routes (a reload): gateways still in use keep their state, new ones are
    /// solicited at `now`, others are forgotten.
    pub fn set_routes(&mut self, routes: &[ParsedRoute], now: u64) {
        self.routes = routes.to_vec();
        let wanted: Vec<(IpAddr, PortId)> = routes
            .iter()
            .filter_map(|r| Some((r.via?, r.port)))
            .collect();
        self.entries.retain(|k, _| wanted.contains(k));
        for k in wanted {
            self.entries.entry(k).or_insert(Entry {
                state: State::Incomplete { sent: 0 },
                mac: None,
                deadline: now,
            });
        }
        self.dirty = true;
    }

    /// True when some route resolves by ARP / ND.
    pub fn is_active(&self) -> bool {
        !self.entries.is_empty()
    }

    pub fn stats(&self) -> NextHopStats {
        self.stats
    }

    pub fn entry(&self, ip: IpAddr, port: PortId) -> Option<&Entry> {
        self.entries.get(&(ip, port))
    }

    pub fn entries(&self) -> impl Iterator<Item = (&(IpAddr, PortId), &Entry)> {
        self.entries.iter()
    }

    /// What a frame received on `port` at `now` said about a neighbour.
    pub fn heard(&mut self, now: u64, port: PortId, h: Heard) {
        let t = self.timers;
        let Some(e) = self.entries.get_mut(&(h.ip, port)) else {
            return;
        };
        let changed = h.mac.is_some_and(|m| e.mac != Some(m));
        if changed {
            e.mac = h.mac;
            self.stats.resolved += 1;
            self.dirty = true;
        }
        if h.confirmed && e.mac.is_some() {
            // Section 7.2.5: a solicited answer makes the entry REACHABLE.
            self.stats.confirmed += 1;
            e.state = State::Reachable;
            e.deadline = now.saturating_add(t.reachable_ms * MS);
        } else if changed {
            // Sections 7.2.3 / 7.2.5: a new address from an unsolicited frame is STALE.
            e.state = State::Stale;
            e.deadline = now.saturating_add(t.delay_ms * MS);
        }
    }

    /// Run the timers due at `now`; the solicitations to send.
    pub fn poll(&mut self, now: u64) -> Vec<Solicit> {
        let t = self.timers;
        let mut out = Vec::new();
        let keys: Vec<_> = self.entries.keys().copied().collect();
        for k in keys {
            // At most a few transitions per poll (STALE -> PROBE sends at once).
            for _ in 0..4 {
                let Some(e) = self.entries.get_mut(&k) else {
                    break;
                };
                if e.deadline > now {
                    break;
                }
                let retrans = now.saturating_add(t.retrans_ms * MS);
                let send = match e.state {
                    State::Incomplete { sent } if sent < t.max_multicast_solicit => {
                        e.state = State::Incomplete { sent: sent + 1 };
                        e.deadline = retrans;
                        Some(None)
                    }
                    State::Incomplete { .. } => {
                        self.stats.failed += 1;
                        e.state = State::Failed;
                        e.deadline = now.saturating_add(t.failed_retry_ms * MS);
                        None
                    }
                    State::Failed => {
                        e.state = State::Incomplete { sent: 0 };
                        None
                    }
                    State::Reachable => {
                        e.state = State::Stale;
                        e.deadline = now.saturating_add(t.delay_ms * MS);
                        None
                    }
                    State::Stale => {
                        e.state = State::Probe { sent: 0 };
                        None
                    }
                    State::Probe { sent } if sent < t.max_unicast_solicit => {
                        e.state = State::Probe { sent: sent + 1 };
                        e.deadline = retrans;
                        Some(e.mac)
                    }
                    State::Probe { .. } => {
                        // Section 7.3.3: no answer to the probes, the entry goes; resolve
                        // again from scratch, the routes unresolved meanwhile.
                        self.stats.aged_out += 1;
                        e.state = State::Incomplete { sent: 0 };
                        e.mac = None;
                        self.dirty = true;
                        None
                    }
                };
                if let Some(unicast) = send {
                    if let Some(f) = self.solicit(k.0, k.1, unicast) {
                        match unicast {
                            Some(_) => self.stats.solicits_unicast += 1,
                            None => self.stats.solicits_multicast += 1,
                        }
                        out.push(f);
                    }
                }
            }
        }
        out
    }

    /// The route table with the current MACs, when it changed since the last call.
    pub fn take_table(&mut self) -> Option<RouteTable> {
        if !std::mem::take(&mut self.dirty) {
            return None;
        }
        self.stats.republished += 1;
        Some(self.table())
    }

    /// The route table with the current MACs ([`NextHop::UNRESOLVED`] where none).
    pub fn table(&self) -> RouteTable {
        let mut t = RouteTable::default();
        for r in &self.routes {
            let mac = match r.via {
                Some(ip) => self
                    .entries
                    .get(&(ip, r.port))
                    .and_then(|e| e.mac)
                    .unwrap_or(NextHop::UNRESOLVED),
                None => r.next_hop,
            };
            t.insert(r.addr, r.len, NextHop { port: r.port, mac });
        }
        t
    }

    /// The solicitation for `target` on `port`: broadcast / multicast, or unicast to `to`.
    fn solicit(&self, target: IpAddr, port: PortId, to: Option<Mac>) -> Option<Solicit> {
        let mac = *self.macs.get(usize::from(port))?;
        let frame = match target {
            IpAddr::V4(t) => {
                let src = self.source_v4(t).unwrap_or(Ipv4Addr::UNSPECIFIED);
                arp_request_to(mac, src, t, to.unwrap_or(Mac::BROADCAST))
            }
            IpAddr::V6(t) => {
                let src = self.source_v6(t).unwrap_or(Ipv6Addr::UNSPECIFIED);
                neighbour_solicit_to(mac, src, t, to)
            }
        };
        Some(Solicit { port, frame })
    }

    fn source_v4(&self, t: Ipv4Addr) -> Option<Ipv4Addr> {
        self.local
            .iter()
            .filter_map(|a| match a {
                IpAddr::V4(a) => Some(*a),
                _ => None,
            })
            .max_by_key(|a| (u32::from(*a) ^ u32::from(t)).leading_zeros())
    }

    fn source_v6(&self, t: Ipv6Addr) -> Option<Ipv6Addr> {
        self.local
            .iter()
            .filter_map(|a| match a {
                IpAddr::V6(a) => Some(*a),
                _ => None,
            })
            .max_by_key(|a| (u128::from(*a) ^ u128::from(t)).leading_zeros())
    }
}

mod glue;
pub use glue::Neighbours;

#[cfg(test)]
mod tests;
