#!/usr/bin/env python3
"""Train the Kestrel evaluation's detectors (Kestrel, Saha et al., section V: one XGBoost
model per anomaly type) on the training runs' features that pg-kestrel-eval wrote.

Input, in --dir: train-<mode>.csv with columns run,seq,qfi,label,f0..fN (label: anomaly bits,
1 microburst, 2 congestion, 4 contention, 8 policy abuse).
Output, in --dir: model-<mode>-<kind>.json (XGBoost JSON model), thresholds.json (the
best-F1 threshold per mode and kind, chosen on out-of-fold predictions over the training
runs: two folds, the halves of every run), check-<mode>-<kind>.csv (up to 64 training vectors and
XGBoost's probabilities, for the Rust evaluator's 1e-6 check).

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


def fit(x, y):
    return xgb.train(PARAMS, xgb.DMatrix(x, label=y, feature_names=NAMES), num_boost_round=ROUNDS)


def proba(m, x):
    return m.predict(xgb.DMatrix(x, feature_names=NAMES))


def load(path):
    with open(path) as f:
        r = csv.reader(f)
        head = next(r)
        rows = [list(map(float, x)) for x in r]
    a = np.array(rows, dtype=np.float64)
    return head, a[:, 0].astype(int), a[:, 1], a[:, 3].astype(int), a[:, 4:].astype(np.float32)


def best_threshold(p, y):
    order = np.argsort(-p, kind="stable")
    ps, ys = p[order], y[order]
    pos = ys.sum()
    if pos == 0:
        return 0.5
    tp = np.cumsum(ys)
    fp = np.cumsum(1 - ys)
    f1 = 2 * tp / (tp + fp + pos)
    # Only at the last of equal scores (a threshold takes all ties).
    last = np.r_[ps[1:] != ps[:-1], True]
    i = int(np.argmax(np.where(last, f1, -1)))
    return float(ps[i])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--modes", default="kestrel,delta_smp,pm")
    a = ap.parse_args()
    thresholds = {}
    for mode in a.modes.split(","):
        global NAMES
        head, run, seq, label, x = load(os.path.join(a.dir, f"train-{mode}.csv"))
        NAMES = head[4:]
        runs = np.unique(run)
        thresholds[mode] = {}
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
                    oof[~tr] = proba(fit(x[tr], y[tr]), x[~tr])
            m = fit(x, y)
            if not folds_ok:
                # Too few episodes to split (short smoke runs): in-sample predictions.
                print(f"kestrel_train: {mode}/{kind}: threshold in-sample", file=sys.stderr)
                oof = proba(m, x)
            thresholds[mode][kind] = best_threshold(oof, y)
            m.save_model(os.path.join(a.dir, f"model-{mode}-{kind}.json"))
            n = min(64, len(y))
            pick = np.linspace(0, len(y) - 1, n).astype(int)
            pick = np.unique(np.r_[pick, np.flatnonzero(y)[:16]])
            p = proba(m, x[pick])
            with open(os.path.join(a.dir, f"check-{mode}-{kind}.csv"), "w") as f:
                w = csv.writer(f)
                for i, pi in zip(pick, p):
                    w.writerow([repr(float(pi))] + [repr(float(v)) for v in x[i]])
    with open(os.path.join(a.dir, "thresholds.json"), "w") as f:
        json.dump({"xgboost": xgb.__version__, "params": PARAMS, "rounds": ROUNDS, "thresholds": thresholds}, f, indent=1)


if __name__ == "__main__":
    main()
