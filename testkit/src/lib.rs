//! Peregrine's test kit: what the tests, benchmarks and experiment tools of every crate
//! share, so that no test includes another crate's file. A dev-dependency only: no
//! production crate links it.
//!
//! * [`pcap`]: classic pcap files, written and read back (also while a capture still writes
//!   them);
//! * [`tools`]: the CI / root / external-tool skip logic, running commands, free ports, a
//!   child-process guard, and waits on states (`wait_until`, `wait_value`, `wait_line`,
//!   `tcp_connected_to`) whose wall clock is only a hang guard (`START_GUARD`, `STOP_GUARD`):
//!   a test waits for what it needs (a log line, a counter, a page, a file's records), never
//!   a fixed pause;
//! * [`tshark`]: running tshark and walking its JSON, and live captures (`LiveCapture`)
//!   started once dumpcap wrote the file's header (it has opened the interface and set the
//!   filter) and stopped once the expected packets are in the file;
//! * [`netns`]: network-namespace topologies for tests that need the Linux stack (and whether
//!   a packet socket captures on an interface);
//! * [`frames`]: Ethernet / IPv4 / IPv6 / UDP / TCP / GTP-U frames built with the wire
//!   crate's Reprs;
//! * [`rng`]: the workspace's one PRNG (`rand_xoshiro`) and the draws tests need;
//! * [`alloc`]: a counting global allocator;
//! * [`dpdk`]: EAL arguments for an in-process DPDK backend on vdevs;
//! * [`pfcp`]: PFCP sample messages and request builders (TS 29.244), and PFCP headers in
//!   captured frames;
//! * [`traffic`]: the deterministic 5G user-plane traffic generator;
//! * `upf` (feature `dataplane`): UPF rule-table fixtures and a rig running the UPF stage;
//! * `gnb`, `tcp_rig` (feature `gnb`): a GTP-U gNB on a TUN device carrying kernel traffic, and
//!   kernel TCP / UDP through the real daemon in network namespaces;
//! * `impair` (feature `dataplane`): link impairments (loss, rate, delay, jitter) as a model
//!   and as a pipeline stage, re-exported from the dataplane (`stages::impair`), where the
//!   daemon's `impair` pipeline kind takes them from;
//! * [`intnet`]: `peregrine run` processes as INT nodes in network namespaces (veths, end
//!   hosts, configs, daemons, senders, report watchers), and [`codesign_emu`], the sketch-INT
//!   co-design emulation on them;
//! * [`intpcap`]: a one-port INT node on the pcap backend (its config and frames).

pub mod alloc;
pub mod codesign_emu;
pub mod daemon;
pub mod delay_trace;
pub mod dpdk;
pub mod frames;
#[cfg(feature = "gnb")]
pub mod gnb;
#[cfg(feature = "dataplane")]
pub mod impair;
pub mod intnet;
pub mod intpcap;
pub mod mbr;
pub mod netns;
pub mod pcap;
pub mod pfcp;
pub mod rng;
#[cfg(feature = "dataplane")]
pub mod runtime;
#[cfg(feature = "gnb")]
pub mod tcp_rig;
pub mod tools;
pub mod traffic;
pub mod tshark;
#[cfg(feature = "dataplane")]
pub mod upf;
