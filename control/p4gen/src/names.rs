//! The P4 names the generator writes entries for: one list, used by the renderers and by the
//! structural check of the P4 sources (`crate::p4decl`), so a rename on either side fails a
//! test instead of a load at run time.
//!
//! Control paths are the same in the TNA programs and the v1model twin
//! (`PgIngress.upf.*`, `PgIngress.route.*`, `PgIngress.int_transit.*`); BF Runtime prefixes
//! them with the pipe (`pipe.`).

/// A table the generator fills: its path under the ingress control, its key fields and the
/// actions (with parameters) entries may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    /// The architecture's control holding it: [`INGRESS`] or [`EGRESS`].
    pub root: &'static str,
    /// Instance path under `root` ("" for a table of `root` itself).
    pub control: &'static str,
    pub name: &'static str,
    pub keys: &'static [&'static str],
    pub actions: &'static [Action],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    pub name: &'static str,
    pub params: &'static [&'static str],
}

impl Table {
    /// `<root>.<control>.<name>` (`<root>.<name>` for a table of the root control).
    pub fn path(&self) -> String {
        format!("{}.{}", self.control_path(), self.name)
    }

    /// `<root>.<control>`: the prefix of its actions' names.
    pub fn control_path(&self) -> String {
        if self.control.is_empty() {
            self.root.to_string()
        } else {
            format!("{}.{}", self.root, self.control)
        }
    }

    pub fn action(&self, name: &str) -> Option<&'static Action> {
        self.actions.iter().find(|a| a.name == name)
    }
}

/// The ingress control's type name, in every program.
pub const INGRESS: &str = "PgIngress";
/// The egress control's type name (the TNA telemetry program's tables).
pub const EGRESS: &str = "PgEgress";

const PDR_APPLY: Action = Action {
    name: "pdr_apply",
    params: &[
        "far_idx",
        "gate_open",
        "meter_idx",
        "metered",
        "urr_idx",
        "counted",
        "pdr_qfi",
        "match_qfi",
        "mark_qfi",
    ],
};
const PDR_TO_CPU: Action = Action {
    name: "pdr_to_cpu",
    params: &[],
};
const N3_LOCAL: Action = Action {
    name: "n3_local",
    params: &[],
};
const SET_NEXT_HOP: Action = Action {
    name: "set_next_hop",
    params: &["port", "dmac", "smac"],
};

pub const N3_V4: Table = Table {
    root: INGRESS,
    control: "upf",
    name: "n3_v4",
    keys: &["hdr.ipv4.dst_addr"],
    actions: &[N3_LOCAL],
};
pub const N3_V6: Table = Table {
    root: INGRESS,
    control: "upf",
    name: "n3_v6",
    keys: &["hdr.ipv6.dst_addr"],
    actions: &[N3_LOCAL],
};
pub const UL_PDR: Table = Table {
    root: INGRESS,
    control: "upf",
    name: "ul_pdr",
    keys: &["hdr.gtpu.teid"],
    actions: &[PDR_APPLY, PDR_TO_CPU],
};
pub const DL_PDR_V4: Table = Table {
    root: INGRESS,
    control: "upf",
    name: "dl_pdr_v4",
    keys: &["hdr.ipv4.dst_addr"],
    actions: &[PDR_APPLY, PDR_TO_CPU],
};
pub const DL_PDR_V6: Table = Table {
    root: INGRESS,
    control: "upf",
    name: "dl_pdr_v6",
    keys: &["md.ue_prefix64"],
    actions: &[PDR_APPLY, PDR_TO_CPU],
};
pub const FAR: Table = Table {
    root: INGRESS,
    control: "upf",
    name: "far",
    keys: &["md.far_idx"],
    actions: &[
        Action {
            name: "far_route",
            params: &[],
        },
        Action {
            name: "far_encap_v4",
            params: &["teid", "peer", "local", "psc_type"],
        },
        Action {
            name: "far_encap_v6",
            params: &["teid", "peer", "local", "psc_type"],
        },
        Action {
            name: "far_drop",
            params: &[],
        },
        Action {
            name: "far_buffer",
            params: &[],
        },
    ],
};
pub const QFI_QID: Table = Table {
    root: INGRESS,
    control: "upf",
    name: "qfi_qid",
    keys: &["md.qfi"],
    actions: &[Action {
        name: "set_qid",
        params: &["qid"],
    }],
};
pub const ROUTE_V4: Table = Table {
    root: INGRESS,
    control: "upf.route",
    name: "route_v4",
    keys: &["md.route_v4"],
    actions: &[SET_NEXT_HOP],
};
pub const ROUTE_V6: Table = Table {
    root: INGRESS,
    control: "upf.route",
    name: "route_v6",
    keys: &["md.route_v6"],
    actions: &[SET_NEXT_HOP],
};
/// The stand-alone INT transit program's own routes.
pub const INT_ROUTE_V4: Table = Table {
    root: INGRESS,
    control: "route",
    ..ROUTE_V4
};
pub const INT_ROUTE_V6: Table = Table {
    root: INGRESS,
    control: "route",
    ..ROUTE_V6
};
pub const UPF_MTU: Table = Table {
    root: INGRESS,
    control: "upf",
    name: "upf_mtu",
    keys: &[],
    actions: &[Action {
        name: "set_mtu",
        params: &["mtu"],
    }],
};
pub const INT_TIME: Table = Table {
    root: INGRESS,
    control: "int_transit",
    name: "int_time",
    keys: &[],
    actions: &[Action {
        name: "int_set_time_base",
        params: &["base_ns", "base_secs"],
    }],
};
pub const INT_NODE: Table = Table {
    root: INGRESS,
    control: "int_transit",
    name: "int_node",
    keys: &[],
    actions: &[Action {
        name: "int_set_node",
        params: &["node_id", "hop_lim_dec", "ts_posix"],
    }],
};
pub const INT_NS: Table = Table {
    root: INGRESS,
    control: "int_transit",
    name: "int_ns",
    keys: &["hdr.ioam_trace.namespace_id"],
    actions: &[Action {
        name: "int_ns_enabled",
        params: &[],
    }],
};
pub const INT_LAYOUT: Table = Table {
    root: INGRESS,
    control: "int_transit",
    name: "int_layout",
    keys: &["hdr.ioam_trace.trace_type"],
    actions: &[Action {
        name: "int_set_layout",
        params: &["w0", "w1", "w2", "w3"],
    }],
};

/// Every table of the UPF program.
pub const UPF_TABLES: &[Table] = &[
    N3_V4, N3_V6, UL_PDR, DL_PDR_V4, DL_PDR_V6, FAR, QFI_QID, UPF_MTU, ROUTE_V4, ROUTE_V6,
];
/// Every table of the INT transit program.
pub const INT_TABLES: &[Table] = &[INT_NODE, INT_TIME, INT_NS, INT_LAYOUT];
/// Every table of the stand-alone INT transit program (TNA), which routes by itself.
pub const INT_PROGRAM_TABLES: &[Table] = &[
    INT_NODE,
    INT_TIME,
    INT_NS,
    INT_LAYOUT,
    INT_ROUTE_V4,
    INT_ROUTE_V6,
];

/// Externs with per-index state the generator configures or reads.
pub const QER_METER: &str = "qer_meter";
pub const URR_COUNTER: &str = "urr_counter";
pub const DROP_COUNTER: &str = "drop_counter";

/// Headers (and their fields) the generated entries match on; checked against
/// `p4/include/headers.p4`.
pub const HEADER_FIELDS: &[(&str, &[&str])] = &[
    ("ipv4_h", &["dst_addr", "src_addr", "ttl", "hdr_checksum"]),
    ("ipv6_h", &["dst_addr", "src_addr", "hop_limit"]),
    ("gtpu_h", &["teid", "msg_type"]),
    ("gtpu_psc_h", &["pdu_type", "qfi"]),
    (
        "ioam_trace_h",
        &[
            "namespace_id",
            "node_len",
            "flags",
            "remaining_len",
            "trace_type",
        ],
    ),
];

/// Metadata fields used as keys, in `pg_meta_t`.
pub const META_FIELDS: &[&str] = &["ue_prefix64", "far_idx", "qfi", "route_v4", "route_v6"];

// The TNA telemetry program's tables beyond the UPF's (tna/upf_telemetry.p4).

pub const FRIDGE_CONFIG: Table = Table {
    root: INGRESS,
    control: "fridge",
    name: "fridge_config",
    keys: &[],
    actions: &[
        Action {
            name: "fridge_set",
            params: &["req_uplink", "slot_mask"],
        },
        Action {
            name: "fridge_off",
            params: &[],
        },
    ],
};
pub const FRIDGE_COIN: Table = Table {
    root: INGRESS,
    control: "fridge",
    name: "fridge_coin",
    keys: &["md.fr_hash"],
    actions: &[Action {
        name: "fridge_eligible",
        params: &[],
    }],
};
pub const FRIDGE_FACTOR: Table = Table {
    root: INGRESS,
    control: "fridge",
    name: "fridge_factor",
    keys: &["md.fr_x"],
    actions: &[Action {
        name: "fridge_set_factor",
        params: &["factor"],
    }],
};
pub const FRIDGE_BIN: Table = Table {
    root: INGRESS,
    control: "fridge",
    name: "fridge_bin",
    keys: &["md.fr_delay"],
    actions: &[Action {
        name: "fridge_set_bin",
        params: &["bin"],
    }],
};
pub const KESTREL_SEED: Table = Table {
    root: EGRESS,
    control: "kestrel",
    name: "kestrel_seed",
    keys: &["eh.bridge.qid"],
    actions: &[Action {
        name: "kestrel_set_seed",
        params: &["seed"],
    }],
};
pub const KESTREL_LAT_BIN: Table = Table {
    root: EGRESS,
    control: "kestrel",
    name: "kestrel_lat_bin",
    keys: &["eh.bridge.qid", "em.sojourn"],
    actions: &[Action {
        name: "kestrel_set_lat_bin",
        params: &["bin"],
    }],
};
const IAT_BIN: Action = Action {
    name: "kestrel_set_iat_bin",
    params: &["bin"],
};
/// One inter-arrival bin table per row (each row's gap is its own bucket's).
pub const KESTREL_IAT_BIN: [Table; 3] = [
    Table {
        root: EGRESS,
        control: "kestrel.row0",
        name: "kestrel_iat_bin",
        keys: &["eh.bridge.qid", "gap"],
        actions: &[IAT_BIN],
    },
    Table {
        root: EGRESS,
        control: "kestrel.row1",
        name: "kestrel_iat_bin",
        keys: &["eh.bridge.qid", "gap"],
        actions: &[IAT_BIN],
    },
    Table {
        root: EGRESS,
        control: "kestrel.row2",
        name: "kestrel_iat_bin",
        keys: &["eh.bridge.qid", "gap"],
        actions: &[IAT_BIN],
    },
];
pub const DTA_CONFIG: Table = Table {
    root: EGRESS,
    control: "",
    name: "dta_config",
    keys: &[],
    actions: &[
        Action {
            name: "dta_set",
            params: &[
                "session",
                "redundancy",
                "list_id",
                "sample_last",
                "src_mac",
                "dst_mac",
                "src_ip",
                "dst_ip",
                "src_port",
            ],
        },
        Action {
            name: "dta_off",
            params: &[],
        },
    ],
};

/// The telemetry program's own tables (it also holds every [`UPF_TABLES`] table).
pub const TELEMETRY_TABLES: &[Table] = &[
    FRIDGE_CONFIG,
    FRIDGE_COIN,
    FRIDGE_FACTOR,
    FRIDGE_BIN,
    KESTREL_SEED,
    KESTREL_LAT_BIN,
    KESTREL_IAT_BIN[0],
    KESTREL_IAT_BIN[1],
    KESTREL_IAT_BIN[2],
    DTA_CONFIG,
];

/// The BF Runtime mirror session table and the session the DTA copies use.
pub const MIRROR_CFG: &str = "$mirror.cfg";
pub const DTA_MIRROR_SESSION: u16 = 1;

/// Telemetry headers (and their fields) the reports and the egress parser use; checked
/// against `p4/include/headers.p4`, with their widths against the Rust wire layouts.
pub const TELEMETRY_HEADER_FIELDS: &[(&str, &[&str])] = &[
    (
        "pg_dta_base_h",
        &["opcode", "seqnum", "immediate", "retransmit", "reserved"],
    ),
    ("pg_dta_key_write_h", &["redundancy", "key", "data"]),
    ("pg_dta_append_h", &["list_id", "data"]),
    ("pg_dta_mirror_h", &["kind", "opcode", "key", "data"]),
    (
        "pg_bridge_h",
        &[
            "kind", "kestrel", "dir", "colour", "dta", "qid", "qfi", "teid", "len",
        ],
    ),
];
