//! A gNB for live UPF tests that carries the kernel's own traffic (TCP, UDP) in GTP-U: a TUN
//! device in the gNB's network namespace holds the UE address; every IP packet the kernel
//! routes into it is sent to the UPF's N3 address as a G-PDU (TS 29.281 section 5.1, with a
//! UL PDU Session Container carrying the QFI, TS 38.415 section 5.5.2.2), and every G-PDU
//! to our TEID is decapsulated into the TUN device. One thread each way, blocking I/O, no
//! per-packet allocation; it keeps up with 100 Mbit/s easily. It can hold every uplink
//! packet for a fixed time ([`GnbConfig::ul_delay`], a radio leg for delay measurements:
//! `tc netem` is not available here); then a third thread sends, and each packet is copied.
//!
//! Threads enter namespaces with `setns(2)` ([`in_netns`]), so the tests need no helper
//! binaries: the gNB, the UE's sockets and the data network's sockets are threads of the
//! test process. Linux and root only.

use nix::sched::{setns, CloneFlags};
use std::io::{Read, Write};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Run `f` on a new thread inside network namespace `ns` (`ip netns` name).
pub fn in_netns<T, F>(ns: &str, f: F) -> JoinHandle<std::io::Result<T>>
where
    T: Send + 'static,
    F: FnOnce() -> std::io::Result<T> + Send + 'static,
{
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path)?;
        setns(&fd, CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
        f()
    })
}

/// Where the gNB sits and which tunnel it uses.
#[derive(Debug, Clone)]
pub struct GnbConfig {
    /// Network namespace of the gNB (and of the UE's sockets).
    pub netns: String,
    /// Name of the TUN device to create there.
    pub tun: String,
    /// Our N3 address (port 2152 is bound) and the UPF's.
    pub local: SocketAddrV4,
    pub upf: SocketAddrV4,
    /// TEID of uplink G-PDUs (the UPF's F-TEID) and of the downlink ones we accept.
    pub ul_teid: u32,
    pub dl_teid: u32,
    /// QFI in the UL PDU Session Container.
    pub qfi: u8,
    /// Added to every uplink packet before it is sent to the UPF (zero: none). Order is kept.
    pub ul_delay: Duration,
}

/// What the gNB counted.
#[derive(Debug, Default)]
pub struct GnbStats {
    pub ul_pkts: AtomicU64,
    pub ul_bytes: AtomicU64,
    pub dl_pkts: AtomicU64,
    pub dl_bytes: AtomicU64,
    /// Datagrams on 2152 that were not a G-PDU to our TEID, or did not parse.
    pub dl_refused: AtomicU64,
}

/// A running gNB. Dropping it stops it (the TUN device goes with its namespace or `stop`).
#[derive(Debug)]
pub struct GtpGnb {
    pub stats: Arc<GnbStats>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<std::io::Result<()>>>,
}

/// GTP-U header with a UL PDU Session Container: 12 bytes + 4 of extension.
const UL_HDR: usize = 16;

/// The uplink header for an inner packet of `len` bytes (TS 29.281 5.1 and 5.2.1, TS 38.415
/// 5.5.2.2: PDU type 1, QFI).
pub fn ul_header(teid: u32, qfi: u8, len: usize) -> [u8; UL_HDR] {
    let mut h = [0u8; UL_HDR];
    h[0] = 0x34; // version 1, PT 1, E
    h[1] = 0xff; // G-PDU
    let l = (len + UL_HDR - 8) as u16;
    h[2..4].copy_from_slice(&l.to_be_bytes());
    h[4..8].copy_from_slice(&teid.to_be_bytes());
    h[11] = 0x85; // next: PDU Session Container
    h[12] = 1; // 4 bytes
    h[13] = 0x10; // PDU type 1 (UL)
    h[14] = qfi & 0x3f;
    h[15] = 0; // no next extension
    h
}

/// The inner packet of a G-PDU to `teid`: its byte range in `d`, or `None` if `d` is not one.
pub fn gpdu_payload(d: &[u8], teid: u32) -> Option<std::ops::Range<usize>> {
    if d.len() < 8 || d[0] >> 5 != 1 || d[0] & 0x10 == 0 || d[1] != 0xff {
        return None;
    }
    if u32::from_be_bytes([d[4], d[5], d[6], d[7]]) != teid {
        return None;
    }
    let end = 8 + usize::from(u16::from_be_bytes([d[2], d[3]]));
    if end > d.len() {
        return None;
    }
    let mut off = 8;
    if d[0] & 0x07 != 0 {
        off = 12;
        let mut next = *d.get(11)?;
        while next != 0 {
            let l = usize::from(*d.get(off)?) * 4;
            if l == 0 || off + l > end {
                return None;
            }
            next = d[off + l - 1];
            off += l;
        }
    }
    (off <= end).then_some(off..end)
}

impl GtpGnb {
    /// Create the TUN device in the namespace (up, MTU `mtu`; the caller adds the UE
    /// address and routes with `ip`), bind N3, start both directions.
    pub fn start(cfg: GnbConfig, mtu: u16) -> std::io::Result<GtpGnb> {
        let c = cfg.clone();
        let (tun, sock) = in_netns(&cfg.netns, move || {
            let mut tc = tun::Configuration::default();
            tc.tun_name(&c.tun).mtu(mtu).up();
            let dev = tun::create(&tc).map_err(std::io::Error::other)?;
            // Not connected: the UPF may send from another source port (entropy).
            let sock = UdpSocket::bind(c.local)?;
            sock.set_read_timeout(Some(Duration::from_millis(100)))?;
            Ok((dev, sock))
        })
        .join()
        .map_err(|_| std::io::Error::other("gnb setup thread panicked"))??;
        let stats = Arc::new(GnbStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (mut rd, mut wr) = tun.split();
        let up_sock = sock.try_clone()?;
        let (st, halt) = (stats.clone(), stop.clone());
        let (teid, qfi, upf) = (cfg.ul_teid, cfg.qfi, cfg.upf);
        // With a delay, packets wait in a FIFO for a sender thread; it ends when the uplink
        // thread drops its end.
        let delayed = (!cfg.ul_delay.is_zero()).then(|| {
            let (tx, rx) = std::sync::mpsc::channel::<(std::time::Instant, Vec<u8>)>();
            let (sock, st) = (up_sock.try_clone(), st.clone());
            std::thread::spawn(move || {
                let sock = sock?;
                for (due, pkt) in rx {
                    let now = std::time::Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    if sock.send_to(&pkt, upf).is_ok() {
                        st.ul_pkts.fetch_add(1, Relaxed);
                        st.ul_bytes.fetch_add((pkt.len() - UL_HDR) as u64, Relaxed);
                    }
                }
                Ok::<(), std::io::Error>(())
            });
            tx
        });
        let delay = cfg.ul_delay;
        let ul = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !halt.load(Relaxed) {
                let n = match rd.read(&mut buf[UL_HDR..]) {
                    Ok(n) => n,
                    // The device went away (namespace deleted, `stop`).
                    Err(_) => return Ok(()),
                };
                if n == 0 {
                    continue;
                }
                buf[..UL_HDR].copy_from_slice(&ul_header(teid, qfi, n));
                if let Some(tx) = &delayed {
                    let due = std::time::Instant::now() + delay;
                    if tx.send((due, buf[..UL_HDR + n].to_vec())).is_err() {
                        return Ok(());
                    }
                } else if up_sock.send_to(&buf[..UL_HDR + n], upf).is_ok() {
                    st.ul_pkts.fetch_add(1, Relaxed);
                    st.ul_bytes.fetch_add(n as u64, Relaxed);
                }
            }
            Ok(())
        });
        let (st, halt) = (stats.clone(), stop.clone());
        let dl_teid = cfg.dl_teid;
        let dl = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !halt.load(Relaxed) {
                let n = match sock.recv(&mut buf) {
                    Ok(n) => n,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        continue
                    }
                    Err(e) => return Err(e),
                };
                match gpdu_payload(&buf[..n], dl_teid) {
                    Some(r) => {
                        let len = r.len();
                        if wr.write(&buf[r]).is_ok() {
                            st.dl_pkts.fetch_add(1, Relaxed);
                            st.dl_bytes.fetch_add(len as u64, Relaxed);
                        }
                    }
                    None => {
                        st.dl_refused.fetch_add(1, Relaxed);
                    }
                }
            }
            Ok(())
        });
        Ok(GtpGnb {
            stats,
            stop,
            threads: vec![ul, dl],
        })
    }

    /// Stop both directions. The uplink thread ends when its TUN device goes (delete it or
    /// the namespace); this waits for the downlink one only.
    pub fn stop(&mut self) {
        self.stop.store(true, Relaxed);
        if self.threads.len() == 2 {
            if let Some(dl) = self.threads.pop() {
                let _ = dl.join();
            }
        }
    }
}

impl Drop for GtpGnb {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let inner = [0x45u8, 0, 0, 20, 1, 2, 3, 4];
        let mut g = ul_header(0x1234, 9, inner.len()).to_vec();
        g.extend_from_slice(&inner);
        assert_eq!(gpdu_payload(&g, 0x1234), Some(16..24));
        assert_eq!(gpdu_payload(&g, 0x1235), None, "another TEID");
        // Plain 8-byte header.
        let mut p = vec![0x30, 0xff, 0, 8, 0, 0, 0, 7];
        p.extend_from_slice(&inner);
        assert_eq!(gpdu_payload(&p, 7), Some(8..16));
        // Not a G-PDU (echo request), truncated, a zero-length extension.
        assert_eq!(
            gpdu_payload(&[0x32, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0], 0),
            None
        );
        assert_eq!(gpdu_payload(&p[..12], 7), None);
        let mut z = g.clone();
        z[12] = 0;
        assert_eq!(gpdu_payload(&z, 0x1234), None);
    }
}
