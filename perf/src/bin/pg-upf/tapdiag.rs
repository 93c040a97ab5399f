//! Diagnostic taps for `--stage DIR+tapnull,...` and `--stage DIR+cms,...`: the parts of the
//! Kestrel tap's cost in the place the tap runs (perf/results/kestrel.md, round 15).
//!
//! Both build each burst's samples as `KestrelTap::on_burst` does (`Sample::of_packet`: the
//! same per-packet metadata reads, direction byte, dequeue time and inner IP length, into a
//! chunk buffer behind the same window-edge test), then:
//!
//! - `tapnull`: nothing more (the samples go through `black_box`): the dispatch and the key
//!   and timestamp extraction, with no sketch;
//! - `cms`: a plain 3-row Count-Min update (`peregrine_perf::plain_cms::PlainCms`, the
//!   criterion bench's, by bursts: `update_burst`, the rows of each packet prefetched in a
//!   first pass): what a plain sketch would cost there.
//!
//! Each is called through an out-of-line function of its own, so an instruction profile can
//! collect on it (`--toggle-collect='pg_upf::tapdiag::diag_burst'`).

use peregrine_dataplane::buffer::OwnedBuf;
use peregrine_dataplane::runtime::Context;
use peregrine_dataplane::telemetry::kestrel::layout::Layout;
use peregrine_dataplane::telemetry::kestrel::{Sample, CHUNK};
use peregrine_perf::plain_cms::PlainCms;
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
    cms: PlainCms,
    next_edge_ns: u64,
    buf: [Sample; CHUNK],
}

impl DiagTap {
    pub fn new(diag: Diag) -> DiagTap {
        DiagTap {
            diag,
            cms: PlainCms::new(&Layout::paper()),
            next_edge_ns: 1_000_000_000,
            buf: [Sample::EMPTY; CHUNK],
        }
    }

    /// Which diagnostic this is.
    pub fn diag(&self) -> Diag {
        self.diag
    }

    /// The packets the plain sketch counted (0 for `tapnull`).
    pub fn counted(&self) -> u64 {
        self.cms.counted()
    }

    #[inline(always)]
    fn on_burst(&mut self, pkts: &[OwnedBuf], cx: &Context) {
        let now = cx.now_ns();
        if now >= self.next_edge_ns {
            self.next_edge_ns = (now / 1_000_000_000 + 1) * 1_000_000_000;
        }
        for chunk in pkts.chunks(CHUNK) {
            for (p, s) in chunk.iter().zip(&mut self.buf) {
                *s = Sample::of_packet(p, now);
            }
            let samples = &self.buf[..chunk.len()];
            match self.diag {
                Diag::Null => {
                    black_box(samples);
                }
                Diag::Cms => self.cms.update_burst(samples),
            }
        }
    }
}

/// A diagnostic tap's burst, out of line so an instruction profile can name it.
#[inline(never)]
pub fn diag_burst(tap: &mut DiagTap, bufs: &[OwnedBuf], cx: &Context) {
    tap.on_burst(bufs, cx);
}
