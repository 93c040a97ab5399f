//! The online detectors (Kestrel, Saha et al., section V: one gradient-boosted-tree model per
//! anomaly type, scored per (window, QFI)): `[kestrel.detect]` names the trained models
//! (XGBoost JSON, as `pg-kestrel-eval` trains and `perf/models/kestrel/` holds) and their
//! thresholds. Every exported `kestrel` window, the collector side computes the feature
//! vector of each scored QFI from the message ([`super::features`], the keys of the PFCP
//! sessions), evaluates every model ([`super::gbt`]) and raises an [`Alarm`] where the
//! probability reaches the threshold. It runs on the control thread at the window edge:
//! nothing per packet, nothing the workers wait for.
//!
//! I/O-free: the feature publishes the alarms (ZeroMQ PUB, the log, Prometheus).

use super::combine::{AnyScore, Combine, Platt};
use super::features::{self, MsgView, SketchView, Temporal};
use super::gbt::{probability, Model};
use super::keys::SessionKeys;
use peregrine_dataplane::qos::QfiMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// The anomaly types a detector may be trained for (the seed's Table I).
pub const KINDS: [&str; 4] = ["microburst", "congestion", "contention", "policy_abuse"];

/// Alarm message encoding version.
pub const ALARM_VERSION: u32 = 1;

/// Default ZeroMQ PUB endpoint of the alarms.
pub const DEFAULT_ALARMS: &str = "tcp://127.0.0.1:5573";

/// Keys named in an alarm (the QFI's largest by bytes in the window).
pub const ALARM_TEIDS: usize = 4;

/// `[[kestrel.detect.detector]]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DetectorConf {
    /// One of [`KINDS`].
    pub kind: String,
    /// The XGBoost JSON model (relative to the config file's directory).
    pub model: String,
    /// Alarm when the probability is at least this, in (0, 1).
    pub threshold: f64,
    /// Platt scaling `[a, b]` of the probability in the "any anomaly" score
    /// ([`super::combine`]; default: none). Alarms compare the model's own probability.
    pub calibration: Option<[f64; 2]>,
}

/// `[kestrel.detect]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DetectConf {
    /// ZeroMQ PUB endpoint of the alarms (topic `alarm`); "" for none.
    #[serde(default = "d_alarms")]
    pub publish: String,
    /// The direction scored: `ul` or `dl`.
    #[serde(default = "d_dir")]
    pub dir: String,
    /// The QFIs scored (default: every QFI the sessions have keys for in `dir`).
    pub qfis: Option<Vec<u8>>,
    /// How the detectors' calibrated probabilities make the "any anomaly" score of a QFI
    /// (`max` or `noisy_or`, [`super::combine::Combine`]; default `max`), published as the
    /// score of detector `any`.
    pub combine: Option<String>,
    #[serde(rename = "detector")]
    pub detectors: Vec<DetectorConf>,
}

fn d_alarms() -> String {
    DEFAULT_ALARMS.into()
}
fn d_dir() -> String {
    "ul".into()
}

impl DetectConf {
    /// Everything but the model files: the direction scored, or what is wrong.
    pub fn check(&self) -> Result<u8, String> {
        let dir = match self.dir.as_str() {
            "ul" => 0,
            "dl" => 1,
            d => return Err(format!("dir: `{d}`, want `ul` or `dl`")),
        };
        if self.detectors.is_empty() {
            return Err("detector: at least one [[kestrel.detect.detector]]".into());
        }
        if let Some(c) = &self.combine {
            Combine::parse(c)?;
        }
        if let Some(q) = self.qfis.as_ref().and_then(|v| v.iter().find(|&&q| q > 63)) {
            return Err(format!("qfis: QFI {q} is out of range (0..=63)"));
        }
        for (i, d) in self.detectors.iter().enumerate() {
            let at = format!("detector[{i}] ({})", d.kind);
            if !KINDS.contains(&d.kind.as_str()) {
                return Err(format!(
                    "detector[{i}].kind: `{}` is not one of {}",
                    d.kind,
                    KINDS.join(", ")
                ));
            }
            if self.detectors[..i].iter().any(|x| x.kind == d.kind) {
                return Err(format!("{at}: a second detector of that kind"));
            }
            if !(d.threshold > 0.0 && d.threshold < 1.0) {
                return Err(format!(
                    "{at}.threshold: {} is not a probability in (0, 1)",
                    d.threshold
                ));
            }
            if let Some(ab) = d.calibration {
                Platt::new(ab).map_err(|e| format!("{at}.{e}"))?;
            }
        }
        Ok(dir)
    }
}

/// One raised alarm; on ZeroMQ the CBOR map of this struct (docs/kestrel.md "Alarms").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alarm {
    pub v: u32,
    /// `alarm`.
    pub kind: String,
    /// The window (sequence number) and its length.
    pub seq: u64,
    pub window_ns: u64,
    /// The detector (one of [`KINDS`]).
    pub detector: String,
    pub dir: u8,
    pub qfi: u8,
    pub qid: u8,
    /// The model's probability and the threshold it reached.
    pub score: f64,
    pub threshold: f64,
    /// The QFI's keys with the most bytes in the window (at most [`ALARM_TEIDS`]).
    pub teids: Vec<u32>,
}

/// What the detectors did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DetectStats {
    pub windows_scored: u64,
    /// Windows not scored: the message did not fit its layout.
    pub windows_refused: u64,
    pub alarms_total: u64,
    /// (detector, QFI) -> alarms.
    #[serde(skip)]
    pub alarms: BTreeMap<(String, u8), u64>,
    /// Latest probability per (detector, QFI); detector [`ANY`]: the "any anomaly" score.
    #[serde(skip)]
    pub last_score: BTreeMap<(String, u8), f64>,
    /// Feature extraction plus inference, per window: total and largest, seconds.
    pub scoring_s_total: f64,
    pub scoring_s_max: f64,
    pub scoring_s_last: f64,
}

struct Loaded {
    kind: String,
    model: Model,
    threshold: f64,
}

/// The detector name under which the "any anomaly" score is published.
pub const ANY: &str = "any";

/// The loaded detectors and their per-QFI temporal state.
pub struct Detector {
    dir: u8,
    qfis: Option<Vec<u8>>,
    map: QfiMap,
    models: Vec<Loaded>,
    any: AnyScore,
    temporal: Temporal,
    pub stats: DetectStats,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector")
            .field("dir", &self.dir)
            .field("qfis", &self.qfis)
            .field(
                "models",
                &self.models.iter().map(|m| &m.kind).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Detector {
    /// Load and check the models `c` names (paths relative to `base`). Refused, with the
    /// detector and the problem named: an unknown kind or direction, a kind twice, a
    /// threshold outside (0, 1), a calibration that is not finite or would reverse the
    /// ranking, an unknown combination, a model file that cannot be read, is not an XGBoost
    /// `binary:logistic` model, or was trained on another feature vector (length or names).
    pub fn load(c: &DetectConf, base: &Path) -> Result<Detector, String> {
        let dir = c.check()?;
        let names = features::names();
        let mut models = Vec::new();
        let any = AnyScore {
            platt: c
                .detectors
                .iter()
                .map(|d| d.calibration.map_or(Ok(Platt::IDENTITY), Platt::new))
                .collect::<Result<_, _>>()?,
            combine: c
                .combine
                .as_deref()
                .map_or(Ok(Combine::Max), Combine::parse)?,
        };
        for (i, d) in c.detectors.iter().enumerate() {
            let at = format!("detector[{i}] ({})", d.kind);
            let path = base.join(&d.model);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("{at}.model: {}: {e}", path.display()))?;
            let model = Model::from_json(&text)
                .map_err(|e| format!("{at}.model: {}: {e}", path.display()))?;
            if model.num_feature != names.len() {
                return Err(format!(
                    "{at}.model: {}: trained on {} features, the Kestrel feature vector has {}",
                    path.display(),
                    model.num_feature,
                    names.len()
                ));
            }
            if let Some(k) = (0..names.len())
                .find(|&k| !model.feature_names.is_empty() && model.feature_names[k] != names[k])
            {
                return Err(format!(
                    "{at}.model: {}: feature {k} is `{}`, the Kestrel feature vector's is `{}`",
                    path.display(),
                    model.feature_names[k],
                    names[k]
                ));
            }
            models.push(Loaded {
                kind: d.kind.clone(),
                model,
                threshold: d.threshold,
            });
        }
        Ok(Detector {
            dir,
            qfis: c.qfis.clone(),
            map: QfiMap::default(),
            models,
            any,
            temporal: Temporal::default(),
            stats: DetectStats::default(),
        })
    }

    /// The QFI -> QID map of the UPF's queues (default: the 5QI map).
    pub fn set_qfi_map(&mut self, map: QfiMap) {
        self.map = map;
    }

    /// The detector kinds loaded, in order.
    pub fn kinds(&self) -> Vec<&str> {
        self.models.iter().map(|m| m.kind.as_str()).collect()
    }

    /// Score one exported window: the alarms it raises.
    pub fn on_message(
        &mut self,
        m: &super::export::SketchMsg,
        keys: &SessionKeys,
    ) -> Result<Vec<Alarm>, String> {
        let v = match MsgView::new(m) {
            Ok(v) => v,
            Err(e) => {
                self.stats.windows_refused += 1;
                return Err(e);
            }
        };
        Ok(self.score(&v, m.h.seq, m.h.window_ns, keys))
    }

    /// Score window `seq` of `v`, the QFIs' keys from `keys`.
    pub fn score(
        &mut self,
        v: &impl SketchView,
        seq: u64,
        window_ns: u64,
        keys: &SessionKeys,
    ) -> Vec<Alarm> {
        let t0 = Instant::now();
        let dir = usize::from(self.dir);
        let qfis = self.qfis.clone().unwrap_or_else(|| keys.qfis(self.dir));
        let port = features::port_context(v, dir);
        let mut alarms = Vec::new();
        for q in qfis {
            let qid = self.map.qid(q);
            let teids = keys.teids(self.dir, q);
            let base = features::qfi_base(v, dir, usize::from(qid), q, teids, &port);
            let x = self.temporal.extend(q, base);
            let mut margins = [0f64; KINDS.len()];
            for (m, z) in self.models.iter().zip(&mut margins) {
                *z = m.model.margin(&x);
                let p = probability(*z);
                self.stats.last_score.insert((m.kind.clone(), q), p);
                if p >= m.threshold {
                    *self.stats.alarms.entry((m.kind.clone(), q)).or_default() += 1;
                    self.stats.alarms_total += 1;
                    alarms.push(Alarm {
                        v: ALARM_VERSION,
                        kind: "alarm".into(),
                        seq,
                        window_ns,
                        detector: m.kind.clone(),
                        dir: self.dir,
                        qfi: q,
                        qid,
                        score: p,
                        threshold: m.threshold,
                        teids: top_teids(v, dir, usize::from(qid), q, teids),
                    });
                }
            }
            let any = self.any.of_margins(&margins[..self.models.len()]);
            self.stats.last_score.insert((ANY.into(), q), any);
        }
        let dt = t0.elapsed().as_secs_f64();
        let s = &mut self.stats;
        s.windows_scored += 1;
        s.scoring_s_total += dt;
        s.scoring_s_last = dt;
        s.scoring_s_max = s.scoring_s_max.max(dt);
        alarms
    }
}

/// The keys of (dir, qid, qfi) with the most bytes (estimates), largest first.
fn top_teids(v: &impl SketchView, dir: usize, qid: usize, qfi: u8, teids: &[u32]) -> Vec<u32> {
    let mut b: Vec<(u64, u32)> = teids
        .iter()
        .map(|&t| (v.query(dir, qid, t, qfi).bytes, t))
        .filter(|x| x.0 > 0)
        .collect();
    b.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    b.into_iter().take(ALARM_TEIDS).map(|x| x.1).collect()
}

/// The CBOR encoding of an alarm (one map, the fields of [`Alarm`]).
pub fn encode(a: &Alarm) -> Vec<u8> {
    super::export::encode(a)
}

/// Decode an alarm, refusing another kind or version.
pub fn decode(bytes: &[u8]) -> Result<Alarm, String> {
    let a: Alarm =
        ciborium::from_reader(bytes).map_err(|e| format!("alarm: not an alarm map: {e}"))?;
    if a.kind != "alarm" || a.v != ALARM_VERSION {
        return Err(format!(
            "alarm: kind `{}` version {}, want `alarm` {ALARM_VERSION}",
            a.kind, a.v
        ));
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alarm() -> Alarm {
        Alarm {
            v: ALARM_VERSION,
            kind: "alarm".into(),
            seq: 42,
            window_ns: 1_000_000_000,
            detector: "microburst".into(),
            dir: 0,
            qfi: 9,
            qid: 7,
            score: 0.93,
            threshold: 0.4,
            teids: vec![0x1001, 0x1002],
        }
    }

    #[test]
    fn alarms_round_trip_and_other_kinds_or_versions_are_refused() {
        let a = alarm();
        assert_eq!(decode(&encode(&a)).unwrap(), a);
        let e = decode(&encode(&Alarm { v: 2, ..alarm() })).unwrap_err();
        assert!(e.contains("version 2"), "{e}");
        let e = decode(&encode(&Alarm {
            kind: "kestrel".into(),
            ..alarm()
        }))
        .unwrap_err();
        assert!(e.contains("kind `kestrel`"), "{e}");
        assert!(decode(b"\xff\x00").unwrap_err().contains("not an alarm"));
    }

    #[test]
    fn config_checks_name_the_problem() {
        let c: DetectConf = toml::from_str(
            "qfis = [9, 70]\n[[detector]]\nkind = \"microburst\"\nmodel = \"m.json\"\nthreshold = 0.5\n",
        )
        .unwrap();
        assert!(c.check().unwrap_err().contains("QFI 70"));
        let c: DetectConf = toml::from_str("detector = []").unwrap();
        assert!(c.check().unwrap_err().contains("at least one"));
        let one = "[[detector]]\nkind = \"microburst\"\nmodel = \"m.json\"\nthreshold = 0.5\n";
        let c: DetectConf = toml::from_str(&format!("combine = \"mean\"\n{one}")).unwrap();
        assert!(c.check().unwrap_err().contains("`mean`"));
        let c: DetectConf = toml::from_str(&format!("{one}calibration = [0.0, 1.0]\n")).unwrap();
        let e = c.check().unwrap_err();
        assert!(e.contains("detector[0]") && e.contains("a > 0"), "{e}");
        let c: DetectConf = toml::from_str(&format!(
            "combine = \"noisy_or\"\n{one}calibration = [0.9, -0.5]\n"
        ))
        .unwrap();
        assert_eq!(c.check(), Ok(0));
        assert!(toml::from_str::<DetectConf>("detector = []\nextra = 1").is_err());
    }
}
