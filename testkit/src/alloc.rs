//! A global allocator that counts allocations (in total, per thread) and live bytes, so a
//! test or harness can check that a measurement window allocated nothing on the hot path.
//!
//! Each binary installs its own static:
//! `#[global_allocator] static GLOBAL: CountingAlloc = CountingAlloc::new();`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

thread_local! {
    // Const-initialised, no destructor: using it inside the allocator never allocates.
    static THREAD_ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Allocations (`alloc` and `realloc`) made so far by the calling thread through any
/// installed [`CountingAlloc`] (tests that do the work on their own thread count these, so
/// the test harness's other threads cannot disturb them).
pub fn thread_allocs() -> u64 {
    THREAD_ALLOCS.with(Cell::get)
}

/// Forwards to an inner allocator (the system's by default); counts `alloc`/`realloc` calls
/// and live bytes (as requested, whatever the inner allocator rounds them to).
#[derive(Debug, Default)]
pub struct CountingAlloc<A = System> {
    allocs: AtomicU64,
    live: AtomicI64,
    inner: A,
}

impl CountingAlloc {
    pub const fn new() -> Self {
        Self::with(System)
    }
}

impl<A> CountingAlloc<A> {
    /// Counting in front of `inner` (a binary whose product code runs on another global
    /// allocator counts with that one).
    pub const fn with(inner: A) -> Self {
        Self {
            allocs: AtomicU64::new(0),
            live: AtomicI64::new(0),
            inner,
        }
    }

    /// Allocation calls (`alloc` and `realloc`) so far, all threads.
    pub fn allocs(&self) -> u64 {
        self.allocs.load(Ordering::SeqCst)
    }

    /// Bytes currently allocated (for memory per session).
    pub fn live(&self) -> i64 {
        self.live.load(Ordering::Relaxed)
    }

    fn count(&self) {
        self.allocs.fetch_add(1, Ordering::Relaxed);
        let _ = THREAD_ALLOCS.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: forwards every call to the inner allocator unchanged; only updates counters.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        self.count();
        self.live.fetch_add(l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { self.inner.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        self.live.fetch_sub(l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { self.inner.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        self.count();
        self.live
            .fetch_add(n as i64 - l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { self.inner.realloc(p, l, n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_allocations_and_live_bytes() {
        let a = CountingAlloc::new();
        let l = Layout::from_size_align(64, 8).expect("layout");
        let before = thread_allocs();
        // SAFETY: layout is non-zero-sized; the pointer is freed with the same layout.
        unsafe {
            let p = a.alloc(l);
            assert!(!p.is_null());
            assert_eq!((a.allocs(), a.live()), (1, 64));
            let p = a.realloc(p, l, 128);
            assert!(!p.is_null());
            assert_eq!((a.allocs(), a.live()), (2, 128));
            a.dealloc(p, Layout::from_size_align(128, 8).expect("layout"));
        }
        assert_eq!((a.allocs(), a.live()), (2, 0));
        assert_eq!(thread_allocs() - before, 2);
    }
}
