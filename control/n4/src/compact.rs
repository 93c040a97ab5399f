//! The node's stored form of a session: one exactly sized byte string per session instead of
//! the typed [`Session`] (TS 29.244 section 5.2 rules), to keep memory per session small.
//!
//! The typed rules use wide in-memory types (an `Option<Ipv6Addr>` in every F-TEID, UE IP
//! and Outer Header Creation, `u64` bitmaps, `Option<Vec<u8>>` network instances, a `Vec`
//! per ID list) and a typical session (2 PDRs, 2 FARs, 1 QER, 1 URR) held ~1.1 KiB of them.
//! Encoded with presence flags and LEB128 integers the same session is ~150 bytes. The
//! node decodes a [`Session`] when a request edits it or a caller asks for it; the usage
//! timers decode only the URR they need ([`find_urr`]), without allocating.
//!
//! Layout: peer, CP F-SEID, BAR, then the URRs first (the hot lookups), FARs, QERs, PDRs,
//! each list as a count and the records in ascending rule ID order (the [`RuleMap`] order).
//! Only bytes this module wrote are ever decoded; a decode that fails anyway yields `None`
//! rather than a panic.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use peregrine_pfcp::ie::{
    BitRate, Bitmap, FSeid, GateStatus, OuterHeaderCreation, OuterHeaderRemoval, SdfFilter,
    UeIpAddress, Volume,
};

use crate::rulemap::RuleMap;
use crate::session::{Bar, Far, ForwardingParameters, LocalFTeid, Pdi, Pdr, Qer, Session, Urr};

/// A value with a compact, lossless byte form.
trait Code: Sized {
    fn put(&self, w: &mut Vec<u8>);
    fn get(r: &mut Reader<'_>) -> Option<Self>;
}

/// Cursor over an encoded session.
struct Reader<'a> {
    b: &'a [u8],
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&x, rest) = self.b.split_first()?;
        self.b = rest;
        Some(x)
    }
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.b.len() {
            return None;
        }
        let (x, rest) = self.b.split_at(n);
        self.b = rest;
        Some(x)
    }
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
}

fn put_varint(w: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        w.push(v as u8 | 0x80);
        v >>= 7;
    }
    w.push(v as u8);
}

impl Code for u8 {
    fn put(&self, w: &mut Vec<u8>) {
        w.push(*self);
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        r.byte()
    }
}

impl Code for bool {
    fn put(&self, w: &mut Vec<u8>) {
        w.push(u8::from(*self));
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        match r.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

macro_rules! varint_code {
    ($($t:ty),*) => {$(
        impl Code for $t {
            fn put(&self, w: &mut Vec<u8>) {
                put_varint(w, u64::from(*self));
            }
            fn get(r: &mut Reader<'_>) -> Option<Self> {
                <$t>::try_from(r.varint()?).ok()
            }
        }
    )*};
}
varint_code!(u16, u32, u64);

impl Code for Ipv4Addr {
    fn put(&self, w: &mut Vec<u8>) {
        w.extend_from_slice(&self.octets());
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        let b: [u8; 4] = r.take(4)?.try_into().ok()?;
        Some(b.into())
    }
}

impl Code for Ipv6Addr {
    fn put(&self, w: &mut Vec<u8>) {
        w.extend_from_slice(&self.octets());
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        let b: [u8; 16] = r.take(16)?.try_into().ok()?;
        Some(b.into())
    }
}

impl<T: Code> Code for Option<T> {
    fn put(&self, w: &mut Vec<u8>) {
        match self {
            None => w.push(0),
            Some(x) => {
                w.push(1);
                x.put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        match r.byte()? {
            0 => Some(None),
            1 => Some(Some(T::get(r)?)),
            _ => None,
        }
    }
}

/// Byte strings (network instance, flow description) and lists: length, then the items.
trait Item: Code {}
impl Item for u32 {}
impl Item for SdfFilter {}

impl Code for Vec<u8> {
    fn put(&self, w: &mut Vec<u8>) {
        put_varint(w, self.len() as u64);
        w.extend_from_slice(self);
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        let n = usize::try_from(r.varint()?).ok()?;
        Some(r.take(n)?.to_vec())
    }
}

fn put_list<T: Item>(w: &mut Vec<u8>, v: &[T]) {
    put_varint(w, v.len() as u64);
    for x in v {
        x.put(w);
    }
}

fn get_list<T: Item>(r: &mut Reader<'_>) -> Option<Vec<T>> {
    let n = usize::try_from(r.varint()?).ok()?;
    // Each item takes at least one byte: a bad count cannot reserve more than the input.
    let mut v = Vec::with_capacity(n.min(r.b.len()));
    for _ in 0..n {
        v.push(T::get(r)?);
    }
    Some(v)
}

impl Code for Bitmap {
    fn put(&self, w: &mut Vec<u8>) {
        self.0.put(w);
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        Some(Bitmap(u64::get(r)?))
    }
}

/// Structs: their fields in declaration order.
macro_rules! struct_code {
    ($t:ident { $($f:ident),* $(,)? }) => {
        impl Code for $t {
            fn put(&self, w: &mut Vec<u8>) {
                $(self.$f.put(w);)*
            }
            fn get(r: &mut Reader<'_>) -> Option<Self> {
                Some($t { $($f: Code::get(r)?,)* })
            }
        }
    };
}

struct_code!(FSeid { seid, ipv4, ipv6 });
struct_code!(Bar {
    id,
    suggested_buffering_packets_count
});
struct_code!(Volume {
    total,
    ul,
    dl,
    total_packets,
    ul_packets,
    dl_packets
});
struct_code!(Urr {
    id,
    measurement_method,
    reporting_triggers,
    volume_threshold,
    time_threshold,
    volume_quota,
    time_quota,
    measurement_period
});
struct_code!(OuterHeaderCreation {
    description,
    teid,
    ipv4,
    ipv6,
    port,
    c_tag,
    s_tag
});
struct_code!(ForwardingParameters {
    destination_interface,
    network_instance,
    outer_header_creation
});
struct_code!(Far {
    id,
    apply_action,
    forwarding,
    bar_id
});
struct_code!(GateStatus { ul, dl });
struct_code!(BitRate { ul, dl });
struct_code!(Qer {
    id,
    gate,
    mbr,
    gbr,
    qfi
});
struct_code!(LocalFTeid { teid, ipv4, ipv6 });
struct_code!(UeIpAddress {
    sd,
    chv4,
    chv6,
    ipv4,
    ipv6,
    ipv6_prefix_delegation_bits,
    ipv6_prefix_length
});
struct_code!(SdfFilter {
    flow_description,
    tos_traffic_class,
    spi,
    flow_label,
    sdf_filter_id
});
struct_code!(OuterHeaderRemoval {
    description,
    ext_header_deletion
});

impl Code for Pdi {
    fn put(&self, w: &mut Vec<u8>) {
        self.source_interface.put(w);
        self.f_teid.put(w);
        self.network_instance.put(w);
        self.ue_ip.put(w);
        put_list(w, &self.sdf_filters);
        self.qfi.put(w);
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        Some(Pdi {
            source_interface: Code::get(r)?,
            f_teid: Code::get(r)?,
            network_instance: Code::get(r)?,
            ue_ip: Code::get(r)?,
            sdf_filters: get_list(r)?,
            qfi: Code::get(r)?,
        })
    }
}

impl Code for Pdr {
    fn put(&self, w: &mut Vec<u8>) {
        self.id.put(w);
        self.precedence.put(w);
        self.pdi.put(w);
        self.outer_header_removal.put(w);
        self.far_id.put(w);
        put_list(w, &self.qer_ids);
        put_list(w, &self.urr_ids);
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        Some(Pdr {
            id: Code::get(r)?,
            precedence: Code::get(r)?,
            pdi: Code::get(r)?,
            outer_header_removal: Code::get(r)?,
            far_id: Code::get(r)?,
            qer_ids: get_list(r)?,
            urr_ids: get_list(r)?,
        })
    }
}

impl Code for SocketAddr {
    fn put(&self, w: &mut Vec<u8>) {
        match self {
            SocketAddr::V4(a) => {
                w.push(4);
                a.ip().put(w);
                a.port().put(w);
            }
            SocketAddr::V6(a) => {
                w.push(6);
                a.ip().put(w);
                a.port().put(w);
                a.flowinfo().put(w);
                a.scope_id().put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        Some(match r.byte()? {
            4 => SocketAddr::V4(SocketAddrV4::new(Code::get(r)?, Code::get(r)?)),
            6 => SocketAddr::V6(SocketAddrV6::new(
                Code::get(r)?,
                Code::get(r)?,
                Code::get(r)?,
                Code::get(r)?,
            )),
            _ => return None,
        })
    }
}

fn put_rules<K: Ord, V: Code>(w: &mut Vec<u8>, m: &RuleMap<K, V>) {
    put_varint(w, m.len() as u64);
    for v in m.values() {
        v.put(w);
    }
}

/// The rules of one kind; the map key is the rule's own ID (`key`).
fn get_rules<K: Ord, V: Code>(r: &mut Reader<'_>, key: fn(&V) -> K) -> Option<RuleMap<K, V>> {
    let n = r.varint()?;
    let mut m = RuleMap::new();
    for _ in 0..n {
        let v = V::get(r)?;
        m.insert(key(&v), v);
    }
    Some(m)
}

/// The session's encoding (`up_seid` is the node's key, not stored).
pub(crate) fn encode(s: &Session) -> Box<[u8]> {
    let mut w = Vec::with_capacity(256);
    s.peer.put(&mut w);
    s.cp_f_seid.put(&mut w);
    s.bar.put(&mut w);
    put_rules(&mut w, &s.urrs);
    put_rules(&mut w, &s.fars);
    put_rules(&mut w, &s.qers);
    put_rules(&mut w, &s.pdrs);
    w.into_boxed_slice()
}

/// The header fields every response needs: (peer, CP F-SEID).
pub(crate) fn peer(b: &[u8]) -> Option<(SocketAddr, FSeid)> {
    let mut r = Reader { b };
    Some((Code::get(&mut r)?, Code::get(&mut r)?))
}

/// The URR `id` of an encoded session, decoded alone (no allocation).
pub(crate) fn find_urr(b: &[u8], id: u32) -> Option<Urr> {
    let mut r = Reader { b };
    let _: (SocketAddr, FSeid, Option<Bar>) =
        (Code::get(&mut r)?, Code::get(&mut r)?, Code::get(&mut r)?);
    for _ in 0..r.varint()? {
        let u = Urr::get(&mut r)?;
        if u.id == id {
            return Some(u);
        }
    }
    None
}

/// The whole session back.
pub(crate) fn decode(up_seid: u64, b: &[u8]) -> Option<Session> {
    let mut r = Reader { b };
    let peer = Code::get(&mut r)?;
    let mut s = Session::new(up_seid, Code::get(&mut r)?, peer);
    s.bar = Code::get(&mut r)?;
    s.urrs = get_rules(&mut r, |u: &Urr| u.id)?;
    s.fars = get_rules(&mut r, |f: &Far| f.id)?;
    s.qers = get_rules(&mut r, |q: &Qer| q.id)?;
    s.pdrs = get_rules(&mut r, |p: &Pdr| p.id)?;
    r.b.is_empty().then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_testkit::rng::{self, RngCore, Xoshiro256PlusPlus};

    /// The test kit's seeded PRNG, with the draws these tests need.
    struct Rng(Xoshiro256PlusPlus);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0.next_u64()
        }
        fn some(&mut self) -> bool {
            !self.next().is_multiple_of(3)
        }
        fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
            self.some().then(|| f(self))
        }
        /// Small and boundary values, so both short and long varints occur.
        fn int(&mut self) -> u64 {
            match self.next() % 4 {
                0 => self.next() % 200,
                1 => u64::MAX - self.next() % 2,
                _ => self.next() >> (self.next() % 64),
            }
        }
    }

    fn bytes(r: &mut Rng) -> Vec<u8> {
        (0..r.next() % 40).map(|_| r.next() as u8).collect()
    }
    fn v4(r: &mut Rng) -> Ipv4Addr {
        Ipv4Addr::from(r.next() as u32)
    }
    fn v6(r: &mut Rng) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(r.next()) << 64 | u128::from(r.next()))
    }
    fn vol(r: &mut Rng) -> Volume {
        Volume {
            total: r.opt(Rng::int),
            ul: r.opt(Rng::int),
            dl: r.opt(Rng::int),
            total_packets: r.opt(Rng::int),
            ul_packets: r.opt(Rng::int),
            dl_packets: r.opt(Rng::int),
        }
    }

    fn random_session(r: &mut Rng) -> Session {
        let peer = if r.some() {
            SocketAddr::new(v4(r).into(), r.next() as u16)
        } else {
            SocketAddr::V6(SocketAddrV6::new(
                v6(r),
                r.next() as u16,
                r.next() as u32,
                r.next() as u32,
            ))
        };
        let fseid = FSeid {
            seid: r.int(),
            ipv4: r.opt(v4),
            ipv6: r.opt(v6),
        };
        let mut s = Session::new(r.next(), fseid, peer);
        s.bar = r.opt(|r| Bar {
            id: r.next() as u8,
            suggested_buffering_packets_count: r.opt(|r| r.next() as u8),
        });
        for _ in 0..r.next() % 4 {
            let u = Urr {
                id: r.int() as u32,
                measurement_method: Bitmap(r.int()),
                reporting_triggers: Bitmap(r.int()),
                volume_threshold: r.opt(vol),
                time_threshold: r.opt(|r| r.int() as u32),
                volume_quota: r.opt(vol),
                time_quota: r.opt(|r| r.int() as u32),
                measurement_period: r.opt(|r| r.int() as u32),
            };
            s.urrs.insert(u.id, u);
        }
        for _ in 0..r.next() % 4 {
            let f = Far {
                id: r.int() as u32,
                apply_action: Bitmap(r.int()),
                forwarding: r.opt(|r| ForwardingParameters {
                    destination_interface: r.next() as u8,
                    network_instance: r.opt(bytes),
                    outer_header_creation: r.opt(|r| OuterHeaderCreation {
                        description: r.int() as u16,
                        teid: r.opt(|r| r.int() as u32),
                        ipv4: r.opt(v4),
                        ipv6: r.opt(v6),
                        port: r.opt(|r| r.int() as u16),
                        c_tag: r.opt(|r| r.int() as u32),
                        s_tag: r.opt(|r| r.int() as u32),
                    }),
                }),
                bar_id: r.opt(|r| r.next() as u8),
            };
            s.fars.insert(f.id, f);
        }
        for _ in 0..r.next() % 4 {
            let q = Qer {
                id: r.int() as u32,
                gate: GateStatus {
                    ul: r.next() as u8,
                    dl: r.next() as u8,
                },
                mbr: r.opt(|r| BitRate {
                    ul: r.int(),
                    dl: r.int(),
                }),
                gbr: r.opt(|r| BitRate {
                    ul: r.int(),
                    dl: r.int(),
                }),
                qfi: r.opt(|r| r.next() as u8),
            };
            s.qers.insert(q.id, q);
        }
        for _ in 0..r.next() % 5 {
            let sdf = (0..r.next() % 3)
                .map(|_| SdfFilter {
                    flow_description: r.opt(bytes),
                    tos_traffic_class: r.opt(|r| r.int() as u16),
                    spi: r.opt(|r| r.int() as u32),
                    flow_label: r.opt(|r| r.int() as u32),
                    sdf_filter_id: r.opt(|r| r.int() as u32),
                })
                .collect();
            let p = Pdr {
                id: r.int() as u16,
                precedence: r.int() as u32,
                pdi: Pdi {
                    source_interface: r.next() as u8,
                    f_teid: r.opt(|r| LocalFTeid {
                        teid: r.int() as u32,
                        ipv4: r.opt(v4),
                        ipv6: r.opt(v6),
                    }),
                    network_instance: r.opt(bytes),
                    ue_ip: r.opt(|r| UeIpAddress {
                        sd: r.some(),
                        chv4: r.some(),
                        chv6: r.some(),
                        ipv4: r.opt(v4),
                        ipv6: r.opt(v6),
                        ipv6_prefix_delegation_bits: r.opt(|r| r.next() as u8),
                        ipv6_prefix_length: r.opt(|r| r.next() as u8),
                    }),
                    sdf_filters: sdf,
                    qfi: r.opt(|r| r.next() as u8),
                },
                outer_header_removal: r.opt(|r| OuterHeaderRemoval {
                    description: r.next() as u8,
                    ext_header_deletion: r.opt(|r| r.next() as u8),
                }),
                far_id: r.int() as u32,
                qer_ids: (0..r.next() % 4).map(|_| r.int() as u32).collect(),
                urr_ids: (0..r.next() % 4).map(|_| r.int() as u32).collect(),
            };
            s.pdrs.insert(p.id, p);
        }
        s
    }

    #[test]
    fn random_sessions_round_trip() {
        let mut r = Rng(rng::seeded(0x2545_f491_4f6c_dd1d));
        for _ in 0..3000 {
            let s = random_session(&mut r);
            let b = encode(&s);
            assert_eq!(decode(s.up_seid, &b).as_ref(), Some(&s));
            assert_eq!(peer(&b), Some((s.peer, s.cp_f_seid)));
            for (id, u) in &s.urrs {
                assert_eq!(find_urr(&b, *id).as_ref(), Some(u));
            }
            if !s.urrs.contains_key(&7) {
                assert_eq!(find_urr(&b, 7), None);
            }
        }
    }

    #[test]
    fn truncated_or_extended_input_decodes_to_none() {
        let mut r = Rng(rng::seeded(7));
        for _ in 0..200 {
            let s = random_session(&mut r);
            let b = encode(&s).into_vec();
            for cut in 0..b.len() {
                assert_eq!(decode(1, &b[..cut]), None, "cut at {cut}");
            }
            let mut longer = b.clone();
            longer.push(0);
            assert_eq!(decode(1, &longer), None);
        }
    }
}
