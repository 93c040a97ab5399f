//! `peregrinectl dta`: queries over a DTA collector region (docs/dta.md), as JSON.
//!
//! The region is attached read-side and validated first (magic, version, header CRC, sizes);
//! a corrupt or foreign file is an error naming the problem (exit 3), an unknown list or a
//! bad query argument exit 1. Queries never write into the region.

use clap::{Args, Subcommand};
use peregrine_dta::Collector;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct DtaCmd {
    /// The region file the translator publishes (`[dta_translator] region`).
    #[arg(long)]
    region: PathBuf,
    #[command(subcommand)]
    q: Query,
}

#[derive(Subcommand, Debug)]
enum Query {
    /// The region's layout descriptor.
    Info,
    /// Key-Write: plurality vote over the key's slots with a matching checksum.
    Kw {
        key: u32,
        /// Slots to read (default: the region's maximum redundancy).
        #[arg(long)]
        n: Option<u32>,
        /// Votes the winning value needs.
        #[arg(long, default_value_t = 1)]
        min_agree: u32,
    },
    /// Key-Increment: the minimum of the key's counters.
    Ki {
        key: u32,
        /// Counters to read: the reporters' redundancy (default: the region's maximum;
        /// counters beyond the reports' N read 0).
        #[arg(long)]
        n: Option<u32>,
    },
    /// Postcarding: the key's path, validity-decoded (raw words in raw mode).
    Path { key: u32 },
    /// Key-Increment of a session key the reporter's `[dta.kestrel]` feed counts: the key
    /// is computed from (direction, TEID, QFI) as the reporter does.
    KiSession {
        /// `ul` (uplink) or `dl` (downlink).
        #[arg(long)]
        dir: String,
        /// TEID, decimal or 0x-hex.
        #[arg(long, value_parser = parse_u32)]
        teid: u32,
        #[arg(long)]
        qfi: u8,
        /// Counters to read: the feed's redundancy (default: the region's maximum).
        #[arg(long)]
        n: Option<u32>,
    },
    /// Postcarding path of an INT flow the reporter's `[dta.int]` feed reports: the key is
    /// computed from the flow's 5-tuple as the reporter does (IPv4 as mapped IPv6).
    IntPath {
        #[arg(long)]
        src: std::net::IpAddr,
        #[arg(long)]
        dst: std::net::IpAddr,
        /// IP protocol number (17 UDP, 6 TCP).
        #[arg(long)]
        proto: u8,
        #[arg(long, default_value_t = 0)]
        sport: u16,
        #[arg(long, default_value_t = 0)]
        dport: u16,
    },
    /// Append: follow a list, printing entries as JSON lines.
    Follow {
        list: u32,
        /// Start at the oldest entry still in the ring, not at the head.
        #[arg(long)]
        from_start: bool,
        /// Stop after this many entries.
        #[arg(long, default_value_t = u64::MAX)]
        count: u64,
        /// Stop after this long without new entries, ms (0: follow forever).
        #[arg(long, default_value_t = 1000)]
        idle_ms: u64,
    },
    /// RoCEv2 output's collector side on an RDMA NIC (feature `verbs`): create the region
    /// with the translator's sizes, register it, connect a QP per translator worker, print
    /// the translator's `qp`, `rkey`, `base_va`, hold until killed.
    RdmaServe(crate::dta_rdma::Serve),
}

fn parse_u32(s: &str) -> Result<u32, String> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("`{s}`: {e}"))
}

fn v6(a: std::net::IpAddr) -> std::net::Ipv6Addr {
    match a {
        std::net::IpAddr::V4(v) => v.to_ipv6_mapped(),
        std::net::IpAddr::V6(v) => v,
    }
}

/// Exit code and message of a failed query.
pub type Failure = (u8, String);

pub fn run(cmd: &DtaCmd) -> Result<(), Failure> {
    if let Query::RdmaServe(s) = &cmd.q {
        return crate::dta_rdma::serve(&cmd.region, s);
    }
    let c = Collector::attach(&cmd.region).map_err(|e| (3, e.to_string()))?;
    let q = |e: peregrine_dta::Error| (1, e.to_string());
    let out = match &cmd.q {
        Query::Info => {
            let l = c.layout();
            json!({"total_len": l.total_len, "sizes": l.sizes,
                   "offsets": {"key_write": l.kw_offset, "key_increment": l.ki_offset,
                               "postcarding": l.pc_offset, "append_heads": l.ap_heads_offset,
                               "append_data": l.ap_data_offset}})
        }
        Query::Kw { key, n, min_agree } => {
            json!({"key": key, "answer": c.key_write(*key, *n, *min_agree).map_err(q)?})
        }
        Query::Ki { key, n } => {
            json!({"key": key, "counter": c.key_increment(*key, *n).map_err(q)?})
        }
        Query::Path { key } => json!({"key": key, "answer": c.path(*key).map_err(q)?}),
        Query::KiSession { dir, teid, qfi, n } => {
            let d = match dir.as_str() {
                "ul" => 0,
                "dl" => 1,
                o => return Err((1, format!("--dir `{o}`: expected `ul` or `dl`"))),
            };
            let key = peregrine_control::dta::feeds::kestrel_key(d, *teid, *qfi);
            json!({"dir": dir, "teid": teid, "qfi": qfi, "key": key,
                   "counter": c.key_increment(key, *n).map_err(q)?})
        }
        Query::IntPath {
            src,
            dst,
            proto,
            sport,
            dport,
        } => {
            let key =
                peregrine_control::dta::feeds::int_flow_key(&peregrine_int::report::IntReport {
                    src: v6(*src),
                    dst: v6(*dst),
                    proto: *proto,
                    sport: *sport,
                    dport: *dport,
                    ..Default::default()
                });
            json!({"key": key, "answer": c.path(key).map_err(q)?})
        }
        Query::Follow {
            list,
            from_start,
            count,
            idle_ms,
        } => {
            let mut f = if *from_start {
                c.follow_from(*list, 0)
            } else {
                c.follow(*list)
            }
            .map_err(q)?;
            let (mut got, mut last) = (0u64, Instant::now());
            while got < *count {
                let p = f.poll(((*count - got).min(4096)) as usize);
                if p.lost > 0 {
                    println!("{}", json!({"list": list, "lost": p.lost}));
                }
                if p.entries.is_empty() {
                    if *idle_ms > 0 && last.elapsed() >= Duration::from_millis(*idle_ms) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                last = Instant::now();
                for (i, e) in p.entries.iter().enumerate() {
                    println!(
                        "{}",
                        json!({"list": list, "index": p.first + i as u64, "data": e})
                    );
                }
                got += p.entries.len() as u64;
            }
            return Ok(());
        }
        Query::RdmaServe(_) => unreachable!("handled before attaching"),
    };
    println!("{out}");
    Ok(())
}
