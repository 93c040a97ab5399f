//! The CPU collector the DTA seed compares against: the same report parse, then
//! `std::collections::HashMap` inserts (default hasher), and the same as a pipeline stage
//! with the translator's loop-back.

use peregrine_control::dta::translator_stage::Loopback;
use peregrine_dataplane::runtime::{Batch, Context, Disposition, Stage};
use peregrine_dataplane::PacketBuf;
use peregrine_wire::dta::{self, Primitive, Repr, Variant};
use std::collections::HashMap;

/// The CPU collector: the same parse, then hash-map inserts.
#[derive(Debug, Default)]
pub struct HashCollector {
    kw: HashMap<u32, u32>,
    ki: HashMap<u32, u64>,
    lists: Vec<Vec<u32>>,
    pc: HashMap<u32, [u32; 5]>,
}

impl HashCollector {
    /// A collector for `mode`'s stream of `keys` distinct keys: the map that primitive
    /// uses is pre-sized for them (`with_capacity`, as a collector sized for what it stores
    /// would be; no resize while it runs). `keys` 0 (unbounded): every map starts empty.
    pub fn sized(mode: &str, keys: u32) -> HashCollector {
        let mut c = HashCollector::default();
        let k = keys as usize;
        match mode {
            _ if k == 0 => {}
            "kw1" | "kw2" => c.kw = HashMap::with_capacity(k),
            "ki" => c.ki = HashMap::with_capacity(k),
            "postcard" => c.pc = HashMap::with_capacity(k),
            _ => {}
        }
        c
    }

    pub fn handle(&mut self, payload: &[u8]) -> bool {
        let Ok(p) = dta::Packet::new_checked(payload, Variant::Tracked) else {
            return false;
        };
        let Ok(r) = Repr::parse(&p) else { return false };
        match r.primitive {
            Primitive::KeyWrite { key, data, .. } => {
                self.kw.insert(key, data[0]);
            }
            Primitive::KeyIncrement { key, counter, .. } => {
                *self.ki.entry(key).or_default() += counter;
            }
            Primitive::Append { list, data } => {
                if self.lists.len() <= list as usize {
                    self.lists.resize_with(list as usize + 1, Vec::new);
                }
                let l = &mut self.lists[list as usize];
                // A bounded list, like the ring: keep the newest 64 Ki entries.
                if l.len() >= 1 << 16 {
                    l.clear();
                }
                l.push(data);
            }
            Primitive::Postcard { key, hop, data } => {
                if let Some(v) = self
                    .pc
                    .entry(key)
                    .or_insert([u32::MAX; 5])
                    .get_mut(hop as usize)
                {
                    *v = data;
                }
            }
        }
        true
    }

    /// Distinct keys stored (all maps).
    pub fn len(&self) -> usize {
        self.kw.len() + self.ki.len() + self.pc.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The hash-map collector as a stage, with the same loop-back as the translator's.
#[derive(Debug)]
pub struct HashStage {
    pub c: HashCollector,
    pub lb: Loopback,
}

impl<B: PacketBuf> Stage<B> for HashStage {
    fn name(&self) -> &'static str {
        "hash_collector"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        let rx = batch.rx_port;
        batch.for_each_active(|p| {
            let d = p.data_mut();
            let at = dta::FRAME_OVERHEAD;
            let end = d.len().min(at + 32);
            let payload_len = u16::from_be_bytes([d[38], d[39]]) as usize - 8;
            let ok = self.c.handle(&d[at..(at + payload_len).min(end)]);
            debug_assert!(ok);
            self.lb.advance(&mut d[at..]);
            Disposition::tx(rx ^ 1)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dta_ingest::{payloads, MODES};

    /// The bounded stream never leaves its K keys, in the collector as in the stream.
    #[test]
    fn bounded_stream_stays_in_k_keys() {
        let k = 1000;
        let lb = Loopback::new(Variant::Tracked).with_keys(k);
        for m in MODES {
            let mut c = HashCollector::sized(m, k);
            let mut ps = payloads(m, 64, &lb);
            for _ in 0..400 {
                for p in ps.iter_mut() {
                    assert!(c.handle(p), "{m}");
                    lb.advance(p);
                }
            }
            assert!(c.len() <= k as usize, "{m}: {}", c.len());
            if !m.starts_with("append") {
                assert!(c.len() > 900, "{m}: {}", c.len());
            }
        }
    }
}
