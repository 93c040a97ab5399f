//! Running tshark and walking its JSON (`-T json`): field lookups, malformed-packet and
//! expert-info checks, PFCP datagrams decoded in a pcap, and live captures started and
//! stopped on what tshark and its file show ([`LiveCapture`]).

use crate::pcap::{parse_complete, pcap, Record};
use crate::tools::{collect_lines, Guard, Lines, START_GUARD};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A live capture: `tshark -i <iface> -f <filter> -F pcap -w <file>`, waited on by state,
/// not by the clock. [`start`](Self::start) returns once dumpcap captures;
/// [`wait_records`](Self::wait_records) waits until the packets a test expects are in the file
/// (dumpcap writes them a fraction of a second after they pass, more under load); and
/// [`stop`](Self::stop) interrupts tshark, which closes the file, and waits for it to exit.
/// Dropped without `stop`, the capture is stopped by its [`Guard`].
#[derive(Debug)]
pub struct LiveCapture {
    guard: Guard,
    stderr: Lines,
    /// The classic pcap file tshark writes.
    pub file: PathBuf,
}

impl LiveCapture {
    /// Start capturing on `iface` what the capture `filter` takes, into `file` (classic
    /// pcap). Returns once dumpcap has written the file's header, which it does after it
    /// opened the interface and installed the filter (tshark then logs "Capture started."):
    /// every later packet is captured. tshark's "Capturing on ..." line is not that signal:
    /// tshark prints it before it starts dumpcap (it does so for an interface that does not
    /// exist, too). `Err` when tshark cannot be started (the caller skips, or fails under
    /// `CI`); a tshark that exits before capturing (no permission, no such interface) fails
    /// the test with what it printed. The wall clock is only a hang guard ([`START_GUARD`]).
    pub fn start(iface: &str, filter: &str, file: &Path) -> std::io::Result<LiveCapture> {
        // A header already there would not be this capture's.
        let _ = std::fs::remove_file(file);
        let mut c = Command::new("tshark")
            .args(["-i", iface, "-q", "-f", filter, "-F", "pcap", "-w"])
            .arg(file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        // Collected to the end, so tshark never blocks on a full pipe.
        let stderr = collect_lines(c.stderr.take().expect("piped stderr"));
        let mut guard = Guard(Some(c));
        let t0 = Instant::now();
        loop {
            if std::fs::read(file).is_ok_and(|b| parse_complete(&b).is_ok()) {
                break;
            }
            let exited = guard.child().try_wait().ok().flatten();
            if exited.is_some() || t0.elapsed() > START_GUARD {
                // Give the collector a moment for its last words (the failure path only).
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "tshark -i {iface} -f '{filter}' did not start capturing ({}):\n{}",
                    exited.map_or(format!("hang guard {START_GUARD:?} passed"), |st| {
                        format!("it exited: {st}")
                    }),
                    stderr.lock().unwrap().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(LiveCapture {
            guard,
            stderr,
            file: file.to_path_buf(),
        })
    }

    /// The records (capture time, frame) in the file so far (one dumpcap is still writing
    /// is left out).
    pub fn records(&self) -> Vec<Record> {
        let bytes = std::fs::read(&self.file).unwrap_or_default();
        parse_complete(&bytes).unwrap_or_default()
    }

    /// Wait until `done` holds of the records in the file: the packets the test expects have
    /// been written. The wall clock is only a hang guard ([`START_GUARD`]; past it the test
    /// fails naming `what`, with the number of frames and tshark's output).
    pub fn wait_records(&self, what: &str, mut done: impl FnMut(&[Record]) -> bool) {
        let t0 = Instant::now();
        loop {
            let frames = self.records();
            if done(&frames) {
                return;
            }
            assert!(
                t0.elapsed() < START_GUARD,
                "the capture {} did not show {what} in {START_GUARD:?}: {} frames; tshark \
                 printed:\n{}",
                self.file.display(),
                frames.len(),
                self.stderr.lock().unwrap().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Interrupt tshark (SIGINT: it closes the file) and wait for it to exit; its status.
    /// The wall clock is only a hang guard ([`STOP_GUARD`](crate::tools::STOP_GUARD), then SIGKILL).
    pub fn stop(mut self) -> Option<ExitStatus> {
        self.guard.stop_with("-INT")
    }
}

/// Ethernet / IPv4 10.0.0.1 -> 10.0.0.2 / UDP 8805 -> 8805 around a PFCP `payload`
/// (TS 29.244 section 4.2: PFCP over UDP port 8805), checksums filled.
pub fn pfcp_frame(payload: &[u8]) -> Vec<u8> {
    let port = peregrine_pfcp::PORT;
    crate::frames::udp_frame(
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        port,
        port,
        payload,
    )
}

/// Every value stored under `key` anywhere inside `v`, arrays flattened (tshark's
/// `--no-duplicate-keys` turns repeated fields into arrays).
pub fn find_all<'a>(v: &'a Value, key: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == key {
                    match x {
                        Value::Array(xs) => out.extend(xs),
                        x => out.push(x),
                    }
                }
                find_all(x, key, out);
            }
        }
        Value::Array(xs) => xs.iter().for_each(|x| find_all(x, key, out)),
        _ => {}
    }
}

/// Every string stored under `key` anywhere inside `v` ([`find_all`]), in order.
pub fn strings(v: &Value, key: &str) -> Vec<String> {
    let mut found = Vec::new();
    find_all(v, key, &mut found);
    found
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Compare the string values tshark gives each field of `want` ([`strings`]) with the
/// expected ones, in order; an empty expectation asks only that the field be there. A line
/// in `fails` for each field that differs.
pub fn check_fields(layers: &Value, want: &[(&str, Vec<String>)], fails: &mut Vec<String>) {
    for (field, values) in want {
        let got = strings(layers, field);
        if values.is_empty() {
            if got.is_empty() {
                fails.push(format!("{field}: missing"));
            }
        } else if &got != values {
            fails.push(format!("{field}: want {values:?}, tshark says {got:?}"));
        }
    }
}

/// Malformed markers and expert info of warning/error severity or in the malformed group
/// (`PI_WARN` 0x00600000, `PI_MALFORMED` 0x07000000, epan/proto.h).
pub fn malformed(v: &Value, path: &str, out: &mut Vec<String>) {
    const PI_SEVERITY_MASK: u64 = 0x00f0_0000;
    const PI_WARN: u64 = 0x0060_0000;
    const PI_MALFORMED: u64 = 0x0700_0000;
    let num = |x: Option<&Value>| {
        x.and_then(Value::as_str)
            .and_then(|s| s.parse::<u64>().ok())
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let here = format!("{path}/{k}");
                if k.starts_with("_ws.malformed") || k.starts_with("ipv6.opt.ioam.trace.invalid") {
                    out.push(format!("{here}: {x}"));
                }
                if k == "_ws.expert" {
                    let experts = match x {
                        Value::Array(xs) => xs.iter().collect(),
                        x => vec![x],
                    };
                    for ex in experts {
                        let sev = num(ex.get("_ws.expert.severity")).unwrap_or(0);
                        let group = num(ex.get("_ws.expert.group")).unwrap_or(0);
                        if sev & PI_SEVERITY_MASK >= PI_WARN || group == PI_MALFORMED {
                            out.push(format!("{here}: {ex}"));
                        }
                    }
                }
                malformed(x, &here, out);
            }
        }
        Value::Array(xs) => xs.iter().for_each(|x| malformed(x, path, out)),
        _ => {}
    }
}

/// Every (field name, value) pair of a tshark JSON layer tree.
pub fn flatten(v: &Value, out: &mut BTreeMap<String, Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match x {
                    Value::String(s) => out.entry(k.clone()).or_default().push(s.clone()),
                    Value::Array(a) if a.iter().all(Value::is_string) => {
                        for s in a {
                            out.entry(k.clone())
                                .or_default()
                                .push(s.as_str().unwrap_or_default().to_string());
                        }
                    }
                    _ => {
                        out.entry(k.clone()).or_default();
                        flatten(x, out)
                    }
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| flatten(x, out)),
        _ => {}
    }
}

/// `tshark -n -r path -T json`, parsed; `None` (skip) when tshark is missing, a panic
/// under `CI`.
pub fn tshark_json(path: &std::path::Path) -> Option<Value> {
    let ci = crate::tools::in_ci();
    match Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-T", "json"])
        .output()
    {
        Ok(o) if o.status.success() => Some(serde_json::from_slice(&o.stdout).unwrap()),
        r => {
            let why = format!("tshark unavailable: {r:?}");
            assert!(!ci, "{why}");
            eprintln!("skipping tshark oracle: {why}");
            None
        }
    }
}

/// Decode Ethernet `frames` with tshark (`-T json --no-duplicate-keys`, IPv4, UDP and TCP
/// checksums checked: `*.checksum.status` 1 when good) through a temporary pcap named after
/// `tag`, or the file `PEREGRINE_ORACLE_PCAP` names, kept for a look in Wireshark. tshark
/// must be there (check with `tools::tool_present` first); one dissection per frame.
pub fn decode_frames<F: AsRef<[u8]>>(frames: &[F], tag: &str) -> Vec<Value> {
    let keep = std::env::var_os("PEREGRINE_ORACLE_PCAP");
    let path = keep.clone().map(Into::into).unwrap_or_else(|| {
        std::env::temp_dir().join(format!("peregrine-{tag}-{}.pcap", std::process::id()))
    });
    std::fs::write(&path, pcap(frames)).expect("write pcap");
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(["-T", "json", "--no-duplicate-keys"])
        .args(["-o", "ip.check_checksum:TRUE"])
        .args(["-o", "udp.check_checksum:TRUE"])
        .args(["-o", "tcp.check_checksum:TRUE"])
        .output()
        .expect("run tshark");
    if keep.is_none() {
        let _ = std::fs::remove_file(&path);
    }
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let packets: Vec<Value> = serde_json::from_slice(&out.stdout).expect("tshark JSON");
    assert_eq!(packets.len(), frames.len(), "one dissection per frame");
    packets
}

/// [`decode_frames`] of one frame: its protocol layers, and what [`malformed`] finds in
/// them.
pub fn decode_frame(frame: &[u8], tag: &str) -> (Value, Vec<String>) {
    let layers = decode_frames(&[frame], tag)[0]["_source"]["layers"].clone();
    let mut fails = Vec::new();
    malformed(&layers, "", &mut fails);
    (layers, fails)
}

/// Whether the flattened fields hold `key` with value `val`.
pub fn has(f: &BTreeMap<String, Vec<String>>, key: &str, val: &str) -> bool {
    f.get(key).is_some_and(|v| v.iter().any(|x| x == val))
}

/// Decode `payloads` (PFCP datagrams) with tshark; assert none is malformed or carries an
/// error-severity expert item; return each packet's flattened fields. `None` when tshark is
/// missing (not allowed when `CI` is set).
pub fn decode_clean(payloads: &[Vec<u8>], tag: &str) -> Option<Vec<BTreeMap<String, Vec<String>>>> {
    let frames: Vec<Vec<u8>> = payloads.iter().map(|p| pfcp_frame(p)).collect();
    let path = std::env::temp_dir().join(format!("peregrine-{tag}-{}.pcap", std::process::id()));
    std::fs::write(&path, pcap(&frames)).unwrap();
    let out = tshark_json(&path);
    let _ = std::fs::remove_file(&path);
    let out = out?;
    let pkts = out.as_array().unwrap();
    assert_eq!(pkts.len(), payloads.len());
    let mut all = Vec::new();
    for (i, pkt) in pkts.iter().enumerate() {
        let mut f = BTreeMap::new();
        flatten(&pkt["_source"]["layers"], &mut f);
        assert!(
            !f.contains_key("_ws.malformed"),
            "packet {i}: malformed: {f:#?}"
        );
        if let Some(sev) = f.get("_ws.expert.severity") {
            // 0x800000 = error (PI_ERROR); warnings are allowed.
            assert!(
                !sev.iter().any(|s| s == "8388608"),
                "packet {i}: expert error: {:?}",
                f.get("_ws.expert.message")
            );
        }
        all.push(f);
    }
    Some(all)
}
