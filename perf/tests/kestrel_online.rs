//! The daemon's online detector (issue 11 item 5) on the evaluation's in-process driver:
//! scenario traffic through the real UPF stage, egress scheduler and Kestrel tap in virtual
//! time; every window exported as the daemon exports it (the `kestrel` CBOR message, decoded
//! as a subscriber would), scored by `peregrine_control::kestrel::detect::Detector` loaded
//! from the committed `[kestrel.detect]` (perf/models/kestrel/, written by
//! `pg-kestrel-eval --models-out`), with the keys read from the run's rule snapshot (its
//! PFCP sessions). An injected microburst raises the microburst alarm in the window and on
//! the QFI it hit; a clean run raises none.

use peregrine_control::kestrel::combine::{AnyScore, Combine, Platt};
use peregrine_control::kestrel::detect::{Alarm, Detector, ANY};
use peregrine_control::kestrel::export::{decode, encode, EdgesRec, Header, Msg, SketchMsg};
use peregrine_control::kestrel::features::{self, MsgView};
use peregrine_control::kestrel::gbt::Model;
use peregrine_control::kestrel::keys::SessionKeys;
use peregrine_control::kestrel::KestrelSection;
use peregrine_dataplane::qos::QfiMap;
use peregrine_dataplane::telemetry::kestrel::{Deltas, EdgeSet, Layout};
use peregrine_perf::kestrel_eval::scenario::{Episode, Intensity, Kind, Plan, Scenario, S};
use peregrine_perf::kestrel_eval::sim::{self, RunCfg};
use std::path::{Path, PathBuf};

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/kestrel")
}

/// The committed fragment: the detectors and the edges they were trained with.
fn load() -> (Detector, EdgeSet, Layout) {
    let s = section();
    let layout = Layout::paper();
    let edges = s.initial_edges(layout.qids).unwrap();
    let d = Detector::load(s.detect.as_ref().unwrap(), &models()).unwrap();
    (d, edges, layout)
}

fn section() -> KestrelSection {
    let text = std::fs::read_to_string(models().join("kestrel.toml")).unwrap();
    let t: toml::Table = toml::from_str(&text).unwrap();
    t["kestrel"].clone().try_into().unwrap()
}

/// The committed models, and the any-anomaly score their fragment configures, computed here
/// independently of the `Detector`.
fn any_reference() -> (Vec<Model>, AnyScore) {
    let c = section().detect.unwrap();
    let models = c
        .detectors
        .iter()
        .map(|d| Model::from_json(&std::fs::read_to_string(models().join(&d.model)).unwrap()))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let platt = c
        .detectors
        .iter()
        .map(|d| Platt::new(d.calibration.expect("the fragment has calibrations")).unwrap())
        .collect();
    let combine = Combine::parse(c.combine.as_deref().expect("and a combination")).unwrap();
    (models, AnyScore { platt, combine })
}

/// Run `scenario` (scale 0.1, as the committed models were trained) and score every window
/// online: the alarms and the plan's episodes.
fn run(scenario: Scenario, seed: u64, secs: u64) -> (Vec<Alarm>, Vec<Episode>, u64) {
    let (mut det, edges, layout) = load();
    let plan = Plan::new(scenario, seed, secs, 0.1, &Intensity::default());
    let mut keys = SessionKeys::default();
    assert!(keys.update(1, &sim::tables(&plan)));
    // Every key the offline evaluation summarises is a key of the sessions.
    for (t, q) in plan.keys() {
        assert!(keys.teids(0, q).binary_search(&t).is_ok(), "{t:#x}/{q}");
    }
    let rc = RunCfg {
        window_ns: S,
        layout: layout.clone(),
        edges,
        deltas: Deltas {
            sojourn_ns: 20_000,
            iat_ns: 200_000,
        },
        tick_ns: 10_000,
        drift: None,
    };
    let rec: Vec<EdgesRec> = (0..layout.qids)
        .map(|q| EdgesRec {
            qid: q,
            lat: edges.qids[q].lat.to_vec(),
            iat: edges.qids[q].iat.to_vec(),
        })
        .collect();
    let mut alarms = Vec::new();
    let mut windows = 0;
    let (ref_models, ref_any) = any_reference();
    let mut temporal = features::Temporal::default();
    sim::run(&plan, &rc, seed, |o| {
        let w = o.window;
        if w.late || w.seq * S >= plan.duration_ns {
            return;
        }
        let h = Header {
            v: peregrine_control::kestrel::export::VERSION,
            kind: "kestrel".into(),
            seq: w.seq,
            window_ns: S,
            workers: 1,
            sources: w.sources.clone(),
            late: false,
        };
        let Msg::Sketch(m) = decode(&encode(&SketchMsg::of(w, h, rec.clone()))).unwrap() else {
            panic!("not a sketch message");
        };
        // The export gives the collector the same features as the aggregated window.
        let v = MsgView::new(&m).unwrap();
        let port = features::port_context(&v, 0);
        assert_eq!(port, features::port_context(w, 0));
        for q in [6u8, 9] {
            let qid = usize::from(QfiMap::default().qid(q));
            let teids = keys.teids(0, q);
            assert_eq!(
                features::qfi_base(&v, 0, qid, q, teids, &port),
                features::qfi_base(w, 0, qid, q, teids, &port)
            );
        }
        alarms.extend(det.on_message(&m, &keys).unwrap());
        // The published any-anomaly score is the configured combination of the calibrated
        // detectors' probabilities of this window's feature vector.
        for q in [1u8, 3, 6, 8, 9] {
            let qid = usize::from(QfiMap::default().qid(q));
            let x = temporal.extend(
                q,
                features::qfi_base(&v, 0, qid, q, keys.teids(0, q), &port),
            );
            let z: Vec<f64> = ref_models.iter().map(|md| md.margin(&x)).collect();
            let want = ref_any.of_margins(&z);
            assert!((0.0..=1.0).contains(&want));
            assert_eq!(det.stats.last_score[&(ANY.to_string(), q)], want, "QFI {q}");
        }
        windows += 1;
    });
    assert_eq!(det.stats.windows_scored, windows);
    (alarms, plan.episodes, windows)
}

/// Test seeds: not among the evaluation's training seeds ((scenario + 1) * 1000 + i).
const SEED: u64 = 90_001;

#[test]
fn an_injected_microburst_raises_the_microburst_alarm_in_its_window_and_qfi() {
    let (alarms, eps, windows) = run(Scenario::Single(Kind::Microburst), SEED, 60);
    assert_eq!(windows, 60);
    assert!(!eps.is_empty());
    let mb: Vec<&Alarm> = alarms
        .iter()
        .filter(|a| a.detector == "microburst")
        .collect();
    // An episode's windows: from its onset's to one after its end's (the queue drains and
    // the change features see the end), the evaluation's TTFD rule.
    let inside = |e: &Episode, a: &Alarm| {
        e.qfis.contains(&a.qfi) && a.seq >= e.start_ns / S && a.seq <= e.end_ns / S + 1
    };
    let hit = |a: &Alarm| eps.iter().any(|e| inside(e, a));
    let detected = eps
        .iter()
        .filter(|e| mb.iter().any(|a| inside(e, a)))
        .count();
    eprintln!(
        "{} episodes ({:?}), {detected} detected; microburst alarms {:?}",
        eps.len(),
        eps.iter()
            .map(|e| (e.start_ns / S, e.end_ns / S, e.qfis.clone()))
            .collect::<Vec<_>>(),
        mb.iter()
            .map(|a| (a.seq, a.qfi, a.score))
            .collect::<Vec<_>>()
    );
    assert_eq!(detected, eps.len(), "a microburst episode raised no alarm");
    // Every microburst alarm is in a microburst window on the QFI it hit.
    assert!(
        mb.iter().all(|a| hit(a)),
        "a microburst alarm outside the episodes"
    );
    // The alarm names the bursting keys among the QFI's top talkers.
    let a = mb.iter().find(|a| hit(a)).unwrap();
    let e = eps.iter().find(|e| inside(e, a)).unwrap();
    assert!(
        e.keys.iter().any(|k| a.teids.contains(&k.0)),
        "alarm keys {:?}, episode keys {:?}",
        a.teids,
        e.keys
    );
}

/// A clean run raises no microburst alarm, nor any of the congestion and policy-abuse
/// detectors. The contention detector is the exception, said here rather than hidden: at the
/// committed models' scale (0.1) it is the weakest (AUPRC 0.78 on its held-out mixed run) and
/// its best-F1 threshold is low (about 0.03), so it false-alarms on clean traffic (12 of 300
/// units); its alarms are counted and printed.
#[test]
fn a_clean_run_raises_no_microburst_alarm() {
    let (alarms, eps, windows) = run(Scenario::Baseline, SEED + 1, 60);
    assert_eq!(windows, 60);
    assert!(eps.is_empty());
    let (contention, other): (Vec<&Alarm>, Vec<&Alarm>) =
        alarms.iter().partition(|a| a.detector == "contention");
    assert!(other.is_empty(), "{other:?}");
    eprintln!(
        "clean run: {} contention false alarms in {} (window, QFI) units",
        contention.len(),
        windows * 5
    );
}

#[test]
fn bad_detector_configs_are_refused_naming_the_problem() {
    let text = std::fs::read_to_string(models().join("kestrel.toml")).unwrap();
    let t: toml::Table = toml::from_str(&text).unwrap();
    let s: KestrelSection = t["kestrel"].clone().try_into().unwrap();
    let good = s.detect.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let err = |f: &dyn Fn(&mut peregrine_control::kestrel::detect::DetectConf)| {
        let mut c = good.clone();
        f(&mut c);
        Detector::load(&c, dir.path()).unwrap_err()
    };
    let model = std::fs::read_to_string(models().join("microburst.json")).unwrap();
    std::fs::write(dir.path().join("ok.json"), &model).unwrap();
    let point = |c: &mut peregrine_control::kestrel::detect::DetectConf, m: &str| {
        c.detectors.truncate(1);
        c.detectors[0].model = m.into();
    };
    let e = err(&|c| point(c, "missing.json"));
    assert!(
        e.contains("missing.json") && e.contains("detector[0]"),
        "{e}"
    );
    std::fs::write(dir.path().join("broken.json"), &model[..model.len() / 2]).unwrap();
    let e = err(&|c| point(c, "broken.json"));
    assert!(e.contains("not JSON"), "{e}");
    let v: serde_json::Value = serde_json::from_str(&model).unwrap();
    let mut other = v.clone();
    other["learner"]["learner_model_param"]["num_feature"] = serde_json::json!("12");
    other["learner"]["feature_names"] = serde_json::Value::Null;
    std::fs::write(dir.path().join("other.json"), other.to_string()).unwrap();
    let e = err(&|c| point(c, "other.json"));
    assert!(
        e.contains("12 features") || e.contains("bad children"),
        "{e}"
    );
    let mut renamed = v;
    if renamed["learner"]["feature_names"].is_array() {
        renamed["learner"]["feature_names"][3] = serde_json::json!("something_else");
        std::fs::write(dir.path().join("renamed.json"), renamed.to_string()).unwrap();
        let e = err(&|c| point(c, "renamed.json"));
        assert!(e.contains("feature 3 is `something_else`"), "{e}");
    }
    let e = err(&|c| {
        point(c, "ok.json");
        c.detectors[0].threshold = f64::NAN;
    });
    assert!(e.contains("threshold"), "{e}");
    let e = err(&|c| {
        point(c, "ok.json");
        c.detectors[0].kind = "tsunami".into();
    });
    assert!(e.contains("`tsunami` is not one of"), "{e}");
    let e = err(&|c| {
        point(c, "ok.json");
        c.detectors.push(c.detectors[0].clone());
    });
    assert!(e.contains("second detector"), "{e}");
    let e = err(&|c| {
        point(c, "ok.json");
        c.dir = "sideways".into();
    });
    assert!(e.contains("dir"), "{e}");
    let e = err(&|c| c.detectors.clear());
    assert!(e.contains("at least one"), "{e}");
}
