//! Runtime settings for tests on the memory backend: one worker per `WorkerSpec`, each
//! polling the ports `MemBackend::rx_queues_of` gives it and sending on its own tx queue.

use peregrine_dataplane::io::memory::MemBackend;
use peregrine_dataplane::runtime::{RuntimeConfig, WorkerSpec};

/// `workers` unpinned workers over `backend`'s ports, burst 32, no egress scheduling, no
/// idle stop.
pub fn mem_config(workers: usize, backend: &MemBackend) -> RuntimeConfig {
    RuntimeConfig {
        workers: (0..workers)
            .map(|id| WorkerSpec {
                id,
                core: None,
                rx_queues: backend.rx_queues_of(id),
                tx_queue: id as u16,
            })
            .collect(),
        burst: 32,
        stop_after_idle: None,
        control_queue: 64,
        egress: Vec::new(),
    }
}
