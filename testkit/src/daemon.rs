//! Running the real daemon from an end-to-end test: write its config, start `peregrine run`
//! with a JSON summary, wait for a replay that ends to make it exit, and hand back what it
//! printed and summarised.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Write `cfg` to `dir/upf.toml`, run `bin run --config dir/upf.toml --summary-json
/// dir/summary.json` in `dir` (`bin`: the test's `env!("CARGO_BIN_EXE_peregrine")`) until it
/// exits by itself, at most `timeout` (then it is killed and the test fails). Panics with
/// the daemon's output if it fails. Returns its stdout and the parsed summary.
pub fn run_to_end(
    bin: &str,
    dir: &Path,
    cfg: &str,
    timeout: Duration,
) -> (String, serde_json::Value) {
    let path = dir.join("upf.toml");
    std::fs::write(&path, cfg).expect("write the config");
    let mut child = Command::new(bin)
        .current_dir(dir)
        .args(["run", "--config"])
        .arg(&path)
        .arg("--summary-json")
        .arg(dir.join("summary.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the daemon");
    let t0 = Instant::now();
    while child.try_wait().expect("poll the daemon").is_none() {
        if t0.elapsed() > timeout {
            let _ = child.kill();
            panic!("the daemon did not stop after its replay");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("the daemon's output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = std::fs::read_to_string(dir.join("summary.json")).expect("the summary");
    (
        stdout,
        serde_json::from_str(&summary).expect("a JSON summary"),
    )
}
