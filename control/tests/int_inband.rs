//! In-band installation end to end (issue 13 item 4; seed III-B "INT Request", III-D): the rule
//! is installed only at the source, over ZeroMQ; the transit and the sink learn the namespace
//! from the 0x32 option in the flow's first packet.
//!
//! ```text
//!  netns src       root: peregrine p1    root: peregrine p2    root: peregrine p3      netns dst
//!  [s0]=veth=[sa | source | 1b]=veth=[2a | transit | 2b]=veth=[3a | sink | 3b]=veth=[d0]
//!  fd00:1::1       node 1                 node 2                node 3                 fd00:2::1
//! ```
//!
//! Each node is a `peregrine run` process (pipeline `int`, DPDK `net_af_packet` ports on root
//! veths), as in int_multihop.rs. Checked: before any traffic p2 and p3 have no rule; after the
//! first packets both list namespace 7 (learned in-band) and p3's reports carry p2's hop; a
//! changed rule at the source (`int mod --setting 5`) is re-sent at once and replaces the rule
//! learned at p3, and p3's report rate follows it. The second test switches a Linux router's
//! route between two transits and times the new hop's arrival in the sink's reports against
//! the source's re-send interval (docs/int.md "In-band installation").
//!
//! Needs root, `ip netns` and python3; outside CI it prints why and passes when they are
//! missing, under `CI` it fails.

use peregrine_testkit::intnet::*;
use peregrine_testkit::netns::Topology;
use peregrine_testkit::tools::{free_tcp_port, skip};
use std::time::{Duration, Instant};

/// The chain of the figure above.
fn setup(t: &mut Topology) -> Result<(), String> {
    let (src, dst) = (t.add_ns("src")?, t.add_ns("dst")?);
    let links = [
        link(t, "s0", MAC_SRC, &src, "sa", &mac(1, 'a'), ""),
        link(t, "1b", &mac(1, 'b'), "", "2a", &mac(2, 'a'), ""),
        link(t, "2b", &mac(2, 'b'), "", "3a", &mac(3, 'a'), ""),
        link(t, "3b", &mac(3, 'b'), "", "d0", MAC_DST, &dst),
    ];
    link_all(t, &links)?;
    hosts(t, &mac(1, 'a'), &mac(3, 'b'), &[])
}

fn frame(seq: u16) -> Vec<u8> {
    udp_frame(MAC_SRC, &mac(1, 'a'), SRC, DST, 4000, 5000, seq, 48)
}

fn node_config(
    t: &Topology,
    id: u8,
    rules: u16,
    reports: u16,
    roles: &str,
    w: &str,
    e: &str,
) -> String {
    let a = if id == 1 {
        t.dev("sa")
    } else {
        t.dev(&format!("{id}a"))
    };
    let b = t.dev(&format!("{id}b"));
    peregrine_testkit::intnet::node_config(
        t,
        id,
        &[('a', a), ('b', b)],
        &[("fd00:1::/64", 'a', w), ("fd00:2::/64", 'b', e)],
        &int_lines(roles, rules, reports),
        "",
    )
}

#[test]
fn a_rule_installed_only_at_the_source_reaches_transit_and_sink() {
    let what = "the in-band installation test";
    if !preflight(what) {
        return;
    }
    let mut topo = Topology::new(Topology::unique_prefix("ib"));
    if let Err(e) = setup(&mut topo) {
        return skip(what, &format!("cannot build the namespaces: {e}"));
    }
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_tcp_port(), free_tcp_port())).collect();
    let cfgs = vec![
        node_config(
            &topo,
            1,
            ports[0].0,
            ports[0].1,
            "\"source\"",
            MAC_SRC,
            &mac(2, 'a'),
        ),
        node_config(
            &topo,
            2,
            ports[1].0,
            ports[1].1,
            "\"transit\"",
            &mac(1, 'b'),
            &mac(3, 'a'),
        ),
        node_config(
            &topo,
            3,
            ports[2].0,
            ports[2].1,
            "\"sink\"",
            &mac(2, 'b'),
            MAC_DST,
        ),
    ];
    let mut daemons = Daemons::start(env!("CARGO_BIN_EXE_peregrine"), cfgs);
    // Every node answers; only p1 gets the rule.
    let rule = rule_args("7", "fd00:2::1", "1");
    for (i, (rules, _)) in ports.iter().enumerate() {
        if i == 0 {
            let r: Vec<&str> = rule.iter().map(String::as_str).collect();
            daemons.until_up(i, *rules, &r);
        } else {
            let out = daemons.until_up(i, *rules, &["list"]);
            assert!(!out.contains("\"ns_id\""), "node {}: {out}", i + 1);
        }
    }
    let (_w3, sink_lines) = watch(ports[2].1);
    std::thread::sleep(Duration::from_millis(1500));
    let (src_ns, s0) = (topo.ns("src"), topo.dev("s0"));

    // The first packet carries the request; both downstream nodes learn namespace 7.
    send(&src_ns, &s0, &(0..3).map(frame).collect::<Vec<_>>(), 20);
    for (i, (rules, _)) in ports.iter().enumerate().skip(1) {
        wait_for(
            &format!("node {} to learn ns 7", i + 1),
            Duration::from_secs(10),
            || ctl_run(*rules, &["list"]).is_ok_and(|o| o.contains("\"ns_id\":7")),
        );
    }
    let before = reports(&sink_lines).len();
    send(&src_ns, &s0, &(100..120).map(frame).collect::<Vec<_>>(), 20);
    wait_for("20 reports at p3", Duration::from_secs(10), || {
        reports(&sink_lines).len() >= before + 20
    });
    let r1 = reports(&sink_lines)[before..].to_vec();
    for r in &r1 {
        assert_eq!(
            (r["ns_id"].as_u64(), r["sink_node_id"].as_u64()),
            (Some(7), Some(3)),
            "{r}"
        );
        assert_eq!(hop_ids(r), vec![2], "p2 filled its hop: {r}");
    }

    // A changed rule at the source is re-sent at once and replaces the learned one at p3.
    ctl_run(ports[0].0, &["mod", "--ns", "7", "--setting", "5"]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    send(&src_ns, &s0, &(200..202).map(frame).collect::<Vec<_>>(), 20);
    for (rules, _) in &ports[1..] {
        wait_for(
            "the changed rule downstream",
            Duration::from_secs(10),
            || ctl_run(*rules, &["list"]).is_ok_and(|o| o.contains("\"mode_setting\":5")),
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = reports(&sink_lines).len();
    send(&src_ns, &s0, &(300..340).map(frame).collect::<Vec<_>>(), 10);
    std::thread::sleep(Duration::from_millis(1500));
    let n2 = reports(&sink_lines).len() - before;
    assert!(
        (7..=9).contains(&n2),
        "count 5 over 40 packets: {n2} reports"
    );
    eprintln!(
        "in-band installation: {} reports with p2's hop, then {n2} at count 5",
        r1.len()
    );
    daemons.stop_all();
}

/// Route change (issue 13 must-show): two paths from p1 to the sink p4 through a Linux router
/// `r` whose route is switched at run time ([`two_paths`]); the rule is installed
/// only at p1, with a 2 s re-send interval.
/// The source's re-send interval in the route-change test.
const RESEND_MS: u64 = 2000;

#[test]
fn after_a_route_change_the_new_hop_appears_within_one_resend_interval() {
    let what = "the in-band route-change test";
    if !preflight(what) {
        return;
    }
    let mut topo = Topology::new(Topology::unique_prefix("ir"));
    if let Err(e) = two_paths(&mut topo, None) {
        return skip(what, &format!("cannot build the namespaces: {e}"));
    }
    let ports: Vec<(u16, u16)> = (0..4).map(|_| (free_tcp_port(), free_tcp_port())).collect();
    let int = |i: usize, roles: &str| {
        int_lines(roles, ports[i].0, ports[i].1) + &format!("resend_interval_ms = {RESEND_MS}\n")
    };
    let d = |n: &str| topo.dev(n);
    let (m2b, m4a, m4c) = (mac(2, 'b'), mac(4, 'a'), mac(4, 'c'));
    let cfgs = vec![
        peregrine_testkit::intnet::node_config(
            &topo,
            1,
            &[('a', d("sa")), ('b', d("1b"))],
            &[("fd00:1::/64", 'a', MAC_SRC), ("fd00:2::/64", 'b', MAC_RA)],
            &int(0, "\"source\""),
            "",
        ),
        peregrine_testkit::intnet::node_config(
            &topo,
            2,
            &[('a', d("2a")), ('b', d("2b"))],
            &[("fd00:1::/64", 'a', MAC_RB), ("fd00:2::/64", 'b', &m4a)],
            &int(1, "\"transit\""),
            "",
        ),
        peregrine_testkit::intnet::node_config(
            &topo,
            3,
            &[('a', d("3a")), ('b', d("3b"))],
            &[("fd00:1::/64", 'a', MAC_RC), ("fd00:2::/64", 'b', &m4c)],
            &int(2, "\"transit\""),
            "",
        ),
        peregrine_testkit::intnet::node_config(
            &topo,
            4,
            &[('a', d("4a")), ('b', d("4b")), ('c', d("4c"))],
            &[("fd00:1::/64", 'a', &m2b), ("fd00:2::/64", 'b', MAC_DST)],
            &int(3, "\"sink\""),
            "",
        ),
    ];
    let mut daemons = Daemons::start(env!("CARGO_BIN_EXE_peregrine"), cfgs);
    let rule = rule_args("7", "fd00:2::1", "1");
    let rule: Vec<&str> = rule.iter().map(String::as_str).collect();
    for (i, (rules, _)) in ports.iter().enumerate() {
        daemons.until_up(i, *rules, if i == 0 { &rule } else { &["list"] });
    }
    let (_w4, sink_lines) = watch(ports[3].1);
    std::thread::sleep(Duration::from_millis(1500));
    let (src_ns, s0) = (topo.ns("src"), topo.dev("s0"));

    // Path 1 (via p2): p2 and p4 learn the namespace, p3 does not see the flow.
    send(&src_ns, &s0, &(0..20).map(frame).collect::<Vec<_>>(), 20);
    wait_for("reports with p2's hop", Duration::from_secs(10), || {
        reports(&sink_lines).iter().any(|r| hop_ids(r) == [2])
    });
    let p3_list = ctl_run(ports[2].0, &["list"]).unwrap();
    assert!(
        !p3_list.contains("\"ns_id\""),
        "p3 is off the path: {p3_list}"
    );

    // Switch the route to p3; keep the flow going for two re-send intervals.
    topo.ip(
        &topo.ns("r"),
        &["-6", "route", "replace", "fd00:2::/64", "via", "fd00:c::1"],
    )
    .unwrap();
    let switched = Instant::now();
    let before = reports(&sink_lines).len();
    let (ns2, dev2) = (src_ns.clone(), s0.clone());
    let n = (2 * RESEND_MS / 20) as u16;
    let sender = std::thread::spawn(move || {
        send(
            &ns2,
            &dev2,
            &(1000..1000 + n).map(frame).collect::<Vec<_>>(),
            20,
        )
    });
    let mut first_p3 = None;
    while first_p3.is_none() && switched.elapsed() < Duration::from_millis(3 * RESEND_MS) {
        if reports(&sink_lines)[before..]
            .iter()
            .any(|r| hop_ids(r) == [3])
        {
            first_p3 = Some(switched.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    sender.join().unwrap();
    let after = reports(&sink_lines)[before..].to_vec();
    let seen = first_p3.unwrap_or_else(|| panic!("p3's hop never appeared: {after:?}"));
    // Polling and a loaded 2-core machine: half a second of slack over one interval.
    assert!(
        seen <= Duration::from_millis(RESEND_MS + 500),
        "p3's hop after {seen:?}, re-send interval {RESEND_MS} ms"
    );
    assert!(
        after
            .iter()
            .all(|r| hop_ids(r).is_empty() || hop_ids(r) == [3]),
        "after the switch only the new path's hop (or none, before p3 learns): {after:?}"
    );
    let p3_list = ctl_run(ports[2].0, &["list"]).unwrap();
    assert!(p3_list.contains("\"ns_id\":7"), "p3 learned it: {p3_list}");
    eprintln!(
        "route change: p3's hop in the sink's reports {:.2} s after the switch (re-send {} s), {} reports without a hop before",
        seen.as_secs_f64(),
        RESEND_MS as f64 / 1000.0,
        after.iter().filter(|r| hop_ids(r).is_empty()).count()
    );
    daemons.stop_all();
}
