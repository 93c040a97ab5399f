//! Usage measurement and reporting per URR (TS 29.244 section 5.2.2), I/O-free.
//!
//! The daemon sums the dataplane's per-worker counters and feeds the cumulative [`Usage`] of
//! each (UP SEID, URR ID) since the URR was created. A `Meter` keeps, per URR, the
//! cumulative usage at the start of the current measurement interval, so every report carries
//! the usage since the previous report of that URR (section 5.2.2.3.1: the measurement is
//! reset after each report) and the volume threshold re-arms from the reported point.
//!
//! Simplifications, by design:
//! * Duration Measurement (section 8.2.45) is the wall-clock time of the interval; there is
//!   no Inactivity Detection Time.
//! * Volume Quota (section 5.2.2.2) is counted from the moment the quota was provisioned
//!   (Create URR, or Update URR carrying a Volume Quota), independently of other reports; it
//!   is reported once when exhausted.
//! * Time Quota (section 5.2.2.2, 8.2.51) is wall-clock time from the moment it was
//!   provisioned (as Duration Measurement is); reported once (TIMQU) when it runs out, and
//!   forwarding then stops as for a volume quota. A quota of 0 is exhausted at once.
//! * Time of First / Last Packet of an interval: the cumulative times, the first one clamped
//!   to the interval start when the URR saw packets before the interval.

use peregrine_pfcp::ie::{
    measurement_method as mm, reporting_triggers as rt, usage_report_trigger as urt, Bitmap,
    Grouped, Ie, Volume,
};

use std::num::NonZeroU64;

use crate::{Nanos, Urr};

const NS: u64 = 1_000_000_000;

/// Cumulative usage of one URR since its creation, as counted by the dataplane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub ul_bytes: u64,
    pub dl_bytes: u64,
    pub ul_pkts: u64,
    pub dl_pkts: u64,
    /// Arrival of the first packet counted, on the node's clock.
    pub first_pkt_ns: Option<Nanos>,
    pub last_pkt_ns: Option<Nanos>,
}

/// Where responses that carry usage (Session Deletion Response, Session Modification Response
/// with Remove / Query URR) get the latest cumulative usage. `None` keeps the last value fed
/// with [`crate::Node::update_usage`].
///
/// The same environment also vets a session's rules before the node commits them
/// ([`UsageSource::check_rules`]): the UPF's rule compiler can refuse what it cannot
/// install, and the request is then rejected with the cause it gives, state unchanged.
pub trait UsageSource {
    fn usage(&mut self, up_seid: u64, urr_id: u32) -> Option<Usage>;

    /// Can this session (as it would be after the request) be installed? Default: yes.
    fn check_rules(&mut self, _s: &crate::Session) -> Result<(), crate::Reject> {
        Ok(())
    }
}

/// A [`UsageSource`] with nothing new: the last fed usage is reported.
#[derive(Debug, Clone, Copy, Default)]
pub struct LastFed;

impl UsageSource for LastFed {
    fn usage(&mut self, _: u64, _: u32) -> Option<Usage> {
        None
    }
}

impl<F: FnMut(u64, u32) -> Option<Usage>> UsageSource for F {
    fn usage(&mut self, up_seid: u64, urr_id: u32) -> Option<Usage> {
        self(up_seid, urr_id)
    }
}

/// Which quotas an Update URR provisioned anew (table 7.5.4.4-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct QuotaUpdate {
    pub volume: bool,
    pub time: bool,
}

/// The four counters of a [`Usage`], without the packet times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Counts {
    ul_bytes: u64,
    dl_bytes: u64,
    ul_pkts: u64,
    dl_pkts: u64,
}

impl Counts {
    fn of(u: &Usage) -> Counts {
        Counts {
            ul_bytes: u.ul_bytes,
            dl_bytes: u.dl_bytes,
            ul_pkts: u.ul_pkts,
            dl_pkts: u.dl_pkts,
        }
    }
    fn total_bytes(&self) -> u64 {
        self.ul_bytes.saturating_add(self.dl_bytes)
    }
    fn total_pkts(&self) -> u64 {
        self.ul_pkts.saturating_add(self.dl_pkts)
    }
    /// `self - base`, saturating: counters that went backwards read as no traffic.
    fn since(&self, base: &Counts) -> Counts {
        Counts {
            ul_bytes: self.ul_bytes.saturating_sub(base.ul_bytes),
            dl_bytes: self.dl_bytes.saturating_sub(base.dl_bytes),
            ul_pkts: self.ul_pkts.saturating_sub(base.ul_pkts),
            dl_pkts: self.dl_pkts.saturating_sub(base.dl_pkts),
        }
    }
}

/// Whether a volume (total / UL / DL octets, whichever is present) is reached by `c`.
fn reached(v: &Volume, c: &Counts) -> bool {
    v.total.is_some_and(|x| c.total_bytes() >= x)
        || v.ul.is_some_and(|x| c.ul_bytes >= x)
        || v.dl.is_some_and(|x| c.dl_bytes >= x)
}

fn secs(s: u32) -> Nanos {
    u64::from(s).saturating_mul(NS)
}

/// A packet time as stored in a [`Meter`]: `NO_TIME` for none (a time of `u64::MAX` ns,
/// 584 years after the node's origin, reads as none).
const NO_TIME: Nanos = Nanos::MAX;

fn time_in(t: Option<Nanos>) -> Nanos {
    t.unwrap_or(NO_TIME)
}

fn time_out(t: Nanos) -> Option<Nanos> {
    (t != NO_TIME).then_some(t)
}

/// Measurement state of one URR, kept compact (one per URR of every session): plain
/// counters instead of whole [`Usage`] copies, packet times without `Option` padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meter {
    /// UR-SEQN of the next report (section 8.2.54).
    seqn: u32,
    quota_reported: bool,
    time_quota_reported: bool,
    /// Latest cumulative usage fed: counters and packet times ([`NO_TIME`] = none).
    last: Counts,
    first_pkt_ns: Nanos,
    last_pkt_ns: Nanos,
    /// Cumulative counters at the start of the current measurement interval.
    base: Counts,
    /// Start of the current interval.
    start: Nanos,
    /// Cumulative UL / DL octets when the Volume Quota was provisioned (the quota counts
    /// octets only).
    quota_base: [u64; 2],
    /// When the Time Quota was provisioned.
    time_quota_start: Nanos,
    /// Next periodic report (PERIO with a non-zero Measurement Period); never 0, as it is
    /// at least one period after a time >= 0.
    next_period: Option<NonZeroU64>,
    /// The deadline this meter is filed under in the node's timer index
    /// ([`crate::timers::UrrIndex`]), [`NO_TIME`] when none.
    armed: Nanos,
}

impl Meter {
    pub(crate) fn new(urr: &Urr, now: Nanos) -> Meter {
        let mut m = Meter {
            seqn: 0,
            quota_reported: false,
            time_quota_reported: false,
            last: Counts::default(),
            first_pkt_ns: NO_TIME,
            last_pkt_ns: NO_TIME,
            base: Counts::default(),
            start: now,
            quota_base: [0; 2],
            time_quota_start: now,
            next_period: None,
            armed: NO_TIME,
        };
        m.arm_period(urr, now);
        m
    }

    fn arm_period(&mut self, urr: &Urr, now: Nanos) {
        self.next_period = match urr.measurement_period {
            Some(p) if p > 0 && urr.reporting_triggers.contains(rt::PERIO) => {
                NonZeroU64::new(now.saturating_add(secs(p)))
            }
            _ => None,
        };
    }

    /// Update URR (table 7.5.4.4-1) applied: thresholds are read from the rule on each
    /// check; a new Volume or Time Quota counts from now; the measurement period restarts.
    pub(crate) fn rearm(&mut self, urr: &Urr, q: QuotaUpdate, now: Nanos) {
        if q.volume {
            self.quota_base = [self.last.ul_bytes, self.last.dl_bytes];
            self.quota_reported = false;
        }
        if q.time {
            self.time_quota_start = now;
            self.time_quota_reported = false;
        }
        self.arm_period(urr, now);
    }

    pub(crate) fn feed(&mut self, u: Usage) {
        self.last = Counts::of(&u);
        self.first_pkt_ns = time_in(u.first_pkt_ns);
        self.last_pkt_ns = time_in(u.last_pkt_ns);
    }

    /// When this meter next needs [`Meter::due`] checked by the timer.
    pub(crate) fn next_due(&self, urr: &Urr) -> Option<Nanos> {
        let timth = urr
            .time_threshold
            .filter(|&s| s > 0 && urr.reporting_triggers.contains(rt::TIMTH))
            .map(|s| self.start.saturating_add(secs(s)));
        let timqu = self.time_quota_end(urr);
        [self.next_period.map(NonZeroU64::get), timth, timqu]
            .into_iter()
            .flatten()
            .min()
    }

    /// The deadline filed in the timer index, if any.
    pub(crate) fn armed(&self) -> Option<Nanos> {
        time_out(self.armed)
    }

    pub(crate) fn set_armed(&mut self, at: Option<Nanos>) {
        self.armed = time_in(at);
    }

    /// Whether a trigger of this URR depends on the counted volume, so its counters must be
    /// polled: a Volume Threshold, or a Volume Quota not yet reported.
    pub(crate) fn watches_volume(&self, urr: &Urr) -> bool {
        let trig = urr.reporting_triggers;
        (trig.contains(rt::VOLTH) && urr.volume_threshold.is_some())
            || (trig.contains(rt::VOLQU) && urr.volume_quota.is_some() && !self.quota_reported)
    }

    /// When the Time Quota runs out, if it is armed and not yet reported.
    fn time_quota_end(&self, urr: &Urr) -> Option<Nanos> {
        urr.time_quota
            .filter(|_| urr.reporting_triggers.contains(rt::TIMQU) && !self.time_quota_reported)
            .map(|s| self.time_quota_start.saturating_add(secs(s)))
    }

    /// Usage Report Trigger bits (section 8.2.41) that hold now: volume threshold and quota
    /// from the fed usage, time threshold and period from `now`. Marks the quota reported
    /// and advances the period; the caller then builds the report.
    pub(crate) fn due(&mut self, urr: &Urr, now: Nanos) -> u64 {
        let trig = urr.reporting_triggers;
        let mut bits = 0;
        if trig.contains(rt::VOLTH)
            && urr
                .volume_threshold
                .is_some_and(|v| reached(&v, &self.last.since(&self.base)))
        {
            bits |= urt::VOLTH;
        }
        let quota_base = Counts {
            ul_bytes: self.quota_base[0],
            dl_bytes: self.quota_base[1],
            ..Counts::default()
        };
        if trig.contains(rt::VOLQU)
            && !self.quota_reported
            && urr
                .volume_quota
                .is_some_and(|v| reached(&v, &self.last.since(&quota_base)))
        {
            bits |= urt::VOLQU;
            self.quota_reported = true;
        }
        if self.time_quota_end(urr).is_some_and(|end| now >= end) {
            bits |= urt::TIMQU;
            self.time_quota_reported = true;
        }
        if trig.contains(rt::TIMTH)
            && urr
                .time_threshold
                .is_some_and(|s| s > 0 && now >= self.start.saturating_add(secs(s)))
        {
            bits |= urt::TIMTH;
        }
        if let Some(at) = self
            .next_period
            .map(NonZeroU64::get)
            .filter(|&at| at <= now)
        {
            bits |= urt::PERIO;
            let p = secs(urr.measurement_period.unwrap_or(0)).max(1);
            // Skip periods missed while not polled: one report covers them.
            let missed = (now - at) / p + 1;
            self.next_period = NonZeroU64::new(at.saturating_add(missed.saturating_mul(p)));
        }
        bits
    }

    /// A Usage Report group of type `ie_type` (78 / 79 / 80; tables 7.5.5.2-1, 7.5.7.2-1,
    /// 7.5.8.3-1) with the usage since the last report, then start a new interval.
    /// `ntp_origin` is the NTP second at node time 0.
    pub(crate) fn report(
        &mut self,
        urr: &Urr,
        ie_type: u16,
        trigger: u64,
        now: Nanos,
        ntp_origin: u32,
    ) -> Grouped {
        let ntp = |ns: Nanos| ntp_origin.wrapping_add((ns / NS) as u32);
        let d = self.last.since(&self.base);
        let (first, last) = (time_out(self.first_pkt_ns), time_out(self.last_pkt_ns));
        let mut ies = vec![
            Ie::UrrId(urr.id),
            Ie::UrSeqn(self.seqn),
            Ie::UsageReportTrigger(Bitmap(trigger)),
            Ie::StartTime(ntp(self.start)),
            Ie::EndTime(ntp(now)),
        ];
        if urr.measurement_method.contains(mm::VOLUM) {
            ies.push(Ie::VolumeMeasurement(Volume {
                total: Some(d.total_bytes()),
                ul: Some(d.ul_bytes),
                dl: Some(d.dl_bytes),
                total_packets: Some(d.total_pkts()),
                ul_packets: Some(d.ul_pkts),
                dl_packets: Some(d.dl_pkts),
            }));
        }
        if urr.measurement_method.contains(mm::DURAT) {
            let dur = now.saturating_sub(self.start) / NS;
            ies.push(Ie::DurationMeasurement(
                u32::try_from(dur).unwrap_or(u32::MAX),
            ));
        }
        if d.total_pkts() > 0 {
            if let Some(f) = first {
                ies.push(Ie::TimeOfFirstPacket(ntp(f.max(self.start))));
            }
            if let Some(l) = last {
                ies.push(Ie::TimeOfLastPacket(ntp(l)));
            }
        }
        self.seqn = self.seqn.wrapping_add(1);
        self.base = self.last;
        self.start = now;
        Grouped::new(ie_type, ies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_pfcp::ie::ie_type as t;
    use peregrine_pfcp::ie::Bitmap;

    fn urr(triggers: u64) -> Urr {
        Urr {
            id: 1,
            measurement_method: Bitmap(mm::VOLUM | mm::DURAT),
            reporting_triggers: Bitmap(triggers),
            volume_threshold: Some(Volume {
                total: Some(1000),
                ..Default::default()
            }),
            time_threshold: Some(30),
            volume_quota: Some(Volume {
                dl: Some(5000),
                ..Default::default()
            }),
            time_quota: Some(60),
            measurement_period: Some(10),
        }
    }

    fn usage(ul: u64, dl: u64) -> Usage {
        Usage {
            ul_bytes: ul,
            dl_bytes: dl,
            ul_pkts: ul / 100,
            dl_pkts: dl / 100,
            first_pkt_ns: Some(1),
            last_pkt_ns: Some(2),
        }
    }

    #[test]
    fn threshold_rearms_from_reported_point() {
        let u = urr(rt::VOLTH);
        let mut m = Meter::new(&u, 0);
        m.feed(usage(400, 500));
        assert_eq!(m.due(&u, 0), 0);
        m.feed(usage(500, 500));
        assert_eq!(m.due(&u, 0), urt::VOLTH);
        let g = m.report(&u, t::USAGE_REPORT_SRR, urt::VOLTH, 3 * NS, 100);
        assert!(g.ies.contains(&Ie::DurationMeasurement(3)));
        assert!(g.ies.contains(&Ie::StartTime(100)));
        assert!(g.ies.contains(&Ie::EndTime(103)));
        assert_eq!(m.due(&u, 0), 0);
        m.feed(usage(1000, 999));
        assert_eq!(m.due(&u, 0), 0);
        m.feed(usage(1000, 1000));
        assert_eq!(m.due(&u, 0), urt::VOLTH);
    }

    #[test]
    fn quota_once_period_skips_and_backwards_counters() {
        let u = urr(rt::VOLQU | rt::PERIO);
        let mut m = Meter::new(&u, 0);
        m.feed(usage(0, 5000));
        assert_eq!(m.due(&u, 0), urt::VOLQU);
        assert_eq!(m.due(&u, 0), 0);
        assert_eq!(m.next_due(&u), Some(10 * NS));
        // Polled late: one PERIO, next one aligned to the period grid.
        assert_eq!(m.due(&u, 35 * NS), urt::PERIO);
        assert_eq!(m.next_due(&u), Some(40 * NS));
        m.report(&u, t::USAGE_REPORT_SRR, urt::PERIO, 35 * NS, 0);
        m.feed(usage(0, 10));
        let g = m.report(&u, t::USAGE_REPORT_SRR, urt::PERIO, 40 * NS, 0);
        let vol = g.ies.iter().find_map(|i| match i {
            Ie::VolumeMeasurement(v) => Some(*v),
            _ => None,
        });
        assert_eq!(vol.and_then(|v| v.dl), Some(0));
    }

    #[test]
    fn time_quota_runs_out_once_and_rearms_on_update() {
        let u = urr(rt::TIMQU);
        let mut m = Meter::new(&u, 5 * NS);
        assert_eq!(m.next_due(&u), Some(65 * NS));
        assert_eq!(m.due(&u, 64 * NS), 0);
        assert_eq!(m.due(&u, 65 * NS), urt::TIMQU);
        // Reported once; nothing further is due.
        assert_eq!(m.due(&u, 100 * NS), 0);
        assert_eq!(m.next_due(&u), None);
        // A new Time Quota (Update URR) counts from then.
        m.rearm(
            &u,
            QuotaUpdate {
                volume: false,
                time: true,
            },
            100 * NS,
        );
        assert_eq!(m.next_due(&u), Some(160 * NS));
        // Without the TIMQU trigger the quota is not armed.
        let quiet = urr(rt::VOLTH);
        assert_eq!(Meter::new(&quiet, 0).next_due(&quiet), None);
    }
}
