//! Named drop reasons. Every drop in the dataplane is counted under one of these.

/// Index of a registered drop reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DropReason(pub u16);

/// The registry of drop-reason names, built once when pipelines are built.
///
/// Stages register the reasons they use and keep the returned [`DropReason`]; registering a
/// name twice returns the same id, so every worker's identical pipeline gets identical ids.
#[derive(Debug, Clone)]
pub struct Reasons {
    names: Vec<&'static str>,
}

impl Reasons {
    /// A packet left `Continue` after the last stage: a pipeline bug, never a silent black hole.
    pub const NO_DISPOSITION: DropReason = DropReason(0);
    /// The tx queue did not accept the packet.
    pub const TX_FULL: DropReason = DropReason(1);
    /// The control thread's queue was full.
    pub const CONTROL_QUEUE_FULL: DropReason = DropReason(2);
    /// A stage chose a tx port that does not exist.
    pub const BAD_TX_PORT: DropReason = DropReason(3);
    /// The packet's egress queue (per-port scheduler, 8 QIDs) was full: a tail drop.
    pub const EGRESS_QUEUE_FULL: DropReason = DropReason(4);
    /// A frame injected by the control side could not be sent: no buffer in the worker's
    /// pool, or the port's tx queue did not take it.
    pub const INJECT_FAILED: DropReason = DropReason(5);
    /// The ring to the worker a packet was steered to was full (`Disposition::handoff`).
    pub const HANDOFF_RING_FULL: DropReason = DropReason(6);
    /// A hand-off to a worker that does not exist, to the deciding worker itself, or of a
    /// packet that was already handed off once: a pipeline bug, counted rather than looped.
    pub const BAD_HANDOFF: DropReason = DropReason(7);

    pub fn new() -> Reasons {
        Reasons {
            names: vec![
                "no_disposition",
                "tx_full",
                "control_queue_full",
                "bad_tx_port",
                "egress_queue_full",
                "inject_failed",
                "handoff_ring_full",
                "bad_handoff",
            ],
        }
    }

    /// Register `name` (snake_case) and return its id.
    pub fn register(&mut self, name: &'static str) -> DropReason {
        if let Some(i) = self.names.iter().position(|n| *n == name) {
            return DropReason(i as u16);
        }
        assert!(
            self.names.len() < u16::MAX as usize,
            "too many drop reasons"
        );
        self.names.push(name);
        DropReason(self.names.len() as u16 - 1)
    }

    pub fn name(&self, r: DropReason) -> &'static str {
        self.names.get(r.0 as usize).copied().unwrap_or("unknown")
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn names(&self) -> &[&'static str] {
        &self.names
    }
}

impl Default for Reasons {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_is_idempotent() {
        let mut r = Reasons::new();
        let a = r.register("ttl_exceeded");
        let b = r.register("no_route");
        assert_eq!(r.register("ttl_exceeded"), a);
        assert_ne!(a, b);
        assert_eq!(r.name(b), "no_route");
        assert_eq!(r.name(Reasons::TX_FULL), "tx_full");
        assert_eq!(r.name(Reasons::EGRESS_QUEUE_FULL), "egress_queue_full");
        assert_eq!(r.register("egress_queue_full"), Reasons::EGRESS_QUEUE_FULL);
        assert_eq!(r.name(Reasons::INJECT_FAILED), "inject_failed");
        assert_eq!(r.name(Reasons::HANDOFF_RING_FULL), "handoff_ring_full");
        assert_eq!(r.name(Reasons::BAD_HANDOFF), "bad_handoff");
        assert_eq!(r.name(DropReason(999)), "unknown");
    }
}
