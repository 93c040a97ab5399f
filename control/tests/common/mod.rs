//! Helpers shared by the daemon's end-to-end tests that run real processes: privilege and
//! CI checks, running commands, free loopback ports, and a guard that stops a child process.
#![allow(dead_code)]

use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

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
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} cannot run in CI: {why}"
    );
    eprintln!("skipping {test}: {why}");
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

pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("free UDP port")
        .port()
}

pub fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("free TCP port")
        .port()
}

/// A child process stopped on drop: SIGTERM (the daemon writes its summary), then SIGKILL
/// if it has not exited within 5 s.
pub struct Guard(pub Option<Child>);

impl Guard {
    pub fn term(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.0.take()?;
        if let Ok(Some(st)) = c.try_wait() {
            return Some(st);
        }
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
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

/// IPv6 (hop limit 64) / UDP `sport` -> `dport` carrying `payload`, with a valid UDP checksum
/// (RFC 8200 section 8.1), built with the wire crate.
pub fn ipv6_udp(
    src: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    use peregrine_wire::{ipv6, udp};
    let ulen = udp::HEADER_LEN + payload.len();
    let mut f = vec![0u8; ipv6::HEADER_LEN + ulen];
    ipv6::Repr {
        src,
        dst,
        next_header: 17,
        payload_len: ulen,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut f)
    .expect("IPv6 header");
    let u = &mut f[ipv6::HEADER_LEN..];
    udp::Repr {
        src_port: sport,
        dst_port: dport,
        payload_len: payload.len(),
    }
    .emit(u)
    .expect("UDP header");
    u[udp::HEADER_LEN..].copy_from_slice(payload);
    udp::Packet::new_unchecked(u).fill_checksum_v6(src, dst);
    f
}

/// Every frame of a pcap file, in order.
pub fn read_pcap(p: &std::path::Path) -> Vec<Vec<u8>> {
    let mut r = peregrine_dataplane::io::pcapfile::PcapReader::open(p).unwrap();
    let (mut out, mut buf) = (vec![], vec![]);
    while r.next_packet(&mut buf).unwrap().is_some() {
        out.push(buf.clone());
    }
    out
}
