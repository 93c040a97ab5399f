//! The structural check: every table, key, action, parameter, extern instance, header field
//! and metadata field the generator names exists in a program's P4 text (see
//! [`crate::p4decl`] for what the scanner does and does not do).

use crate::names::{self, Table, INGRESS};
use crate::p4decl::Decls;

/// Problems found in `d` for a program holding `tables` and the extern instances `externs`
/// (name, control instance holding it).
pub fn check(d: &Decls, tables: &[Table], externs: &[(&str, &str)]) -> Vec<String> {
    let mut errs = Vec::new();
    let Some(ing) = d.controls.get(INGRESS) else {
        return vec![format!("no control {INGRESS}")];
    };
    // A dotted instance path (`upf.route`) from the ingress control.
    let sub = |path: &str, errs: &mut Vec<String>| {
        let mut c = Some(ing);
        for inst in path.split('.') {
            c = c
                .and_then(|c| c.instances.get(inst))
                .and_then(|ty| d.controls.get(ty));
        }
        if c.is_none() {
            errs.push(format!("{INGRESS} has no control instance `{path}`"));
        }
        c
    };
    for t in tables {
        let Some(c) = sub(t.control, &mut errs) else {
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
                None => errs.push(format!("no action {}.{}", t.control, a.name)),
                Some(p) if p.iter().map(String::as_str).ne(a.params.iter().copied()) => {
                    errs.push(format!(
                        "action {}.{}: params {p:?}, generator writes {:?}",
                        t.control, a.name, a.params
                    ))
                }
                Some(_) => {}
            }
        }
    }
    for (name, inst) in externs {
        if let Some(c) = sub(inst, &mut errs) {
            if !c.instances.contains_key(*name) {
                errs.push(format!("no extern instance {inst}.{name}"));
            }
        }
    }
    for (h, fields) in names::HEADER_FIELDS {
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
pub const UPF_EXTERNS: &[(&str, &str)] = &[
    (names::QER_METER, "upf"),
    (names::URR_COUNTER, "upf"),
    (names::DROP_COUNTER, "upf"),
];
