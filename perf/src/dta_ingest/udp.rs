//! The kernel-UDP collector: the seed's CPU baseline fed through the kernel's socket path.

use super::collector::{HashCollector, Lists};
use super::{payloads, Args};
use crate::harness::report;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The collector the seed compares against (its Figure 7 CPU baselines): reports arrive
/// through the kernel's UDP socket path, `recvmmsg` (32 per call) into the same hash-map
/// collector, on the pinned core. The sender is a thread on the other core(s) blasting the
/// same stream (the same key population, keys advanced as the loop-back does) with `sendmmsg` over loopback: on
/// loopback the kernel's transmit path also delivers into the receiving socket, in the
/// *sender's* context, so the receiver's core pays only the receive syscalls, the copy-out
/// and the inserts (a favourable set-up for this collector). Rate = reports the collector
/// handled per second of its thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`: user and
/// kernel, not the time it slept waiting for a sender that a shared machine slows down);
/// datagrams the kernel dropped for a full socket buffer are not counted.
pub fn kernel_udp(mode: &str, a: &Args) -> (f64, u64) {
    use nix::sys::socket::{
        recvmmsg, sendmmsg, setsockopt, sockopt, MsgFlags, MultiHeaders, SockaddrIn,
    };
    use std::io::{IoSlice, IoSliceMut};
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    let prim = mode.trim_start_matches("udp-").to_string();
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let _ = setsockopt(&rx, sockopt::RcvBuf, &(8 << 20));
    rx.set_read_timeout(Some(Duration::from_millis(100))).ok();
    let to = SockaddrIn::from(match rx.local_addr().expect("addr") {
        std::net::SocketAddr::V4(v) => v,
        _ => unreachable!("bound to IPv4"),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        let prim = prim.clone();
        let lb = a.loopback();
        let others: Vec<usize> = (0..report::cores()).filter(|&c| c != a.fwd.core).collect();
        std::thread::spawn(move || {
            let _ = peregrine_control::pinning::pin_current(&others);
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
            let mut payloads = payloads(&prim, 32, &lb);
            let addrs = [Some(to); 32];
            let mut hdrs = MultiHeaders::<SockaddrIn>::preallocate(32, None);
            while !stop.load(Ordering::Relaxed) {
                {
                    let iovs: Vec<[IoSlice<'_>; 1]> =
                        payloads.iter().map(|p| [IoSlice::new(p)]).collect();
                    let _ = sendmmsg(
                        tx.as_raw_fd(),
                        &mut hdrs,
                        &iovs,
                        addrs,
                        [],
                        MsgFlags::empty(),
                    );
                }
                for p in payloads.iter_mut() {
                    lb.advance(p);
                }
            }
        })
    };
    let _ = peregrine_control::pinning::pin_current(&[a.fwd.core]);
    let mut c = HashCollector::sized(&prim, a.keys(), Lists::Map);
    let mut bufs = [[0u8; 64]; 32];
    let mut hdrs = MultiHeaders::<SockaddrIn>::preallocate(32, None);
    let mut lens = [0usize; 32];
    let cpu = || {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
    };
    let (mut n, mut t0, mut cpu0) = (0u64, None, 0.0);
    let warm = Instant::now() + Duration::from_millis(300);
    let allocs0 = peregrine_testkit::alloc::thread_allocs();
    loop {
        let got = {
            let mut it = bufs.iter_mut();
            let mut iovs: [[IoSliceMut<'_>; 1]; 32] =
                std::array::from_fn(|_| [IoSliceMut::new(&mut it.next().expect("32 buffers")[..])]);
            match recvmmsg(
                rx.as_raw_fd(),
                &mut hdrs,
                iovs.iter_mut(),
                MsgFlags::empty(),
                None,
            ) {
                Ok(r) => {
                    let mut k = 0;
                    for (m, l) in r.zip(lens.iter_mut()) {
                        *l = m.bytes;
                        k += 1;
                    }
                    k
                }
                Err(_) => 0,
            }
        };
        for (b, &l) in bufs.iter().zip(&lens).take(got) {
            std::hint::black_box(c.handle(&b[..l]));
        }
        let now = Instant::now();
        match t0 {
            None if now >= warm => {
                t0 = Some(now);
                cpu0 = cpu();
            }
            None => {}
            Some(t) => {
                n += got as u64;
                if now.duration_since(t).as_secs_f64() >= a.seconds {
                    break;
                }
            }
        }
    }
    let secs = (cpu() - cpu0).max(1e-9);
    let allocs = peregrine_testkit::alloc::thread_allocs() - allocs0;
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    (n as f64 / secs, allocs)
}
