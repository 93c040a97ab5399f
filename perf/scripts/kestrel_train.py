#!/usr/bin/env python3
"""Train the Kestrel evaluation's detectors (Kestrel, Saha et al., section V: one XGBoost
model per anomaly type) on the training runs' features that pg-kestrel-eval wrote.

Input, in --dir: train-<mode>.csv with columns run,seq,qfi,label,f0..fN (label: anomaly bits,
1 microburst, 2 congestion, 4 contention, 8 policy abuse). With --unit key (the
per-(window, TEID, QFI) unit): train-key-<mode>.csv with columns run,seq,teid,qfi,label,weight,
f0..fN (weight: the negative subsampling's factor), written as model-key-*, check-key-* and
thresholds-key.json, trained with the hist method (a few hundred thousand rows).
Output, in --dir: model-<mode>-<kind>.json (XGBoost JSON model), thresholds.json (the
best-F1 threshold per mode and kind, chosen on out-of-fold predictions over the training
runs: two folds, the halves of every run), check-<mode>-<kind>.csv (up to 64 training vectors and
XGBoost's probabilities, for the Rust evaluator's 1e-6 check); the "any anomaly" score per
mode in thresholds.json's "combination" (Platt scaling per detector fitted on its out-of-fold
probabilities, and the combination of the calibrated probabilities with the best out-of-fold
any-anomaly AUPRC over the training runs) and check-<mode>-any.csv (its check vectors).

Deterministic: fixed seeds, exact tree method, one thread.
"""
import argparse
import csv
import json
import os
import sys

try:
    import numpy as np
    import xgboost as xgb
except ImportError as e:  # pragma: no cover
    sys.exit(f"kestrel_train: {e}; run scripts/deps.sh --test (pinned xgboost from PyPI)")

KINDS = ["microburst", "congestion", "contention", "policy_abuse"]
ROUNDS = 120
PARAMS = dict(
    max_depth=4,
    eta=0.1,
    colsample_bytree=0.8,
    tree_method="exact",
    seed=0,
    nthread=1,
    objective="binary:logistic",
)


# Feature names (the CSV header) go into the saved model, so the collector can refuse a
# model trained on another feature vector by name, not only by length.
NAMES = None


def fit(x, y, w=None, params=PARAMS):
    d = xgb.DMatrix(x, label=y, weight=w, feature_names=NAMES)
    return xgb.train(params, d, num_boost_round=ROUNDS)


def proba(m, x):
    return m.predict(xgb.DMatrix(x, feature_names=NAMES))


META = ("run", "seq", "teid", "qfi", "label", "weight")


def load(path):
    """(feature names, run, seq, label, weight, features); the meta columns come first."""
    with open(path) as f:
        r = csv.reader(f)
        head = next(r)
        a = np.loadtxt(f, delimiter=",", dtype=np.float64, ndmin=2)
    nm = 0
    while nm < len(head) and head[nm] in META:
        nm += 1
    col = {h: i for i, h in enumerate(head[:nm])}
    w = a[:, col["weight"]] if "weight" in col else np.ones(len(a))
    label = a[:, col["label"]].astype(int)
    return head[nm:], a[:, col["run"]].astype(int), a[:, col["seq"]], label, w, a[:, nm:].astype(np.float32)


def best_threshold(p, y, w=None):
    if w is None:
        w = np.ones(len(y))
    order = np.argsort(-p, kind="stable")
    ps, ys, ws = p[order], y[order], w[order]
    pos = (ys * ws).sum()
    if pos == 0:
        return 0.5
    tp = np.cumsum(ys * ws)
    fp = np.cumsum((1 - ys) * ws)
    f1 = 2 * tp / (tp + fp + pos)
    # Only at the last of equal scores (a threshold takes all ties).
    last = np.r_[ps[1:] != ps[:-1], True]
    i = int(np.argmax(np.where(last, f1, -1)))
    return float(ps[i])


def logit(p):
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-12, 1 - 1e-12)
    return np.log(p / (1 - p))


def platt(z, y, w):
    """Platt scaling (Platt 1999): [a, b] of the weighted logistic regression of the
    detector's labels y on its log-odds z, with Platt's smoothed targets ((N+ + 1) / (N+ + 2)
    for a positive, 1 / (N- + 2) for a negative; finite even when z separates y), by
    Newton's method with step halving."""
    npos, nneg = float((w * y).sum()), float((w * (1 - y)).sum())
    t = np.where(y == 1, (npos + 1) / (npos + 2), 1 / (nneg + 2))
    X = np.c_[z, np.ones(len(z))]

    def loss(b):
        m = X @ b
        return float((w * (np.logaddexp(0, m) - t * m)).sum())

    b = np.array([1.0, 0.0])
    cur = loss(b)
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(X @ b, -500, 500)))
        g = X.T @ (w * (p - t))
        h = (X * (w * p * (1 - p))[:, None]).T @ X + 1e-9 * np.eye(2)
        step = np.linalg.solve(h, g)
        f = 1.0
        while f > 1e-10 and loss(b - f * step) > cur:
            f /= 2
        if f <= 1e-10:
            break
        b = b - f * step
        new = loss(b)
        if cur - new < 1e-12 * max(1.0, abs(cur)):
            cur = new
            break
        cur = new
    if not (np.isfinite(b).all() and b[0] > 0):
        return [1.0, 0.0]
    return [float(b[0]), float(b[1])]


def average_precision(y, s, w):
    """Weighted average precision, ties taken together (perf/src/kestrel_eval/metrics.rs)."""
    o = np.argsort(-s, kind="stable")
    ys, ss, ws = y[o].astype(np.float64), s[o], w[o]
    tp, fp = np.cumsum(ys * ws), np.cumsum((1 - ys) * ws)
    last = np.r_[ss[1:] != ss[:-1], True]
    tp, fp = tp[last], fp[last]
    if tp[-1] == 0:
        return float("nan")
    r, p = tp / tp[-1], tp / (tp + fp)
    return float(np.sum(np.diff(np.r_[0.0, r]) * p))


def any_score(z, cal, combine):
    """The "any anomaly" score of the detectors' margins z (rows x kinds)
    (control/src/kestrel/combine.rs)."""
    m = z * np.array([c[0] for c in cal]) + np.array([c[1] for c in cal])
    q = 1 / (1 + np.exp(-np.clip(m, -500, 500)))
    return q.max(axis=1) if combine == "max" else 1 - np.prod(1 - q, axis=1)


# The combinations tried, in order of preference on a tie: the largest raw probability (no
# calibration), the largest and the noisy-OR of the Platt-calibrated probabilities.
COMBINATIONS = [("raw", "max"), ("platt", "max"), ("platt", "noisy_or")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--modes", default="kestrel,delta_smp,pm")
    ap.add_argument("--unit", default="qfi", choices=["qfi", "key"])
    a = ap.parse_args()
    px = "key-" if a.unit == "key" else ""
    params = dict(PARAMS, tree_method="hist") if a.unit == "key" else PARAMS
    thresholds = {}
    combination = {}
    for mode in a.modes.split(","):
        global NAMES
        NAMES, run, seq, label, wt, x = load(os.path.join(a.dir, f"train-{px}{mode}.csv"))
        runs = np.unique(run)
        thresholds[mode] = {}
        oofs = np.zeros((len(label), len(KINDS)))
        models = []
        for k, kind in enumerate(KINDS):
            y = (label >> k) & 1
            if y.sum() == 0 or y.sum() == len(y):
                sys.exit(f"kestrel_train: {mode}/{kind}: training runs have one class only")
            oof = np.zeros(len(y))
            # Two folds: the first and the second half of every run (every anomaly type
            # appears in both halves; whole runs per fold could leave a type in one fold).
            fold = np.zeros(len(y), dtype=bool)
            for r_ in runs:
                at = run == r_
                fold[at] = seq[at] < np.median(seq[at])
            folds_ok = all(y[tr].sum() > 0 and y[~tr].sum() > 0 for tr in (fold, ~fold))
            if folds_ok:
                for tr in (fold, ~fold):
                    oof[~tr] = proba(fit(x[tr], y[tr], wt[tr], params), x[~tr])
            m = fit(x, y, wt, params)
            if not folds_ok:
                # Too few episodes to split (short smoke runs): in-sample predictions.
                print(f"kestrel_train: {mode}/{kind}: threshold in-sample", file=sys.stderr)
                oof = proba(m, x)
            thresholds[mode][kind] = best_threshold(oof, y, wt)
            oofs[:, k] = oof
            models.append(m)
            m.save_model(os.path.join(a.dir, f"model-{px}{mode}-{kind}.json"))
            n = min(64, len(y))
            pick = np.linspace(0, len(y) - 1, n).astype(int)
            pick = np.unique(np.r_[pick, np.flatnonzero(y)[:16]])
            p = proba(m, x[pick])
            with open(os.path.join(a.dir, f"check-{px}{mode}-{kind}.csv"), "w") as f:
                w = csv.writer(f)
                for i, pi in zip(pick, p):
                    w.writerow([repr(float(pi))] + [repr(float(v)) for v in x[i]])
        # The out-of-fold probabilities (analysis).
        np.savetxt(os.path.join(a.dir, f"oof-{px}{mode}.csv"),
                   np.c_[run, seq, label, wt, oofs], delimiter=",",
                   header="run,seq,label,weight," + ",".join(KINDS), comments="")
        # The "any anomaly" score: Platt scaling per detector fitted on its out-of-fold
        # probabilities, then the combination with the best out-of-fold any-anomaly AUPRC
        # over every training run (the same rule for every mode, training runs only).
        z = logit(oofs)
        fitted = [platt(z[:, k], (label >> k) & 1, wt) for k in range(len(KINDS))]
        anyy = (label != 0).astype(np.float64)
        tried = {}
        for cal_name, comb in COMBINATIONS:
            cal = fitted if cal_name == "platt" else [[1.0, 0.0]] * len(KINDS)
            tried[f"{cal_name}_{comb}"] = (average_precision(anyy, any_score(z, cal, comb), wt), cal, comb)
        best = max(tried, key=lambda n: tried[n][0])  # the first of equal ones
        _, cal, comb = tried[best]
        combination[mode] = {
            "chosen": best,
            "combine": comb,
            "calibration": dict(zip(KINDS, cal)),
            "oof_auprc": {n: v[0] for n, v in tried.items()},
        }
        # Check vectors of the any-anomaly score (XGBoost's margins, the chosen combination).
        n = min(64, len(label))
        pick = np.unique(np.r_[np.linspace(0, len(label) - 1, n).astype(int), np.flatnonzero(label)[:16]])
        dm = xgb.DMatrix(x[pick], feature_names=NAMES)
        zm = np.stack([mk.predict(dm, output_margin=True).astype(np.float64) for mk in models], axis=1)
        with open(os.path.join(a.dir, f"check-{px}{mode}-any.csv"), "w") as f:
            w = csv.writer(f)
            for i, pi in zip(pick, any_score(zm, cal, comb)):
                w.writerow([repr(float(pi))] + [repr(float(v)) for v in x[i]])
    suffix = "-key" if a.unit == "key" else ""
    with open(os.path.join(a.dir, f"thresholds{suffix}.json"), "w") as f:
        json.dump({"xgboost": xgb.__version__, "params": params, "rounds": ROUNDS, "thresholds": thresholds,
                   "combination": combination}, f, indent=1)


if __name__ == "__main__":
    main()
