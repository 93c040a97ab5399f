//! Checksum offload on veths (docs/upf.md, "Checksum offload on veths"): which ports get
//! their TCP/UDP checksums completed in software (`[upf] fix_l4_checksums`), and the startup
//! warning for `net_af_packet` ports on veths that are not among them.
//!
//! DPDK 22.11's `net_af_packet` does not pass the kernel's `TP_STATUS_CSUMNOTREADY` on (its
//! mbufs carry no RX checksum flags), so the daemon cannot see per frame that a peer left a
//! checksum partial; it can see that a port sits on a veth, where that happens whenever the
//! peer has transmit checksum offload on (the default).

use crate::platform::{BackendConfig, Platform};
use std::path::Path;

/// Bit `i` set: port `i` is listed in `fix_l4_checksums` (ports 0..64).
pub fn fix_mask(names: &[String], port_index: impl Fn(&str) -> Option<u16>) -> u64 {
    names
        .iter()
        .filter_map(|n| port_index(n))
        .filter(|&i| i < 64)
        .fold(0, |m, i| m | 1 << i)
}

/// The kernel interface of each `net_af_packet` port: (port name, iface).
pub fn af_packet_ifaces(p: &Platform) -> Vec<(String, String)> {
    let BackendConfig::Dpdk { eal_args, .. } = &p.backend else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for port in &p.ports {
        let Some(dev) = port.device.as_deref() else {
            continue;
        };
        if !dev.starts_with("net_af_packet") {
            continue;
        }
        // `--vdev=net_af_packet0,iface=veth0,...` (or `--vdev net_af_packet0,...`).
        let iface = eal_args.iter().find_map(|a| {
            let spec = a.strip_prefix("--vdev=").unwrap_or(a);
            let mut parts = spec.split(',');
            (parts.next() == Some(dev)).then_some(())?;
            parts.find_map(|kv| kv.strip_prefix("iface=").map(str::to_string))
        });
        if let Some(i) = iface {
            out.push((port.name.clone(), i));
        }
    }
    out
}

/// Whether `iface` is a veth: the kernel's `ethtool -i` driver name, read from sysfs as the
/// absence of a device with a peer link (`iflink` differs from `ifindex`).
pub fn is_veth(sys_class_net: &Path, iface: &str) -> bool {
    let d = sys_class_net.join(iface);
    let read = |f: &str| std::fs::read_to_string(d.join(f)).map(|s| s.trim().to_string());
    match (read("ifindex"), read("iflink")) {
        (Ok(a), Ok(b)) => a != b && !d.join("device").exists(),
        _ => false,
    }
}

/// Warn about each `net_af_packet` port on a veth whose checksums are not fixed.
pub fn warn_partial_checksums(p: &Platform, fix: u64) {
    for (name, iface) in af_packet_ifaces(p) {
        let fixed = p
            .port_index(&name)
            .is_some_and(|i| i < 64 && fix & (1 << i) != 0);
        if !fixed && is_veth(Path::new("/sys/class/net"), &iface) {
            tracing::warn!(
                port = %name,
                iface = %iface,
                "net_af_packet port on a veth: frames from a peer with checksum offload carry \
                 partial TCP/UDP checksums, forwarded as they are (receivers drop them), and with \
                 segmentation offload arrive as 64 kB GSO frames net_af_packet truncates \
                 (ipv4_truncated); run `ethtool -K <dev> tx off rx off` on both ends of the veth, \
                 or turn TSO/GSO off on the peer and list the port in [upf] fix_l4_checksums \
                 (docs/upf.md)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veth_detection_from_sysfs() {
        let d = tempfile::tempdir().unwrap();
        for (name, idx, link, device) in [("veth0", "5", "4", false), ("eth0", "2", "2", true)] {
            let p = d.path().join(name);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("ifindex"), format!("{idx}\n")).unwrap();
            std::fs::write(p.join("iflink"), format!("{link}\n")).unwrap();
            if device {
                std::fs::create_dir(p.join("device")).unwrap();
            }
        }
        assert!(is_veth(d.path(), "veth0"));
        assert!(!is_veth(d.path(), "eth0"));
        assert!(!is_veth(d.path(), "missing"));
        let names = vec!["n6".to_string(), "nope".to_string()];
        assert_eq!(fix_mask(&names, |n| (n == "n6").then_some(1)), 0b10);
    }
}
