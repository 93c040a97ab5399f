use crate::config::Config;

const BASE: &str = crate::config::TWO_PORT_L3FWD;

fn with(fridge: &str) -> String {
    format!("{BASE}\n[fridge]\n{fridge}")
}

fn err(fridge: &str) -> String {
    Config::parse(&with(fridge)).unwrap_err().to_string()
}

const SLICE: &str =
    "[[fridge.slice]]\nname = \"hs\"\nkind = \"tcp_handshake\"\nm = 1024\np = 0.25\n";

#[test]
fn a_good_section_parses_into_slices() {
    let text = with(&format!(
        "window_ms = 500\nx_counts = \"requests\"\nuplink_ports = [\"n3\"]\n{SLICE}\
         [[fridge.slice]]\nname = \"dns\"\nkind = \"dns\"\nvantage = \"n6\"\nqfi = [9]\nports = [53]\n\
         fridges = [{{ m = 512, p = 0.5 }}, {{ m = 512, p = 0.0625 }}]\n"
    ));
    let c = Config::parse(&text).unwrap();
    let s: super::FridgeSection = c.sections["fridge"].clone().try_into().unwrap();
    let (spec, zmq) = super::parse(s, &c.platform).unwrap();
    assert_eq!(zmq, None);
    assert_eq!(spec.window_ns, 500_000_000);
    assert_eq!(spec.mode, super::XMode::Requests);
    assert_eq!(spec.uplink_ports, vec![0]);
    assert_eq!(spec.slices.len(), 2);
    assert_eq!(spec.slices[1].fridges.len(), 2);
    assert_eq!(spec.slices[1].qfi, vec![9]);
    assert_eq!(spec.slices[1].vantage, super::Vantage::N6);
    // Per-gNB GTP-U echo slices.
    let text = with(
        "[[fridge.slice]]\nname = \"gnb-a\"\nkind = \"gtp_echo\"\nvantage = \"n3\"\n\
         peers = [\"192.0.2.10\", \"2001:db8:3::10\"]\nm = 64\np = 1.0\n",
    );
    let c = Config::parse(&text).unwrap();
    let s: super::FridgeSection = c.sections["fridge"].clone().try_into().unwrap();
    let (spec, _) = super::parse(s, &c.platform).unwrap();
    assert_eq!(
        spec.slices[0].peers,
        vec![
            "192.0.2.10".parse::<std::net::IpAddr>().unwrap(),
            "2001:db8:3::10".parse().unwrap()
        ]
    );
}

#[test]
fn bad_sections_name_the_key() {
    for (text, key) in [
        (format!("window_ms = 0\n{SLICE}"), "fridge.window_ms"),
        (format!("x_counts = \"both\"\n{SLICE}"), "fridge.x_counts"),
        (format!("uplink_ports = [\"n9\"]\n{SLICE}"), "fridge.uplink_ports"),
        (String::new(), "fridge"),
        ("[[fridge.slice]]\nname = \"a\"\nkind = \"ftp\"\nm = 8\np = 0.5\n".into(), "fridge.slice[0].kind"),
        ("[[fridge.slice]]\nname = \"a\"\nkind = \"dns\"\nvantage = \"n9\"\nm = 8\np = 0.5\n".into(), "fridge.slice[0].vantage"),
        ("[[fridge.slice]]\nname = \"a\"\nkind = \"dns\"\nm = 1\np = 0.5\n".into(), "fridge.slice[0].fridges"),
        ("[[fridge.slice]]\nname = \"a\"\nkind = \"dns\"\nm = 8\np = 1.5\n".into(), "fridge.slice[0].fridges"),
        ("[[fridge.slice]]\nname = \"a\"\nkind = \"dns\"\nm = 8\n".into(), "fridge.slice[0].fridges"),
        ("[[fridge.slice]]\nname = \"a\"\nkind = \"dns\"\nqfi = [64]\nm = 8\np = 0.5\n".into(), "fridge.slice[0].qfi"),
        (
            "[[fridge.slice]]\nname = \"a\"\nkind = \"dns\"\nfridges = [{ m = 8, p = 0.7 }, { m = 8, p = 0.7 }]\n".into(),
            "fridge.slice[0].fridges",
        ),
        (format!("{SLICE}{SLICE}"), "fridge.slice[1].name"),
        (format!("colour = 1\n{SLICE}"), "fridge"),
        (format!("raw_file = \"r.csv\"\nraw_ring = 0\n{SLICE}"), "fridge.raw_ring"),
        (format!("{SLICE}peers = [\"192.0.2.10\"]\n"), "fridge.slice[0].peers"),
        (
            "[[fridge.slice]]\nname = \"g\"\nkind = \"gtp_echo\"\npeers = [\"gnb-1\"]\nm = 8\np = 0.5\n".into(),
            "fridge.slice[0].peers",
        ),
        (
            format!("raw_file = \"r.csv\"\nraw_max_samples = 0\n{SLICE}"),
            "fridge.raw_max_samples",
        ),
    ] {
        let e = err(&text);
        assert!(e.contains(key), "{text:?}: {e}");
    }
}
