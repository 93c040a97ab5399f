#!/usr/bin/env bash
# Instructions (and, with CACHE=1, simulated cache misses) per packet of the UPF stage's copy that
# the worker runs, the DPDK-mbuf one: pg-upf's real forwarding loop (`--case`, net_ring vdevs,
# the feed) under callgrind, counting only inside `Upf::process` (WHAT=worker: the whole
# `Worker::process`, feed and ring I/O included). Load-independent, unlike the paired
# wall-clock rounds of pg-upf-ab.sh; `--stage` and criterion count the other copy (the test
# buffer's), which the compiler inlines differently.
#
# Steady state only: callgrind is asked for a dump every DUMP_EVERY seconds (default 2); the
# dumps that start before the feed has cycled twice through the sessions (each session's first
# packets, the warm-up) are left out, the rest summed. Packets = 32 x the calls of `Upf::process` in
# those dumps (the harness's batches are full; checked against the packets pg-upf reports).
#   perf/scripts/pg-upf-callgrind.sh BIN [case...]     case = dir,inner_bytes,sessions
# e.g. perf/scripts/pg-upf-callgrind.sh target/release/pg-upf ul,64,10000 dl,64,10000
# CACHE=1: add D1 / LL misses (LL=32 MiB L3 model; LL_BYTES=1048576 models the 1 MiB L2).
# SECONDS_PER_RUN (default 6): pg-upf's measured seconds (plus its 1 s warm-up and the set-up).
# ARGS: extra pg-upf arguments (e.g. '--feed stored').
set -euo pipefail
bin=$1
shift
cases=("${@:-ul,64,10000}")
secs=${SECONDS_PER_RUN:-6}
every=${DUMP_EVERY:-2}
toggle='*Upf*process*'
[[ ${WHAT:-upf} == worker ]] && toggle='*Worker*process*'
sim=()
[[ ${CACHE:-0} == 1 ]] && sim=(--cache-sim=yes "--LL=${LL_BYTES:-33554432},16,64" --D1=49152,12,64)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for c in "${cases[@]}"; do
  rm -f "$dir"/cg*
  valgrind --tool=callgrind "${sim[@]}" --toggle-collect="$toggle" \
    --callgrind-out-file="$dir/cg" "$bin" --case "$c" --seconds "$secs" --core 1 --burst 32 \
    --inject 32 ${ARGS:-} > "$dir/out" 2> "$dir/err" &
  pid=$!
  while sleep "$every" && kill -0 "$pid" 2> /dev/null; do
    callgrind_control -d "$pid" > /dev/null 2>&1 || true
  done
  wait "$pid" || { cat "$dir/err" >&2; exit 1; }
  python3 - "$c" "$dir" <<'PY'
import glob, re, sys
case, d = sys.argv[1:]
def part(f):
    m = re.search(r"\.(\d+)$", f)
    return int(m.group(1)) if m else 1 << 30  # the final dump comes last
dumps = []
for f in sorted(glob.glob(f"{d}/cg*"), key=part):
    text = open(f).read()
    events = re.search(r"^events: (.*)$", text, re.M).group(1).split()
    totals = [int(v) for v in re.search(r"^summary: (.*)$", text, re.M).group(1).split()]
    totals += [0] * (len(events) - len(totals))  # callgrind leaves trailing zero counts out
    ids = {m.group(1) for m in re.finditer(r"^c?fn=\((\d+)\) <peregrine_dataplane::upf::stage::Upf as [^\n]*>::process$", text, re.M)}
    calls = sum(int(m.group(2)) for m in re.finditer(r"^cfn=\((\d+)\)[^\n]*\ncalls=(\d+)", text, re.M) if m.group(1) in ids)
    dumps.append((events, totals, calls))
rx = int(open(f"{d}/out").read().split()[3])
all_calls = sum(c for _, _, c in dumps)
if all_calls * 32 != rx:
    sys.exit(f"{case}: {rx} packets received but {all_calls} calls of Upf::process: batches not full")
sessions = int(case.split(",")[2])
busy, seen = [], 0
for x in dumps:
    if seen >= 2 * sessions and x[2] > 0:
        busy.append(x)
    seen += 32 * x[2]
if not busy:
    sys.exit(f"{case}: no dump after the warm-up; raise SECONDS_PER_RUN")
events = busy[0][0]
pkts = 32 * sum(c for _, _, c in busy)
sums = [sum(t[i] for _, t, _ in busy) for i in range(len(events))]
per = "  ".join(f"{e} {v / pkts:.2f}" for e, v in zip(events, sums))
print(f"{case}: {per}  (per packet, steady state: {pkts} of {rx} packets, {len(busy)} dumps)")
PY
done
