//! The `dpdk-testpmd` baseline on the same `net_ring` vdevs and core: run interactively,
//! `start tx_first`, warm up, then two `show port stats all` a window apart; testpmd's own
//! Rx-pps of the second call covers exactly that window.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One testpmd run.
#[derive(Debug, Clone)]
pub struct Testpmd<'a> {
    /// The program (`dpdk-testpmd`).
    pub program: &'a str,
    /// The forwarding core (EAL's main lcore is 0).
    pub core: usize,
    pub burst: usize,
    /// `--forward-mode` (`io`, `5tswap`, ...).
    pub forward_mode: &'a str,
    /// EAL `--file-prefix`, unique per run.
    pub file_prefix: String,
    /// Commands sent before `start tx_first` (e.g. `set txpkts 60\n`).
    pub setup: String,
    /// Seconds measured (after a 1 s warm-up).
    pub seconds: f64,
}

impl Testpmd<'_> {
    /// Packets per second received over both ports in the window.
    pub fn run(&self) -> Result<f64, String> {
        let mut child = Command::new(self.program)
            .args([
                "-l",
                &format!("0,{}", self.core),
                "--no-huge",
                "--no-pci",
                "-m",
                "512",
                "--no-shconf",
                "--no-telemetry",
                &format!("--file-prefix={}", self.file_prefix),
                "--vdev=net_ring0",
                "--vdev=net_ring1",
                "--",
                "-i",
                &format!("--forward-mode={}", self.forward_mode),
                "--nb-cores=1",
                &format!("--burst={}", self.burst),
                "--total-num-mbufs=8192",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.program))?;
        let mut stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
        });
        let mut say = |s: &str| stdin.write_all(s.as_bytes()).and_then(|_| stdin.flush());
        std::thread::sleep(Duration::from_millis(500));
        // tx_first sends `burst` packets per port (txonly: Ether/IPv4/UDP).
        say(&format!("{}start tx_first\n", self.setup)).map_err(|e| e.to_string())?;
        std::thread::sleep(Duration::from_secs(1));
        say("show port stats all\n").map_err(|e| e.to_string())?;
        std::thread::sleep(Duration::from_secs_f64(self.seconds));
        say("show port stats all\nstop\nquit\n").map_err(|e| e.to_string())?;
        drop(stdin);
        let status = child.wait().map_err(|e| e.to_string())?;
        let lines = reader.join().map_err(|_| "reader thread")?;
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        match window_pps(&lines) {
            Some(pps) if status.success() => Ok(pps),
            _ => Err(format!(
                "testpmd failed ({status}): {}\n{}",
                lines.join("\n"),
                err
            )),
        }
    }
}

/// The sum of the last two `Rx-pps:` values (ports 0 and 1 of the second `show port stats
/// all`), if both calls' four values are there.
pub fn window_pps<S: AsRef<str>>(lines: &[S]) -> Option<f64> {
    let pps: Vec<f64> = lines
        .iter()
        .filter_map(|l| l.as_ref().trim().strip_prefix("Rx-pps:"))
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .collect();
    (pps.len() >= 4).then(|| pps[pps.len() - 2] + pps[pps.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_second_calls_ports() {
        let lines = [
            "  Rx-pps:            0          Rx-bps:            0",
            "  Rx-pps:            0          Rx-bps:            0",
            "testpmd> ",
            "  Rx-pps:      1000000          Rx-bps:    480000000",
            "  Rx-pps:      2000000          Rx-bps:    960000000",
        ];
        assert_eq!(window_pps(&lines), Some(3_000_000.0));
    }

    #[test]
    fn missing_or_garbled_stats_are_none() {
        assert_eq!(window_pps(&["  Rx-pps: 5", "  Rx-pps: 6"]), None);
        assert_eq!(
            window_pps(&["Rx-pps: x", "Rx-pps: 1", "Rx-pps: 2", "Rx-pps:"]),
            None
        );
        assert_eq!(window_pps::<&str>(&[]), None);
    }
}
