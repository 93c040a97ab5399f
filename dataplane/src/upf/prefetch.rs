//! Cache prefetch hints for the UPF's batched passes (the chunked lookups overlap their
//! misses by asking for the next lines early).

/// Ask the CPU to start loading the cache line holding `r`. A hint only: a prefetch never
/// faults and changes no architectural state.
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    prefetch_addr((r as *const T).cast());
}

/// [`prefetch`] of a raw address (any address: it is never dereferenced).
#[inline(always)]
pub(crate) fn prefetch_addr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch only hints the cache:
        // it never faults (whatever the address) and reads or writes no program state.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch`] of both ends of `*p` (a record may straddle two cache lines); any address.
#[inline(always)]
pub(crate) fn prefetch_obj<T>(p: *const T) {
    let b = p.cast::<u8>();
    prefetch_addr(b);
    prefetch_addr(b.wrapping_add(core::mem::size_of::<T>().saturating_sub(1)));
}
