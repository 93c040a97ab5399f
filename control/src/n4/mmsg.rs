//! Batched datagram I/O for the N4 endpoint (Linux `recvmmsg(2)` / `sendmmsg(2)` through
//! nix): a burst's requests come in with one system call per [`RX_BATCH`] datagrams and
//! its responses leave with one per socket, instead of one `recvfrom` / `sendto` each.

use nix::sys::socket::{
    recvmmsg, sendmmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage,
};
use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

/// Datagrams one `recvmmsg` call may return.
pub(super) const RX_BATCH: usize = 32;

/// Receive buffers for [`RX_BATCH`] datagrams of up to `max` bytes each (what one
/// `recvmmsg` fills), kept for the thread's life. Not `Send` (the kernel headers hold
/// pointers): made and used on the N4 thread.
pub(super) struct RxBatch {
    bufs: Vec<u8>,
    max: usize,
    hdrs: MultiHeaders<SockaddrStorage>,
    /// (length, peer) of the datagrams the last [`Self::recv`] returned.
    got: Vec<(usize, SocketAddr)>,
}

/// Why [`RxBatch::recv`] got nothing.
pub(super) enum RxEnd {
    /// Nothing waiting.
    Empty,
    /// Another error (an ICMP port unreachable from a peer surfaces here on Linux).
    Error(nix::Error),
}

impl RxBatch {
    pub(super) fn new(max: usize) -> RxBatch {
        RxBatch {
            bufs: vec![0; RX_BATCH * max],
            max,
            hdrs: MultiHeaders::preallocate(RX_BATCH, None),
            got: Vec::with_capacity(RX_BATCH),
        }
    }

    /// Up to `want` (at most [`RX_BATCH`]) datagrams waiting on `sock`, without blocking.
    pub(super) fn recv(&mut self, sock: &UdpSocket, want: usize) -> Result<usize, RxEnd> {
        self.got.clear();
        let want = want.clamp(1, RX_BATCH);
        let mut iovs: Vec<[IoSliceMut<'_>; 1]> = self
            .bufs
            .chunks_mut(self.max)
            .take(want)
            .map(|c| [IoSliceMut::new(c)])
            .collect();
        let r = recvmmsg(
            sock.as_raw_fd(),
            &mut self.hdrs,
            iovs.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        );
        match r {
            Ok(msgs) => {
                for m in msgs {
                    // A datagram without a usable source address cannot be answered; the
                    // node would answer it to nowhere. Not expected from UDP.
                    if let Some(peer) = m.address.as_ref().and_then(socket_addr) {
                        self.got.push((m.bytes, peer));
                    }
                }
                Ok(self.got.len())
            }
            Err(nix::Error::EAGAIN) => Err(RxEnd::Empty),
            Err(e) => Err(RxEnd::Error(e)),
        }
    }

    /// Datagram `i` of the last [`Self::recv`]: (peer, bytes).
    pub(super) fn datagram(&self, i: usize) -> (SocketAddr, &[u8]) {
        let (n, peer) = self.got[i];
        let at = i * self.max;
        (peer, &self.bufs[at..at + n.min(self.max)])
    }
}

fn socket_addr(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::V4(SocketAddrV4::from(*v4)));
    }
    a.as_sockaddr_in6()
        .map(|v6| SocketAddr::V6(SocketAddrV6::from(*v6)))
}

/// Send `msgs` (to, bytes) on `sock`, in order, with as few `sendmmsg` calls as the kernel
/// takes. A datagram the kernel refuses (the first of a call that fails) is passed to
/// `failed` and skipped, the rest still go, as a `send_to` per datagram would. Returns how
/// many were sent.
pub(super) fn send_all<'m>(
    sock: &UdpSocket,
    msgs: impl ExactSizeIterator<Item = (SocketAddr, &'m [u8])>,
    mut failed: impl FnMut(SocketAddr, nix::Error),
) -> u64 {
    let n = msgs.len();
    if n == 0 {
        return 0;
    }
    let (to, bytes): (Vec<SocketAddr>, Vec<&[u8]>) = msgs.unzip();
    let addrs: Vec<Option<SockaddrStorage>> =
        to.iter().map(|a| Some(SockaddrStorage::from(*a))).collect();
    let iovs: Vec<[IoSlice<'_>; 1]> = bytes.iter().map(|b| [IoSlice::new(b)]).collect();
    let mut hdrs = MultiHeaders::<SockaddrStorage>::preallocate(n, None);
    let (mut at, mut sent) = (0usize, 0u64);
    let no_cmsgs: [ControlMessage<'_>; 0] = [];
    while at < n {
        match sendmmsg(
            sock.as_raw_fd(),
            &mut hdrs,
            &iovs[at..],
            &addrs[at..],
            no_cmsgs,
            MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(r) => match r.count() {
                0 => {
                    failed(to[at], nix::Error::EAGAIN);
                    at += 1;
                }
                k => {
                    sent += k as u64;
                    at += k;
                }
            },
            Err(e) => {
                failed(to[at], e);
                at += 1;
            }
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_batch_goes_out_in_order_and_comes_back_in_one_call() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = b.local_addr().unwrap();
        let payloads: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 1 + i as usize]).collect();
        let mut errs = 0;
        let sent = send_all(&a, payloads.iter().map(|p| (to, p.as_slice())), |_, _| {
            errs += 1
        });
        assert_eq!((sent, errs), (40, 0));
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut rx = RxBatch::new(2048);
        let mut got = Vec::new();
        let t0 = std::time::Instant::now();
        while got.len() < 40 && t0.elapsed() < Duration::from_secs(2) {
            match rx.recv(&b, RX_BATCH) {
                Ok(n) => {
                    assert!(n <= RX_BATCH);
                    for i in 0..n {
                        let (peer, d) = rx.datagram(i);
                        assert_eq!(peer, a.local_addr().unwrap());
                        got.push(d.to_vec());
                    }
                }
                Err(RxEnd::Empty) => std::thread::sleep(Duration::from_millis(1)),
                Err(RxEnd::Error(e)) => panic!("{e}"),
            }
        }
        assert_eq!(got, payloads);
        assert!(matches!(rx.recv(&b, 4), Err(RxEnd::Empty)));
        // A refused datagram (IPv6 destination on an IPv4 socket) is reported, the others go.
        let mut bad = Vec::new();
        let v6: SocketAddr = "[::1]:9".parse().unwrap();
        let msgs = [(to, &b"x"[..]), (v6, &b"y"[..]), (to, &b"z"[..])];
        let sent = send_all(&a, msgs.into_iter(), |t, _| bad.push(t));
        assert_eq!((sent, bad), (2, vec![v6]));
    }
}
