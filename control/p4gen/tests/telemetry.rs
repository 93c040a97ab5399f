//! The TNA telemetry program's entries and declarations against the Rust code they come from:
//! Kestrel's seeds and crc32 index hash (over the field widths the P4 text declares) cut the
//! columns the software sketch uses; the generated bin, factor and log2 tables answer as the
//! software's functions do; a DTA report laid out field by field from the P4 header
//! declarations is byte for byte what `peregrine_wire::dta` emits; shapes the program cannot
//! hold are refused by key; the structural check covers every telemetry name.

use peregrine_dataplane::telemetry::fridge::tofino::{log2_bin, pow2_p, RangeTable};
use peregrine_dataplane::telemetry::fridge::weight::XMode;
use peregrine_dataplane::telemetry::kestrel::layout::{bin, MAX_ROWS};
use peregrine_dataplane::telemetry::kestrel::{
    Bank, EdgeSet, IndexHash, QidEdges, Sample, Sketcher, SumBucket,
};
use peregrine_p4gen::config::{Config, ConfigError};
use peregrine_p4gen::kestrel_regs::{self, RowRegs};
use peregrine_p4gen::{bfrt, check, constants, model, names, p4decl, telemetry};
use peregrine_wire::dta::{self, FrameAddrs, Primitive, Repr, Variant};
use peregrine_wire::ethernet::Address as MacAddr;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example() -> String {
    std::fs::read_to_string(root().join("examples/p4-telemetry.toml")).unwrap()
}

fn rendered() -> (Config, Vec<Value>) {
    let cfg = Config::parse(&example()).unwrap();
    let e = model::build(&cfg, &model::Options::default()).unwrap();
    let t = telemetry::build(&cfg).unwrap();
    let v = bfrt::render_telemetry(&e, &t, &bfrt::DevPorts::new());
    (cfg, v.as_array().unwrap().clone())
}

fn rows<'a>(v: &'a [Value], t: &names::Table) -> Vec<&'a Value> {
    let name = format!("pipe.{}", t.path());
    v.iter()
        .filter(|r| r["table_name"] == name.as_str())
        .collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// Field widths of `header`/`struct` `ty` in the P4 text (typedefs of headers.p4 resolved).
fn widths(src: &str, ty: &str) -> Vec<(String, u32)> {
    let start = src
        .find(&format!("header {ty} {{"))
        .or_else(|| src.find(&format!("struct {ty} {{")))
        .unwrap_or_else(|| panic!("no {ty}"));
    let body = &src[start..start + src[start..].find('}').unwrap()];
    body.lines()
        .skip(1)
        .filter_map(|l| {
            let l = l.split("//").next().unwrap().trim().trim_end_matches(';');
            let (t, name) = l.rsplit_once(' ')?;
            let w = match t.trim() {
                "mac_addr_t" => 48,
                "ipv4_addr_t" => 32,
                t => t.strip_prefix("bit<")?.strip_suffix('>')?.parse().ok()?,
            };
            Some((name.to_string(), w))
        })
        .collect()
}

fn width_of(src: &str, ty: &str, field: &str) -> u32 {
    widths(src, ty)
        .into_iter()
        .find(|(n, _)| n == field)
        .unwrap_or_else(|| panic!("{ty}.{field}"))
        .1
}

#[test]
fn kestrel_seeds_and_the_p4_hash_cut_the_software_columns() {
    let (cfg, v) = rendered();
    let layout = telemetry::kestrel_layout(cfg.kestrel.as_ref().unwrap()).unwrap();
    assert_eq!(layout.hash, IndexHash::Crc32);
    // The P4 field list {em.k_seed, eh.bridge.teid, eh.bridge.qfi} is 32 + 32 + 8 bits: the
    // 9 big-endian bytes the Rust crc32 key hash takes.
    let src = p4decl::read_program(&root().join("p4/tna/upf_telemetry.p4")).unwrap();
    assert_eq!(width_of(&src, "pg_egress_meta_t", "k_seed"), 32);
    assert_eq!(width_of(&src, "pg_bridge_h", "teid"), 32);
    assert_eq!(width_of(&src, "pg_bridge_h", "qfi"), 8);
    let k = src.find("kestrel_hash.get({em.k_seed, eh.bridge.teid, eh.bridge.qfi})");
    assert!(k.is_some(), "the P4 hash's field list changed");
    let seeds: BTreeMap<u64, u64> = rows(&v, &names::KESTREL_SEED)
        .iter()
        .map(|r| {
            (
                u(&r["key"]["eh.bridge.qid"]["value"]),
                u(&r["data"]["seed"]),
            )
        })
        .collect();
    assert_eq!(seeds.len(), layout.qids);
    for (&q, &seed) in &seeds {
        assert_eq!(seed, layout.seeds[q as usize], "QID {q}");
        for (teid, qfi) in [(0x11u32, 9u8), (1, 1), (0xdead_beef, 63), (0, 0)] {
            // What Hash<bit<32>>(CUSTOM, CRC-32) computes over the field list.
            let mut bytes = (seed as u32).to_be_bytes().to_vec();
            bytes.extend(teid.to_be_bytes());
            bytes.push(qfi);
            let h = crc32fast::hash(&bytes);
            let mut cols = [0; MAX_ROWS];
            layout.columns(q as usize, teid, qfi, &mut cols);
            for (row, &c) in cols.iter().enumerate().take(3) {
                assert_eq!((h >> (9 * row)) & 511, c as u32, "QID {q} row {row}");
            }
        }
    }
}

fn ternary_bins(rs: &[&Value], qid: u64, field: &str) -> Vec<(u32, u32, usize)> {
    rs.iter()
        .filter(|r| u(&r["key"]["eh.bridge.qid"]["value"]) == qid)
        .map(|r| {
            let k = &r["key"][field];
            (
                u(&k["value"]) as u32,
                u(&k["mask"]) as u32,
                u(&r["data"]["bin"]) as usize,
            )
        })
        .collect()
}

#[test]
fn bin_tables_answer_as_the_software_bins() {
    let (_, v) = rendered();
    let lat0 = [2000, 5000, 10000, 20000, 50000, 100000, 500000];
    let iat0 = [1000, 10000, 50000, 100000, 500000, 1000000, 5000000];
    let lat = rows(&v, &names::KESTREL_LAT_BIN);
    for qid in 0..8u64 {
        let (le, ie) = if qid == 0 {
            (lat0, iat0)
        } else {
            (QidEdges::DEFAULT.lat, QidEdges::DEFAULT.iat)
        };
        let lrules = ternary_bins(&lat, qid, "em.sojourn");
        let mut probes = vec![0u32, 1, u32::MAX];
        for e in le.iter().chain(&ie) {
            probes.extend([e - 1, *e, e + 1]);
        }
        probes.extend((0..500u32).map(|i| i.wrapping_mul(2_654_435_761)));
        for &x in &probes {
            let hits: Vec<_> = lrules.iter().filter(|r| x & r.1 == r.0 & r.1).collect();
            assert_eq!(hits.len(), 1, "QID {qid} latency {x}");
            assert_eq!(hits[0].2, bin(&le, x), "QID {qid} latency {x}");
        }
        for t in &names::KESTREL_IAT_BIN {
            let irules = ternary_bins(&rows(&v, t), qid, "gap");
            for &x in &probes {
                let hits: Vec<_> = irules.iter().filter(|r| x & r.1 == r.0 & r.1).collect();
                assert_eq!(hits.len(), 1, "{} QID {qid} gap {x}", t.path());
                assert_eq!(hits[0].2, bin(&ie, x));
            }
        }
    }
}

/// Longest-prefix match over generated LPM rows.
fn lpm(rs: &[&Value], field: &str, out: &str, x: u32) -> Option<u64> {
    rs.iter()
        .filter(|r| {
            let len = u(&r["key"][field]["prefix_len"]) as u32;
            let v = u(&r["key"][field]["value"]) as u32;
            len == 0 || x >> (32 - len) == v >> (32 - len)
        })
        .max_by_key(|r| u(&r["key"][field]["prefix_len"]))
        .map(|r| u(&r["data"][out]))
}

#[test]
fn fridge_tables_answer_as_the_software_tofino_mode() {
    let (_, v) = rendered();
    let cfg = rows(&v, &names::FRIDGE_CONFIG);
    assert_eq!(cfg.len(), 1);
    assert_eq!(u(&cfg[0]["data"]["slot_mask"]), 4095);
    assert_eq!(
        u(&cfg[0]["data"]["req_uplink"]),
        1,
        "vantage n6: uplink SYNs"
    );
    // p = 2^-9: eligible when the top 9 bits of the ID hash are zero.
    let coin = rows(&v, &names::FRIDGE_COIN);
    assert_eq!(u(&coin[0]["key"]["md.fr_hash"]["mask"]), 0xff80_0000);
    assert_eq!(u(&coin[0]["key"]["md.fr_hash"]["value"]), 0);
    assert_eq!(pow2_p(0.001953125), 9);
    let t = RangeTable::generate(4096, 9, XMode::Insertions);
    let f = rows(&v, &names::FRIDGE_FACTOR);
    assert_eq!(f.len(), t.rules.len());
    for x in (0..3_000_000u32).step_by(7919).chain([0, 1, u32::MAX]) {
        let got = lpm(&f, "md.fr_x", "factor", x).unwrap();
        assert_eq!(got, u64::from(t.lookup(u64::from(x))), "x = {x}");
    }
    let b = rows(&v, &names::FRIDGE_BIN);
    for d in [0u32, 1, 2, 3, 999, 1024, 65_535, 1 << 31, u32::MAX] {
        let got = lpm(&b, "md.fr_delay", "bin", d).unwrap();
        assert_eq!(got as usize, log2_bin(u64::from(d)), "delay {d}");
    }
}

/// Lays headers out MSB first from the widths the P4 text declares.
struct Bits {
    bytes: Vec<u8>,
    acc: u128,
    n: u32,
}

impl Bits {
    fn put(&mut self, v: u128, w: u32) {
        for i in (0..w).rev() {
            self.acc = self.acc << 1 | (v >> i) & 1;
            self.n += 1;
            if self.n == 8 {
                self.bytes.push(self.acc as u8);
                self.acc = 0;
                self.n = 0;
            }
        }
    }

    fn header(&mut self, src: &str, ty: &str, vals: &[(&str, u128)]) {
        for (f, w) in widths(src, ty) {
            let v = vals
                .iter()
                .find(|(n, _)| *n == f)
                .unwrap_or_else(|| panic!("{ty}.{f} not set"))
                .1;
            self.put(v, w);
        }
        assert_eq!(self.n, 0, "{ty} is not whole bytes");
    }
}

fn csum(words: &[u8]) -> u16 {
    let mut s: u32 = words
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn mac(m: MacAddr) -> u128 {
    m.0.iter().fold(0, |a, &b| a << 8 | u128::from(b))
}

#[test]
fn dta_reports_from_the_p4_headers_are_the_wire_crates_bytes() {
    let (cfg, v) = rendered();
    let d = rows(&v, &names::DTA_CONFIG)[0]["data"].clone();
    let src = p4decl::read_program(&root().join("p4/tna/upf_telemetry.p4")).unwrap();
    let src_mac = MacAddr::parse(d["src_mac"].as_str().unwrap()).unwrap();
    let dst_mac = MacAddr::parse(d["dst_mac"].as_str().unwrap()).unwrap();
    assert_eq!(src_mac, cfg.macs().unwrap()[1], "the n6 port's MAC");
    let ip_src: std::net::Ipv4Addr = d["src_ip"].as_str().unwrap().parse().unwrap();
    let ip_dst: std::net::Ipv4Addr = d["dst_ip"].as_str().unwrap().parse().unwrap();
    let addrs = FrameAddrs {
        eth_src: src_mac,
        eth_dst: dst_mac,
        ip_src,
        ip_dst,
        src_port: u(&d["src_port"]) as u16,
        dst_port: dta::UDP_PORT,
    };
    let (key, data, seq) = (0x1234_5678u32, 52_000u32, 7u8);
    for prim in [
        Primitive::KeyWrite {
            redundancy: u(&d["redundancy"]) as u8,
            key,
            data: [data, 0, 0, 0, 0, 0, 0],
            words: 1,
        },
        Primitive::Append {
            list: u(&d["list_id"]) as u32,
            data,
        },
    ] {
        // The software's report.
        let r = Repr {
            seqnum: seq,
            ..Repr::new(Variant::Tracked, prim)
        };
        let mut want = [0u8; 96];
        let n = r.emit(&mut want[dta::FRAME_OVERHEAD..]).unwrap();
        let len = dta::emit_frame(&mut want, &addrs, n).unwrap();
        let want = &want[..len];
        // The P4 program's, as PgDtaBuild fills the headers and the deparser emits them.
        let kw = matches!(prim, Primitive::KeyWrite { .. });
        let frame = if kw {
            constants::constants_p4().contains(&format!("#define PG_DTA_KEY_WRITE_FRAME {len}"))
        } else {
            constants::constants_p4().contains(&format!("#define PG_DTA_APPEND_FRAME {len}"))
        };
        assert!(frame, "frame length constant");
        let ip_len = (len - 14) as u128;
        let udp_len = (len - 34) as u128;
        let mut b = Bits {
            bytes: Vec::new(),
            acc: 0,
            n: 0,
        };
        b.header(
            &src,
            "ethernet_h",
            &[
                ("dst_addr", mac(dst_mac)),
                ("src_addr", mac(src_mac)),
                ("ether_type", 0x0800),
            ],
        );
        let ip = [
            ("version", 4),
            ("ihl", 5),
            ("dscp_ecn", 0),
            ("total_len", ip_len),
            ("identification", 0),
            ("flags", 2),
            ("frag_offset", 0),
            ("ttl", u128::from(constants::OUTER_TTL)),
            ("protocol", 17),
            ("hdr_checksum", 0),
            ("src_addr", u128::from(u32::from(ip_src))),
            ("dst_addr", u128::from(u32::from(ip_dst))),
        ];
        b.header(&src, "ipv4_h", &ip);
        b.header(
            &src,
            "udp_h",
            &[
                ("src_port", u(&d["src_port"]).into()),
                ("dst_port", 40040),
                ("len", udp_len),
                ("checksum", 0),
            ],
        );
        let opcode = if kw { 1 } else { 2 };
        b.header(
            &src,
            "pg_dta_base_h",
            &[
                ("opcode", opcode),
                ("seqnum", u128::from(seq)),
                ("immediate", 0),
                ("retransmit", 0),
                ("reserved", 0),
            ],
        );
        if kw {
            b.header(
                &src,
                "pg_dta_key_write_h",
                &[
                    ("redundancy", u(&d["redundancy"]).into()),
                    ("key", key.into()),
                    ("data", data.into()),
                ],
            );
        } else {
            b.header(
                &src,
                "pg_dta_append_h",
                &[("list_id", u(&d["list_id"]).into()), ("data", data.into())],
            );
        }
        let mut got = b.bytes;
        // The deparser's checksums: IPv4 header, then UDP over the pseudo-header.
        let c = csum(&got[14..34]);
        got[24..26].copy_from_slice(&c.to_be_bytes());
        let mut pseudo = got[26..34].to_vec();
        pseudo.extend([0, 17]);
        pseudo.extend((udp_len as u16).to_be_bytes());
        pseudo.extend(&got[34..]);
        let c = match csum(&pseudo) {
            0 => 0xffff,
            c => c,
        };
        got[40..42].copy_from_slice(&c.to_be_bytes());
        assert_eq!(got, want, "{prim:?}");
    }
}

#[test]
fn shapes_the_program_cannot_hold_are_refused_by_key() {
    let base = example();
    let err = |from: &str, to: &str| -> String {
        assert!(base.contains(from), "{from}");
        let cfg = Config::parse(&base.replacen(from, to, 1)).unwrap();
        match telemetry::build(&cfg) {
            Err(ConfigError::Invalid { field, reason }) => format!("{field}: {reason}"),
            other => panic!("{from} -> {to}: {other:?}"),
        }
    };
    assert!(err("hash = \"crc32\"", "hash = \"splitmix64\"").starts_with("kestrel.hash: "));
    assert!(err("width = 512", "width = 256").contains("width = 512"));
    assert!(err("m = 4096", "m = 4000").starts_with("fridge.slice[0].m: "));
    assert!(err(
        "m = 4096\np = 0.001953125",
        "fridges = [{ m = 4096, p = 0.001953125 }, { m = 1024, p = 0.0078125 }]"
    )
    .starts_with("fridge.slice[0].fridges: "));
    assert!(err(
        "vantage = \"n6\"\nm = 4096",
        "vantage = \"n6\"\nqfi = [9]\nm = 4096"
    )
    .starts_with("fridge.slice[0].qfi: "));
    assert!(err(
        "vantage = \"n6\"\nm = 4096",
        "vantage = \"n6\"\nports = [443]\nm = 4096"
    )
    .starts_with("fridge.slice[0].ports: "));
    assert!(
        err("x_counts = \"insertions\"", "x_counts = \"requests\"").starts_with("fridge.x_counts")
    );
    assert!(err("variant = \"tracked\"", "variant = \"plain\"").starts_with("dta.variant"));
    assert!(err("port = \"n6\"\ncollector", "port = \"n9\"\ncollector").starts_with("dta.port"));
    assert!(err("qid = 0\nlat", "qid = 8\nlat").starts_with("kestrel.edges[0].qid"));
    // Without the sections the program gets the UPF's entries only.
    let quick = std::fs::read_to_string(root().join("examples/quickstart.toml")).unwrap();
    let t = telemetry::build(&Config::parse(&quick).unwrap()).unwrap();
    assert_eq!(t, telemetry::Telemetry::default());
}

#[test]
fn the_telemetry_program_declares_every_generated_name() {
    let src = p4decl::read_program(&root().join("p4/tna/upf_telemetry.p4")).unwrap();
    let d = p4decl::scan(&src);
    let tables: Vec<names::Table> = names::UPF_TABLES
        .iter()
        .chain(names::TELEMETRY_TABLES)
        .copied()
        .collect();
    let externs: Vec<check::Extern> = check::UPF_EXTERNS
        .iter()
        .chain(check::TELEMETRY_EXTERNS)
        .copied()
        .collect();
    assert_eq!(check::check(&d, &tables, &externs), Vec::<String>::new());
    assert_eq!(p4decl::unknown_references(&src, &d), Vec::<String>::new());
    assert_eq!(p4decl::undefined_pg_names(&src), Vec::<String>::new());
    // Every generated table has rows, with the declared keys and parameters.
    let (_, v) = rendered();
    for t in names::TELEMETRY_TABLES {
        let rs = rows(&v, t);
        assert!(!rs.is_empty(), "{}: no entries", t.path());
        for r in rs {
            let mut keys: Vec<_> = r["key"].as_object().unwrap().keys().cloned().collect();
            keys.sort();
            let mut want: Vec<_> = t.keys.iter().map(|k| k.to_string()).collect();
            want.sort();
            assert_eq!(keys, want, "{}", t.path());
            let a = r["action"].as_str().unwrap();
            assert!(a.starts_with(&t.control_path()), "{a}");
            let decl = t.action(a.rsplit('.').next().unwrap()).unwrap();
            let mut params: Vec<_> = decl.params.to_vec();
            params.sort_unstable();
            let data: Vec<_> = r["data"].as_object().unwrap().keys().cloned().collect();
            assert_eq!(data, params, "{}", t.path());
        }
    }
    // Not vacuous: a renamed egress table, register or bridged field fails.
    for (from, to, want) in [
        (
            "table kestrel_seed {",
            "table kestrel_seeds {",
            "no table PgEgress.kestrel.kestrel_seed",
        ),
        (
            "k_last_seen;",
            "k_last;",
            "no extern instance PgEgress.kestrel.row0.k_last_seen",
        ),
        (
            "    bit<32> teid;        // N3 TEID",
            "    bit<32> te_id;",
            "pg_bridge_h has no field teid",
        ),
        (
            "table fridge_coin {",
            "table fridge_toss {",
            "no table PgIngress.fridge.fridge_coin",
        ),
        ("bit<16> src_port) {", "bit<16> sport) {", "dta_set: params"),
        (
            "#endif // PG_DTA_REPORT_P4",
            "struct pg_egress_meta_t { }\n#endif",
            "pg_egress_meta_t is declared more than once",
        ),
    ] {
        assert!(src.contains(from), "{from}");
        let errs = check::check(&p4decl::scan(&src.replacen(from, to, 1)), &tables, &externs);
        assert!(errs.iter().any(|e| e.contains(want)), "{from}: {errs:?}");
    }
}

/// A model of `kestrel.p4`'s egress path over its registers, driven by the generated entries
/// (seeds, ternary bin rules): what a switch loaded with `upf_telemetry.bfrt.json` computes,
/// packet by packet, in the P4 program's order (not the P4 program itself).
struct P4Kestrel {
    rows: [RowRegs; 3],
    seeds: BTreeMap<u64, u32>,
    lat: Vec<(u64, u32, u32, usize)>,
    iat: [Vec<(u64, u32, u32, usize)>; 3],
}

fn ternary_all(rs: &[&Value], field: &str) -> Vec<(u64, u32, u32, usize)> {
    rs.iter()
        .map(|r| {
            (
                u(&r["key"]["eh.bridge.qid"]["value"]),
                u(&r["key"][field]["value"]) as u32,
                u(&r["key"][field]["mask"]) as u32,
                u(&r["data"]["bin"]) as usize,
            )
        })
        .collect()
}

fn lookup(t: &[(u64, u32, u32, usize)], qid: u64, v: u32) -> usize {
    let hits: Vec<_> = t
        .iter()
        .filter(|r| r.0 == qid && v & r.2 == r.1 & r.2)
        .collect();
    assert_eq!(hits.len(), 1, "QID {qid} value {v}");
    hits[0].3
}

impl P4Kestrel {
    fn new(v: &[Value]) -> P4Kestrel {
        let iat = |i: usize| ternary_all(&rows(v, &names::KESTREL_IAT_BIN[i]), "gap");
        P4Kestrel {
            rows: [RowRegs::new(), RowRegs::new(), RowRegs::new()],
            seeds: rows(v, &names::KESTREL_SEED)
                .iter()
                .map(|r| {
                    (
                        u(&r["key"]["eh.bridge.qid"]["value"]),
                        u(&r["data"]["seed"]) as u32,
                    )
                })
                .collect(),
            lat: ternary_all(&rows(v, &names::KESTREL_LAT_BIN), "em.sojourn"),
            iat: [iat(0), iat(1), iat(2)],
        }
    }

    /// PgEgress + PgKestrel for one bridged packet leaving at egress time `now` (ns).
    fn packet(&mut self, now: u64, s: &Sample) {
        let now32 = now as u32;
        let bank = ((now >> constants::KESTREL_WINDOW_SHIFT) & 1) as u8;
        let sojourn = now32.wrapping_sub(now32.wrapping_sub(s.sojourn_ns));
        let Some(&seed) = self.seeds.get(&(s.qid as u64)) else {
            return;
        };
        let lat_bin = lookup(&self.lat, s.qid as u64, sojourn);
        let mut bytes = seed.to_be_bytes().to_vec();
        bytes.extend(s.teid.to_be_bytes());
        bytes.push(s.qfi);
        let h = crc32fast::hash(&bytes);
        for (r, regs) in self.rows.iter_mut().enumerate() {
            let col = (h >> (9 * r)) & 511;
            let (dir, q) = (s.dir as u8, s.qid as u8);
            let ls = kestrel_regs::bucket(0, dir, q, col);
            let last = std::mem::replace(&mut regs.last_seen[ls], now32);
            let i = kestrel_regs::bucket(bank, dir, q, col);
            regs.counts[i].0 += 1;
            regs.counts[i].1 += s.len;
            regs.colour[i * 4 + usize::from(s.colour)] += 1;
            regs.lat[i * 8 + lat_bin] += 1;
            if last != 0 {
                let gap = now32.wrapping_sub(last);
                let b = lookup(&self.iat[r], s.qid as u64, gap);
                regs.iat[i * 8 + b] += 1;
            }
        }
    }
}

#[test]
fn the_p4_sketch_model_over_generated_entries_fills_the_software_buckets() {
    let (cfg, v) = rendered();
    let layout = telemetry::kestrel_layout(cfg.kestrel.as_ref().unwrap()).unwrap();
    let mut edges = EdgeSet::default();
    edges.qids[0] = QidEdges {
        lat: [2000, 5000, 10000, 20000, 50000, 100000, 500000],
        iat: [1000, 10000, 50000, 100000, 500000, 1000000, 5000000],
    };
    let mut sk = Sketcher::new(&layout);
    let mut bank = Bank::new(&layout);
    let mut p4 = P4Kestrel::new(&v);
    // A deterministic mix: 40 keys over both directions and 8 QIDs, gaps 1 ns - 1 ms,
    // sojourns 0 - 1 ms, all three colours, in one 2^30 ns window.
    let mut x: u64 = 0x9e37_79b9;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = 1_000u64;
    for _ in 0..12_000 {
        let r = next();
        let key = r % 40;
        let big = if r >> 60 == 0 { next() % 1_000_000 } else { 0 };
        t += 1 + big + next() % 20_000;
        let s = Sample {
            dir: (key & 1) as usize,
            qid: (key % 8) as usize,
            teid: 0x100 + key as u32,
            qfi: [1, 5, 9][(key % 3) as usize],
            len: 60 + (next() % 1400) as u32,
            colour: (next() % 3) as u8,
            sojourn_ns: (next() % 1_000_000) as u32,
            t_ns: t,
        };
        sk.record(&mut bank, &edges, &s);
        p4.packet(t, &s);
    }
    assert!(t < 1 << constants::KESTREL_WINDOW_SHIFT, "one window");
    let got = kestrel_regs::buckets(&p4.rows, 0, &layout);
    let want: Vec<SumBucket> = bank
        .buckets
        .iter()
        .map(|b| SumBucket {
            packets: u64::from(b.packets),
            bytes: b.bytes,
            colour: b.colour.map(u64::from),
            lat: b.lat.map(u64::from),
            iat: b.iat.map(u64::from),
        })
        .collect();
    assert_eq!(got.len(), want.len());
    let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    assert_eq!(differ, 0, "buckets differ");
    assert_eq!(
        got.iter().map(|b| b.packets).sum::<u64>(),
        12_000 * 3,
        "every packet in every row"
    );
    assert!(got.iter().map(|b| b.iat.iter().sum::<u64>()).sum::<u64>() > 30_000);
    // The other bank stayed empty.
    let other = kestrel_regs::buckets(&p4.rows, 1, &layout);
    assert!(other.iter().all(|b| *b == SumBucket::default()));
}

#[test]
fn routes_resolved_at_run_time_are_refused_by_key() {
    let base = example();
    let line = base
        .lines()
        .find(|l| l.starts_with("next_hop_mac = "))
        .expect("a static next hop in the example");
    for (to, key) in [
        ("via = \"198.51.100.1\"", "route[0].via"),
        ("", "route[0].next_hop_mac"),
        (
            &format!("{line}\nvia = \"198.51.100.1\"") as &str,
            "route[0].via",
        ),
    ] {
        match Config::parse(&base.replacen(line, to, 1)) {
            Err(ConfigError::Invalid { field, reason }) => {
                assert_eq!(field, key, "{reason}");
            }
            other => panic!("{to}: {other:?}"),
        }
    }
}
