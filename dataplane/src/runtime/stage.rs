//! Named stages and the pipeline that runs them over a batch.

use super::batch::Batch;
use super::reason::Reasons;
use super::tap::Tap;
use crate::buffer::PacketBuf;
use crate::io::PortId;
use std::cell::Cell;
use std::time::Instant;

/// What a stage may see besides the batch. Time is passed in, never read by stages from the
/// system, so stages are deterministic under test (`Context::fixed`).
#[derive(Debug, Clone)]
pub struct Context {
    /// Index of the worker running this batch.
    pub worker: usize,
    source: TimeSource,
    cached: Cell<Option<u64>>,
}

#[derive(Debug, Clone, Copy)]
enum TimeSource {
    Fixed(u64),
    Since(Instant),
}

impl Context {
    /// A context whose clock reads `now_ns` (tests, replays with recorded time).
    pub fn fixed(now_ns: u64, worker: usize) -> Context {
        Context {
            worker,
            source: TimeSource::Fixed(now_ns),
            cached: Cell::new(None),
        }
    }

    /// A context on the worker clock: nanoseconds since `epoch`, read at most once per batch
    /// and only if some stage asks (a clock read is a large part of a forwarding budget of a
    /// few cycles per packet).
    pub fn live(epoch: Instant, worker: usize) -> Context {
        Context {
            worker,
            source: TimeSource::Since(epoch),
            cached: Cell::new(None),
        }
    }

    /// The batch's time in nanoseconds; the same value for every call within one batch.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        if let Some(t) = self.cached.get() {
            return t;
        }
        let t = match self.source {
            TimeSource::Fixed(t) => t,
            TimeSource::Since(e) => e.elapsed().as_nanos() as u64,
        };
        self.cached.set(Some(t));
        t
    }

    /// Set this batch's time (a replay on its recorded clock).
    #[inline]
    pub fn set_now(&mut self, now_ns: u64) {
        self.cached.set(Some(now_ns));
    }

    /// Start a new batch: the next `now_ns` reads the clock again.
    #[inline]
    pub fn next_batch(&mut self) {
        self.cached.set(None);
    }
}

/// One processing step applied to a whole batch (BESS/VPP style).
///
/// A stage looks only at packets whose disposition is still
/// [`Disposition::CONTINUE`](super::batch::Disposition::CONTINUE) and either leaves them so,
/// or decides their fate. It must not allocate, lock or make
/// syscalls.
pub trait Stage<B: PacketBuf>: Send {
    /// Short snake_case name, shown in `peregrine` output and logs.
    fn name(&self) -> &'static str;
    fn process(&mut self, batch: &mut Batch<B>, cx: &Context);

    /// Called now and then while the worker has no traffic. A stage that reads snapshots
    /// refreshes its readers here (`Reader::get`): that is its RCU quiescent state, so a
    /// publisher waiting for every worker to see a new table does not wait for the next
    /// packet. Must not allocate or block.
    fn idle(&mut self) {}

    /// Empty buffers this stage may take from a batch (`Batch::take_spare`) to turn one
    /// packet into several; the worker keeps that many ready (the pipeline's largest ask).
    fn spare_buffers(&self) -> usize {
        0
    }
}

/// The ordered stages of one worker, and its post-dequeue taps per egress port.
pub struct Pipeline<B> {
    stages: Vec<Box<dyn Stage<B>>>,
    /// Indexed by port; ports beyond the end have no tap.
    taps: Vec<Vec<Box<dyn Tap<B>>>>,
}

impl<B> std::fmt::Debug for Pipeline<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("stages", &self.stages.len())
            .field("taps", &self.taps.iter().map(Vec::len).sum::<usize>())
            .finish()
    }
}

impl<B: PacketBuf> Pipeline<B> {
    pub fn new(stages: Vec<Box<dyn Stage<B>>>) -> Self {
        Pipeline {
            stages,
            taps: Vec::new(),
        }
    }

    /// Add a post-dequeue tap on `port`; several taps on one port run in the order added.
    pub fn with_tap(mut self, port: PortId, tap: Box<dyn Tap<B>>) -> Self {
        let i = usize::from(port);
        if self.taps.len() <= i {
            self.taps.resize_with(i + 1, Vec::new);
        }
        self.taps[i].push(tap);
        self
    }

    pub fn stage_names(&self) -> Vec<&'static str> {
        self.stages.iter().map(|s| s.name()).collect()
    }

    /// `(port, tap name)` of every tap, by port then in running order.
    pub fn tap_names(&self) -> Vec<(PortId, &'static str)> {
        self.taps
            .iter()
            .enumerate()
            .flat_map(|(p, ts)| ts.iter().map(move |t| (p as PortId, t.name())))
            .collect()
    }

    /// Let every stage and tap refresh its snapshots while there is no traffic.
    #[cold]
    pub fn idle(&mut self) {
        for s in self.stages.iter_mut() {
            s.idle();
        }
        for t in self.taps.iter_mut().flatten() {
            t.idle();
        }
    }

    /// Every tap can take the next burst (`Tap::ready`; asked on recorded clocks only).
    #[inline]
    pub fn taps_ready(&self) -> bool {
        self.taps.iter().flatten().all(|t| t.ready())
    }

    /// The worker reached its end: every tap hands over what it holds (`Tap::end`); false
    /// while one still holds something.
    #[cold]
    pub fn end(&mut self) -> bool {
        let mut done = true;
        for t in self.taps.iter_mut().flatten() {
            done &= t.end();
        }
        done
    }

    /// Hand a burst about to be sent on `port` to that port's taps, in order.
    #[inline]
    pub fn run_taps(&mut self, port: PortId, pkts: &mut [B], cx: &Context) {
        if let Some(ts) = self.taps.get_mut(usize::from(port)) {
            for t in ts.iter_mut() {
                t.on_burst(port, pkts, cx);
            }
        }
    }

    /// Run every stage. A packet still `Continue` at the end is counted by the worker's
    /// dispatch as `no_disposition`, so nothing disappears uncounted.
    #[inline]
    pub fn run(&mut self, batch: &mut Batch<B>, cx: &Context) {
        for s in self.stages.iter_mut() {
            s.process(batch, cx);
        }
    }

    /// Run the stages from index `first` on (a batch handed over by another worker, see
    /// `Disposition::handoff`); nothing if `first` is past the end.
    #[inline]
    pub fn run_from(&mut self, first: usize, batch: &mut Batch<B>, cx: &Context) {
        for s in self.stages.iter_mut().skip(first) {
            s.process(batch, cx);
        }
    }

    /// The most spare buffers any stage asks for (`Stage::spare_buffers`).
    pub fn spare_buffers(&self) -> usize {
        self.stages
            .iter()
            .map(|s| s.spare_buffers())
            .max()
            .unwrap_or(0)
    }

    /// Number of stages.
    pub fn len(&self) -> usize {
        self.stages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }
}

/// Builds the identical pipeline for each worker. Reason ids come from one shared registry,
/// so every worker's counters line up.
pub trait PipelineFactory<B: PacketBuf> {
    fn build(&self, worker: usize, reasons: &mut Reasons) -> Pipeline<B>;
}

impl<B: PacketBuf, F> PipelineFactory<B> for F
where
    F: Fn(usize, &mut Reasons) -> Pipeline<B>,
{
    fn build(&self, worker: usize, reasons: &mut Reasons) -> Pipeline<B> {
        self(worker, reasons)
    }
}
