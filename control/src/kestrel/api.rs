//! The edge API: ZeroMQ REP, one JSON request, one JSON reply (docs/kestrel.md "API").
//!
//! ```text
//! {"cmd": "edges"}                                   -> {"ok": true, "version", "from_seq", "edges": [...]}
//! {"cmd": "set_edges", "qid": 3, "lat": [7 ns], "iat": [7 ns]}
//!                                                    -> {"ok": true, "version", "from_seq"}
//! {"cmd": "status"}                                  -> {"ok": true, "windows", ...}
//! {"cmd": "keys", "dir": "ul"}                       -> {"ok": true, "count", "keys": [{dir, teid, qfi}]}
//! {"cmd": "key", "teid": T, "qfi": Q, "dir": "ul"}   -> {"ok": true, "qid", "windows": [{seq, ...}]}
//! {"cmd": "top", "qid": 7, "dir": "ul", "by": "bytes", "n": 10}
//!                                                    -> {"ok": true, "seq", "top": [{teid, qfi, value}]}
//! anything wrong                                     -> {"ok": false, "error": "..."}
//! ```

use super::KestrelFeature;
use serde::Deserialize;
use serde_json::{json, Value};

/// Largest request accepted, bytes.
pub const MAX_REQUEST: usize = 16 * 1024;

/// Most keys a `keys` reply lists, and most a `top` reply ranks.
pub const MAX_KEYS_REPLY: usize = 10_000;
pub const MAX_TOP: usize = 1_000;

#[derive(Debug, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
enum Request {
    Edges,
    SetEdges {
        qid: usize,
        lat: Vec<Value>,
        iat: Vec<Value>,
    },
    Status,
    Keys {
        dir: Option<String>,
    },
    Key {
        teid: u32,
        qfi: u8,
        dir: Option<String>,
    },
    Top {
        qid: usize,
        dir: Option<String>,
        by: Option<String>,
        n: Option<usize>,
    },
}

fn dir_of(d: &Option<String>) -> Result<u8, String> {
    match d.as_deref() {
        None | Some("ul") => Ok(0),
        Some("dl") => Ok(1),
        Some(x) => Err(format!("dir `{x}`: `ul` or `dl`")),
    }
}

fn dir_name(d: u8) -> &'static str {
    if d == 0 {
        "ul"
    } else {
        "dl"
    }
}

fn error(e: impl std::fmt::Display) -> Value {
    json!({"ok": false, "error": e.to_string()})
}

impl KestrelFeature {
    /// Answer one request (bytes as received).
    pub fn handle_request(&mut self, req: &[u8]) -> Value {
        if req.len() > MAX_REQUEST {
            return error(format!(
                "request of {} bytes, at most {MAX_REQUEST}",
                req.len()
            ));
        }
        let v: Value = match serde_json::from_slice(req) {
            Ok(v) => v,
            Err(e) => return error(format!("not JSON: {e}")),
        };
        let r: Request = match serde_json::from_value(v) {
            Ok(r) => r,
            Err(e) => return error(format!("bad request: {e}")),
        };
        match r {
            Request::Edges => {
                let t = *self.table.current();
                let set = t.current;
                json!({
                    "ok": true,
                    "version": set.version,
                    "from_seq": t.from_seq,
                    "edges": (0..self.layout.qids).map(|q| json!({
                        "qid": q,
                        "lat": set.qids[q].lat,
                        "iat": set.qids[q].iat,
                        "calibrating": set.calibrating[q],
                    })).collect::<Vec<_>>(),
                })
            }
            Request::SetEdges { qid, lat, iat } => match nums(&lat)
                .and_then(|l| Ok((l, nums(&iat)?)))
                .and_then(|(l, i)| self.set_edges(qid, &l, &i))
            {
                Ok((version, from_seq)) => {
                    json!({"ok": true, "version": version, "from_seq": from_seq})
                }
                Err(e) => error(e),
            },
            Request::Keys { dir } => match dir_of(&dir) {
                Err(e) => error(e),
                Ok(d) => {
                    self.refresh_keys();
                    let keys: Vec<Value> = self
                        .keys
                        .all()
                        .filter(|k| k.0 == d)
                        .take(MAX_KEYS_REPLY)
                        .map(|(d, t, q)| json!({"dir": dir_name(d), "teid": t, "qfi": q}))
                        .collect();
                    let count = self.keys.all().filter(|k| k.0 == d).count();
                    json!({"ok": true, "count": count, "truncated": count > keys.len(), "keys": keys})
                }
            },
            Request::Key { teid, qfi, dir } => match dir_of(&dir) {
                Err(e) => error(e),
                Ok(d) => self.key_reply(d, teid, qfi),
            },
            Request::Top { qid, dir, by, n } => {
                match (
                    dir_of(&dir),
                    super::collector::Feature::parse(by.as_deref().unwrap_or("bytes")),
                ) {
                    (Err(e), _) | (_, Err(e)) => error(e),
                    (Ok(d), Ok(f)) => self.top_reply(d, qid, f, n.unwrap_or(10)),
                }
            }
            Request::Status => {
                let s = &self.stats;
                json!({
                    "ok": true,
                    "windows": s.windows,
                    "late_parts": s.late_parts,
                    "packets": s.packets,
                    "sketch_bytes": s.sketch_bytes,
                    "pm_bytes": s.pm_bytes,
                    "rebinnings": s.rebinnings,
                    "layout": super::export::LayoutRec::of(&self.layout),
                    "window_ns": self.window_ns,
                    "workers": self.workers,
                    "publish": self.section.publish,
                    "session_keys": self.keys.len(),
                    "detect": self.detector.as_ref().map(|d| json!({
                        "detectors": d.kinds(),
                        "windows_scored": d.stats.windows_scored,
                        "alarms": d.stats.alarms_total,
                    })),
                })
            }
        }
    }

    fn qfi_map(&self) -> peregrine_dataplane::qos::QfiMap {
        self.sessions
            .as_ref()
            .map(|s| s.qfi_map)
            .unwrap_or_default()
    }

    /// One key's estimates in the kept windows; only keys of installed sessions.
    fn key_reply(&mut self, d: u8, teid: u32, qfi: u8) -> Value {
        self.refresh_keys();
        if self.keys.teids(d, qfi).binary_search(&teid).is_err() {
            return error(format!(
                "no installed PFCP session has the key ({}, TEID {teid:#x}, QFI {qfi})",
                dir_name(d)
            ));
        }
        let qid = usize::from(self.qfi_map().qid(qfi));
        if qid >= self.layout.qids {
            return error(format!(
                "QFI {qfi} maps to QID {qid}, beyond the sketches' {} QIDs",
                self.layout.qids
            ));
        }
        let windows: Vec<Value> = self
            .collector
            .query(usize::from(d), qid, (teid, qfi))
            .into_iter()
            .map(|(seq, b)| {
                json!({"seq": seq, "packets": b.packets, "bytes": b.bytes, "green": b.colour[0],
                       "yellow": b.colour[1], "red": b.colour[2], "lat": b.lat, "iat": b.iat})
            })
            .collect();
        json!({"ok": true, "dir": dir_name(d), "teid": teid, "qfi": qfi, "qid": qid, "windows": windows})
    }

    /// The installed sessions' keys of queue `qid` ranked by `f` in the latest window.
    fn top_reply(&mut self, d: u8, qid: usize, f: super::collector::Feature, n: usize) -> Value {
        if qid >= self.layout.qids {
            return error(format!(
                "QID {qid} is not configured (QIDs are 0..{})",
                self.layout.qids
            ));
        }
        if n == 0 || n > MAX_TOP {
            return error(format!("n {n}: 1..={MAX_TOP}"));
        }
        self.refresh_keys();
        let map = self.qfi_map();
        let keys: Vec<(u32, u8)> = self
            .keys
            .all()
            .filter(|k| k.0 == d && usize::from(map.qid(k.2)) == qid)
            .map(|k| (k.1, k.2))
            .collect();
        let top: Vec<Value> = self
            .collector
            .top(usize::from(d), qid, &keys, f, n)
            .into_iter()
            .map(|((t, q), v)| json!({"teid": t, "qfi": q, "value": v}))
            .collect();
        json!({"ok": true, "dir": dir_name(d), "qid": qid, "seq": self.collector.latest().map(|w| w.h.seq),
               "keys": keys.len(), "top": top})
    }

    /// Answer what waits on the REP socket (non-blocking; a few per tick).
    pub(super) fn serve_api(&mut self) {
        for _ in 0..8 {
            let req = {
                let Some(s) = self.io.as_ref().and_then(|io| io.api.as_ref()) else {
                    return;
                };
                match s.recv_bytes(zmq::DONTWAIT) {
                    Ok(r) => r,
                    Err(_) => return,
                }
            };
            let reply = self.handle_request(&req).to_string();
            if let Some(s) = self.io.as_ref().and_then(|io| io.api.as_ref()) {
                let _ = s.send(reply.as_bytes(), 0);
            }
        }
    }
}

/// Edge values: numbers; `null` (what JSON writers make of NaN) and "NaN" read as NaN, so
/// the edge parser refuses them as not a number, by position.
fn nums(v: &[Value]) -> Result<Vec<f64>, String> {
    v.iter()
        .enumerate()
        .map(|(i, x)| match x {
            Value::Number(n) => n
                .as_f64()
                .ok_or_else(|| format!("edge {i} is not a number")),
            Value::Null => Ok(f64::NAN),
            Value::String(s) if s.eq_ignore_ascii_case("nan") => Ok(f64::NAN),
            _ => Err(format!("edge {i} is not a number: {x}")),
        })
        .collect()
}
