#!/usr/bin/env bash
# Alternating runs of two builds of the Kestrel criterion bench (A = before, B = after) that
# hold up on a loaded machine: each run takes 300 samples of `plain_cms_3x512` and
# `kestrel_3x512` and prints, per case, the per-iteration time (us per 4,096 packets) of the
# fastest sample and of the 10th percentile, computed from criterion's raw `sample.json`.
# A sample that another process preempted is slow; the fastest ones are the ones that ran
# alone, so min/p10 move by 1-2 % between runs at load average 4-6 where criterion's middle
# estimate moves by 30 % (perf/results/kestrel.md, round 14).
#   perf/scripts/kestrel-bench-ab.sh A B [pairs]
# e.g. perf/scripts/kestrel-bench-ab.sh /tmp/kestrel-bench-main target/release/deps/kestrel-<hash> 4
set -euo pipefail
a=$(realpath "$1") b=$(realpath "$2") pairs=${3:-4}
cd "$(dirname "$0")/.."
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
run() {
  rm -rf "${home:?}/$2"
  CRITERION_HOME="$home/$2" "$1" --bench --warm-up-time 1 --measurement-time 3 --sample-size 300 \
    --noplot 'kestrel_update/(plain_cms_3x512$|kestrel_3x512$)' > /dev/null 2>&1
  python3 - "$home/$2" << 'PY'
import json, sys
out = []
for case in ["kestrel_3x512", "plain_cms_3x512"]:
    d = json.load(open(f"{sys.argv[1]}/kestrel_update/{case}/new/sample.json"))
    per = sorted(t / i / 1000 for t, i in zip(d["times"], d["iters"]))
    out.append((per[0], per[len(per) // 10]))
(k0, k10), (c0, c10) = out
print(f"kestrel min {k0:.2f} p10 {k10:.2f} | cms min {c0:.2f} p10 {c10:.2f} | "
      f"ratio min {k0 / c0:.3f} p10 {k10 / c10:.3f}")
PY
}
for ((p = 0; p < pairs; p++)); do
  echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) A $(run "$a" a)"
  echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) B $(run "$b" b)"
done
