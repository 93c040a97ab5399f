use crate::config::Config;

const GOOD: &str = crate::config::TWO_PORT_L3FWD;

fn err(text: &str) -> String {
    Config::parse(text).unwrap_err().to_string()
}

fn section(c: &Config) -> super::IntSection {
    c.sections["int"].clone().try_into().unwrap()
}

/// `GOOD` as a UPF with `[int]` lines.
fn upf_int(int: &str) -> String {
    GOOD.replace("kind = \"l3fwd\"", "kind = \"upf\"")
        + "[upf]\nnode_id = \"192.0.2.1\"\nn3 = [\"192.0.2.1\"]\n[int]\nnode_id = 9\n"
        + int
}

#[test]
fn int_in_the_upf_pipeline_places_roles_on_n6() {
    let c = Config::parse(&upf_int(
        "roles = [\"source\", \"sink\", \"transit\"]\nn6_ports = [\"n6\"]\n",
    ))
    .unwrap();
    let s = &section(&c);
    // Defaults: sink and transit on N6 ingress, the source on N6 egress.
    assert_eq!(
        s.n6_in_roles(),
        [crate::int::Role::Sink, crate::int::Role::Transit]
    );
    assert_eq!(s.n6_out_roles(), [crate::int::Role::Source]);
    assert_eq!(s.n6_port_ids(|n| c.port_index(n)), [1]);
    // Listed order does not matter: sink, transit, source.
    let c = Config::parse(&upf_int(
        "roles = [\"source\", \"sink\"]\nn6_ports = [\"n6\"]\nn6_in = []\nn6_out = [\"source\", \"sink\"]\n",
    ))
    .unwrap();
    let s = &section(&c);
    assert!(s.n6_in_roles().is_empty());
    assert_eq!(
        s.n6_out_roles(),
        [crate::int::Role::Sink, crate::int::Role::Source]
    );
    for (int, field) in [
        ("roles = [\"sink\"]\n", "int.n6_ports"),
        (
            "roles = [\"sink\"]\nn6_ports = [\"n9\"]\n",
            "int.n6_ports[0]",
        ),
        (
            "roles = [\"sink\"]\nn6_ports = [\"n6\"]\nn6_out = [\"source\"]\n",
            "int.n6_out",
        ),
        (
            "roles = [\"sink\"]\nn6_ports = [\"n6\"]\nn6_in = []\n",
            "int.n6_in",
        ),
        ("roles = []\nn6_ports = [\"n6\"]\n", "int.roles"),
    ] {
        let e = err(&upf_int(int));
        assert!(e.contains(field), "{int}: {e}");
    }
    // The int pipeline places by roles only.
    let e = err(&(GOOD.replace("kind = \"l3fwd\"", "kind = \"int\"")
        + "[int]\nnode_id = 9\nroles = [\"sink\"]\nn6_ports = [\"n6\"]\n"));
    assert!(e.contains("int.n6_ports"), "{e}");
}

#[test]
fn gate_section_is_read_and_checked() {
    let int = |extra: &str| {
        GOOD.replace("kind = \"l3fwd\"", "kind = \"int\"")
            + "[int]\nnode_id = 9\nroles = [\"source\"]\n"
            + extra
    };
    let c = Config::parse(&int("[int.gate]\nlarge = 64\nsmall = 16\n")).unwrap();
    let g = section(&c).gate.unwrap();
    assert_eq!(
        (g.large, g.small, g.rows, g.width, g.window_ms),
        (64, 16, 3, 4096, 1000)
    );
    for (extra, want) in [
        ("[int.gate]\nlarge = 8\nsmall = 16\n", "small <= large"),
        (
            "[int.gate]\nlarge = 8\nsmall = 4\nwidth = 1000\n",
            "power of two",
        ),
        (
            "[int.gate]\nlarge = 8\nsmall = 4\nunit = \"flows\"\n",
            "unknown variant `flows`",
        ),
        ("[int.gate]\nlarge = 8\nsmall = 4\nwindow = 3\n", "window"),
    ] {
        let e = err(&int(extra));
        assert!(e.contains(want), "{extra}: {e}");
    }
    let int_only = |extra: &str| {
        GOOD.replace("kind = \"l3fwd\"", "kind = \"int\"")
            + "[int]\nnode_id = 9\nroles = [\"sink\"]\n"
            + extra
    };
    let c = Config::parse(&int_only("")).unwrap();
    assert_eq!(section(&c).resend_interval_ms, 60_000);
    let c = Config::parse(&int_only("resend_interval_ms = 2000\n")).unwrap();
    assert_eq!(
        section(&c).stage_config(|_| None).resend_interval_ns,
        2_000_000_000
    );
    for bad in ["resend_interval_ms = 0\n", "resend_interval_ms = 3600001\n"] {
        assert!(
            err(&int_only(bad)).contains("int.resend_interval_ms"),
            "{bad}"
        );
    }
    let e = err(&(GOOD.replace("kind = \"l3fwd\"", "kind = \"int\"")
        + "[int]\nnode_id = 9\nroles = [\"sink\"]\n[int.gate]\nlarge = 8\nsmall = 4\n"));
    assert!(e.contains("int.gate") && e.contains("source"), "{e}");
}
