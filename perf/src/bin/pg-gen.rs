//! `pg-gen`: write deterministic 5G user-plane traffic to pcap files.
//!
//! Starts from a preset (default `quickstart`) and overrides whatever is given on the command
//! line; uplink (N3) and downlink (N6) frames go to separate files, and `--manifest` writes a
//! JSON description of the sessions and counts. Prints a one-line summary.

use clap::Parser;
use peregrine_testkit::traffic::{self, IpMix, Preset, Sizes};
use std::path::PathBuf;
use std::process::ExitCode;

/// Generate deterministic 5G UPF traffic (GTP-U uplink on N3, IP downlink on N6) as pcap.
#[derive(Debug, Parser)]
#[command(name = "pg-gen", version)]
struct Args {
    /// Starting point for every setting not given.
    #[arg(long, default_value = "quickstart")]
    preset: Preset,
    /// Number of UEs (one PDU session each).
    #[arg(long)]
    ues: Option<u32>,
    /// Number of gNBs the UEs are spread over.
    #[arg(long)]
    gnbs: Option<u32>,
    /// Total number of frames, anomalies included.
    #[arg(long)]
    packets: Option<u64>,
    /// Ethernet frame sizes without FCS, cycled: `64,512,1400`, or `imix` (7:4:1 of
    /// 64/576/1500).
    #[arg(long)]
    sizes: Option<Sizes>,
    /// Fraction of packets that are uplink (0 to 1).
    #[arg(long)]
    ul_ratio: Option<f64>,
    /// IP version of UE traffic: v4, v6 or mixed.
    #[arg(long)]
    inner: Option<IpMix>,
    /// IP version of the N3 transport: v4, v6 or mixed.
    #[arg(long)]
    outer: Option<IpMix>,
    /// QFIs handed out to UEs, e.g. `1,5,9`.
    #[arg(long, value_delimiter = ',')]
    qfis: Option<Vec<u8>>,
    /// Seed: the same settings and seed give the same bytes.
    #[arg(long)]
    seed: Option<u64>,
    /// How many anomalous frames to mix in (out of --packets).
    #[arg(long)]
    anomalies: Option<u32>,
    /// Packet rate that spaces the timestamps (default 1 Mpps).
    #[arg(long)]
    rate_pps: Option<f64>,
    /// Uplink (N3) capture to write.
    #[arg(long, value_name = "FILE.pcap")]
    ul: PathBuf,
    /// Downlink (N6) capture to write.
    #[arg(long, value_name = "FILE.pcap")]
    dl: PathBuf,
    /// JSON manifest to write (sessions, addressing, counts).
    #[arg(long, value_name = "FILE.json")]
    manifest: Option<PathBuf>,
}

impl Args {
    fn spec(&self) -> traffic::TrafficSpec {
        let mut spec = self.preset.spec();
        macro_rules! set {
            ($($f:ident),*) => {
                $(if let Some(v) = self.$f.clone() { spec.$f = v; })*
            };
        }
        set!(ues, gnbs, packets, sizes, ul_ratio, inner, outer, qfis, seed, anomalies);
        if self.rate_pps.is_some() {
            spec.rate_pps = self.rate_pps;
        }
        spec
    }
}

fn run(args: &Args) -> Result<String, Box<dyn std::error::Error>> {
    let spec = args.spec();
    spec.validate()?;
    let summary = traffic::write_pcaps(&spec, &args.ul, &args.dl)?;
    if let Some(path) = &args.manifest {
        let m = traffic::manifest_with_summary(&spec, &summary);
        std::fs::write(path, serde_json::to_string_pretty(&m)? + "\n")
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(format!(
        "pg-gen: {summary}; {} UEs on {} gNBs, seed {} -> {}, {}{}",
        spec.ues,
        spec.gnbs,
        spec.seed,
        args.ul.display(),
        args.dl.display(),
        args.manifest
            .as_ref()
            .map(|m| format!(", {}", m.display()))
            .unwrap_or_default()
    ))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pg-gen: {e}");
            ExitCode::FAILURE
        }
    }
}
