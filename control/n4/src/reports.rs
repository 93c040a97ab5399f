//! Session reports (TS 29.244 sections 5.2.2, 5.2.3, 6.4, 7.5.8): usage reports on
//! thresholds, quotas and periods, downlink data reports, their retransmission, and the final
//! usage reports of deletion and modification responses.

use super::*;

impl Node {
    /// Section 6.4: resend unanswered Session Report Requests every T1; after N1
    /// retransmissions give up (`ReportTimedOut`).
    pub(crate) fn retransmit_reports(&mut self, now: Nanos, out: &mut Vec<Output>) {
        let t1 = nanos(self.config.t1);
        let due: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| p.next_at <= now)
            .map(|(&s, _)| s)
            .collect();
        for seq in due {
            let Some(p) = self.pending.get_mut(&seq) else {
                continue;
            };
            if p.retransmissions >= self.config.n1 {
                let seid = p.seid;
                self.pending.remove(&seq);
                self.stats.reports_timed_out += 1;
                out.push(Output::Event(Event::ReportTimedOut { seid, seq }));
                continue;
            }
            p.retransmissions += 1;
            p.next_at = now.saturating_add(t1);
            self.stats.reports_retransmitted += 1;
            out.push(Output::Send {
                to: p.peer,
                bytes: p.bytes.clone(),
            });
        }
    }

    /// Feed the cumulative usage of a URR (see [`Usage`]) and send the Session Report Request
    /// its volume threshold or quota calls for, if any (section 5.2.2.2). Unknown session or
    /// URR: nothing.
    pub fn update_usage(
        &mut self,
        now: Nanos,
        up_seid: u64,
        urr_id: u32,
        usage: Usage,
    ) -> Vec<Output> {
        let mut out = Vec::new();
        let meter = self.sessions.get_mut(&up_seid);
        if let Some(m) = meter.and_then(|st| st.meters.get_mut(&urr_id)) {
            m.feed(usage);
            self.check_urr(now, up_seid, urr_id, &mut out);
        }
        self.account(&out);
        out
    }

    /// Evaluate the URR's triggers and report if one holds; then file the meter's next
    /// deadline (see [`timers`]).
    pub(crate) fn check_urr(&mut self, now: Nanos, seid: u64, urr_id: u32, out: &mut Vec<Output>) {
        let Some(st) = self.sessions.get_mut(&seid) else {
            return;
        };
        let urr = compact::find_urr(&st.rules, urr_id);
        let Some(m) = st.meters.get_mut(&urr_id) else {
            return;
        };
        let Some(urr) = urr else {
            // A meter without its rule (cannot happen: meters follow the rules): disarm it
            // rather than fire forever.
            self.urr_index.update(seid, urr_id, m, None);
            return;
        };
        let bits = m.due(&urr, now);
        let g = (bits != 0)
            .then(|| m.report(&urr, t::USAGE_REPORT_SRR, bits, now, self.config.ntp_origin));
        self.urr_index.update(seid, urr_id, m, Some(&urr));
        let Some(g) = g else {
            return;
        };
        if bits & (urt::VOLQU | urt::TIMQU) != 0 {
            out.push(Output::Event(Event::QuotaExhausted { seid, urr_id }));
        }
        self.send_report(
            now,
            seid,
            SessionReportRequest {
                report_type: Bitmap(report_type::USAR),
                downlink_data_report: None,
                usage_report: vec![g],
                extra: Vec::new(),
            },
            out,
        );
    }

    /// Send a Session Report Request (section 7.5.8) for session `seid` to its CP function
    /// and keep it for retransmission.
    pub(crate) fn send_report(
        &mut self,
        now: Nanos,
        seid: u64,
        r: SessionReportRequest,
        out: &mut Vec<Output>,
    ) {
        let Some((peer, cp)) = self
            .sessions
            .get(&seid)
            .and_then(|st| compact::peer(&st.rules))
        else {
            return;
        };
        let hdr = cp.seid;
        let seq = self.alloc_seq();
        let msg = Message {
            seq,
            seid: Some(hdr),
            priority: None,
            fo: false,
            body: Body::SessionReportRequest(r),
        };
        let Ok(bytes) = msg.to_vec() else { return };
        self.pending.insert(
            seq,
            PendingReport {
                peer,
                seid,
                node: false,
                bytes: bytes.clone(),
                next_at: now.saturating_add(nanos(self.config.t1)),
                retransmissions: 0,
            },
        );
        self.stats.reports_sent += 1;
        out.push(Output::Send { to: peer, bytes });
    }

    /// The dataplane buffered the first downlink packet for `pdr_id` (section 5.2.3.1). If
    /// the PDR's FAR buffers and asks to notify the CP function (BUFF and NOCP), send one
    /// Session Report Request with a Downlink Data Report; further packets of the same
    /// buffering episode send nothing. The episode ends when the FAR is updated or removed
    /// (e.g. to FORW after paging). The BAR's Suggested Buffering Packets Count sizes the
    /// dataplane's buffer and does not change reporting.
    pub fn downlink_data(&mut self, now: Nanos, up_seid: u64, pdr_id: u16) -> Vec<Output> {
        let mut out = Vec::new();
        let far = self.session(up_seid).and_then(|s| {
            let f = s.fars.get(&s.pdrs.get(&pdr_id)?.far_id)?;
            let notify = f
                .apply_action
                .contains(apply_action::BUFF | apply_action::NOCP);
            notify.then_some(f.id)
        });
        if let Some(far) = far {
            if self.dldr_reported.insert((up_seid, far)) {
                let r = SessionReportRequest {
                    report_type: Bitmap(report_type::DLDR),
                    downlink_data_report: Some(Grouped::new(
                        t::DOWNLINK_DATA_REPORT,
                        vec![Ie::PdrId(pdr_id)],
                    )),
                    usage_report: Vec::new(),
                    extra: Vec::new(),
                };
                self.send_report(now, up_seid, r, &mut out);
            }
        }
        self.account(&out);
        out
    }

    /// Session Report Response (section 7.5.9) to one of our requests: accepted completes
    /// it; 65 (the CP function has no such session) drops every report of the session;
    /// other rejections complete it too (counted). Retransmitted responses match nothing.
    pub(crate) fn report_answered(&mut self, peer: SocketAddr, seq: u32, c: u8) {
        let Some(p) = self.pending.get(&seq).filter(|p| p.peer == peer && !p.node) else {
            self.stats.reports_unexpected_responses += 1;
            return;
        };
        let seid = p.seid;
        self.pending.remove(&seq);
        if cause::is_accepted(c) {
            self.stats.reports_acknowledged += 1;
        } else {
            self.stats.reports_rejected += 1;
            if c == cause::SESSION_CONTEXT_NOT_FOUND {
                self.pending.retain(|_, p| p.seid != seid);
            }
        }
    }

    /// Usage Reports of type `ie_type` with trigger TERMR (removed URR, deleted session) for
    /// `ids` of session `seid`, after asking `usage` for the latest counters.
    pub(crate) fn final_reports(
        &mut self,
        now: Nanos,
        seid: u64,
        ids: &[u32],
        ie_type: u16,
        usage: &mut dyn UsageSource,
    ) -> Vec<Grouped> {
        self.usage_reports(now, seid, ids, ie_type, urt::TERMR, usage)
    }

    pub(crate) fn usage_reports(
        &mut self,
        now: Nanos,
        seid: u64,
        ids: &[u32],
        ie_type: u16,
        trigger: u64,
        usage: &mut dyn UsageSource,
    ) -> Vec<Grouped> {
        let mut v = Vec::new();
        let Some(st) = self.sessions.get_mut(&seid) else {
            return v;
        };
        for id in ids {
            let u = compact::find_urr(&st.rules, *id);
            let (Some(u), Some(m)) = (u, st.meters.get_mut(id)) else {
                continue;
            };
            if let Some(x) = usage.usage(seid, *id) {
                m.feed(x);
            }
            v.push(m.report(&u, ie_type, trigger, now, self.config.ntp_origin));
            // A report starts a new interval: the Time Threshold counts from now.
            self.urr_index.update(seid, *id, m, Some(&u));
        }
        v
    }

    /// GTP-U path supervision due at `now` (see [`path`]): Echo Requests to send, and one
    /// Node Report Request per associated CP function for the paths that failed (UPFR) or
    /// recovered (UPRR).
    pub(crate) fn poll_paths(&mut self, now: Nanos, out: &mut Vec<Output>) {
        let mut po = Vec::new();
        self.paths.poll(now, &mut po);
        self.path_outputs(now, po, out);
    }

    /// An Echo Response (TS 29.281 section 7.2.2) from the GTP-U peer `peer` with `seq`.
    pub fn echo_response(&mut self, now: Nanos, peer: IpAddr, seq: u16) -> Vec<Output> {
        let mut po = Vec::new();
        self.paths.on_response(now, peer, seq, &mut po);
        let mut out = Vec::new();
        self.path_outputs(now, po, &mut out);
        self.account(&out);
        out
    }

    fn path_outputs(&mut self, now: Nanos, po: Vec<path::PathOut>, out: &mut Vec<Output>) {
        use path::PathOut as P;
        let (mut failed, mut recovered) = (Vec::new(), Vec::new());
        for o in po {
            match o {
                P::Echo { peer, seq } => out.push(Output::Echo { peer, seq }),
                P::Failed { peer } => {
                    failed.push(peer);
                    out.push(Output::Event(Event::PathFailed { peer }));
                }
                P::Recovered { peer } => {
                    recovered.push(peer);
                    out.push(Output::Event(Event::PathRecovered { peer }));
                }
            }
        }
        if failed.is_empty() && recovered.is_empty() {
            return;
        }
        let group = |ty: u16, peers: &[IpAddr]| {
            (!peers.is_empty()).then(|| {
                let ies = peers
                    .iter()
                    .map(|a| {
                        Ie::RemoteGtpuPeer(RemoteGtpuPeer {
                            ipv4: match a {
                                IpAddr::V4(x) => Some(*x),
                                IpAddr::V6(_) => None,
                            },
                            ipv6: match a {
                                IpAddr::V6(x) => Some(*x),
                                IpAddr::V4(_) => None,
                            },
                            ..RemoteGtpuPeer::default()
                        })
                    })
                    .collect();
                Grouped::new(ty, ies)
            })
        };
        let mut nrt = 0;
        if !failed.is_empty() {
            nrt |= node_report_type::UPFR;
        }
        if !recovered.is_empty() {
            nrt |= node_report_type::UPRR;
        }
        let body = NodeReportRequest {
            node_id: self.config.node_id.clone(),
            node_report_type: Bitmap(nrt),
            path_failure: group(t::USER_PLANE_PATH_FAILURE_REPORT, &failed),
            path_recovery: group(t::USER_PLANE_PATH_RECOVERY_REPORT, &recovered),
            extra: Vec::new(),
        };
        let peers: Vec<SocketAddr> = self.associations.keys().copied().collect();
        for peer in peers {
            let seq = self.alloc_seq();
            let msg = Message {
                seq,
                seid: None,
                priority: None,
                fo: false,
                body: Body::NodeReportRequest(body.clone()),
            };
            let Ok(bytes) = msg.to_vec() else { continue };
            self.pending.insert(
                seq,
                PendingReport {
                    peer,
                    seid: 0,
                    node: true,
                    bytes: bytes.clone(),
                    next_at: now.saturating_add(nanos(self.config.t1)),
                    retransmissions: 0,
                },
            );
            self.stats.node_reports_sent += 1;
            out.push(Output::Send { to: peer, bytes });
        }
    }

    /// Node Report Response (section 7.4.5.2) to one of our Node Report Requests.
    pub(crate) fn node_report_answered(&mut self, peer: SocketAddr, seq: u32, c: u8) {
        if self
            .pending
            .get(&seq)
            .is_none_or(|p| p.peer != peer || !p.node)
        {
            self.stats.reports_unexpected_responses += 1;
            return;
        }
        self.pending.remove(&seq);
        if cause::is_accepted(c) {
            self.stats.node_reports_acknowledged += 1;
        } else {
            self.stats.node_reports_rejected += 1;
        }
    }

    /// GTP-U peers the FARs of `s` send to (Outer Header Creation with a TEID), one entry per
    /// FAR: the path supervision's use counts.
    pub(crate) fn gtpu_peers(s: &Session) -> impl Iterator<Item = IpAddr> + '_ {
        s.fars.values().filter_map(|f| {
            let o = f.forwarding.as_ref()?.outer_header_creation?;
            o.teid?;
            o.ipv4.map(IpAddr::V4).or(o.ipv6.map(IpAddr::V6))
        })
    }
}
