//! Inference over an XGBoost model saved as JSON (`Booster.save_model("m.json")`, the
//! format of XGBoost 2.x): a sum of regression trees plus the base margin, through the
//! logistic link for `binary:logistic`. Splits compare the feature as `f32` with the split
//! condition (`x < c` goes left), a missing (NaN) feature takes the node's default
//! direction, as XGBoost's CPU predictor does. The evaluation (`pg-kestrel-eval`) and the
//! daemon's online detector (`super::detect`) both score with this code.

use serde_json::Value;

/// One tree in flat arrays (XGBoost's own layout).
#[derive(Debug, Clone)]
struct Tree {
    left: Vec<i32>,
    right: Vec<i32>,
    feature: Vec<u32>,
    cond: Vec<f32>,
    default_left: Vec<bool>,
}

/// A binary-logistic gradient-boosted tree ensemble.
#[derive(Debug, Clone)]
pub struct Model {
    trees: Vec<Tree>,
    base_margin: f64,
    pub num_feature: usize,
    /// The feature names the model was trained with (`learner.feature_names`; empty when
    /// it was trained without names).
    pub feature_names: Vec<String>,
}

fn arr<'a>(v: &'a Value, k: &str) -> Result<&'a Vec<Value>, String> {
    v.get(k)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("tree: missing array `{k}`"))
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_bool().map(|b| if b { 1.0 } else { 0.0 }))
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn nums(v: &Value, k: &str) -> Result<Vec<f64>, String> {
    arr(v, k)?
        .iter()
        .map(|x| num(x).ok_or_else(|| format!("tree: `{k}` holds a non-number")))
        .collect()
}

impl Model {
    /// Parse the JSON text of a saved model.
    pub fn from_json(text: &str) -> Result<Model, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("model: not JSON: {e}"))?;
        let l = v.get("learner").ok_or("model: no `learner`")?;
        let obj = l
            .pointer("/objective/name")
            .and_then(Value::as_str)
            .ok_or("model: no objective")?;
        if obj != "binary:logistic" {
            return Err(format!("model: objective {obj}, want binary:logistic"));
        }
        let p = l
            .get("learner_model_param")
            .ok_or("model: no learner_model_param")?;
        let base = p
            .get("base_score")
            .and_then(num)
            .ok_or("model: no base_score")?;
        if !(base > 0.0 && base < 1.0) {
            return Err(format!("model: base_score {base} not a probability"));
        }
        let num_feature = p
            .get("num_feature")
            .and_then(num)
            .ok_or("model: no num_feature")? as usize;
        let feature_names: Vec<String> = match l.get("feature_names") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(String::from)
                        .ok_or("model: `feature_names` holds a non-string")
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("model: `feature_names` is not an array".into()),
        };
        if !feature_names.is_empty() && feature_names.len() != num_feature {
            return Err(format!(
                "model: {} feature names for {num_feature} features",
                feature_names.len()
            ));
        }
        let trees = l
            .pointer("/gradient_booster/model/trees")
            .and_then(Value::as_array)
            .ok_or("model: no trees (gbtree booster expected)")?;
        let mut out = Vec::with_capacity(trees.len());
        for t in trees {
            let left: Vec<i32> = nums(t, "left_children")?
                .iter()
                .map(|&x| x as i32)
                .collect();
            let right: Vec<i32> = nums(t, "right_children")?
                .iter()
                .map(|&x| x as i32)
                .collect();
            let feature: Vec<u32> = nums(t, "split_indices")?
                .iter()
                .map(|&x| x as u32)
                .collect();
            let cond: Vec<f32> = nums(t, "split_conditions")?
                .iter()
                .map(|&x| x as f32)
                .collect();
            let default_left: Vec<bool> =
                nums(t, "default_left")?.iter().map(|&x| x != 0.0).collect();
            let n = left.len();
            if [right.len(), feature.len(), cond.len(), default_left.len()]
                .iter()
                .any(|&m| m != n)
                || n == 0
            {
                return Err("tree: arrays of different lengths".into());
            }
            for i in 0..n {
                let (a, b) = (left[i], right[i]);
                if a != -1 {
                    let ok = |c: i32| c > i as i32 && (c as usize) < n;
                    if !ok(a) || !ok(b) || feature[i] as usize >= num_feature {
                        return Err(format!("tree: node {i} has bad children or feature"));
                    }
                }
            }
            out.push(Tree {
                left,
                right,
                feature,
                cond,
                default_left,
            });
        }
        Ok(Model {
            trees: out,
            base_margin: (base / (1.0 - base)).ln(),
            num_feature,
            feature_names,
        })
    }

    /// The margin (log-odds) of `x` (`num_feature` values; NaN = missing).
    pub fn margin(&self, x: &[f32]) -> f64 {
        let mut m = 0f32;
        for t in &self.trees {
            let mut i = 0usize;
            while t.left[i] != -1 {
                let v = x.get(t.feature[i] as usize).copied().unwrap_or(f32::NAN);
                let go_left = if v.is_nan() {
                    t.default_left[i]
                } else {
                    v < t.cond[i]
                };
                i = if go_left { t.left[i] } else { t.right[i] } as usize;
            }
            m += t.cond[i];
        }
        f64::from(m) + self.base_margin
    }

    /// The probability of the positive class.
    pub fn predict(&self, x: &[f32]) -> f64 {
        probability(self.margin(x))
    }
}

/// The logistic link: the probability of a margin (what [`Model::predict`] returns).
pub fn probability(margin: f64) -> f64 {
    1.0 / (1.0 + (-margin).exp())
}
