//! Entries of the TNA telemetry program (`p4/tna/upf_telemetry.p4`) from a config's
//! `[kestrel]`, `[fridge]` and `[dta]`, computed with the Rust code the software uses:
//!
//! * Kestrel: per-QID index-hash seeds (`kestrel_seed`), and the latency / inter-arrival bin
//!   tables as ternary prefix covers of the 8 bin ranges of each QID's edges (the software's
//!   `layout::bin`; a test checks every rule against it);
//! * the fridge: the first `tcp_handshake` slice's first fridge in its Tofino-compatible mode
//!   (`fridge::tofino::RangeTable`, the same rules `peregrinectl fridge p4-table` prints), the
//!   entry-probability coin and the 32 log2 delay bins;
//! * the DTA reporter: collector and source addresses, redundancy, sampling, Append list, and
//!   the egress mirror session that carries the copies.
//!
//! Every shape the compiled program cannot hold is refused with the key named.

use crate::config::{Config, ConfigError, FridgeConf, Kestrel};
use crate::constants::{self, FRIDGE_FACTOR_ENTRIES, FRIDGE_SLOTS, KESTREL_BIN_ENTRIES};
use peregrine_control::dta::VariantConfig;
use peregrine_control::error::invalid;
use peregrine_control::kestrel::HashConf;
use peregrine_dataplane::telemetry::fridge::tofino::{self, RangeTable, Rule, LOG2_BINS};
use peregrine_dataplane::telemetry::fridge::weight::XMode;
use peregrine_dataplane::telemetry::kestrel::{Layout, BINS, EDGES};
use peregrine_wire::ethernet::Address as MacAddr;
use std::net::Ipv4Addr;

/// A ternary rule: `v & mask == value & mask` selects `bin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ternary {
    pub value: u32,
    pub mask: u32,
    pub bin: u8,
}

impl Ternary {
    pub fn matches(&self, v: u32) -> bool {
        v & self.mask == self.value & self.mask
    }
}

fn prefix_mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// The 8 bins of `edges` as disjoint ternary prefixes covering every u32: bin `k` holds
/// `[edge[k-1], edge[k])` (bin 0 from 0, bin 7 to `u32::MAX`), as `layout::bin` counts.
pub fn bin_rules(edges: &[u32; EDGES]) -> Vec<Ternary> {
    let mut out = Vec::new();
    for k in 0..BINS {
        let lo = if k == 0 { 0 } else { edges[k - 1] };
        let hi = if k == EDGES {
            u32::MAX
        } else if edges[k] == 0 {
            continue;
        } else {
            edges[k] - 1
        };
        if lo > hi {
            continue;
        }
        let mut rules = Vec::new();
        tofino::prefixes(lo, hi, k as u32, &mut rules);
        out.extend(rules.iter().map(|r| Ternary {
            value: r.value,
            mask: prefix_mask(r.len),
            bin: k as u8,
        }));
    }
    out
}

/// One QID's Kestrel entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KestrelQid {
    pub qid: u8,
    pub seed: u32,
    pub lat: Vec<Ternary>,
    pub iat: Vec<Ternary>,
}

/// The fridge's entries.
#[derive(Debug, Clone, PartialEq)]
pub struct FridgeEntries {
    pub slice: String,
    /// Requests travel uplink (vantage n6) or downlink (n3).
    pub req_uplink: bool,
    pub m: u32,
    pub table: RangeTable,
    /// Top `p_exp` bits of the ID hash: all zero for an eligible ID.
    pub coin_mask: u32,
    /// floor(log2(delay)) as LPM rules (`factor` holds the bin).
    pub bins: Vec<Rule>,
}

/// The DTA reporter's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DtaEntries {
    /// Config index of the port the reports leave through.
    pub port: u16,
    pub session: u16,
    pub redundancy: u8,
    pub list_id: u32,
    pub sample_last: u32,
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
}

/// Everything the telemetry program needs beyond the UPF's entries.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Telemetry {
    pub kestrel: Vec<KestrelQid>,
    pub fridge: Option<FridgeEntries>,
    pub dta: Option<DtaEntries>,
}

/// The layout a `[kestrel]` section gives, checked against the compiled one.
pub fn kestrel_layout(k: &Kestrel) -> Result<Layout, ConfigError> {
    if k.hash != HashConf::Crc32 {
        return Err(invalid(
            "kestrel.hash",
            "the P4 twin computes the crc32 index hash: set kestrel.hash = \"crc32\" so the daemon's sketches and the switch's agree",
        ));
    }
    let compiled = constants::kestrel_layout();
    if k.rows != compiled.rows || k.width != compiled.width || k.qids > compiled.qids {
        return Err(invalid(
            "kestrel",
            format!(
                "the P4 program is compiled for rows = {}, width = {}, qids <= {}; this config has {} x {} with {} QIDs",
                compiled.rows, compiled.width, compiled.qids, k.rows, k.width, k.qids
            ),
        ));
    }
    k.layout()
}

fn kestrel(cfg: &Config) -> Result<Vec<KestrelQid>, ConfigError> {
    let Some(k) = &cfg.kestrel else {
        return Ok(Vec::new());
    };
    let l = kestrel_layout(k)?;
    let edges = k.initial_edges(l.qids)?.qids;
    let out: Vec<KestrelQid> = (0..l.qids)
        .map(|q| KestrelQid {
            qid: q as u8,
            seed: l.seeds[q] as u32,
            lat: bin_rules(&edges[q].lat),
            iat: bin_rules(&edges[q].iat),
        })
        .collect();
    let n: usize = out.iter().map(|q| q.lat.len().max(q.iat.len())).sum();
    if n > KESTREL_BIN_ENTRIES {
        return Err(invalid(
            "kestrel.edges",
            format!("{n} bin rules, the bin tables hold {KESTREL_BIN_ENTRIES}"),
        ));
    }
    Ok(out)
}

fn fridge(cfg: &Config) -> Result<Option<FridgeEntries>, ConfigError> {
    let Some(f) = &cfg.fridge else {
        return Ok(None);
    };
    let Some((i, s)) = f
        .slices
        .iter()
        .enumerate()
        .find(|(_, s)| s.kind == "tcp_handshake")
    else {
        return Ok(None);
    };
    let field = |k: &str| format!("fridge.slice[{i}].{k}");
    if f.x_counts != "insertions" {
        return Err(invalid(
            "fridge.x_counts",
            "the P4 fridge stamps its insertion counter: only \"insertions\" is offloaded",
        ));
    }
    let req_uplink = match s.vantage.as_str() {
        "n6" => true,
        "n3" => false,
        v => return Err(invalid(field("vantage"), format!("`{v}` is not n6 or n3"))),
    };
    // The P4 fridge is one fridge(M, p) over every TCP handshake: refuse what it cannot do
    // rather than offload a different measurement than the config asks for.
    if s.fridges.len() > 1 {
        return Err(invalid(
            field("fridges"),
            format!(
                "{} fridges: the P4 program holds one (several fridges stay in software)",
                s.fridges.len()
            ),
        ));
    }
    if !s.qfi.is_empty() || !s.ports.is_empty() {
        let k = if s.qfi.is_empty() { "ports" } else { "qfi" };
        return Err(invalid(
            field(k),
            "the P4 fridge takes every TCP handshake: QFI and port filters stay in software",
        ));
    }
    let spec = match (s.m, s.p, s.fridges.first()) {
        (Some(m), Some(p), _) => FridgeConf { m, p },
        (None, None, Some(f)) => *f,
        _ => return Err(invalid(field("m"), "give m and p, or fridges")),
    };
    if !spec.m.is_power_of_two() || !(2..=FRIDGE_SLOTS).contains(&spec.m) {
        return Err(invalid(
            field("m"),
            format!(
                "the P4 fridge takes a power of two in 2..={FRIDGE_SLOTS}, not {}",
                spec.m
            ),
        ));
    }
    if !(spec.p > 0.0 && spec.p <= 1.0) {
        return Err(invalid(
            field("p"),
            format!("must be in (0, 1], not {}", spec.p),
        ));
    }
    let e = tofino::pow2_p(spec.p);
    if spec.m.trailing_zeros() + e > 32 {
        return Err(invalid(
            field("p"),
            "the slot index and the coin take more than the ID hash's 32 bits",
        ));
    }
    let table = RangeTable::generate(spec.m, e, XMode::Insertions);
    if table.rules.len() > FRIDGE_FACTOR_ENTRIES {
        return Err(invalid(
            field("m"),
            format!(
                "{} factor rules, the table holds {FRIDGE_FACTOR_ENTRIES}",
                table.rules.len()
            ),
        ));
    }
    Ok(Some(FridgeEntries {
        slice: s.name.clone(),
        req_uplink,
        m: spec.m,
        coin_mask: prefix_mask(e as u8),
        table,
        bins: log2_bin_rules(),
    }))
}

/// floor(log2(delay_ns)) as LPM rules (`factor` = the bin): `[2^b, 2^(b+1))` is `2^b/(32-b)`,
/// and 0 (bin 0, as `tofino::log2_bin`) is `0/32`.
pub fn log2_bin_rules() -> Vec<Rule> {
    let mut bins = vec![Rule {
        value: 0,
        len: 32,
        factor: 0,
    }];
    bins.extend((0..LOG2_BINS as u32).map(|b| Rule {
        value: 1 << b,
        len: (32 - b) as u8,
        factor: b,
    }));
    bins
}

fn dta(cfg: &Config) -> Result<Option<DtaEntries>, ConfigError> {
    let Some(d) = &cfg.dta else {
        return Ok(None);
    };
    if d.variant != VariantConfig::Tracked {
        return Err(invalid(
            "dta.variant",
            "the P4 reporter writes the 3-byte NACK-tracking base header: only \"tracked\"",
        ));
    }
    let port = cfg
        .port_index(&d.port)
        .ok_or_else(|| invalid("dta.port", format!("no port named `{}`", d.port)))?;
    let src_mac = cfg.macs()?[usize::from(port)];
    let dst_mac = MacAddr::parse(&d.collector_mac)
        .ok_or_else(|| invalid("dta.collector_mac", "not a MAC address"))?;
    if d.sojourn_sample == 0 {
        return Err(invalid("dta.sojourn_sample", "must be at least 1"));
    }
    if d.sojourn_redundancy == 0 {
        return Err(invalid("dta.sojourn_redundancy", "must be at least 1"));
    }
    Ok(Some(DtaEntries {
        port,
        session: crate::names::DTA_MIRROR_SESSION,
        redundancy: d.sojourn_redundancy,
        list_id: d.drops_list,
        sample_last: d.sojourn_sample - 1,
        src_mac,
        dst_mac,
        src_ip: d.source_ip,
        dst_ip: d.collector_ip,
        src_port: d.source_port,
    }))
}

/// The telemetry entries of `cfg` (empty parts for absent sections).
pub fn build(cfg: &Config) -> Result<Telemetry, ConfigError> {
    Ok(Telemetry {
        kestrel: kestrel(cfg)?,
        fridge: fridge(cfg)?,
        dta: dta(cfg)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_dataplane::telemetry::fridge::tofino::log2_bin;
    use peregrine_dataplane::telemetry::kestrel::layout::bin;

    #[test]
    fn bin_rules_are_disjoint_and_agree_with_the_software_bins() {
        let edges = [1_000, 4_000, 16_000, 64_000, 256_000, 1_024_000, 4_096_000];
        let rules = bin_rules(&edges);
        let mut probes: Vec<u32> = vec![0, 1, u32::MAX, u32::MAX - 1];
        for &e in &edges {
            probes.extend([e - 1, e, e + 1]);
        }
        probes.extend((0..2000u32).map(|i| i.wrapping_mul(2_654_435_761)));
        for v in probes {
            let hits: Vec<_> = rules.iter().filter(|r| r.matches(v)).collect();
            assert_eq!(hits.len(), 1, "{v}: {hits:?}");
            assert_eq!(usize::from(hits[0].bin), bin(&edges, v), "{v}");
        }
        // Edge 0 at 0 leaves bin 0 empty.
        let rules = bin_rules(&[0, 1, 2, 3, 4, 5, 6]);
        assert!(rules.iter().all(|r| r.bin != 0));
        assert_eq!(rules.iter().filter(|r| r.matches(0)).count(), 1);
    }

    #[test]
    fn log2_bin_rules_agree_with_the_software() {
        let bins = log2_bin_rules();
        for v in [0u32, 1, 2, 3, 1023, 1024, 1 << 31, u32::MAX, 123_456_789] {
            let m = bins
                .iter()
                .filter(|r| r.len == 0 || v >> (32 - r.len) == r.value >> (32 - r.len))
                .max_by_key(|r| r.len)
                .unwrap();
            assert_eq!(m.factor as usize, log2_bin(u64::from(v)), "{v}");
        }
    }
}
