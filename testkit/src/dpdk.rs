//! DPDK EAL arguments for tests and benchmarks that run the DPDK backend in-process on
//! vdevs (`net_ring`, `net_null`, ...), beside other DPDK processes.

/// EAL arguments for a private, hugepage-free EAL: main lcore 0, no PCI, `mem_mb` MB of
/// memory, no shared config (`--no-shconf`, so several such processes can run at once), no
/// telemetry socket, only EAL errors logged, then `--vdev=<v>` for each of `vdevs` in order.
pub fn eal_args(mem_mb: u32, vdevs: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "-l",
        "0",
        "--no-huge",
        "--no-pci",
        "-m",
        &mem_mb.to_string(),
        "--no-shconf",
        "--no-telemetry",
        "--log-level=lib.eal:error",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(vdevs.iter().map(|v| format!("--vdev={v}")));
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vdevs_follow_the_fixed_arguments_in_order() {
        let a = eal_args(128, &["net_ring0", "net_null0"]);
        assert_eq!(a[..6], ["-l", "0", "--no-huge", "--no-pci", "-m", "128"]);
        assert_eq!(a[a.len() - 2..], ["--vdev=net_ring0", "--vdev=net_null0"]);
    }
}
