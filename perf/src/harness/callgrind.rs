//! Instruction counts of a whole forwarding worker under `valgrind --tool=callgrind`.
//!
//! The child (this binary again, one measured mode) runs as in a wall-clock round, on the
//! same `net_ring` vdevs, under callgrind with `--separate-threads=yes`: the worker thread
//! spins for the whole run, so it is the thread with the most instructions, and its total
//! (rx burst, stages, dispatch, tx burst, counters: everything the pinned core does per
//! report) divided by the packets it received is the whole loop's instructions per packet.
//! The worker's start and stop (pinning, the batch, the final flush) are a few thousand
//! instructions against the hundreds of millions of the loop.

use std::path::Path;
use std::process::Command;

/// Total `Ir` of every per-thread output file `<stem>-NN` next to `stem` (removed after).
fn thread_totals(stem: &Path) -> Vec<f64> {
    let (Some(dir), Some(name)) = (stem.parent(), stem.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}-", name.to_string_lossy());
    let mut totals = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        if !n.starts_with(&prefix) {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(e.path()) {
            // "totals: <Ir>" (or "summary:" in older formats), the last such line.
            let t = text
                .lines()
                .filter_map(|l| l.strip_prefix("totals:").or(l.strip_prefix("summary:")))
                .filter_map(|r| r.split_whitespace().next()?.parse::<f64>().ok())
                .next_back();
            totals.extend(t);
        }
        let _ = std::fs::remove_file(e.path());
    }
    totals
}

/// Run `exe args` under callgrind, one output file per thread. The child must print, as
/// the third whitespace-separated field of its stdout, the packets its worker received.
/// Returns (the busiest thread's instructions per received packet, packets).
pub fn whole_loop(exe: &Path, args: &[String], tag: &str) -> Option<(f64, u64)> {
    let stem = std::env::temp_dir().join(format!("pg-cg-loop-{}-{tag}", std::process::id()));
    let o = Command::new("valgrind")
        .args(["--tool=callgrind", "--separate-threads=yes"])
        .arg(format!("--callgrind-out-file={}", stem.display()))
        .arg(exe)
        .args(args)
        .output()
        .ok()?;
    let totals = thread_totals(&stem);
    let text = String::from_utf8_lossy(&o.stdout);
    let pkts: u64 = text.split_whitespace().nth(2)?.parse().ok()?;
    let busiest = totals.iter().cloned().fold(0.0, f64::max);
    (o.status.success() && pkts > 0).then(|| (busiest / pkts as f64, pkts))
}
