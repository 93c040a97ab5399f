//! Rate checks on captures: what a UPF's MBR tests measure (the bytes a session delivered
//! per second), shared by the 1-worker and 2-worker MBR tests.

use crate::pcap::read_records;
use peregrine_wire::{ethernet, gtpu, ipv4, udp};
use std::path::Path;

/// (capture timestamp, inner IP packet length) of every frame of `pcap` that carries user
/// data: on N3 (`n3`) the T-PDU inside GTP-U (TS 29.281 section 5.1), on N6 the IPv4 packet
/// itself. The MBR counts the inner packet (TS 29.244 section 5.2.2.2: the T-PDU, without
/// the GTP-U encapsulation). Frames that are not IPv4 user data are skipped.
pub fn inner_lengths(pcap: &Path, n3: bool) -> Vec<(u64, u64)> {
    let mut out = vec![];
    for r in read_records(pcap).expect("readable capture") {
        let Ok(eth) = ethernet::Frame::new_checked(&r.data[..]) else {
            continue;
        };
        let Ok(ip) = ipv4::Packet::new_checked(eth.payload()) else {
            continue;
        };
        let len = if n3 {
            let Ok(u) = udp::Packet::new_checked(ip.payload()) else {
                continue;
            };
            let Ok(g) = gtpu::Header::new_checked(u.payload()) else {
                continue;
            };
            let Ok(inner) = ipv4::Packet::new_checked(g.payload()) else {
                continue;
            };
            inner.total_len()
        } else {
            ip.total_len()
        };
        out.push((r.ts_ns, u64::from(len)));
    }
    out
}

/// Bytes per 1 s window from `t0`, for the `n` full windows.
pub fn per_second(pkts: &[(u64, u64)], t0: u64, n: usize) -> Vec<u64> {
    let mut w = vec![0u64; n];
    for &(ts, len) in pkts {
        let i = (ts.saturating_sub(t0) / 1_000_000_000) as usize;
        if ts >= t0 && i < n {
            w[i] += len;
        }
    }
    w
}

/// The start of an MBR test's full 1 s windows: its offered load's first packet, either
/// direction. Asserts that the capture spans `windows` whole seconds and that each direction
/// offered about twice the MBR (`mbr_bytes` per second: 1.9 to 2.15 x) in every one of them,
/// so that what is delivered at the MBR is the meter's doing.
pub fn offered_windows(
    offered_ul: &[(u64, u64)],
    offered_dl: &[(u64, u64)],
    windows: usize,
    mbr_bytes: u64,
) -> u64 {
    let t0 = offered_ul[0].0.min(offered_dl[0].0);
    let t_end = offered_ul
        .last()
        .unwrap()
        .0
        .max(offered_dl.last().unwrap().0);
    assert_eq!(((t_end - t0) / 1_000_000_000) as usize, windows);
    for (name, o) in [("uplink", offered_ul), ("downlink", offered_dl)] {
        for (i, bytes) in per_second(o, t0, windows).into_iter().enumerate() {
            let x = bytes as f64 / mbr_bytes as f64;
            assert!(
                (1.9..=2.15).contains(&x),
                "{name} offered {x:.3} x MBR in s {i}"
            );
        }
    }
    t0
}

/// Assert that every one of the `n` full 1 s windows of `delivered` from `t0` carried the
/// MBR (`mbr_bytes` per second) within 5 %; `name` labels the failure. Returns the windows.
pub fn assert_windows_at_mbr(
    name: &str,
    delivered: &[(u64, u64)],
    t0: u64,
    n: usize,
    mbr_bytes: u64,
) -> Vec<u64> {
    let w = per_second(delivered, t0, n);
    eprintln!("{name}: delivered per second {w:?} (MBR {mbr_bytes} bytes/s)");
    for (i, &bytes) in w.iter().enumerate() {
        let x = bytes as f64 / mbr_bytes as f64;
        assert!(
            (0.95..=1.05).contains(&x),
            "{name}: second {i} delivered {bytes} bytes = {x:.3} x MBR: {w:?}"
        );
    }
    w
}

/// The `direction` / `qfi` row of the daemon summary's per-QFI table.
pub fn qfi_row<'a>(
    summary: &'a serde_json::Value,
    direction: &str,
    qfi: u64,
) -> &'a serde_json::Value {
    summary["upf"]["qfi"]
        .as_array()
        .and_then(|rows| {
            rows.iter()
                .find(|r| r["direction"] == direction && r["qfi"] == qfi)
        })
        .unwrap_or_else(|| panic!("no {direction} QFI {qfi} row: {summary}"))
}

#[cfg(test)]
mod tests {
    use super::per_second;

    #[test]
    fn windows_count_bytes_from_t0_and_drop_the_rest() {
        let pkts = [
            (5, 10),
            (1_000_000_004, 20),
            (1_999_999_999, 1),
            (2_000_000_005, 7),
            (4, 99),
        ];
        // Windows are [t0, t0 + 1 s), [t0 + 1 s, t0 + 2 s); earlier and later packets are not counted.
        assert_eq!(per_second(&pkts, 5, 2), vec![30, 1]);
    }
}
