//! RFC 2698 Two Rate Three Color Marker (TrTCM), in bytes and bytes per second.
//!
//! The meter has two token buckets (RFC 2698 §3): the committed bucket C of size CBS filled at
//! CIR, and the peak bucket P of size PBS filled at PIR. Both start full (RFC 2698 §3: "the
//! token buckets are initially full"). A packet of `B` bytes is marked per RFC 2698 §3:
//!
//! * colour-blind: red if `Tp < B`; else yellow if `Tc < B` (and `Tp -= B`); else green (and
//!   `Tp -= B`, `Tc -= B`);
//! * colour-aware: red if pre-coloured red or `Tp < B`; else yellow if pre-coloured yellow or
//!   `Tc < B` (and `Tp -= B`); else green (and `Tp -= B`, `Tc -= B`).
//!
//! # Arithmetic
//!
//! No floats. Token counts are kept in *byte-nanoseconds per second*, i.e. bytes scaled by
//! 10^9, in `u128`: `elapsed_ns * rate_bytes_per_s` adds exactly `elapsed_ns * rate / 10^9`
//! bytes, with the fractional byte kept, so the long-run rate is exact (no rounding drift over
//! any run length). RFC 2698 §3 updates the buckets "PIR times per second" by one token; this
//! is the continuous limit of that rule and never gives more tokens than it.
//!
//! Time is passed in (`now_ns`, from `runtime::Context::now_ns`). A clock that goes backwards
//! adds no tokens; the meter keeps the latest time it has seen.
//!
//! All operations saturate: rates and bursts up to `u64::MAX` and times up to `u64::MAX` do
//! not overflow (`u64::MAX * u64::MAX < u128::MAX`, and sums saturate).

use thiserror::Error;

/// Nanoseconds per second: the token scale factor.
const NS_PER_S: u128 = 1_000_000_000;

/// A packet colour (RFC 2698 §1): green conforms to CIR/CBS, yellow exceeds CIR/CBS but
/// conforms to PIR/PBS, red exceeds PIR/PBS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum Colour {
    #[default]
    Green = 0,
    Yellow = 1,
    Red = 2,
}

impl Colour {
    /// Index for per-colour counters (green 0, yellow 1, red 2).
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }
}

/// RFC 2698 §3 operating modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColourMode {
    /// Incoming packets are assumed uncoloured; the pre-colour argument is ignored.
    #[default]
    Blind,
    /// Incoming packets carry a pre-colour that the meter can only downgrade (RFC 2698 §3).
    Aware,
}

/// Invalid meter or scheduler configuration.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum QosConfigError {
    /// RFC 2698 §2: "The PIR must be equal to or greater than the CIR."
    #[error("PIR {pir} bytes/s is below CIR {cir} bytes/s")]
    PirBelowCir { pir: u64, cir: u64 },
    /// A WRR queue with weight 0 would never be served.
    #[error("queue {qid}: WRR weight must be at least 1")]
    ZeroWeight { qid: u8 },
    /// A queue with no room would drop everything.
    #[error("queue {qid}: depth must be at least 1")]
    ZeroDepth { qid: u8 },
    /// The DRR quantum must be at least one byte.
    #[error("DRR quantum must be at least 1 byte")]
    ZeroQuantum,
}

/// A token bucket of `burst` bytes filled at `rate` bytes/s, with exact rational refill.
///
/// Building block of [`TrTcm`] and of the scheduler's port shaper. Starts full.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: u64,
    /// Capacity in scaled units (bytes * 10^9).
    cap: u128,
    /// Current tokens in scaled units (bytes * 10^9), `<= cap`.
    tokens: u128,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket of `burst_bytes` filled at `rate_bytes_per_s`, with its clock at `now_ns`.
    pub fn new(rate_bytes_per_s: u64, burst_bytes: u64, now_ns: u64) -> TokenBucket {
        let cap = u128::from(burst_bytes) * NS_PER_S;
        TokenBucket {
            rate: rate_bytes_per_s,
            cap,
            tokens: cap,
            last_ns: now_ns,
        }
    }

    /// Add the tokens earned since the last update. Time going backwards adds nothing and
    /// does not move the bucket's clock back.
    #[inline]
    pub fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            let elapsed = u128::from(now_ns - self.last_ns);
            let add = elapsed.saturating_mul(u128::from(self.rate));
            self.tokens = self.tokens.saturating_add(add).min(self.cap);
            self.last_ns = now_ns;
        }
    }

    /// Whether `bytes` tokens are available (after the caller's `refill`).
    #[inline]
    pub fn has(&self, bytes: u64) -> bool {
        self.tokens >= u128::from(bytes) * NS_PER_S
    }

    /// Remove `bytes` tokens; the caller checked [`has`](Self::has).
    #[inline]
    pub fn take(&mut self, bytes: u64) {
        self.tokens = self.tokens.saturating_sub(u128::from(bytes) * NS_PER_S);
    }

    /// Whole bytes currently in the bucket (without refilling).
    pub fn tokens_bytes(&self) -> u64 {
        u64::try_from(self.tokens / NS_PER_S).unwrap_or(u64::MAX)
    }

    /// Fill rate in bytes/s.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Capacity in bytes.
    pub fn burst(&self) -> u64 {
        u64::try_from(self.cap / NS_PER_S).unwrap_or(u64::MAX)
    }

    /// The latest time the bucket has seen.
    pub fn last_ns(&self) -> u64 {
        self.last_ns
    }
}

/// TrTCM parameters (RFC 2698 §2), in bytes and bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrTcmConfig {
    /// Committed Information Rate, bytes/s.
    pub cir: u64,
    /// Committed Burst Size, bytes.
    pub cbs: u64,
    /// Peak Information Rate, bytes/s (`>= cir`).
    pub pir: u64,
    /// Peak Burst Size, bytes.
    pub pbs: u64,
    /// Colour-blind or colour-aware (RFC 2698 §3).
    pub mode: ColourMode,
}

/// Burst allowance used by the 3GPP QER constructors: `rate * QER_BURST_NS / 10^9` bytes, and
/// at least [`QER_MIN_BURST_BYTES`] when the rate is non-zero.
pub const QER_BURST_NS: u64 = 10_000_000;

/// Smallest burst the QER constructors configure for a non-zero rate: two 1500-byte MTU
/// frames plus GTP-U encapsulation, so a conforming flow never sees a full-size packet red
/// merely because the bucket is smaller than the packet (RFC 2698 §2 recommends bursts of at
/// least the largest packet size).
pub const QER_MIN_BURST_BYTES: u64 = 3_200;

/// 3GPP bit rates are in kbit/s (TS 29.244 §8.2.8 MBR, §8.2.9 GBR): 1 kbit/s = 125 bytes/s.
#[inline]
pub fn kbps_to_bytes_per_s(kbps: u64) -> u64 {
    kbps.saturating_mul(125)
}

fn qer_burst(rate_bytes_per_s: u64) -> u64 {
    if rate_bytes_per_s == 0 {
        return 0;
    }
    let b = u128::from(rate_bytes_per_s) * u128::from(QER_BURST_NS) / NS_PER_S;
    u64::try_from(b)
        .unwrap_or(u64::MAX)
        .max(QER_MIN_BURST_BYTES)
}

/// The TrTCM parameters of a 3GPP QER direction (TS 29.244 §7.5.2.5): MBR → PIR, GBR → CIR,
/// both kbit/s; `None` when there is no MBR (no limit). The rule compiler puts this in the
/// compiled tables and [`TrTcm::from_qer_kbps`] builds its meter from it, so both agree.
/// GBR above MBR is clamped to the MBR; bursts as documented on [`TrTcm::from_qer_kbps`].
pub fn qer_config_kbps(
    mbr_kbps: Option<u64>,
    gbr_kbps: Option<u64>,
    mode: ColourMode,
) -> Option<TrTcmConfig> {
    qer_config_with(mbr_kbps, gbr_kbps, mode, qer_burst, qer_burst)
}

/// [`qer_config_kbps`] with the bursts `cbs(CIR)` and `pbs(PIR)` (rates in bytes/s): the
/// QER mapping shared with a policy's own bursts (`QerPolicy::meter_kbps`).
pub(crate) fn qer_config_with(
    mbr_kbps: Option<u64>,
    gbr_kbps: Option<u64>,
    mode: ColourMode,
    cbs: impl FnOnce(u64) -> u64,
    pbs: impl FnOnce(u64) -> u64,
) -> Option<TrTcmConfig> {
    let pir = kbps_to_bytes_per_s(mbr_kbps?);
    let cir = kbps_to_bytes_per_s(gbr_kbps.unwrap_or(0)).min(pir);
    Some(TrTcmConfig {
        cir,
        cbs: cbs(cir),
        pir,
        pbs: pbs(pir),
        mode,
    })
}

/// An RFC 2698 Two Rate Three Color Marker, or an unlimited meter that marks everything green.
#[derive(Debug, Clone)]
pub struct TrTcm {
    /// `None`: no limit (QER without MBR), every packet is green.
    buckets: Option<(TokenBucket, TokenBucket)>,
    mode: ColourMode,
}

impl TrTcm {
    /// A meter with both buckets full at time `now_ns`. Fails if PIR < CIR (RFC 2698 §2).
    pub fn new(cfg: TrTcmConfig, now_ns: u64) -> Result<TrTcm, QosConfigError> {
        if cfg.pir < cfg.cir {
            return Err(QosConfigError::PirBelowCir {
                pir: cfg.pir,
                cir: cfg.cir,
            });
        }
        Ok(TrTcm {
            buckets: Some((
                TokenBucket::new(cfg.cir, cfg.cbs, now_ns),
                TokenBucket::new(cfg.pir, cfg.pbs, now_ns),
            )),
            mode: cfg.mode,
        })
    }

    /// A meter that never limits: [`mark`](Self::mark) always returns [`Colour::Green`], in
    /// both modes (a pre-colour is not carried over either). This is what a QER without MBR
    /// means (TS 29.244: no MBR, no limit).
    pub fn unlimited() -> TrTcm {
        TrTcm {
            buckets: None,
            mode: ColourMode::Blind,
        }
    }

    /// A meter for a 3GPP QER (TS 29.244 §7.5.2.5): MBR → PIR, GBR → CIR, both in kbit/s
    /// (converted at 125 bytes/s per kbit/s).
    ///
    /// * No MBR: no limit, [`TrTcm::unlimited`] (always green), whatever the GBR.
    /// * No GBR (non-GBR flow): CIR = CBS = 0, so every packet within the MBR is yellow
    ///   ("exceeds the guaranteed rate of zero") and everything above it red.
    /// * GBR above MBR: the GBR is clamped to the MBR (the PFCP layer should reject it).
    ///
    /// Bursts are [`QER_BURST_NS`] worth of each rate, at least [`QER_MIN_BURST_BYTES`].
    pub fn from_qer_kbps(
        mbr_kbps: Option<u64>,
        gbr_kbps: Option<u64>,
        mode: ColourMode,
        now_ns: u64,
    ) -> TrTcm {
        match qer_config_kbps(mbr_kbps, gbr_kbps, mode) {
            None => TrTcm::unlimited(),
            Some(cfg) => TrTcm::new(cfg, now_ns).expect("cir clamped to pir"),
        }
    }

    /// Whether this is the unlimited (always green) meter.
    pub fn is_unlimited(&self) -> bool {
        self.buckets.is_none()
    }

    /// The operating mode.
    pub fn mode(&self) -> ColourMode {
        self.mode
    }

    /// Mark a packet of `len` bytes arriving at `now_ns` (RFC 2698 §3). `pre_colour` is used
    /// in colour-aware mode only. Zero-length packets are green unless pre-coloured (they
    /// consume nothing).
    #[inline]
    pub fn mark(&mut self, now_ns: u64, len: u64, pre_colour: Colour) -> Colour {
        let Some((c, p)) = self.buckets.as_mut() else {
            return Colour::Green;
        };
        c.refill(now_ns);
        p.refill(now_ns);
        let pre = match self.mode {
            ColourMode::Blind => Colour::Green,
            ColourMode::Aware => pre_colour,
        };
        if pre == Colour::Red || !p.has(len) {
            return Colour::Red;
        }
        if pre == Colour::Yellow || !c.has(len) {
            p.take(len);
            return Colour::Yellow;
        }
        p.take(len);
        c.take(len);
        Colour::Green
    }

    /// Whole bytes in the committed (C) and peak (P) buckets, without refilling; `None` for
    /// the unlimited meter.
    pub fn tokens(&self) -> Option<(u64, u64)> {
        self.buckets
            .as_ref()
            .map(|(c, p)| (c.tokens_bytes(), p.tokens_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Colour::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    fn meter(mode: ColourMode) -> TrTcm {
        TrTcm::new(
            TrTcmConfig {
                cir: 1000,
                cbs: 1000,
                pir: 2000,
                pbs: 2000,
                mode,
            },
            0,
        )
        .unwrap()
    }

    /// RFC 2698 §3 colour-blind, hand-computed (CIR 1000 B/s, CBS 1000, PIR 2000 B/s,
    /// PBS 2000, buckets full at t = 0). Comments give (Tc, Tp) after each packet.
    #[test]
    fn qos_rfc2698_colour_blind_vectors() {
        let mut m = meter(ColourMode::Blind);
        let v: &[(u64, u64, Colour)] = &[
            (0, 500, Green),               // 500, 1500
            (0, 600, Yellow),              // 500, 900
            (0, 1000, Red),                // 500, 900
            (100 * MS, 100, Green),        // +100,+200 -> 600,1100 -> 500, 1000
            (100 * MS, 1000, Yellow),      // 500, 0
            (100 * MS, 0, Green),          // zero length conforms
            (100 * MS + 1, 1, Red),        // Tp = 2e-6 bytes
            (600 * MS, 1000, Green),       // exactly 1000, 1000 after 0.5 s -> 0, 0
            (10 * S, 3000, Red),           // full (1000, 2000): larger than PBS
            (10 * S, 1500, Yellow),        // 1000, 500
            (10 * S + 250 * MS, 1, Green), // +250, +500 -> 1000, 1000 -> 999, 999
        ];
        for (i, &(t, len, want)) in v.iter().enumerate() {
            assert_eq!(m.mark(t, len, Green), want, "packet {i} at {t} ns, {len} B");
        }
        assert_eq!(m.tokens(), Some((999, 999)));
    }

    /// RFC 2698 §3 colour-aware, hand-computed with the same configuration.
    #[test]
    fn qos_rfc2698_colour_aware_vectors() {
        let mut m = meter(ColourMode::Aware);
        let v: &[(u64, u64, Colour, Colour)] = &[
            (0, 500, Green, Green),    // 500, 1500
            (0, 400, Yellow, Yellow),  // 500, 1100
            (0, 100, Red, Red),        // unchanged
            (0, 500, Green, Green),    // 0, 600
            (0, 700, Green, Red),      // Tp short
            (0, 600, Green, Yellow),   // Tc short -> 0, 0
            (S, 1000, Yellow, Yellow), // full 1000, 2000 -> 1000, 1000
            (S, 1000, Green, Green),   // 0, 0
            (S, 0, Red, Red),          // pre-red stays red even at 0 bytes
            (S, 0, Yellow, Yellow),
        ];
        for (i, &(t, len, pre, want)) in v.iter().enumerate() {
            assert_eq!(m.mark(t, len, pre), want, "packet {i}");
        }
        assert_eq!(m.tokens(), Some((0, 0)));
    }

    #[test]
    fn qos_blind_mode_ignores_pre_colour() {
        let mut m = meter(ColourMode::Blind);
        assert_eq!(m.mark(0, 100, Red), Green);
        assert_eq!(m.mark(0, 100, Yellow), Green);
    }

    #[test]
    fn qos_time_backwards_adds_no_tokens() {
        let mut m = meter(ColourMode::Blind);
        assert_eq!(m.mark(5 * S, 2000, Green), Yellow); // Tc 1000 < 2000
        assert_eq!(m.tokens(), Some((1000, 0)));
        assert_eq!(m.mark(S, 1, Green), Red);
        assert_eq!(m.mark(0, 1, Green), Red);
        assert_eq!(m.tokens(), Some((1000, 0)));
        // Forward again from 5 s, not from 0: 1 ms gives 2 bytes of P.
        assert_eq!(m.mark(5 * S + MS, 2, Green), Green);
        assert_eq!(m.mark(5 * S + MS, 1, Green), Red);
    }

    #[test]
    fn qos_pir_below_cir_rejected() {
        let e = TrTcm::new(
            TrTcmConfig {
                cir: 10,
                cbs: 1,
                pir: 9,
                pbs: 1,
                mode: ColourMode::Blind,
            },
            0,
        );
        assert!(matches!(e, Err(QosConfigError::PirBelowCir { .. })));
    }

    #[test]
    fn qos_qer_constructors() {
        let mut u = TrTcm::from_qer_kbps(None, Some(1000), ColourMode::Aware, 0);
        assert!(u.is_unlimited());
        for t in 0..100 {
            assert_eq!(u.mark(t, u64::MAX, Red), Green);
        }
        // MBR 8000 kbit/s = 1 MB/s, GBR 2000 kbit/s = 250 kB/s; bursts 10 ms.
        let m = TrTcm::from_qer_kbps(Some(8000), Some(2000), ColourMode::Blind, 0);
        assert_eq!(m.tokens(), Some((3_200, 10_000)));
        // Non-GBR: no green.
        let mut n = TrTcm::from_qer_kbps(Some(8000), None, ColourMode::Blind, 0);
        assert_eq!(n.tokens(), Some((0, 10_000)));
        assert_eq!(n.mark(0, 1500, Green), Yellow);
        // GBR above MBR clamps.
        let c = TrTcm::from_qer_kbps(Some(100), Some(1000), ColourMode::Blind, 0);
        assert_eq!(c.tokens(), Some((3_200, 3_200)));
        assert_eq!(kbps_to_bytes_per_s(u64::MAX), u64::MAX);
    }

    #[test]
    fn qos_huge_configs_do_not_overflow() {
        for &(cir, cbs, pir, pbs) in &[
            (u64::MAX, u64::MAX, u64::MAX, u64::MAX),
            (0, 0, u64::MAX, u64::MAX),
            (0, u64::MAX, u64::MAX, 0),
            (u64::MAX - 1, 1, u64::MAX, u64::MAX / 2),
        ] {
            for mode in [ColourMode::Blind, ColourMode::Aware] {
                let mut m = TrTcm::new(
                    TrTcmConfig {
                        cir,
                        cbs,
                        pir,
                        pbs,
                        mode,
                    },
                    0,
                )
                .unwrap();
                for &t in &[0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX, 3] {
                    for &len in &[0, 1, 1500, u64::MAX / 2, u64::MAX] {
                        let _ = m.mark(t, len, Green);
                        let _ = m.mark(t, len, Yellow);
                    }
                }
                let (c, p) = m.tokens().unwrap();
                assert!(c <= cbs && p <= pbs);
            }
        }
        let mut z = TrTcm::new(
            TrTcmConfig {
                cir: 0,
                cbs: 0,
                pir: 0,
                pbs: 0,
                mode: ColourMode::Blind,
            },
            0,
        )
        .unwrap();
        assert_eq!(z.mark(u64::MAX, 0, Green), Green);
        assert_eq!(z.mark(u64::MAX, 1, Green), Red);
    }
}
