//! ~100k deterministic mutations of the Scapy vectors (`tests/oracle/scapy_vectors.jsonl`,
//! the committed output of `scapy_vectors.py`) through `Message::parse`: it must never panic,
//! and whatever it accepts must survive emit + re-parse unchanged.

use peregrine_pfcp::Message;
use peregrine_testkit::rng::{self, Mutations};

const ITERATIONS: usize = 100_000;

fn vectors() -> Vec<Vec<u8>> {
    let text = include_str!("oracle/scapy_vectors.jsonl");
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let h = v["hex"].as_str().unwrap();
            (0..h.len() / 2)
                .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}

/// Byte-level mutations of `v` (the test kit's, [`Mutations::basic`]), a 16-bit field set
/// to an edge value, a duplicated chunk, or the header length fixed; 1 to 4 of them.
fn mutate(rng: &mut Mutations, v: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        let kind = rng.below(8);
        if rng.basic(v, kind) {
            continue;
        }
        match kind {
            5 if len > 1 => {
                // Overwrite a 16-bit field (message or IE length, IE type) with an edge value.
                let i = rng.below(len - 1);
                let edge = [0u16, 1, 2, 3, 4, 0x7fff, 0x8000, 0xffff, (len - i) as u16];
                let x = edge[rng.below(edge.len())];
                v[i..i + 2].copy_from_slice(&x.to_be_bytes());
            }
            6 if len > 4 => {
                // Duplicate a chunk (repeated IEs, nested groups).
                let a = rng.below(len);
                let b = (a + 1 + rng.below(32)).min(len);
                let chunk = v[a..b].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, chunk);
            }
            _ => {
                // Fix the header length so mutations reach the IEs.
                if len >= 4 {
                    let l = (len - 4).min(0xffff) as u16;
                    v[2..4].copy_from_slice(&l.to_be_bytes());
                }
            }
        }
    }
}

#[test]
fn mutated_scapy_vectors_never_panic() {
    let seeds = vectors();
    assert!(!seeds.is_empty());
    let mut rng = Mutations(rng::seeded(0x5eed_0f9f_c0de));
    let (mut ok, mut err) = (0usize, 0usize);
    for _ in 0..ITERATIONS {
        let mut v = seeds[rng.below(seeds.len())].clone();
        mutate(&mut rng, &mut v);
        match Message::parse(&v) {
            Ok(m) => {
                ok += 1;
                let bytes = m.to_vec().unwrap_or_else(|e| panic!("{m:?}: emit {e}"));
                let again = Message::parse(&bytes).unwrap_or_else(|e| panic!("{m:?}: {e}"));
                assert_eq!(again, m);
            }
            Err(e) => {
                err += 1;
                // Every error maps to an action without panicking.
                let _ = (e.action(), e.to_string());
            }
        }
    }
    eprintln!("{ok} accepted, {err} rejected");
    assert!(
        ok > 1000 && err > 1000,
        "mutations too mild or too harsh: {ok}/{err}"
    );
}
