//! `peregrinectl`: the operator's command line for Peregrine's control endpoints.
//!
//! `peregrinectl fridge show|p4-table` reads the fridge's window reports (see `fridge`).
//!
//! `peregrinectl int add|mod|del|list|stats|watch` talks to the INT manager (Miranda et al., III-B):
//! rule requests over ZeroMQ REQ/REP (JSON by default, `--cbor`), reports over SUB. Every request
//! has a timeout, so a dead manager is an error, not a hang.
//!
//! `peregrinectl codesign collect` merges INT reports with the co-design gate's exports into
//! per-flow records (module `codesign`, docs/codesign.md "Merge").
//!
//! `peregrinectl dta --region FILE info|kw|ki|path|follow|ki-session|int-path` queries a DTA
//! collector region (module `dta`), printing JSON.
//!
//! Exit codes: 0 success, 1 the manager answered with an error, 2 bad usage, 3 transport error
//! or timeout.

mod codesign;
mod dta;
mod dta_rdma;
mod fridge;
mod kestrel;

use clap::{Args, Parser, Subcommand, ValueEnum};
use peregrine_int::request::{
    Flags, Mode, ModeKind, ModifyFields, Protocol, Reply, ReplyBody, Request, Rule, TraceType,
};
use peregrine_int_manager::codec::{ReplyCodec, RequestJson};
use peregrine_int_manager::dispatch::parse_topic;
use peregrine_int_manager::qos_monitor::{QosReport, Window};
use peregrine_int_manager::{DEFAULT_REPORTS_ENDPOINT, DEFAULT_RULES_ENDPOINT};
use std::fmt::Write as _;
use std::net::Ipv6Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const EXIT_REPLY_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_TRANSPORT: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "peregrinectl",
    version,
    about = "Control Peregrine's endpoints"
)]
struct Cli {
    /// INT manager rule API (ZeroMQ REQ/REP).
    #[arg(long, global = true, default_value = DEFAULT_RULES_ENDPOINT)]
    rules: String,
    /// INT manager reports (ZeroMQ PUB/SUB).
    #[arg(long, global = true, default_value = DEFAULT_REPORTS_ENDPOINT)]
    reports: String,
    /// How long to wait for the manager's reply, ms.
    #[arg(long, global = true, default_value_t = 3000)]
    timeout_ms: u64,
    /// Send requests as CBOR instead of JSON.
    #[arg(long, global = true)]
    cbor: bool,
    /// Print replies and reports as JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Top,
}

#[derive(Subcommand, Debug)]
enum Top {
    /// In-band telemetry: rules and reports.
    #[command(subcommand)]
    Int(IntCmd),
    /// Fridge delay distributions: a slice's CDF and quantiles; the P4 range table.
    #[command(subcommand)]
    Fridge(fridge::FridgeCmd),
    /// Direct Telemetry Access: query a collector region.
    Dta(dta::DtaCmd),
    /// Kestrel sketch telemetry: query windows, read and set bin edges.
    Kestrel(kestrel::KestrelCmd),
    /// Sketch-INT co-design: merge INT reports and gate exports into per-flow records.
    #[command(subcommand)]
    Codesign(CodesignCmd),
}

#[derive(Subcommand, Debug)]
enum CodesignCmd {
    /// Subscribe to sinks' reports and sources' gate exports; print merged flows as JSON.
    Collect(codesign::CollectArgs),
}

#[derive(Subcommand, Debug)]
enum IntCmd {
    /// Install a rule (seed Listing 1).
    Add(AddArgs),
    /// Change an installed rule.
    Mod(ModArgs),
    /// Remove a rule.
    Del {
        /// Namespace.
        #[arg(long)]
        ns: u16,
    },
    /// List installed rules.
    List,
    /// Per-namespace counters.
    Stats {
        /// Only this namespace.
        #[arg(long)]
        ns: Option<u16>,
    },
    /// Print reports as they arrive, one line each.
    Watch(WatchArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ProtoArg {
    Tcp,
    Udp,
    Icmp,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModeArg {
    Count,
    Frequency,
    Probability,
}

impl From<ModeArg> for ModeKind {
    fn from(m: ModeArg) -> ModeKind {
        match m {
            ModeArg::Count => ModeKind::Count,
            ModeArg::Frequency => ModeKind::Frequency,
            ModeArg::Probability => ModeKind::Probability,
        }
    }
}

#[derive(Args, Debug)]
struct AddArgs {
    /// Namespace id (1..=65535).
    #[arg(long)]
    ns: u16,
    /// Application id.
    #[arg(long)]
    app: u32,
    /// Flow source IPv6 address.
    #[arg(long)]
    src: Ipv6Addr,
    /// Flow destination IPv6 address.
    #[arg(long)]
    dst: Ipv6Addr,
    /// Transport protocol.
    #[arg(long, value_enum)]
    proto: ProtoArg,
    /// Source port, 0 = any.
    #[arg(long, default_value_t = 0)]
    sport: u16,
    /// Destination port, 0 = any.
    #[arg(long, default_value_t = 0)]
    dport: u16,
    /// Trace type, hex (seed Table I), e.g. 0x7000E000.
    #[arg(long, value_parser = parse_hex_u32)]
    trace_type: u32,
    /// Sampling mode.
    #[arg(long, value_enum)]
    mode: ModeArg,
    /// Mode setting: packets (count), ms (frequency) or percent (probability).
    #[arg(long)]
    setting: f64,
    /// Send reports in-band back to the source.
    #[arg(long)]
    piggyback: bool,
    /// Intermediate nodes extract in-band reports and transmit them.
    #[arg(long)]
    extract: bool,
    /// Do not publish reports to the controller.
    #[arg(long)]
    no_transmit: bool,
    /// Hops do not collect metadata unless enabled per node.
    #[arg(long)]
    no_hops: bool,
}

#[derive(Args, Debug)]
struct ModArgs {
    /// Namespace.
    #[arg(long)]
    ns: u16,
    /// New sampling mode.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// New mode setting.
    #[arg(long)]
    setting: Option<f64>,
    /// New trace type, hex.
    #[arg(long, value_parser = parse_hex_u32)]
    trace_type: Option<u32>,
    /// Publish reports to the controller.
    #[arg(long)]
    transmit: Option<bool>,
    /// Piggy-back reports to the source.
    #[arg(long)]
    piggyback: Option<bool>,
    /// Extract in-band reports at intermediate nodes.
    #[arg(long)]
    extract: Option<bool>,
    /// Namespace-wide hop collection.
    #[arg(long)]
    hops: Option<bool>,
    /// Force collection on at this node id (repeatable).
    #[arg(long = "enable-hop")]
    enable_hop: Vec<u16>,
    /// Force collection off at this node id (repeatable).
    #[arg(long = "disable-hop")]
    disable_hop: Vec<u16>,
}

#[derive(Args, Debug)]
struct WatchArgs {
    /// Only this application.
    #[arg(long)]
    app: Option<u32>,
    /// Only this namespace.
    #[arg(long)]
    ns: Option<u32>,
    /// Only QoS reports.
    #[arg(long, conflicts_with = "raw")]
    qos: bool,
    /// Only raw reports.
    #[arg(long)]
    raw: bool,
    /// Exit after this many reports.
    #[arg(long)]
    count: Option<u64>,
    /// Exit (status 0) after this many ms.
    #[arg(long)]
    duration_ms: Option<u64>,
}

fn parse_hex_u32(s: &str) -> Result<u32, String> {
    let h = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u32::from_str_radix(h, 16).map_err(|e| format!("{s:?} is not a 32-bit hex number: {e}"))
}

/// A failure, with its exit code.
pub(crate) struct Fail(u8, String);

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 });
        }
    };
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, msg)) => {
            eprintln!("peregrinectl: {msg}");
            ExitCode::from(code)
        }
    }
}

fn run(cli: &Cli) -> Result<(), Fail> {
    let cmd = match &cli.cmd {
        Top::Int(cmd) => cmd,
        Top::Fridge(c) => return fridge::run(c, cli.json),
        Top::Dta(d) => return dta::run(d).map_err(|(code, msg)| Fail(code, msg)),
        Top::Kestrel(k) => return kestrel::run(k).map_err(|(code, msg)| Fail(code, msg)),
        Top::Codesign(CodesignCmd::Collect(a)) => return codesign::collect(a),
    };
    let req = match cmd {
        IntCmd::Add(a) => add_request(a)?,
        IntCmd::Mod(m) => mod_request(m)?,
        IntCmd::Del { ns } => Request::Remove { namespace: *ns },
        IntCmd::List => Request::List,
        IntCmd::Stats { ns } => Request::Stats { namespace: *ns },
        IntCmd::Watch(w) => return watch(cli, w),
    };
    let reply = call(cli, &req)?;
    print_reply(cli, &reply)
}

fn add_request(a: &AddArgs) -> Result<Request, Fail> {
    let mode = Mode::from_parts(a.mode.into(), a.setting)
        .map_err(|e| Fail(EXIT_USAGE, format!("--setting: {e}")))?;
    Ok(Request::Install(Rule {
        ns_id: a.ns,
        app_id: a.app,
        src_ip: a.src,
        dst_ip: a.dst,
        src_port: a.sport,
        dst_port: a.dport,
        protocol: match a.proto {
            ProtoArg::Tcp => Protocol::Tcp,
            ProtoArg::Udp => Protocol::Udp,
            ProtoArg::Icmp => Protocol::Icmp,
        },
        trace_type: TraceType(a.trace_type),
        mode,
        flags: Flags {
            transmit_report: !a.no_transmit,
            piggyback_report: a.piggyback,
            extract_report: a.extract,
            hop_enabled: !a.no_hops,
        },
    }))
}

fn mod_request(m: &ModArgs) -> Result<Request, Fail> {
    let changes = ModifyFields {
        mode: m.mode.map(Into::into),
        mode_setting: m.setting,
        trace_type: m.trace_type.map(TraceType),
        transmit_report: m.transmit,
        piggyback_report: m.piggyback,
        extract_report: m.extract,
        hop_enabled: m.hops,
        enable_hops: m.enable_hop.clone(),
        disable_hops: m.disable_hop.clone(),
    };
    if changes.is_empty() {
        return Err(Fail(
            EXIT_USAGE,
            "int mod: nothing to change (give --mode, --setting, --trace-type, --transmit, \
             --piggyback, --extract, --hops, --enable-hop or --disable-hop)"
                .into(),
        ));
    }
    Ok(Request::Modify {
        namespace: m.ns,
        changes,
    })
}

fn transport(what: &str, e: zmq::Error) -> Fail {
    Fail(EXIT_TRANSPORT, format!("{what}: {e}"))
}

/// One request, one reply, within the timeout.
fn call(cli: &Cli, req: &Request) -> Result<Reply, Fail> {
    let ctx = zmq::Context::new();
    let s = ctx
        .socket(zmq::REQ)
        .map_err(|e| transport("REQ socket", e))?;
    let ms = cli.timeout_ms.min(i32::MAX as u64) as i32;
    s.set_linger(0).map_err(|e| transport("linger", e))?;
    s.set_rcvtimeo(ms).map_err(|e| transport("rcvtimeo", e))?;
    s.set_sndtimeo(ms).map_err(|e| transport("sndtimeo", e))?;
    s.connect(&cli.rules)
        .map_err(|e| transport(&format!("connect {}", cli.rules), e))?;
    let msg = if cli.cbor {
        req.to_cbor()
    } else {
        req.to_json()
    };
    let timeout = || {
        Fail(
            EXIT_TRANSPORT,
            format!(
                "no reply from the INT manager at {} within {} ms",
                cli.rules, cli.timeout_ms
            ),
        )
    };
    match s.send(msg, 0) {
        Ok(()) => {}
        Err(zmq::Error::EAGAIN) => return Err(timeout()),
        Err(e) => return Err(transport("send", e)),
    }
    let bytes = match s.recv_bytes(0) {
        Ok(b) => b,
        Err(zmq::Error::EAGAIN) => return Err(timeout()),
        Err(e) => return Err(transport("recv", e)),
    };
    // The manager answers in the request's encoding.
    let r = if cli.cbor {
        Reply::from_cbor(&bytes)
    } else {
        Reply::from_json(&bytes)
    };
    r.map_err(|e| Fail(EXIT_TRANSPORT, format!("unreadable reply: {e}")))
}

fn print_reply(cli: &Cli, r: &Reply) -> Result<(), Fail> {
    if cli.json {
        println!("{}", String::from_utf8_lossy(&r.to_json()));
    }
    let body = match r {
        Reply::Ok(b) => b,
        Reply::Error { code, message } => {
            return Err(Fail(EXIT_REPLY_ERROR, format!("error {code}: {message}")))
        }
    };
    if cli.json {
        return Ok(());
    }
    match body {
        ReplyBody::Installed { ns_id } => println!("installed namespace {ns_id}"),
        ReplyBody::Modified { ns_id } => println!("modified namespace {ns_id}"),
        ReplyBody::Removed { ns_id } => println!("removed namespace {ns_id}"),
        ReplyBody::List { rules } => {
            println!(
                "{:>5} {:>10} {:<39} {:<39} {:<4} {:>5} {:>5} {:<10} {:<22} flags",
                "ns", "app", "src", "dst", "prot", "sport", "dport", "trace", "mode"
            );
            for r in rules {
                println!("{}", rule_line(r));
            }
        }
        ReplyBody::Stats { stats } => {
            println!(
                "{:>5} {:>10} {:>12} {:>14} {:>12} {:>14} {:>12} req_sent",
                "ns", "app", "tx_pkts", "tx_bytes", "rx_pkts", "rx_bytes", "int_pkts"
            );
            for s in stats {
                println!(
                    "{:>5} {:>10} {:>12} {:>14} {:>12} {:>14} {:>12} {}",
                    s.ns_id,
                    s.app_id,
                    s.tx_packets,
                    s.tx_bytes,
                    s.rx_packets,
                    s.rx_bytes,
                    s.int_packets,
                    s.request_sent
                );
            }
        }
    }
    Ok(())
}

fn rule_line(r: &Rule) -> String {
    let proto = match r.protocol {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
        Protocol::Icmp => "icmp",
    };
    let mode = match r.mode {
        Mode::Count(n) => format!("count {n}"),
        Mode::Frequency(ms) => format!("frequency {ms} ms"),
        Mode::Probability(p) => format!("probability {p} %"),
    };
    let f = r.flags;
    let mut flags = Vec::new();
    for (on, name) in [
        (f.transmit_report, "transmit"),
        (f.piggyback_report, "piggyback"),
        (f.extract_report, "extract"),
        (f.hop_enabled, "hops"),
    ] {
        if on {
            flags.push(name);
        }
    }
    format!(
        "{:>5} {:>10} {:<39} {:<39} {:<4} {:>5} {:>5} 0x{:08X} {:<22} {}",
        r.ns_id,
        r.app_id,
        r.src_ip,
        r.dst_ip,
        proto,
        r.src_port,
        r.dst_port,
        r.trace_type.0,
        mode,
        flags.join(",")
    )
}

fn watch(cli: &Cli, w: &WatchArgs) -> Result<(), Fail> {
    let ctx = zmq::Context::new();
    let s = ctx
        .socket(zmq::SUB)
        .map_err(|e| transport("SUB socket", e))?;
    s.set_linger(0).map_err(|e| transport("linger", e))?;
    s.connect(&cli.reports)
        .map_err(|e| transport(&format!("connect {}", cli.reports), e))?;
    let kinds: &[&str] = match (w.qos, w.raw) {
        (true, _) => &["qos"],
        (_, true) => &["raw"],
        _ => &["raw", "qos"],
    };
    for k in kinds {
        // The prefix narrows what libzmq delivers; the exact check is below (`raw/1/7` is also a
        // prefix of `raw/1/70`).
        let mut prefix = format!("{k}/");
        if let Some(a) = w.app {
            let _ = write!(prefix, "{a}/");
            if let Some(n) = w.ns {
                let _ = write!(prefix, "{n}");
            }
        }
        s.set_subscribe(prefix.as_bytes())
            .map_err(|e| transport("subscribe", e))?;
    }
    let deadline = w
        .duration_ms
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    let mut seen = 0u64;
    loop {
        if w.count.is_some_and(|c| seen >= c) {
            return Ok(());
        }
        let wait = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) => left.as_millis().clamp(1, 200) as i64,
                None => return Ok(()),
            },
            None => 200,
        };
        if s.poll(zmq::POLLIN, wait)
            .map_err(|e| transport("poll", e))?
            == 0
        {
            continue;
        }
        let frames = s.recv_multipart(0).map_err(|e| transport("recv", e))?;
        let [topic, payload] = frames.as_slice() else {
            eprintln!("peregrinectl: ignoring a {}-frame message", frames.len());
            continue;
        };
        let Some((kind, app, ns)) = std::str::from_utf8(topic).ok().and_then(parse_topic) else {
            eprintln!(
                "peregrinectl: ignoring topic {:?}",
                String::from_utf8_lossy(topic)
            );
            continue;
        };
        if w.app.is_some_and(|a| a != app) || w.ns.is_some_and(|n| n != ns) {
            continue;
        }
        let value = match decode_payload(payload) {
            Some(v) => v,
            None => {
                eprintln!("peregrinectl: undecodable {kind} report on {app}/{ns}");
                continue;
            }
        };
        seen += 1;
        if cli.json {
            println!(
                "{}",
                serde_json::json!({"topic": format!("{kind}/{app}/{ns}"), "report": value})
            );
        } else if kind == "qos" {
            match serde_json::from_value::<QosReport>(value.clone()) {
                Ok(r) => println!("{}", qos_line(app, &r)),
                Err(_) => println!("qos app={app} ns={ns} {value}"),
            }
        } else {
            println!("{}", raw_line(kind, app, ns, &value));
        }
    }
}

/// JSON or CBOR (first byte >= 0x80) payload as a JSON value.
fn decode_payload(p: &[u8]) -> Option<serde_json::Value> {
    if p.first().is_some_and(|b| *b >= 0x80) {
        ciborium::de::from_reader(p).ok()
    } else {
        serde_json::from_slice(p).ok()
    }
}

/// `raw app=1 ns=7 seq=.. ...`: the report's scalar fields, arrays by length. Generic over the
/// sink's report type.
fn raw_line(kind: &str, app: u32, ns: u32, v: &serde_json::Value) -> String {
    let mut s = format!("{kind} app={app} ns={ns}");
    match v.as_object() {
        Some(o) => {
            for (k, x) in o {
                match x {
                    serde_json::Value::Null => {}
                    serde_json::Value::Array(a) => {
                        let _ = write!(s, " {k}=[{}]", a.len());
                    }
                    serde_json::Value::Object(_) => {
                        let _ = write!(s, " {k}={{..}}");
                    }
                    serde_json::Value::String(t) => {
                        let _ = write!(s, " {k}={t}");
                    }
                    other => {
                        let _ = write!(s, " {k}={other}");
                    }
                }
            }
        }
        None => {
            let _ = write!(s, " {v}");
        }
    }
    s
}

fn opt(v: Option<f64>, scale: f64, unit: &str) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{:.3}{unit}", x / scale))
}

fn qos_line(app: u32, r: &QosReport) -> String {
    let win = match r.window {
        Window::OneSecond => "1s",
        Window::TenSeconds => "10s",
        Window::OneMinute => "60s",
    };
    format!(
        "qos app={app} ns={} win={win} start={} reports={} thr={} delay={}/p99 {} jitter={} loss={}",
        r.namespace,
        r.window_start_ns,
        r.reports,
        opt(r.throughput_bps, 1e6, "Mb/s"),
        opt(Some(r.delay_ns.mean), 1e3, "us"),
        opt(Some(r.delay_ns.p99 as f64), 1e3, "us"),
        opt(r.jitter_ns, 1e3, "us"),
        opt(r.loss_ratio, 0.01, "%"),
    )
}
