//! The DTA reporter (`[dta]`): our telemetry as DTA reports toward a collector's translator.
//!
//! - Per-flow last sojourn: a post-dequeue tap on every egress port reads each packet's
//!   `PacketMeta` (classifier flow hash, sojourn stamped by the egress scheduler) and pushes
//!   `(flow_hash, sojourn_ns)` into a per-worker lock-free ring (no allocation, no lock; a
//!   full ring is counted). The control loop's tick turns them into Key-Writes keyed by the
//!   flow hash.
//! - Drop events and counters: each tick, for every drop reason whose count grew, an Append
//!   of `reason_id << 24 | min(delta, 2^24 - 1)` to list `drops_list`, and a Key-Increment
//!   of the delta keyed by the reason id.
//! - Other features' telemetry (`[dta.int]`: INT sink per-hop values as Postcarding,
//!   `[dta.kestrel]`: Kestrel's per-(TEID, QFI) window counts as Key-Increment,
//!   `[dta.fridge]`: fridge delay samples as Append): records of the daemon's telemetry bus
//!   (`crate::telemetry`, a platform hook, not a dependency: nothing here names those
//!   features' types), turned into primitives by [`super::feeds`].
//!
//! Reports leave through `port` (a worker's tx queue, via the injector), to the collector's
//! MAC / IPv4 on UDP 40040, under a token-bucket rate limit; every report not sent is
//! counted by why.

use crate::error::{invalid, ConfigError};
use crate::feature::{Build, Configure, Feature, FeatureReport, Taps};
use crate::metrics::{Exposition, Kind};
use crate::platform::{PipelineConfig, Platform};
use peregrine_dataplane::io::PortId;
use peregrine_dataplane::runtime::{Context, Running, Tap};
use peregrine_dataplane::PacketBuf;
use peregrine_dta::RateLimiter;
use peregrine_wire::dta::{self, FrameAddrs, Primitive, Repr, Variant};
use peregrine_wire::ethernet::Address as MacAddr;
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::feeds::{FeedCounts, Feeds, FridgeFeed, IntFeed, KestrelFeed};
use super::VariantConfig;
use crate::telemetry::{Kind as TelemetryKind, Telemetry};

/// Records a tap's ring holds between two ticks.
const RING: usize = 8192;

/// `[dta]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReporterSection {
    /// The port reports leave through.
    pub port: String,
    pub collector_ip: Ipv4Addr,
    pub collector_mac: String,
    /// Our source address in reports.
    pub source_ip: Ipv4Addr,
    #[serde(default = "default_sport")]
    pub source_port: u16,
    #[serde(default)]
    pub variant: VariantConfig,
    /// Reports per second (all sources of this daemon together).
    #[serde(default = "default_rate")]
    pub rate: f64,
    #[serde(default = "default_burst")]
    pub burst: f64,
    /// Key-Write the per-flow last sojourn (post-dequeue tap).
    #[serde(default = "yes")]
    pub sojourn: bool,
    /// Key-Write redundancy of the sojourn records.
    #[serde(default = "default_n")]
    pub sojourn_redundancy: u8,
    /// Report one packet in this many per flow record stream (1: every packet).
    #[serde(default = "one")]
    pub sojourn_sample: u32,
    /// Append drop events to this list, and Key-Increment drop counters.
    #[serde(default)]
    pub drops: bool,
    #[serde(default)]
    pub drops_list: u32,
    #[serde(default = "default_n")]
    pub drops_redundancy: u8,
    /// `[dta.int]`: the INT sink's per-hop values as Postcarding.
    #[serde(default)]
    pub int: Option<IntFeed>,
    /// `[dta.kestrel]`: Kestrel's per-(TEID, QFI) window counts as Key-Increment.
    #[serde(default)]
    pub kestrel: Option<KestrelFeed>,
    /// `[dta.fridge]`: fridge delay samples as Append.
    #[serde(default)]
    pub fridge: Option<FridgeFeed>,
}

fn default_sport() -> u16 {
    40041
}
fn default_rate() -> f64 {
    100_000.0
}
fn default_burst() -> f64 {
    1000.0
}
fn yes() -> bool {
    true
}
fn default_n() -> u8 {
    2
}
fn one() -> u32 {
    1
}

/// What the reporter did, in the run summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DtaReporterStats {
    pub sent: u64,
    pub key_write: u64,
    pub key_increment: u64,
    pub append: u64,
    pub postcard: u64,
    /// Records the taps could not queue (ring full between ticks).
    pub ring_full: u64,
    pub rate_limited: u64,
    /// The worker's injection queue was full.
    pub inject_failed: u64,
    /// Records of the other features' feeds turned into reports: INT paths (and INT
    /// reports skipped: a hop without the value, or one too wide), Kestrel key records,
    /// fridge samples.
    #[serde(default)]
    pub int_paths: u64,
    #[serde(default)]
    pub int_skipped: u64,
    #[serde(default)]
    pub kestrel_records: u64,
    #[serde(default)]
    pub fridge_samples: u64,
}

#[derive(Debug, Default)]
struct TapCounters {
    ring_full: AtomicU64,
}

/// The per-port, per-worker tap.
struct SojournTap {
    ring: rtrb::Producer<(u32, u32)>,
    sample: u32,
    seen: u32,
    counters: Arc<TapCounters>,
}

impl std::fmt::Debug for SojournTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SojournTap").finish()
    }
}

impl<B: PacketBuf> Tap<B> for SojournTap {
    fn name(&self) -> &'static str {
        "dta_sojourn"
    }

    fn on_burst(&mut self, _port: PortId, pkts: &mut [B], _cx: &Context) {
        for p in pkts.iter() {
            let m = p.pkt_meta();
            if m.flow_hash == 0 {
                continue;
            }
            self.seen = self.seen.wrapping_add(1);
            if !self.seen.is_multiple_of(self.sample) {
                continue;
            }
            if self.ring.push((m.flow_hash, m.sojourn_ns)).is_err() {
                self.counters.ring_full.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A tap's ring of `(flow hash, sojourn ns)` and the worker that owns the tap.
type TapRing = (usize, rtrb::Consumer<(u32, u32)>);

/// The reporter feature.
#[derive(Debug)]
pub struct DtaReporterFeature {
    s: ReporterSection,
    port: PortId,
    addrs: FrameAddrs,
    /// Consumers of the taps' rings, with the worker that owns each (filled while the
    /// pipelines are built, drained by the control loop).
    rings: Mutex<Vec<TapRing>>,
    tap_counters: Arc<TapCounters>,
    limiter: RateLimiter,
    epoch: Instant,
    last_drops: Vec<u64>,
    pending: Vec<Primitive>,
    seq: u8,
    stats: DtaReporterStats,
    feeds: Feeds,
    feed_counts: FeedCounts,
}

impl Configure for DtaReporterFeature {
    const SECTION: &'static str = "dta";

    fn configure(section: Option<&toml::Value>, p: &Platform) -> Result<Option<Self>, ConfigError> {
        let Some(v) = section else { return Ok(None) };
        if matches!(p.pipeline, PipelineConfig::DtaTranslator {}) {
            return Err(invalid(
                "dta",
                "the reporter does not run in the dta-translator pipeline",
            ));
        }
        let s: ReporterSection = v
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| crate::error::section_error("dta", &e))?;
        let port = p
            .port_index(&s.port)
            .ok_or_else(|| invalid("dta.port", format!("no port named `{}`", s.port)))?;
        let collector_mac = MacAddr::parse(&s.collector_mac).ok_or_else(|| {
            invalid(
                "dta.collector_mac",
                format!("not a MAC address: {}", s.collector_mac),
            )
        })?;
        if !(s.rate > 0.0 && s.rate.is_finite() && s.burst >= 1.0 && s.burst.is_finite()) {
            return Err(invalid("dta.rate", "rate must be > 0 and burst >= 1"));
        }
        for (k, n) in [
            ("dta.sojourn_redundancy", s.sojourn_redundancy),
            ("dta.drops_redundancy", s.drops_redundancy),
        ] {
            if n == 0 {
                return Err(invalid(k, "must be at least 1"));
            }
        }
        if s.sojourn_sample == 0 {
            return Err(invalid("dta.sojourn_sample", "must be at least 1"));
        }
        if let Some(f) = &s.int {
            f.check().map_err(|e| invalid("dta.int.value_bits", e))?;
        }
        if s.kestrel.as_ref().is_some_and(|k| k.redundancy == 0) {
            return Err(invalid("dta.kestrel.redundancy", "must be at least 1"));
        }
        let addrs = FrameAddrs {
            eth_src: p.port_mac(port as usize),
            eth_dst: collector_mac,
            ip_src: s.source_ip,
            ip_dst: s.collector_ip,
            src_port: s.source_port,
            dst_port: dta::UDP_PORT,
        };
        let feeds = Feeds {
            int: s.int.clone(),
            kestrel: s.kestrel.clone(),
            fridge: s.fridge.clone(),
        };
        Ok(Some(DtaReporterFeature {
            feeds,
            feed_counts: FeedCounts::default(),
            limiter: RateLimiter::new(s.rate, s.burst, 1),
            port,
            addrs,
            s,
            rings: Mutex::new(Vec::new()),
            tap_counters: Arc::new(TapCounters::default()),
            epoch: Instant::now(),
            last_drops: Vec::new(),
            pending: Vec::new(),
            seq: 0,
            stats: DtaReporterStats::default(),
        }))
    }
}

impl DtaReporterFeature {
    /// Queue a primitive (the feeds'); sent at the next tick under the same rate limit.
    pub fn submit(&mut self, p: Primitive) {
        if self.pending.len() < RING {
            self.pending.push(p);
        } else {
            self.stats.ring_full += 1;
        }
    }

    fn send(&mut self, running: &Running, worker: usize, p: Primitive) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        if !self.limiter.allow(0, now) {
            self.stats.rate_limited += 1;
            return;
        }
        let variant: Variant = self.s.variant.into();
        let r = Repr {
            seqnum: self.seq,
            ..Repr::new(variant, p)
        };
        let mut buf = [0u8; 96];
        let Ok(n) = r.emit(&mut buf[dta::FRAME_OVERHEAD..]) else {
            return;
        };
        let Ok(len) = dta::emit_frame(&mut buf, &self.addrs, n) else {
            return;
        };
        match running.injector().inject(worker, self.port, &buf[..len]) {
            Ok(()) => {
                self.seq = self.seq.wrapping_add(1);
                self.stats.sent += 1;
                match p {
                    Primitive::KeyWrite { .. } => self.stats.key_write += 1,
                    Primitive::KeyIncrement { .. } => self.stats.key_increment += 1,
                    Primitive::Append { .. } => self.stats.append += 1,
                    Primitive::Postcard { .. } => self.stats.postcard += 1,
                }
            }
            Err(_) => self.stats.inject_failed += 1,
        }
    }

    fn pump(&mut self, running: &Running) {
        // Sojourn records, ring by ring (each on its own worker's injection queue).
        let mut recs: Vec<(usize, u32, u32)> = Vec::new();
        if let Ok(mut rings) = self.rings.lock() {
            for (w, r) in rings.iter_mut() {
                while let Ok((h, soj)) = r.pop() {
                    recs.push((*w, h, soj));
                }
            }
        }
        let n = self.s.sojourn_redundancy;
        for (w, h, soj) in recs {
            if let Ok(p) = Primitive::key_write(n, h, &[soj]) {
                self.send(running, w, p);
            }
        }
        if self.s.drops {
            let drops = running.counters().drops;
            if self.last_drops.len() != drops.len() {
                self.last_drops.resize(drops.len(), 0);
            }
            for (id, (&now, last)) in drops.iter().zip(self.last_drops.iter_mut()).enumerate() {
                let delta = now.saturating_sub(*last);
                *last = now;
                if delta == 0 {
                    continue;
                }
                let ev = Primitive::Append {
                    list: self.s.drops_list,
                    data: (id as u32) << 24 | delta.min((1 << 24) - 1) as u32,
                };
                let ki = Primitive::KeyIncrement {
                    redundancy: self.s.drops_redundancy,
                    key: id as u32,
                    counter: delta,
                };
                self.pending.push(ev);
                self.pending.push(ki);
            }
        }
        for p in std::mem::take(&mut self.pending) {
            self.send(running, 0, p);
        }
    }
}

impl<B: PacketBuf> Feature<B> for DtaReporterFeature {
    fn name(&self) -> &'static str {
        Self::SECTION
    }

    fn reads_packet_meta(&self) -> bool {
        self.s.sojourn
    }

    fn taps(&self, _port: PortId, b: &mut Build<'_>, out: &mut Taps<B>) {
        if !self.s.sojourn {
            return;
        }
        let (prod, cons) = rtrb::RingBuffer::new(RING);
        if let Ok(mut rings) = self.rings.lock() {
            rings.push((b.worker, cons));
        }
        out.push(Box::new(SojournTap {
            ring: prod,
            sample: self.s.sojourn_sample,
            seen: 0,
            counters: self.tap_counters.clone(),
        }));
    }

    fn tick(&mut self, _now: Instant, running: &Running) {
        self.pump(running);
    }

    fn telemetry_wants(&self) -> Vec<(TelemetryKind, &'static str)> {
        let f = &self.feeds;
        [
            (f.int.is_some(), TelemetryKind::IntSink, "dta.int"),
            (
                f.kestrel.is_some(),
                TelemetryKind::KestrelKeys,
                "dta.kestrel",
            ),
            (
                f.fridge.is_some(),
                TelemetryKind::FridgeSamples,
                "dta.fridge",
            ),
        ]
        .into_iter()
        .filter(|x| x.0)
        .map(|x| (x.1, x.2))
        .collect()
    }

    /// Other features' records: queued as primitives, sent at the next tick.
    fn telemetry_in(&mut self, records: &[Telemetry]) {
        let mut c = self.feed_counts;
        let mut todo = Vec::new();
        for t in records {
            self.feeds.primitives(t, &mut c, |p| todo.push(p));
        }
        self.feed_counts = c;
        for p in todo {
            self.submit(p);
        }
    }

    fn metrics(&self, e: &mut Exposition) {
        let c = Kind::Counter;
        e.family(
            "peregrine_dta_reporter_sent_total",
            c,
            "DTA reports sent, by primitive.",
        );
        for (p, v) in [
            ("key_write", self.stats.key_write),
            ("key_increment", self.stats.key_increment),
            ("append", self.stats.append),
            ("postcard", self.stats.postcard),
        ] {
            e.sample(
                "peregrine_dta_reporter_sent_total",
                &[("primitive", p)],
                v as f64,
            );
        }
        e.family(
            "peregrine_dta_reporter_unsent_total",
            c,
            "DTA reports not sent, by why.",
        );
        for (w, v) in [
            (
                "ring_full",
                self.stats.ring_full + self.tap_counters.ring_full.load(Ordering::Relaxed),
            ),
            ("rate_limited", self.stats.rate_limited),
            ("inject_failed", self.stats.inject_failed),
        ] {
            e.sample(
                "peregrine_dta_reporter_unsent_total",
                &[("why", w)],
                v as f64,
            );
        }
    }

    fn finish(self: Box<Self>) -> FeatureReport {
        let mut s = self.stats.clone();
        s.ring_full += self.tap_counters.ring_full.load(Ordering::Relaxed);
        let c = self.feed_counts;
        (
            s.int_paths,
            s.int_skipped,
            s.kestrel_records,
            s.fridge_samples,
        ) = (
            c.int_paths,
            c.int_skipped,
            c.kestrel_records,
            c.fridge_samples,
        );
        let text = format!(
            "dta: {} reports sent ({} key-write, {} key-increment, {} append, {} postcard); {} rate-limited, {} ring full, {} inject failed; feeds: {} INT paths ({} skipped), {} Kestrel records, {} fridge samples\n",
            s.sent, s.key_write, s.key_increment, s.append, s.postcard, s.rate_limited, s.ring_full, s.inject_failed,
            s.int_paths, s.int_skipped, s.kestrel_records, s.fridge_samples
        );
        FeatureReport::new(Self::SECTION, &s, text)
    }
}
