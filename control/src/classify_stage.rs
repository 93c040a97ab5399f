//! The shared classifier as the daemon places it: the dataplane's `Classify` stage, with
//! its counters copied into a per-worker slot (every 64 batches, when idle, and when the
//! worker drops it) for the metrics page.

use crate::metrics::{Exposition, Kind};
use peregrine_dataplane::classify::Classify;
use peregrine_dataplane::runtime::{Batch, Context, Stage};
use peregrine_dataplane::PacketBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One worker's classifier counters: (classified, unclassified).
#[derive(Debug, Default)]
struct Slot([AtomicU64; 2]);

/// Every worker's slot, registered when pipelines are built.
#[derive(Debug, Default)]
pub(crate) struct ClassifyCounters {
    slots: Mutex<Vec<Arc<Slot>>>,
}

impl ClassifyCounters {
    /// A classifier stage for one worker.
    pub(crate) fn stage(&self) -> CountedClassify {
        let slot = Arc::new(Slot::default());
        match self.slots.lock() {
            Ok(mut s) => s.push(slot.clone()),
            Err(p) => p.into_inner().push(slot.clone()),
        }
        CountedClassify {
            inner: Classify::new(),
            slot,
            batches: 0,
        }
    }

    /// `peregrine_classify_packets_total{result}`, when a classifier runs.
    pub(crate) fn write_metrics(&self, e: &mut Exposition) {
        let slots = match self.slots.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        if slots.is_empty() {
            return;
        }
        let mut t = [0u64; 2];
        for s in slots.iter() {
            for (o, v) in t.iter_mut().zip(&s.0) {
                *o += v.load(Ordering::Relaxed);
            }
        }
        let name = "peregrine_classify_packets_total";
        e.family(
            name,
            Kind::Counter,
            "Packets the shared classifier saw: classified, or left for the stages after it to judge.",
        );
        e.sample(name, &[("result", "classified")], t[0] as f64);
        e.sample(name, &[("result", "unclassified")], t[1] as f64);
    }
}

/// The dataplane's classifier with its counters published.
pub(crate) struct CountedClassify {
    inner: Classify,
    slot: Arc<Slot>,
    batches: u32,
}

impl CountedClassify {
    fn publish(&self) {
        let s = self.inner.stats();
        self.slot.0[0].store(s.classified, Ordering::Relaxed);
        self.slot.0[1].store(s.unclassified, Ordering::Relaxed);
    }
}

impl Drop for CountedClassify {
    fn drop(&mut self) {
        self.publish();
    }
}

impl<B: PacketBuf> Stage<B> for CountedClassify {
    fn name(&self) -> &'static str {
        Stage::<B>::name(&self.inner)
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        self.inner.process(batch, cx);
        self.batches = self.batches.wrapping_add(1);
        if self.batches.is_multiple_of(64) {
            self.publish();
        }
    }

    fn idle(&mut self) {
        Stage::<B>::idle(&mut self.inner);
        self.publish();
    }
}
