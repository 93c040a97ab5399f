//! A small scanner of P4-16 declarations, enough to check that every table, action, action
//! parameter, key, extern instance, header and field the generator names exists in the P4
//! text. It is not a compiler: it does not type-check, evaluate the preprocessor (every
//! `#ifdef` branch is read), or check expressions; `scripts/p4-check.sh` runs p4c where it
//! is installed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Declarations of one control.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Control {
    /// Table -> (key expressions, action names).
    pub tables: BTreeMap<String, (Vec<String>, Vec<String>)>,
    /// Action -> parameter names.
    pub actions: BTreeMap<String, Vec<String>>,
    /// Instance name -> type name (sub-controls and externs declared in the control).
    pub instances: BTreeMap<String, String>,
}

/// Declarations of a whole program (its quoted includes resolved).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decls {
    /// Header and struct types -> field names.
    pub types: BTreeMap<String, Vec<String>>,
    /// (type, field) -> the field's type name (`bit`, `bool` or a declared type).
    pub field_types: BTreeMap<(String, String), String>,
    pub controls: BTreeMap<String, Control>,
    /// Header, struct and control types declared more than once (p4c rejects them).
    pub duplicates: Vec<String>,
}

/// Read `path` with its `#include "..."` files (relative to the including file), once each.
pub fn read_program(path: &Path) -> std::io::Result<String> {
    let mut seen = Vec::new();
    let mut out = String::new();
    include(path, &mut seen, &mut out)?;
    Ok(out)
}

fn include(path: &Path, seen: &mut Vec<PathBuf>, out: &mut String) -> std::io::Result<()> {
    let canon = path.canonicalize()?;
    if seen.contains(&canon) {
        return Ok(());
    }
    seen.push(canon);
    let text = std::fs::read_to_string(path)?;
    for line in text.lines() {
        let l = line.trim_start();
        if let Some(rest) = l.strip_prefix("#include") {
            let rest = rest.trim();
            if let Some(name) = rest.strip_prefix('"').and_then(|r| r.split('"').next()) {
                let p = path.parent().unwrap_or(Path::new(".")).join(name);
                include(&p, seen, out)?;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(())
}

/// Tokens: identifiers (with dots inside, e.g. `hdr.ipv4.dst_addr`), numbers and single
/// punctuation characters; comments and preprocessor lines dropped, object-like macros
/// (`#define NAME body`) expanded (function-like ones are dropped: they only appear in
/// `apply` blocks, which the scan skips).
fn tokens(src: &str) -> Vec<String> {
    let joined = src.replace("\\\n", " ");
    let mut s = String::with_capacity(joined.len());
    let mut macros: BTreeMap<String, String> = BTreeMap::new();
    for line in joined.lines() {
        let l = line.trim_start();
        if let Some(def) = l.strip_prefix("#define") {
            let def = def.trim_start();
            let name: String = def
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !def[name.len()..].starts_with('(') {
                macros.insert(name.clone(), def[name.len()..].to_string());
            }
        } else if !l.starts_with('#') {
            s.push_str(line);
        }
        s.push('\n');
    }
    let raw = lex(&s);
    let mut out = Vec::with_capacity(raw.len());
    for t in raw {
        match macros.get(&t) {
            Some(body) => out.extend(lex(body)),
            None => out.push(t),
        }
    }
    out
}

fn lex(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else if c == b'"' {
            let st = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
            i += 1;
            out.push(s[st..i.min(s.len())].to_string());
        } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            out.push(s[st..i].to_string());
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else {
            out.push((c as char).to_string());
            i += 1;
        }
    }
    out
}

/// Index of the token closing the bracket opened at `open` (`(`, `{` or `<`).
fn close(t: &[String], open: usize) -> usize {
    let (o, c) = match t[open].as_str() {
        "(" => ("(", ")"),
        "{" => ("{", "}"),
        "<" => ("<", ">"),
        _ => return open,
    };
    let mut depth = 0;
    for (i, tok) in t.iter().enumerate().skip(open) {
        if tok == o {
            depth += 1;
        } else if tok == c {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    t.len() - 1
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

/// Parameter names of a `( ... )` list: the last identifier of each comma group.
fn params(t: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut last = None;
    let mut depth = 0;
    for tok in t {
        match tok.as_str() {
            "<" | "(" => depth += 1,
            ">" | ")" => depth -= 1,
            "," if depth == 0 => {
                out.extend(last.take());
            }
            s if is_ident(s) && depth == 0 => last = Some(s.to_string()),
            _ => {}
        }
    }
    out.extend(last);
    out
}

/// (field, type) pairs: the type is the first token of the declaration (`bit` for
/// `bit<8>`, `H` for a stack `H[4]`).
fn typed_fields(t: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, tok) in t.iter().enumerate() {
        if tok == ";" {
            if let (Some(ty), Some(name)) = (t.get(start), t.get(i.wrapping_sub(1))) {
                if i > start + 1 && is_ident(name) {
                    out.push((name.clone(), ty.clone()));
                }
            }
            start = i + 1;
        } else if tok == "@" && start == i {
            // An annotation before the type: `@padding bit<3> x;`
            start = i + 2;
        }
    }
    out
}

fn fields(t: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, tok) in t.iter().enumerate() {
        if tok == ";" && i > 0 && is_ident(&t[i - 1]) {
            // `bit<8> x;` or `H x[4];` (a stack: the name is before `[`)
            out.push(t[i - 1].clone());
        } else if tok == ";" && i > 3 && t[i - 1] == "]" && is_ident(&t[i - 4]) {
            out.push(t[i - 4].clone());
        }
    }
    out
}

fn table(t: &[String]) -> (Vec<String>, Vec<String>) {
    let mut keys = Vec::new();
    let mut actions = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if (t[i] == "key" || t[i] == "actions") && t.get(i + 1).is_some_and(|s| s == "=") {
            let open = i + 2;
            let end = close(t, open);
            let body = &t[open + 1..end];
            if t[i] == "key" {
                let mut j = 0;
                while j < body.len() {
                    if body.get(j + 1).is_some_and(|s| s == ":") {
                        keys.push(body[j].clone());
                    }
                    j += 1;
                }
            } else {
                for (j, tok) in body.iter().enumerate() {
                    let next = body.get(j + 1).map(String::as_str);
                    if is_ident(tok) && matches!(next, Some(";") | Some("(")) {
                        // `@defaultonly a;` counts `a`.
                        actions.push(tok.clone());
                    }
                }
            }
            i = end;
        }
        i += 1;
    }
    (keys, actions)
}

fn control(t: &[String]) -> Control {
    let mut c = Control::default();
    let mut i = 0;
    while i < t.len() {
        let tok = t[i].as_str();
        if tok == "action" && t.get(i + 2).is_some_and(|s| s == "(") {
            let name = t[i + 1].clone();
            let end = close(t, i + 2);
            c.actions.insert(name, params(&t[i + 3..end]));
            i = end + 1;
            if t.get(i).is_some_and(|s| s == "{") {
                i = close(t, i) + 1;
            }
            continue;
        }
        if tok == "table" && t.get(i + 2).is_some_and(|s| s == "{") {
            let end = close(t, i + 2);
            c.tables.insert(t[i + 1].clone(), table(&t[i + 3..end]));
            i = end + 1;
            continue;
        }
        if tok == "apply" && t.get(i + 1).is_some_and(|s| s == "{") {
            i = close(t, i + 1) + 1;
            continue;
        }
        if tok == "{" {
            // Abstract methods of RegisterAction instances etc.
            i = close(t, i) + 1;
            continue;
        }
        // Instantiation: Type[<...>] ( args ) name ;
        if is_ident(tok) && i + 1 < t.len() {
            let mut j = i + 1;
            if t[j] == "<" {
                j = close(t, j) + 1;
            }
            if t.get(j).is_some_and(|s| s == "(") {
                let end = close(t, j);
                if let (Some(name), Some(semi)) = (t.get(end + 1), t.get(end + 2)) {
                    if is_ident(name) && (semi == ";" || semi == "=") {
                        c.instances.insert(name.clone(), tok.to_string());
                        i = end + 2;
                        continue;
                    }
                }
            }
        }
        i += 1;
    }
    c
}

/// Every `hdr.` / `md.` / `eh.` / `em.` reference whose field is not declared in
/// `pg_headers_t` / `pg_meta_t` / `pg_egress_headers_t` / `pg_egress_meta_t` (or, one level
/// down, in the header type of that field): the typos p4c would
/// reject. Stack elements (`hdr.s[0].w`) are checked to the stack's name only; `isValid`,
/// `setValid`, `setInvalid`, `next` and `last` are methods, not fields.
pub fn unknown_references(src: &str, d: &Decls) -> Vec<String> {
    const METHODS: [&str; 5] = ["isValid", "setValid", "setInvalid", "next", "last"];
    let mut out = Vec::new();
    for tok in tokens(src) {
        let parts: Vec<&str> = tok.split('.').collect();
        let root = match parts[0] {
            "hdr" => "pg_headers_t",
            "md" => "pg_meta_t",
            "eh" => "pg_egress_headers_t",
            "em" => "pg_egress_meta_t",
            _ => continue,
        };
        let Some(first) = parts.get(1).filter(|p| !p.is_empty()) else {
            continue;
        };
        let Some(ty) = d.field_types.get(&(root.to_string(), first.to_string())) else {
            out.push(format!("{tok}: {root} has no field {first}"));
            continue;
        };
        if let Some(second) = parts.get(2).filter(|p| !METHODS.contains(p)) {
            if let Some(fields) = d.types.get(ty) {
                if !fields.iter().any(|f| f == second) {
                    out.push(format!("{tok}: {ty} has no field {second}"));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `PG_` names used in `src` (with its includes) that no `const` or `#define` declares.
pub fn undefined_pg_names(src: &str) -> Vec<String> {
    let joined = src.replace("\\\n", " ");
    let mut defined = std::collections::BTreeSet::new();
    let mut used = std::collections::BTreeSet::new();
    for line in joined.lines() {
        let l = line.trim_start();
        if l.starts_with("#ifdef") || l.starts_with("#ifndef") || l.starts_with("#endif") {
            continue;
        }
        if let Some(rest) = l.strip_prefix("#define") {
            if let Some(name) = rest.split_whitespace().next() {
                defined.insert(name.split('(').next().unwrap_or(name).to_string());
            }
        }
        if l.starts_with("const ") {
            if let Some(name) = l.split_whitespace().nth(2) {
                defined.insert(name.to_string());
            }
        }
        if l.starts_with("//") {
            continue;
        }
        let code = l.split("//").next().unwrap_or("");
        for w in code
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("PG_"))
        {
            used.insert(w.to_string());
        }
    }
    used.difference(&defined).cloned().collect()
}

/// Scan program text.
pub fn scan(src: &str) -> Decls {
    let t = tokens(src);
    let mut d = Decls::default();
    let mut i = 0;
    while i < t.len() {
        let tok = t[i].as_str();
        if (tok == "header" || tok == "struct") && t.get(i + 2).is_some_and(|s| s == "{") {
            let end = close(&t, i + 2);
            let body = &t[i + 3..end];
            for (f, ty) in typed_fields(body) {
                d.field_types.insert((t[i + 1].clone(), f), ty);
            }
            if d.types.insert(t[i + 1].clone(), fields(body)).is_some() {
                d.duplicates.push(t[i + 1].clone());
            }
            i = end + 1;
            continue;
        }
        if tok == "control" && t.get(i + 2).is_some_and(|s| s == "(") {
            let name = t[i + 1].clone();
            let pend = close(&t, i + 2);
            if t.get(pend + 1).is_some_and(|s| s == "{") {
                let end = close(&t, pend + 1);
                if d.controls.contains_key(&name) {
                    d.duplicates.push(name.clone());
                }
                d.controls.insert(name, control(&t[pend + 2..end]));
                i = end + 1;
                continue;
            }
            i = pend + 1;
            continue;
        }
        i += 1;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_headers_controls_tables_and_instances() {
        let src = r#"
#include <core.p4>
// a comment with table x { }
header h_t { bit<8> a; /* b */ bit<16> c; }
struct m_t { bit<32> far_idx; h_t s[4]; }
control Sub(inout m_t md) {
    Meter<bit<32>>(1024, MeterType_t.BYTES) qer_meter;
    action set(bit<8> x, bit<16> y) { md.far_idx = 1; }
    action nop() { }
    table t {
        key = { md.far_idx : exact; hdr.h.a : ternary @name("a"); }
        actions = { set; @defaultonly nop; }
        size = 4;
    }
    apply { if (t.apply().hit) { } }
}
control PgIngress(inout m_t md) { Sub() upf; apply { upf.apply(md); } }
"#;
        let d = scan(src);
        assert_eq!(d.types["h_t"], ["a", "c"]);
        assert_eq!(d.types["m_t"], ["far_idx", "s"]);
        let s = &d.controls["Sub"];
        assert_eq!(s.actions["set"], ["x", "y"]);
        assert!(s.actions["nop"].is_empty());
        assert_eq!(s.tables["t"].1, ["set", "nop"]);
        assert_eq!(s.tables["t"].0, ["md.far_idx", "hdr.h.a"]);
        assert_eq!(s.instances["qer_meter"], "Meter");
        assert_eq!(d.controls["PgIngress"].instances["upf"], "Sub");
    }
}
