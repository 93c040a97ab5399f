//! Shared pieces of the throughput binaries (`pg-throughput`, `pg-upf`, `int-throughput`):
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
