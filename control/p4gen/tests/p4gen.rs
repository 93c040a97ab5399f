//! The generator against the Rust side it comes from: the checked-in constants file is what
//! the generator writes; generated entries agree with the compiled UPF tables the workers
//! read; the encapsulation constants match what the Rust encapsulation writes; the P4
//! sources declare every name the generator writes (a scan, not a compile), and the check
//! notices when one is missing; the config is read in the daemon's schema (its types,
//! defaults and refusals).

use peregrine_dataplane::buffer::{OwnedBuf, PacketBuf};
use peregrine_dataplane::upf::encap::{self, Psc};
use peregrine_dataplane::upf::tables::{Direction, OuterHeader};
use peregrine_p4gen::config::Config;
use peregrine_p4gen::model::{self, FarEntry, Options, PdrAction};
use peregrine_p4gen::{bfrt, bmv2, check, constants, names, p4decl};
use peregrine_wire::ethernet::Address as MacAddr;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn quickstart() -> Config {
    let text = std::fs::read_to_string(root().join("examples/quickstart.toml")).unwrap();
    Config::parse(&text).unwrap()
}

#[test]
fn checked_in_constants_are_regenerated_identically() {
    let have = std::fs::read_to_string(root().join("p4/include/constants.p4")).unwrap();
    assert_eq!(
        have,
        constants::constants_p4(),
        "p4/include/constants.p4 is stale: run `cargo run -p peregrine-p4gen --bin peregrine-p4 -- constants > p4/include/constants.p4`"
    );
}

#[test]
fn outer_header_constants_match_the_rust_encapsulation() {
    let mut p = OwnedBuf::from_slice(&[0x45; 60]);
    let outer = OuterHeader {
        teid: 7,
        peer: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)),
        local: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
    };
    encap::encap_gtpu(
        &mut p,
        &outer,
        9,
        Psc::Dl,
        0xc001,
        MacAddr([2; 6]),
        MacAddr([4; 6]),
    )
    .unwrap();
    let d = p.data();
    assert_eq!(d.len(), 14 + encap::overhead(false) + 60);
    assert_eq!(d[14 + 8], constants::OUTER_TTL, "outer TTL");
    assert_eq!(d[14 + 6] & 0x40, 0x40, "DF");
    let gtp = 14 + 20 + 8;
    assert_eq!(d[gtp], 0x34, "GTP-U v1, PT, E");
    assert_eq!(
        &d[gtp + 8..gtp + 12],
        &[0, 0, 0, 0x85],
        "seq, N-PDU, PSC next"
    );
    assert_eq!(
        &d[gtp + 12..gtp + 16],
        &[1, 0, 9, 0],
        "PSC: len 1, DL, QFI 9, no more"
    );
    let text = constants::constants_p4();
    assert!(text.contains("const bit<8> PG_OUTER_TTL = 8w64;"));
    assert!(text.contains("const bit<16> PG_GTPU_PORT = 16w2152;"));
    assert!(text.contains("#define PG_ENCAP_OVERHEAD_V6 64"));
}

/// Every generated PDR entry is the one the Rust tables give for its key.
#[test]
fn entries_agree_with_the_compiled_tables() {
    let cfg = quickstart();
    let t = model::compile(&cfg).unwrap();
    let e = model::build(&cfg, &Options::default()).unwrap();
    let n = cfg
        .upf
        .as_ref()
        .unwrap()
        .synthetic
        .as_ref()
        .unwrap()
        .sessions;
    assert_eq!((e.ul.len(), e.dl_v4.len(), e.dl_v6.len()), (n, n, n));
    let far_of = |a: &PdrAction| match a {
        PdrAction::Apply(p) => (e.fars[p.far_idx as usize], *p),
        PdrAction::ToCpu => panic!("the quickstart sessions are all offloadable"),
    };
    for p in &e.ul {
        let (s, (lo, hi)) = t.teid_candidates(p.key).expect("key in the Rust tables");
        assert_eq!(hi - lo, 1);
        let pdr = &s.pdrs[s.pdr_order[lo as usize] as usize];
        assert_eq!(pdr.direction, Direction::Uplink);
        let (far, a) = far_of(&p.action);
        assert_eq!(
            far,
            FarEntry::Route,
            "uplink of a default session routes on N6"
        );
        assert_eq!(a.urr, Some(pdr.urrs[0].slot));
        assert_eq!(a.pdr_qfi, pdr.qfi);
        assert!(a.gate_open);
    }
    for p in &e.dl_v4 {
        let k = u32::from(p.key);
        let s = t.ue_v4_shard(k);
        let (lo, _) = *s.by_ue_v4.get(&k).unwrap();
        let pdr = &s.pdrs[s.pdr_order[lo as usize] as usize];
        let rust_far = s.fars[pdr.far as usize];
        let (far, a) = far_of(&p.action);
        let o = rust_far.outer.unwrap();
        match far {
            FarEntry::EncapV4 {
                teid,
                peer,
                local,
                psc_type,
            } => {
                assert_eq!((IpAddr::V4(peer), IpAddr::V4(local)), (o.peer, o.local));
                assert_eq!((teid, psc_type), (o.teid, 0));
            }
            FarEntry::EncapV6 {
                teid,
                peer,
                local,
                psc_type,
            } => {
                assert_eq!((IpAddr::V6(peer), IpAddr::V6(local)), (o.peer, o.local));
                assert_eq!((teid, psc_type), (o.teid, 0));
            }
            f => panic!("downlink FAR {f:?}"),
        }
        // The QFI marked is the QER's, as the fast path marks it.
        let fast = s.by_ue_v4.slot(k).unwrap().fast().copied();
        if let Some(f) = fast {
            assert_eq!(a.mark_qfi, f.mark_qfi);
        }
        let q = s.qers[pdr.qers[0] as usize];
        assert_eq!(Some(a.mark_qfi), q.qfi);
    }
    for p in &e.dl_v6 {
        let s = t.ue_v6_shard(p.key);
        assert!(s.by_ue_v6.get(&p.key).is_some());
    }
    // Equal FARs are one entry; every index is in range.
    assert!(e.fars.len() < 3 * n);
    // The QFI -> queue map is the daemon's.
    assert_eq!(e.qfi_qid[5], 0);
    assert_eq!(e.qfi_qid[9], 7);
}

#[test]
fn meters_convert_rfc2698_parameters_for_both_targets() {
    let text = std::fs::read_to_string(root().join("examples/quickstart.toml"))
        .unwrap()
        .replace("sessions = 64", "sessions = 64\nmbr_kbps = 100000");
    let cfg = Config::parse(&text).unwrap();
    let e = model::build(&cfg, &Options::default()).unwrap();
    assert_eq!(e.meters.len(), 128, "one meter per session and direction");
    let m = e.meters[0];
    // 100 Mbit/s = 12.5 MB/s.
    assert_eq!(m.cfg.pir, 12_500_000);
    let (_, _, pir_kbps, pbs_kbits) = m.tofino_kbps_kbits();
    assert_eq!(pir_kbps, 100_000);
    assert_eq!(pbs_kbits, (m.cfg.pbs * 8).div_ceil(1000));
    let ((_, _), (pir_per_us, pbs)) = m.bmv2_rates();
    assert!((pir_per_us - 12.5).abs() < 1e-9);
    assert_eq!(pbs, m.cfg.pbs);
    let cli = bmv2::render(&e);
    assert!(cli.contains(&format!(
        "meter_set_rates PgIngress.upf.qer_meter {} ",
        m.index
    )));
    assert!(cli.contains("PgIngress.upf.pdr_apply"));
}

#[test]
fn renderers_write_every_table_with_its_declared_keys_and_params() {
    let text = std::fs::read_to_string(root().join("examples/quickstart.toml")).unwrap()
        + "\n[int]\nnode_id = 9\nroles = [\"transit\"]\n";
    let cfg = Config::parse(&text).unwrap();
    let e = model::build(
        &cfg,
        &Options {
            int_namespaces: vec![7],
        },
    )
    .unwrap();
    let dev = bfrt::DevPorts::new();
    for (prog, tables) in [
        (bfrt::Program::Upf, names::UPF_TABLES),
        (bfrt::Program::IntTransit, names::INT_PROGRAM_TABLES),
    ] {
        let v = bfrt::render(&e, prog, &dev);
        let arr = v.as_array().unwrap();
        for t in tables {
            let name = format!("pipe.{}", t.path());
            let rows: Vec<_> = arr
                .iter()
                .filter(|r| r["table_name"] == name.as_str())
                .collect();
            assert!(!rows.is_empty(), "{name}: no entries");
            for r in rows {
                let key = r["key"].as_object().unwrap();
                let keys: Vec<_> = key.keys().map(String::as_str).collect();
                let mut want: Vec<_> = t.keys.to_vec();
                want.sort_unstable();
                assert_eq!(keys, want, "{name}");
                let a = r["action"].as_str().unwrap().rsplit('.').next().unwrap();
                let decl = t.action(a).unwrap();
                let data = r["data"].as_object().unwrap();
                let mut params: Vec<_> = decl.params.to_vec();
                params.sort_unstable();
                assert_eq!(data.keys().map(String::as_str).collect::<Vec<_>>(), params);
            }
        }
    }
    // IOAM layouts come from the Rust encoder: Hop_Lim/node_id first, then the seconds and
    // fraction, shifted by one word when interface ids (bit 1) are present.
    let layout = &e.int.as_ref().unwrap().layout;
    let full = layout.iter().find(|l| l.value == 0xf0_0000).unwrap();
    assert_eq!(full.words, [1, 0, 2, 3]);
    let no_if = layout.iter().find(|l| l.value == 0xb0_0000).unwrap();
    assert_eq!(no_if.words, [1, 2, 3, 0]);
}

#[test]
fn p4_sources_declare_what_the_generator_writes() {
    let dir = root().join("p4");
    for (file, tables, externs) in [
        ("tna/upf.p4", names::UPF_TABLES, check::UPF_EXTERNS),
        ("tna/int_transit.p4", names::INT_PROGRAM_TABLES, &[][..]),
        ("v1model/upf_int.p4", names::UPF_TABLES, check::UPF_EXTERNS),
        ("v1model/upf_int.p4", names::INT_TABLES, &[][..]),
    ] {
        let src = p4decl::read_program(&dir.join(file)).unwrap();
        let d = p4decl::scan(&src);
        let errs = check::check(&d, tables, externs);
        assert!(errs.is_empty(), "{file}: {errs:?}");
        assert_eq!(
            p4decl::unknown_references(&src, &d),
            Vec::<String>::new(),
            "{file}"
        );
        assert_eq!(
            p4decl::undefined_pg_names(&src),
            Vec::<String>::new(),
            "{file}"
        );
    }
    // Field typos in `hdr.` / `md.` references and undefined PG_ names are caught too.
    let src = p4decl::read_program(&dir.join("tna/upf.p4")).unwrap();
    let bad = src
        .replacen("hdr.ipv4.ttl - 1", "hdr.ipv4.tll - 1", 1)
        .replacen("md.routed == 0", "md.rooted == 0", 1)
        .replacen("dst_port = PG_GTPU_PORT", "dst_port = PG_GTPU_PROT", 1);
    let refs = p4decl::unknown_references(&bad, &p4decl::scan(&bad));
    assert_eq!(
        refs,
        [
            "hdr.ipv4.tll: ipv4_h has no field tll",
            "md.rooted: pg_meta_t has no field rooted"
        ]
    );
    assert_eq!(p4decl::undefined_pg_names(&bad), ["PG_GTPU_PROT"]);
    // The check is not vacuous: a renamed table, action parameter or header field fails.
    let src = p4decl::read_program(&dir.join("v1model/upf_int.p4")).unwrap();
    for (from, to, want) in [
        ("table far {", "table farx {", "no table PgIngress.upf.far"),
        (
            "bit<8> mark_qfi) {",
            "bit<8> qfi_mark) {",
            "pdr_apply: params",
        ),
        (
            "bit<16> namespace_id;",
            "bit<16> ns_id;",
            "ioam_trace_h has no field",
        ),
        (
            "qer_meter;",
            "qer_meterx;",
            "no extern instance PgIngress.upf.qer_meter",
        ),
    ] {
        assert!(src.contains(from), "{from}");
        let errs = check::check(
            &p4decl::scan(&src.replacen(from, to, 1)),
            names::UPF_TABLES,
            check::UPF_EXTERNS,
        );
        let errs2 = check::check(
            &p4decl::scan(&src.replacen(from, to, 1)),
            names::INT_TABLES,
            &[],
        );
        assert!(
            errs.iter().chain(&errs2).any(|e| e.contains(want)),
            "{from} -> {to}: {errs:?}"
        );
    }
}

#[test]
fn the_daemons_schema_is_the_generators() {
    let base = std::fs::read_to_string(root().join("examples/p4-telemetry.toml")).unwrap();
    let field = |from: &str, to: &str| -> String {
        assert!(base.contains(from), "{from}");
        match Config::parse(&base.replacen(from, to, 1)) {
            Err(peregrine_p4gen::config::ConfigError::Invalid { field, .. }) => field,
            other => panic!("{from} -> {to}: {other:?}"),
        }
    };
    // A key the daemon does not know is refused in every section the generator reads, and
    // a value the daemon's type does not take; the key is named.
    assert_eq!(
        field("max_sessions = 1024", "max_sessions = 1024\nmtux = 1400"),
        "upf.mtux"
    );
    assert_eq!(
        field("hash = \"crc32\"", "hash = \"crc32\"\nwindws_ms = 1"),
        "kestrel.windws_ms"
    );
    assert_eq!(
        field("x_counts = \"insertions\"", "x_count = \"insertions\""),
        "fridge.x_count"
    );
    assert_eq!(
        field("drops_list = 3", "drops_list = 3\ndrop_list = 3"),
        "dta.drop_list"
    );
    assert_eq!(
        field("variant = \"tracked\"", "variant = \"tracker\""),
        "dta"
    );
    // `[upf]` is validated as the daemon validates it (the generator compiles its sessions).
    assert_eq!(
        field("outer = \"mixed\"", "outer = \"v5\""),
        "upf.synthetic.outer"
    );
    assert_eq!(
        field("max_sessions = 1024", "max_sessions = 1024\nmtu = 100"),
        "upf.mtu"
    );
    // An unknown section, and a platform key, as the daemon refuses them.
    let e = Config::parse(&(base.clone() + "\n[falcon]\nwidth = 1\n")).unwrap_err();
    assert!(e.to_string().contains("falcon"), "{e}");
    assert_eq!(field("burst = 32", "burst = 0"), "workers.burst");
    // The daemon's defaults: a section written without them reads as the daemon reads it.
    let c = Config::parse(&base).unwrap();
    assert_eq!(c.kestrel.as_ref().unwrap().window_ms, 1000);
    assert_eq!(c.upf.as_ref().unwrap().mtu, 1500);
    // What `peregrine-p4 entries` reads: the daemon's whole check first.
    let int = base.clone() + "\n[int]\nnode_id = 9\nroles = [\"transit\"]\n";
    Config::parse(&int).unwrap();
    match Config::parse_checked(&int) {
        Err(peregrine_p4gen::config::ConfigError::Invalid { field, .. }) => {
            assert_eq!(field, "int.n6_ports")
        }
        other => panic!("{other:?}"),
    }
    let with_ports = int.replace(
        "roles = [\"transit\"]",
        "roles = [\"transit\"]\nn6_ports = [\"n6\"]",
    );
    assert_eq!(
        Config::parse_checked(&with_ports).unwrap(),
        Config::parse(&with_ports).unwrap()
    );
}

/// A pipeline the P4 build has no program for (a DTA translator, a patch panel, an impairment
/// bump) is refused, naming the kind, not generated as if it were a UPF.
#[test]
fn a_pipeline_without_a_p4_program_is_refused() {
    let base = std::fs::read_to_string(root().join("examples/p4-telemetry.toml")).unwrap();
    assert!(base.contains("[pipeline]\nkind = \"upf\""));
    for pipeline in [
        "kind = \"dta-translator\"",
        "kind = \"xconnect\"\npairs = [[\"n3\", \"n6\"]]",
    ] {
        match Config::parse(&base.replacen("kind = \"upf\"", pipeline, 1)) {
            Err(peregrine_p4gen::config::ConfigError::Invalid { field, reason }) => {
                assert_eq!(field, "pipeline.kind");
                assert!(reason.contains("no P4 program"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
