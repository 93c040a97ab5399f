//! `peregrine`: the Peregrine dataplane daemon.

use clap::{Parser, Subcommand};
use peregrine_control::config::Config;
use peregrine_control::daemon::{self, RunOptions};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// mimalloc (size-class pages, no per-chunk coalescing) instead of glibc's: the N4 thread
/// allocates and frees shard vectors of many sizes per request, and glibc's bins cost it
/// ~40 % at a million sessions (`perf/results/upf.md`, N4 at scale, fourth round). The
/// workers allocate nothing per packet, so they do not see the difference.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "peregrine",
    version,
    about = "Peregrine: a DPDK userspace dataplane (vUPF with in-band telemetry)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the dataplane until its input ends, the duration passes, or SIGINT/SIGTERM.
    /// SIGHUP re-reads the file and publishes its routes to the running workers.
    Run {
        #[arg(long, short)]
        config: PathBuf,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// Log counters every this many seconds.
        #[arg(long)]
        stats_interval: Option<f64>,
        /// Also write the final summary as JSON to this file.
        #[arg(long)]
        summary_json: Option<PathBuf>,
    },
    /// Parse and validate a configuration file, then exit.
    CheckConfig { config: PathBuf },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::CheckConfig { config } => match Config::load(&config) {
            Ok(c) => {
                println!(
                    "{}: ok ({} ports, {} workers)",
                    config.display(),
                    c.ports.len(),
                    c.workers.count
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", config.display());
                ExitCode::from(2)
            }
        },
        Cmd::Run {
            config,
            duration,
            stats_interval,
            summary_json,
        } => {
            let cfg = match Config::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{}: {e}", config.display());
                    return ExitCode::from(2);
                }
            };
            let stop = Arc::new(AtomicBool::new(false));
            for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
                    eprintln!("cannot install signal handler: {e}");
                    return ExitCode::FAILURE;
                }
            }
            let reload = Arc::new(AtomicBool::new(false));
            if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
            {
                eprintln!("cannot install signal handler: {e}");
                return ExitCode::FAILURE;
            }
            let opts = RunOptions {
                reload: Some(reload),
                config_path: Some(config.clone()),
                duration: duration
                    .filter(|d| d.is_finite() && *d > 0.0)
                    .map(Duration::from_secs_f64),
                stats_interval: stats_interval
                    .filter(|d| d.is_finite() && *d > 0.0)
                    .map(Duration::from_secs_f64),
                stop: Some(stop),
            };
            match daemon::run(&cfg, &opts) {
                Ok(summary) => {
                    print!("{}", summary.render());
                    if let Some(p) = summary_json {
                        let json =
                            serde_json::to_string_pretty(&summary).expect("summary serialises");
                        if let Err(e) = std::fs::write(&p, json) {
                            eprintln!("cannot write {}: {e}", p.display());
                            return ExitCode::FAILURE;
                        }
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("peregrine: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
