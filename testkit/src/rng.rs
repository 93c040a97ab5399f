//! The workspace's one pseudo-random number generator: `rand_xoshiro`'s named algorithms
//! (splitmix64, Steele, Lea, Flood 2014; xoshiro256** and xoshiro256++, Blackman and Vigna
//! 2018), whose streams for a seed never change, plus the two draws tests need.

pub use rand_core::{RngCore, SeedableRng};
pub use rand_xoshiro::{SplitMix64, Xoshiro256PlusPlus, Xoshiro256StarStar};

/// A number in `0..n` (Lemire's multiply-shift; the bias, below `n / 2^64`, is irrelevant
/// for tests). `n` must not be 0.
pub fn below(rng: &mut impl RngCore, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// A number in `[0, 1)` with 53 random bits.
pub fn unit_f64(rng: &mut impl RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A standard normal draw (Box-Muller; one of the pair is discarded to keep no state).
pub fn normal(rng: &mut impl RngCore) -> f64 {
    // 1 - u is in (0, 1], so the logarithm is finite.
    let u1 = 1.0 - unit_f64(rng);
    let u2 = unit_f64(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A seeded generator for tests: xoshiro256++ seeded by splitmix64 from `seed`.
pub fn seeded(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// A seeded generator with index-sized draws ([`Mutations::below`]) and whole ones
/// ([`Mutations::draw`]), for the mutation tests (`Mutations(seeded(seed))`).
#[derive(Debug, Clone)]
pub struct Mutations(pub Xoshiro256PlusPlus);

impl Mutations {
    /// The next 64 bits.
    pub fn draw(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// In `0..n`, or 0 when `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        below(&mut self.0, n.max(1) as u64) as usize
    }

    /// The byte-level mutation `kind` of `v`, the one the mutation tests share: 0 flips a
    /// bit, 1 sets a byte, 2 inserts a byte, 3 removes one, 4 truncates. False, with nothing
    /// drawn or changed, for any other kind, and for 0, 1 and 3 on an empty `v`: the
    /// caller's own mutations take those.
    pub fn basic(&mut self, v: &mut Vec<u8>, kind: usize) -> bool {
        let len = v.len();
        match kind {
            0 if len > 0 => {
                let i = self.below(len);
                v[i] ^= 1 << self.below(8);
            }
            1 if len > 0 => {
                let i = self.below(len);
                v[i] = self.draw() as u8;
            }
            2 => {
                let i = self.below(len + 1);
                v.insert(i, self.draw() as u8);
            }
            3 if len > 0 => {
                v.remove(self.below(len));
            }
            4 => v.truncate(self.below(len + 1)),
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_value() {
        // splitmix64 from state 0 (the reference C code's first output).
        assert_eq!(
            SplitMix64::seed_from_u64(0).next_u64(),
            0xe220_a839_7b1d_cdaf
        );
    }

    #[test]
    fn draws_stay_in_range() {
        let mut r = seeded(7);
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            for _ in 0..100 {
                assert!(below(&mut r, n) < n);
            }
        }
        for _ in 0..1000 {
            assert!((0.0..1.0).contains(&unit_f64(&mut r)));
        }
    }
}
