//! One evaluation: training runs -> features -> Python training (XGBoost, pinned) -> models
//! checked against Python's predictions -> held-out test runs scored online in Rust ->
//! AUPRC, F1, TTFD, export and collector time per mode.

use super::features::{Mode, MODES};
use super::gbt::Model;
use super::metrics::{auprc, f1_at, pr_curve};
use super::scenario::{Kind, Scenario, KINDS, S};
use super::{collect, Detectors, EvalCfg, Row, RunOut, Unit};
use crate::fridge_eval::runs::par_map;
use peregrine_control::kestrel::combine::{AnyScore, Combine, Platt};
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

/// The "any anomaly" score per mode (by name): the detectors' calibrations and their
/// combination, fitted and chosen on the training runs (`kestrel_train.py`).
pub type AnyScores = HashMap<String, AnyScore>;

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
    /// `scores[mode][scenario]`; "mixed" is any-anomaly with the mode's "any anomaly" score
    /// (`peregrine_control::kestrel::combine`).
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
    /// The "any anomaly" score per mode: the calibrations, the combinations tried and their
    /// out-of-fold AUPRC over the training runs, the one chosen (thresholds.json).
    pub combination: serde_json::Value,
    /// Largest |Rust - Python| probability over the check vectors.
    pub max_pred_diff: f64,
    pub offered_gbps: f64,
    /// Drift re-binning over the test runs: calibration periods started, re-binnings pushed.
    pub calibrations: u64,
    pub rebinnings: u64,
    /// The drift rule's steady windows over the test runs (every QID).
    pub drift: peregrine_control::kestrel::binning::DriftCounts,
    pub train_runs: usize,
    pub test_runs: usize,
    pub test_windows: u64,
    /// Seeds of the training and of the test runs (disjoint).
    pub train_seeds: Vec<u64>,
    pub test_seeds: Vec<u64>,
    /// Mixed-scenario PR curves per mode (recall, precision).
    #[serde(skip)]
    pub pr_mixed: HashMap<String, Vec<(f64, f64)>>,
    /// The per-(window, TEID, QFI) unit, when it was scored: `scores`, `mixed_per_kind`,
    /// thresholds and collector time as above.
    pub key: Option<KeySummary>,
}

/// The per-key unit's scores.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeySummary {
    pub scores: HashMap<String, HashMap<String, Score>>,
    pub mixed_per_kind: HashMap<String, HashMap<String, Score>>,
    pub thresholds: HashMap<String, HashMap<String, f64>>,
    pub combination: serde_json::Value,
    /// Extra collector time per window for the per-key vectors and inference, ms (median,
    /// lower and upper quartile).
    pub collector_ms: HashMap<String, (f64, f64, f64)>,
    /// Time to first detection per mode and anomaly kind, an alarm counting only on one of
    /// the episode's own keys.
    pub ttfd: HashMap<String, HashMap<String, Ttfd>>,
    /// Training rows per mode after the negative subsampling, and the subsampling factor.
    pub train_rows: usize,
    pub neg_every: u32,
    #[serde(skip)]
    pub pr_mixed: HashMap<String, Vec<(f64, f64)>>,
}

fn write_csv(path: &Path, runs: &[RunOut], mode: Mode, unit: Unit) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let names = match unit {
        Unit::Qfi => super::features::names(mode),
        Unit::Key => super::features::key_names(mode),
    };
    match unit {
        Unit::Qfi => write!(f, "run,seq,qfi,label")?,
        Unit::Key => write!(f, "run,seq,teid,qfi,label,weight")?,
    }
    for n in &names {
        write!(f, ",{n}")?;
    }
    writeln!(f)?;
    for (i, r) in runs.iter().enumerate() {
        for row in rows_of(r, mode, unit) {
            let mut line = match unit {
                Unit::Qfi => format!("{i},{},{},{}", row.seq, row.qfi, row.label),
                Unit::Key => format!(
                    "{i},{},{},{},{},{}",
                    row.seq, row.teid, row.qfi, row.label, row.weight
                ),
            };
            for v in &row.x {
                let _ = write!(line, ",{v}");
            }
            writeln!(f, "{line}")?;
        }
    }
    Ok(())
}

/// A run's rows of `mode` in `unit`.
pub fn rows_of(r: &RunOut, mode: Mode, unit: Unit) -> &[Row] {
    let m = match unit {
        Unit::Qfi => &r.rows,
        Unit::Key => &r.key_rows,
    };
    m.get(&mode).map_or(&[], Vec::as_slice)
}

/// File prefix of a unit's training files and models ("" for the per-QFI unit, so the
/// daemon's models keep their names).
fn prefix(unit: Unit) -> &'static str {
    match unit {
        Unit::Qfi => "",
        Unit::Key => "key-",
    }
}

/// Check a model against Python's probabilities on its stored vectors; the largest
/// difference.
pub fn check_model(m: &Model, csv: &str) -> Result<f64, String> {
    worst_difference(csv, |x| m.predict(x))
}

/// The largest `|score(x) - want|` over a check file's lines (`want,x0,x1,...`, Python's
/// score first, then the feature vector).
fn worst_difference(csv: &str, score: impl Fn(&[f32]) -> f64) -> Result<f64, String> {
    let mut worst = 0f64;
    for (n, line) in csv.lines().enumerate() {
        let v: Vec<f64> = line
            .split(',')
            .map(|s| s.parse::<f64>().map_err(|e| format!("line {n}: {e}")))
            .collect::<Result<_, _>>()?;
        let (&want, x) = v.split_first().ok_or(format!("line {n}: empty"))?;
        let x: Vec<f32> = x.iter().map(|&a| a as f32).collect();
        worst = worst.max((score(&x) - want).abs());
    }
    Ok(worst)
}

/// Train with `perf/scripts/kestrel_train.py`, load and check the models and the "any
/// anomaly" scores.
pub fn train(dir: &Path, modes: &[Mode], runs: &[RunOut], unit: Unit) -> Result<Trained, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let px = prefix(unit);
    for &m in modes {
        write_csv(
            &dir.join(format!("train-{px}{}.csv", m.name())),
            runs,
            m,
            unit,
        )
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
        .arg("--unit")
        .arg(unit.name())
        .status()
        .map_err(|e| format!("python3: {e}"))?;
    if !st.success() {
        return Err(format!("{} failed: {st}", script.display()));
    }
    let th: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("thresholds{}.json", tsuffix(unit))))
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("thresholds.json: {e}"))?;
    let mut det = Detectors::new();
    let mut thr = Thresholds::new();
    let mut anys = AnyScores::new();
    let mut worst = 0f64;
    for &m in modes {
        let mut v = Vec::new();
        for k in KINDS {
            let base = format!("{px}{}-{}", m.name(), k.name());
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
        let any = any_score_of(&th, m.name())?;
        let base = format!("{px}{}-any", m.name());
        let check = std::fs::read_to_string(dir.join(format!("check-{base}.csv")))
            .map_err(|e| format!("check-{base}.csv: {e}"))?;
        let d = check_any(&v, &any, &check)?;
        if d > 1e-6 {
            return Err(format!("{base}: Rust and Python differ by {d:e} > 1e-6"));
        }
        worst = worst.max(d);
        anys.insert(m.name().into(), any);
        det.insert(m, v);
    }
    let combination = th.get("combination").cloned().unwrap_or_default();
    Ok(Trained {
        det,
        thr,
        any: anys,
        combination,
        max_diff: worst,
    })
}

/// What [`train`] returns: the detectors, their thresholds, the "any anomaly" score per mode
/// (and the thresholds file's `combination`: what was tried and chosen), and the largest
/// Rust-Python difference over the check vectors.
#[derive(Debug)]
pub struct Trained {
    pub det: Detectors,
    pub thr: Thresholds,
    pub any: AnyScores,
    pub combination: serde_json::Value,
    pub max_diff: f64,
}

/// The "any anomaly" score of `mode` in a thresholds file's `combination`.
pub fn any_score_of(th: &serde_json::Value, mode: &str) -> Result<AnyScore, String> {
    let c = th
        .pointer(&format!("/combination/{mode}"))
        .ok_or(format!("thresholds.json: no combination for {mode}"))?;
    let combine = Combine::parse(c["combine"].as_str().unwrap_or(""))?;
    let platt = KINDS
        .iter()
        .map(|k| {
            let ab = c
                .pointer(&format!("/calibration/{}", k.name()))
                .and_then(|v| serde_json::from_value::<[f64; 2]>(v.clone()).ok())
                .ok_or(format!(
                    "thresholds.json: no calibration {mode}/{}",
                    k.name()
                ))?;
            Platt::new(ab)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(AnyScore { platt, combine })
}

/// Check the "any anomaly" score of `models` against Python's on its stored vectors
/// (`check-<mode>-any.csv`); the largest difference.
pub fn check_any(models: &[Model], any: &AnyScore, csv: &str) -> Result<f64, String> {
    worst_difference(csv, |x| {
        let z: Vec<f64> = models.iter().map(|m| m.margin(x)).collect();
        any.of_margins(&z)
    })
}

/// Suffix of a unit's thresholds file.
fn tsuffix(unit: Unit) -> &'static str {
    match unit {
        Unit::Qfi => "",
        Unit::Key => "-key",
    }
}

/// Runs of every scenario, `n` seeds each (`seed(scenario, i)`), with detectors or not.
pub fn runs(
    c: &EvalCfg,
    edges: EdgeSet,
    n: usize,
    threads: usize,
    seed: fn(usize, usize) -> u64,
    det: Option<&HashMap<Unit, Detectors>>,
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

/// Per-scenario scores (single scenarios on their own anomaly; "mixed" any anomaly with
/// `any`, the calibrated and combined probabilities, F1 of "any detector at or over its threshold"), the mixed runs' per
/// detector scores and the mixed PR curve, of `mode` in `unit`.
#[allow(clippy::type_complexity)]
fn unit_scores(
    mode: Mode,
    unit: Unit,
    test: &[(usize, RunOut)],
    th: &HashMap<String, f64>,
    any: &AnyScore,
) -> (
    HashMap<String, Score>,
    HashMap<String, Score>,
    Vec<(f64, f64)>,
) {
    let tk = |k: Kind| th[k.name()];
    let mut sc = HashMap::new();
    let mut per = HashMap::new();
    let mut pr = Vec::new();
    for (si, s) in SCENARIOS.iter().enumerate() {
        let rows: Vec<&Row> = test
            .iter()
            .filter(|t| t.0 == si)
            .flat_map(|t| rows_of(&t.1, mode, unit).iter())
            .collect();
        match *s {
            Scenario::Single(k) => {
                let ki = k as usize;
                let sco: Vec<f64> = rows.iter().map(|r| r.score[ki]).collect();
                let lab: Vec<bool> = rows.iter().map(|r| r.label & k.bit() != 0).collect();
                sc.insert(k.name().to_string(), score_of(&sco, &lab, tk(k)));
            }
            Scenario::Mixed => {
                let sco: Vec<f64> = rows.iter().map(|r| any.of_margins(&r.margin)).collect();
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
                pr = pr_curve(&sco, &lab);
                for k in KINDS {
                    let sco: Vec<f64> = rows.iter().map(|r| r.score[k as usize]).collect();
                    let lab: Vec<bool> = rows.iter().map(|r| r.label & k.bit() != 0).collect();
                    per.insert(k.name().to_string(), score_of(&sco, &lab, tk(k)));
                }
            }
            Scenario::Baseline => {}
        }
    }
    (sc, per, pr)
}

/// Median and quartiles (ms) of per-window times in ns.
fn quartiles_ms(ns: impl Iterator<Item = u64>) -> (f64, f64, f64) {
    let mut v: Vec<f64> = ns.map(|x| x as f64 / 1e6).collect();
    v.sort_by(f64::total_cmp);
    let q = |f: f64| {
        v.get(((v.len() as f64 - 1.0) * f) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    (q(0.5), q(0.25), q(0.75))
}

/// Score the test runs (per-QFI unit; the per-key unit is added by [`summarise_keys`]).
pub fn summarise(
    modes: &[Mode],
    test: &[(usize, RunOut)],
    tr: &Trained,
    train_runs: usize,
    max_pred_diff: f64,
) -> Summary {
    let thr = &tr.thr;
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
        combination: tr.combination.clone(),
        max_pred_diff,
        offered_gbps: 0.0,
        calibrations: test.iter().map(|t| t.1.stats.calibrations).sum(),
        rebinnings: test.iter().map(|t| t.1.stats.rebinnings).sum(),
        drift: test
            .iter()
            .flat_map(|t| t.1.stats.drift)
            .fold(Default::default(), |mut c, d| {
                c.tested += d.tested;
                c.significant += d.significant;
                c.under_sampled += d.under_sampled;
                c.fired += d.fired;
                c.peak = c.peak.max(d.peak);
                c
            }),
        train_runs,
        test_runs: test.len(),
        test_windows: test.iter().map(|t| t.1.windows).sum(),
        train_seeds: Vec::new(),
        test_seeds: Vec::new(),
        pr_mixed: HashMap::new(),
        key: None,
    };
    let secs: f64 = test.iter().map(|t| t.1.windows as f64).sum();
    let bytes: u64 = test.iter().map(|t| t.1.stats.offered_bytes).sum();
    sm.offered_gbps = bytes as f64 * 8.0 / secs / 1e9;
    for &m in modes {
        let th = &thr[m.name()];
        let (sc, per, pr) = unit_scores(m, Unit::Qfi, test, th, &tr.any[m.name()]);
        sm.mixed_per_kind.insert(m.name().into(), per);
        sm.pr_mixed.insert(m.name().into(), pr);
        let tt = ttfd(m, Unit::Qfi, test, th);
        sm.scores.insert(m.name().into(), sc);
        sm.ttfd.insert(m.name().into(), tt);
        let b: u64 = test.iter().map(|t| t.1.export_bytes[&m]).sum();
        sm.export_mbps
            .insert(m.name().into(), b as f64 * 8.0 / secs / 1e6);
        sm.collector_ms.insert(
            m.name().into(),
            quartiles_ms(
                test.iter()
                    .flat_map(|t| t.1.collector_ns[&m].iter().copied()),
            ),
        );
    }
    sm
}

/// Time to first detection per episode of the single-scenario test runs, per anomaly kind:
/// (end of the first window, from the onset window to one window after the episode's end,
/// whose `k` detector alarms on a unit the episode affects) - onset. Affected units: per
/// QFI, the episode's QFIs; per key, its (TEID, QFI) keys (the keys its labels name).
fn ttfd(
    m: Mode,
    unit: Unit,
    test: &[(usize, RunOut)],
    th: &HashMap<String, f64>,
) -> HashMap<String, Ttfd> {
    let mut tt = HashMap::new();
    for (si, s) in SCENARIOS.iter().enumerate() {
        let Scenario::Single(k) = *s else { continue };
        let (ki, thr) = (k as usize, th[k.name()]);
        let mut d = Vec::new();
        let mut eps = 0;
        for t in test.iter().filter(|t| t.0 == si) {
            for e in &t.1.plan_episodes {
                eps += 1;
                let affected = |r: &Row| match unit {
                    Unit::Qfi => e.qfis.contains(&r.qfi),
                    Unit::Key => e.keys.contains(&(r.teid, r.qfi)),
                };
                let first = rows_of(&t.1, m, unit)
                    .iter()
                    .filter(|r| {
                        r.seq >= e.start_ns / S
                            && r.seq <= e.end_ns / S + 1
                            && r.score[ki] >= thr
                            && affected(r)
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
    tt
}

/// The per-key unit's scores of the test runs.
pub fn summarise_keys(
    modes: &[Mode],
    test: &[(usize, RunOut)],
    tr: &Trained,
    train_rows: usize,
    neg_every: u32,
) -> KeySummary {
    let thr = &tr.thr;
    let mut ks = KeySummary {
        scores: HashMap::new(),
        mixed_per_kind: HashMap::new(),
        thresholds: thr.clone(),
        combination: tr.combination.clone(),
        collector_ms: HashMap::new(),
        ttfd: HashMap::new(),
        train_rows,
        neg_every,
        pr_mixed: HashMap::new(),
    };
    for &m in modes {
        let (sc, per, pr) = unit_scores(m, Unit::Key, test, &thr[m.name()], &tr.any[m.name()]);
        ks.ttfd
            .insert(m.name().into(), ttfd(m, Unit::Key, test, &thr[m.name()]));
        ks.scores.insert(m.name().into(), sc);
        ks.mixed_per_kind.insert(m.name().into(), per);
        ks.pr_mixed.insert(m.name().into(), pr);
        ks.collector_ms.insert(
            m.name().into(),
            quartiles_ms(
                test.iter()
                    .flat_map(|t| t.1.key_collector_ns[&m].iter().copied()),
            ),
        );
    }
    ks
}

/// Train on `n_train` runs per scenario, test on `n_test` others: the whole pipeline, in
/// the per-QFI unit and, when `c.key_neg_every` is not 0, also in the per-key unit (the
/// same runs).
pub fn evaluate(
    c: &EvalCfg,
    edges: EdgeSet,
    modes: &[Mode],
    n_train: usize,
    n_test: usize,
    threads: usize,
    work: &Path,
) -> Result<Summary, String> {
    let keys = c.key_neg_every > 0;
    let t0 = std::time::Instant::now();
    let train_runs = runs(c, edges, n_train, threads, train_seed, None);
    eprintln!("training runs done in {:.0?}", t0.elapsed());
    let mut outs: Vec<RunOut> = train_runs.into_iter().map(|t| t.1).collect();
    let mut det = HashMap::new();
    let mut per_qfi = train(work, modes, &outs, Unit::Qfi)?;
    det.insert(Unit::Qfi, std::mem::take(&mut per_qfi.det));
    let mut per_key = None;
    let mut worst = per_qfi.max_diff;
    let key_train_rows = outs
        .iter()
        .map(|o| rows_of(o, modes[0], Unit::Key).len())
        .sum();
    if keys {
        for o in &mut outs {
            o.rows.clear();
        }
        eprintln!("per-QFI training done in {:.0?}", t0.elapsed());
        let mut t = train(work, modes, &outs, Unit::Key)?;
        det.insert(Unit::Key, std::mem::take(&mut t.det));
        worst = worst.max(t.max_diff);
        per_key = Some(t);
    }
    drop(outs);
    eprintln!("training done in {:.0?}", t0.elapsed());
    let test = runs(c, edges, n_test, threads, test_seed, Some(&det));
    write_test_scores(work, modes, &test, keys).map_err(|e| format!("test scores: {e}"))?;
    let mut sm = summarise(modes, &test, &per_qfi, n_train * SCENARIOS.len(), worst);
    if let Some(t) = &per_key {
        sm.key = Some(summarise_keys(
            modes,
            &test,
            t,
            key_train_rows,
            c.key_neg_every,
        ));
    }
    let seeds = |f: fn(usize, usize) -> u64, n: usize| -> Vec<u64> {
        (0..SCENARIOS.len())
            .flat_map(|s| (0..n).map(move |i| f(s, i)))
            .collect()
    };
    sm.train_seeds = seeds(train_seed, n_train);
    sm.test_seeds = seeds(test_seed, n_test);
    Ok(sm)
}

/// The test runs' probabilities per unit and mode, `test-scores-<prefix><mode>.csv` in
/// `work` (for analysis only: nothing reads them back).
fn write_test_scores(
    work: &Path,
    modes: &[Mode],
    test: &[(usize, RunOut)],
    keys: bool,
) -> std::io::Result<()> {
    let units: &[Unit] = if keys {
        &[Unit::Qfi, Unit::Key]
    } else {
        &[Unit::Qfi]
    };
    for &unit in units {
        for &m in modes {
            let path = work.join(format!("test-scores-{}{}.csv", prefix(unit), m.name()));
            let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
            write!(f, "scenario,run,seq,teid,qfi,label")?;
            for k in KINDS {
                write!(f, ",{}", k.name())?;
            }
            writeln!(f)?;
            for (i, (s, r)) in test.iter().enumerate() {
                for row in rows_of(r, m, unit) {
                    write!(
                        f,
                        "{s},{i},{},{},{},{}",
                        row.seq, row.teid, row.qfi, row.label
                    )?;
                    for p in row.score {
                        write!(f, ",{p:e}")?;
                    }
                    writeln!(f)?;
                }
            }
        }
    }
    Ok(())
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
/// were trained with and `[kestrel.detect]` naming the models (paths relative to `out`),
/// their thresholds and calibrations and the "any anomaly" combination. `note` is its comment line (how the models were trained).
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
    let any = any_score_of(&th, "kestrel")?;
    let _ = writeln!(
        t,
        "[kestrel.detect]\ndir = \"ul\"\nqfis = {:?}\ncombine = \"{}\"\n",
        super::scenario::USER_QFIS,
        any.combine.name()
    );
    for (k, c) in KINDS.iter().zip(&any.platt) {
        let src = work.join(format!("model-kestrel-{}.json", k.name()));
        let dst = out.join(format!("{}.json", k.name()));
        std::fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
        let thr = th
            .pointer(&format!("/thresholds/kestrel/{}", k.name()))
            .and_then(serde_json::Value::as_f64)
            .ok_or(format!("thresholds.json: no kestrel/{}", k.name()))?;
        let _ = writeln!(
            t,
            "[[kestrel.detect.detector]]\nkind = \"{}\"\nmodel = \"{}.json\"\nthreshold = {thr:?}\ncalibration = [{:?}, {:?}]\n",
            k.name(),
            k.name(),
            c.a,
            c.b
        );
    }
    std::fs::write(out.join("kestrel.toml"), t).map_err(|e| e.to_string())
}
