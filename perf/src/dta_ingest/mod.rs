//! What `pg-dta-ingest` (the DTA seed's ingest-rate comparison, issue 15) measures: the
//! report streams, the hash-map collector it compares against ([`collector`]), the
//! kernel-UDP collector ([`udp`]) and the RoCEv2 output modes ([`rdma`]).
//!
//! The key population: Key-Write, Key-Increment and Postcarding reports carry keys in
//! `[0, K)`, K = `--keys` (default: the region's Key-Write slots S, a collector sized for
//! what it stores), the same for the translator and for the collectors (the same report
//! stream, the same loop-back: `Loopback::with_keys`); `--keys 0` is the unbounded stream
//! of earlier rounds (every pass a new key of the 2^32, so a hash map grows without bound).

pub mod collector;
pub mod rdma;
pub mod udp;

use crate::harness::Forwarding;
use clap::Parser;
use peregrine_control::dta::translator_stage::Loopback;
use peregrine_dta::Sizes;
use peregrine_wire::dta::{self, FrameAddrs, Primitive, Repr, Variant};
use peregrine_wire::ethernet::Address;
use std::net::Ipv4Addr;

#[derive(Parser, Debug)]
#[command(about = "DTA translator ingest rate vs testpmd 5tswap and a hash-map collector")]
pub struct Args {
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    // Rounds, core, burst, reports in flight per port (`--inject`, one burst: at most the
    // runtime's burst capacity), testpmd.
    #[command(flatten)]
    pub fwd: Forwarding,
    /// Distinct keys K of the Key-Write / Key-Increment / Postcarding streams (translator
    /// and collectors alike; the hash maps are pre-sized for K). Default: the region's
    /// Key-Write slots S. 0: unbounded (every report a new key of the 2^32, maps not
    /// pre-sized: the earlier rounds' stream).
    #[arg(long)]
    pub keys: Option<u32>,
    /// Internal: one measurement of `mode` in this process; prints `pps allocs`.
    #[arg(long, hide = true)]
    pub child: Option<String>,
    /// Internal: run `mode`'s I/O-free work `count` times (for callgrind).
    #[arg(long, hide = true)]
    pub count_child: Option<String>,
    #[arg(long, hide = true, default_value_t = 0)]
    pub count: u64,
    /// Also measure instructions per report under callgrind.
    #[arg(long)]
    pub callgrind: bool,
    #[arg(long, default_value = "perf/results")]
    pub out: String,
    /// Only testpmd and the RoCEv2 output modes (writes `dta-ingest-rdma.{json,md}`).
    #[arg(long)]
    pub only_rdma: bool,
    /// Only the callgrind counts (I/O-free part and whole loop) of every mode.
    #[arg(long)]
    pub only_callgrind: bool,
}

impl Args {
    /// K, the key population of every keyed stream (0: unbounded).
    pub fn keys(&self) -> u32 {
        self.keys.unwrap_or(Sizes::default().kw_slots as u32)
    }

    /// The loop-back of the run's streams (keys kept in `[0, K)`).
    pub fn loopback(&self) -> Loopback {
        Loopback::new(Variant::Tracked).with_keys(self.keys())
    }

    /// The key population in words, for the generated tables.
    pub fn keys_text(&self) -> String {
        match self.keys() {
            0 => "unbounded (`--keys 0`: every report a new key of the 2^32; the hash maps grow \
                  from empty, not pre-sized)"
                .into(),
            k => format!(
                "K = {k} distinct keys{} (Key-Write, Key-Increment, Postcarding: the same \
                 stream and loop-back for translator and collectors; the collectors' \
                 `std::collections::HashMap`s, default hasher, pre-sized with \
                 `with_capacity(K)`)",
                if self.keys.is_none() {
                    ", the region's Key-Write slots S (default; `--keys`)"
                } else {
                    " (`--keys`)"
                }
            ),
        }
    }

    /// The hash-map collector's column label.
    pub fn baseline_label(&self) -> String {
        match self.keys() {
            0 => "unbounded keys, growing std HashMap".into(),
            k => format!("K = {k} keys, pre-sized std HashMap"),
        }
    }
}

/// The RoCEv2 output modes: the region mode's stream, each report made into RDMA requests.
pub const RDMA_MODES: [&str; 5] = [
    "rdma-kw1",
    "rdma-kw2",
    "rdma-ki",
    "rdma-append16",
    "rdma-postcard",
];

/// The measured primitives (Append with its batch size).
pub const MODES: [&str; 7] = [
    "kw1", "kw2", "ki", "append1", "append4", "append16", "postcard",
];

pub fn sizes(mode: &str) -> Sizes {
    let batch = match mode {
        "append4" => 4,
        "append16" => 16,
        _ => 1,
    };
    Sizes {
        ap_batch: batch,
        ap_lists: 8,
        ap_list_len: 1 << 16,
        ..Sizes::default()
    }
}

/// The `i`-th report of `mode`'s stream (before loop-back changes it); keys mapped into
/// `lb`'s population (Postcarding: five consecutive reports are hops 0-4 of one key).
pub fn primitive(mode: &str, i: u32, lb: &Loopback) -> Primitive {
    let key = lb.key(i.wrapping_mul(0x9e37_79b9));
    match mode {
        "kw1" => Primitive::key_write(1, key, &[i]).unwrap(),
        "kw2" => Primitive::key_write(2, key, &[i]).unwrap(),
        "ki" => Primitive::KeyIncrement {
            redundancy: 2,
            key,
            counter: 1,
        },
        "postcard" => Primitive::Postcard {
            key: lb.key((i / 5).wrapping_mul(0x9e37_79b9)),
            hop: (i % 5) as u8,
            data: i & 0xffff,
        },
        _ => Primitive::Append {
            list: i % 8,
            data: i,
        },
    }
}

/// `n` frames of `mode`'s stream.
pub fn frames(mode: &str, n: usize, lb: &Loopback) -> Vec<Vec<u8>> {
    let a = FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 2]),
        eth_dst: Address([2, 0, 0, 0, 0, 1]),
        ip_src: Ipv4Addr::new(10, 0, 0, 200),
        ip_dst: Ipv4Addr::new(10, 0, 0, 51),
        src_port: 40041,
        dst_port: dta::UDP_PORT,
    };
    (0..n as u32)
        .map(|i| {
            let r = Repr::new(Variant::Tracked, primitive(mode, i, lb));
            let mut b = vec![0u8; 96];
            let len = r.emit(&mut b[dta::FRAME_OVERHEAD..]).unwrap();
            let n = dta::emit_frame(&mut b, &a, len).unwrap();
            b.truncate(n.max(60));
            b
        })
        .collect()
}

/// The UDP payloads (the reports) of `n` frames of `mode`'s stream.
pub fn payloads(mode: &str, n: usize, lb: &Loopback) -> Vec<Vec<u8>> {
    frames(mode, n, lb)
        .iter()
        .map(|f| {
            let n = u16::from_be_bytes([f[38], f[39]]) as usize - 8;
            f[dta::FRAME_OVERHEAD..dta::FRAME_OVERHEAD + n].to_vec()
        })
        .collect()
}

/// Per report under callgrind with its cache simulation: (instructions, D1 misses, LL data
/// misses), each the difference of a `count` and a 0-report run over `count` (this binary
/// again, `--count-child mode --keys K`).
pub fn callgrind(mode: &str, keys: u32) -> Option<[f64; 3]> {
    let exe = std::env::current_exe().ok()?;
    let run = |n: u64| -> Option<[f64; 3]> {
        let f = std::env::temp_dir().join(format!("pg-dta-cg-{}-{mode}-{n}", std::process::id()));
        let o = std::process::Command::new("valgrind")
            .args(["--tool=callgrind", "--cache-sim=yes"])
            .arg(format!("--callgrind-out-file={}", f.display()))
            .arg(&exe)
            .args(["--count-child", mode, "--count", &n.to_string()])
            .args(["--keys", &keys.to_string()])
            .output()
            .ok()?;
        let _ = std::fs::remove_file(&f);
        let err = String::from_utf8_lossy(&o.stderr);
        // "==pid== Collected : Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw"
        let v: Vec<f64> = err
            .lines()
            .find_map(|l| l.split("Collected :").nth(1))?
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        (v.len() == 9).then(|| [v[0], v[4] + v[5], v[7] + v[8]])
    };
    let n = 200_000;
    let (a, b) = (run(n)?, run(0)?);
    Some([0, 1, 2].map(|i| (a[i] - b[i]) / n as f64))
}
