//! The UPF stage's configuration (the same for every worker).

use crate::qos::QfiMap;
use crate::upf::reasm::ReasmConfig;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Configuration of one UPF stage (the same for every worker).
#[derive(Debug, Clone)]
pub struct UpfConfig {
    /// Largest outer IP packet sent on egress (default 1500).
    pub mtu: u16,
    /// Per-worker rate limit for Error Indications and ICMP errors, per second (default 100).
    pub error_indication_pps: u32,
    /// Our N6 address: the source of ICMP errors toward N6 hosts.
    pub n6_v4: Option<Ipv4Addr>,
    pub n6_v6: Option<Ipv6Addr>,
    /// QFI -> egress queue.
    pub qfi_map: QfiMap,
    /// Route frames whatever their destination MAC (replays of foreign captures).
    pub promiscuous: bool,
    /// Per-worker meter array size, fixed at construction.
    pub max_meter_slots: u32,
    /// Bit `i`: recompute the TCP/UDP checksum of packets received on port `i` (peers with
    /// checksum offload leave them partial; `upf::csum`).
    pub fix_l4_checksums: u64,
    /// Per-worker limits of the outer-fragment reassembly (`crate::upf::reasm`).
    pub reassembly: ReasmConfig,
}

impl Default for UpfConfig {
    fn default() -> Self {
        UpfConfig {
            mtu: 1500,
            error_indication_pps: 100,
            n6_v4: None,
            n6_v6: None,
            qfi_map: QfiMap::default(),
            promiscuous: false,
            max_meter_slots: 4096,
            fix_l4_checksums: 0,
            reassembly: ReasmConfig::default(),
        }
    }
}
