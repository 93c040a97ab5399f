//! The collector library: keep the last N windows of each kind (late parts added in), answer
//! per-(TEID, QFI) queries as the minimum over rows, and rank the keys of a queue. Keys come
//! from the caller (the PFCP sessions it knows); the collector never guesses them. I/O-free:
//! feed it messages from a SUB socket ([`Collector::subscribe`]), a windows file or a
//! virtual-time driver.

use super::export::{decode, Msg, PmMsg, SketchMsg};
use peregrine_dataplane::telemetry::kestrel::SumBucket;
use std::collections::VecDeque;

/// A feature to rank keys by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Packets,
    Bytes,
    Green,
    Yellow,
    Red,
    Lat(usize),
    Iat(usize),
}

impl Feature {
    /// `packets`, `bytes`, `green`, `yellow`, `red`, `lat0`..`lat7`, `iat0`..`iat7`.
    pub fn parse(s: &str) -> Result<Feature, String> {
        let bin = |p: &str| -> Result<usize, String> {
            match p.parse::<usize>() {
                Ok(b) if b < 8 => Ok(b),
                _ => Err(format!("`{s}`: histogram bins are 0..=7")),
            }
        };
        Ok(match s {
            "packets" => Feature::Packets,
            "bytes" => Feature::Bytes,
            "green" => Feature::Green,
            "yellow" => Feature::Yellow,
            "red" => Feature::Red,
            _ if s.starts_with("lat") => Feature::Lat(bin(&s[3..])?),
            _ if s.starts_with("iat") => Feature::Iat(bin(&s[3..])?),
            _ => {
                return Err(format!(
                    "unknown feature `{s}` (packets, bytes, green, yellow, red, lat0..lat7, iat0..iat7)"
                ))
            }
        })
    }

    pub fn of(&self, b: &SumBucket) -> u64 {
        match *self {
            Feature::Packets => b.packets,
            Feature::Bytes => b.bytes,
            Feature::Green => b.colour[0],
            Feature::Yellow => b.colour[1],
            Feature::Red => b.colour[2],
            Feature::Lat(i) => b.lat[i],
            Feature::Iat(i) => b.iat[i],
        }
    }
}

/// A (TEID, QFI) key.
pub type Key = (u32, u8);

/// The last N windows.
#[derive(Debug)]
pub struct Collector {
    keep: usize,
    sketches: VecDeque<SketchMsg>,
    pm: VecDeque<PmMsg>,
    /// Messages that did not decode.
    pub bad: u64,
}

impl Collector {
    pub fn new(keep: usize) -> Collector {
        Collector {
            keep: keep.max(1),
            sketches: VecDeque::new(),
            pm: VecDeque::new(),
            bad: 0,
        }
    }

    /// Add one encoded message; a bad one is counted and its reason returned.
    pub fn add_bytes(&mut self, bytes: &[u8]) -> Result<(), String> {
        let r = decode(bytes).and_then(|m| self.add(m));
        if r.is_err() {
            self.bad += 1;
        }
        r
    }

    /// Keep a decoded message. A late part is added into its kept window; one whose layout
    /// differs from that window's is refused (its buckets would land on other keys) and the
    /// window is left as it was.
    pub fn add(&mut self, m: Msg) -> Result<(), String> {
        match m {
            Msg::Sketch(s) => {
                if s.h.late {
                    if let Some(w) = self.sketches.iter_mut().find(|w| w.h.seq == s.h.seq) {
                        return merge(w, &s);
                    }
                }
                self.sketches.push_back(s);
                while self.sketches.len() > self.keep {
                    self.sketches.pop_front();
                }
            }
            Msg::Postcards(_) => {}
            Msg::Pm(p) => {
                self.pm.push_back(p);
                while self.pm.len() > self.keep {
                    self.pm.pop_front();
                }
            }
        }
        Ok(())
    }

    /// The kept sketch windows, oldest first.
    pub fn windows(&self) -> impl Iterator<Item = &SketchMsg> {
        self.sketches.iter()
    }

    pub fn latest(&self) -> Option<&SketchMsg> {
        self.sketches.back()
    }

    pub fn pm(&self) -> impl Iterator<Item = &PmMsg> {
        self.pm.iter()
    }

    /// Estimates of `key` in (dir, qid), one per kept window: (seq, estimate).
    pub fn query(&self, dir: usize, qid: usize, key: Key) -> Vec<(u64, SumBucket)> {
        self.sketches
            .iter()
            .filter_map(|w| Some((w.h.seq, w.query(dir, qid, key.0, key.1)?)))
            .collect()
    }

    /// The top `n` of `keys` in (dir, qid) of the latest window by `f`, largest first.
    pub fn top(
        &self,
        dir: usize,
        qid: usize,
        keys: &[Key],
        f: Feature,
        n: usize,
    ) -> Vec<(Key, u64)> {
        let Some(w) = self.latest() else {
            return Vec::new();
        };
        let mut v: Vec<(Key, u64)> = keys
            .iter()
            .filter_map(|&k| Some((k, f.of(&w.query(dir, qid, k.0, k.1)?))))
            .filter(|(_, x)| *x > 0)
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }

    /// A SUB socket on `endpoint` for every message kind.
    pub fn subscribe(ctx: &zmq::Context, endpoint: &str) -> Result<zmq::Socket, String> {
        let s = ctx
            .socket(zmq::SUB)
            .map_err(|e| format!("SUB socket: {e}"))?;
        s.connect(endpoint)
            .map_err(|e| format!("connect {endpoint}: {e}"))?;
        s.set_subscribe(b"")
            .map_err(|e| format!("subscribe: {e}"))?;
        Ok(s)
    }

    /// Receive what is waiting on a SUB socket (multipart: topic, CBOR), up to `wait_ms` for
    /// the first message; the number added.
    pub fn pump(&mut self, sub: &zmq::Socket, wait_ms: i64) -> usize {
        let mut n = 0;
        let mut wait = wait_ms;
        loop {
            match sub.poll(zmq::POLLIN, wait) {
                Ok(k) if k > 0 => {}
                _ => return n,
            }
            wait = 0;
            let Ok(parts) = sub.recv_multipart(0) else {
                return n;
            };
            if let Some(body) = parts.get(1) {
                if self.add_bytes(body).is_ok() {
                    n += 1;
                }
            }
        }
    }
}

/// Add a late part into its window. Counters saturate: a hostile or corrupt part cannot wrap
/// a window's counts (nor panic a debug build).
fn merge(w: &mut SketchMsg, late: &SketchMsg) -> Result<(), String> {
    if late.layout != w.layout {
        return Err(format!(
            "late part of window {} has another layout than the window",
            w.h.seq
        ));
    }
    for s in &late.sketches {
        match w
            .sketches
            .iter_mut()
            .find(|x| x.dir == s.dir && x.qid == s.qid)
        {
            None => w.sketches.push(s.clone()),
            Some(x) => {
                for (a, b) in [
                    (&mut x.packets, &s.packets),
                    (&mut x.bytes, &s.bytes),
                    (&mut x.green, &s.green),
                    (&mut x.yellow, &s.yellow),
                    (&mut x.red, &s.red),
                    (&mut x.lat, &s.lat),
                    (&mut x.iat, &s.iat),
                ] {
                    // Same layout, both validated: the lengths are equal.
                    for (p, q) in a.iter_mut().zip(b) {
                        *p = p.saturating_add(*q);
                    }
                }
            }
        }
    }
    w.packets = w.packets.saturating_add(late.packets);
    w.skipped = w.skipped.saturating_add(late.skipped);
    for s in &late.h.sources {
        if !w.h.sources.contains(s) {
            w.h.sources.push(*s);
        }
    }
    // The part may have been binned with an edge version the window has not seen.
    for v in &late.edges_version {
        if !w.edges_version.contains(v) {
            w.edges_version.push(*v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kestrel::export::{encode, EdgesRec, Header, LayoutRec, SketchRec, HASH_NAME};

    fn msg(seq: u64, late: bool, width: usize, fill: u64) -> SketchMsg {
        let n = 2 * width;
        SketchMsg {
            h: Header {
                v: crate::kestrel::export::VERSION,
                kind: "kestrel".into(),
                seq,
                window_ns: 1_000,
                workers: 2,
                sources: vec![u32::from(late)],
                late,
            },
            layout: LayoutRec {
                qids: 1,
                rows: 2,
                width,
                seeds: vec![5],
                hash: HASH_NAME.into(),
            },
            edges_version: vec![1 + u64::from(late)],
            edges: vec![EdgesRec {
                qid: 0,
                lat: vec![],
                iat: vec![],
            }],
            packets: fill,
            skipped: 0,
            sketches: vec![SketchRec {
                dir: 0,
                qid: 0,
                packets: vec![fill; n],
                bytes: vec![fill; n],
                green: vec![fill; n],
                yellow: vec![0; n],
                red: vec![0; n],
                lat: vec![fill; 8 * n],
                iat: vec![0; 8 * n],
            }],
        }
    }

    #[test]
    fn a_late_part_is_added_into_its_window_with_its_sources_and_edge_version() {
        let mut c = Collector::new(4);
        c.add_bytes(&encode(&msg(3, false, 4, 2))).unwrap();
        c.add_bytes(&encode(&msg(3, true, 4, 5))).unwrap();
        let w = c.latest().unwrap();
        assert_eq!(c.windows().count(), 1);
        assert_eq!(w.packets, 7);
        assert_eq!(w.sketches[0].packets, vec![7; 8]);
        assert_eq!(w.h.sources, vec![0, 1]);
        assert_eq!(w.edges_version, vec![1, 2]);
        assert_eq!(c.query(0, 0, (1, 9))[0].1.packets, 7);
    }

    #[test]
    fn a_late_part_with_another_layout_is_refused_and_changes_nothing() {
        let mut c = Collector::new(4);
        c.add_bytes(&encode(&msg(3, false, 4, 2))).unwrap();
        let before = c.latest().unwrap().clone();
        let e = c.add_bytes(&encode(&msg(3, true, 8, 5))).unwrap_err();
        assert!(e.contains("another layout"), "{e}");
        assert_eq!(c.bad, 1);
        assert_eq!(c.latest().unwrap(), &before);
    }

    #[test]
    fn merged_counts_saturate_instead_of_wrapping() {
        let mut c = Collector::new(4);
        c.add_bytes(&encode(&msg(3, false, 4, u64::MAX - 1)))
            .unwrap();
        c.add_bytes(&encode(&msg(3, true, 4, 9))).unwrap();
        let w = c.latest().unwrap();
        assert_eq!(w.packets, u64::MAX);
        assert!(w.sketches[0].lat.iter().all(|&x| x == u64::MAX));
    }

    #[test]
    fn duplicate_sketches_and_out_of_range_pm_records_are_refused() {
        let mut m = msg(1, false, 4, 1);
        m.sketches.push(m.sketches[0].clone());
        let e = decode(&encode(&m)).unwrap_err();
        assert!(e.contains("two sketches of dir 0 qid 0"), "{e}");
        let pm = crate::kestrel::export::PmMsg {
            h: Header {
                kind: "pm".into(),
                ..m.h.clone()
            },
            qfis: vec![crate::kestrel::export::PmRec {
                dir: 2,
                qfi: 9,
                packets: 1,
                bytes: 1,
                mean_delay_ns: 1,
            }],
        };
        let e = decode(&encode(&pm)).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
    }
}
