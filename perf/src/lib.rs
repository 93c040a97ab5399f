//! Traffic generation, benchmarks and throughput tooling for Peregrine.
//!
//! * [`traffic`]: a deterministic 5G user-plane traffic generator (uplink GTP-U on N3,
//!   downlink IP on N6, labelled anomalies), with pcap output and a JSON manifest; the
//!   `pg-gen` binary is its command line.
//! * [`int_accuracy`]: the seed-003 INT accuracy experiment (Tables II-IV) over emulated
//!   links; the `int-accuracy` binary runs it.
//! * [`harness`]: what the throughput binaries (`pg-throughput`, `pg-upf`, `int-throughput`)
//!   share: counting allocator, `net_ring` set-up, `dpdk-testpmd` runner, paired-round
//!   statistics and JSON output.
// Only `harness::alloc` (the GlobalAlloc impl) may use `unsafe`.
#![deny(unsafe_code)]

pub mod harness;
pub mod int_accuracy;
pub mod traffic;
