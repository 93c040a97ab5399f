//! The structural check: every table, key, action, parameter, extern instance, header field
//! and metadata field the generator names exists in a program's P4 text (see
//! [`crate::p4decl`] for what the scanner does and does not do).

use crate::names::{self, Table, EGRESS, INGRESS};
use crate::p4decl::Decls;

/// An extern instance (register, meter, counter, hash) the generator or the control plane
/// names: `name` in the control instance `control` under `root`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extern {
    pub root: &'static str,
    pub control: &'static str,
    pub name: &'static str,
}

const fn ing(control: &'static str, name: &'static str) -> Extern {
    Extern {
        root: INGRESS,
        control,
        name,
    }
}

const fn eg(control: &'static str, name: &'static str) -> Extern {
    Extern {
        root: EGRESS,
        control,
        name,
    }
}

/// Problems found in `d` for a program holding `tables` and the extern instances `externs`.
pub fn check(d: &Decls, tables: &[Table], externs: &[Extern]) -> Vec<String> {
    let mut errs: Vec<String> = d
        .duplicates
        .iter()
        .map(|n| format!("{n} is declared more than once"))
        .collect();
    // A dotted instance path (`upf.route`, "" for the root itself) from a root control.
    let sub = |root: &str, path: &str, errs: &mut Vec<String>| {
        let Some(mut c) = d.controls.get(root) else {
            errs.push(format!("no control {root}"));
            return None;
        };
        for inst in path.split('.').filter(|p| !p.is_empty()) {
            match c.instances.get(inst).and_then(|ty| d.controls.get(ty)) {
                Some(x) => c = x,
                None => {
                    errs.push(format!("{root} has no control instance `{path}`"));
                    return None;
                }
            }
        }
        Some(c)
    };
    for t in tables {
        let Some(c) = sub(t.root, t.control, &mut errs) else {
            continue;
        };
        let Some((keys, actions)) = c.tables.get(t.name) else {
            errs.push(format!("no table {}", t.path()));
            continue;
        };
        if keys.iter().map(String::as_str).ne(t.keys.iter().copied()) {
            errs.push(format!(
                "{}: keys {keys:?}, generator writes {:?}",
                t.path(),
                t.keys
            ));
        }
        for a in t.actions {
            if !actions.iter().any(|x| x == a.name) {
                errs.push(format!(
                    "{}: action {} not in its actions",
                    t.path(),
                    a.name
                ));
            }
            match c.actions.get(a.name) {
                None => errs.push(format!("no action {}.{}", t.control_path(), a.name)),
                Some(p) if p.iter().map(String::as_str).ne(a.params.iter().copied()) => {
                    errs.push(format!(
                        "action {}.{}: params {p:?}, generator writes {:?}",
                        t.control_path(),
                        a.name,
                        a.params
                    ))
                }
                Some(_) => {}
            }
        }
    }
    for e in externs {
        if let Some(c) = sub(e.root, e.control, &mut errs) {
            if !c.instances.contains_key(e.name) {
                errs.push(format!(
                    "no extern instance {}.{}.{}",
                    e.root, e.control, e.name
                ));
            }
        }
    }
    for (h, fields) in names::HEADER_FIELDS
        .iter()
        .chain(names::TELEMETRY_HEADER_FIELDS)
    {
        match d.types.get(*h) {
            None => errs.push(format!("no header {h}")),
            Some(have) => {
                for f in *fields {
                    if !have.iter().any(|x| x == f) {
                        errs.push(format!("header {h} has no field {f}"));
                    }
                }
            }
        }
    }
    match d.types.get("pg_meta_t") {
        None => errs.push("no struct pg_meta_t".into()),
        Some(have) => {
            for f in names::META_FIELDS {
                if !have.iter().any(|x| x == f) {
                    errs.push(format!("pg_meta_t has no field {f}"));
                }
            }
        }
    }
    errs
}

/// The externs of the UPF ingress.
pub const UPF_EXTERNS: &[Extern] = &[
    ing("upf", names::QER_METER),
    ing("upf", names::URR_COUNTER),
    ing("upf", names::DROP_COUNTER),
];

/// The externs of the TNA telemetry program beyond the UPF's: the fridge's registers and
/// hashes (ingress), Kestrel's per-row registers and index hash, the DTA reporter's
/// registers (egress). The control plane reads and clears these by name.
pub const TELEMETRY_EXTERNS: &[Extern] = &[
    ing("fridge", "fridge_sig"),
    ing("fridge", "fridge_ts"),
    ing("fridge", "fridge_ctr"),
    ing("fridge", "fridge_inserts"),
    ing("fridge", "fridge_hist"),
    ing("fridge", "fridge_samples"),
    ing("fridge", "fridge_id_hash"),
    ing("fridge", "fridge_sig_hash"),
    ing("", "dta_flow_hash"),
    eg("kestrel", "kestrel_hash"),
    eg("kestrel", "kestrel_poly"),
    eg("kestrel.row0", "k_counts"),
    eg("kestrel.row0", "k_colour"),
    eg("kestrel.row0", "k_lat"),
    eg("kestrel.row0", "k_iat"),
    eg("kestrel.row0", "k_last_seen"),
    eg("kestrel.row1", "k_counts"),
    eg("kestrel.row1", "k_colour"),
    eg("kestrel.row1", "k_lat"),
    eg("kestrel.row1", "k_iat"),
    eg("kestrel.row1", "k_last_seen"),
    eg("kestrel.row2", "k_counts"),
    eg("kestrel.row2", "k_colour"),
    eg("kestrel.row2", "k_lat"),
    eg("kestrel.row2", "k_iat"),
    eg("kestrel.row2", "k_last_seen"),
    eg("dta_sample", "dta_sample_ctr"),
    eg("dta_build", "dta_seq"),
];
