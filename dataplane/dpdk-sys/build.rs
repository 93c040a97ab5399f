//! Build script: finds DPDK with pkg-config (`libdpdk`, at least 22.11), compiles the C shim
//! with DPDK's cflags and generates bindings for the headers in `shim/shim.h` into OUT_DIR.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.h");
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    // Dynamic linking: PMDs are shared objects the EAL loads from its plugin directory, which
    // only works when the EAL itself is a shared library.
    let dpdk = pkg_config::Config::new()
        .atleast_version("22.11")
        .statik(false)
        .cargo_metadata(true)
        .probe("libdpdk")
        .expect("pkg-config could not find libdpdk >= 22.11 (install libdpdk-dev)");

    // cflags as pkg-config gives them: include dirs, `-include rte_config.h`, `-march=...`.
    let cflags: Vec<String> = pkg_config_cflags();

    let mut build = cc::Build::new();
    build
        .file("shim/shim.c")
        .include("shim")
        .warnings(true)
        .opt_level(3);
    for inc in &dpdk.include_paths {
        build.include(inc);
    }
    for f in &cflags {
        // `-include rte_config.h` stays two words in order; include dirs are added above.
        if !f.starts_with("-I") {
            build.flag(f);
        }
    }
    build.compile("peregrine_dpdk_shim");

    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let mut clang_args: Vec<String> = cflags.clone();
    clang_args.push("-Ishim".to_string());

    let bindings = bindgen::Builder::default()
        .header("shim/shim.h")
        .clang_args(&clang_args)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .allowlist_function("(rte|pg)_.*")
        .allowlist_type("(rte|pg)_.*")
        .allowlist_var("(RTE|rte|PG|pg)_.*|LCORE_ID_ANY|SOCKET_ID_ANY")
        // rte_ethdev.h drags in rte_flow.h and the protocol headers it uses; none of that is
        // needed (and some of its packed/aligned structs do not translate to Rust).
        .blocklist_file(
            ".*/rte_(flow|icmp|ip|ip6|sctp|tcp|udp|vxlan|esp|higig|ecpri|meter|gtp|l2tpv2|ppp|gre|macsec|arp|mpls)\\.h",
        )
        // Enums as plain integer constants: values come from C and must never be UB in Rust.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        // Function-like macros (RTE_BIT64 ...) are evaluated by clang itself.
        // (RTE_ETH_RSS_IP, RTE_ETH_RX_OFFLOAD_RSS_HASH, RTE_MBUF_F_RX_RSS_HASH, LCORE_ID_ANY).
        .clang_macro_fallback()
        .clang_macro_fallback_build_dir(&out)
        .derive_default(true)
        .derive_debug(true)
        .impl_debug(false)
        .layout_tests(true)
        .generate_comments(false)
        .generate()
        .expect("bindgen failed on shim/shim.h");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}

/// `pkg-config --cflags libdpdk`, split into words.
fn pkg_config_cflags() -> Vec<String> {
    let pc = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = std::process::Command::new(pc)
        .args(["--cflags", "libdpdk"])
        .output()
        .expect("run pkg-config --cflags libdpdk");
    assert!(out.status.success(), "pkg-config --cflags libdpdk failed");
    String::from_utf8(out.stdout)
        .expect("utf-8 cflags")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}
