//! `peregrinectl fridge`: a slice's delay CDF and quantiles from the daemon's fridge reports
//! (ZeroMQ SUB, CBOR maps as `docs/fridge.md` describes), and the Tofino range table for the
//! P4 twin.

use crate::{Fail, EXIT_TRANSPORT, EXIT_USAGE};
use clap::{Args, Subcommand};
use peregrine_dataplane::telemetry::fridge::tofino::{pow2_p, RangeTable};
use peregrine_dataplane::telemetry::fridge::XMode;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

#[derive(Subcommand, Debug)]
pub enum FridgeCmd {
    /// Print a slice's window reports (CDF and quantiles) as they arrive.
    Show(ShowArgs),
    /// Print the Tofino correction-factor range table for a fridge (section 6.2).
    P4Table(TableArgs),
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The daemon's `[fridge] zmq_pub` endpoint.
    #[arg(long, default_value = "tcp://127.0.0.1:5600")]
    pub endpoint: String,
    /// Only this slice (default: every slice).
    #[arg(long)]
    pub slice: Option<String>,
    /// Stop after this many reports.
    #[arg(long, default_value_t = 1)]
    pub count: u64,
    /// Give up after this long without a report, ms.
    #[arg(long, default_value_t = 5000)]
    pub wait_ms: u64,
}

#[derive(Args, Debug)]
pub struct TableArgs {
    /// Fridge slots.
    #[arg(long)]
    pub m: u32,
    /// Entry probability (rounded to a power of two).
    #[arg(long)]
    pub p: f64,
    /// What x counts: insertions or requests.
    #[arg(long, default_value = "insertions")]
    pub x_counts: String,
}

/// The daemon's CBOR window report (v1), decoded with the daemon's own type.
pub use peregrine_control::fridge::WindowReport as Report;

/// The text `show` prints for one report: header, quantiles, and the CDF at the decade and
/// 2-5 steps the bins reach.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let when = if r.window_start_ns == u64::MAX {
        "whole run".to_string()
    } else {
        format!(
            "window at {:.3} s ({} ms)",
            r.window_start_ns as f64 / 1e9,
            r.window_ns / 1_000_000
        )
    };
    let _ = writeln!(
        o,
        "slice {} ({}, {}), {when}: {} samples, ~{:.1} pairs",
        r.slice, r.kind, r.vantage, r.samples, r.estimated_pairs
    );
    if !r.peers.is_empty() {
        let _ = writeln!(o, "  GTP-U peers: {}", r.peers.join(", "));
    }
    for (k, (m, p, n)) in r.fridges.iter().enumerate() {
        let _ = writeln!(o, "  fridge {k}: M = {m}, p = {p}, {n} samples");
    }
    for (q, d) in &r.quantiles {
        let _ = writeln!(o, "  p{:<4} {:>12.3} ms", q * 100.0, d / 1e6);
    }
    let total: f64 = r.bins.iter().map(|b| b.2).sum();
    if total > 0.0 {
        let _ = writeln!(o, "  CDF:");
        let first = r.bins.first().map_or(0, |b| b.0) as f64;
        let mut t = 1e3; // 1 us, then 1-2-5 steps up to the first point at 100%
        'grid: while t <= 1e11 {
            for m in [1.0, 2.0, 5.0] {
                let x = t * m;
                if x < first {
                    continue;
                }
                let below: f64 = r
                    .bins
                    .iter()
                    .map(|&(lo, hi, w)| w * ((x - lo as f64) / (hi - lo) as f64).clamp(0.0, 1.0))
                    .sum::<f64>()
                    / total;
                let bar = "#".repeat((below * 40.0).round() as usize);
                let _ = writeln!(o, "  <= {:>10.3} ms {:>6.1}% {bar}", x / 1e6, below * 100.0);
                if below >= 1.0 - 1e-12 {
                    break 'grid;
                }
            }
            t *= 10.0;
        }
    }
    o
}

pub fn run(cmd: &FridgeCmd, json: bool) -> Result<(), Fail> {
    match cmd {
        FridgeCmd::Show(a) => show(a, json),
        FridgeCmd::P4Table(a) => {
            let mode = match a.x_counts.as_str() {
                "insertions" => XMode::Insertions,
                "requests" => XMode::Requests,
                o => {
                    return Err(Fail(
                        EXIT_USAGE,
                        format!("--x-counts {o}: insertions or requests"),
                    ))
                }
            };
            if a.m < 2 || !(a.p > 0.0 && a.p <= 1.0) {
                return Err(Fail(EXIT_USAGE, "--m >= 2 and 0 < --p <= 1".into()));
            }
            let t = RangeTable::generate(a.m, pow2_p(a.p), mode);
            println!(
                "# fridge M={} p=2^-{} x counts {}: value/prefix_len -> factor (0 = invalid)",
                t.m, t.p_exp, a.x_counts
            );
            for r in &t.rules {
                println!("{:#010x}/{} {}", r.value, r.len, r.factor);
            }
            Ok(())
        }
    }
}

fn show(a: &ShowArgs, json: bool) -> Result<(), Fail> {
    let ctx = zmq::Context::new();
    let s = ctx
        .socket(zmq::SUB)
        .map_err(|e| Fail(EXIT_TRANSPORT, format!("SUB socket: {e}")))?;
    let topic = match &a.slice {
        Some(n) => format!("fridge.{n}"),
        None => "fridge.".into(),
    };
    s.set_subscribe(topic.as_bytes())
        .and_then(|_| s.set_rcvtimeo(200))
        .and_then(|_| s.connect(&a.endpoint))
        .map_err(|e| Fail(EXIT_TRANSPORT, format!("{}: {e}", a.endpoint)))?;
    let mut got = 0;
    let mut last = Instant::now();
    while got < a.count {
        if last.elapsed() > Duration::from_millis(a.wait_ms) {
            return Err(Fail(
                EXIT_TRANSPORT,
                format!("no fridge report within {} ms", a.wait_ms),
            ));
        }
        let frames = match s.recv_multipart(0) {
            Ok(f) => f,
            Err(zmq::Error::EAGAIN) => continue,
            Err(e) => return Err(Fail(EXIT_TRANSPORT, format!("recv: {e}"))),
        };
        last = Instant::now();
        let Some(body) = frames.get(1) else {
            eprintln!("peregrinectl: a report without a body frame, skipped");
            continue;
        };
        let r: Report = match ciborium::from_reader(&body[..]) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("peregrinectl: a report that is not a fridge CBOR map ({e}), skipped");
                continue;
            }
        };
        if r.v != 1 {
            eprintln!(
                "peregrinectl: a fridge report of version {} (this tool reads 1), skipped",
                r.v
            );
            continue;
        }
        // An exact slice name: `fridge.a` also prefixes `fridge.ab`.
        if a.slice.as_ref().is_some_and(|n| *n != r.slice) {
            continue;
        }
        if json {
            println!(
                "{}",
                serde_json::json!({"slice": r.slice, "kind": r.kind, "vantage": r.vantage, "peers": r.peers,
                    "window_start_ns": r.window_start_ns, "samples": r.samples,
                    "estimated_pairs": r.estimated_pairs, "quantiles": r.quantiles, "bins": r.bins})
            );
        } else {
            print!("{}", render(&r));
        }
        got += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_shows_quantiles_and_cdf() {
        let r = Report {
            v: 1,
            slice: "hs".into(),
            kind: "tcp_handshake".into(),
            vantage: "n6".into(),
            window_start_ns: 2_000_000_000,
            window_ns: 1_000_000_000,
            samples: 4,
            estimated_pairs: 8.0,
            quantiles: vec![(0.5, 10e6), (0.99, 19e6)],
            bins: vec![(9_000_000, 11_000_000, 4.0), (19_000_000, 21_000_000, 4.0)],
            fridges: vec![(1024, 0.5, 4)],
            peers: vec![],
        };
        let t = render(&r);
        assert!(!t.contains("GTP-U peers"), "{t}");
        assert!(
            t.contains("slice hs (tcp_handshake, n6), window at 2.000 s (1000 ms): 4 samples"),
            "{t}"
        );
        assert!(t.contains("p50         10.000 ms"), "{t}");
        assert!(t.contains("<=     10.000 ms   25.0%"), "{t}");
        assert!(t.contains("<=     20.000 ms   75.0%"), "{t}");
        assert!(t.contains("<=     50.000 ms  100.0%"), "{t}");
        // A per-gNB echo slice names its gNB.
        let g = Report {
            slice: "gnb-a".into(),
            kind: "gtp_echo".into(),
            vantage: "n3".into(),
            peers: vec!["192.0.2.10".into()],
            ..r
        };
        let t = render(&g);
        assert!(t.contains("slice gnb-a (gtp_echo, n3)"), "{t}");
        assert!(t.contains("  GTP-U peers: 192.0.2.10\n"), "{t}");
    }
}
