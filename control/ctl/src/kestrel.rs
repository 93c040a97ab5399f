//! `peregrinectl kestrel`: read Kestrel windows (live from the daemon's PUB socket, or from a
//! windows file) and query them through the collector library; read and set bin edges
//! through the daemon's edge API (docs/kestrel.md). Output is JSON.
//!
//! Keys are (TEID, QFI) pairs the caller knows from its PFCP sessions: `--teids A-B` (hex or
//! decimal, inclusive) times `--qfis 1,5,9`, or `--key TEID:QFI` repeated. Without them (and
//! without `--file`) `top` asks the daemon's collector, which knows the keys of its installed
//! sessions (edge API `top`); so does `key` without `--qid`, and `keys` lists them.

use clap::{Args, Subcommand, ValueEnum};
use peregrine_control::kestrel::collector::{Collector, Feature, Key};
use peregrine_control::kestrel::export::{read_file, SketchMsg};
use peregrine_control::kestrel::{DEFAULT_API, DEFAULT_PUBLISH};
use serde_json::{json, Value};
use std::path::PathBuf;

/// Exit code and message of a failed command.
pub type Failure = (u8, String);

const EXIT_REPLY: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_TRANSPORT: u8 = 3;

#[derive(Args, Debug)]
pub struct KestrelCmd {
    /// Read windows from this file (`[kestrel] windows_file`) instead of the PUB socket.
    #[arg(long, global = true)]
    file: Option<PathBuf>,
    /// The daemon's export PUB endpoint.
    #[arg(long, global = true, default_value = DEFAULT_PUBLISH)]
    publish: String,
    /// The daemon's edge API (REP) endpoint.
    #[arg(long, global = true, default_value = DEFAULT_API)]
    api: String,
    /// Live: how long to collect windows, ms.
    #[arg(long, global = true, default_value_t = 2500)]
    wait_ms: u64,
    #[command(subcommand)]
    q: Query,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Dir {
    Ul,
    Dl,
}

#[derive(Args, Debug)]
struct Keys {
    /// TEID range, inclusive: `0x1000-0x103f`, or one TEID.
    #[arg(long)]
    teids: Option<String>,
    /// QFIs of each TEID: `1,5,9`.
    #[arg(long, value_delimiter = ',')]
    qfis: Vec<u8>,
    /// One key `TEID:QFI` (repeat).
    #[arg(long)]
    key: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum Query {
    /// The top keys of a queue in the latest window by a feature.
    Top {
        #[arg(long)]
        qid: usize,
        #[arg(long, value_enum, default_value = "dl")]
        dir: Dir,
        /// packets, bytes, green, yellow, red, lat0..lat7, iat0..iat7.
        #[arg(long, default_value = "packets")]
        by: String,
        #[arg(long, default_value_t = 10)]
        n: usize,
        #[command(flatten)]
        keys: Keys,
    },
    /// One key's estimates (histograms, colours, totals) in every kept window (without
    /// `--qid`: the daemon's, for a key of its sessions).
    Key {
        /// `TEID:QFI`.
        key: String,
        #[arg(long)]
        qid: Option<usize>,
        #[arg(long, value_enum, default_value = "dl")]
        dir: Dir,
    },
    /// The (TEID, QFI) keys of the daemon's installed PFCP sessions (edge API).
    Keys {
        #[arg(long, value_enum, default_value = "ul")]
        dir: Dir,
    },
    /// Windows read: sequence numbers, packets, edge versions.
    Windows,
    /// The current bin edges (edge API).
    Edges,
    /// Set one QID's edges (edge API), ns, 7 strictly increasing values each.
    SetEdges {
        #[arg(long)]
        qid: usize,
        #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
        lat: Vec<f64>,
        #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
        iat: Vec<f64>,
    },
}

fn num(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("`{s}` is not a number"))
}

fn parse_key(s: &str) -> Result<Key, Failure> {
    let bad = |why: String| (EXIT_USAGE, format!("key `{s}`: {why}"));
    let (t, q) = s
        .split_once(':')
        .ok_or_else(|| bad("write TEID:QFI".into()))?;
    let teid =
        u32::try_from(num(t).map_err(bad)?).map_err(|_| bad("TEID beyond 32 bits".into()))?;
    let qfi = num(q).map_err(bad)?;
    if qfi > 63 {
        return Err(bad("QFIs are 0..=63".into()));
    }
    Ok((teid, qfi as u8))
}

fn keys(k: &Keys) -> Result<Vec<Key>, Failure> {
    let mut out = Vec::new();
    for s in &k.key {
        out.push(parse_key(s)?);
    }
    if let Some(r) = &k.teids {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        let u = |e: String| (EXIT_USAGE, format!("--teids: {e}"));
        let (a, b) = (num(a).map_err(u)?, num(b).map_err(u)?);
        if b < a || b - a >= 1 << 20 || b > u64::from(u32::MAX) {
            return Err((
                EXIT_USAGE,
                format!("--teids {r}: an increasing range of at most 2^20 TEIDs"),
            ));
        }
        if k.qfis.is_empty() || k.qfis.iter().any(|&q| q > 63) {
            return Err((EXIT_USAGE, "--teids needs --qfis, each 0..=63".into()));
        }
        for t in a..=b {
            for &q in &k.qfis {
                out.push((t as u32, q));
            }
        }
    }
    if out.is_empty() {
        return Err((
            EXIT_USAGE,
            "no keys: give --teids and --qfis, or --key".into(),
        ));
    }
    Ok(out)
}

fn collect(c: &KestrelCmd) -> Result<Collector, Failure> {
    let mut col = Collector::new(64);
    if let Some(f) = &c.file {
        let bytes =
            std::fs::read(f).map_err(|e| (EXIT_TRANSPORT, format!("{}: {e}", f.display())))?;
        for m in read_file(&bytes).map_err(|e| (EXIT_TRANSPORT, format!("{}: {e}", f.display())))? {
            col.add(m)
                .map_err(|e| (EXIT_TRANSPORT, format!("{}: {e}", f.display())))?;
        }
        return Ok(col);
    }
    let ctx = zmq::Context::new();
    let sub = Collector::subscribe(&ctx, &c.publish).map_err(|e| (EXIT_TRANSPORT, e))?;
    let end = std::time::Instant::now() + std::time::Duration::from_millis(c.wait_ms);
    while std::time::Instant::now() < end {
        col.pump(&sub, 100);
    }
    if col.latest().is_none() {
        return Err((
            EXIT_TRANSPORT,
            format!("no window from {} in {} ms", c.publish, c.wait_ms),
        ));
    }
    Ok(col)
}

fn bucket_json(b: &peregrine_dataplane::telemetry::kestrel::SumBucket) -> Value {
    json!({
        "packets": b.packets, "bytes": b.bytes,
        "green": b.colour[0], "yellow": b.colour[1], "red": b.colour[2],
        "lat": b.lat, "iat": b.iat,
    })
}

fn api_call(c: &KestrelCmd, req: &Value) -> Result<Value, Failure> {
    let ctx = zmq::Context::new();
    let s = ctx
        .socket(zmq::REQ)
        .map_err(|e| (EXIT_TRANSPORT, e.to_string()))?;
    let t = c.wait_ms.min(i32::MAX as u64) as i32;
    let _ = s.set_rcvtimeo(t);
    let _ = s.set_sndtimeo(t);
    let _ = s.set_linger(0);
    s.connect(&c.api)
        .map_err(|e| (EXIT_TRANSPORT, format!("{}: {e}", c.api)))?;
    s.send(req.to_string().as_bytes(), 0)
        .map_err(|e| (EXIT_TRANSPORT, format!("send: {e}")))?;
    let r = s
        .recv_bytes(0)
        .map_err(|e| (EXIT_TRANSPORT, format!("no reply from {} ({e})", c.api)))?;
    let v: Value =
        serde_json::from_slice(&r).map_err(|e| (EXIT_TRANSPORT, format!("reply not JSON: {e}")))?;
    if v["ok"] != json!(true) {
        return Err((
            EXIT_REPLY,
            v["error"].as_str().unwrap_or("refused").to_string(),
        ));
    }
    Ok(v)
}

fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::Ul => "ul",
        Dir::Dl => "dl",
    }
}

fn dir_index(d: Dir) -> usize {
    match d {
        Dir::Ul => 0,
        Dir::Dl => 1,
    }
}

fn check_qid(w: Option<&SketchMsg>, qid: usize) -> Result<(), Failure> {
    match w {
        Some(w) if qid >= w.layout.qids => Err((
            EXIT_REPLY,
            format!(
                "QID {qid} is not configured (QIDs are 0..{})",
                w.layout.qids
            ),
        )),
        _ => Ok(()),
    }
}

pub fn run(c: &KestrelCmd) -> Result<(), Failure> {
    let out = match &c.q {
        Query::Top {
            qid,
            dir,
            by,
            n,
            keys: k,
        } => {
            let f = Feature::parse(by).map_err(|e| (EXIT_USAGE, e))?;
            if k.key.is_empty() && k.teids.is_none() && c.file.is_none() {
                // The daemon ranks the keys of its sessions.
                let r = api_call(
                    c,
                    &json!({"cmd": "top", "qid": qid, "dir": dir_name(*dir), "by": by, "n": n}),
                )?;
                println!("{r}");
                return Ok(());
            }
            let ks = keys(k)?;
            let col = collect(c)?;
            check_qid(col.latest(), *qid)?;
            let top = col.top(dir_index(*dir), *qid, &ks, f, *n);
            json!({
                "seq": col.latest().map(|w| w.h.seq),
                "qid": qid, "by": by,
                "top": top.iter().map(|((t, q), v)| json!({"teid": t, "qfi": q, "value": v})).collect::<Vec<_>>(),
            })
        }
        Query::Key {
            key,
            qid: None,
            dir,
        } => {
            let k = parse_key(key)?;
            api_call(
                c,
                &json!({"cmd": "key", "teid": k.0, "qfi": k.1, "dir": dir_name(*dir)}),
            )?
        }
        Query::Keys { dir } => api_call(c, &json!({"cmd": "keys", "dir": dir_name(*dir)}))?,
        Query::Key {
            key,
            qid: Some(qid),
            dir,
        } => {
            let k = parse_key(key)?;
            let col = collect(c)?;
            check_qid(col.latest(), *qid)?;
            let rows = col.query(dir_index(*dir), *qid, k);
            json!({
                "teid": k.0, "qfi": k.1, "qid": qid,
                "windows": rows.iter().map(|(s, b)| json!({"seq": s, "estimate": bucket_json(b)})).collect::<Vec<_>>(),
            })
        }
        Query::Windows => {
            let col = collect(c)?;
            json!(col
                .windows()
                .map(|w| json!({
                    "seq": w.h.seq, "packets": w.packets, "sources": w.h.sources,
                    "workers": w.h.workers, "edges_version": w.edges_version,
                    "sketches": w.sketches.len(),
                }))
                .collect::<Vec<_>>())
        }
        Query::Edges => api_call(c, &json!({"cmd": "edges"}))?,
        Query::SetEdges { qid, lat, iat } => {
            // NaN has no JSON form: send it as the string the API reads as NaN.
            let v = |x: &[f64]| {
                x.iter()
                    .map(|&f| if f.is_nan() { json!("NaN") } else { json!(f) })
                    .collect::<Vec<_>>()
            };
            api_call(
                c,
                &json!({"cmd": "set_edges", "qid": qid, "lat": v(lat), "iat": v(iat)}),
            )?
        }
    };
    println!("{out}");
    Ok(())
}
