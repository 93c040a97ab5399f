//! The UPF's rule side of the N4 endpoint ([`DaemonRules`]: compiler, snapshot publisher,
//! usage from the workers' counters, quota enforcement) and End Markers sent through the
//! workers.

use crate::n4::SessionRules;
use peregrine_dataplane::runtime::Publisher;
use peregrine_dataplane::upf::tables::FarAction;
use peregrine_dataplane::upf::{UpfStats, UpfTables};
use peregrine_n4::usage::Usage;
use peregrine_n4::{Reject, Session};
use peregrine_rules::Compiler;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// A URR's Volume and Time Quota (TS 29.244 sections 8.2.50, 8.2.51).
type Quotas = (Option<peregrine_pfcp::ie::Volume>, Option<u32>);

fn quotas(u: &peregrine_n4::Urr) -> Quotas {
    (u.volume_quota, u.time_quota)
}

/// The rule side of the N4 endpoint: the compiler, the snapshot publisher the workers read,
/// and the workers' usage counters.
pub struct DaemonRules {
    pub compiler: Compiler,
    pub publisher: Arc<Publisher<UpfTables>>,
    pub stats: Vec<Arc<UpfStats>>,
    /// (SEID, URR ID) whose volume or time quota is used up, with the quotas then in force:
    /// their PDRs' FARs are compiled as DROP until the SMF provisions a new quota (Update
    /// URR with a Volume or Time Quota of another value).
    exhausted: BTreeMap<(u64, u32), Quotas>,
    /// (generation, publish time in the publisher's clock) of recent publishes.
    published_at: std::collections::VecDeque<(u64, u64)>,
}

impl std::fmt::Debug for DaemonRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonRules")
            .field("sessions", &self.compiler.stats().sessions)
            .finish()
    }
}

impl DaemonRules {
    pub fn new(
        compiler: Compiler,
        publisher: Arc<Publisher<UpfTables>>,
        stats: Vec<Arc<UpfStats>>,
    ) -> DaemonRules {
        DaemonRules {
            compiler,
            publisher,
            stats,
            exhausted: BTreeMap::new(),
            published_at: std::collections::VecDeque::new(),
        }
    }

    /// A session with the FARs of PDRs that count against an exhausted quota set to DROP
    /// (TS 29.244 section 5.2.2.2: forwarding stops when the quota is reached).
    fn enforce_quota(&mut self, s: &Session) -> Option<Session> {
        // A new quota (or a removed URR) lifts the block.
        self.exhausted.retain(|(seid, urr), q| {
            *seid != s.up_seid || s.urrs.get(urr).is_some_and(|u| quotas(u) == *q)
        });
        let ids: Vec<u32> = self
            .exhausted
            .range((s.up_seid, 0)..=(s.up_seid, u32::MAX))
            .map(|((_, u), _)| *u)
            .collect();
        if ids.is_empty() {
            return None;
        }
        let mut s = s.clone();
        let fars: BTreeSet<u32> = s
            .pdrs
            .values()
            .filter(|p| p.urr_ids.iter().any(|u| ids.contains(u)))
            .map(|p| p.far_id)
            .collect();
        for f in fars {
            if let Some(far) = s.fars.get_mut(&f) {
                far.apply_action =
                    peregrine_pfcp::ie::Bitmap(peregrine_pfcp::ie::apply_action::DROP);
                far.forwarding = None;
            }
        }
        Some(s)
    }
}

impl SessionRules for DaemonRules {
    fn upsert(&mut self, s: &Session) -> Result<(), Reject> {
        let r = match self.enforce_quota(s) {
            Some(q) => self.compiler.upsert(&q),
            None => self.compiler.upsert(s),
        };
        r.map_err(|e| e.reject())
    }

    fn check(&self, s: &Session) -> Result<(), Reject> {
        self.compiler.check(s).map_err(|e| e.reject())
    }

    fn remove(&mut self, up_seid: u64) {
        self.compiler.remove(up_seid);
        self.exhausted.retain(|(seid, _), _| *seid != up_seid);
    }

    fn publish(&mut self) -> u64 {
        // Free the versions the workers have left first: the build recycles their shard
        // arrays instead of copying one (`ShardTable::update`).
        self.publisher.reclaim();
        let g = self.publisher.publish(self.compiler.build());
        let at = self.publisher.now_ns();
        self.publisher.reclaim();
        if self.published_at.len() == 1024 {
            self.published_at.pop_front();
        }
        self.published_at.push_back((g, at));
        g
    }

    fn seen(&mut self, g: u64) -> Option<Duration> {
        let seen = self.publisher.seen_at(g)?;
        // Generations are published in order; forget the ones before `g`.
        while self.published_at.front().is_some_and(|(pg, _)| *pg < g) {
            self.published_at.pop_front();
        }
        let at = match self.published_at.front() {
            Some(&(pg, at)) if pg == g => at,
            _ => seen,
        };
        Some(Duration::from_nanos(seen.saturating_sub(at)))
    }

    fn usage(&mut self, up_seid: u64, urr_id: u32) -> Option<Usage> {
        let slot = self.compiler.urr_slot(up_seid, urr_id)?;
        let mut u = Usage::default();
        let (mut first, mut last) = (u64::MAX, 0u64);
        for st in &self.stats {
            let w = st.urr(slot);
            u.ul_bytes += w.ul_bytes;
            u.dl_bytes += w.dl_bytes;
            u.ul_pkts += w.ul_pkts;
            u.dl_pkts += w.dl_pkts;
            if w.ul_pkts + w.dl_pkts > 0 {
                first = first.min(w.first_pkt_ns);
                last = last.max(w.last_pkt_ns);
            }
        }
        // Worker clocks start a few milliseconds before the N4 clock; Time of First / Last
        // Packet is reported to the second, so the offset is not corrected.
        if first != u64::MAX {
            u.first_pkt_ns = Some(first);
            u.last_pkt_ns = Some(last);
        }
        Some(u)
    }

    fn quota_exhausted(&mut self, session: &Session, urr_id: u32) {
        let q = session.urrs.get(&urr_id).map(quotas).unwrap_or_default();
        self.exhausted.insert((session.up_seid, urr_id), q);
        if let Err(r) = self.upsert(session) {
            tracing::error!(
                seid = session.up_seid,
                cause = r.cause,
                "cannot stop forwarding at quota"
            );
        }
    }
}

/// GTP-U frames (End Markers, Echo Requests) built from the route table and sent through
/// worker 0's tx queue.
#[derive(Debug)]
pub struct InjectGtpu {
    pub frames: crate::gtpu_frames::GtpuFrames,
    pub injector: peregrine_dataplane::runtime::Injector,
}

impl crate::n4::GtpuSink for InjectGtpu {
    fn echo_request(&mut self, peer: IpAddr, seq: u16) -> bool {
        let sent = self
            .frames
            .echo_request(peer, seq)
            .map_err(|e| e.to_string())
            .and_then(|(port, f)| self.injector.inject(0, port, &f).map_err(|e| e.to_string()));
        if let Err(e) = &sent {
            tracing::warn!(%peer, seq, %e, "GTP-U Echo Request not sent");
        }
        sent.is_ok()
    }

    fn end_marker(
        &mut self,
        seid: u64,
        far_id: u32,
        old: &peregrine_pfcp::ie::OuterHeaderCreation,
    ) -> bool {
        let (port, frame) = match self.frames.end_marker(old) {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(seid, far_id, %e, "End Marker not built");
                return false;
            }
        };
        match self.injector.inject(0, port, &frame) {
            Ok(()) => {
                tracing::info!(seid, far_id, teid = ?old.teid, peer = ?old.ipv4.map(IpAddr::V4).or(old.ipv6.map(IpAddr::V6)), "End Marker sent on the old tunnel");
                true
            }
            Err(e) => {
                tracing::warn!(seid, far_id, %e, "End Marker not sent");
                false
            }
        }
    }
}

/// NTP seconds now (TS 29.244 section 8.2.65 Recovery Time Stamp: seconds since 1900).
pub fn ntp_now() -> u32 {
    const NTP_UNIX_OFFSET: u64 = 2_208_988_800;
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    (unix + NTP_UNIX_OFFSET) as u32
}

/// The session and PDR a buffered downlink frame belongs to: its destination is a UE
/// address whose first matching downlink PDR has a buffering FAR.
pub(super) fn buffered_downlink(t: &UpfTables, frame: &[u8]) -> Option<(u64, u16)> {
    use peregrine_wire::{ethernet::ethertype, ipv4, ipv6, vlan};
    let (l3, et) = vlan::l3_offset(frame).ok()?;
    let (shard, range) = match et {
        ethertype::IPV4 => {
            let ip = ipv4::Packet::new_checked(frame.get(l3..)?).ok()?;
            let ue = u32::from(ip.dst_addr());
            let sh = t.ue_v4_shard(ue);
            (sh, *sh.by_ue_v4.get(&ue)?)
        }
        ethertype::IPV6 => {
            let ip = ipv6::Packet::new_checked(frame.get(l3..)?).ok()?;
            let p64 = (u128::from(ip.dst_addr()) >> 64) as u64;
            let sh = t.ue_v6_shard(p64);
            (sh, *sh.by_ue_v6.get(&p64)?)
        }
        _ => return None,
    };
    let order = shard.pdr_order.get(range.0 as usize..range.1 as usize)?;
    order.iter().find_map(|&i| {
        let pdr = shard.pdrs.get(i as usize)?;
        let far = shard.fars.get(pdr.far as usize)?;
        match far.action {
            FarAction::Buffer { .. } => Some((
                shard.sessions.get(pdr.session as usize)?.up_seid,
                pdr.pdr_id,
            )),
            _ => None,
        }
    })
}
