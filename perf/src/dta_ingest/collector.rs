//! The CPU collector the DTA seed compares against (issue 15: "a CPU collector that inserts
//! the same reports into a hash map"): the translator's own decode
//! (`peregrine_wire::dta::decode_fast`, shared, not copied), then
//! `std::collections::HashMap` inserts with the default hasher (SipHash-1-3); and the same
//! as a pipeline stage with the translator's outer-header checks, per-batch dispatch and
//! loop-back, so that the comparison is store against store.
//!
//! Append keeps each list in a `HashMap<u32 list id, bounded ring>` ([`Lists::Map`], the
//! issue's collector); [`Lists::Vec`] is the stricter second baseline, the lists in a `Vec`
//! indexed by list id (no hashing at all).

use peregrine_control::dta::translator_stage::{report_offsets, Loopback};
use peregrine_dataplane::runtime::{Batch, Context, Disposition, DropReason, Stage};
use peregrine_dataplane::PacketBuf;
use peregrine_wire::dta::{self, Fast, Repr, Variant};
use peregrine_wire::udp;
use std::collections::HashMap;

/// Entries kept per Append list (the newest; the ring's length in the benchmark's region).
const LIST_LEN: usize = 1 << 16;

/// Lists pre-sized for in the Append map (the benchmark's streams use 8).
const LISTS: usize = 8;

/// How the collector keeps Append lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lists {
    /// `HashMap<u32 list id, bounded ring>`, default hasher, pre-sized: the issue's
    /// hash-map collector.
    #[default]
    Map,
    /// A `Vec` of lists indexed by list id: no hashing, a stricter baseline.
    Vec,
}

/// A bounded list: the newest `LIST_LEN` entries, overwritten oldest first.
#[derive(Debug)]
pub struct Ring {
    buf: Box<[u32]>,
    next: usize,
}

impl Ring {
    fn new() -> Ring {
        Ring {
            buf: vec![0; LIST_LEN].into_boxed_slice(),
            next: 0,
        }
    }

    #[inline]
    fn push(&mut self, v: u32) {
        if let Some(x) = self.buf.get_mut(self.next) {
            *x = v;
        }
        self.next = (self.next + 1) & (LIST_LEN - 1);
    }
}

/// The CPU collector: the translator's decode, then hash-map inserts.
#[derive(Debug, Default)]
pub struct HashCollector {
    kw: HashMap<u32, u32>,
    ki: HashMap<u32, u64>,
    lists: Lists,
    map_lists: HashMap<u32, Ring>,
    // Not `Vec<Ring>` (reviewed, left separate): this baseline is the earlier rounds' `Vec`
    // push that perf/results/dta-ingest.md measures Append against ("4x a `Vec` push"), the
    // map's is the pre-sized 64 Ki ring; one list type would change one of the two.
    vec_lists: Vec<Vec<u32>>,
    pc: HashMap<u32, [u32; 5]>,
}

impl HashCollector {
    /// A collector for `mode`'s stream of `keys` distinct keys: the map that primitive
    /// uses is pre-sized for them (`with_capacity`, as a collector sized for what it stores
    /// would be; no resize while it runs). `keys` 0 (unbounded): every keyed map starts
    /// empty. Append's list map is pre-sized for the stream's lists either way; `lists` says
    /// how Append lists are kept.
    pub fn sized(mode: &str, keys: u32, lists: Lists) -> HashCollector {
        let mut c = HashCollector {
            lists,
            ..HashCollector::default()
        };
        let k = keys as usize;
        match mode {
            m if m.starts_with("append") && lists == Lists::Map => {
                c.map_lists = HashMap::with_capacity(LISTS)
            }
            _ if k == 0 => {}
            "kw1" | "kw2" => c.kw = HashMap::with_capacity(k),
            "ki" => c.ki = HashMap::with_capacity(k),
            "postcard" => c.pc = HashMap::with_capacity(k),
            _ => {}
        }
        c
    }

    /// One report (the UDP payload, NACK-tracking base header): decoded as the translator
    /// decodes it, then inserted. `false` for a report it cannot decode.
    #[inline(always)]
    pub fn handle(&mut self, payload: &[u8]) -> bool {
        let f = match dta::decode_fast(payload, Variant::Tracked.base_len()) {
            Some(f) => f,
            None => match parse_other(payload) {
                Some(f) => f,
                None => return false,
            },
        };
        match f {
            Fast::KeyWrite { key, data, .. } => {
                self.kw.insert(key, data);
            }
            Fast::KeyIncrement { key, counter, .. } => {
                *self.ki.entry(key).or_default() += counter;
            }
            Fast::Append { list, data } => match self.lists {
                Lists::Map => self
                    .map_lists
                    .entry(list)
                    .or_insert_with(Ring::new)
                    .push(data),
                Lists::Vec => {
                    if self.vec_lists.len() <= list as usize {
                        self.vec_lists.resize_with(list as usize + 1, Vec::new);
                    }
                    let l = &mut self.vec_lists[list as usize];
                    // Bounded at 64 Ki entries like the ring (emptied when full, not
                    // overwritten oldest first).
                    if l.len() >= LIST_LEN {
                        l.clear();
                    }
                    l.push(data);
                }
            },
            Fast::Postcard { key, hop, data } => {
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

    /// Distinct keys stored (all keyed maps).
    pub fn len(&self) -> usize {
        self.kw.len() + self.ki.len() + self.pc.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Append lists held.
    pub fn lists(&self) -> usize {
        self.map_lists.len() + self.vec_lists.len()
    }
}

/// What [`dta::decode_fast`] does not take (Key-Write with 3 or 7 words), by the general
/// parse, as the translator does; Key-Write keeps its first word.
#[cold]
#[inline(never)]
fn parse_other(payload: &[u8]) -> Option<Fast> {
    let p = dta::Packet::new_checked(payload, Variant::Tracked).ok()?;
    Some(Fast::first_word(&Repr::parse(&p).ok()?.primitive))
}

/// The hash-map collector as a stage: the translator stage's outer-header parse and checks
/// (`report_offsets`: Ethernet, IPv4 with its header checksum, UDP lengths; the UDP
/// destination port), its per-batch dispatch (`Batch::decide_each`: a batch decided alike
/// goes out in one tx burst) and its loop-back.
#[derive(Debug)]
pub struct HashStage {
    pub c: HashCollector,
    pub lb: Loopback,
    /// Frames that are not reports, and reports the collector cannot decode.
    pub not_report: DropReason,
}

impl<B: PacketBuf> Stage<B> for HashStage {
    fn name(&self) -> &'static str {
        "hash_collector"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        let rx = batch.rx_port;
        let lb = self.lb;
        batch.decide_each(|p| {
            let Some((udp_at, _src, len, dport)) = report_offsets(p.data()) else {
                return Disposition::drop_as(self.not_report);
            };
            let frame = p.data_mut();
            let Some(payload) = frame.get_mut(udp_at + udp::HEADER_LEN..udp_at + len) else {
                return Disposition::drop_as(self.not_report);
            };
            if dport != dta::UDP_PORT || !self.c.handle(payload) {
                return Disposition::drop_as(self.not_report);
            }
            lb.advance(payload);
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
            let mut c = HashCollector::sized(m, k, Lists::Map);
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
