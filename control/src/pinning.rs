//! Control-side thread pinning: every thread that is not a poll-mode worker (the daemon's
//! control loop, the N4 thread, the metrics server, feature threads) runs on
//! `[workers] control_cores`, never on a worker's core. A worker shares its core with
//! nothing, so a rule publish or a burst of PFCP requests cannot deschedule it (on a
//! 2-core machine: the worker on core 1, everything else on core 0).
//!
//! The daemon pins its own thread right after the workers start; threads it starts later
//! inherit the CPU set (Linux `sched_setaffinity(2)`: a new thread gets its creator's mask).

use crate::platform::Workers;
use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// The cores control-side threads run on, out of `online` cores: `control_cores` when
/// given (empty: not pinned); otherwise, when the workers are pinned, every online core
/// that no worker uses (none left: not pinned); otherwise not pinned.
pub fn control_cores(w: &Workers, online: usize) -> Vec<usize> {
    match &w.control_cores {
        Some(c) => c.clone(),
        None if w.cores.is_empty() => Vec::new(),
        None => (0..online).filter(|c| !w.cores.contains(c)).collect(),
    }
}

/// `[workers] control_cores` must not name a worker's core.
pub fn check(w: &Workers) -> Result<(), String> {
    let Some(c) = &w.control_cores else {
        return Ok(());
    };
    match c.iter().find(|c| w.cores.contains(c)) {
        Some(x) => Err(format!(
            "core {x} is also a worker's core (workers.cores = {:?}); control threads must not share a worker's core",
            w.cores
        )),
        None => Ok(()),
    }
}

/// The CPU set of `cores`.
fn cpu_set(cores: &[usize]) -> Result<CpuSet, String> {
    let mut set = CpuSet::new();
    for &c in cores {
        set.set(c)
            .map_err(|e| format!("core {c} out of range: {e}"))?;
    }
    Ok(set)
}

/// Pin the calling thread (and so every thread it starts later) to `cores`. Empty: no-op.
pub fn pin_current(cores: &[usize]) -> Result<(), String> {
    if cores.is_empty() {
        return Ok(());
    }
    sched_setaffinity(Pid::from_raw(0), &cpu_set(cores)?)
        .map_err(|e| format!("sched_setaffinity {cores:?}: {e}"))
}

pub use peregrine_dataplane::runtime::WORKER_THREAD_PREFIX;

/// The threads of `tasks` ((thread ID, name)) that are not workers.
pub fn non_workers(tasks: impl IntoIterator<Item = (i32, String)>) -> Vec<i32> {
    tasks
        .into_iter()
        .filter(|(_, name)| !name.starts_with(WORKER_THREAD_PREFIX))
        .map(|(tid, _)| tid)
        .collect()
}

/// Pin every thread of this process that is not a worker to `cores`, including those
/// started before the control side pinned itself: DPDK's EAL starts its interrupt thread
/// on the cores outside its lcore list, which on a 2-core machine with `-l 0` is the
/// worker's core 1. Returns how many threads were pinned. Empty `cores`: no-op.
pub fn pin_non_workers(cores: &[usize]) -> Result<usize, String> {
    if cores.is_empty() {
        return Ok(0);
    }
    let set = cpu_set(cores)?;
    let tasks = std::fs::read_dir("/proc/self/task")
        .map_err(|e| format!("/proc/self/task: {e}"))?
        .filter_map(|e| {
            let p = e.ok()?.path();
            let tid = p.file_name()?.to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(p.join("comm")).ok()?;
            Some((tid, comm.trim().to_string()))
        });
    let tids = non_workers(tasks);
    for &t in &tids {
        sched_setaffinity(Pid::from_raw(t), &set)
            .map_err(|e| format!("sched_setaffinity thread {t} {cores:?}: {e}"))?;
    }
    Ok(tids.len())
}

/// The number of online cores (1 when unknown).
pub fn online_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    use nix::sched::sched_getaffinity;

    #[test]
    fn every_thread_but_the_workers_is_pinned() {
        let tasks = [
            (10, "peregrine".to_string()),
            (11, "eal-intr-thread".to_string()),
            (12, "pg-worker-0".to_string()),
            (13, "pg-n4".to_string()),
            (14, "pg-worker-1".to_string()),
        ];
        assert_eq!(non_workers(tasks), [10, 11, 13]);
    }

    fn workers(cores: Vec<usize>, control: Option<Vec<usize>>) -> Workers {
        Workers {
            cores,
            control_cores: control,
            ..Workers::default()
        }
    }

    #[test]
    fn control_cores_default_to_the_cores_no_worker_uses() {
        assert_eq!(control_cores(&workers(vec![1], None), 2), [0]);
        assert_eq!(control_cores(&workers(vec![1, 3], None), 4), [0, 2]);
        assert!(control_cores(&workers(vec![], None), 4).is_empty());
        assert!(control_cores(&workers(vec![0, 1], None), 2).is_empty());
        assert_eq!(control_cores(&workers(vec![1], Some(vec![2])), 4), [2]);
        assert!(control_cores(&workers(vec![1], Some(vec![])), 4).is_empty());
        assert!(check(&workers(vec![1], Some(vec![0]))).is_ok());
        let e = check(&workers(vec![1], Some(vec![0, 1]))).unwrap_err();
        assert!(e.contains("core 1 is also a worker's core"), "{e}");
    }

    #[test]
    fn pinned_thread_and_its_children_stay_on_the_control_cores() {
        std::thread::spawn(|| {
            pin_current(&[0]).unwrap();
            let child = std::thread::spawn(|| sched_getaffinity(Pid::from_raw(0)).unwrap())
                .join()
                .unwrap();
            for set in [sched_getaffinity(Pid::from_raw(0)).unwrap(), child] {
                assert!(set.is_set(0).unwrap());
                for c in 1..online_cores() {
                    assert!(!set.is_set(c).unwrap(), "core {c}");
                }
            }
            assert!(pin_current(&[CpuSet::count() + 1]).is_err());
        })
        .join()
        .unwrap();
    }
}
