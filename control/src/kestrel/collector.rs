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
        match decode(bytes) {
            Ok(m) => {
                self.add(m);
                Ok(())
            }
            Err(e) => {
                self.bad += 1;
                Err(e)
            }
        }
    }

    pub fn add(&mut self, m: Msg) {
        match m {
            Msg::Sketch(s) => {
                if s.h.late {
                    if let Some(w) = self.sketches.iter_mut().find(|w| w.h.seq == s.h.seq) {
                        merge(w, &s);
                        return;
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

/// Add a late part into its window.
fn merge(w: &mut SketchMsg, late: &SketchMsg) {
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
                    for (p, q) in a.iter_mut().zip(b) {
                        *p += q;
                    }
                }
            }
        }
    }
    w.packets += late.packets;
    w.skipped += late.skipped;
    for s in &late.h.sources {
        if !w.h.sources.contains(s) {
            w.h.sources.push(*s);
        }
    }
}
