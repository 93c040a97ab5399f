//! `peregrinectl dta --region FILE rdma-serve`: the collector's side of the translator's
//! RoCEv2 output on a real RDMA NIC (built with the `verbs` feature; docs/dta.md "RoCEv2
//! output"). Creates the region FILE with the translator's sizes, registers it with the
//! NIC (remote write and atomics), connects one RC queue pair per translator worker to the
//! translator's QPs, prints what the translator's `[dta_translator.rocev2]` needs (JSON:
//! `qp`, `rkey`, `base_va`), and holds the queue pairs until killed. Queries run from
//! other `peregrinectl dta --region FILE ...` processes as usual.

use serde::Deserialize;
use std::path::Path;

/// The parts of the translator's configuration file the collector needs. Not the daemon's
/// `TranslatorSection` / `RoceSection`: the file is read before its `[dta_translator.rocev2]`
/// has the `qp`, `rkey` and `base_va` this command prints, which those require.
#[derive(Debug, Deserialize)]
struct TranslatorFile {
    #[serde(default)]
    workers: Workers,
    dta_translator: Section,
}

#[derive(Debug, Deserialize)]
struct Workers {
    #[serde(default = "one")]
    count: u32,
}

impl Default for Workers {
    fn default() -> Self {
        Workers { count: 1 }
    }
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
struct Section {
    #[serde(default)]
    sizes: peregrine_dta::Sizes,
    rocev2: Rocev2,
}

#[derive(Debug, Deserialize)]
struct Rocev2 {
    source_ip: std::net::Ipv4Addr,
    #[serde(default = "local_qp")]
    local_qp: u32,
    #[serde(default)]
    first_psn: u32,
}

fn local_qp() -> u32 {
    peregrine_control::dta::DEFAULT_LOCAL_QP
}

/// What the translator's file says, or a message naming the problem.
fn read(path: &Path) -> Result<TranslatorFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: toml::Value = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    v.try_into()
        .map_err(|e: toml::de::Error| format!("{}: {e}", path.display()))
}

/// Options of `rdma-serve`.
#[derive(clap::Args, Debug)]
pub struct Serve {
    /// The translator's configuration file (its `[workers]`, `[dta_translator.sizes]` and
    /// `[dta_translator.rocev2]`).
    #[arg(long)]
    translator_config: std::path::PathBuf,
    /// RDMA device (default: the first `ibv_devices` lists).
    #[arg(long)]
    device: Option<String>,
    /// HCA port.
    #[arg(long, default_value_t = 1)]
    ib_port: u8,
    /// GID index of this host's RoCEv2 IPv4 address (`show_gids`).
    #[arg(long, default_value_t = 3)]
    gid_index: u8,
}

/// Run `rdma-serve` on `region`. Exit code and message on failure.
pub fn serve(region: &Path, s: &Serve) -> Result<(), (u8, String)> {
    let t = read(&s.translator_config).map_err(|e| (1, e))?;
    #[cfg(feature = "verbs")]
    {
        use peregrine_dta::verbs::{Peer, PortConfig, Responder};
        let r = peregrine_dta::Region::create(region, t.dta_translator.sizes)
            .map_err(|e| (3, e.to_string()))?;
        let mut resp = Responder::open(
            s.device.as_deref(),
            PortConfig {
                port: s.ib_port,
                gid_index: s.gid_index,
            },
            std::sync::Arc::new(r),
        )
        .map_err(|e| (3, e.to_string()))?;
        let rc = &t.dta_translator.rocev2;
        let c = resp
            .connect(&Peer {
                ip: rc.source_ip,
                local_qp: rc.local_qp,
                workers: t.workers.count,
                first_psn: rc.first_psn,
            })
            .map_err(|e| (3, e.to_string()))?;
        println!("{}", serde_json::to_string(&c).unwrap_or_default());
        eprintln!(
            "rdma-serve: region {} registered; set [dta_translator.rocev2] qp, rkey and base_va \
             as printed, then start the translator. Holding the queue pairs until killed.",
            region.display()
        );
        loop {
            std::thread::park();
        }
    }
    #[cfg(not(feature = "verbs"))]
    {
        let rc = &t.dta_translator.rocev2;
        Err((
            3,
            format!(
                "rdma-serve needs peregrinectl built with the `verbs` feature (cargo build \
                 -p peregrine-ctl --features verbs; libibverbs-dev). It would create {} \
                 ({} bytes), register it on {} port {} (GID index {}) and connect {} queue \
                 pair(s) to {} QP {:#x}.., first PSN {}",
                region.display(),
                peregrine_dta::Layout::new(t.dta_translator.sizes)
                    .map(|l| l.total_len)
                    .unwrap_or(0),
                s.device.as_deref().unwrap_or("the first device"),
                s.ib_port,
                s.gid_index,
                t.workers.count,
                rc.source_ip,
                rc.local_qp,
                rc.first_psn
            ),
        ))
    }
}
