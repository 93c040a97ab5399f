#!/usr/bin/env bash
# Instructions (and, with CACHE=1, simulated cache misses) per packet of the UPF stage's copy that
# the worker runs, the DPDK-mbuf one: pg-upf's real forwarding loop (`--case`, net_ring vdevs,
# the feed) under callgrind, counting only inside `Upf::process` (WHAT=worker: the whole
# `Worker::process`, feed and ring I/O included), divided by the packets the worker received.
# Load-independent, unlike the paired wall-clock rounds of pg-upf-ab.sh; `--stage` and criterion
# count the other copy (the test buffer's), which the compiler inlines differently.
#   perf/scripts/pg-upf-callgrind.sh BIN [case...]     case = dir,inner_bytes,sessions
# e.g. perf/scripts/pg-upf-callgrind.sh target/release/pg-upf ul,64,10000 dl,64,10000
# CACHE=1: add D1 / LL misses (LL=32 MiB L3 model; LL_BYTES=1048576 models the 1 MiB L2).
# SECONDS_PER_RUN (default 4): wall-clock seconds of the run; the count is per packet whatever
# the number of packets valgrind gets through. ARGS: extra pg-upf arguments (e.g. '--feed stored').
set -euo pipefail
bin=$1
shift
cases=("${@:-ul,64,10000}")
secs=${SECONDS_PER_RUN:-4}
toggle='*Upf*process*'
[[ ${WHAT:-upf} == worker ]] && toggle='*Worker*process*'
sim=()
[[ ${CACHE:-0} == 1 ]] && sim=(--cache-sim=yes "--LL=${LL_BYTES:-33554432},16,64" --D1=49152,12,64)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for c in "${cases[@]}"; do
  valgrind --tool=callgrind "${sim[@]}" --toggle-collect="$toggle" \
    --callgrind-out-file="$dir/cg" "$bin" --case "$c" --seconds "$secs" --core 1 --burst 32 \
    --inject 32 ${ARGS:-} > "$dir/out" 2> "$dir/err" || { cat "$dir/err" >&2; exit 1; }
  python3 - "$c" "$dir/cg" "$dir/out" <<'PY'
import re, sys
case, cg, out = sys.argv[1:]
text = open(cg).read()
events = re.search(r"^events: (.*)$", text, re.M).group(1).split()
totals = [int(v) for v in re.search(r"^summary: (.*)$", text, re.M).group(1).split()]
rx = int(open(out).read().split()[3])
per = "  ".join(f"{e} {v / rx:.2f}" for e, v in zip(events, totals))
print(f"{case}: {per}  (per packet, {rx} packets)")
PY
done
