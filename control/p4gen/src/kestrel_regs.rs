//! Reading the Kestrel registers of the TNA telemetry program (`p4/include/kestrel.p4`) back
//! into the software's bucket layout, so a control plane that dumps one bank of the switch's
//! registers (BF Runtime register sync + read) hands the daemon's export and collector the
//! same `[dir][qid][row][column]` buckets a software window has.
//!
//! Register index of a bucket: `bank ++ dir ++ qid ++ column`, that is 1, 1,
//! `PG_KESTREL_QID_BITS` and `PG_KESTREL_INDEX_BITS` bits; the colour and histogram registers
//! add their 2- or 3-bit bin below it; last-seen drops the bank bit.

use crate::constants;
use peregrine_dataplane::telemetry::kestrel::{Layout, SumBucket, BINS, DIRS};

/// Bits of the QID in a bucket index (the compiled layout's 8 QIDs).
pub const QID_BITS: u32 = 3;
/// Bits of the column (w = 512).
pub const COL_BITS: u32 = 9;

/// One row's registers as the P4 program declares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRegs {
    /// `k_counts`: (packets, bytes) per bucket.
    pub counts: Vec<(u32, u32)>,
    /// `k_colour`: 4 per bucket (green, yellow, red, unused).
    pub colour: Vec<u32>,
    /// `k_lat`, `k_iat`: 8 per bucket.
    pub lat: Vec<u32>,
    pub iat: Vec<u32>,
    /// `k_last_seen`: per (dir, qid, column), no bank bit.
    pub last_seen: Vec<u32>,
}

impl RowRegs {
    /// Zeroed registers of the sizes `kestrel.p4` declares.
    pub fn new() -> RowRegs {
        let n = row_buckets();
        RowRegs {
            counts: vec![(0, 0); n],
            colour: vec![0; n * 4],
            lat: vec![0; n * BINS],
            iat: vec![0; n * BINS],
            last_seen: vec![0; n / 2],
        }
    }
}

impl Default for RowRegs {
    fn default() -> Self {
        RowRegs::new()
    }
}

/// `PG_KESTREL_ROW_BUCKETS`: 2 banks x 2 directions x 2^QID_BITS QIDs x 2^COL_BITS columns.
pub fn row_buckets() -> usize {
    let l = constants::kestrel_layout();
    2 * DIRS * l.qids * l.width
}

/// The register index of bucket (bank, dir, qid, column).
#[inline]
pub fn bucket(bank: u8, dir: u8, qid: u8, col: u32) -> usize {
    ((u32::from(bank & 1) << (1 + QID_BITS + COL_BITS))
        | (u32::from(dir & 1) << (QID_BITS + COL_BITS))
        | (u32::from(qid) & ((1 << QID_BITS) - 1)) << COL_BITS
        | (col & ((1 << COL_BITS) - 1))) as usize
}

/// Bank `bank` of the three rows as the software's buckets, `[dir][qid][row][column]`
/// (`Window::buckets`' order) for the QIDs of `layout`.
pub fn buckets(rows: &[RowRegs; 3], bank: u8, layout: &Layout) -> Vec<SumBucket> {
    let mut out = vec![SumBucket::default(); layout.bank_len()];
    for dir in 0..DIRS {
        for qid in 0..layout.qids {
            let base = layout.sketch_base(dir, qid);
            for (r, regs) in rows.iter().enumerate().take(layout.rows) {
                for col in 0..layout.width {
                    let i = bucket(bank, dir as u8, qid as u8, col as u32);
                    let b = &mut out[base + r * layout.width + col];
                    b.packets = u64::from(regs.counts[i].0);
                    b.bytes = u64::from(regs.counts[i].1);
                    for c in 0..3 {
                        b.colour[c] = u64::from(regs.colour[i * 4 + c]);
                    }
                    for k in 0..BINS {
                        b.lat[k] = u64::from(regs.lat[i * BINS + k]);
                        b.iat[k] = u64::from(regs.iat[i * BINS + k]);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_indices_fill_the_declared_registers() {
        assert_eq!(row_buckets(), 16384);
        assert_eq!(bucket(0, 0, 0, 0), 0);
        assert_eq!(bucket(1, 1, 7, 511), row_buckets() - 1);
        assert_eq!(bucket(0, 1, 0, 0), 4096);
        assert_eq!(bucket(1, 0, 0, 0), 8192);
        // Last-seen drops the bank bit: dir ++ qid ++ col fits half the buckets.
        assert_eq!(bucket(0, 1, 7, 511), row_buckets() / 2 - 1);
    }
}
