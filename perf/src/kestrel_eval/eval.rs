//! One evaluation: training runs -> features -> Python training (XGBoost, pinned) -> models
//! checked against Python's predictions -> held-out test runs scored online in Rust ->
//! AUPRC, F1, TTFD, export and collector time per mode.

use super::features::{Mode, MODES};
use super::gbt::Model;
use super::metrics::{auprc, f1_at, pr_curve};
use super::scenario::{Kind, Scenario, KINDS, S};
use super::{collect, Detectors, EvalCfg, RunOut};
use crate::fridge_eval::runs::par_map;
use peregrine_dataplane::telemetry::kestrel::EdgeSet;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const SCENARIOS: [Scenario; 5] = [
    Scenario::Single(Kind::Microburst),
    Scenario::Single(Kind::Congestion),
    Scenario::Single(Kind::Contention),
    Scenario::Single(Kind::PolicyAbuse),
    Scenario::Mixed,
];

/// Thresholds per mode and anomaly kind (by name).
pub type Thresholds = HashMap<String, HashMap<String, f64>>;

/// Seeds: training and test runs never share one.
pub fn train_seed(s: usize, i: usize) -> u64 {
    (s as u64 + 1) * 1000 + i as u64
}
pub fn test_seed(s: usize, i: usize) -> u64 {
    (s as u64 + 1) * 1000 + 500 + i as u64
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Score {
    pub auprc: f64,
    pub f1: f64,
    pub precision: f64,
    pub recall: f64,
    pub units: usize,
    pub positives: usize,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Ttfd {
    pub episodes: usize,
    pub detected: usize,
    /// Median seconds from onset to the end of the first alarmed window.
    pub median_s: f64,
}

/// Everything one evaluation measured, per mode.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// `scores[mode][scenario]`; "mixed" is any-anomaly with the max of the four detectors.
    pub scores: HashMap<String, HashMap<String, Score>>,
    /// Per detector on the mixed runs' own labels.
    pub mixed_per_kind: HashMap<String, HashMap<String, Score>>,
    pub ttfd: HashMap<String, HashMap<String, Ttfd>>,
    pub export_mbps: HashMap<String, f64>,
    /// Kestrel's export had it used encoding version 1 (every bucket), Mbit/s.
    pub kestrel_dense_mbps: f64,
    /// Median and interquartile range of the per-window collector time, ms.
    pub collector_ms: HashMap<String, (f64, f64, f64)>,
    pub thresholds: HashMap<String, HashMap<String, f64>>,
    /// Largest |Rust - Python| probability over the check vectors.
    pub max_pred_diff: f64,
    pub offered_gbps: f64,
    pub train_runs: usize,
    pub test_runs: usize,
    pub test_windows: u64,
    /// Seeds of the training and of the test runs (disjoint).
    pub train_seeds: Vec<u64>,
    pub test_seeds: Vec<u64>,
    /// Mixed-scenario PR curves per mode (recall, precision).
    #[serde(skip)]
    pub pr_mixed: HashMap<String, Vec<(f64, f64)>>,
}

fn write_csv(path: &Path, runs: &[RunOut], mode: Mode) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let names = super::features::names(mode);
    write!(f, "run,seq,qfi,label")?;
    for n in &names {
        write!(f, ",{n}")?;
    }
    writeln!(f)?;
    for (i, r) in runs.iter().enumerate() {
        for row in &r.rows[&mode] {
            let mut line = format!("{i},{},{},{}", row.seq, row.qfi, row.label);
            for v in &row.x {
                let _ = write!(line, ",{v}");
            }
            writeln!(f, "{line}")?;
        }
    }
    Ok(())
}

/// Check a model against Python's probabilities on its stored vectors; the largest
/// difference.
pub fn check_model(m: &Model, csv: &str) -> Result<f64, String> {
    let mut worst = 0f64;
    for (n, line) in csv.lines().enumerate() {
        let v: Vec<f64> = line
            .split(',')
            .map(|s| s.parse::<f64>().map_err(|e| format!("line {n}: {e}")))
            .collect::<Result<_, _>>()?;
        let (&want, x) = v.split_first().ok_or(format!("line {n}: empty"))?;
        let x: Vec<f32> = x.iter().map(|&a| a as f32).collect();
        worst = worst.max((m.predict(&x) - want).abs());
    }
    Ok(worst)
}

/// Train with `perf/scripts/kestrel_train.py`, load and check the models.
pub fn train(
    dir: &Path,
    modes: &[Mode],
    runs: &[RunOut],
) -> Result<(Detectors, Thresholds, f64), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for &m in modes {
        write_csv(&dir.join(format!("train-{}.csv", m.name())), runs, m)
            .map_err(|e| format!("writing features: {e}"))?;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kestrel_train.py");
    let names: Vec<&str> = modes.iter().map(|m| m.name()).collect();
    let st = Command::new("python3")
        .arg(&script)
        .arg("--dir")
        .arg(dir)
        .arg("--modes")
        .arg(names.join(","))
        .status()
        .map_err(|e| format!("python3: {e}"))?;
    if !st.success() {
        return Err(format!("{} failed: {st}", script.display()));
    }
    let th: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("thresholds.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("thresholds.json: {e}"))?;
    let mut det = Detectors::new();
    let mut thr = Thresholds::new();
    let mut worst = 0f64;
    for &m in modes {
        let mut v = Vec::new();
        for k in KINDS {
            let base = format!("{}-{}", m.name(), k.name());
            let text = std::fs::read_to_string(dir.join(format!("model-{base}.json")))
                .map_err(|e| format!("model-{base}.json: {e}"))?;
            let model = Model::from_json(&text)?;
            let check = std::fs::read_to_string(dir.join(format!("check-{base}.csv")))
                .map_err(|e| format!("check-{base}.csv: {e}"))?;
            let d = check_model(&model, &check)?;
            if d > 1e-6 {
                return Err(format!("{base}: Rust and XGBoost differ by {d:e} > 1e-6"));
            }
            worst = worst.max(d);
            v.push(model);
            let t = th
                .pointer(&format!("/thresholds/{}/{}", m.name(), k.name()))
                .and_then(serde_json::Value::as_f64)
                .ok_or(format!("thresholds.json: no {base}"))?;
            thr.entry(m.name().into())
                .or_default()
                .insert(k.name().into(), t);
        }
        det.insert(m, v);
    }
    Ok((det, thr, worst))
}

/// Runs of every scenario, `n` seeds each (`seed(scenario, i)`), with detectors or not.
pub fn runs(
    c: &EvalCfg,
    edges: EdgeSet,
    n: usize,
    threads: usize,
    seed: fn(usize, usize) -> u64,
    det: Option<&Detectors>,
) -> Vec<(usize, RunOut)> {
    let jobs: Vec<(usize, u64)> = (0..SCENARIOS.len())
        .flat_map(|s| (0..n).map(move |i| (s, seed(s, i))))
        .collect();
    let outs = par_map(&jobs, threads, |&(s, sd)| {
        collect(c, edges, SCENARIOS[s], sd, det)
    });
    jobs.iter().map(|j| j.0).zip(outs).collect()
}

fn score_of(scores: &[f64], labels: &[bool], thr: f64) -> Score {
    let (p, r, f) = f1_at(scores, labels, thr);
    Score {
        auprc: auprc(scores, labels),
        f1: f,
        precision: p,
        recall: r,
        units: labels.len(),
        positives: labels.iter().filter(|&&l| l).count(),
    }
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Score the test runs.
pub fn summarise(
    modes: &[Mode],
    test: &[(usize, RunOut)],
    thr: &HashMap<String, HashMap<String, f64>>,
    train_runs: usize,
    max_pred_diff: f64,
) -> Summary {
    let mut sm = Summary {
        scores: HashMap::new(),
        mixed_per_kind: HashMap::new(),
        ttfd: HashMap::new(),
        export_mbps: HashMap::new(),
        kestrel_dense_mbps: test.iter().map(|t| t.1.kestrel_dense_bytes).sum::<u64>() as f64 * 8.0
            / test
                .iter()
                .map(|t| t.1.windows as f64)
                .sum::<f64>()
                .max(1.0)
            / 1e6,
        collector_ms: HashMap::new(),
        thresholds: thr.clone(),
        max_pred_diff,
        offered_gbps: 0.0,
        train_runs,
        test_runs: test.len(),
        test_windows: test.iter().map(|t| t.1.windows).sum(),
        train_seeds: Vec::new(),
        test_seeds: Vec::new(),
        pr_mixed: HashMap::new(),
    };
    let secs: f64 = test.iter().map(|t| t.1.windows as f64).sum();
    let bytes: u64 = test.iter().map(|t| t.1.stats.offered_bytes).sum();
    sm.offered_gbps = bytes as f64 * 8.0 / secs / 1e9;
    for &m in modes {
        let th = &thr[m.name()];
        let tk = |k: Kind| th[k.name()];
        let mut sc = HashMap::new();
        let mut tt = HashMap::new();
        for (si, s) in SCENARIOS.iter().enumerate() {
            let rows: Vec<&super::Row> = test
                .iter()
                .filter(|t| t.0 == si)
                .flat_map(|t| t.1.rows[&m].iter())
                .collect();
            match *s {
                Scenario::Single(k) => {
                    let ki = k as usize;
                    let sco: Vec<f64> = rows.iter().map(|r| r.score[ki]).collect();
                    let lab: Vec<bool> = rows.iter().map(|r| r.label & k.bit() != 0).collect();
                    sc.insert(k.name().to_string(), score_of(&sco, &lab, tk(k)));
                    // Time to first detection per episode of the test runs.
                    let mut d = Vec::new();
                    let mut eps = 0;
                    for t in test.iter().filter(|t| t.0 == si) {
                        for e in &t.1.plan_episodes {
                            eps += 1;
                            let first = t.1.rows[&m]
                                .iter()
                                .filter(|r| {
                                    e.qfis.contains(&r.qfi)
                                        && r.seq >= e.start_ns / S
                                        && r.seq <= e.end_ns / S + 1
                                        && r.score[ki] >= tk(k)
                                })
                                .map(|r| r.seq)
                                .min();
                            if let Some(seq) = first {
                                d.push(((seq + 1) * S - e.start_ns) as f64 / 1e9);
                            }
                        }
                    }
                    tt.insert(
                        k.name().to_string(),
                        Ttfd {
                            episodes: eps,
                            detected: d.len(),
                            median_s: median(&mut d),
                        },
                    );
                }
                Scenario::Mixed => {
                    let sco: Vec<f64> = rows
                        .iter()
                        .map(|r| r.score.iter().copied().fold(0.0, f64::max))
                        .collect();
                    let lab: Vec<bool> = rows.iter().map(|r| r.label != 0).collect();
                    // The combined alarm: any detector at or over its threshold.
                    let alarm: Vec<f64> = rows
                        .iter()
                        .map(|r| {
                            let any = KINDS.iter().any(|&k| r.score[k as usize] >= tk(k));
                            if any {
                                1.0
                            } else {
                                0.0
                            }
                        })
                        .collect();
                    let mut s = score_of(&sco, &lab, f64::INFINITY);
                    let (p, r, f) = f1_at(&alarm, &lab, 0.5);
                    (s.precision, s.recall, s.f1) = (p, r, f);
                    sc.insert("mixed".to_string(), s);
                    sm.pr_mixed.insert(m.name().into(), pr_curve(&sco, &lab));
                    let mut per = HashMap::new();
                    for k in KINDS {
                        let sco: Vec<f64> = rows.iter().map(|r| r.score[k as usize]).collect();
                        let lab: Vec<bool> = rows.iter().map(|r| r.label & k.bit() != 0).collect();
                        per.insert(k.name().to_string(), score_of(&sco, &lab, tk(k)));
                    }
                    sm.mixed_per_kind.insert(m.name().into(), per);
                }
                Scenario::Baseline => {}
            }
        }
        sm.scores.insert(m.name().into(), sc);
        sm.ttfd.insert(m.name().into(), tt);
        let b: u64 = test.iter().map(|t| t.1.export_bytes[&m]).sum();
        sm.export_mbps
            .insert(m.name().into(), b as f64 * 8.0 / secs / 1e6);
        let mut ns: Vec<f64> = test
            .iter()
            .flat_map(|t| t.1.collector_ns[&m].iter().map(|&x| x as f64 / 1e6))
            .collect();
        ns.sort_by(f64::total_cmp);
        let q = |f: f64| {
            ns.get(((ns.len() as f64 - 1.0) * f) as usize)
                .copied()
                .unwrap_or(0.0)
        };
        sm.collector_ms
            .insert(m.name().into(), (q(0.5), q(0.25), q(0.75)));
    }
    sm
}

/// Train on `n_train` runs per scenario, test on `n_test` others: the whole pipeline.
pub fn evaluate(
    c: &EvalCfg,
    edges: EdgeSet,
    modes: &[Mode],
    n_train: usize,
    n_test: usize,
    threads: usize,
    work: &Path,
) -> Result<Summary, String> {
    let train_runs = runs(c, edges, n_train, threads, train_seed, None);
    let outs: Vec<RunOut> = train_runs.into_iter().map(|t| t.1).collect();
    let (det, thr, diff) = train(work, modes, &outs)?;
    drop(outs);
    let test = runs(c, edges, n_test, threads, test_seed, Some(&det));
    let mut sm = summarise(modes, &test, &thr, n_train * SCENARIOS.len(), diff);
    let seeds = |f: fn(usize, usize) -> u64, n: usize| -> Vec<u64> {
        (0..SCENARIOS.len())
            .flat_map(|s| (0..n).map(move |i| f(s, i)))
            .collect()
    };
    sm.train_seeds = seeds(train_seed, n_train);
    sm.test_seeds = seeds(test_seed, n_test);
    Ok(sm)
}

/// All modes, as `MODES`.
pub fn all_modes() -> Vec<Mode> {
    MODES.to_vec()
}

/// The work directory for one evaluation.
pub fn work_dir(base: &Path, name: &str) -> PathBuf {
    base.join(name)
}

/// Write the Kestrel-mode detectors of a finished evaluation (`work` holds the models and
/// thresholds.json) to `out` for the daemon's online detector: `<kind>.json` per anomaly
/// type and `kestrel.toml`, a `[kestrel]` fragment with the static bin edges the models
/// were trained with and `[kestrel.detect]` naming the models (paths relative to `out`) and
/// their thresholds. `note` is its comment line (how the models were trained).
pub fn export_detectors(
    work: &Path,
    edges: &EdgeSet,
    qids: usize,
    out: &Path,
    note: &str,
) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let th: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("thresholds.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("thresholds.json: {e}"))?;
    let mut t = String::new();
    let _ = writeln!(t, "# {note}");
    let _ = writeln!(
        t,
        "# The Kestrel detectors and the bin edges they were trained with (pg-kestrel-eval --models-out)."
    );
    let _ = writeln!(t, "[kestrel]\nstrategy = \"static\"\n");
    for q in 0..qids {
        let e = &edges.qids[q];
        let _ = writeln!(
            t,
            "[[kestrel.edges]]\nqid = {q}\nlat = {:?}\niat = {:?}\n",
            e.lat, e.iat
        );
    }
    let _ = writeln!(
        t,
        "[kestrel.detect]\ndir = \"ul\"\nqfis = {:?}\n",
        super::scenario::USER_QFIS
    );
    for k in KINDS {
        let src = work.join(format!("model-kestrel-{}.json", k.name()));
        let dst = out.join(format!("{}.json", k.name()));
        std::fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
        let thr = th
            .pointer(&format!("/thresholds/kestrel/{}", k.name()))
            .and_then(serde_json::Value::as_f64)
            .ok_or(format!("thresholds.json: no kestrel/{}", k.name()))?;
        let _ = writeln!(
            t,
            "[[kestrel.detect.detector]]\nkind = \"{}\"\nmodel = \"{}.json\"\nthreshold = {thr:?}\n",
            k.name(),
            k.name()
        );
    }
    std::fs::write(out.join("kestrel.toml"), t).map_err(|e| e.to_string())
}
