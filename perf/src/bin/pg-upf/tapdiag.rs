//! Diagnostic taps for `--stage DIR+tapnull,...` and `--stage DIR+cms,...`: the parts of the
//! Kestrel tap's cost in the place the tap runs (perf/results/kestrel.md, round 15).
//!
//! Both build each burst's samples as `KestrelTap::on_burst` does (`Sample::of_packet`: the
//! same per-packet metadata reads, direction byte, dequeue time and inner IP length, into a
//! chunk buffer behind the same window-edge test), then:
//!
//! - `tapnull`: nothing more (the samples go through `black_box`): the dispatch and the key
//!   and timestamp extraction, with no sketch;
//! - `cms`: a plain 3-row Count-Min update (one u32 per bucket, the paper's layout and
//!   hash), in two passes with the rows of each packet prefetched in the first, as the
//!   criterion bench's `plain_cms_3x512_burst` does: what a plain sketch would cost there.
//!
//! Each is called through an out-of-line function of its own, so an instruction profile can
//! collect on it (`--toggle-collect='pg_upf::tapdiag::diag_burst'`).

use peregrine_dataplane::buffer::OwnedBuf;
use peregrine_dataplane::runtime::Context;
use peregrine_dataplane::telemetry::kestrel::layout::{Layout, MAX_ROWS};
use peregrine_dataplane::telemetry::kestrel::{prefetch, Sample, CHUNK};
use std::hint::black_box;

/// What a diagnostic tap does after building the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Diag {
    /// Nothing: dispatch and sample building alone.
    Null,
    /// A plain 3-row Count-Min update.
    Cms,
}

impl Diag {
    /// The diagnostic named by a `--stage` direction suffix, if any.
    pub fn from_case(case: &str) -> Option<Diag> {
        let d = case.split(',').next()?;
        if d.ends_with("+tapnull") {
            Some(Diag::Null)
        } else if d.ends_with("+cms") {
            Some(Diag::Cms)
        } else {
            None
        }
    }
}

/// A diagnostic tap (see the module doc).
#[derive(Debug)]
pub struct DiagTap {
    diag: Diag,
    layout: Layout,
    counts: Vec<u32>,
    next_edge_ns: u64,
    idle_calls: u32,
    buf: [Sample; CHUNK],
}

impl DiagTap {
    pub fn new(diag: Diag) -> DiagTap {
        let layout = Layout::paper();
        DiagTap {
            diag,
            counts: vec![0; layout.bank_len()],
            layout,
            next_edge_ns: 1_000_000_000,
            idle_calls: 0,
            buf: [Sample::EMPTY; CHUNK],
        }
    }

    /// The packets the plain sketch counted (each row counts every packet once).
    pub fn counted(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum::<u64>() / 3
    }

    #[inline(always)]
    fn on_burst(&mut self, pkts: &[OwnedBuf], cx: &Context) {
        let now = cx.now_ns();
        if now >= self.next_edge_ns {
            self.next_edge_ns = (now / 1_000_000_000 + 1) * 1_000_000_000;
        }
        self.idle_calls = 0;
        for chunk in pkts.chunks(CHUNK) {
            for (p, s) in chunk.iter().zip(&mut self.buf) {
                *s = Sample::of_packet(p, now);
            }
            let n = chunk.len();
            match self.diag {
                Diag::Null => {
                    black_box(&self.buf[..n]);
                }
                Diag::Cms => self.cms(n),
            }
        }
    }

    /// The plain Count-Min update of the first `n` samples: indices and prefetches, then the
    /// increments.
    #[inline(always)]
    fn cms(&mut self, n: usize) {
        let w = self.layout.width;
        let qids = self.layout.qids;
        let mut at = [[usize::MAX; 3]; CHUNK];
        for (s, a) in self.buf[..n].iter().zip(&mut at) {
            if s.dir < 2 && s.qid < qids {
                let mut cols = [0usize; MAX_ROWS];
                self.layout.columns(s.qid, s.teid, s.qfi, &mut cols);
                let base = self.layout.sketch_base(s.dir, s.qid);
                for r in 0..3 {
                    a[r] = base + r * w + cols[r];
                    prefetch(&self.counts[a[r]]);
                }
            }
        }
        for a in &at[..n] {
            if a[0] != usize::MAX {
                for &i in a {
                    self.counts[i] += 1;
                }
            }
        }
    }
}

/// A diagnostic tap's burst, out of line so an instruction profile can name it.
#[inline(never)]
pub fn diag_burst(tap: &mut DiagTap, bufs: &[OwnedBuf], cx: &Context) {
    tap.on_burst(bufs, cx);
}
