//! Named stages and the pipeline that runs them over a batch.

use super::batch::{Batch, Disposition};
use super::reason::Reasons;
use crate::buffer::PacketBuf;

/// What a stage may see besides the batch. Time is passed in, never read by stages, so
/// stages are deterministic under test.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    /// Nanoseconds on the worker clock, read once per batch.
    pub now_ns: u64,
    /// Index of the worker running this batch.
    pub worker: usize,
}

/// One processing step applied to a whole batch (BESS/VPP style).
///
/// A stage looks only at packets whose disposition is still [`Disposition::Continue`] and
/// either leaves them so, or decides their fate. It must not allocate, lock or make
/// syscalls.
pub trait Stage<B: PacketBuf>: Send {
    /// Short snake_case name, shown in `peregrine` output and logs.
    fn name(&self) -> &'static str;
    fn process(&mut self, batch: &mut Batch<B>, cx: &Context);
}

/// The ordered stages of one worker.
pub struct Pipeline<B> {
    stages: Vec<Box<dyn Stage<B>>>,
}

impl<B> std::fmt::Debug for Pipeline<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("stages", &self.stages.len())
            .finish()
    }
}

impl<B: PacketBuf> Pipeline<B> {
    pub fn new(stages: Vec<Box<dyn Stage<B>>>) -> Self {
        Pipeline { stages }
    }

    pub fn stage_names(&self) -> Vec<&'static str> {
        self.stages.iter().map(|s| s.name()).collect()
    }

    /// Run every stage; a packet still `Continue` at the end is dropped as
    /// `no_disposition` so nothing disappears uncounted.
    #[inline]
    pub fn run(&mut self, batch: &mut Batch<B>, cx: &Context) {
        for s in self.stages.iter_mut() {
            s.process(batch, cx);
        }
        batch.set_active(Disposition::Drop(Reasons::NO_DISPOSITION));
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
