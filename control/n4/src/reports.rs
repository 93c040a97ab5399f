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
        self.urr_due.set(None);
        let mut out = Vec::new();
        let meter = self.sessions.get_mut(&up_seid);
        if let Some(m) = meter.and_then(|st| st.meters.get_mut(&urr_id)) {
            m.feed(usage);
            self.check_urr(now, up_seid, urr_id, &mut out);
        }
        self.account(&out);
        out
    }

    /// Evaluate the URR's triggers and report if one holds.
    pub(crate) fn check_urr(&mut self, now: Nanos, seid: u64, urr_id: u32, out: &mut Vec<Output>) {
        let Some(st) = self.sessions.get_mut(&seid) else {
            return;
        };
        let Some(urr) = compact::find_urr(&st.rules, urr_id) else {
            return;
        };
        let Some(m) = st.meters.get_mut(&urr_id) else {
            return;
        };
        let bits = m.due(&urr, now);
        if bits == 0 {
            return;
        }
        let g = m.report(&urr, t::USAGE_REPORT_SRR, bits, now, self.config.ntp_origin);
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
        self.urr_due.set(None);
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
        let Some(p) = self.pending.get(&seq).filter(|p| p.peer == peer) else {
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
        }
        v
    }
}
