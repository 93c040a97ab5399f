//! Raw `(delay, x, fridge)` samples for offline analysis (`[fridge] raw_file`): every
//! matched response each worker tallies goes into a bounded ring to the control thread
//! (`stage::RawSample`; a full ring drops it, counted `ring_full` by the worker), which
//! appends it as one CSV line to the file, up to `raw_max_samples` lines (then counted
//! `file_full`). The encoding is in `docs/fridge.md` ("Raw samples").

use crate::metrics::{Exposition, Kind as MKind};
use peregrine_dataplane::telemetry::fridge::stage::{RawConsumer, RawSample, WorkerPub};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The CSV header line (the first line of the file).
pub const RAW_HEADER: &str = "worker,slice,fridge,at_ns,delay_ns,x,weight";

/// Where raw samples go and how many at most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawConfig {
    pub path: PathBuf,
    /// Ring capacity per worker (samples).
    pub ring: usize,
    /// Lines written at most; later samples are counted `file_full`.
    pub max_samples: u64,
}

/// The control thread's sink.
#[derive(Debug)]
pub struct RawSink {
    /// `None`: no raw file, the samples only feed the telemetry bus (`tee`).
    out: Option<BufWriter<File>>,
    path: PathBuf,
    max: u64,
    slices: Vec<String>,
    /// One consumer per worker, in worker order.
    rings: Vec<RawConsumer>,
    written: u64,
    file_full: u64,
    write_errors: u64,
    /// Samples kept for the telemetry bus (`crate::telemetry::Kind::FridgeSamples`) when a
    /// feature asked for them; taken every tick.
    pub tee: Option<Vec<RawSample>>,
}

impl RawSink {
    /// Create (truncate) the file and write the header.
    pub fn create(cfg: &RawConfig, slices: Vec<String>) -> std::io::Result<RawSink> {
        let mut out = BufWriter::new(File::create(&cfg.path)?);
        writeln!(out, "{RAW_HEADER}")?;
        Ok(RawSink {
            out: Some(out),
            tee: None,
            path: cfg.path.clone(),
            max: cfg.max_samples,
            slices,
            rings: Vec::new(),
            written: 0,
            file_full: 0,
            write_errors: 0,
        })
    }

    /// No file: the samples only go to the telemetry bus.
    pub fn tee_only(slices: Vec<String>) -> RawSink {
        RawSink {
            out: None,
            path: PathBuf::new(),
            max: 0,
            slices,
            rings: Vec::new(),
            written: 0,
            file_full: 0,
            write_errors: 0,
            tee: Some(Vec::new()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Worker `rings.len()`'s ring.
    pub fn add_ring(&mut self, c: RawConsumer) {
        self.rings.push(c);
    }

    /// Move what the rings hold into the file.
    pub fn drain(&mut self) {
        for w in 0..self.rings.len() {
            while let Ok(s) = self.rings[w].pop() {
                self.write(w, &s);
            }
        }
        if self.out.as_mut().is_some_and(|o| o.flush().is_err()) {
            self.write_errors += 1;
        }
    }

    fn write(&mut self, worker: usize, s: &RawSample) {
        if let Some(t) = &mut self.tee {
            t.push(*s);
        }
        let Some(out) = self.out.as_mut() else {
            return;
        };
        if self.written >= self.max {
            self.file_full += 1;
            return;
        }
        let slice = self
            .slices
            .get(usize::from(s.slice))
            .map_or("?", String::as_str);
        let r = writeln!(
            out,
            "{worker},{slice},{},{},{},{},{}",
            s.fridge, s.at_ns, s.delay_ns, s.x, s.weight
        );
        match r {
            Ok(()) => self.written += 1,
            Err(_) => self.write_errors += 1,
        }
    }

    /// (written, ring_full, file_full, write_errors).
    pub fn counts(&self, workers: &[Arc<WorkerPub>]) -> (u64, u64, u64, u64) {
        let ring_full = workers
            .iter()
            .map(|w| w.raw_dropped.load(Ordering::Relaxed))
            .sum();
        (self.written, ring_full, self.file_full, self.write_errors)
    }

    pub fn metrics(&self, workers: &[Arc<WorkerPub>], e: &mut Exposition) {
        e.family(
            "peregrine_fridge_raw_samples_total",
            MKind::Counter,
            "Raw fridge samples: written to the raw file, or dropped (ring_full: the worker's ring to the control thread; file_full: raw_max_samples reached; write_error).",
        );
        let (w, r, f, x) = self.counts(workers);
        for (result, v) in [
            ("written", w),
            ("ring_full", r),
            ("file_full", f),
            ("write_error", x),
        ] {
            e.sample(
                "peregrine_fridge_raw_samples_total",
                &[("result", result)],
                v as f64,
            );
        }
    }

    /// The summary's `raw` object.
    pub fn report(&self, workers: &[Arc<WorkerPub>]) -> serde_json::Value {
        let (w, r, f, x) = self.counts(workers);
        serde_json::json!({
            "path": self.path.display().to_string(),
            "written": w, "ring_full": r, "file_full": f, "write_errors": x,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_dataplane::telemetry::fridge::stage::raw_ring;

    fn sample(i: u64) -> RawSample {
        RawSample {
            at_ns: 1_000 + i,
            delay_ns: 500 + i,
            x: i,
            weight: 1.5,
            slice: (i % 2) as u16,
            fridge: 1,
        }
    }

    #[test]
    fn lines_are_written_up_to_the_bound_then_counted() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = RawConfig {
            path: dir.path().join("raw.csv"),
            ring: 8,
            max_samples: 3,
        };
        let mut sink = RawSink::create(&cfg, vec!["a".into(), "b".into()]).unwrap();
        let (mut tx0, rx0) = raw_ring(8);
        let (mut tx1, rx1) = raw_ring(8);
        sink.add_ring(rx0);
        sink.add_ring(rx1);
        for i in 0..2 {
            tx0.push(sample(i)).unwrap();
        }
        tx1.push(sample(7)).unwrap();
        tx1.push(sample(8)).unwrap();
        sink.drain();
        let text = std::fs::read_to_string(&cfg.path).unwrap();
        assert_eq!(
            text,
            format!(
                "{RAW_HEADER}\n0,a,1,1000,500,0,1.5\n0,b,1,1001,501,1,1.5\n1,b,1,1007,507,7,1.5\n"
            )
        );
        let (w, _, full, err) = sink.counts(&[]);
        assert_eq!((w, full, err), (3, 1, 0));
        let j = sink.report(&[]);
        assert_eq!(j["file_full"], 1);
        let mut e = Exposition::new();
        sink.metrics(&[], &mut e);
        let page = e.finish();
        assert!(
            page.contains("# TYPE peregrine_fridge_raw_samples counter"),
            "{page}"
        );
        assert!(
            page.contains("peregrine_fridge_raw_samples_total{result=\"written\"} 3"),
            "{page}"
        );
    }

    #[test]
    fn an_unwritable_path_is_an_error() {
        let cfg = RawConfig {
            path: "/nonexistent-dir/raw.csv".into(),
            ring: 8,
            max_samples: 3,
        };
        assert!(RawSink::create(&cfg, vec![]).is_err());
    }
}
