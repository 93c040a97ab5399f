//! `peregrinectl codesign collect`: the sketch-INT co-design collector (`docs/codesign.md`
//! "Merge"). Subscribes to the sinks' raw INT reports and the sources' gate exports, merges
//! each flow's small phase (INT reports) with its large phase (the gate's switch records)
//! through `peregrine_control::codesign::Merger`, and prints the per-flow records as JSON.

use crate::{Fail, EXIT_TRANSPORT};
use clap::Args;
use peregrine_control::codesign::{FlowKey, GateWindowMsg, Merger, GATE_TOPIC};
use peregrine_int_manager::dispatch::parse_topic;
use serde_json::{json, Value};
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct CollectArgs {
    /// A sink's INT report PUB endpoint (`[int] reports`); repeat for several sinks.
    #[arg(long = "int-reports", required = true)]
    int_reports: Vec<String>,
    /// A source's gate export endpoint (`[int.gate] export`); repeat for several sources.
    #[arg(long, required = true)]
    gate: Vec<String>,
    /// Collect for this long, ms.
    #[arg(long, default_value_t = 10_000)]
    duration_ms: u64,
    /// Stop earlier once nothing arrived for this long (after the first message), ms.
    #[arg(long)]
    idle_ms: Option<u64>,
    /// Print only this many flows (largest first); all by default.
    #[arg(long)]
    top: Option<usize>,
}

fn transport(what: &str, e: zmq::Error) -> Fail {
    Fail(EXIT_TRANSPORT, format!("{what}: {e}"))
}

/// A raw report's 5-tuple and length; `None` if a field is missing.
fn report_key(v: &Value) -> Option<(FlowKey, u32)> {
    let ip = |k: &str| v[k].as_str()?.parse::<Ipv6Addr>().ok();
    let n = |k: &str| v[k].as_u64();
    Some((
        FlowKey {
            src: ip("src")?,
            dst: ip("dst")?,
            proto: u8::try_from(n("proto")?).ok()?,
            sport: u16::try_from(n("sport")?).ok()?,
            dport: u16::try_from(n("dport")?).ok()?,
        },
        u32::try_from(n("packet_len")?).ok()?,
    ))
}

pub fn collect(a: &CollectArgs) -> Result<(), Fail> {
    let ctx = zmq::Context::new();
    let sub = |eps: &[String], prefix: &str| -> Result<zmq::Socket, Fail> {
        let s = ctx.socket(zmq::SUB).map_err(|e| transport("SUB", e))?;
        s.set_linger(0).map_err(|e| transport("linger", e))?;
        for ep in eps {
            s.connect(ep)
                .map_err(|e| transport(&format!("connect {ep}"), e))?;
        }
        s.set_subscribe(prefix.as_bytes())
            .map_err(|e| transport("subscribe", e))?;
        Ok(s)
    };
    let reports = sub(&a.int_reports, "raw/")?;
    let gates = sub(&a.gate, GATE_TOPIC)?;
    let mut m = Merger::new();
    let (mut n_reports, mut bad_reports, mut bad_windows) = (0u64, 0u64, 0u64);
    let mut errors: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(a.duration_ms);
    let mut last: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if now >= deadline
            || a.idle_ms
                .zip(last)
                .is_some_and(|(ms, t)| now.duration_since(t) >= Duration::from_millis(ms))
        {
            break;
        }
        let mut items = [
            reports.as_poll_item(zmq::POLLIN),
            gates.as_poll_item(zmq::POLLIN),
        ];
        if zmq::poll(&mut items, 100).map_err(|e| transport("poll", e))? == 0 {
            continue;
        }
        let (r_ready, g_ready) = (items[0].is_readable(), items[1].is_readable());
        if r_ready {
            while let Ok(frames) = reports.recv_multipart(zmq::DONTWAIT) {
                last = Some(Instant::now());
                let ok = frames.len() == 2
                    && std::str::from_utf8(&frames[0])
                        .ok()
                        .and_then(parse_topic)
                        .is_some_and(|(k, _, _)| k == "raw");
                let key = ok
                    .then(|| crate::decode_payload(&frames[1]))
                    .flatten()
                    .and_then(|v| report_key(&v));
                match key {
                    Some((k, len)) => {
                        m.on_report(k, len);
                        n_reports += 1;
                    }
                    None => bad_reports += 1,
                }
            }
        }
        if g_ready {
            while let Ok(frames) = gates.recv_multipart(zmq::DONTWAIT) {
                last = Some(Instant::now());
                let msg = match frames.as_slice() {
                    [_, payload] => GateWindowMsg::decode(payload),
                    f => Err(format!("a {}-frame gate message", f.len())),
                };
                match msg {
                    Ok(w) => m.on_window(&w),
                    Err(e) => {
                        bad_windows += 1;
                        if errors.len() < 8 {
                            errors.push(e);
                        }
                    }
                }
            }
        }
    }
    let unit = m.unit();
    let mut flows: Vec<_> = m.flows().copied().collect();
    flows.sort_by_key(|f| (std::cmp::Reverse(f.total(unit)), f.hash));
    if let Some(n) = a.top {
        flows.truncate(n);
    }
    let flows: Vec<Value> = flows
        .iter()
        .map(|f| {
            let mut v = json!({
                "hash": f.hash,
                "int_packets": f.int_packets,
                "int_bytes": f.int_bytes,
                "sketch": f.sketch,
                "large_windows": f.large_windows,
                "total": f.total(unit),
            });
            if let Some(k) = f.key {
                v["src"] = json!(k.src.to_string());
                v["dst"] = json!(k.dst.to_string());
                v["proto"] = json!(k.proto);
                v["sport"] = json!(k.sport);
                v["dport"] = json!(k.dport);
            }
            v
        })
        .collect();
    let out = json!({
        "unit": peregrine_control::codesign::GateWindowMsg::unit_of(unit),
        "reports": n_reports,
        "reports_undecodable": bad_reports,
        "windows": m.windows,
        "windows_refused": bad_windows + m.unit_mismatch,
        "errors": errors,
        "overflow": m.overflow,
        "lost": m.lost,
        "flows": flows,
    });
    println!("{out}");
    Ok(())
}
