//! The sketch-INT co-design collector (Zhu et al., draft-zhu-sketch-int-codesign-00, "Data
//! Collection"; `docs/codesign.md` "Export" and "Merge"): the gate's closed windows as the
//! daemon publishes them (CBOR on `[int.gate] export`), and the per-flow merge of a flow's
//! small phase (INT reports from the sink, exact) with its large phase (the sketch's growth
//! after the switch point). I/O-free: the caller feeds decoded messages.

use peregrine_dataplane::classify::flow_hash;
use peregrine_int::gate::{GateUnit, SwitchRecord};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::Ipv6Addr;

/// Version of [`GateWindowMsg`].
pub const GATE_EXPORT_VERSION: u8 = 1;
/// PUB topic prefix of the gate's exports: `gate/<node_id>/<worker>`.
pub const GATE_TOPIC: &str = "gate/";
/// Bytes the gate counts per packet beyond the sink's `packet_len` (the IPv6 packet): the
/// Ethernet header (the gate counts frames). Used only with `unit = "bytes"`.
pub const L2_OVERHEAD: u64 = 14;

/// One closed window of one worker's gate (`docs/codesign.md` "Export", CBOR map).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateWindowMsg {
    /// [`GATE_EXPORT_VERSION`].
    pub v: u8,
    pub node_id: u32,
    pub worker: u16,
    /// Window start and length, the worker clock (ns).
    pub start_ns: u64,
    pub window_ns: u64,
    /// `"packets"` or `"bytes"`: what the counts count.
    pub unit: String,
    /// T_hi and T_lo.
    pub large: u32,
    pub small: u32,
    /// Packets the gate saw in the window.
    pub packets: u64,
    /// Packets judged large whose flow found no room in the switch table.
    pub overflow: u32,
    /// Switch records lost between the worker and the publisher (a full event channel).
    pub lost: u32,
    /// One `[hash, at_switch, at_end]` per flow judged large in the window.
    pub flows: Vec<[u32; 3]>,
}

impl GateWindowMsg {
    pub fn unit_of(u: GateUnit) -> &'static str {
        match u {
            GateUnit::Packets => "packets",
            GateUnit::Bytes => "bytes",
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(64 + 16 * self.flows.len());
        // Writing to a Vec cannot fail.
        let _ = ciborium::ser::into_writer(self, &mut v);
        v
    }

    /// Decode and check a message; the error names what is wrong.
    pub fn decode(b: &[u8]) -> Result<GateWindowMsg, String> {
        let m: GateWindowMsg =
            ciborium::de::from_reader(b).map_err(|e| format!("gate window: {e}"))?;
        if m.v != GATE_EXPORT_VERSION {
            return Err(format!("gate window: version {} (want 1)", m.v));
        }
        if m.unit != "packets" && m.unit != "bytes" {
            return Err(format!("gate window: unit {:?}", m.unit));
        }
        if let Some(f) = m.flows.iter().find(|f| f[2] < f[1]) {
            return Err(format!(
                "gate window: flow {:#010x} ends at {} below its switch point {}",
                f[0], f[2], f[1]
            ));
        }
        Ok(m)
    }

    pub fn records(&self) -> impl Iterator<Item = SwitchRecord> + '_ {
        self.flows.iter().map(|f| SwitchRecord {
            hash: f[0],
            at_switch: f[1],
            at_end: f[2],
        })
    }
}

/// A flow's 5-tuple as the sink's report gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct FlowKey {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl FlowKey {
    /// The classifier's flow hash of the 5-tuple: what the gate keyed the flow by.
    pub fn hash(&self) -> u32 {
        flow_hash(
            u128::from(self.src),
            u128::from(self.dst),
            self.sport,
            self.dport,
            self.proto,
        )
    }
}

/// A flow's merged record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MergedFlow {
    /// The 5-tuple, when an INT report named it (a flow that never carried INT is known to
    /// the collector by its hash only).
    pub key: Option<FlowKey>,
    pub hash: u32,
    /// Small phase: INT reports (packets that carried INT) and their bytes (IPv6 packets).
    pub int_packets: u64,
    pub int_bytes: u64,
    /// Large phase: Σ over windows of Ĉ_end - Ĉ_switch, in the gate's unit.
    pub sketch: u64,
    /// Windows in which the flow was judged large.
    pub large_windows: u32,
}

impl MergedFlow {
    /// The flow's count in the gate's unit: small phase + large phase, each packet once.
    pub fn total(&self, unit: GateUnit) -> u64 {
        match unit {
            GateUnit::Packets => self.int_packets + self.sketch,
            GateUnit::Bytes => self.int_bytes + L2_OVERHEAD * self.int_packets + self.sketch,
        }
    }
}

/// The collector's per-flow merge (`docs/codesign.md` "Merge").
#[derive(Debug, Clone, Default)]
pub struct Merger {
    flows: HashMap<u32, MergedFlow>,
    unit: Option<GateUnit>,
    /// Windows merged, and what they say was lost.
    pub windows: u64,
    pub overflow: u64,
    pub lost: u64,
    /// Windows refused: a unit different from the first window's.
    pub unit_mismatch: u64,
}

impl Merger {
    pub fn new() -> Merger {
        Merger::default()
    }

    /// The gate's unit (from the first window), packets until one arrived.
    pub fn unit(&self) -> GateUnit {
        self.unit.unwrap_or_default()
    }

    /// One INT report of the flow `key`: a small-phase packet of `packet_len` bytes.
    pub fn on_report(&mut self, key: FlowKey, packet_len: u32) {
        let h = key.hash();
        let f = self.flows.entry(h).or_insert_with(|| MergedFlow {
            hash: h,
            ..Default::default()
        });
        f.key = Some(key);
        f.int_packets += 1;
        f.int_bytes += u64::from(packet_len);
    }

    /// One closed window: each switch record adds the flow's large phase in it.
    pub fn on_window(&mut self, m: &GateWindowMsg) {
        let unit = if m.unit == "bytes" {
            GateUnit::Bytes
        } else {
            GateUnit::Packets
        };
        if *self.unit.get_or_insert(unit) != unit {
            self.unit_mismatch += 1;
            return;
        }
        self.windows += 1;
        self.overflow += u64::from(m.overflow);
        self.lost += u64::from(m.lost);
        for r in m.records() {
            let f = self.flows.entry(r.hash).or_insert_with(|| MergedFlow {
                hash: r.hash,
                ..Default::default()
            });
            f.sketch += u64::from(r.at_end.saturating_sub(r.at_switch));
            f.large_windows += 1;
        }
    }

    /// The merged record of a flow.
    pub fn get(&self, key: &FlowKey) -> Option<&MergedFlow> {
        self.flows.get(&key.hash())
    }

    /// Every merged record, by hash.
    pub fn flows(&self) -> impl Iterator<Item = &MergedFlow> {
        self.flows.values()
    }
}

#[cfg(test)]
mod tests;
