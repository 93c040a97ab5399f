//! The N4 endpoint: PFCP over UDP (TS 29.244 section 6.1, port 8805) around the I/O-free
//! [`peregrine_n4::Node`], on its own control thread.
//!
//! Per wake-up: receive every datagram waiting (up to [`RX_BURST`]), let the node handle each
//! (time passed in), stage the sessions it created, modified or deleted with the rule
//! compiler, publish **one** new rule snapshot for the whole burst, and send the burst's
//! responses once every worker has picked that snapshot up, so an SMF that sees "Request
//! accepted" can rely on the rules being in force. The thread does not block on that: it
//! goes on receiving and compiling the next burst while the workers catch up (they pick a
//! new snapshot up with one atomic load per batch, or on an idle poll), and responses leave
//! in order as their generations are seen. Then run the node's timers (heartbeats, report
//! retransmissions). Workers never wait for any of this.
//!
//! GTP-U path supervision (TS 29.281 section 7.2.1): the node's `Output::Echo`s go out at
//! once through the [`GtpuSink`]; Echo Responses reach the node as
//! [`N4Command::EchoResponse`] from the exception path; failures and recoveries go to the SMF
//! as Node Report Requests from the node itself.
//!
//! End Markers (SNDEM, TS 29.244 section 5.2.2.3): the node's `Event::EndMarker`s of a
//! burst are sent by the [`GtpuSink`] after the burst's snapshot is published and seen
//! by every worker, and before the responses. Why after: until the publish the old rules are
//! in force, and a worker keeps sending G-PDUs down the old tunnel; an End Marker injected
//! before it could be followed by more of them, and the gNB would drop those (TS 29.281
//! section 7.3.2: the End Marker is the last packet on the old path). Once every worker has
//! picked the new snapshot up, each has flushed every packet it forwarded under the old
//! rules to its tx queue (`flush_tx` runs after every batch), so an End Marker sent now
//! follows them. (Packets held in an egress scheduler's queues are the exception: the
//! injected frame bypasses them.)

mod mmsg;

use crossbeam_channel::{Receiver, Sender};
use mmsg::{RxBatch, RxEnd};
use peregrine_n4::usage::{Usage, UsageSource};
use peregrine_n4::{Event, N4Stats, Node, NodeConfig, Output, Reject, Session};
use peregrine_pfcp::ie::OuterHeaderCreation;
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Datagrams handled before the staged rules are published and the responses sent.
pub const RX_BURST: usize = 256;

/// Largest PFCP datagram we accept (bigger ones are truncated by the kernel and then fail
/// to decode, which the node answers with a cause).
const MAX_DATAGRAM: usize = 65_535;

/// Receive buffer asked for on each N4 socket. With Linux's default (`net.core.rmem_default`,
/// 208 KiB; each datagram is charged its buffer's truesize, not its ~250 bytes) a window of
/// 256 pipelined establishment requests overflowed it: the 1 M-session benchmark lost 90
/// datagrams at the start of every run (enlarging this socket's buffer took 56 of them away,
/// the client's the other 34), each answered only after its retransmission (TS 29.244
/// section 6.4: T1).
pub const N4_RCVBUF: usize = 4 << 20;

/// Ask for [`N4_RCVBUF`] on `s` (past `net.core.rmem_max` with `SO_RCVBUFFORCE` when we may,
/// else up to it); the size the kernel granted (it doubles the request for its bookkeeping).
/// Also for a peer's socket facing the endpoint (the benchmark's SMF).
pub fn grow_rcvbuf(s: &UdpSocket) -> usize {
    use nix::sys::socket::{getsockopt, setsockopt, sockopt};
    if setsockopt(s, sockopt::RcvBufForce, &N4_RCVBUF).is_err() {
        // Not permitted (no CAP_NET_ADMIN): as much as rmem_max allows.
        let _ = setsockopt(s, sockopt::RcvBuf, &N4_RCVBUF);
    }
    getsockopt(s, sockopt::RcvBuf).unwrap_or(0)
}

/// Publish-latency samples kept for percentiles.
const LATENCY_SAMPLES: usize = 65_536;

/// The rule side the endpoint drives: the compiler plus the snapshot publisher, and the
/// dataplane's usage counters.
pub trait SessionRules: Send {
    /// Would this session's rules compile? Asked before the node commits a session, so a
    /// session whose rules cannot be installed is refused with a PFCP cause, not accepted.
    fn check(&self, s: &Session) -> Result<(), Reject>;
    /// Stage the current state of a session (created or modified).
    fn upsert(&mut self, s: &Session) -> Result<(), Reject>;
    /// Stage the removal of a session.
    fn remove(&mut self, up_seid: u64);
    /// Publish what was staged since the last call; returns the snapshot's generation.
    fn publish(&mut self) -> u64;
    /// Once every worker has picked up generation `g` (or a later one): how long after its
    /// publish the last one did. `None` before. Must not block.
    fn seen(&mut self, g: u64) -> Option<Duration>;
    /// Cumulative usage of a URR as the dataplane counted it.
    fn usage(&mut self, up_seid: u64, urr_id: u32) -> Option<Usage>;
    /// The URR's volume or time quota is used up: stop forwarding what it counts (staged).
    fn quota_exhausted(&mut self, s: &Session, urr_id: u32);
}

/// Sends the GTP-U frames the node asks for (see the module docs).
pub trait GtpuSink: Send {
    /// Send an End Marker for the tunnel `old` of FAR `far_id` of session `seid`; false if
    /// it could not be sent (logged by the sink).
    fn end_marker(&mut self, seid: u64, far_id: u32, old: &OuterHeaderCreation) -> bool;
    /// Send a GTP-U Echo Request with `seq` to `peer`; false if it could not be sent.
    fn echo_request(&mut self, peer: IpAddr, seq: u16) -> bool;
}

/// Requests from other threads to the N4 thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum N4Command {
    /// A buffering FAR got downlink data (the exception path saw a buffered packet).
    DownlinkData { up_seid: u64, pdr_id: u16 },
    /// A GTP-U Echo Response from `peer` (TS 29.281 section 7.2.2).
    EchoResponse { peer: IpAddr, seq: u16 },
}

/// Where the endpoint listens and how its node behaves.
#[derive(Debug, Clone)]
pub struct N4Config {
    /// Addresses to bind (IPv4 and/or IPv6), usually port 8805.
    pub listen: Vec<SocketAddr>,
    pub node: NodeConfig,
    /// How often URR usage is read from the dataplane and checked against triggers.
    pub usage_interval: Duration,
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
    /// GTP-U End Markers sent for SNDEM, and those that could not be.
    pub end_markers_sent: u64,
    pub end_markers_failed: u64,
    /// GTP-U Echo Requests that could not be sent (no route, no N3 address of the family,
    /// port refused).
    pub echo_requests_failed: u64,
}

/// What the endpoint has done, for logs, the summary and Prometheus.
#[derive(Debug, Clone, Default)]
pub struct N4Status {
    pub counts: N4Counts,
    pub sessions: usize,
    pub associations: usize,
    /// The node's own PFCP counters.
    pub pfcp: N4Stats,
    /// Rule-publish latencies in microseconds (the last `LATENCY_SAMPLES`): from the
    /// publish until every worker has picked the snapshot up.
    pub publish_latency_us: VecDeque<u32>,
    /// The N4 thread's own part of each publish, in microseconds (the last
    /// `LATENCY_SAMPLES`): compiling the burst's changes into a snapshot and swapping it
    /// in (`SessionRules::publish`), before any worker is involved.
    pub publish_build_us: VecDeque<u32>,
}

impl N4Status {
    /// The `q` quantile (0..=1) of the recorded publish latencies, in microseconds.
    pub fn publish_latency_quantile(&self, q: f64) -> Option<u32> {
        quantile(&self.publish_latency_us, q)
    }

    /// The `q` quantile (0..=1) of the N4 thread's own publish times, in microseconds.
    pub fn publish_build_quantile(&self, q: f64) -> Option<u32> {
        quantile(&self.publish_build_us, q)
    }
}

fn quantile(samples: &VecDeque<u32>, q: f64) -> Option<u32> {
    if samples.is_empty() {
        return None;
    }
    let mut v: Vec<u32> = samples.iter().copied().collect();
    v.sort_unstable();
    let i = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    Some(v[i])
}

/// The running endpoint.
#[derive(Debug)]
pub struct N4Endpoint {
    addrs: Vec<SocketAddr>,
    commands: Sender<N4Command>,
    status: Arc<Mutex<N4Status>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl N4Endpoint {
    /// Bind the sockets and start the thread (End Markers are not sent).
    pub fn start<R: SessionRules + 'static>(cfg: N4Config, rules: R) -> std::io::Result<Self> {
        Self::start_with(cfg, rules, None)
    }

    /// [`start`](Self::start), with a sink for the End Markers SNDEM asks for.
    pub fn start_with<R: SessionRules + 'static>(
        cfg: N4Config,
        rules: R,
        end_markers: Option<Box<dyn GtpuSink>>,
    ) -> std::io::Result<Self> {
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
            let got = grow_rcvbuf(&s);
            if got < N4_RCVBUF {
                tracing::warn!(
                    addr = %a,
                    asked = N4_RCVBUF,
                    got,
                    "pfcp: smaller receive buffer than asked: a burst of pipelined requests may \
                     overflow it and wait for the SMF's retransmission"
                );
            }
            sockets.push(s);
        }
        let addrs = sockets
            .iter()
            .map(|s| s.local_addr())
            .collect::<Result<Vec<_>, _>>()?;
        let status = Arc::new(Mutex::new(N4Status::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (commands, cmd_rx) = crossbeam_channel::bounded(4096);
        let mut lp = Loop {
            commands: cmd_rx,
            usage_interval: cfg.usage_interval,
            next_usage: 0,
            node: Node::new(cfg.node),
            rules,
            sockets,
            status: status.clone(),
            counts: N4Counts::default(),
            latency: Vec::new(),
            build: Vec::new(),
            pending: Vec::new(),
            inflight: VecDeque::new(),
            last_generation: 0,
            gtpu_sink: end_markers,
            end_markers: Vec::new(),
            dirty: false,
            epoch: Instant::now(),
            waiting_since: None,
        };
        let st = stop.clone();
        let handle = std::thread::Builder::new()
            .name("pg-n4".into())
            .spawn(move || lp.run(&st))?;
        Ok(N4Endpoint {
            addrs,
            commands,
            status,
            stop,
            handle: Some(handle),
        })
    }

    /// The bound addresses (with the ports picked for port 0).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Queue a command for the N4 thread (never blocks; a full queue drops it).
    pub fn command(&self, c: N4Command) -> bool {
        self.commands.try_send(c).is_ok()
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

/// What the node asks of its surroundings while handling a request: the dataplane's usage
/// counts and whether the compiler can install a session's rules.
struct Env<'a, R>(&'a mut R);

impl<R: SessionRules> UsageSource for Env<'_, R> {
    fn usage(&mut self, up_seid: u64, urr_id: u32) -> Option<Usage> {
        self.0.usage(up_seid, urr_id)
    }

    fn check_rules(&mut self, s: &Session) -> Result<(), Reject> {
        self.0.check(s)
    }
}

/// A burst's output held until every worker runs its rules.
struct Inflight {
    generation: u64,
    /// Whether this burst published (its latency is a publish latency).
    published: bool,
    end_markers: Vec<(u64, u32, OuterHeaderCreation)>,
    responses: Vec<(usize, SocketAddr, Vec<u8>)>,
}

struct Loop<R> {
    commands: Receiver<N4Command>,
    usage_interval: Duration,
    next_usage: u64,
    node: Node,
    rules: R,
    sockets: Vec<UdpSocket>,
    status: Arc<Mutex<N4Status>>,
    /// Counted by the thread, copied out after each burst.
    counts: N4Counts,
    /// Publish latencies (us) not yet copied out.
    latency: Vec<u32>,
    /// Publish build times (us) not yet copied out.
    build: Vec<u32>,
    /// Responses of the burst being handled: (socket, to, bytes).
    pending: Vec<(usize, SocketAddr, Vec<u8>)>,
    /// Bursts waiting for the workers to see their snapshot, oldest first.
    inflight: VecDeque<Inflight>,
    /// The generation the last publish produced (0: none yet).
    last_generation: u64,
    gtpu_sink: Option<Box<dyn GtpuSink>>,
    /// End Markers held until the burst's rules are published: (SEID, FAR ID, old tunnel).
    end_markers: Vec<(u64, u32, OuterHeaderCreation)>,
    dirty: bool,
    epoch: Instant,
    /// When the thread started waiting for the oldest in-flight burst (None: not waiting).
    waiting_since: Option<u64>,
}

/// How long [`Loop::wait`] yields for the workers before it sleeps instead (rule publication
/// takes ~80 us).
const SPIN_NS: u64 = 500_000;
/// The sleep step after that.
const NAP: Duration = Duration::from_micros(50);

impl<R: SessionRules> Loop<R> {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn run(&mut self, stop: &AtomicBool) {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut rx = RxBatch::new(MAX_DATAGRAM);
        while !stop.load(Ordering::Relaxed) {
            let got = self.receive_burst(&mut rx);
            if got == 0 {
                self.wait(&mut buf, &mut rx);
            }
            self.finish_burst();
            let now = self.now();
            if self.node.next_timer().is_some_and(|t| t <= now) {
                let out = self.node.poll_timers_with(now, &mut Env(&mut self.rules));
                self.apply(None, out);
            }
            while let Ok(c) = self.commands.try_recv() {
                match c {
                    N4Command::DownlinkData { up_seid, pdr_id } => {
                        let out = self.node.downlink_data(now, up_seid, pdr_id);
                        self.apply(None, out);
                    }
                    N4Command::EchoResponse { peer, seq } => {
                        let out = self.node.echo_response(now, peer, seq);
                        self.apply(None, out);
                    }
                }
            }
            if now >= self.next_usage {
                self.next_usage = now + self.usage_interval.as_nanos() as u64;
                self.collect_usage(now);
            }
            self.finish_burst();
        }
    }

    /// Read what is waiting on every socket, without blocking (`recvmmsg`, up to
    /// [`mmsg::RX_BATCH`] datagrams a call).
    fn receive_burst(&mut self, rx: &mut RxBatch) -> usize {
        let mut got = 0;
        for i in 0..self.sockets.len() {
            while got < RX_BURST {
                match rx.recv(&self.sockets[i], RX_BURST - got) {
                    Ok(n) => {
                        got += n;
                        for d in 0..n {
                            let (peer, data) = rx.datagram(d);
                            self.on_datagram(i, peer, data);
                        }
                    }
                    Err(RxEnd::Empty) => break,
                    Err(RxEnd::Error(e)) => {
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
    ///
    /// While output waits for the workers (`inflight`), no socket timeout: the kernel counts
    /// `SO_RCVTIMEO` in scheduler ticks, so a 20 us timeout slept ~4 ms and a lone request
    /// took ~12 ms. The workers take a new snapshot within microseconds (every batch and
    /// every idle pass), so the thread yields for the first [`SPIN_NS`] of a wait, then
    /// sleeps in [`NAP`] steps (`nanosleep`: a high-resolution timer, not a tick).
    fn wait(&mut self, buf: &mut [u8], rx: &mut RxBatch) {
        let now = self.now();
        if !self.inflight.is_empty() {
            let since = *self.waiting_since.get_or_insert(now);
            if now.saturating_sub(since) < SPIN_NS {
                std::thread::yield_now();
            } else {
                std::thread::sleep(NAP);
            }
            return;
        }
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
            self.receive_burst(rx);
        }
    }

    fn on_datagram(&mut self, sock: usize, peer: SocketAddr, data: &[u8]) {
        self.counts.datagrams_in += 1;
        let now = self.now();
        let out = self
            .node
            .handle_with(now, peer, data, &mut Env(&mut self.rules));
        self.apply(Some(sock), out);
    }

    /// Feed the cumulative usage of the URRs with volume triggers to the node, which sends
    /// the Session Report Requests their thresholds and quotas call for. Only those URRs:
    /// periods and time triggers read their usage when their timer fires
    /// ([`Node::poll_timers_with`]), so the cost of a tick is O(volume-watched URRs), not
    /// O(sessions).
    fn collect_usage(&mut self, now: u64) {
        let urrs: Vec<(u64, u32)> = self.node.watched_urrs().collect();
        for (seid, urr) in urrs {
            if let Some(u) = self.rules.usage(seid, urr) {
                let out = self.node.update_usage(now, seid, urr, u);
                self.apply(None, out);
            }
        }
    }

    fn apply(&mut self, sock: Option<usize>, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Send { to, bytes } => {
                    let s = sock.unwrap_or_else(|| self.socket_for(to));
                    self.pending.push((s, to, bytes));
                }
                Output::Event(e) => self.on_event(e),
                // Path probes do not wait for a publish: they carry no rule change.
                Output::Echo { peer, seq } => {
                    let sent = self
                        .gtpu_sink
                        .as_mut()
                        .is_some_and(|s| s.echo_request(peer, seq));
                    if !sent {
                        self.counts.echo_requests_failed += 1;
                    }
                }
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
                match self.rules.upsert(&s) {
                    Ok(()) => self.dirty = true,
                    Err(r) => {
                        self.counts.compile_rejects += 1;
                        // The old rules stay in force: no End Marker for this session.
                        self.end_markers.retain(|e| e.0 != seid);
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
            Event::QuotaExhausted { seid, urr_id } => {
                if let Some(s) = self.node.session(seid) {
                    tracing::info!(seid, urr_id, "quota exhausted: forwarding stops");
                    self.rules.quota_exhausted(&s, urr_id);
                    self.dirty = true;
                }
            }
            Event::EndMarker { seid, far_id, old } => self.end_markers.push((seid, far_id, old)),
            Event::ReportTimedOut { seid, seq } => {
                tracing::warn!(seid, seq, "Session Report Request unanswered")
            }
            Event::PathFailed { peer } => {
                tracing::warn!(%peer, "GTP-U path failed: no Echo Response; Node Report sent")
            }
            Event::PathRecovered { peer } => {
                tracing::info!(%peer, "GTP-U path recovered; Node Report sent")
            }
            Event::AssociationUp { peer, .. } => tracing::info!(%peer, "PFCP association up"),
            Event::AssociationDown { peer, reason } => {
                tracing::warn!(%peer, ?reason, "PFCP association down")
            }
        }
    }

    /// Publish the burst's rules, then send its End Markers and responses, then share the
    /// status.
    /// Publish the burst's rules and queue its output behind them; send what the workers
    /// have caught up with; share the status.
    fn finish_burst(&mut self) {
        let mut published = false;
        if self.dirty {
            self.dirty = false;
            self.counts.publishes += 1;
            let t0 = Instant::now();
            self.last_generation = self.rules.publish();
            self.build
                .push(t0.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
            published = true;
        }
        if published || !self.pending.is_empty() || !self.end_markers.is_empty() {
            // Output keeps its order: a burst with nothing to publish still waits for the
            // bursts before it.
            self.inflight.push_back(Inflight {
                generation: self.last_generation,
                published,
                end_markers: std::mem::take(&mut self.end_markers),
                responses: std::mem::take(&mut self.pending),
            });
        }
        self.release_seen();
        self.share_status();
    }

    /// Send the output of every leading burst whose snapshot every worker has seen.
    fn release_seen(&mut self) {
        while let Some(f) = self.inflight.front() {
            let latency = if f.generation == 0 {
                Duration::ZERO
            } else {
                match self.rules.seen(f.generation) {
                    Some(l) => l,
                    None => break,
                }
            };
            let f = self.inflight.pop_front().expect("front exists");
            self.waiting_since = None;
            if f.published {
                self.latency
                    .push(latency.as_micros().min(u128::from(u32::MAX)) as u32);
            }
            for (seid, far_id, old) in f.end_markers {
                let sent = self
                    .gtpu_sink
                    .as_mut()
                    .is_some_and(|s| s.end_marker(seid, far_id, &old));
                if sent {
                    self.counts.end_markers_sent += 1;
                } else {
                    self.counts.end_markers_failed += 1;
                }
            }
            // One `sendmmsg` per run of responses on the same socket (in order).
            let mut at = 0;
            while at < f.responses.len() {
                let s = f.responses[at].0;
                let run = f.responses[at..].iter().take_while(|r| r.0 == s).count();
                let mut errors = 0;
                let msgs = f.responses[at..at + run]
                    .iter()
                    .map(|(_, to, b)| (*to, b.as_slice()));
                let sent = mmsg::send_all(&self.sockets[s], msgs, |to, e| {
                    errors += 1;
                    tracing::debug!(%e, %to, "pfcp send");
                });
                self.counts.datagrams_out += sent;
                self.counts.send_errors += errors;
                at += run;
            }
        }
    }

    fn share_status(&mut self) {
        if let Ok(mut st) = self.status.lock() {
            if st.counts == self.counts
                && self.latency.is_empty()
                && self.build.is_empty()
                && st.pfcp.reports_sent == self.node.stats().reports_sent
            {
                return;
            }
            st.counts = self.counts;
            st.pfcp.clone_from(self.node.stats());
            st.sessions = self.node.session_count();
            st.associations = self.node.associations().count();
            for l in self.latency.drain(..) {
                if st.publish_latency_us.len() == LATENCY_SAMPLES {
                    st.publish_latency_us.pop_front();
                }
                st.publish_latency_us.push_back(l);
            }
            for b in self.build.drain(..) {
                if st.publish_build_us.len() == LATENCY_SAMPLES {
                    st.publish_build_us.pop_front();
                }
                st.publish_build_us.push_back(b);
            }
        }
    }
}

#[cfg(test)]
mod tests;
