//! The reporter's feeds from other features (`[dta.int]`, `[dta.kestrel]`, `[dta.fridge]`;
//! docs/dta.md "Reporter"): how a record of the telemetry bus (`crate::telemetry`) becomes
//! DTA primitives, and the keys a collector computes to query them.
//!
//! - INT sink report -> Postcarding: one postcard per hop, key [`int_flow_key`] of the
//!   report's 5-tuple, hop index in path order, data the configured per-hop value.
//! - Kestrel per-(direction, TEID, QFI) window estimate -> Key-Increment keyed by
//!   [`kestrel_key`]: the counter sums the key's packets (or bytes) over the windows, so the
//!   collector's min over N is the total the Kestrel exports gave for the key.
//! - Fridge matched delay sample -> Append to a list, data [`fridge_data`].

use crate::telemetry::Telemetry;
use peregrine_int::report::{HopData, IntReport};
use peregrine_wire::dta::Primitive;
use serde::Deserialize;

/// Which per-hop value of an INT sink report a postcard carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntValue {
    /// The hop's node ID (path tracing, the seed's Postcarding use): must fit `value_bits`.
    #[default]
    NodeId,
    /// The Hop_Lim the hop wrote (IOAM): must fit `value_bits`.
    HopLimit,
    /// The hop's timestamp in microseconds, modulo 2^`value_bits`.
    TimestampUs,
    /// The hop's namespace counters (wrapping on the wire already), modulo 2^`value_bits`.
    RxPackets,
    TxPackets,
    RxBytes,
    TxBytes,
}

/// `[dta.int]`: INT sink per-hop values as Postcarding.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntFeed {
    #[serde(default)]
    pub value: IntValue,
    /// The translator's Postcarding value range V = [0, 2^bits) (`pc_value_bits`).
    #[serde(default = "default_bits")]
    pub value_bits: u8,
}

fn default_bits() -> u8 {
    24
}

/// `[dta.kestrel]`: per-(TEID, QFI) window counts as Key-Increment.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KestrelFeed {
    #[serde(default)]
    pub count: KestrelCount,
    #[serde(default = "default_n")]
    pub redundancy: u8,
}

fn default_n() -> u8 {
    2
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KestrelCount {
    #[default]
    Packets,
    Bytes,
}

/// `[dta.fridge]`: matched delay samples as Append.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FridgeFeed {
    pub list: u32,
    #[serde(default)]
    pub encoding: FridgeEncoding,
}

/// How a delay sample becomes one u32 entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FridgeEncoding {
    /// The delay in microseconds (rounded down), saturated at 2^32 - 1.
    #[default]
    Us,
    /// `slice << 24 | µs`: the slice index (its `[[fridge.slice]]` order, below 256) in the
    /// top byte, the delay in µs saturated at 2^24 - 1 (16.7 s) below.
    SliceUs,
}

impl IntFeed {
    pub fn check(&self) -> Result<(), String> {
        match self.value_bits {
            1..=32 => Ok(()),
            b => Err(format!("value_bits must be 1..=32, got {b}")),
        }
    }
}

/// The Postcarding key of an INT flow: CRC-32 (IEEE) over the 37 bytes
/// `src (16) | dst (16) | protocol (1) | source port (2, BE) | destination port (2, BE)`
/// of the report's 5-tuple (IPv4 flows as IPv4-mapped IPv6 addresses, as the report holds
/// them).
pub fn int_flow_key(r: &IntReport) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&r.src.octets());
    h.update(&r.dst.octets());
    h.update(&[r.proto]);
    h.update(&r.sport.to_be_bytes());
    h.update(&r.dport.to_be_bytes());
    h.finalize()
}

/// A hop's value as a postcard carries it, `None` when the hop did not record that field or
/// (node ID, hop limit) it does not fit in `bits`.
pub fn int_hop_value(h: &HopData, v: IntValue, bits: u8) -> Option<u32> {
    let mask = |x: u64| (x & (u64::MAX >> (64 - u32::from(bits)))) as u32;
    let fits = |x: u64| (x >> bits == 0).then_some(x as u32);
    match v {
        IntValue::NodeId => fits(u64::from(h.node_id)),
        IntValue::HopLimit => fits(u64::from(h.hop_limit?)),
        IntValue::TimestampUs => Some(mask(h.timestamp_ns? / 1000)),
        IntValue::RxPackets => Some(mask(u64::from(h.rx_packets?))),
        IntValue::TxPackets => Some(mask(u64::from(h.tx_packets?))),
        IntValue::RxBytes => Some(mask(u64::from(h.rx_bytes?))),
        IntValue::TxBytes => Some(mask(u64::from(h.tx_bytes?))),
    }
}

/// The Key-Increment key of a Kestrel key: CRC-32 (IEEE) over the 6 bytes
/// `direction (0 uplink, 1 downlink) | TEID (BE) | QFI`.
pub fn kestrel_key(dir: u8, teid: u32, qfi: u8) -> u32 {
    let t = teid.to_be_bytes();
    crc32fast::hash(&[dir, t[0], t[1], t[2], t[3], qfi])
}

/// The Append entry of a fridge delay sample.
pub fn fridge_data(slice: u16, delay_ns: u64, e: FridgeEncoding) -> u32 {
    let us = delay_ns / 1000;
    match e {
        FridgeEncoding::Us => us.min(u64::from(u32::MAX)) as u32,
        FridgeEncoding::SliceUs => u32::from(slice as u8) << 24 | us.min((1 << 24) - 1) as u32,
    }
}

/// The feeds a reporter runs, and what they skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Feeds {
    pub int: Option<IntFeed>,
    pub kestrel: Option<KestrelFeed>,
    pub fridge: Option<FridgeFeed>,
}

/// Counters of [`Feeds::primitives`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedCounts {
    pub int_paths: u64,
    /// INT reports not sent: a hop lacked the value or it did not fit.
    pub int_skipped: u64,
    pub kestrel_records: u64,
    pub fridge_samples: u64,
}

impl Feeds {
    /// The primitives of one bus record (none when its feed is off), given to `out`.
    pub fn primitives(&self, t: &Telemetry, c: &mut FeedCounts, mut out: impl FnMut(Primitive)) {
        match (t, &self.int, &self.kestrel, &self.fridge) {
            (Telemetry::IntSink(r), Some(f), _, _) => {
                let mut vals = [0u32; peregrine_int::report::MAX_HOPS];
                let hops = r.hops();
                for (v, h) in vals.iter_mut().zip(hops) {
                    match int_hop_value(h, f.value, f.value_bits) {
                        Some(x) => *v = x,
                        None => {
                            c.int_skipped += 1;
                            return;
                        }
                    }
                }
                c.int_paths += 1;
                let key = int_flow_key(r);
                for (i, &data) in vals[..hops.len()].iter().enumerate() {
                    out(Primitive::Postcard {
                        key,
                        hop: i as u8,
                        data,
                    });
                }
            }
            (
                Telemetry::KestrelKey {
                    dir,
                    teid,
                    qfi,
                    packets,
                    bytes,
                    ..
                },
                _,
                Some(f),
                _,
            ) => {
                c.kestrel_records += 1;
                out(Primitive::KeyIncrement {
                    redundancy: f.redundancy,
                    key: kestrel_key(*dir, *teid, *qfi),
                    counter: match f.count {
                        KestrelCount::Packets => *packets,
                        KestrelCount::Bytes => *bytes,
                    },
                });
            }
            (
                Telemetry::FridgeSample {
                    slice, delay_ns, ..
                },
                _,
                _,
                Some(f),
            ) => {
                c.fridge_samples += 1;
                out(Primitive::Append {
                    list: f.list,
                    data: fridge_data(*slice, *delay_ns, f.encoding),
                });
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_int_report_becomes_one_postcard_per_hop_or_none_when_a_value_does_not_fit() {
        let mut r = IntReport::default();
        for (id, ts) in [(7u32, 5_000_000u64), (9, 6_000_000)] {
            r.push_hop(HopData {
                node_id: id,
                timestamp_ns: Some(ts),
                ..HopData::default()
            });
        }
        let mut f = Feeds {
            int: Some(IntFeed {
                value: IntValue::NodeId,
                value_bits: 24,
            }),
            ..Feeds::default()
        };
        let mut c = FeedCounts::default();
        let mut got = Vec::new();
        f.primitives(&Telemetry::IntSink(Box::new(r)), &mut c, |p| got.push(p));
        let key = int_flow_key(&r);
        assert_eq!(
            got,
            vec![
                Primitive::Postcard {
                    key,
                    hop: 0,
                    data: 7
                },
                Primitive::Postcard {
                    key,
                    hop: 1,
                    data: 9
                }
            ]
        );
        // Timestamps wrap into the value range; a missing field or a wide node ID skips.
        f.int.as_mut().unwrap().value = IntValue::TimestampUs;
        f.int.as_mut().unwrap().value_bits = 12;
        got.clear();
        f.primitives(&Telemetry::IntSink(Box::new(r)), &mut c, |p| got.push(p));
        assert!(matches!(got[1], Primitive::Postcard { data, .. } if data == 6000 % 4096));
        for (v, bits) in [(IntValue::HopLimit, 24), (IntValue::NodeId, 3)] {
            f.int = Some(IntFeed {
                value: v,
                value_bits: bits,
            });
            got.clear();
            f.primitives(&Telemetry::IntSink(Box::new(r)), &mut c, |p| got.push(p));
            assert!(got.is_empty());
        }
        assert_eq!((c.int_paths, c.int_skipped), (2, 2));
    }

    #[test]
    fn keys_and_encodings_are_the_documented_ones() {
        assert_eq!(
            kestrel_key(1, 0x0102_0304, 9),
            crc32fast::hash(&[1, 1, 2, 3, 4, 9])
        );
        assert_eq!(fridge_data(3, 30_500_999, FridgeEncoding::Us), 30_500);
        assert_eq!(fridge_data(3, u64::MAX, FridgeEncoding::Us), u32::MAX);
        assert_eq!(
            fridge_data(3, 30_500_999, FridgeEncoding::SliceUs),
            3 << 24 | 30_500
        );
        assert_eq!(
            fridge_data(3, 20_000_000_000, FridgeEncoding::SliceUs),
            3 << 24 | 0xff_ffff
        );
        let f = Feeds {
            kestrel: Some(KestrelFeed {
                count: KestrelCount::Bytes,
                redundancy: 3,
            }),
            ..Feeds::default()
        };
        let mut got = Vec::new();
        let t = Telemetry::KestrelKey {
            seq: 4,
            dir: 0,
            teid: 5,
            qfi: 9,
            packets: 2,
            bytes: 300,
        };
        f.primitives(&t, &mut FeedCounts::default(), |p| got.push(p));
        assert_eq!(
            got,
            vec![Primitive::KeyIncrement {
                redundancy: 3,
                key: kestrel_key(0, 5, 9),
                counter: 300
            }]
        );
        // A record whose feed is off gives nothing.
        got.clear();
        let s = Telemetry::FridgeSample {
            slice: 0,
            fridge: 0,
            delay_ns: 9,
        };
        f.primitives(&s, &mut FeedCounts::default(), |p| got.push(p));
        assert!(got.is_empty());
    }
}
