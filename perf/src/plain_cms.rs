//! The plain Count-Min sketch Kestrel's update is measured against (Kestrel's update <= 2x a
//! plain 3-row Count-Min update): one `u32` counter per bucket, with the layout and hash of
//! Kestrel's sketches (`Layout::columns`, `Layout::sketch_base`). The criterion bench
//! (`perf/benches/kestrel.rs`) and `pg-upf --stage DIR+cms` both use it.

use peregrine_dataplane::telemetry::kestrel::layout::{Layout, DIRS, MAX_ROWS};
use peregrine_dataplane::telemetry::kestrel::{prefetch, Sample, CHUNK};

/// Rows of the sketch (the paper's layout has three); a constant in the burst update, as in
/// the tap's kernel.
const BURST_ROWS: usize = 3;

/// A plain Count-Min sketch per (direction, QID): rows x width `u32` counters.
#[derive(Debug, Clone)]
pub struct PlainCms {
    layout: Layout,
    counts: Vec<u32>,
}

impl PlainCms {
    /// An empty sketch bank of `layout`, which has at least three rows (the burst update
    /// writes three: a constant, as in the tap's kernel).
    pub fn new(layout: &Layout) -> PlainCms {
        assert!(
            layout.rows >= BURST_ROWS,
            "a plain CMS of {} rows",
            layout.rows
        );
        PlainCms {
            counts: vec![0; layout.bank_len()],
            layout: layout.clone(),
        }
    }

    /// One packet into every row of its queue's sketch.
    #[inline]
    pub fn update(&mut self, s: &Sample) {
        let mut cols = [0usize; MAX_ROWS];
        self.layout.columns(s.qid, s.teid, s.qfi, &mut cols);
        let base = self.layout.sketch_base(s.dir, s.qid);
        let w = self.layout.width;
        for (r, &c) in cols.iter().enumerate().take(self.layout.rows) {
            self.counts[base + r * w + c] += 1;
        }
    }

    /// A burst (at most [`CHUNK`] packets) as the Kestrel tap does it: every packet's
    /// indices and a prefetch of its counters first, then the increments (three rows). A
    /// packet of no known direction or queue is skipped, as the tap skips it.
    #[inline]
    pub fn update_burst(&mut self, burst: &[Sample]) {
        let w = self.layout.width;
        let mut at = [[usize::MAX; BURST_ROWS]; CHUNK];
        for (s, a) in burst.iter().zip(&mut at) {
            if s.dir >= DIRS || s.qid >= self.layout.qids {
                continue;
            }
            let mut cols = [0usize; MAX_ROWS];
            self.layout.columns(s.qid, s.teid, s.qfi, &mut cols);
            let base = self.layout.sketch_base(s.dir, s.qid);
            for r in 0..BURST_ROWS {
                a[r] = base + r * w + cols[r];
                prefetch(&self.counts[a[r]]);
            }
        }
        for a in at.iter().take(burst.len()) {
            if a[0] != usize::MAX {
                for &i in a {
                    self.counts[i] += 1;
                }
            }
        }
    }

    /// The packets counted (each row counts every packet once).
    pub fn counted(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum::<u64>() / BURST_ROWS as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both updates count every packet of a known direction and queue once per row, and the
    /// burst skips a packet of no direction.
    #[test]
    fn updates_count_each_packet_once_per_row() {
        let l = Layout::paper();
        let s = |dir, qid, teid| Sample {
            dir,
            qid,
            teid,
            ..Sample::EMPTY
        };
        let mut one = PlainCms::new(&l);
        one.update(&s(0, 1, 7));
        one.update(&s(1, 2, 8));
        assert_eq!(one.counted(), 2);
        let mut burst = PlainCms::new(&l);
        burst.update_burst(&[s(0, 1, 7), s(usize::MAX, 0, 9), s(1, 2, 8)]);
        assert_eq!(burst.counted(), 2);
        assert_eq!(burst.counts, one.counts);
    }
}
