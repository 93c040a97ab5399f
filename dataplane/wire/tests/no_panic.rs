//! Stable-Rust stand-in for the `cargo fuzz` targets: every parser must survive every input.
//!
//! Runs `peregrine_wire::fuzz::all` (each module's fuzz entry: parse, read every field,
//! round-trip the `Repr`, with internal consistency assertions) and the full-stack frame
//! walk of the `packet` fuzz target (`peregrine_wire::fuzz::walk`) over
//! (a) every committed seed in `fuzz/seeds/` (real packets), and
//! (b) deterministic pseudo-random mutations of them: bit flips, byte overwrites with
//!     boundary values, truncations, insertions, deletions, splices and tweaks of 16-bit
//!     big-endian words (where the length fields live).
//!
//! A panic anywhere fails the test and prints the input as hex, ready to become a unit test.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;

use peregrine_testkit::rng::{self, RngCore, SeedableRng};
use peregrine_wire::fuzz::walk;

/// How many mutated inputs (b) runs. Override with `NO_PANIC_ITERATIONS`.
const DEFAULT_ITERATIONS: usize = 200_000;

/// Largest input we build; bigger than any seed, smaller than the parsers' stack buffers
/// would care about, so that both "fits" and "too big" paths are reached.
const MAX_LEN: usize = 2048;

/// splitmix64 (Steele, Lea, Flood 2014, the test kit's `rand_xoshiro`): tiny, fast, good
/// enough to drive mutations.
struct SplitMix64(rng::SplitMix64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform-enough value in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
}

/// Every file under `fuzz/seeds/<target>/`, sorted by path so the run is deterministic.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let mut out = Vec::new();
    let mut dirs: Vec<_> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|d| d.expect("dir entry").path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let mut files: Vec<_> = fs::read_dir(&dir)
            .expect("seed dir")
            .map(|f| f.expect("seed entry").path())
            .collect();
        files.sort();
        for f in files {
            let name = f.strip_prefix(&root).unwrap_or(&f).display().to_string();
            out.push((name, fs::read(&f).expect("seed file")));
        }
    }
    out
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Run every parser over `data`; on panic, fail with the input so it can be reproduced.
fn check(what: &str, data: &[u8]) {
    let r = panic::catch_unwind(AssertUnwindSafe(|| {
        peregrine_wire::fuzz::all(data);
        walk::frame(data);
    }));
    if r.is_err() {
        panic!(
            "{what}: parser panicked on {} bytes: {}",
            data.len(),
            hex(data)
        );
    }
}

/// Values that sit on the boundaries parsers compare against.
const INTERESTING_U8: [u8; 8] = [0x00, 0x01, 0x04, 0x08, 0x3f, 0x7f, 0x80, 0xff];

/// Apply one random mutation to `buf`, drawing splice material from `other`.
fn mutate_once(rng: &mut SplitMix64, buf: &mut Vec<u8>, other: &[u8]) {
    let len = buf.len();
    match rng.below(9) {
        // Flip one bit.
        0 if len > 0 => {
            let i = rng.below(len);
            buf[i] ^= 1 << rng.below(8);
        }
        // Overwrite one byte, with a random or a boundary value.
        1 if len > 0 => {
            let i = rng.below(len);
            buf[i] = if rng.below(2) == 0 {
                rng.byte()
            } else {
                INTERESTING_U8[rng.below(INTERESTING_U8.len())]
            };
        }
        // Truncate.
        2 if len > 0 => buf.truncate(rng.below(len)),
        // Insert a few random bytes.
        3 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(8);
            for _ in 0..n {
                buf.insert(at, rng.byte());
            }
        }
        // Delete a range.
        4 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(16));
            buf.drain(at..at + n);
        }
        // Nudge a 16-bit big-endian word (length fields) by a small amount.
        5 | 6 if len >= 2 => {
            let i = rng.below(len - 1);
            let w = u16::from_be_bytes([buf[i], buf[i + 1]]);
            let delta = 1 + rng.below(8) as u16;
            let w = if rng.below(2) == 0 {
                w.wrapping_add(delta)
            } else {
                w.wrapping_sub(delta)
            };
            buf[i..i + 2].copy_from_slice(&w.to_be_bytes());
        }
        // Set a 16-bit word to a boundary value, including "the rest of the buffer".
        7 if len >= 2 => {
            let i = rng.below(len - 1);
            let rest = (len - i) as u16;
            let w = [
                0,
                1,
                0x7fff,
                0xffff,
                rest,
                rest.wrapping_sub(8),
                rest.wrapping_add(1),
            ][rng.below(7)];
            buf[i..i + 2].copy_from_slice(&w.to_be_bytes());
        }
        // Splice in a chunk of another seed.
        _ if !other.is_empty() => {
            let from = rng.below(other.len());
            let n = 1 + rng.below(other.len() - from);
            let at = rng.below(len + 1);
            buf.splice(at..at, other[from..from + n].iter().copied());
        }
        _ => buf.push(rng.byte()),
    }
    buf.truncate(MAX_LEN);
}

/// (a) The committed seeds: real packets must go through every parser cleanly.
#[test]
fn seeds_do_not_panic() {
    let seeds = seeds();
    assert!(seeds.len() > 100, "expected the committed fuzz seeds");
    for (name, data) in &seeds {
        check(name, data);
        // Every prefix too: cheap, and where most length checks bite.
        for n in 0..data.len().min(128) {
            check(name, &data[..n]);
        }
    }
}

/// (b) Deterministic mutations of the seeds.
#[test]
fn mutations_do_not_panic() {
    let seeds = seeds();
    let iterations = std::env::var("NO_PANIC_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_ITERATIONS);
    let mut rng = SplitMix64(rng::SplitMix64::seed_from_u64(0x5eed_f022_9e7e_9121));
    let mut buf = Vec::with_capacity(MAX_LEN + 64);
    for i in 0..iterations {
        let (name, seed) = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())].1;
        buf.clear();
        buf.extend_from_slice(seed);
        for _ in 0..1 + rng.below(4) {
            mutate_once(&mut rng, &mut buf, other);
        }
        check(&format!("mutation {i} of {name}"), &buf);
    }
}
