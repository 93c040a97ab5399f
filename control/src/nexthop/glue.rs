//! The daemon's side of ARP / ND: the responder (answers for the features' local addresses,
//! learns neighbours) and the next-hop resolver, on the control thread, sending through the
//! runtime's injector and republishing the route table when a next-hop MAC changes.

use super::{NextHopStats, Resolver, State};
use crate::metrics::{Exposition, Kind as MKind};
use crate::neighbour::Responder;
use crate::platform::{NeighbourSection, ParsedRoute};
use peregrine_dataplane::runtime::{ControlPacket, Injector, Publisher};
use peregrine_dataplane::stages::l3fwd::RouteTable;
use peregrine_wire::ethernet::Address as Mac;
use std::net::IpAddr;
use std::time::Instant;

/// Responder + resolver + the injector they send with. See the module docs.
#[derive(Debug)]
pub struct Neighbours {
    responder: Responder,
    resolver: Resolver,
    injector: Injector,
    since: Instant,
    /// Solicitations the injector refused (its ring was full).
    not_sent: u64,
}

impl Neighbours {
    /// `None` when there is nothing to answer for and no route to resolve.
    pub fn new(
        local: &[IpAddr],
        macs: Vec<Mac>,
        routes: &[ParsedRoute],
        timers: NeighbourSection,
        injector: Injector,
        now: Instant,
    ) -> Option<Neighbours> {
        let resolver = Resolver::new(routes, local, macs.clone(), timers, 0);
        if local.is_empty() && !resolver.is_active() {
            return None;
        }
        Some(Neighbours {
            responder: Responder::new(local, macs),
            resolver,
            injector,
            since: now,
            not_sent: 0,
        })
    }

    fn ns(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.since).as_nanos() as u64
    }

    /// An exception frame: answered through the worker that received it, learnt.
    pub fn on_frame(&mut self, now: Instant, p: &ControlPacket) {
        if p.len != p.data.len() {
            return;
        }
        let at = self.ns(now);
        let o = self.responder.handle(at, p.port, &p.data);
        if let Some((ip, mac)) = o.learned {
            tracing::info!(%ip, %mac, port = p.port, "neighbour learnt");
        }
        if let Some(h) = o.heard {
            self.resolver.heard(at, p.port, h);
        }
        if let Some(reply) = o.reply {
            if let Err(e) = self.injector.inject(p.worker, p.port, &reply) {
                tracing::warn!(%e, port = p.port, "neighbour reply not sent");
            }
        }
    }

    /// The resolver's timers: solicitations out (through worker 0), the route table
    /// republished when a MAC appeared, changed or was withdrawn.
    pub fn tick(&mut self, now: Instant, routes: &Publisher<RouteTable>) {
        let at = self.ns(now);
        for s in self.resolver.poll(at) {
            if self.injector.inject(0, s.port, &s.frame).is_err() {
                self.not_sent += 1;
            }
        }
        self.publish(routes);
    }

    /// New routes (SIGHUP reload), published with the MACs known so far.
    pub fn set_routes(&mut self, now: Instant, parsed: &[ParsedRoute]) -> RouteTable {
        let at = self.ns(now);
        self.resolver.set_routes(parsed, at);
        self.resolver
            .take_table()
            .unwrap_or_else(|| self.resolver.table())
    }

    fn publish(&mut self, routes: &Publisher<RouteTable>) {
        if let Some(t) = self.resolver.take_table() {
            for ((ip, port), e) in self.resolver.entries() {
                tracing::info!(%ip, port, state = ?e.state, mac = ?e.mac.map(|m| m.to_string()), "next hop");
            }
            routes.publish(t);
        }
    }

    pub fn stats(&self) -> NextHopStats {
        self.resolver.stats()
    }

    /// Whether a route resolves by ARP / ND (the summary then has a `neighbour` section).
    pub fn resolving(&self) -> bool {
        self.resolver.is_active()
    }

    /// Counters and entries for the summary.
    pub fn report(&self) -> (serde_json::Value, String) {
        let s = self.responder.stats();
        let entries: Vec<_> = self
            .resolver
            .entries()
            .map(|((ip, port), e)| {
                serde_json::json!({
                    "ip": ip.to_string(),
                    "port": port,
                    "state": e.state,
                    "mac": e.mac.map(|m| m.to_string()),
                })
            })
            .collect();
        let json = serde_json::json!({
            "next_hops": self.resolver.stats(),
            "solicits_not_sent": self.not_sent,
            "arp_replies_sent": s.arp_replies_sent,
            "na_sent": s.na_sent,
            "learned": s.learned,
            "malformed": s.malformed,
            "entries": entries,
        });
        let n = self.resolver.stats();
        let text = format!(
            "neighbour: {} next hops; solicitations {} multicast {} unicast; resolved {}, confirmed {}, failed {}, aged out {}\n",
            entries.len(),
            n.solicits_multicast,
            n.solicits_unicast,
            n.resolved,
            n.confirmed,
            n.failed,
            n.aged_out
        );
        (json, text)
    }

    /// The `peregrine_neighbour_*` families of the metrics page.
    pub fn metrics(&self, e: &mut Exposition) {
        let n = self.resolver.stats();
        let r = self.responder.stats();
        e.family(
            "peregrine_neighbour_solicitations_total",
            MKind::Counter,
            "ARP requests / Neighbour Solicitations sent to resolve (multicast: broadcast ARP or solicited-node NS) or probe (unicast) route gateways.",
        );
        for (kind, v) in [
            ("multicast", n.solicits_multicast),
            ("unicast", n.solicits_unicast),
        ] {
            e.sample(
                "peregrine_neighbour_solicitations_total",
                &[("kind", kind)],
                v as f64,
            );
        }
        e.family(
            "peregrine_neighbour_next_hop_events_total",
            MKind::Counter,
            "Next-hop entries: resolved (a MAC appeared or changed), confirmed, failed (resolution gave up), aged_out (probes unanswered, MAC withdrawn), republished (route tables published), solicits_not_sent.",
        );
        for (event, v) in [
            ("resolved", n.resolved),
            ("confirmed", n.confirmed),
            ("failed", n.failed),
            ("aged_out", n.aged_out),
            ("republished", n.republished),
            ("solicits_not_sent", self.not_sent),
        ] {
            e.sample(
                "peregrine_neighbour_next_hop_events_total",
                &[("event", event)],
                v as f64,
            );
        }
        e.family(
            "peregrine_neighbour_next_hops",
            MKind::Gauge,
            "Route gateways per resolution state (RFC 4861 section 7.3.2).",
        );
        let mut by = [0u32; 5];
        for (_, en) in self.resolver.entries() {
            by[match en.state {
                State::Incomplete { .. } => 0,
                State::Reachable => 1,
                State::Stale => 2,
                State::Probe { .. } => 3,
                State::Failed => 4,
            }] += 1;
        }
        for (state, v) in ["incomplete", "reachable", "stale", "probe", "failed"]
            .iter()
            .zip(by)
        {
            e.sample(
                "peregrine_neighbour_next_hops",
                &[("state", state)],
                f64::from(v),
            );
        }
        e.family(
            "peregrine_neighbour_responder_total",
            MKind::Counter,
            "ARP / ND responder: arp_replies and na_sent (answers for our addresses), learned (neighbours added or changed), malformed frames.",
        );
        for (event, v) in [
            ("arp_replies", r.arp_replies_sent),
            ("na_sent", r.na_sent),
            ("learned", r.learned),
            ("malformed", r.malformed),
        ] {
            e.sample(
                "peregrine_neighbour_responder_total",
                &[("event", event)],
                v as f64,
            );
        }
    }

    /// The responder's counters, logged at the end as before.
    pub fn log_stats(&self) {
        let s = self.responder.stats();
        tracing::info!(
            arp_replies = s.arp_replies_sent,
            neighbour_adverts = s.na_sent,
            learned = s.learned,
            neighbours = self.responder.table().len(),
            malformed = s.malformed,
            "neighbour responder"
        );
    }
}
