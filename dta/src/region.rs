//! The shared-memory region: a file under /dev/shm (or a hugetlbfs mount, or any file)
//! mapped shared with `memmap2`, header page first ([`crate::layout`]). The translator
//! creates it; collectors attach and validate it before touching a byte of data.
//!
//! Every data access goes through atomics (`AtomicU32` / `AtomicU64` slices over the
//! mapping): the translator and the collector run in different processes at the same time.
//! This module holds the crate's `unsafe` for the mapping (turning it into those slices);
//! the other is the `verbs` binding (feature `verbs`).

use crate::layout::{Layout, Sizes, HEADER_LEN};
use crate::Error;
use memmap2::{MmapMut, MmapOptions};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64};

/// A mapped, validated region.
#[derive(Debug)]
pub struct Region {
    map: MmapMut,
    layout: Layout,
    path: PathBuf,
    /// The Key-Write and Key-Increment sections as u64 words (byte offset, words), checked
    /// against the mapping once, here, instead of on every report ([`Region::kw64`]).
    kw64: (usize, usize),
    ki64: (usize, usize),
}

/// `(off, n)` for `n` u64 words at byte offset `off`, if they are 8-aligned and inside a
/// mapping of `len` bytes.
fn section64(off: u64, n: u64, len: usize) -> Option<(usize, usize)> {
    let (off, n) = (usize::try_from(off).ok()?, usize::try_from(n).ok()?);
    let end = n.checked_mul(8)?.checked_add(off)?;
    (off.is_multiple_of(8) && end <= len).then_some((off, n))
}

impl Region {
    fn new(map: MmapMut, layout: Layout, path: PathBuf) -> Result<Region, Error> {
        let len = map.len();
        let sect = |off, n, what: &str| {
            section64(off, n, len).ok_or_else(|| {
                Error::Corrupt(format!(
                    "{}: the {what} section is outside the map",
                    path.display()
                ))
            })
        };
        let kw64 = sect(layout.kw_offset, layout.sizes.kw_slots, "Key-Write")?;
        let ki64 = sect(layout.ki_offset, layout.sizes.ki_slots, "Key-Increment")?;
        Ok(Region {
            map,
            layout,
            path,
            kw64,
            ki64,
        })
    }
}

impl Region {
    /// Create (or truncate) the file at `path`, size it for `sizes`, map it and publish the
    /// header. The data sections start zeroed.
    pub fn create(path: impl AsRef<Path>, sizes: Sizes) -> Result<Region, Error> {
        let layout = Layout::new(sizes)?;
        let path = path.as_ref().to_path_buf();
        let io = |e: std::io::Error| Error::Io(path.display().to_string(), e);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(io)?;
        file.set_len(layout.total_len).map_err(io)?;
        let mut map = map(&file, layout.total_len).map_err(io)?;
        map[..HEADER_LEN as usize].copy_from_slice(&layout.encode());
        Region::new(map, layout, path)
    }

    /// Attach to an existing region and validate its header against the file's length.
    pub fn open(path: impl AsRef<Path>) -> Result<Region, Error> {
        let path = path.as_ref().to_path_buf();
        let io = |e: std::io::Error| Error::Io(path.display().to_string(), e);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < HEADER_LEN {
            return Err(Error::Corrupt(format!(
                "{}: {len} bytes, shorter than the 4096-byte header",
                path.display()
            )));
        }
        let map = map(&file, len).map_err(io)?;
        let layout = Layout::decode(&map[..HEADER_LEN as usize], len)?;
        Region::new(map, layout, path)
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mapping's first byte and length, for registering it with an RDMA NIC (the NIC
    /// then writes into it, as the translator's atomics do).
    #[cfg(feature = "verbs")]
    pub(crate) fn raw(&self) -> (*mut u8, usize) {
        (self.map.as_ptr().cast_mut(), self.map.len())
    }

    /// `n` u64 atomics at byte offset `off` (8-aligned, inside the mapping: the layout
    /// guarantees both for its sections).
    pub(crate) fn u64s(&self, off: u64, n: u64) -> &[AtomicU64] {
        let (off, n) = (off as usize, n as usize);
        assert!(
            off.is_multiple_of(8) && off + n * 8 <= self.map.len(),
            "section out of the map"
        );
        // SAFETY: the range is inside the live mapping (checked above), 8-byte aligned (the
        // mapping is page aligned and `off` is a multiple of 8), and `AtomicU64` has the
        // size and alignment of `u64` with no invalid bit patterns. The slice borrows
        // `self`, so the mapping outlives it; all access to shared memory goes through
        // atomics, which is sound for memory other processes also touch.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off).cast::<AtomicU64>(), n) }
    }

    /// The Key-Write section as its `kw_slots` u64 words (the one-word slots), checked once
    /// when the region was made or opened.
    #[inline(always)]
    pub(crate) fn kw64(&self) -> &[AtomicU64] {
        self.words64(self.kw64)
    }

    /// The Key-Increment section's `ki_slots` counters, checked once as [`kw64`](Self::kw64).
    #[inline(always)]
    pub(crate) fn ki64(&self) -> &[AtomicU64] {
        self.words64(self.ki64)
    }

    #[inline(always)]
    fn words64(&self, (off, n): (usize, usize)) -> &[AtomicU64] {
        // SAFETY: `(off, n)` came from `section64` against this mapping's length in
        // `Region::new` (the mapping never changes size): the range is inside the live
        // mapping and 8-byte aligned; the rest is as for `u64s`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off).cast::<AtomicU64>(), n) }
    }

    /// `n` u32 atomics at byte offset `off` (4-aligned, inside the mapping).
    pub(crate) fn u32s(&self, off: u64, n: u64) -> &[AtomicU32] {
        let (off, n) = (off as usize, n as usize);
        assert!(
            off.is_multiple_of(4) && off + n * 4 <= self.map.len(),
            "section out of the map"
        );
        // SAFETY: as for `u64s`, with 4-byte alignment and `AtomicU32`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off).cast::<AtomicU32>(), n) }
    }
}

fn map(file: &File, len: u64) -> std::io::Result<MmapMut> {
    let len = usize::try_from(len)
        .map_err(|_| std::io::Error::other("region larger than the address space"))?;
    // SAFETY: a shared mapping of a file we opened read-write. Other processes may change
    // the bytes at any time; we never form references to plain (non-atomic) data inside
    // the mapping except the header copy that `Layout::decode` parses and re-validates.
    unsafe { MmapOptions::new().len(len).map_mut(file) }
}
