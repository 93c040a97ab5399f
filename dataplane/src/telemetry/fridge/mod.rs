//! Fridges: unbiased request/response delay distributions with little memory (Zheng, Chen,
//! Braverman, Rexford, "Unbiased Delay Measurement in the Data Plane", 2022).
//!
//! * [`kernel`]: `fridge(M, p)` (section 3.2): signature, timestamp and insertion-counter arrays
//!   and a global insertion counter; a request enters with probability `p` (overwriting), a
//!   matching response yields `(delay, x)` and clears the slot. A [`kernel::FridgeSet`] holds
//!   one or more fridges picked by one hash-derived uniform per ID (section 4.2).
//! * [`weight`]: the correction factor `p^-1 (1 - 1/M)^-x` (x counts insertions, the default)
//!   or `p^-1 (1 - p/M)^-x` (x counts all requests, Eq. 3.1), and its square (Eq. 4.7).
//! * [`hist`]: weighted log-linear histograms (sum of w and w^2 per bin), inverse-variance
//!   weighting of several fridges per bin (section 4.2), CDF and quantiles.
//! * [`baseline`]: the always-overwrite table (section 2.1) and the expiry-T table with one or
//!   more stages (section 5, after Chen et al., "Measuring TCP round-trip time in the data
//!   plane").
//! * [`tofino`]: the Tofino-compatible approximation (section 6.2): powers-of-two p, a range
//!   table of correction factors in 1.1x steps, 32 log2(delay) bins.
//! * [`matcher`]: request/response IDs of packets (TCP SYN -> SYN-ACK, data -> ACK, DNS, ICMP
//!   and ICMPv6 echo, GTP-U echo) read from `PacketMeta` offsets.
//! * [`window`]: per-worker double-buffered windows published to the control thread.

pub mod baseline;
pub mod hist;
pub mod kernel;
pub mod matcher;
pub mod stage;
pub mod tofino;
pub mod weight;
pub mod window;

pub use hist::{Cdf, LogHist, NBINS};
pub use kernel::{FridgeSet, FridgeSpec, Sample};
pub use weight::XMode;

/// A delay estimator fed with request and response IDs (a 64-bit hash of the header fields
/// that pair them) and the time. The fridge and the baselines share this path, so the
/// evaluation compares them on identical input.
pub trait Estimator {
    /// A request with ID hash `id` seen at `now_ns`.
    fn request(&mut self, id: u64, now_ns: u64);
    /// A response with ID hash `id` seen at `now_ns`: the sample it completes, if any.
    fn response(&mut self, id: u64, now_ns: u64) -> Option<Sample>;
    /// Bytes of table state (signatures, timestamps, counters), for equal-memory comparisons.
    fn state_bytes(&self) -> usize;
}

/// Murmur3's 64-bit finaliser: a bijective mix, so distinct IDs stay distinct.
#[inline]
pub const fn fmix64(k: u64) -> u64 {
    fmix64_by(k, FMIX64_MUL)
}

/// [`fmix64`]'s two multipliers.
pub const FMIX64_MUL: [u64; 2] = [0xff51_afd7_ed55_8ccd, 0xc4ce_b9fe_1a85_ec53];

/// [`fmix64`] with its multipliers given: [`fmix64`] when `mul` is [`FMIX64_MUL`] (a caller
/// that keeps them in memory has each multiply take its operand from there).
#[inline(always)]
pub const fn fmix64_by(mut k: u64, mul: [u64; 2]) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(mul[0]);
    k ^= k >> 33;
    k = k.wrapping_mul(mul[1]);
    k ^= k >> 33;
    k
}

/// What a table derives from one ID hash under its seed: the 32-bit signature stored in the
/// slot (never 0, which marks an empty slot), a uniform `u32` that decides entry (and which
/// fridge of a set), and an independent 32-bit value for the slot index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keyed {
    pub sig: u32,
    pub coin: u32,
    pub slot: u32,
}

impl Keyed {
    #[inline]
    pub const fn new(id: u64, seed: u64) -> Keyed {
        Keyed::from_head(Keyed::head(id, seed))
    }

    /// The first half of [`new`](Self::new): one finaliser, whose low 32 bits are the coin
    /// ([`coin_of`](Self::coin_of)). A table decides entry on it before paying for the slot's
    /// independent value (most requests do not enter when `p` is small). Kept a full
    /// [`fmix64`]: a cheaper mix would change which requests are sampled, and with them every
    /// figure of the fridge evaluation (perf/results/fridge-eval.md), which repeats bit for bit.
    #[inline]
    pub const fn head(id: u64, seed: u64) -> u64 {
        fmix64(id ^ seed)
    }

    /// The coin of a [`head`](Self::head).
    #[inline]
    pub const fn coin_of(h: u64) -> u32 {
        h as u32
    }

    /// The rest of [`new`](Self::new) from its [`head`](Self::head).
    #[inline]
    pub const fn from_head(h: u64) -> Keyed {
        Keyed::from_head_by(h, FMIX64_MUL)
    }

    /// [`from_head`](Self::from_head) with [`fmix64`]'s multipliers given (as
    /// [`fmix64_by`]): the same for [`FMIX64_MUL`].
    #[inline(always)]
    pub const fn from_head_by(h: u64, mul: [u64; 2]) -> Keyed {
        let g = fmix64_by(h ^ 0x9e37_79b9_7f4a_7c15, mul);
        let s = (h >> 32) as u32;
        Keyed {
            sig: if s == 0 { 1 } else { s },
            coin: h as u32,
            slot: g as u32,
        }
    }

    /// The slot index in a table of `m` entries (multiply-shift: uniform without a division).
    #[inline]
    pub const fn index(self, m: u32) -> usize {
        ((self.slot as u64 * m as u64) >> 32) as usize
    }

    /// Index for stage `stage` of a multi-stage table: another independent value per stage.
    #[inline]
    pub const fn stage_index(self, stage: u32, m: u32) -> usize {
        let g = fmix64(((self.slot as u64) << 32 | self.sig as u64) ^ (stage as u64 + 1));
        ((g as u32 as u64 * m as u64) >> 32) as usize
    }
}
