//! Network-namespace topologies for tests that need the Linux stack (root and `ip netns`):
//! namespaces and veth pairs named under a per-test prefix, removed on drop, also when the
//! test fails half way.

use crate::tools::run;
use std::process::{Command, Stdio};

/// Namespaces and veths created under one prefix; deleted on drop.
#[derive(Debug)]
pub struct Topology {
    prefix: String,
    namespaces: Vec<String>,
    /// Root-side veth ends (deleting one end deletes the pair).
    veths: Vec<String>,
}

impl Topology {
    /// An empty topology whose names start with `prefix` (keep it short: interface names
    /// are at most 15 bytes).
    pub fn new(prefix: impl Into<String>) -> Topology {
        Topology {
            prefix: prefix.into(),
            namespaces: Vec::new(),
            veths: Vec::new(),
        }
    }

    /// A prefix unique to this process and `tag` (at most 3 bytes of `tag` are used).
    pub fn unique_prefix(tag: &str) -> String {
        let tag: String = tag.chars().take(3).collect();
        format!("{tag}{}", std::process::id() % 100_000)
    }

    /// The full name of namespace `n`.
    pub fn ns(&self, n: &str) -> String {
        format!("{}-{n}", self.prefix)
    }

    /// The full name of interface `n`.
    pub fn dev(&self, n: &str) -> String {
        format!("{}{n}", self.prefix)
    }

    /// Add namespace `n` with its loopback up.
    pub fn add_ns(&mut self, n: &str) -> Result<String, String> {
        let ns = self.ns(n);
        run(&["ip", "netns", "add", &ns])?;
        self.namespaces.push(ns.clone());
        run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Add the veth pair `a` <-> `b` (full names from [`dev`](Self::dev)) with these MACs,
    /// both ends in the root namespace.
    pub fn add_veth(&mut self, a: &str, mac_a: &str, b: &str, mac_b: &str) -> Result<(), String> {
        run(&[
            "ip", "link", "add", a, "address", mac_a, "type", "veth", "peer", "name", b, "address",
            mac_b,
        ])?;
        self.veths.push(a.to_owned());
        self.veths.push(b.to_owned());
        Ok(())
    }

    /// The prefix of every name.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Move interface `dev` (a full name, in the root namespace) into namespace `ns`.
    pub fn move_to(&self, dev: &str, ns: &str) -> Result<(), String> {
        run(&["ip", "link", "set", dev, "netns", ns]).map(drop)
    }

    /// `ip -n ns args...`.
    pub fn ip(&self, ns: &str, args: &[&str]) -> Result<String, String> {
        let mut v = vec!["ip", "-n", ns];
        v.extend_from_slice(args);
        run(&v)
    }

    /// Add `addrs` (ADDRESS/LENGTH; IPv6 ones without duplicate address detection) to `dev`
    /// in namespace `ns`, then bring it up.
    pub fn addr_up(&self, ns: &str, dev: &str, addrs: &[&str]) -> Result<(), String> {
        for a in addrs {
            let mut v = vec!["addr", "add", a, "dev", dev];
            if a.contains(':') {
                v.push("nodad");
            }
            self.ip(ns, &v)?;
        }
        self.ip(ns, &["link", "set", dev, "up"]).map(drop)
    }

    /// A permanent neighbour entry `addr -> mac` on `dev` in namespace `ns`.
    pub fn neigh(&self, ns: &str, addr: &str, mac: &str, dev: &str) -> Result<(), String> {
        self.ip(
            ns,
            &[
                "neigh",
                "replace",
                addr,
                "lladdr",
                mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ],
        )
        .map(drop)
    }

    /// Keep the kernel of namespace `ns` quiet on `dev`: no duplicate address detection and
    /// no router solicitations (no stray packets into a port under test).
    pub fn quiet(&self, ns: &str, dev: &str) -> Result<(), String> {
        self.sysctl(ns, "net.ipv6.conf.all.accept_dad", "0")?;
        self.sysctl(ns, &format!("net.ipv6.conf.{dev}.accept_dad"), "0")?;
        self.sysctl(
            ns,
            &format!("net.ipv6.conf.{dev}.router_solicitations"),
            "0",
        )
        .map(drop)
    }

    /// Without IPv6 on root-side end `dev` (handed to a DPDK `net_af_packet` port), the root
    /// namespace's kernel sends no router solicitations or DAD probes into it.
    pub fn no_ipv6(&self, dev: &str) -> Result<(), String> {
        self.sysctl("", &format!("net.ipv6.conf.{dev}.disable_ipv6"), "1")
            .map(drop)
    }

    /// Whether a running packet socket (libpcap's, a DPDK `net_pcap` or `net_af_packet`
    /// port's) is bound to root-side interface `dev`: frames into `dev` are captured from
    /// now on (`/proc/net/packet` of the root namespace, column `Iface`, `R` = running).
    pub fn captured(&self, dev: &str) -> bool {
        let Ok(ifindex) = std::fs::read_to_string(format!("/sys/class/net/{dev}/ifindex")) else {
            return false;
        };
        let ifindex = ifindex.trim();
        std::fs::read_to_string("/proc/net/packet").is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                c.get(4) == Some(&ifindex) && c.get(5) == Some(&"1")
            })
        })
    }

    /// Bring root-side interface `dev` up.
    pub fn up(&self, dev: &str) -> Result<(), String> {
        run(&["ip", "link", "set", dev, "up"]).map(drop)
    }

    /// Run `args` inside namespace `ns` (a full name).
    pub fn exec(&self, ns: &str, args: &[&str]) -> Result<String, String> {
        let mut v = vec!["ip", "netns", "exec", ns];
        v.extend_from_slice(args);
        run(&v)
    }

    /// `sysctl -qw key=value` inside namespace `ns` (a full name), or in the root namespace
    /// when `ns` is empty.
    pub fn sysctl(&self, ns: &str, key: &str, value: &str) -> Result<String, String> {
        let kv = format!("{key}={value}");
        if ns.is_empty() {
            run(&["sysctl", "-qw", &kv])
        } else {
            self.exec(ns, &["sysctl", "-qw", &kv])
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for n in self.namespaces.iter().rev() {
            let _ = run(&["ip", "netns", "del", n]);
        }
        // Veths still in the root namespace (ends moved into a namespace went with it).
        for d in &self.veths {
            let _ = Command::new("ip")
                .args(["link", "del", d])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_prefix() {
        let t = Topology::new("pgx");
        assert_eq!(
            (t.ns("src"), t.dev("s0")),
            ("pgx-src".into(), "pgxs0".into())
        );
        let p = Topology::unique_prefix("ioam");
        assert!(p.starts_with("ioa") && p.len() <= 8, "{p}");
    }

    #[test]
    fn rig_routes_go_to_the_gnb_and_dn_macs() {
        let r = gnb_dn_routes(&["192.0.2.0/24"], &["198.51.100.0/24", "2001:db8:6::/48"]);
        assert_eq!(r.matches("[[route]]").count(), 3);
        assert!(r.contains(&format!(
            "prefix = \"192.0.2.0/24\"\nport = \"n3\"\nnext_hop_mac = \"{GNB_MAC}\""
        )));
        assert!(r.contains(&format!(
            "prefix = \"2001:db8:6::/48\"\nport = \"n6\"\nnext_hop_mac = \"{DN_MAC}\""
        )));
    }

    /// With root and `ip netns`, a namespace and a veth come and go with the guard.
    #[test]
    fn namespaces_and_veths_are_removed_on_drop() {
        if !crate::tools::is_root() || run(&["ip", "netns", "list"]).is_err() {
            return crate::tools::skip("the netns guard test", "needs root and `ip netns`");
        }
        let p = Topology::unique_prefix("tk");
        let ns;
        {
            let mut t = Topology::new(p.clone());
            ns = t.add_ns("a").unwrap();
            let (a, b) = (t.dev("x"), t.dev("y"));
            t.add_veth(&a, "02:00:00:00:77:01", &b, "02:00:00:00:77:02")
                .unwrap();
            t.no_ipv6(&a).unwrap();
            t.up(&a).unwrap();
            t.move_to(&b, &ns).unwrap();
            assert!(t.exec(&ns, &["ip", "link", "show", &b]).is_ok());
            t.quiet(&ns, &b).unwrap();
            t.addr_up(&ns, &b, &["192.0.2.1/24", "fd00:77::1/64"])
                .unwrap();
            t.neigh(&ns, "192.0.2.2", "02:00:00:00:77:01", &b).unwrap();
            let addrs = t.ip(&ns, &["addr", "show", "dev", &b]).unwrap();
            assert!(addrs.contains("192.0.2.1/24") && addrs.contains("fd00:77::1/64"));
            assert!(t
                .ip(&ns, &["neigh", "show", "dev", &b])
                .unwrap()
                .contains("02:00:00:00:77:01"));
            assert!(run(&["ip", "netns", "list"]).unwrap().contains(&ns));
        }
        assert!(!run(&["ip", "netns", "list"]).unwrap().contains(&ns));
        assert!(run(&["ip", "link", "show", &format!("{p}x")]).is_err());
    }
}

/// A DPDK port of a [`two_port_backend`]: its `[[port]]` name and MAC, and the vdev
/// driving it (`net_af_packet` or `net_pcap`) on the host interface `iface`.
#[derive(Debug, Clone, Copy)]
pub struct VdevPort<'a> {
    pub name: &'a str,
    pub mac: &'a str,
    /// `"net_af_packet"` or `"net_pcap"`.
    pub driver: &'a str,
    pub iface: &'a str,
}

/// MACs of the gNB / data-network rig ([`gnb_dn`]): the daemon's N3 and N6 ports (the host
/// veth ends) and the far ends in the `gnb` and `dn` namespaces.
pub const N3_MAC: &str = "02:00:00:00:00:03";
pub const N6_MAC: &str = "02:00:00:00:00:06";
pub const GNB_MAC: &str = "02:00:00:00:03:01";
pub const DN_MAC: &str = "02:00:00:00:06:01";

/// The far end of one side of [`gnb_dn`].
#[derive(Debug, Clone, Copy)]
pub struct RigSide<'a> {
    /// Its addresses, with prefix length.
    pub addrs: &'a [&'a str],
    /// The UPF's addresses on that side: static neighbours at the daemon port's MAC.
    pub upf: &'a [&'a str],
}

/// The netns rig of the live UPF tests: namespaces `gnb` and `dn`, veth `n3` (root) - `g`
/// (gnb) and `n6` (root) - `d` (dn). The host ends carry the daemon's port MACs (the UPF
/// stage drops unicast frames to other MACs, and af_packet ports keep the interface's
/// address) and no IPv6 (the root namespace's kernel stays out of the UPF's ports: no router
/// solicitations or DAD probes). The far ends are quiet, with rp_filter off, `gnb.addrs` /
/// `dn.addrs` up and the UPF's addresses as static neighbours. The host ends come up last;
/// routes are the caller's.
pub fn gnb_dn(t: &mut Topology, gnb: RigSide<'_>, dn: RigSide<'_>) -> Result<(), String> {
    gnb_dn_via(t, gnb, dn, false)
}

/// The addresses of [`gnb_dn_ues`]: the UPF's N3 and N6, the gNB, the data network.
pub const RIG_N3_V4: &str = "192.0.2.1";
pub const RIG_N3_V6: &str = "2001:db8:3::1";
pub const RIG_GNB_V4: &str = "192.0.2.10";
pub const RIG_GNB_V6: &str = "2001:db8:3::10";
pub const RIG_N6_V4: &str = "198.51.100.254";
pub const RIG_DN_V4: &str = "198.51.100.10";

/// [`gnb_dn`] as the live UPF tests with a dual-stack N3 use it: the gNB at [`RIG_GNB_V4`]/24
/// and [`RIG_GNB_V6`]/64 beside the UPF's [`RIG_N3_V4`] and [`RIG_N3_V6`], the data network
/// at [`RIG_DN_V4`]/24 beside [`RIG_N6_V4`], through which it routes the UEs (10.45.0.0/16).
pub fn gnb_dn_ues(t: &mut Topology) -> Result<(), String> {
    let gnb = RigSide {
        addrs: &[&format!("{RIG_GNB_V4}/24"), &format!("{RIG_GNB_V6}/64")],
        upf: &[RIG_N3_V4, RIG_N3_V6],
    };
    let dn = RigSide {
        addrs: &[&format!("{RIG_DN_V4}/24")],
        upf: &[RIG_N6_V4],
    };
    gnb_dn(t, gnb, dn)?;
    t.ip(
        &t.ns("dn"),
        &["route", "add", "10.45.0.0/16", "via", RIG_N6_V4],
    )?;
    Ok(())
}

/// The `[upf]` section of a daemon on the [`gnb_dn_ues`] rig: its N3 and N6 addresses,
/// metrics on 127.0.0.1:`metrics`, room for 8 sessions, and one static session for the UE
/// `ue` (SEID 1, uplink TEID `ul_teid`, downlink TEID `dl_teid` to the rig's gNB, QFI
/// `qfi`). Sub-tables of `[upf]` may follow.
pub fn gnb_dn_ues_upf(metrics: u16, ue: &str, ul_teid: u32, dl_teid: u32, qfi: u8) -> String {
    format!(
        r#"
[upf]
node_id = "127.0.0.1"
n3 = ["{RIG_N3_V4}", "{RIG_N3_V6}"]
n6 = ["{RIG_N6_V4}"]
metrics = "127.0.0.1:{metrics}"
max_sessions = 8

[[upf.session]]
seid = 1
ue_ipv4 = "{ue}"
ul_teid = {ul_teid}
gnb = "{RIG_GNB_V4}"
dl_teid = {dl_teid}
qfi = {qfi}
"#
    )
}

/// [`gnb_dn`], with `hop`: the data network's side crosses a bump in the wire, veth `n6`
/// (root) - `h6` (namespace `hop`) and `h7` (`hop`) - `d` (dn), for a second daemon on `h6`
/// and `h7` run in namespace `hop` (see [`gnb_dn_hop_backend`]; in its own namespace, its
/// af_packet sockets' fanout group ids, which DPDK derives from the pid and the interface
/// index, cannot clash with the first daemon's). `h6` carries [`DN_MAC`] and `h7`
/// [`N6_MAC`], so each segment's frames are addressed to the end that receives them.
pub fn gnb_dn_via(
    t: &mut Topology,
    gnb: RigSide<'_>,
    dn: RigSide<'_>,
    hop: bool,
) -> Result<(), String> {
    let (gnb_ns, dn_ns) = (t.add_ns("gnb")?, t.add_ns("dn")?);
    let (n3, g, n6, d) = (t.dev("n3"), t.dev("g"), t.dev("n6"), t.dev("d"));
    let (h6, h7) = (t.dev("h6"), t.dev("h7"));
    let mut pairs = vec![(&n3, N3_MAC, &g, GNB_MAC)];
    if hop {
        pairs.extend([(&n6, N6_MAC, &h6, DN_MAC), (&h7, N6_MAC, &d, DN_MAC)]);
    } else {
        pairs.push((&n6, N6_MAC, &d, DN_MAC));
    }
    for (host, hmac, peer, pmac) in pairs {
        t.add_veth(host, hmac, peer, pmac)?;
        if host != &h7 {
            t.no_ipv6(host)?;
        }
    }
    if hop {
        let hop_ns = t.add_ns("hop")?;
        for dev in [&h6, &h7] {
            t.move_to(dev, &hop_ns)?;
            t.sysctl(&hop_ns, &format!("net.ipv6.conf.{dev}.disable_ipv6"), "1")?;
            t.ip(&hop_ns, &["link", "set", dev, "up"])?;
        }
    }
    t.move_to(&g, &gnb_ns)?;
    t.move_to(&d, &dn_ns)?;
    for (ns, dev, side, mac) in [(&gnb_ns, &g, gnb, N3_MAC), (&dn_ns, &d, dn, N6_MAC)] {
        t.quiet(ns, dev)?;
        for key in ["all", "default", dev.as_str()] {
            t.sysctl(ns, &format!("net.ipv4.conf.{key}.rp_filter"), "0")?;
        }
        t.addr_up(ns, dev, side.addrs)?;
        for upf in side.upf {
            t.neigh(ns, upf, mac, dev)?;
        }
    }
    for dev in [&n3, &n6] {
        t.up(dev)?;
    }
    Ok(())
}

/// The `[workers]`, `[backend]` and `[[port]]` sections of the second daemon of a
/// [`gnb_dn_via`] rig with a hop (run in namespace `hop`): port `up` on `h6` (towards the
/// UPF's n6, MAC [`DN_MAC`]) and `down` on `h7` (towards the data network, MAC [`N6_MAC`]),
/// both `net_af_packet`, EAL file prefix the topology's plus `h`.
pub fn gnb_dn_hop_backend(t: &Topology) -> String {
    let (h6, h7) = (t.dev("h6"), t.dev("h7"));
    two_port_backend(
        &format!("{}h", t.prefix()),
        [
            VdevPort {
                name: "up",
                mac: DN_MAC,
                driver: "net_af_packet",
                iface: &h6,
            },
            VdevPort {
                name: "down",
                mac: N6_MAC,
                driver: "net_af_packet",
                iface: &h7,
            },
        ],
        1024,
        8191,
        256,
    )
}

/// [`two_port_backend`] for the [`gnb_dn`] rig: port `n3` (MAC [`N3_MAC`]) on veth end `n3`
/// through DPDK driver `drivers[0]`, port `n6` ([`N6_MAC`]) on `n6` through `drivers[1]`.
pub fn gnb_dn_backend(
    t: &Topology,
    drivers: [&str; 2],
    desc: u32,
    mbufs: u32,
    mem_mb: u32,
) -> String {
    let (n3, n6) = (t.dev("n3"), t.dev("n6"));
    two_port_backend(
        t.prefix(),
        [
            VdevPort {
                name: "n3",
                mac: N3_MAC,
                driver: drivers[0],
                iface: &n3,
            },
            VdevPort {
                name: "n6",
                mac: N6_MAC,
                driver: drivers[1],
                iface: &n6,
            },
        ],
        desc,
        mbufs,
        mem_mb,
    )
}

/// Static `[[route]]` tables for the [`gnb_dn`] rig: each of `n3` (prefixes) out of port `n3`
/// to the gNB's MAC [`GNB_MAC`], each of `n6` out of port `n6` to the data network's MAC
/// [`DN_MAC`].
pub fn gnb_dn_routes(n3: &[&str], n6: &[&str]) -> String {
    let n3 = n3.iter().map(|p| (p, "n3", GNB_MAC));
    let n6 = n6.iter().map(|p| (p, "n6", DN_MAC));
    n3.chain(n6)
        .map(|(prefix, port, mac)| {
            format!(
                "\n[[route]]\nprefix = \"{prefix}\"\nport = \"{port}\"\nnext_hop_mac = \"{mac}\"\n"
            )
        })
        .collect()
}

/// The `[workers]` (one worker), `[backend]` (DPDK, `--no-huge`, one vdev per port on a host
/// interface, EAL file prefix `file_prefix`) and `[[port]]` sections of a daemon config
/// whose ports are two veth ends: the part the netns tests share. `mbufs` per worker, ring
/// sizes `desc`, EAL memory `mem_mb`.
pub fn two_port_backend(
    file_prefix: &str,
    ports: [VdevPort<'_>; 2],
    desc: u32,
    mbufs: u32,
    mem_mb: u32,
) -> String {
    let dev = |i: usize| format!("{}{i}", ports[i].driver);
    let vdevs = (0..2)
        .map(|i| format!("\"--vdev={},iface={}\"", dev(i), ports[i].iface))
        .collect::<Vec<_>>()
        .join(", ");
    let mut s = format!(
        r#"
[workers]
count = 1

[backend]
kind = "dpdk"
eal_args = ["--no-huge", "--no-pci", "-m", "{mem_mb}", "--no-shconf", "--no-telemetry", "-l", "0",
            "--file-prefix={file_prefix}", "--log-level=lib.eal:error",
            {vdevs}]
rx_desc = {desc}
tx_desc = {desc}
mbufs_per_worker = {mbufs}
mbuf_cache = {cache}
"#,
        cache = if mbufs >= 4095 { 128 } else { 64 },
    );
    for (i, p) in ports.iter().enumerate() {
        s.push_str(&format!(
            "\n[[port]]\nname = \"{}\"\nmac = \"{}\"\ndevice = \"{}\"\n",
            p.name,
            p.mac,
            dev(i)
        ));
    }
    s
}
