//! The daemon's own metric families, the same for every pipeline kind: ports (the workers'
//! counts and the backend's), drops by named reason, the workers' loop counters and the
//! egress queues. Features add theirs after these (`Feature::metrics`).

use crate::metrics::{Exposition, Kind};
use peregrine_dataplane::io::{PortInfo, PortStats};
use peregrine_dataplane::runtime::{Counters, Reasons};

/// What the daemon knows at one instant.
#[derive(Debug)]
pub struct Snapshot<'a> {
    pub ports: &'a [PortInfo],
    /// The backend's counters per port (rte_eth_stats for DPDK).
    pub port_stats: &'a [PortStats],
    pub counters: &'a Counters,
    /// Each worker's counters, in worker order (the loop counters are per worker).
    pub per_worker: &'a [Counters],
    pub reasons: &'a Reasons,
    pub workers: usize,
    pub uptime_s: f64,
}

/// A per-port family: name, help, and its value for (port index, backend counters).
type PortFamily<'a> = (&'static str, &'a str, &'a dyn Fn(usize, &PortStats) -> u64);

/// Write the daemon's families.
pub fn write(e: &mut Exposition, s: &Snapshot<'_>) {
    let c = s.counters;
    let ctr = Kind::Counter;
    let port_families: [PortFamily<'_>; 6] = [
        (
            "peregrine_port_rx_packets_total",
            "Packets received by the workers, per port.",
            &|i, _| c.rx_pkts.get(i).copied().unwrap_or(0),
        ),
        (
            "peregrine_port_tx_packets_total",
            "Packets sent by the workers, per port.",
            &|i, _| c.tx_pkts.get(i).copied().unwrap_or(0),
        ),
        (
            "peregrine_port_missed_total",
            "Packets the NIC dropped for lack of rx descriptors (imissed), per port.",
            &|_, p| p.imissed,
        ),
        (
            "peregrine_port_rx_nombuf_total",
            "Receive failures for lack of buffers (rx_nombuf), per port.",
            &|_, p| p.rx_nombuf,
        ),
        (
            "peregrine_port_rx_errors_total",
            "Erroneous received packets (ierrors), per port.",
            &|_, p| p.ierrors,
        ),
        (
            "peregrine_port_tx_errors_total",
            "Failed transmissions (oerrors), per port.",
            &|_, p| p.oerrors,
        ),
    ];
    for (name, help, get) in port_families {
        e.family(name, ctr, help);
        for (i, p) in s.ports.iter().enumerate() {
            let st = s.port_stats.get(i).copied().unwrap_or_default();
            e.sample(name, &[("port", p.name.as_str())], get(i, &st) as f64);
        }
    }
    e.family(
        "peregrine_drops_total",
        ctr,
        "Packets dropped, by named reason.",
    );
    for (i, n) in s.reasons.names().iter().enumerate() {
        e.sample(
            "peregrine_drops_total",
            &[("reason", n)],
            c.drops.get(i).copied().unwrap_or(0) as f64,
        );
    }
    e.one(
        "peregrine_to_control_total",
        ctr,
        "Packets handed to the control thread.",
        c.to_control as f64,
    );
    e.one(
        "peregrine_injected_total",
        ctr,
        "Frames the control thread sent through the workers (ARP / ND replies, End Markers).",
        c.injected as f64,
    );
    type WorkerFamily = (&'static str, &'static str, fn(&Counters) -> u64);
    let worker_families: [WorkerFamily; 4] = [
        (
            "peregrine_worker_bursts_total",
            "Non-empty rx bursts, per worker.",
            |c| c.bursts,
        ),
        (
            "peregrine_worker_idle_polls_total",
            "Polls that found no packet, per worker.",
            |c| c.idle_polls,
        ),
        (
            "peregrine_worker_handoffs_total",
            "Packets a worker handed to another (flow steering), per sending worker.",
            |c| c.handed_off,
        ),
        (
            "peregrine_worker_handoffs_received_total",
            "Packets a worker took from another (flow steering), per receiving worker.",
            |c| c.handoff_received,
        ),
    ];
    for (name, help, get) in worker_families {
        e.family(name, ctr, help);
        for (w, wc) in s.per_worker.iter().enumerate() {
            e.sample(name, &[("worker", w.to_string().as_str())], get(wc) as f64);
        }
    }
    e.one(
        "peregrine_workers",
        Kind::Gauge,
        "Worker threads.",
        s.workers as f64,
    );
    e.one(
        "peregrine_uptime_seconds",
        Kind::Gauge,
        "Seconds since the workers started.",
        s.uptime_s,
    );
    write_egress(e, s);
}

/// Per scheduled port and queue: enqueued, dequeued, tail-dropped, depth, sojourn.
fn write_egress(e: &mut Exposition, s: &Snapshot<'_>) {
    if s.counters.egress.is_empty() {
        return;
    }
    let (ctr, g) = (Kind::Counter, Kind::Gauge);
    let fams: [(&'static str, Kind, &str); 9] = [
        (
            "peregrine_egress_enqueued_packets_total",
            ctr,
            "Packets enqueued, per egress port and queue.",
        ),
        (
            "peregrine_egress_enqueued_bytes_total",
            ctr,
            "Bytes enqueued, per egress port and queue.",
        ),
        (
            "peregrine_egress_dequeued_packets_total",
            ctr,
            "Packets dequeued, per egress port and queue.",
        ),
        (
            "peregrine_egress_dropped_packets_total",
            ctr,
            "Packets tail-dropped (egress_queue_full), per egress port and queue.",
        ),
        (
            "peregrine_egress_dropped_bytes_total",
            ctr,
            "Bytes tail-dropped, per egress port and queue.",
        ),
        (
            "peregrine_egress_depth_packets",
            g,
            "Packets queued now, per egress port and queue.",
        ),
        (
            "peregrine_egress_sojourn_seconds_total",
            ctr,
            "Sum of the sojourn times of dequeued packets, per egress port and queue.",
        ),
        (
            "peregrine_egress_sojourn_packets_total",
            ctr,
            "Dequeued packets whose sojourn was measured, per egress port and queue.",
        ),
        (
            "peregrine_egress_sojourn_max_seconds",
            g,
            "Longest sojourn seen, per egress port and queue.",
        ),
    ];
    for (name, kind, help) in fams {
        e.family(name, kind, help);
    }
    for eg in &s.counters.egress {
        let port = s
            .ports
            .get(eg.port as usize)
            .map_or_else(|| eg.port.to_string(), |p| p.name.clone());
        for (q, x) in eg.queues.iter().enumerate() {
            let qs = q.to_string();
            let l = [("port", port.as_str()), ("qid", qs.as_str())];
            let vals = [
                x.enq_pkts as f64,
                x.enq_bytes as f64,
                x.deq_pkts as f64,
                x.drop_pkts as f64,
                x.drop_bytes as f64,
                x.depth_pkts as f64,
                x.sojourn_sum_ns as f64 / 1e9,
                x.sojourn_count as f64,
                x.sojourn_max_ns as f64 / 1e9,
            ];
            for ((name, _, _), v) in fams.iter().zip(vals) {
                e.sample(name, &l, v);
            }
        }
    }
}
