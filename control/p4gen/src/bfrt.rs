//! Entries as JSON in the shape of the Tofino runtime's table API (BF Runtime): one object
//! per entry with `table_name` (`pipe.` + the control path), `key` (field name -> `value`,
//! plus `mask` for ternary or `prefix_len` for LPM keys), `action` and `data` (action
//! parameter -> value); keyless tables get `"default_action": true`. Indirect meters use the
//! BF Runtime's `$METER_INDEX` key and `$METER_SPEC_*` data fields (kbit/s, kbit).
//! `p4/scripts/bfrt_load.py` loads a file through `bfrt_python`.

use crate::model::{Entries, FarEntry, PdrAction, RouteEntry};
use crate::names::{self, Table};
use crate::telemetry::{Telemetry, Ternary};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Which program's tables to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Upf,
    IntTransit,
    /// The UPF with Kestrel, the fridge and the DTA reporter ([`render_telemetry`]).
    UpfTelemetry,
}

/// Tofino device ports by config port index (default: the index itself).
pub type DevPorts = BTreeMap<u16, u16>;

fn default(t: &Table, action: &str, data: Value) -> Value {
    let mut d = entry(t, json!({}), action, data);
    d["default_action"] = json!(true);
    d
}

fn entry(t: &Table, key: Value, action: &str, data: Value) -> Value {
    debug_assert!(t.action(action).is_some(), "{}: {action}", t.name);
    json!({
        "table_name": format!("pipe.{}", t.path()),
        "key": key,
        "action": format!("{}.{action}", t.control_path()),
        "data": data,
    })
}

fn exact(field: &str, v: Value) -> Value {
    let mut m = Map::new();
    m.insert(field.into(), json!({ "value": v }));
    Value::Object(m)
}

fn pdr(t: &Table, key: Value, a: &PdrAction) -> Value {
    match a {
        PdrAction::ToCpu => entry(t, key, "pdr_to_cpu", json!({})),
        PdrAction::Apply(p) => entry(
            t,
            key,
            "pdr_apply",
            json!({
                "far_idx": p.far_idx,
                "gate_open": u8::from(p.gate_open),
                "meter_idx": p.meter.unwrap_or(0),
                "metered": u8::from(p.meter.is_some()),
                "urr_idx": p.urr.unwrap_or(0),
                "counted": u8::from(p.urr.is_some()),
                "pdr_qfi": p.pdr_qfi.unwrap_or(0),
                "match_qfi": u8::from(p.pdr_qfi.is_some()),
                "mark_qfi": p.mark_qfi,
            }),
        ),
    }
}

fn routes(out: &mut Vec<Value>, rs: &[RouteEntry], dev: &DevPorts, tables: [&Table; 2]) {
    for r in rs {
        let (t, field) = if r.addr.is_ipv4() {
            (tables[0], "md.route_v4")
        } else {
            (tables[1], "md.route_v6")
        };
        let mut key = Map::new();
        key.insert(
            field.into(),
            json!({ "value": r.addr.to_string(), "prefix_len": r.len }),
        );
        out.push(entry(
            t,
            Value::Object(key),
            "set_next_hop",
            json!({
                "port": dev.get(&r.port).copied().unwrap_or(r.port),
                "dmac": r.dmac.to_string(),
                "smac": r.smac.to_string(),
            }),
        ));
    }
}

/// The entries of `program` as a JSON array.
pub fn render(e: &Entries, program: Program, dev: &DevPorts) -> Value {
    let mut out = Vec::new();
    match program {
        Program::Upf | Program::UpfTelemetry => {
            out.push(default(&names::UPF_MTU, "set_mtu", json!({ "mtu": e.mtu })));
            for a in &e.n3_v4 {
                out.push(entry(
                    &names::N3_V4,
                    exact("hdr.ipv4.dst_addr", json!(a.to_string())),
                    "n3_local",
                    json!({}),
                ));
            }
            for a in &e.n3_v6 {
                out.push(entry(
                    &names::N3_V6,
                    exact("hdr.ipv6.dst_addr", json!(a.to_string())),
                    "n3_local",
                    json!({}),
                ));
            }
            for p in &e.ul {
                out.push(pdr(
                    &names::UL_PDR,
                    exact("hdr.gtpu.teid", json!(p.key)),
                    &p.action,
                ));
            }
            for p in &e.dl_v4 {
                let k = exact("hdr.ipv4.dst_addr", json!(p.key.to_string()));
                out.push(pdr(&names::DL_PDR_V4, k, &p.action));
            }
            for p in &e.dl_v6 {
                let k = exact("md.ue_prefix64", json!(p.key));
                out.push(pdr(&names::DL_PDR_V6, k, &p.action));
            }
            for (i, f) in e.fars.iter().enumerate() {
                let k = exact("md.far_idx", json!(i));
                let t = &names::FAR;
                out.push(match f {
                    FarEntry::Route => entry(t, k, "far_route", json!({})),
                    FarEntry::Drop => entry(t, k, "far_drop", json!({})),
                    FarEntry::Buffer => entry(t, k, "far_buffer", json!({})),
                    FarEntry::EncapV4 {
                        teid,
                        peer,
                        local,
                        psc_type,
                    } => entry(
                        t,
                        k,
                        "far_encap_v4",
                        json!({"teid": teid, "peer": peer.to_string(),
                               "local": local.to_string(), "psc_type": psc_type}),
                    ),
                    FarEntry::EncapV6 {
                        teid,
                        peer,
                        local,
                        psc_type,
                    } => entry(
                        t,
                        k,
                        "far_encap_v6",
                        json!({"teid": teid, "peer": peer.to_string(),
                               "local": local.to_string(), "psc_type": psc_type}),
                    ),
                });
            }
            for (qfi, qid) in e.qfi_qid.iter().enumerate() {
                out.push(entry(
                    &names::QFI_QID,
                    exact("md.qfi", json!(qfi)),
                    "set_qid",
                    json!({ "qid": qid }),
                ));
            }
            for m in &e.meters {
                let (cir, cbs, pir, pbs) = m.tofino_kbps_kbits();
                out.push(json!({
                    "table_name": format!("pipe.{}.upf.{}", names::INGRESS, names::QER_METER),
                    "key": { "$METER_INDEX": { "value": m.index } },
                    "data": {
                        "$METER_SPEC_CIR_KBPS": cir,
                        "$METER_SPEC_CBS_KBITS": cbs,
                        "$METER_SPEC_PIR_KBPS": pir,
                        "$METER_SPEC_PBS_KBITS": pbs,
                    },
                }));
            }
        }
        Program::IntTransit => {
            if let Some(i) = &e.int {
                out.push(default(
                    &names::INT_NODE,
                    "int_set_node",
                    json!({"node_id": i.node_id, "hop_lim_dec": u8::from(i.hop_lim_dec),
                           "ts_posix": u8::from(i.ts_posix)}),
                ));
                // Time base 0/0: timestamps count from the switch clock's epoch until a control
                // plane writes (switch ns at a second boundary, Unix seconds); none does yet.
                out.push(default(
                    &names::INT_TIME,
                    "int_set_time_base",
                    json!({"base_ns": 0, "base_secs": 0}),
                ));
                for ns in &i.namespaces {
                    out.push(entry(
                        &names::INT_NS,
                        exact("hdr.ioam_trace.namespace_id", json!(ns)),
                        "int_ns_enabled",
                        json!({}),
                    ));
                }
                for l in &i.layout {
                    out.push(entry(
                        &names::INT_LAYOUT,
                        json!({"hdr.ioam_trace.trace_type": {"value": l.value, "mask": l.mask}}),
                        "int_set_layout",
                        json!({"w0": l.words[0], "w1": l.words[1], "w2": l.words[2], "w3": l.words[3]}),
                    ));
                }
            }
        }
    }
    let route_tables = match program {
        Program::Upf | Program::UpfTelemetry => [&names::ROUTE_V4, &names::ROUTE_V6],
        Program::IntTransit => [&names::INT_ROUTE_V4, &names::INT_ROUTE_V6],
    };
    routes(&mut out, &e.routes, dev, route_tables);
    Value::Array(out)
}

fn ternary(qid: u8, field: &str, r: &Ternary) -> Value {
    let mut m = Map::new();
    m.insert("eh.bridge.qid".into(), json!({ "value": qid }));
    m.insert(field.into(), json!({ "value": r.value, "mask": r.mask }));
    Value::Object(m)
}

fn lpm(field: &str, value: u32, len: u8) -> Value {
    let mut m = Map::new();
    m.insert(field.into(), json!({ "value": value, "prefix_len": len }));
    Value::Object(m)
}

/// The telemetry program's entries: the UPF's, then Kestrel's, the fridge's and the DTA
/// reporter's (with its egress mirror session in `$mirror.cfg`).
pub fn render_telemetry(e: &Entries, t: &Telemetry, dev: &DevPorts) -> Value {
    let Value::Array(mut out) = render(e, Program::UpfTelemetry, dev) else {
        unreachable!("render returns an array")
    };
    for q in &t.kestrel {
        out.push(entry(
            &names::KESTREL_SEED,
            exact("eh.bridge.qid", json!(q.qid)),
            "kestrel_set_seed",
            json!({ "seed": q.seed }),
        ));
        for r in &q.lat {
            out.push(entry(
                &names::KESTREL_LAT_BIN,
                ternary(q.qid, "em.sojourn", r),
                "kestrel_set_lat_bin",
                json!({ "bin": r.bin }),
            ));
        }
        for row in &names::KESTREL_IAT_BIN {
            for r in &q.iat {
                out.push(entry(
                    row,
                    ternary(q.qid, "gap", r),
                    "kestrel_set_iat_bin",
                    json!({ "bin": r.bin }),
                ));
            }
        }
    }
    if let Some(f) = &t.fridge {
        out.push(default(
            &names::FRIDGE_CONFIG,
            "fridge_set",
            json!({ "req_uplink": u8::from(f.req_uplink), "slot_mask": f.m - 1 }),
        ));
        let mut coin = Map::new();
        coin.insert(
            "md.fr_hash".into(),
            json!({ "value": 0, "mask": f.coin_mask }),
        );
        out.push(entry(
            &names::FRIDGE_COIN,
            Value::Object(coin),
            "fridge_eligible",
            json!({}),
        ));
        for r in &f.table.rules {
            out.push(entry(
                &names::FRIDGE_FACTOR,
                lpm("md.fr_x", r.value, r.len),
                "fridge_set_factor",
                json!({ "factor": r.factor }),
            ));
        }
        for r in &f.bins {
            out.push(entry(
                &names::FRIDGE_BIN,
                lpm("md.fr_delay", r.value, r.len),
                "fridge_set_bin",
                json!({ "bin": r.factor }),
            ));
        }
    }
    if let Some(d) = &t.dta {
        out.push(default(
            &names::DTA_CONFIG,
            "dta_set",
            json!({
                "session": d.session,
                "redundancy": d.redundancy,
                "list_id": d.list_id,
                "sample_last": d.sample_last,
                "src_mac": d.src_mac.to_string(),
                "dst_mac": d.dst_mac.to_string(),
                "src_ip": d.src_ip.to_string(),
                "dst_ip": d.dst_ip.to_string(),
                "src_port": d.src_port,
            }),
        ));
        out.push(json!({
            "table_name": names::MIRROR_CFG,
            "key": { "$sid": { "value": d.session } },
            "action": "$normal",
            "data": {
                "$direction": "EGRESS",
                "$session_enable": true,
                "$ucast_egress_port": dev.get(&d.port).copied().unwrap_or(d.port),
                "$ucast_egress_port_valid": true,
                "$max_pkt_len": crate::constants::DTA_MIRROR_TRUNC,
            },
        }));
    }
    Value::Array(out)
}
