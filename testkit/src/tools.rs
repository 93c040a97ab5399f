//! Running real processes from tests: privilege and CI checks, external tools, commands,
//! free loopback ports, and a guard that stops a child process.
//!
//! The rule for a missing prerequisite (tool, privilege, kernel feature): outside CI the
//! test prints why and passes; with `CI` set it fails, because CI must provide it.

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether the `CI` environment variable is set.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Whether the process runs with effective user id 0.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// Skip `test` outside CI; in CI (the `CI` variable set) a missing prerequisite fails it.
pub fn skip(test: &str, why: &str) {
    assert!(!in_ci(), "{test} cannot run in CI: {why}");
    eprintln!("skipping {test}: {why}");
}

/// Whether `tool args` runs and succeeds. When it does not: `false` (skip) normally, a
/// panic under `CI`.
pub fn tool_present(tool: &str, args: &[&str]) -> bool {
    if Command::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return true;
    }
    if in_ci() {
        panic!("{tool} not usable, and CI is set: CI must install it");
    }
    eprintln!("skipping: {tool} not usable");
    false
}

/// Run a command; its stdout, or an error naming it with its stderr.
pub fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// How long a test waits for a daemon it started to show that it is up (its rule API or
/// metrics page answering) before failing: a hang guard, not a start-up budget. A daemon
/// starts in about a second on an idle machine; on a 2-core CI box under load (several DPDK
/// processes starting at once, a parallel build beside them) it takes many times that, and
/// a correct daemon must not fail there.
pub const START_GUARD: Duration = Duration::from_secs(180);

/// Lines of a child's output, collected in the background ([`collect_lines`]).
pub type Lines = Arc<Mutex<Vec<String>>>;

/// Collect the lines of `out` (a child's stdout or stderr) in the background, until it
/// closes.
pub fn collect_lines(out: impl Read + Send + 'static) -> Lines {
    let lines: Lines = Arc::default();
    let l = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            l.lock().unwrap().push(line);
        }
    });
    lines
}

/// Wait until one of `lines` from index `from` on satisfies `pred`, and return its index:
/// for a daemon's log line that says a state was reached. The wall clock is only a hang
/// guard ([`START_GUARD`]); past it the test fails naming `what` and showing the lines.
pub fn wait_line(lines: &Lines, from: usize, what: &str, pred: impl Fn(&str) -> bool) -> usize {
    let t0 = Instant::now();
    loop {
        {
            let l = lines.lock().unwrap();
            if let Some(i) = l.iter().skip(from).position(|x| pred(x)) {
                return from + i;
            }
            assert!(
                t0.elapsed() < START_GUARD,
                "no line {what} in {START_GUARD:?}; the output so far:\n{}",
                l.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Poll `done` every 2 ms until it holds: a wait for a state, the wall clock only a hang
/// guard ([`START_GUARD`]; past it the test fails naming `what`).
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < START_GUARD, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Poll `probe` every `every` until it gives a value, and return it: a wait for a state the
/// test reads (a metrics page showing counters, an API answering, a file holding records).
/// `Err` carries what the probe saw; the wall clock is only a hang guard ([`START_GUARD`]);
/// past it the test fails naming `what`, with the probe's last `Err`.
pub fn wait_value<T>(
    what: &str,
    every: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let t0 = Instant::now();
    loop {
        match probe() {
            Ok(v) => return v,
            Err(last) => assert!(
                t0.elapsed() < START_GUARD,
                "timed out ({START_GUARD:?}): {what}; last seen:\n{last}"
            ),
        }
        std::thread::sleep(every);
    }
}

/// Whether some socket of this network namespace has an established TCP connection to
/// `port` (IPv4 or IPv6; `/proc/net/tcp`, `/proc/net/tcp6`): a client (a ZeroMQ SUB, a
/// scraper) has connected to the server on `port`.
pub fn tcp_connected_to(port: u16) -> bool {
    let rem = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                // sl local_address rem_address st ...; st 01 = ESTABLISHED.
                c.get(2).is_some_and(|r| r.ends_with(&rem)) && c.get(3) == Some(&"01")
            })
        })
    })
}

/// A UDP port free on 127.0.0.1 a moment ago.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("free UDP port")
        .port()
}

/// A TCP port free on 127.0.0.1 a moment ago.
pub fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("free TCP port")
        .port()
}

/// How long [`Guard::term`] waits for a child to exit after SIGTERM before killing it: a
/// hang guard, not a shutdown budget. A daemon stops in well under a second on an idle
/// machine (it drains its workers, writes its summary and joins its threads); under a CI
/// box's load that took more than the 5 s this once was, and the SIGKILL then failed tests
/// that check a clean exit.
pub const STOP_GUARD: Duration = Duration::from_secs(60);

/// A child process stopped on drop: SIGTERM (a daemon writes its summary), then SIGKILL
/// if it has not exited within [`STOP_GUARD`].
#[derive(Debug)]
pub struct Guard(pub Option<Child>);

impl Guard {
    /// Stop the child (if still running) and return its exit status.
    pub fn term(&mut self) -> Option<ExitStatus> {
        self.stop_with("-TERM")
    }

    /// Send the child (if still running) `signal` (`kill`'s form, e.g. `-INT`), wait for it
    /// to exit (the wall clock only a hang guard, [`STOP_GUARD`], then SIGKILL) and return
    /// its exit status.
    pub fn stop_with(&mut self, signal: &str) -> Option<ExitStatus> {
        let mut c = self.0.take()?;
        if let Ok(Some(st)) = c.try_wait() {
            return Some(st);
        }
        let _ = Command::new("kill")
            .args([signal, &c.id().to_string()])
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < STOP_GUARD {
            if let Ok(Some(st)) = c.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        c.wait().ok()
    }

    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("running")
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.term();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_reports_stdout_and_failures() {
        assert_eq!(run(&["echo", "hi"]).unwrap(), "hi\n");
        let e = run(&["sh", "-c", "echo oops >&2; exit 3"]).unwrap_err();
        assert!(e.contains("oops") && e.contains("sh -c"), "{e}");
        assert!(run(&["/nonexistent/tool"]).is_err());
    }

    #[test]
    fn guard_stops_a_child() {
        let mut g = Guard(Some(Command::new("sleep").arg("30").spawn().unwrap()));
        let st = g.term().expect("status");
        assert!(!st.success());
        assert!(g.term().is_none());
    }

    #[test]
    fn wait_value_returns_the_first_value() {
        let mut n = 0;
        let v = wait_value("n reaches 3", Duration::ZERO, || {
            n += 1;
            if n == 3 {
                Ok(n * 10)
            } else {
                Err(format!("n = {n}"))
            }
        });
        assert_eq!((v, n), (30, 3));
    }

    #[test]
    fn established_connections_are_seen() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(!tcp_connected_to(port));
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert!(tcp_connected_to(port));
    }

    #[test]
    fn free_ports_are_nonzero() {
        assert_ne!(free_udp_port(), 0);
        assert_ne!(free_tcp_port(), 0);
    }
}
