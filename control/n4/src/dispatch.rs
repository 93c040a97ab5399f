//! Receiving a datagram (TS 29.244 sections 6.4, 7.6): header peek, the response cache,
//! decode errors and the dispatch of each request to its procedure.

use super::*;

/// Header fields readable without a full decode.
#[derive(Debug, Clone, Copy)]
struct Peek {
    version: u8,
    msg_type: u8,
    seq: u32,
    seid: Option<u64>,
}

fn peek(b: &[u8]) -> Option<Peek> {
    let f = *b.first()?;
    let msg_type = *b.get(1)?;
    let s = f & 1 != 0;
    let (seq_at, seid) = if s {
        let v = b.get(4..12)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(v);
        (12, Some(u64::from_be_bytes(a)))
    } else {
        (4, None)
    };
    let q = b.get(seq_at..seq_at + 3)?;
    Some(Peek {
        version: f >> 5,
        msg_type,
        seq: u32::from_be_bytes([0, q[0], q[1], q[2]]),
        seid,
    })
}

/// The SEID of the top-level CP F-SEID IE (type 57) of a request that does not decode as a
/// whole, if its header and the IEs up to that one can be walked: a rejected Session
/// Establishment is answered with that SEID rather than 0 when the CP sent one we can read
/// (TS 29.244 section 7.2.2.4.2).
fn readable_cp_seid(b: &[u8]) -> Option<u64> {
    let f = *b.first()?;
    let len = usize::from(u16::from_be_bytes([*b.get(2)?, *b.get(3)?]));
    let ies_at = if f & 1 != 0 { 16 } else { 8 };
    let body = b.get(ies_at..(4 + len).min(b.len()))?;
    for ie in peregrine_pfcp::ie::IeIter::new(body) {
        let ie = ie.ok()?;
        if ie.ie_type == peregrine_pfcp::ie::ie_type::F_SEID {
            let v: [u8; 8] = ie.value.get(1..9)?.try_into().ok()?;
            return Some(u64::from_be_bytes(v));
        }
    }
    None
}

fn is_answered_request(m: u8) -> bool {
    matches!(
        m,
        mt::HEARTBEAT_REQUEST
            | mt::ASSOCIATION_SETUP_REQUEST
            | mt::ASSOCIATION_UPDATE_REQUEST
            | mt::ASSOCIATION_RELEASE_REQUEST
            | mt::SESSION_ESTABLISHMENT_REQUEST
            | mt::SESSION_MODIFICATION_REQUEST
            | mt::SESSION_DELETION_REQUEST
    )
}

/// The Failed Rule ID IE of a rejection, if it names one.
pub(crate) fn failed_rule_ie(r: &Reject) -> Vec<Ie> {
    r.failed_rule.map(Ie::FailedRuleId).into_iter().collect()
}

/// The Cause of a response body, for the statistics.
fn response_cause(b: &Body) -> Option<u8> {
    match b {
        Body::AssociationSetupResponse(r)
        | Body::AssociationUpdateResponse(r)
        | Body::AssociationReleaseResponse(r) => Some(r.cause),
        Body::SessionEstablishmentResponse(r) => Some(r.cause),
        Body::SessionModificationResponse(r)
        | Body::SessionDeletionResponse(r)
        | Body::SessionReportResponse(r) => Some(r.cause),
        _ => None,
    }
}

impl Node {
    pub(crate) fn alloc_seq(&mut self) -> u32 {
        let s = self.next_seq;
        self.next_seq = (self.next_seq + 1) & 0x00ff_ffff;
        if self.next_seq == 0 {
            self.next_seq = 1;
        }
        s
    }

    pub(crate) fn expire_cache(&mut self, now: Nanos) {
        let keep = nanos(self.config.response_retention);
        while let Some(&(at, peer, seq)) = self.cache_order.front() {
            let expired = at.saturating_add(keep) <= now;
            if !expired && self.cache.len() <= self.config.response_cache_capacity {
                break;
            }
            self.cache_order.pop_front();
            if self.cache.get(&(peer, seq)).is_some_and(|c| c.at == at) {
                self.cache.remove(&(peer, seq));
            }
        }
    }

    /// Process one datagram from `peer` received at `now`; responses that carry usage
    /// report the usage last fed with [`Node::update_usage`].
    pub fn handle(&mut self, now: Nanos, peer: SocketAddr, datagram: &[u8]) -> Vec<Output> {
        self.handle_with(now, peer, datagram, &mut LastFed)
    }

    /// [`Node::handle`], asking `usage` for the latest usage of each URR a response reports
    /// (Session Deletion, Remove / Query URR), after the request has been validated.
    pub fn handle_with(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        datagram: &[u8],
        usage: &mut dyn UsageSource,
    ) -> Vec<Output> {
        let mut out = Vec::new();
        self.handle_inner(now, peer, datagram, usage, &mut out);
        self.account(&out);
        out
    }

    pub(crate) fn handle_inner(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        datagram: &[u8],
        usage: &mut dyn UsageSource,
        out: &mut Vec<Output>,
    ) {
        self.expire_cache(now);
        let pk = peek(datagram);
        if let Some(p) = pk {
            bump(&mut self.stats.rx, p.msg_type);
        }
        // Section 6.4: a retransmitted request gets the same answer, not a second execution.
        if let Some(p) = pk.filter(|p| p.version == 1 && is_answered_request(p.msg_type)) {
            if let Some(c) = self.cache.get(&(peer, p.seq)) {
                if c.msg_type == p.msg_type {
                    out.push(Output::Send {
                        to: peer,
                        bytes: c.bytes.clone(),
                    });
                    self.stats.duplicates += 1;
                    return;
                }
            }
        }
        let parsed = Message::parse(datagram);
        if let Err(e) = &parsed {
            bump(&mut self.stats.decode_errors, e.kind());
        }
        match parsed {
            Ok(m) => self.dispatch(now, peer, m, usage, out),
            Err(e) => match e.action() {
                Action::Discard => {}
                Action::VersionNotSupported => {
                    // Section 7.4.4.7: header only, echoing the sequence number if readable.
                    let msg = Message {
                        seq: pk.map_or(0, |p| p.seq),
                        seid: None,
                        priority: None,
                        fo: false,
                        body: Body::VersionNotSupportedResponse,
                    };
                    if let Ok(bytes) = msg.to_vec() {
                        out.push(Output::Send { to: peer, bytes });
                    }
                }
                Action::Reject {
                    cause,
                    offending_ie,
                } => {
                    if let Some(p) = pk.filter(|p| {
                        p.version == 1
                            && is_answered_request(p.msg_type)
                            && p.msg_type != mt::HEARTBEAT_REQUEST
                    }) {
                        let rej = Reject::new(cause, offending_ie);
                        let cp_seid = if p.msg_type == mt::SESSION_ESTABLISHMENT_REQUEST {
                            // No session yet: the CP's SEID is in the request's F-SEID, if
                            // that IE can be read although the message as a whole cannot.
                            readable_cp_seid(datagram).unwrap_or(0)
                        } else {
                            p.seid
                                .and_then(|s| self.sessions.get(&s))
                                .and_then(|st| compact::peer(&st.rules))
                                .map_or(0, |(_, cp)| cp.seid)
                        };
                        if let Some(body) = self.reject_body(p.msg_type, rej) {
                            let seid = mt::is_session(p.msg_type).then_some(cp_seid);
                            self.respond(now, peer, p.seq, seid, body, out);
                        }
                    }
                }
            },
        }
    }

    /// Response body of the request type `req` carrying a rejection.
    pub(crate) fn reject_body(&self, req: u8, r: Reject) -> Option<Body> {
        let assoc = |rts| AssociationResponse {
            node_id: self.config.node_id.clone(),
            cause: r.cause,
            recovery_time_stamp: rts,
            up_function_features: None,
            extra: Vec::new(),
        };
        let sess = SessionResponse {
            cause: r.cause,
            offending_ie: r.offending_ie,
            created_pdr: Vec::new(),
            usage_report: Vec::new(),
            extra: failed_rule_ie(&r),
        };
        Some(match req {
            mt::ASSOCIATION_SETUP_REQUEST => {
                Body::AssociationSetupResponse(assoc(Some(self.config.recovery_time_stamp)))
            }
            mt::ASSOCIATION_UPDATE_REQUEST => Body::AssociationUpdateResponse(assoc(None)),
            mt::ASSOCIATION_RELEASE_REQUEST => Body::AssociationReleaseResponse(assoc(None)),
            mt::SESSION_ESTABLISHMENT_REQUEST => {
                Body::SessionEstablishmentResponse(SessionEstablishmentResponse {
                    node_id: self.config.node_id.clone(),
                    cause: r.cause,
                    offending_ie: r.offending_ie,
                    up_f_seid: None,
                    created_pdr: Vec::new(),
                    extra: failed_rule_ie(&r),
                })
            }
            mt::SESSION_MODIFICATION_REQUEST => Body::SessionModificationResponse(sess),
            mt::SESSION_DELETION_REQUEST => Body::SessionDeletionResponse(sess),
            _ => return None,
        })
    }

    /// Emit, cache (section 6.4) and queue a response.
    pub(crate) fn respond(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        seq: u32,
        seid: Option<u64>,
        body: Body,
        out: &mut Vec<Output>,
    ) {
        let req_type = body.msg_type() - 1;
        if let Some(c) = response_cause(&body) {
            bump(&mut self.stats.responses, (body.msg_type(), c));
        }
        let msg = Message {
            seq,
            seid,
            priority: None,
            fo: false,
            body,
        };
        let Ok(bytes) = msg.to_vec() else { return };
        self.cache.insert(
            (peer, seq),
            Cached {
                msg_type: req_type,
                at: now,
                bytes: bytes.clone(),
            },
        );
        self.cache_order.push_back((now, peer, seq));
        self.expire_cache(now);
        out.push(Output::Send { to: peer, bytes });
    }

    pub(crate) fn dispatch(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        m: Message,
        usage: &mut dyn UsageSource,
        out: &mut Vec<Output>,
    ) {
        let seq = m.seq;
        // Every IE of a session request is honoured, informational, refused or (unknown
        // type) discarded and counted: see [`audit`].
        let audited = match &m.body {
            Body::SessionEstablishmentRequest(_) => {
                audit::establishment(&m.body.to_ies(), &mut self.stats.ies_discarded)
            }
            Body::SessionModificationRequest(_) => {
                audit::modification(&m.body.to_ies(), &mut self.stats.ies_discarded)
            }
            _ => Ok(()),
        };
        match m.body {
            Body::HeartbeatRequest(_) => {
                let body = Body::HeartbeatResponse(Heartbeat {
                    recovery_time_stamp: self.config.recovery_time_stamp,
                    extra: Vec::new(),
                });
                self.respond(now, peer, seq, None, body, out);
            }
            Body::HeartbeatResponse(_) => {
                if let Some(a) = self.associations.get_mut(&peer) {
                    a.hb.unanswered = 0;
                }
            }
            Body::AssociationSetupRequest(r) => self.association_setup(now, peer, seq, r, out),
            Body::AssociationUpdateRequest(r) => {
                let cause = match self.associations.get_mut(&peer) {
                    Some(a) => {
                        if r.up_function_features.is_some() {
                            a.cp_features = r.up_function_features;
                        }
                        cause::REQUEST_ACCEPTED
                    }
                    None => cause::NO_ESTABLISHED_PFCP_ASSOCIATION,
                };
                let body = self.assoc_response(cause, false);
                self.respond(
                    now,
                    peer,
                    seq,
                    None,
                    Body::AssociationUpdateResponse(body),
                    out,
                );
            }
            Body::AssociationReleaseRequest(_) => {
                let cause = if self.associations.contains_key(&peer) {
                    self.release(now, peer, DownReason::Released, out);
                    cause::REQUEST_ACCEPTED
                } else {
                    cause::NO_ESTABLISHED_PFCP_ASSOCIATION
                };
                let body = self.assoc_response(cause, false);
                self.respond(
                    now,
                    peer,
                    seq,
                    None,
                    Body::AssociationReleaseResponse(body),
                    out,
                );
            }
            Body::SessionEstablishmentRequest(r) => {
                self.establish(now, peer, seq, r, audited, usage, out)
            }
            Body::SessionModificationRequest(r) => {
                let seid = m.seid.unwrap_or(0);
                self.modify(now, peer, seq, seid, r, audited, usage, out)
            }
            Body::SessionDeletionRequest(_) => {
                let seid = m.seid.unwrap_or(0);
                // Section 7.5.7: a final Usage Report per URR (trigger TERMR).
                let ids: Vec<u32> = self
                    .sessions
                    .get(&seid)
                    .map(|st| st.meters.keys().copied().collect())
                    .unwrap_or_default();
                let reports = self.final_reports(now, seid, &ids, t::USAGE_REPORT_SDR, usage);
                let (cause, hdr) = match self.remove_session(now, seid) {
                    Some(s) => {
                        out.push(Output::Event(Event::SessionDeleted { seid }));
                        (cause::REQUEST_ACCEPTED, s.cp_f_seid.seid)
                    }
                    None => (cause::SESSION_CONTEXT_NOT_FOUND, 0),
                };
                let body = Body::SessionDeletionResponse(SessionResponse {
                    cause,
                    offending_ie: None,
                    created_pdr: Vec::new(),
                    usage_report: reports,
                    extra: Vec::new(),
                });
                self.respond(now, peer, seq, Some(hdr), body, out);
            }
            Body::SessionReportResponse(r) => self.report_answered(peer, seq, r.cause),
            Body::NodeReportResponse(r) => self.node_report_answered(peer, seq, r.cause),
            // Responses to requests we never send, Session Report Request (UP -> CP only),
            // Version Not Supported: nothing to do.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cp_seid_of_a_refused_establishment_is_read_if_it_can_be() {
        // Header without SEID, then Node ID (60, IPv4), then F-SEID (57: flags v4, SEID 0x9103,
        // address): the CP SEID is found behind the IE before it.
        let mut m = vec![0x20, 50, 0, 0, 0, 0, 7, 0];
        m.extend_from_slice(&[0, 60, 0, 5, 0, 10, 0, 0, 1]);
        m.extend_from_slice(&[0, 57, 0, 13, 2, 0, 0, 0, 0, 0, 0, 0x91, 0x03, 10, 0, 0, 1]);
        let len = (m.len() - 4) as u16;
        m[2..4].copy_from_slice(&len.to_be_bytes());
        assert_eq!(readable_cp_seid(&m), Some(0x9103));
        // An IE before it that overruns the message: nothing readable.
        let mut bad = m.clone();
        bad[10..12].copy_from_slice(&0xfff0u16.to_be_bytes());
        assert_eq!(readable_cp_seid(&bad), None);
        // No F-SEID, or one too short for its SEID.
        assert_eq!(readable_cp_seid(&m[..17]), None);
        let mut short = m[..17].to_vec();
        short.extend_from_slice(&[0, 57, 0, 3, 2, 0, 0]);
        let len = (short.len() - 4) as u16;
        short[2..4].copy_from_slice(&len.to_be_bytes());
        assert_eq!(readable_cp_seid(&short), None);
    }

    #[test]
    fn peek_reads_what_it_can() {
        assert!(peek(&[]).is_none());
        assert!(peek(&[0x20, 1, 0, 0]).is_none());
        let p = peek(&[0x20, 5, 0, 4, 0, 1, 2, 0]).unwrap();
        assert_eq!((p.version, p.msg_type, p.seq, p.seid), (1, 5, 0x102, None));
        let mut s = vec![0x21, 52, 0, 12, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 3, 0];
        let p = peek(&s).unwrap();
        assert_eq!((p.seq, p.seid), (3, Some(9)));
        s.truncate(14);
        assert!(peek(&s).is_none());
    }

    #[test]
    fn sequence_numbers_stay_24_bit_and_nonzero() {
        let mut n = Node::new(NodeConfig::new(NodeId::Ipv4(Ipv4Addr::LOCALHOST), 1, None));
        n.next_seq = 0x00ff_ffff;
        assert_eq!(n.alloc_seq(), 0x00ff_ffff);
        assert_eq!(n.alloc_seq(), 1);
    }
}
