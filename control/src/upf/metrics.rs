//! The UPF's Prometheus families (per-QFI counters, 3GPP-PM style windows, GTP-U, PFCP)
//! and its part of the summary.

use crate::metrics::{Exposition, Kind};
use crate::n4::N4Status;
use peregrine_dataplane::qos::scheduler::{QfiMap, NUM_QFI};
use peregrine_dataplane::runtime::Counters;
use peregrine_dataplane::upf::tables::Direction;
use peregrine_dataplane::upf::UpfStats;
use std::fmt::Write as _;
use std::sync::Arc;

/// Per-QFI counters summed over workers, both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QfiTotals {
    pub pkts: u64,
    pub bytes: u64,
    pub drops: u64,
    pub green: u64,
    pub yellow: u64,
    pub red: u64,
}

/// Per-QFI counters, `[direction][qfi]` (0 uplink, 1 downlink).
pub type PerQfi = [[QfiTotals; NUM_QFI]; 2];

/// Sum the per-QFI counters of every worker.
pub fn qfi_totals(stats: &[Arc<UpfStats>]) -> PerQfi {
    let mut t = [[QfiTotals::default(); NUM_QFI]; 2];
    for (d, dir) in [Direction::Uplink, Direction::Downlink]
        .into_iter()
        .enumerate()
    {
        for (q, slot) in t[d].iter_mut().enumerate() {
            for st in stats {
                let u = st.qfi(dir, q as u8);
                slot.pkts += u.pkts;
                slot.bytes += u.bytes;
                slot.drops += u.drops;
                slot.green += u.green;
                slot.yellow += u.yellow;
                slot.red += u.red;
            }
        }
    }
    t
}

/// 3GPP-PM style per-QFI windows (TS 28.552 section 5.4: packets, volume, drops and mean
/// delay per QoS level per granularity period), 1 s here. Mean delay is the sojourn time in
/// our egress queues of the queue the QFI maps to (every QFI of a queue shares its delay).
#[derive(Debug, Default)]
pub struct PmWindows {
    prev: Option<PerQfi>,
    prev_sojourn: Vec<(u64, u64)>,
    /// The last complete window: `[direction][qfi]` deltas, and per-QID mean sojourn (ns).
    pub last: Option<(PerQfi, [Option<u64>; 8])>,
}

impl PmWindows {
    /// Close a window: deltas since the previous call.
    pub fn tick(&mut self, now: PerQfi, c: &Counters) {
        let mut sojourn = vec![(0u64, 0u64); 8];
        for e in &c.egress {
            for (q, s) in e.queues.iter().enumerate().take(8) {
                sojourn[q].0 += s.sojourn_sum_ns;
                sojourn[q].1 += s.sojourn_count;
            }
        }
        if let Some(p) = &self.prev {
            let mut d = [[QfiTotals::default(); NUM_QFI]; 2];
            for (dir, row) in d.iter_mut().enumerate() {
                for (q, out) in row.iter_mut().enumerate() {
                    let (a, b) = (now[dir][q], p[dir][q]);
                    *out = QfiTotals {
                        pkts: a.pkts - b.pkts.min(a.pkts),
                        bytes: a.bytes - b.bytes.min(a.bytes),
                        drops: a.drops - b.drops.min(a.drops),
                        green: a.green - b.green.min(a.green),
                        yellow: a.yellow - b.yellow.min(a.yellow),
                        red: a.red - b.red.min(a.red),
                    };
                }
            }
            let mut delay = [None; 8];
            for q in 0..8 {
                let (s, n) = (
                    sojourn[q]
                        .0
                        .saturating_sub(self.prev_sojourn.get(q).map_or(0, |p| p.0)),
                    sojourn[q]
                        .1
                        .saturating_sub(self.prev_sojourn.get(q).map_or(0, |p| p.1)),
                );
                delay[q] = s.checked_div(n);
            }
            self.last = Some((d, delay));
        }
        self.prev = Some(now);
        self.prev_sojourn = sojourn;
    }
}

/// The UPF's families on the metrics page (the daemon writes ports, drops and workers).
pub fn write_metrics(
    e: &mut Exposition,
    stats: &[Arc<UpfStats>],
    pm: &PmWindows,
    qfi_map: &QfiMap,
    n4: Option<(&N4Status, &peregrine_n4::N4Stats)>,
    compiler_sessions: Option<usize>,
) {
    let ctr = Kind::Counter;
    let t = qfi_totals(stats);
    e.family(
        "peregrine_qfi_packets_total",
        ctr,
        "UPF packets per direction and QFI (TS 28.552 5.4).",
    );
    e.family(
        "peregrine_qfi_bytes_total",
        ctr,
        "UPF bytes (inner IP) per direction and QFI.",
    );
    e.family(
        "peregrine_qfi_drops_total",
        ctr,
        "UPF drops per direction and QFI.",
    );
    e.family(
        "peregrine_qfi_colour_total",
        ctr,
        "TrTCM (RFC 2698) colours per direction and QFI.",
    );
    for (row, dn) in t.iter().zip(["uplink", "downlink"].iter()) {
        for (q, &x) in row.iter().enumerate() {
            if x.pkts + x.drops == 0 {
                continue;
            }
            let qs = q.to_string();
            let l = [("direction", *dn), ("qfi", qs.as_str())];
            e.sample("peregrine_qfi_packets_total", &l, x.pkts as f64);
            e.sample("peregrine_qfi_bytes_total", &l, x.bytes as f64);
            e.sample("peregrine_qfi_drops_total", &l, x.drops as f64);
            for (cn, v) in [("green", x.green), ("yellow", x.yellow), ("red", x.red)] {
                e.sample(
                    "peregrine_qfi_colour_total",
                    &[("direction", dn), ("qfi", qs.as_str()), ("colour", cn)],
                    v as f64,
                );
            }
        }
    }
    if let Some((w, delay)) = &pm.last {
        e.family(
            "peregrine_qfi_window_packets",
            Kind::Gauge,
            "Packets in the last 1 s window, per direction and QFI.",
        );
        e.family(
            "peregrine_qfi_window_mean_delay_seconds",
            Kind::Gauge,
            "Mean sojourn in our egress queues in the last 1 s window, per QFI (by its queue).",
        );
        for (d, dn) in ["uplink", "downlink"].iter().enumerate() {
            for (q, x) in w[d].iter().enumerate() {
                if x.pkts == 0 {
                    continue;
                }
                let qs = q.to_string();
                let l = [("direction", *dn), ("qfi", qs.as_str())];
                e.sample("peregrine_qfi_window_packets", &l, x.pkts as f64);
                if let Some(ns) = delay[qfi_map.qid(q as u8) as usize] {
                    e.sample(
                        "peregrine_qfi_window_mean_delay_seconds",
                        &l,
                        ns as f64 / 1e9,
                    );
                }
            }
        }
    }
    let mut tot = peregrine_dataplane::upf::UpfTotals::default();
    for s in stats {
        let x = s.totals();
        tot.echo_replies += x.echo_replies;
        tot.error_indications_sent += x.error_indications_sent;
        tot.error_indications_received += x.error_indications_received;
        tot.end_markers_received += x.end_markers_received;
        tot.buffered += x.buffered;
        tot.icmp_errors_sent += x.icmp_errors_sent;
        tot.l4_checksums_fixed += x.l4_checksums_fixed;
        tot.packets_fragmented += x.packets_fragmented;
        tot.fragments_made += x.fragments_made;
        tot.fragments_received += x.fragments_received;
        tot.datagrams_reassembled += x.datagrams_reassembled;
        tot.reassembly_timeouts += x.reassembly_timeouts;
    }
    e.one(
        "peregrine_gtpu_echo_replies_total",
        ctr,
        "GTP-U Echo Responses sent.",
        tot.echo_replies as f64,
    );
    e.one(
        "peregrine_gtpu_error_indications_sent_total",
        ctr,
        "GTP-U Error Indications sent for unknown TEIDs.",
        tot.error_indications_sent as f64,
    );
    e.one(
        "peregrine_gtpu_error_indications_received_total",
        ctr,
        "GTP-U Error Indications received.",
        tot.error_indications_received as f64,
    );
    e.one(
        "peregrine_gtpu_end_markers_received_total",
        ctr,
        "GTP-U End Markers received.",
        tot.end_markers_received as f64,
    );
    e.one(
        "peregrine_buffered_total",
        ctr,
        "Packets handed to the control core for buffering (BUFF).",
        tot.buffered as f64,
    );
    e.one(
        "peregrine_icmp_errors_sent_total",
        ctr,
        "ICMP Packet Too Big / Fragmentation Needed sent.",
        tot.icmp_errors_sent as f64,
    );
    e.one(
        "peregrine_l4_checksums_fixed_total",
        ctr,
        "TCP/UDP checksums recomputed on `fix_l4_checksums` ports that arrived partial or wrong.",
        tot.l4_checksums_fixed as f64,
    );
    for (name, help, v) in [
        (
            "peregrine_upf_packets_fragmented_total",
            "IPv4 packets without DF fragmented to fit the MTU.",
            tot.packets_fragmented,
        ),
        (
            "peregrine_upf_fragments_made_total",
            "Fragments made of them.",
            tot.fragments_made,
        ),
        (
            "peregrine_upf_fragments_received_total",
            "Outer IPv4/IPv6 fragments received for our N3/N9 addresses.",
            tot.fragments_received,
        ),
        (
            "peregrine_upf_datagrams_reassembled_total",
            "Datagrams reassembled from outer fragments.",
            tot.datagrams_reassembled,
        ),
        (
            "peregrine_upf_reassembly_timeouts_total",
            "Datagrams given up at the reassembly timeout.",
            tot.reassembly_timeouts,
        ),
    ] {
        e.one(name, ctr, help, v as f64);
    }
    if let Some(n) = compiler_sessions {
        e.one(
            "peregrine_upf_sessions",
            Kind::Gauge,
            "Sessions in the rule tables (static and PFCP).",
            n as f64,
        );
    }
    if let Some((st, ns)) = n4 {
        e.family(
            "peregrine_pfcp_messages_received_total",
            ctr,
            "PFCP messages received, by type.",
        );
        for (t, n) in &ns.rx {
            e.sample(
                "peregrine_pfcp_messages_received_total",
                &[("type", &t.to_string())],
                *n as f64,
            );
        }
        e.family(
            "peregrine_pfcp_messages_sent_total",
            ctr,
            "PFCP messages sent, by type.",
        );
        for (t, n) in &ns.tx {
            e.sample(
                "peregrine_pfcp_messages_sent_total",
                &[("type", &t.to_string())],
                *n as f64,
            );
        }
        e.family(
            "peregrine_pfcp_responses_total",
            ctr,
            "PFCP responses sent, by type and cause.",
        );
        for ((t, c), n) in &ns.responses {
            e.sample(
                "peregrine_pfcp_responses_total",
                &[("type", &t.to_string()), ("cause", &c.to_string())],
                *n as f64,
            );
        }
        e.family(
            "peregrine_pfcp_decode_errors_total",
            ctr,
            "Undecodable PFCP datagrams, by kind.",
        );
        for (k, n) in &ns.decode_errors {
            e.sample(
                "peregrine_pfcp_decode_errors_total",
                &[("kind", k)],
                *n as f64,
            );
        }
        e.family(
            "peregrine_pfcp_ies_discarded_total",
            ctr,
            "IEs of session requests discarded unread (TS 29.244 7.6.1: a type beyond the \
             specification we know, or vendor-specific), by IE type.",
        );
        for (ty, n) in &ns.ies_discarded {
            e.sample(
                "peregrine_pfcp_ies_discarded_total",
                &[("ie_type", &ty.to_string())],
                *n as f64,
            );
        }
        e.one(
            "peregrine_pfcp_duplicates_total",
            ctr,
            "Retransmitted requests answered from the cache.",
            ns.duplicates as f64,
        );
        e.one(
            "peregrine_pfcp_reports_sent_total",
            ctr,
            "Session Report Requests sent (first transmissions).",
            ns.reports_sent as f64,
        );
        for (name, help, v) in [
            (
                "peregrine_pfcp_reports_retransmitted_total",
                "Session Report Requests resent after T1 without a response (TS 29.244 6.4).",
                ns.reports_retransmitted,
            ),
            (
                "peregrine_pfcp_reports_timed_out_total",
                "Session Report Requests given up after N1 retransmissions.",
                ns.reports_timed_out,
            ),
            (
                "peregrine_pfcp_reports_rejected_total",
                "Session Report Requests answered with a rejection cause.",
                ns.reports_rejected,
            ),
        ] {
            e.one(name, ctr, help, v as f64);
        }
        let ps = &ns.paths;
        for (name, help, v) in [
            (
                "peregrine_pfcp_node_reports_sent_total",
                "Node Report Requests sent (GTP-U path failure / recovery; TS 29.244 6.2.9).",
                ns.node_reports_sent,
            ),
            (
                "peregrine_pfcp_node_reports_acknowledged_total",
                "Node Report Requests answered with an acceptance cause.",
                ns.node_reports_acknowledged,
            ),
            (
                "peregrine_pfcp_node_reports_rejected_total",
                "Node Report Requests answered with a rejection cause.",
                ns.node_reports_rejected,
            ),
            (
                "peregrine_gtpu_echo_requests_sent_total",
                "GTP-U Echo Requests to peers in use (TS 29.281 7.2.1), first transmissions.",
                ps.echo_requests,
            ),
            (
                "peregrine_gtpu_echo_retransmissions_total",
                "GTP-U Echo Requests repeated after T3 without a response.",
                ps.echo_retransmissions,
            ),
            (
                "peregrine_gtpu_echo_responses_total",
                "GTP-U Echo Responses answering an outstanding request.",
                ps.echo_responses,
            ),
            (
                "peregrine_gtpu_echo_responses_unexpected_total",
                "GTP-U Echo Responses from a peer not in use or with a stale sequence number.",
                ps.echo_responses_unexpected,
            ),
            (
                "peregrine_gtpu_echo_requests_failed_total",
                "GTP-U Echo Requests that could not be sent (no route or address, port refused).",
                st.counts.echo_requests_failed,
            ),
            (
                "peregrine_gtpu_path_failures_total",
                "GTP-U paths declared failed after N3 unanswered retransmissions.",
                ps.failures,
            ),
            (
                "peregrine_gtpu_path_recoveries_total",
                "Failed GTP-U paths that answered again.",
                ps.recoveries,
            ),
        ] {
            e.one(name, ctr, help, v as f64);
        }
        e.one(
            "peregrine_gtpu_paths",
            Kind::Gauge,
            "GTP-U peers in use by some session's FAR (supervised with Echo Requests).",
            ns.gtpu_paths as f64,
        );
        e.one(
            "peregrine_gtpu_paths_failed",
            Kind::Gauge,
            "GTP-U peers in use whose path has failed.",
            ns.gtpu_paths_failed as f64,
        );
        e.one(
            "peregrine_pfcp_sessions",
            Kind::Gauge,
            "PFCP sessions.",
            st.sessions as f64,
        );
        e.one(
            "peregrine_pfcp_associations",
            Kind::Gauge,
            "PFCP associations.",
            st.associations as f64,
        );
        e.one(
            "peregrine_rule_publishes_total",
            ctr,
            "Rule snapshots published.",
            st.counts.publishes as f64,
        );
        e.family(
            "peregrine_rule_publish_latency_seconds",
            Kind::Gauge,
            "Rule-publish latency (publish to every worker seen), quantiles of the last 65536.",
        );
        for q in [0.5, 0.99, 1.0] {
            if let Some(us) = st.publish_latency_quantile(q) {
                e.sample(
                    "peregrine_rule_publish_latency_seconds",
                    &[("quantile", &q.to_string())],
                    us as f64 / 1e6,
                );
            }
        }
    }
}

/// What the UPF adds to the end-of-run summary.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct UpfSummary {
    pub sessions: usize,
    /// (direction, QFI, packets, bytes, drops, green, yellow, red), QFIs with traffic only.
    pub qfi: Vec<QfiRow>,
    pub echo_replies: u64,
    pub error_indications_sent: u64,
    /// TCP/UDP checksums completed in software (`fix_l4_checksums`).
    pub l4_checksums_fixed: u64,
    pub pfcp_datagrams_in: u64,
    pub pfcp_datagrams_out: u64,
    pub rule_publishes: u64,
    pub publish_latency_p99_us: Option<u32>,
}

/// One per-QFI line of the summary.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct QfiRow {
    pub direction: &'static str,
    pub qfi: u8,
    pub packets: u64,
    pub bytes: u64,
    pub drops: u64,
    pub green: u64,
    pub yellow: u64,
    pub red: u64,
}

/// The summary's UPF part from the workers' counters and N4's status.
pub(super) fn summary(
    stats: &[Arc<UpfStats>],
    n4: Option<N4Status>,
    sessions: usize,
) -> UpfSummary {
    let t = qfi_totals(stats);
    let mut qfi = Vec::new();
    for (d, dn) in ["uplink", "downlink"].into_iter().enumerate() {
        for (q, x) in t[d].iter().enumerate() {
            if x.pkts + x.drops > 0 {
                qfi.push(QfiRow {
                    direction: dn,
                    qfi: q as u8,
                    packets: x.pkts,
                    bytes: x.bytes,
                    drops: x.drops,
                    green: x.green,
                    yellow: x.yellow,
                    red: x.red,
                });
            }
        }
    }
    let (mut echo, mut ei, mut fixed) = (0, 0, 0);
    for s in stats {
        let x = s.totals();
        echo += x.echo_replies;
        ei += x.error_indications_sent;
        fixed += x.l4_checksums_fixed;
    }
    let st = n4.unwrap_or_default();
    UpfSummary {
        sessions,
        qfi,
        echo_replies: echo,
        error_indications_sent: ei,
        l4_checksums_fixed: fixed,
        pfcp_datagrams_in: st.counts.datagrams_in,
        pfcp_datagrams_out: st.counts.datagrams_out,
        rule_publishes: st.counts.publishes,
        publish_latency_p99_us: st.publish_latency_quantile(0.99),
    }
}

/// The UPF's lines in the printed summary.
pub(super) fn render_summary(u: &UpfSummary) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "upf: {} session(s), {} echo replies, {} error indications sent",
        u.sessions, u.echo_replies, u.error_indications_sent
    );
    if u.pfcp_datagrams_in > 0 {
        let _ = writeln!(
            s,
            "pfcp: {} datagrams in, {} out, {} rule publishes, publish latency p99 {} us",
            u.pfcp_datagrams_in,
            u.pfcp_datagrams_out,
            u.rule_publishes,
            u.publish_latency_p99_us
                .map_or("-".into(), |v| v.to_string())
        );
    }
    let _ = writeln!(
        s,
        "{:<9} {:>4} {:>10} {:>12} {:>8} {:>10} {:>10} {:>8}",
        "per QFI", "qfi", "packets", "bytes", "drops", "green", "yellow", "red"
    );
    for r in &u.qfi {
        let _ = writeln!(
            s,
            "{:<9} {:>4} {:>10} {:>12} {:>8} {:>10} {:>10} {:>8}",
            r.direction, r.qfi, r.packets, r.bytes, r.drops, r.green, r.yellow, r.red
        );
    }
    s
}
