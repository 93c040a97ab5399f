//! The feed's frames: one per session, kept either as stored frames (`--feed stored`, a
//! `Vec<Vec<u8>>`, as before round 18a) or as one base frame plus, per session, only the bytes
//! around those in which the session's frame differs from it (`--feed patched`, the default).
//!
//! Why: at 100k uplink sessions the stored frames are ~12.8 MB of 122-byte frames in 128-byte
//! allocations plus 2.4 MB of `Vec` headers, streamed through the L3 once per cycle over the
//! sessions, competing with the UPF's own session state. A NIC writes into a small set of
//! recycled mbufs, and generators of many flows (pktgen-dpdk's range mode, TRex's field
//! engine) copy one template and write the per-flow fields; so does the patched feed. The
//! frames it writes are byte-identical to the stored ones (checked for every session at
//! start-up in debug builds, and by the tests below), and the copy stays charged to the feed:
//! per packet the whole base frame is copied into the buffer, then the session's words.
//!
//! The patch: at start-up the byte positions in which any session's frame differs from
//! session 0's are found (the outer UDP checksum, the TEID, the QFI, the inner IP checksum and
//! UE address, the inner UDP checksum) and covered by a few 16-byte words; each session keeps
//! its own frame's bytes of those words (uplink: 3 words at offsets 40, 56, 72, 48 B a
//! session; downlink: 2 words, 32 B). Each word is one 16-byte copy per packet, and is right
//! as it stands (no masks, no order). Packing only the differing bytes (14 B uplink, 7 B
//! downlink) was built first and measured: writing its 1-8 byte ranges cost 80-120
//! instructions a packet more than the stored feed (uplink 10k, callgrind) and ran the feed
//! alone at 0.55-0.71 of it; the words cost ~27 (perf/results/upf.md, round 18a). Frames of
//! different lengths, or needing more than [`MAX_WORDS`] words, fall back to the stored
//! frames.

use peregrine_dataplane::PacketBuf;

/// Bytes a patch word writes: one 16-byte load and store (an SSE move) per word.
const W: usize = 16;
/// Above this many patch words a session, the stored frames are used instead.
pub(crate) const MAX_WORDS: usize = 4;

/// Which feed `--feed` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FeedKind {
    /// One stored frame per session (`Vec<Vec<u8>>`).
    Stored,
    /// One base frame plus each session's differing bytes.
    Patched,
}

/// One base frame and, per session, its frame's bytes in the patch words.
#[derive(Debug, Clone)]
pub(crate) struct Patched {
    base: Box<[u8]>,
    /// Frame offsets of the patch words, ascending: [`W`] bytes from each cover every byte
    /// in which some session's frame differs from the base frame.
    at: Box<[usize]>,
    /// Session `i`'s frame at each word of `at`: `words[i * at.len()..][..at.len()]`.
    words: Box<[[u8; W]]>,
}

impl Patched {
    /// The patch of `frames`, or `None` if they differ in length or need more than
    /// [`MAX_WORDS`] words (or there are none).
    pub(crate) fn new(frames: &[Vec<u8>]) -> Option<Self> {
        let base = frames.first()?;
        if base.len() < W || frames.iter().any(|f| f.len() != base.len()) {
            return None;
        }
        let mut differs = vec![false; base.len()];
        for f in &frames[1..] {
            for ((d, a), b) in differs.iter_mut().zip(f).zip(base) {
                *d |= a != b;
            }
        }
        // Greedy cover: a word at each differing byte not yet covered (moved back to end
        // where the frame ends if it would run past it). Frames all alike (one session)
        // get one word anyway, of their own bytes: no zero-word writer to build.
        let mut at: Vec<usize> = Vec::new();
        let mut covered = 0;
        for j in (0..base.len()).filter(|&j| differs[j]) {
            if j >= covered {
                let a = j.min(base.len() - W);
                at.push(a);
                covered = a + W;
            }
        }
        if at.is_empty() {
            at.push(0);
        }
        if at.len() > MAX_WORDS {
            return None;
        }
        let mut words = Vec::with_capacity(at.len() * frames.len());
        for f in frames {
            for &a in &at {
                words.push(f[a..a + W].try_into().expect("W bytes"));
            }
        }
        let p = Patched {
            base: base.clone().into_boxed_slice(),
            at: at.into_boxed_slice(),
            words: words.into_boxed_slice(),
        };
        if cfg!(debug_assertions) {
            let mut buf = vec![0u8; p.base.len()];
            for (i, f) in frames.iter().enumerate() {
                buf.copy_from_slice(&p.base);
                p.patch(i, &mut buf);
                assert!(buf == *f, "patched frame {i} differs from the stored one");
            }
        }
        Some(p)
    }

    /// Writes session `i`'s words over a copy of the base frame (the start-up check and the
    /// tests; the feed goes through [`Frames::with_fill`]).
    fn patch(&self, i: usize, dst: &mut [u8]) {
        struct One<'d>(usize, &'d mut [u8]);
        impl WithFill for One<'_> {
            fn run<F: Fill>(self, f: &F) {
                f.patch(self.0, self.1);
            }
        }
        self.with_fill(One(i, dst));
    }

    /// Runs `v` with this patch's writer, its word count `K` a constant.
    fn with_fill<V: WithFill>(&self, v: V) {
        match self.at.len() {
            1 => v.run(&PatchedFill::<'_, 1>::new(self)),
            2 => v.run(&PatchedFill::<'_, 2>::new(self)),
            3 => v.run(&PatchedFill::<'_, 3>::new(self)),
            _ => v.run(&PatchedFill::<'_, MAX_WORDS>::new(self)),
        }
    }

    /// Bytes stored per session.
    fn width(&self) -> usize {
        self.at.len() * W
    }
}

/// Writes session `i`'s frame: [`Fill::unpatched`] into the buffer, then [`Fill::patch`].
/// The feed stage runs a batch through [`Frames::with_fill`] with the writer as a type, so
/// the choice of feed and the word count are made once a batch, not once a packet.
pub(crate) trait Fill {
    fn unpatched(&self, i: usize) -> &[u8];
    fn patch(&self, i: usize, dst: &mut [u8]);
}

/// Writes the next session's frame into `b` and advances `next` (wrapping at `n`): `load`
/// (the caller's buffer handling) makes `b` hold [`Fill::unpatched`], then [`Fill::patch`]
/// completes it and, with `mac`, the destination MAC is set. The one per-packet writer of
/// the forwarding feed (`FeedBatch`, DPDK mbufs) and of `--stage`'s refill (owned buffers);
/// inlined into each, so the feed's per-packet work is as written in place before.
#[inline(always)]
pub(crate) fn write_next<F: Fill, B: PacketBuf, E>(
    f: &F,
    next: &mut usize,
    n: usize,
    b: &mut B,
    mac: Option<&[u8; 6]>,
    load: impl FnOnce(&mut B, &[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let i = *next;
    *next = if i + 1 == n { 0 } else { i + 1 };
    load(b, f.unpatched(i))?;
    let d = b.data_mut();
    f.patch(i, d);
    if let Some(mac) = mac {
        d[..6].copy_from_slice(mac);
    }
    Ok(())
}

/// A pass over the frames given the writer ([`Frames::with_fill`]).
pub(crate) trait WithFill {
    fn run<F: Fill>(self, f: &F);
}

struct StoredFill<'a>(&'a [Vec<u8>]);

impl Fill for StoredFill<'_> {
    #[inline(always)]
    fn unpatched(&self, i: usize) -> &[u8] {
        &self.0[i]
    }
    #[inline(always)]
    fn patch(&self, _: usize, _: &mut [u8]) {}
}

/// [`Patched`] with its word count `K` as a constant and the words' offsets by value (in
/// registers through a batch, not reloaded after each store).
struct PatchedFill<'a, const K: usize> {
    base: &'a [u8],
    at: [usize; K],
    words: &'a [[u8; W]],
}

impl<'a, const K: usize> PatchedFill<'a, K> {
    fn new(p: &'a Patched) -> Self {
        PatchedFill {
            base: &p.base,
            at: p.at[..K].try_into().expect("K words"),
            words: &p.words,
        }
    }
}

impl<const K: usize> Fill for PatchedFill<'_, K> {
    #[inline(always)]
    fn unpatched(&self, _: usize) -> &[u8] {
        self.base
    }
    /// Each word is the session's own frame there, so the words' order and overlaps do not
    /// matter. The `min` changes nothing (every word lies in the frame by construction) but
    /// lets the compiler drop the bounds check; `K` a constant unrolls the stores.
    #[inline(always)]
    fn patch(&self, i: usize, dst: &mut [u8]) {
        let words: &[[u8; W]; K] = self.words[i * K..(i + 1) * K].try_into().expect("K words");
        let lim = dst.len().checked_sub(W).expect("a frame's length");
        for (&at, w) in self.at.iter().zip(words) {
            let at = at.min(lim);
            dst[at..at + W].copy_from_slice(w);
        }
    }
}

/// The feed's frames, one per session, in session order.
#[derive(Debug, Clone)]
pub(crate) enum Frames {
    Stored(Vec<Vec<u8>>),
    Patched { n: usize, p: Patched },
}

impl Frames {
    /// `kind`'s frames for `frames` (patched falls back to stored, see the module doc).
    pub(crate) fn new(frames: Vec<Vec<u8>>, kind: FeedKind) -> Self {
        match kind {
            FeedKind::Stored => Frames::Stored(frames),
            FeedKind::Patched => match Patched::new(&frames) {
                Some(p) => Frames::Patched { n: frames.len(), p },
                None => {
                    eprintln!("pg-upf: frames differ in length or need more than {MAX_WORDS} patch words: stored feed");
                    Frames::Stored(frames)
                }
            },
        }
    }

    /// Sessions (frames).
    pub(crate) fn count(&self) -> usize {
        match self {
            Frames::Stored(f) => f.len(),
            Frames::Patched { n, .. } => *n,
        }
    }

    /// Session `i`'s frame before its patch: the frame itself (stored) or the base frame.
    #[cfg(test)]
    pub(crate) fn unpatched(&self, i: usize) -> &[u8] {
        match self {
            Frames::Stored(f) => &f[i],
            Frames::Patched { p, .. } => &p.base,
        }
    }

    /// Completes session `i`'s frame in `dst`, which holds [`Frames::unpatched`]`(i)`.
    #[cfg(test)]
    pub(crate) fn patch(&self, i: usize, dst: &mut [u8]) {
        if let Frames::Patched { p, .. } = self {
            p.patch(i, dst);
        }
    }

    /// Runs `v` with this feed's writer.
    pub(crate) fn with_fill<V: WithFill>(&self, v: V) {
        match self {
            Frames::Stored(f) => v.run(&StoredFill(f)),
            Frames::Patched { p, .. } => p.with_fill(v),
        }
    }

    /// What `--feed` ran (for reports): `stored`, or `patched` with its bytes per session.
    pub(crate) fn describe(&self) -> String {
        match self {
            Frames::Stored(_) => "stored".into(),
            Frames::Patched { p, .. } => format!(
                "patched ({} B a session: {W}-byte words at {:?})",
                p.width(),
                p.at
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{frames, Dir};
    use super::*;

    /// Every session's patched frame is its stored frame, byte for byte.
    #[test]
    fn patched_frames_are_the_stored_frames() {
        for dir in [Dir::Ul, Dir::Dl] {
            for size in [64, 512] {
                let fr = frames(dir, size, 10_000);
                let f = Frames::new(fr.clone(), FeedKind::Patched);
                let Frames::Patched { p, .. } = &f else {
                    panic!("{dir:?} {size}: fell back to stored frames")
                };
                assert!(p.width() <= 48, "{dir:?} {size}: {} B a session", p.width());
                assert_eq!(f.count(), fr.len());
                let mut buf = Vec::new();
                for (i, want) in fr.iter().enumerate() {
                    buf.clear();
                    buf.extend_from_slice(f.unpatched(i));
                    f.patch(i, &mut buf);
                    assert_eq!(&buf, want, "{dir:?} {size} session {i}");
                }
            }
        }
    }

    /// Frames of other lengths, or needing more than `MAX_WORDS` words, are stored.
    #[test]
    fn frames_that_do_not_patch_are_stored() {
        let f = Frames::new(vec![vec![1; 20], vec![1; 21]], FeedKind::Patched);
        assert!(matches!(f, Frames::Stored(_)), "lengths differ");
        let f = Frames::new(vec![vec![0u8; 64], vec![1u8; 64]], FeedKind::Patched);
        assert!(matches!(f, Frames::Patched { .. }), "64 bytes: 4 words");
        let f = Frames::new(vec![vec![0u8; 65], vec![1u8; 65]], FeedKind::Patched);
        assert!(matches!(f, Frames::Stored(_)), "65 bytes: 5 words");
    }

    /// One session (or frames all alike): the base frame and one word of its own bytes.
    #[test]
    fn one_frame_is_the_base_frame() {
        let fr = frames(Dir::Ul, 64, 1);
        let f = Frames::new(fr.clone(), FeedKind::Patched);
        let Frames::Patched { p, .. } = &f else {
            panic!("one frame: stored")
        };
        assert_eq!(p.width(), W);
        let mut buf = f.unpatched(0).to_vec();
        f.patch(0, &mut buf);
        assert_eq!(buf, fr[0]);
    }
}
