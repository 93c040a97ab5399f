//! Result output: the machine description and the JSON written to stdout and a file.

use serde::Serialize;
use std::path::Path;

/// The first `model name` of `/proc/cpuinfo`, if there is one.
pub fn cpu_model() -> Option<String> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    model_name(&s)
}

fn model_name(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
}

/// Logical CPUs available to this process (0 if unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The 1-, 5- and 15-minute load averages of `/proc/loadavg`, if readable.
pub fn load_average() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let v: Vec<&str> = s.split_whitespace().take(3).collect();
    (v.len() == 3).then(|| v.join(" / "))
}

/// The machine line of a result: cores, CPU model and the load averages when the result is
/// written (what else ran is the reader's question on a shared machine; this says how much).
pub fn machine() -> String {
    // The machine's processors, not this thread's affinity (a pinned harness sees one).
    let cpus = std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| c.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(0);
    format!(
        "{} cores, {}, load average (1 / 5 / 15 min) at the end of the run {}",
        if cpus > 0 { cpus } else { cores() },
        cpu_model().unwrap_or_default(),
        load_average().unwrap_or_else(|| "unknown".into())
    )
}

/// Pretty-printed JSON of `v`.
pub fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).expect("json")
}

/// Prints `v` as pretty JSON on stdout, then writes it to `path` if there is one; the error
/// says which file could not be written (the result has been printed anyway).
pub fn print_and_write<T: Serialize>(v: &T, path: Option<&Path>) -> Result<(), String> {
    let text = json(v);
    println!("{text}");
    match path {
        Some(p) => {
            std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_name_is_the_first_one() {
        let s = "processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\nmodel name\t: Other\n";
        assert_eq!(model_name(s).as_deref(), Some("Some CPU @ 2.0GHz"));
        assert_eq!(model_name("processor\t: 0\n"), None);
    }

    #[test]
    fn writes_what_it_prints() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("r.json");
        let v = serde_json::json!({"a": 1});
        print_and_write(&v, Some(&p)).expect("writable");
        assert_eq!(std::fs::read_to_string(&p).expect("written"), json(&v));
        let bad = dir.path().join("missing").join("r.json");
        let e = print_and_write(&v, Some(&bad)).expect_err("no such directory");
        assert!(e.starts_with("cannot write "), "{e}");
        assert_eq!(print_and_write(&v, None), Ok(()));
    }
}
