//! The edge API: ZeroMQ REP, one JSON request, one JSON reply (docs/kestrel.md "API").
//!
//! ```text
//! {"cmd": "edges"}                                   -> {"ok": true, "version", "from_seq", "edges": [...]}
//! {"cmd": "set_edges", "qid": 3, "lat": [7 ns], "iat": [7 ns]}
//!                                                    -> {"ok": true, "version", "from_seq"}
//! {"cmd": "status"}                                  -> {"ok": true, "windows", ...}
//! anything wrong                                     -> {"ok": false, "error": "..."}
//! ```

use super::KestrelFeature;
use serde::Deserialize;
use serde_json::{json, Value};

/// Largest request accepted, bytes.
pub const MAX_REQUEST: usize = 16 * 1024;

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
                })
            }
        }
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
