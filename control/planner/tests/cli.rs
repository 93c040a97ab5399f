//! `pg-plan` end to end: a generated topology is planned; a broken file is refused with its
//! line and exit code 1; a bad flag value is a usage error (exit 2).

use std::process::Command;

fn pg_plan(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pg-plan"))
        .args(args)
        .output()
        .expect("run pg-plan")
}

#[test]
fn generate_then_plan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ft4.json");
    let out = pg_plan(&["gen", "fat-tree", "--k", "4"]);
    assert!(out.status.success());
    std::fs::write(&path, &out.stdout).unwrap();
    let out = pg_plan(&["plan", path.to_str().unwrap(), "--alpha", "0.9"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["coverage"], 1.0);
    assert!(plan["lower_bound"].as_f64().unwrap() <= plan["objective"].as_f64().unwrap());
    for p in plan["points"].as_array().unwrap() {
        let sum: f64 = p["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["ratio"].as_f64().unwrap())
            .sum();
        assert!(p["paths"].as_array().unwrap().is_empty() || (sum - 1.0).abs() < 1e-6);
    }
}

#[test]
fn broken_file_is_refused_with_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, "{\n  \"nodes\": [{\"id\": \"a\", \"control\": true}],\n  \"links\": [{\"a\": \"a\", \"b\": \"z\", \"capacity_bps\": 1e9}]\n}\n").unwrap();
    let out = pg_plan(&["plan", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("links[0].b: unknown node \"z\""), "{e}");
    std::fs::write(&path, "{\n  \"nodes\": [\n    {\"id\": 7}\n  ]\n}\n").unwrap();
    let out = pg_plan(&["plan", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("line 3"), "{e}");
    let out = pg_plan(&["plan", path.to_str().unwrap(), "--alpha", "2"]);
    assert_eq!(out.status.code(), Some(1), "the file is checked first");
    let out = pg_plan(&["gen", "fat-tree", "--k", "3"]);
    assert_eq!(out.status.code(), Some(2));
}
