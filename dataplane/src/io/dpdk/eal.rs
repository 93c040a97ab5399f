//! The DPDK Environment Abstraction Layer: initialised once per process.

use super::{mbuf, mempool, DpdkError, EAL_RUNNING};
use peregrine_dpdk_sys as sys;
use std::ffi::{c_char, CString};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

/// `argv[0]` we give the EAL.
const PROGRAM: &str = "peregrine";

enum State {
    Uninit,
    Running { args: Vec<String>, handles: usize },
    Failed(String),
    CleanedUp,
}

static STATE: Mutex<State> = Mutex::new(State::Uninit);

fn state() -> MutexGuard<'static, State> {
    // A panic while holding the lock leaves the state consistent (it is only ever replaced
    // whole), so a poisoned lock is still usable.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A handle on the process's EAL. Cloning is cheap; mempools and backends hold one, and
/// [`Eal::cleanup`] refuses to tear the EAL down while any other handle is alive.
///
/// The EAL is never torn down implicitly: dropping the last handle leaves it running (so a
/// later [`Eal::init`] with the same arguments returns a new handle).
#[derive(Debug)]
pub struct Eal {
    _private: (),
}

impl Eal {
    /// Initialise the EAL with `args` (without `argv[0]`, which is added here), or return a
    /// handle on the running EAL if it was initialised with exactly these arguments.
    ///
    /// The calling thread keeps its CPU affinity (the EAL would pin it to the main lcore). The
    /// mbuf dynamic field/flag for [`Meta::timestamp_ns`](crate::buffer::Meta) are registered
    /// here.
    pub fn init(args: &[String]) -> Result<Eal, DpdkError> {
        let mut st = state();
        match &mut *st {
            State::Running {
                args: existing,
                handles,
            } => {
                return if existing.as_slice() == args {
                    *handles += 1;
                    Ok(Eal { _private: () })
                } else {
                    Err(DpdkError::EalArgsMismatch {
                        existing: existing.clone(),
                    })
                };
            }
            State::Failed(e) => return Err(DpdkError::EalFailed(e.clone())),
            State::CleanedUp => return Err(DpdkError::EalCleanedUp),
            State::Uninit => {}
        }

        let mut owned = Vec::with_capacity(args.len() + 1);
        for a in std::iter::once(PROGRAM).chain(args.iter().map(String::as_str)) {
            owned.push(
                CString::new(a)
                    .map_err(|_| DpdkError::Config(format!("EAL argument {a:?} contains NUL")))?,
            );
        }
        // The EAL may keep pointers into argv (program name, option values) for the life of
        // the process, and permutes the pointer array: leak both. This happens once.
        let owned: &'static [CString] = Vec::leak(owned);
        let argv: &'static mut [*mut c_char] = Vec::leak(
            owned
                .iter()
                .map(|s| s.as_ptr().cast_mut())
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect(),
        );
        let argc = i32::try_from(owned.len())
            .map_err(|_| DpdkError::Config("too many EAL arguments".into()))?;

        // SAFETY: argv holds argc valid NUL-terminated strings followed by NULL, all leaked
        // ('static); rte_eal_init is called at most once per process (guarded by STATE).
        let rc = unsafe { sys::pg_eal_init(argc, argv.as_mut_ptr()) };
        if rc < 0 {
            let err = DpdkError::from_errno("rte_eal_init");
            *st = State::Failed(err.to_string());
            return Err(err);
        }
        EAL_RUNNING.store(true, Ordering::Release);
        if let Err(e) = mbuf::register_dynamic_fields() {
            *st = State::Failed(e.to_string());
            return Err(e);
        }
        *st = State::Running {
            args: args.to_vec(),
            handles: 1,
        };
        Ok(Eal { _private: () })
    }

    /// A handle on the running EAL, if any.
    pub fn current() -> Option<Eal> {
        let mut st = state();
        match &mut *st {
            State::Running { handles, .. } => {
                *handles += 1;
                Some(Eal { _private: () })
            }
            _ => None,
        }
    }

    /// The arguments the EAL was initialised with (without `argv[0]`).
    pub fn args(&self) -> Vec<String> {
        match &*state() {
            State::Running { args, .. } => args.clone(),
            _ => Vec::new(),
        }
    }

    /// Tear the EAL down (`rte_eal_cleanup`). Refused (`Busy`) while any other [`Eal`] handle
    /// exists — every [`Mempool`](super::Mempool) and [`DpdkBackend`](super::DpdkBackend) holds
    /// one — or while a leaked pool still has mbufs out. Afterwards DPDK cannot be used again in
    /// this process. Calling this at all is optional: process exit releases everything.
    pub fn cleanup(self) -> Result<(), DpdkError> {
        let mut st = state();
        let State::Running { handles, .. } = &mut *st else {
            // Unreachable while a handle exists; nothing to release.
            std::mem::forget(self);
            return Err(DpdkError::EalNotInitialised);
        };
        if *handles > 1 {
            let others = *handles - 1;
            drop(st);
            drop(self);
            return Err(DpdkError::Busy(format!(
                "{others} other EAL handle(s) alive"
            )));
        }
        let out = mempool::leaked_in_use();
        if out > 0 {
            drop(st);
            drop(self);
            return Err(DpdkError::Busy(format!("{out} mbuf(s) still allocated")));
        }
        mempool::free_leaked();
        std::mem::forget(self);
        EAL_RUNNING.store(false, Ordering::Release);
        *st = State::CleanedUp;
        // SAFETY: no handle, pool or mbuf from our pools exists any more (checked above), so
        // nothing of ours uses DPDK memory; the EAL was initialised by us.
        let rc = unsafe { sys::rte_eal_cleanup() };
        if rc < 0 {
            return Err(DpdkError::from_ret("rte_eal_cleanup", rc));
        }
        Ok(())
    }
}

impl Clone for Eal {
    fn clone(&self) -> Eal {
        if let State::Running { handles, .. } = &mut *state() {
            *handles += 1;
        }
        Eal { _private: () }
    }
}

impl Drop for Eal {
    fn drop(&mut self) {
        if let State::Running { handles, .. } = &mut *state() {
            *handles = handles.saturating_sub(1);
        }
    }
}
