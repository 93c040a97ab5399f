//! The feed's frames: one per session, kept either as stored frames (`--feed stored`, a
//! `Vec<Vec<u8>>`, as before round 18a) or as one base frame plus, per session, only the bytes
//! in which the session's frame differs from it (`--feed patched`, the default).
//!
//! Why: at 100k uplink sessions the stored frames are ~12.8 MB of 122-byte frames in 128-byte
//! allocations plus 2.4 MB of `Vec` headers, streamed through the L3 once per cycle over the
//! sessions, competing with the UPF's own session state. A NIC writes into a small set of
//! recycled mbufs, and generators of many flows (pktgen-dpdk's range mode, TRex's field
//! engine) copy one template and write the per-flow fields; so does the patched feed. The
//! frames it writes are byte-identical to the stored ones (checked at start-up in debug
//! builds and by the tests below, for every session), and the copy stays charged to the
//! feed: per packet the whole base frame is copied into the buffer, then the patch.
//!
//! The patch: at start-up the byte positions in which any session's frame differs from
//! session 0's are found, runs of them closer than [`GAP`] bytes merged into ranges (the
//! TEID, the QFI, the inner source or destination address, the inner IP and UDP checksums);
//! each session keeps its bytes of those ranges, packed, `width` bytes a session (13-16 for
//! the synthetic sessions). Frames of different lengths, or differing in more than
//! [`MAX_WIDTH`] bytes, fall back to the stored frames.

/// Runs of differing bytes at most this far apart are patched as one range (fewer, longer
/// copies per packet; the bytes between are stored too, as the session's frame has them).
const GAP: usize = 3;
/// Above this many patched bytes a session, the stored frames are used instead.
pub(crate) const MAX_WIDTH: usize = 32;

/// Which feed `--feed` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FeedKind {
    /// One stored frame per session (`Vec<Vec<u8>>`).
    Stored,
    /// One base frame plus each session's differing bytes.
    Patched,
}

/// One base frame and each session's bytes in `ranges`.
#[derive(Debug, Clone)]
pub(crate) struct Patched {
    base: Box<[u8]>,
    /// (offset, length) in the frame, ascending, disjoint.
    ranges: Box<[(usize, usize)]>,
    /// Sum of the ranges' lengths: the bytes stored per session.
    width: usize,
    /// Session `i`'s bytes at `i * width`, the ranges in order.
    bytes: Box<[u8]>,
}

impl Patched {
    /// The patch of `frames`, or `None` if they differ in length or in more than
    /// [`MAX_WIDTH`] bytes (or there are none).
    pub(crate) fn new(frames: &[Vec<u8>]) -> Option<Self> {
        let base = frames.first()?;
        if frames.iter().any(|f| f.len() != base.len()) {
            return None;
        }
        let mut differs = vec![false; base.len()];
        for f in &frames[1..] {
            for ((d, a), b) in differs.iter_mut().zip(f).zip(base) {
                *d |= a != b;
            }
        }
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for (j, _) in differs.iter().enumerate().filter(|(_, d)| **d) {
            match ranges.last_mut() {
                Some((o, l)) if j <= *o + *l + GAP => *l = j + 1 - *o,
                _ => ranges.push((j, 1)),
            }
        }
        let width: usize = ranges.iter().map(|r| r.1).sum();
        if width > MAX_WIDTH {
            return None;
        }
        let mut bytes = Vec::with_capacity(width * frames.len());
        for f in frames {
            for &(o, l) in &ranges {
                bytes.extend_from_slice(&f[o..o + l]);
            }
        }
        let p = Patched {
            base: base.clone().into_boxed_slice(),
            ranges: ranges.into_boxed_slice(),
            width,
            bytes: bytes.into_boxed_slice(),
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

    /// Writes session `i`'s bytes over a copy of the base frame.
    #[inline]
    fn patch(&self, i: usize, dst: &mut [u8]) {
        let mut p = &self.bytes[i * self.width..(i + 1) * self.width];
        for &(o, l) in self.ranges.iter() {
            let (now, rest) = p.split_at(l);
            dst[o..o + l].copy_from_slice(now);
            p = rest;
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
                    eprintln!("pg-upf: frames differ in length or in more than {MAX_WIDTH} bytes: stored feed");
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
    #[inline]
    pub(crate) fn unpatched(&self, i: usize) -> &[u8] {
        match self {
            Frames::Stored(f) => &f[i],
            Frames::Patched { p, .. } => &p.base,
        }
    }

    /// Completes session `i`'s frame in `dst`, which holds [`Frames::unpatched`]`(i)`.
    #[inline]
    pub(crate) fn patch(&self, i: usize, dst: &mut [u8]) {
        if let Frames::Patched { p, .. } = self {
            p.patch(i, dst);
        }
    }

    /// What `--feed` ran (for reports): `stored`, or `patched` with its bytes per session.
    pub(crate) fn describe(&self) -> String {
        match self {
            Frames::Stored(_) => "stored".into(),
            Frames::Patched { p, .. } => format!(
                "patched ({} B a session in ranges (offset, length) {:?})",
                p.width, p.ranges
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
                assert!(p.width <= 16, "{dir:?} {size}: {} B a session", p.width);
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

    #[test]
    fn frames_of_other_lengths_are_stored() {
        let f = Frames::new(vec![vec![1, 2, 3], vec![1, 2]], FeedKind::Patched);
        assert!(matches!(f, Frames::Stored(_)));
        let f = Frames::new(vec![vec![0u8; 64], vec![1u8; 64]], FeedKind::Patched);
        assert!(matches!(f, Frames::Stored(_)), "64 differing bytes");
    }
}
