//! The N4 endpoint: PFCP over UDP (TS 29.244 section 6.1, port 8805) around the I/O-free
//! [`peregrine_n4::Node`], on its own control thread.
//!
//! Per wake-up: receive every datagram waiting (up to [`RX_BURST`]), let the node handle each
//! (time passed in), stage the sessions it created, modified or deleted with the rule
//! compiler, publish **one** new rule snapshot for the whole burst, and only then send the
//! responses, so an SMF that sees "Request accepted" can rely on the rules being in the
//! workers' next batch. Then run the node's timers (heartbeats, report retransmissions).
//! Workers never wait for any of this: they pick the new snapshot up with one atomic load.

use peregrine_n4::{Event, Node, NodeConfig, Output, Reject, Session};
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Datagrams handled before the staged rules are published and the responses sent.
pub const RX_BURST: usize = 256;

/// Largest PFCP datagram we accept (bigger ones are truncated by the kernel and then fail
/// to decode, which the node answers with a cause).
const MAX_DATAGRAM: usize = 65_535;

/// Publish-latency samples kept for percentiles.
const LATENCY_SAMPLES: usize = 65_536;

/// The rule side the endpoint drives: the compiler plus the snapshot publisher.
pub trait SessionRules: Send {
    /// Stage the current state of a session (created or modified). A rejection means the
    /// rules cannot be compiled; the endpoint then deletes the session from the node.
    fn upsert(&mut self, s: &Session) -> Result<(), Reject>;
    /// Stage the removal of a session.
    fn remove(&mut self, up_seid: u64);
    /// Publish what was staged since the last call (nothing staged: nothing to do). Returns
    /// how long the new snapshot took to reach every worker, when that was measured.
    fn publish(&mut self) -> Option<Duration>;
}

/// Where the endpoint listens and how its node behaves.
#[derive(Debug, Clone)]
pub struct N4Config {
    /// Addresses to bind (IPv4 and/or IPv6), usually port 8805.
    pub listen: Vec<SocketAddr>,
    pub node: NodeConfig,
}

/// Event counts of the endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct N4Counts {
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    pub send_errors: u64,
    pub sessions_created: u64,
    pub sessions_modified: u64,
    pub sessions_deleted: u64,
    /// Sessions the node accepted but the compiler refused.
    pub compile_rejects: u64,
    pub publishes: u64,
}

/// What the endpoint has done, for logs, the summary and Prometheus.
#[derive(Debug, Clone, Default)]
pub struct N4Status {
    pub counts: N4Counts,
    pub sessions: usize,
    pub associations: usize,
    /// Rule-publish latencies in microseconds (the last [`LATENCY_SAMPLES`]).
    pub publish_latency_us: VecDeque<u32>,
}

impl N4Status {
    /// The `q` quantile (0..=1) of the recorded publish latencies, in microseconds.
    pub fn publish_latency_quantile(&self, q: f64) -> Option<u32> {
        if self.publish_latency_us.is_empty() {
            return None;
        }
        let mut v: Vec<u32> = self.publish_latency_us.iter().copied().collect();
        v.sort_unstable();
        let i = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        Some(v[i])
    }
}

/// The running endpoint.
#[derive(Debug)]
pub struct N4Endpoint {
    addrs: Vec<SocketAddr>,
    status: Arc<Mutex<N4Status>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl N4Endpoint {
    /// Bind the sockets and start the thread.
    pub fn start<R: SessionRules + 'static>(cfg: N4Config, rules: R) -> std::io::Result<Self> {
        if cfg.listen.is_empty() {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                "no PFCP listen address",
            ));
        }
        let mut sockets = Vec::new();
        for a in &cfg.listen {
            let s = UdpSocket::bind(a)?;
            s.set_nonblocking(true)?;
            sockets.push(s);
        }
        let addrs = sockets
            .iter()
            .map(|s| s.local_addr())
            .collect::<Result<Vec<_>, _>>()?;
        let status = Arc::new(Mutex::new(N4Status::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut lp = Loop {
            node: Node::new(cfg.node),
            rules,
            sockets,
            status: status.clone(),
            counts: N4Counts::default(),
            latency: Vec::new(),
            pending: Vec::new(),
            dirty: false,
            epoch: Instant::now(),
        };
        let st = stop.clone();
        let handle = std::thread::Builder::new()
            .name("pg-n4".into())
            .spawn(move || lp.run(&st))?;
        Ok(N4Endpoint {
            addrs,
            status,
            stop,
            handle: Some(handle),
        })
    }

    /// The bound addresses (with the ports picked for port 0).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub fn status(&self) -> N4Status {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for N4Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

struct Loop<R> {
    node: Node,
    rules: R,
    sockets: Vec<UdpSocket>,
    status: Arc<Mutex<N4Status>>,
    /// Counted by the thread, copied out after each burst.
    counts: N4Counts,
    /// Publish latencies (us) not yet copied out.
    latency: Vec<u32>,
    /// Responses held until the burst's rules are published: (socket, to, bytes).
    pending: Vec<(usize, SocketAddr, Vec<u8>)>,
    dirty: bool,
    epoch: Instant,
}

impl<R: SessionRules> Loop<R> {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn run(&mut self, stop: &AtomicBool) {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        while !stop.load(Ordering::Relaxed) {
            let got = self.receive_burst(&mut buf);
            if got == 0 {
                self.wait(&mut buf);
            }
            self.finish_burst();
            let now = self.now();
            if self.node.next_timer().is_some_and(|t| t <= now) {
                let out = self.node.poll_timers(now);
                self.apply(None, out);
                self.finish_burst();
            }
        }
    }

    /// Read what is waiting on every socket, without blocking.
    fn receive_burst(&mut self, buf: &mut [u8]) -> usize {
        let mut got = 0;
        for i in 0..self.sockets.len() {
            while got < RX_BURST {
                match self.sockets[i].recv_from(buf) {
                    Ok((n, peer)) => {
                        got += 1;
                        self.on_datagram(i, peer, &buf[..n]);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        // ICMP port unreachable from a peer surfaces here on Linux.
                        tracing::debug!(%e, "pfcp recv");
                        break;
                    }
                }
            }
        }
        got
    }

    /// Nothing waiting: sleep on the first socket until a datagram or the next timer
    /// (at most 10 ms, so a stop request is seen promptly).
    fn wait(&mut self, buf: &mut [u8]) {
        let now = self.now();
        let until_timer = self
            .node
            .next_timer()
            .map(|t| Duration::from_nanos(t.saturating_sub(now)))
            .unwrap_or(Duration::MAX);
        // With several sockets the others are polled every millisecond.
        let cap = if self.sockets.len() > 1 { 1 } else { 10 };
        let timeout = until_timer
            .min(Duration::from_millis(cap))
            .max(Duration::from_micros(100));
        let s = &self.sockets[0];
        if s.set_nonblocking(false).is_err() || s.set_read_timeout(Some(timeout)).is_err() {
            std::thread::sleep(timeout);
            return;
        }
        let r = s.recv_from(buf);
        let _ = s.set_nonblocking(true);
        if let Ok((n, peer)) = r {
            self.on_datagram(0, peer, &buf[..n]);
            // Whatever arrived with it joins the same burst.
            self.receive_burst(buf);
        }
    }

    fn on_datagram(&mut self, sock: usize, peer: SocketAddr, data: &[u8]) {
        self.counts.datagrams_in += 1;
        let now = self.now();
        let out = self.node.handle(now, peer, data);
        self.apply(Some(sock), out);
    }

    fn apply(&mut self, sock: Option<usize>, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Send { to, bytes } => {
                    let s = sock.unwrap_or_else(|| self.socket_for(to));
                    self.pending.push((s, to, bytes));
                }
                Output::Event(e) => self.on_event(e),
            }
        }
    }

    /// The socket of the peer's address family (timers have no receiving socket).
    fn socket_for(&self, to: SocketAddr) -> usize {
        self.sockets
            .iter()
            .position(|s| {
                s.local_addr()
                    .is_ok_and(|a| a.is_ipv4() == to.is_ipv4() || a.ip().is_unspecified())
            })
            .unwrap_or(0)
    }

    fn on_event(&mut self, e: Event) {
        match e {
            Event::SessionCreated { seid } | Event::SessionModified { seid } => {
                if matches!(e, Event::SessionCreated { .. }) {
                    self.counts.sessions_created += 1;
                } else {
                    self.counts.sessions_modified += 1;
                }
                let Some(s) = self.node.session(seid) else {
                    return;
                };
                match self.rules.upsert(s) {
                    Ok(()) => self.dirty = true,
                    Err(r) => {
                        self.counts.compile_rejects += 1;
                        tracing::error!(
                            seid,
                            cause = r.cause,
                            offending_ie = ?r.offending_ie,
                            "session accepted by N4 but its rules cannot be compiled"
                        );
                    }
                }
            }
            Event::SessionDeleted { seid } => {
                self.counts.sessions_deleted += 1;
                self.rules.remove(seid);
                self.dirty = true;
            }
            Event::AssociationUp { peer, .. } => tracing::info!(%peer, "PFCP association up"),
            Event::AssociationDown { peer, reason } => {
                tracing::warn!(%peer, ?reason, "PFCP association down")
            }
        }
    }

    /// Publish the burst's rules, then send its responses, then share the status.
    fn finish_burst(&mut self) {
        if self.dirty {
            self.dirty = false;
            self.counts.publishes += 1;
            if let Some(d) = self.rules.publish() {
                self.latency
                    .push(d.as_micros().min(u128::from(u32::MAX)) as u32);
            }
        }
        for (s, to, bytes) in self.pending.drain(..) {
            match self.sockets[s].send_to(&bytes, to) {
                Ok(_) => self.counts.datagrams_out += 1,
                Err(e) => {
                    self.counts.send_errors += 1;
                    tracing::debug!(%e, %to, "pfcp send");
                }
            }
        }
        if let Ok(mut st) = self.status.lock() {
            if st.counts == self.counts && self.latency.is_empty() {
                return;
            }
            st.counts = self.counts;
            st.sessions = self.node.session_count();
            st.associations = self.node.associations().count();
            for l in self.latency.drain(..) {
                if st.publish_latency_us.len() == LATENCY_SAMPLES {
                    st.publish_latency_us.pop_front();
                }
                st.publish_latency_us.push_back(l);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_pfcp::ie::{Bitmap, NodeId};
    use peregrine_pfcp::message::{AssociationRequest, Body, Heartbeat};
    use peregrine_pfcp::Message;
    use std::net::Ipv4Addr;

    /// Counts what the endpoint asks of the rule side.
    #[derive(Default)]
    struct Count(Arc<Mutex<(u32, u32, u32)>>);

    impl SessionRules for Count {
        fn upsert(&mut self, _s: &Session) -> Result<(), Reject> {
            self.0.lock().unwrap().0 += 1;
            Ok(())
        }
        fn remove(&mut self, _up_seid: u64) {
            self.0.lock().unwrap().1 += 1;
        }
        fn publish(&mut self) -> Option<Duration> {
            self.0.lock().unwrap().2 += 1;
            Some(Duration::from_micros(7))
        }
    }

    fn req(seq: u32, body: Body) -> Vec<u8> {
        Message {
            seq,
            seid: None,
            priority: None,
            fo: false,
            body,
        }
        .to_vec()
        .unwrap()
    }

    fn exchange(c: &UdpSocket, to: SocketAddr, bytes: &[u8]) -> Option<Message> {
        c.send_to(bytes, to).unwrap();
        let mut buf = [0u8; 4096];
        let (n, _) = c.recv_from(&mut buf).ok()?;
        Some(Message::parse(&buf[..n]).expect("our response decodes"))
    }

    #[test]
    fn answers_heartbeat_and_association_over_udp_and_survives_garbage() {
        let node = NodeConfig::new(
            NodeId::Ipv4(Ipv4Addr::LOCALHOST),
            0x1234_5678,
            Some(Ipv4Addr::LOCALHOST),
        );
        let ep = N4Endpoint::start(
            N4Config {
                listen: vec!["127.0.0.1:0".parse().unwrap()],
                node,
            },
            Count::default(),
        )
        .unwrap();
        let to = ep.local_addrs()[0];
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let hb = req(
            1,
            Body::HeartbeatRequest(Heartbeat {
                recovery_time_stamp: 9,
                extra: vec![],
            }),
        );
        let r = exchange(&c, to, &hb).expect("heartbeat answered");
        assert_eq!(r.seq, 1);
        match r.body {
            Body::HeartbeatResponse(h) => assert_eq!(h.recovery_time_stamp, 0x1234_5678),
            b => panic!("{b:?}"),
        }
        // Garbage and a truncated header are not answered and do not stop the endpoint.
        c.send_to(&[0xde, 0xad], to).unwrap();
        c.send_to(&hb[..6], to).unwrap();
        let setup = req(
            2,
            Body::AssociationSetupRequest(AssociationRequest {
                node_id: NodeId::fqdn("smf.test"),
                recovery_time_stamp: Some(5),
                up_function_features: None,
                extra: vec![],
            }),
        );
        let r = exchange(&c, to, &setup).expect("setup answered");
        match r.body {
            Body::AssociationSetupResponse(a) => {
                assert_eq!(a.cause, peregrine_pfcp::cause::REQUEST_ACCEPTED);
                assert_eq!(a.up_function_features, Some(Bitmap(0x10)));
            }
            b => panic!("{b:?}"),
        }
        // The status is shared after the responses go out; give the thread a moment.
        let t0 = Instant::now();
        let mut st = ep.status();
        while st.counts.datagrams_out < 2 && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
            st = ep.status();
        }
        assert_eq!(st.associations, 1);
        assert_eq!(st.counts.datagrams_in, 4);
        assert_eq!(st.counts.datagrams_out, 2);
    }
}
