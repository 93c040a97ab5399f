//! Traffic generation, benchmarks and throughput tooling for Peregrine.
//!
//! * `pg-gen`: the command line of the test kit's traffic generator
//!   (`peregrine_testkit::traffic`).
//! * [`int_accuracy`]: the seed-003 INT accuracy experiment (Tables II-IV) over emulated
//!   links; the `int-accuracy` binary runs it.
//! * [`fridge_eval`]: the fridge paper's section 5 evaluation (Figures 2-5); the
//!   `pg-fridge-eval` binary runs it.
//! * [`dta_eval`]: the DTA seed's appendix A / Figures 12-14 through our translator and
//!   collector; the `pg-dta-eval` binary runs it.
//! * [`dta_ingest`]: what `pg-dta-ingest` measures (DTA ingest rate vs a hash-map collector).
//! * [`codesign_eval`]: the sketch-INT co-design evaluation (planner and per-flow accuracy);
//!   the `pg-codesign-eval` binary runs it.
//! * [`kestrel_eval`]: the Kestrel evaluation (section VI: anomaly detection per telemetry
//!   mode); the `pg-kestrel-eval` binary runs it.
//! * [`plain_cms`]: the plain Count-Min sketch Kestrel's update is measured against.
//! * [`harness`]: what the throughput binaries (`pg-throughput`, `pg-upf`, `int-throughput`)
//!   share: `net_ring` set-up, `dpdk-testpmd` runner, paired-round
//!   statistics and JSON output.
#![deny(unsafe_code)]

pub mod codesign_eval;
pub mod dta_eval;
pub mod dta_ingest;
pub mod fridge_eval;
pub mod harness;
pub mod int_accuracy;
pub mod kestrel_eval;
pub mod plain_cms;
