//! The Kestrel evaluation: the Rust evaluator against XGBoost's own probabilities on stored
//! vectors (a model XGBoost 2.1.3 trained on our features, saved by
//! perf/scripts/kestrel_train.py), and `pg-kestrel-eval --quick` end to end (training runs,
//! Python training, held-out test runs scored in Rust).

use peregrine_perf::kestrel_eval::eval::check_model;
use peregrine_perf::kestrel_eval::gbt::Model;
use std::process::Command;

const MODEL: &str = include_str!("data/kestrel-gbt-model.json");
const CHECK: &str = include_str!("data/kestrel-gbt-check.csv");

#[test]
fn evaluator_matches_xgboost_to_1e6() {
    let m = Model::from_json(MODEL).expect("model parses");
    assert!(CHECK.lines().count() > 40);
    let worst = check_model(&m, CHECK).expect("check vectors parse");
    assert!(worst <= 1e-6, "largest difference {worst:e}");
    // The probabilities are not all alike: the check would catch a constant evaluator.
    let ps: Vec<f64> = CHECK
        .lines()
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    let (lo, hi) = ps
        .iter()
        .fold((1.0f64, 0.0f64), |a, &p| (a.0.min(p), a.1.max(p)));
    assert!(hi - lo > 0.5, "{lo}..{hi}");
}

#[test]
fn evaluator_refuses_bad_models() {
    assert!(Model::from_json("{").unwrap_err().contains("not JSON"));
    let wrong = MODEL.replace("binary:logistic", "reg:squarederror");
    assert!(Model::from_json(&wrong).unwrap_err().contains("objective"));
    let v: serde_json::Value = serde_json::from_str(MODEL).unwrap();
    let mut bad = v.clone();
    bad["learner"]["gradient_booster"]["model"]["trees"][0]["left_children"][0] =
        serde_json::json!(0);
    let e = Model::from_json(&bad.to_string()).unwrap_err();
    assert!(e.contains("bad children"), "{e}");
    let mut short = v;
    short["learner"]["gradient_booster"]["model"]["trees"][0]["split_conditions"] =
        serde_json::json!([0.5]);
    let e = Model::from_json(&short.to_string()).unwrap_err();
    assert!(e.contains("different lengths"), "{e}");
}

#[test]
fn quick_evaluation_end_to_end_on_held_out_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let st = Command::new(env!("CARGO_BIN_EXE_pg-kestrel-eval"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["--quick", "--no-sweeps", "--out"])
        .arg(&out)
        .arg("--work")
        .arg(dir.path().join("work"))
        .status()
        .expect("runs");
    assert!(
        st.success(),
        "pg-kestrel-eval --quick failed (python3 with xgboost: scripts/deps.sh --test)"
    );
    let j: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("kestrel-eval-quick.json")).unwrap(),
    )
    .unwrap();
    let s = &j["summary"];
    let seeds = |k: &str| -> Vec<u64> {
        s[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    let (tr, te) = (seeds("train_seeds"), seeds("test_seeds"));
    assert_eq!((tr.len(), te.len()), (5, 5));
    assert!(tr.iter().all(|x| !te.contains(x)), "test runs are held out");
    assert!(s["max_pred_diff"].as_f64().unwrap() <= 1e-6);
    // The mixed score: each mode's combination was fitted and chosen on the training runs'
    // out-of-fold predictions (its any-anomaly check vectors are within max_pred_diff).
    for m in ["kestrel", "delta_smp", "pm"] {
        let c = &s["combination"][m];
        let chosen = c["chosen"].as_str().unwrap();
        let tried = c["oof_auprc"].as_object().unwrap();
        assert_eq!(tried.len(), 3, "{m}: {tried:?}");
        let best = tried
            .values()
            .map(|v| v.as_f64().unwrap())
            .fold(0.0, f64::max);
        assert_eq!(tried[chosen].as_f64().unwrap(), best, "{m}: {chosen}");
        assert_eq!(c["calibration"].as_object().unwrap().len(), 4, "{m}");
    }
    assert_eq!(s["test_windows"].as_u64().unwrap(), 5 * 200);
    for m in ["kestrel", "delta_smp", "pm"] {
        for sc in [
            "microburst",
            "congestion",
            "contention",
            "policy_abuse",
            "mixed",
        ] {
            let x = &s["scores"][m][sc];
            let a = x["auprc"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&a), "{m}/{sc}: AUPRC {a}");
            assert!(
                x["positives"].as_u64().unwrap() > 0,
                "{m}/{sc}: no positives"
            );
        }
        assert!(
            s["export_mbps"][m].as_f64().unwrap() > 0.0,
            "{m}: no export"
        );
    }
    // The per-(window, TEID, QFI) unit, scored on the same held-out runs: every scenario
    // has positive and negative keys, there are many more key units than QFI units, and
    // the per-key detectors passed the same 1e-6 check (max_pred_diff covers both units).
    let k = &s["key"];
    assert!(
        k["train_rows"].as_u64().unwrap() > 1000,
        "{}",
        k["train_rows"]
    );
    for m in ["kestrel", "delta_smp", "pm"] {
        for sc in [
            "microburst",
            "congestion",
            "contention",
            "policy_abuse",
            "mixed",
        ] {
            let x = &k["scores"][m][sc];
            let (a, pos, units) = (
                x["auprc"].as_f64().unwrap(),
                x["positives"].as_u64().unwrap(),
                x["units"].as_u64().unwrap(),
            );
            assert!((0.0..=1.0).contains(&a), "key {m}/{sc}: AUPRC {a}");
            assert!(pos > 0 && pos < units, "key {m}/{sc}: {pos} / {units}");
            assert!(
                units > 10 * s["scores"][m][sc]["units"].as_u64().unwrap(),
                "key {m}/{sc}: {units} units"
            );
        }
    }
    // A microburst names 1-3 TEIDs: per key, the counters (the same score for every key of
    // the QFI) cannot single them out, the per-key sketch query can.
    let mb = |m: &str| k["scores"][m]["microburst"]["auprc"].as_f64().unwrap();
    assert!(
        mb("kestrel") > mb("pm"),
        "per-key microburst: Kestrel {} PM {}",
        mb("kestrel"),
        mb("pm")
    );
    let md = std::fs::read_to_string(out.join("kestrel-eval-quick.md")).unwrap();
    // Time to first detection per key: the same single-anomaly episodes as per QFI, an
    // alarm counting only on one of the episode's own keys; Kestrel detects some.
    for m in ["kestrel", "delta_smp", "pm"] {
        for kind in ["microburst", "congestion", "contention", "policy_abuse"] {
            let (q, t) = (&s["ttfd"][m][kind], &k["ttfd"][m][kind]);
            let n = |v: &serde_json::Value, f: &str| v[f].as_u64().unwrap();
            assert_eq!(n(q, "episodes"), n(t, "episodes"), "{m}/{kind}");
            assert!(n(t, "detected") <= n(t, "episodes"), "{m}/{kind}");
        }
    }
    let det: u64 = ["microburst", "congestion", "contention", "policy_abuse"]
        .iter()
        .map(|kind| k["ttfd"]["kestrel"][kind]["detected"].as_u64().unwrap())
        .sum();
    assert!(det > 0, "Kestrel detected no episode per key");
    assert!(md.contains("Time to first detection per key"));
    // Kestrel's sketches are larger than the per-QFI counters.
    assert!(s["export_mbps"]["kestrel"].as_f64() > s["export_mbps"]["pm"].as_f64());
    assert!(md.contains("| Kestrel |") && md.contains("0.81 / 0.82"));
    assert!(out.join("kestrel-eval-quick-pr-mixed.svg").exists());
    assert!(md.contains("## Per-key unit: (1 s window, TEID, QFI)"));
    assert!(out.join("kestrel-eval-quick-pr-mixed-key.svg").exists());
}

#[test]
fn a_run_repeats_bit_for_bit_and_labels_its_episodes() {
    use peregrine_control::kestrel::binning::Strategy;
    use peregrine_perf::kestrel_eval::features::{key_names, MODES};
    use peregrine_perf::kestrel_eval::scenario::{Kind, Scenario};
    use peregrine_perf::kestrel_eval::{calibrate, collect, EvalCfg};
    let c = EvalCfg {
        key_neg_every: 4,
        ..EvalCfg::paper(30, 0.05)
    };
    let edges = calibrate(&c, Strategy::Target, 0.01, 7, 5);
    assert_eq!(edges, calibrate(&c, Strategy::Target, 0.01, 7, 5));
    let s = Scenario::Single(Kind::Microburst);
    let (a, b) = (
        collect(&c, edges, s, 3, None),
        collect(&c, edges, s, 3, None),
    );
    assert_eq!(a.windows, 30);
    assert!(a.stats.forwarded > 10_000, "{:?}", a.stats);
    assert_eq!(a.export_bytes, b.export_bytes);
    assert!(!a.plan_episodes.is_empty());
    for m in MODES {
        let (ra, rb) = (&a.rows[&m], &b.rows[&m]);
        assert_eq!(ra.len(), 30 * 5);
        assert!(ra
            .iter()
            .zip(rb)
            .all(|(x, y)| x.x == y.x && x.label == y.label));
        // Every episode's QFI is labelled in the windows it overlaps.
        for e in &a.plan_episodes {
            let w = e.start_ns / 1_000_000_000;
            assert!(ra
                .iter()
                .any(|r| r.seq == w && e.qfis.contains(&r.qfi) && r.label != 0));
        }
    }
    // The per-key unit: the keys that sent, labelled by their episodes (training runs keep
    // every positive and one in four negatives, weighted by four).
    for m in MODES {
        let kr = &a.key_rows[&m];
        assert!(kr.len() > 30 * 20, "{m:?}: {} key rows", kr.len());
        assert!(kr.iter().all(|r| r.x.len() == key_names(m).len()));
        assert!(kr
            .iter()
            .all(|r| (r.label == 0) == (r.weight == 4.0) && r.teid >= 0x1000));
        for e in &a.plan_episodes {
            let w = e.start_ns / 1_000_000_000;
            assert!(kr
                .iter()
                .any(|r| r.seq == w && e.keys.contains(&(r.teid, r.qfi)) && r.label != 0));
        }
        let (xa, xb): (Vec<_>, Vec<_>) = (
            kr.iter().map(|r| &r.x).collect(),
            b.key_rows[&m].iter().map(|r| &r.x).collect(),
        );
        assert_eq!(xa, xb);
    }
    // A different seed is a different run.
    let d = collect(&c, edges, s, 4, None);
    assert_ne!(a.export_bytes, d.export_bytes);
}
