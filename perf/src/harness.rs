//! Shared pieces of the throughput binaries (`pg-throughput`, `pg-upf`, `pg-dta-ingest`, `int-throughput`):
//! the one-worker `net_ring` set-up with preloaded packets, the
//! `dpdk-testpmd` baseline runner, child-process rounds, paired-round statistics and the JSON
//! result output.
//!
//! Set-up shared by the binaries: two DPDK `net_ring` vdevs (a ring PMD without arguments
//! loops a port's tx back to its own rx), packets injected per port before forwarding starts,
//! one pinned forwarding core; rate = sum over both ports of the `rte_eth_stats` rx-packet
//! delta over the measurement window.

pub mod callgrind;
pub mod net_ring;
pub mod report;
pub mod stats;
pub mod testpmd;

use std::ffi::OsStr;
use std::process::{Command, Output};

/// The forwarding loop's settings the throughput binaries share (`pg-throughput`, `pg-upf`,
/// `pg-dta-ingest`; flattened into each one's arguments, defaults alike).
#[derive(clap::Args, Debug, Clone)]
pub struct Forwarding {
    /// Rounds per side (and case; alternating).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Core the forwarding loop runs on (EAL's main lcore is 0).
    #[arg(long, default_value_t = 1)]
    pub core: usize,
    #[arg(long, default_value_t = 32)]
    pub burst: usize,
    /// Packets (reports) injected per port before forwarding starts (testpmd's tx_first
    /// sends one burst; at most the runtime's burst capacity).
    #[arg(long, default_value_t = 32)]
    pub inject: usize,
    #[arg(long, default_value = "dpdk-testpmd")]
    pub testpmd: String,
}

impl Forwarding {
    /// One testpmd round (`forward_mode`, `setup` commands before `start tx_first`,
    /// `seconds` measured) with these settings' program, core and burst, its EAL file prefix
    /// `<prefix>-<pid>-<round>`; returns its packets per second.
    pub fn testpmd(
        &self,
        forward_mode: &str,
        prefix: &str,
        round: usize,
        setup: String,
        seconds: f64,
    ) -> Result<f64, String> {
        testpmd::Testpmd {
            program: &self.testpmd,
            core: self.core,
            burst: self.burst,
            forward_mode,
            file_prefix: format!("{prefix}-{}-{round}", std::process::id()),
            setup,
            seconds,
        }
        .run()
    }

    /// A `--child` round's loop settings: `--seconds`, `--core`, `--burst`, `--inject` and
    /// their values (`seconds` being the binary's own).
    pub fn child_args(&self, seconds: f64) -> [String; 8] {
        [
            "--seconds".into(),
            seconds.to_string(),
            "--core".into(),
            self.core.to_string(),
            "--burst".into(),
            self.burst.to_string(),
            "--inject".into(),
            self.inject.to_string(),
        ]
    }
}

/// Runs this executable again with `args` and waits for it (vdev ports cannot be re-probed
/// in one process, so every measured round is a fresh process).
pub fn run_self<I, S>(args: I) -> Result<Output, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Command::new(exe)
        .args(args)
        .output()
        .map_err(|e| e.to_string())
}

/// The error for a child run whose status or output was not what was expected.
pub fn child_failed(what: &str, out: &Output) -> String {
    format!(
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Prints `e` on stderr and exits with status 1.
pub fn fail(e: &str) -> ! {
    eprintln!("{e}");
    std::process::exit(1)
}
