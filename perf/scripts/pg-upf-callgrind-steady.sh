#!/usr/bin/env bash
# pg-upf-callgrind.sh's count (the worker's own DPDK-mbuf copy of the UPF stage, pg-upf's real
# forwarding loop under callgrind, `Upf::process` only, cache simulation on) in the steady
# state: every session's first packet takes the general path (`execute`: the meter is
# created), and at 100k sessions those are 100,000 of the 1.5-2 M packets valgrind gets
# through, a share that moves with the run's packet count (i.e. with the machine's load). Here
# callgrind's counts are dumped every DUMP_SECONDS (`callgrind_control -d`) and only the dumps
# after the last `execute` call are counted; packets = 32 x the calls of `Upf::process` (the
# feed's batches are full, `--burst 32`).
#   perf/scripts/pg-upf-callgrind-steady.sh BIN [case...]     case = dir,inner_bytes,sessions
# LL_BYTES (default 1048576: this machine's 1 MiB L2 as the last level), SECONDS_PER_RUN
# (default 20), ARGS (extra pg-upf arguments).
set -euo pipefail
bin=$1
shift
cases=("${@:-ul,64,100000}")
secs=${SECONDS_PER_RUN:-20}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for c in "${cases[@]}"; do
  rm -f "$dir"/cg*
  valgrind --tool=callgrind --cache-sim=yes "--LL=${LL_BYTES:-1048576},16,64" --D1=49152,12,64 \
    --toggle-collect='*Upf*process*' --callgrind-out-file="$dir/cg" "$bin" --case "$c" \
    --seconds "$secs" --core 1 --burst 32 --inject 32 ${ARGS:-} > "$dir/out" 2> "$dir/err" &
  pid=$!
  while kill -0 $pid 2>/dev/null; do
    sleep "${DUMP_SECONDS:-6}"
    callgrind_control -d $pid > /dev/null 2>&1 || true
  done
  wait $pid || { cat "$dir/err" >&2; exit 1; }
  python3 - "$c" "$dir/cg" <<'PY'
import glob, re, sys
case, base = sys.argv[1:]
parts = sorted(glob.glob(base + '.*'), key=lambda p: int(p.rsplit('.', 1)[1])) + [base]
rows, events = [], []
for p in parts:
    text = open(p).read()
    m = re.search(r"^(?:summary|totals): (.*)$", text, re.M)
    if not m:
        continue
    events = re.search(r"^events: (.*)$", text, re.M).group(1).split()
    names, cur, calls = {}, None, {'process': 0, 'execute': 0}
    for l in text.split('\n'):
        mm = re.match(r'c?fn=\((\d+)\)(?: (.*))?', l)
        if mm:
            if mm.group(2):
                names[mm.group(1)] = mm.group(2)
            cur = names.get(mm.group(1), '') if l.startswith('cfn') else None
        elif l.startswith('calls=') and cur:
            n = int(l.split()[0][6:])
            if 'Upf as peregrine_dataplane::runtime::stage::Stage' in cur:
                calls['process'] += n
            if 'enforce' in cur and 'execute' in cur:
                calls['execute'] += n
    rows.append(([int(v) for v in m.group(1).split()], calls))
last = max([i for i, r in enumerate(rows) if r[1]['execute'] > 0], default=-1)
steady = [r for r in rows[last + 1:] if r[1]['process'] > 0]
pk = 32 * sum(r[1]['process'] for r in steady)
if pk == 0:
    sys.exit(f"{case}: no dump after the last first packet; raise SECONDS_PER_RUN")
tot = [sum(r[0][k] for r in steady) for k in range(len(events))]
per = "  ".join(f"{e} {v / pk:.2f}" for e, v in zip(events, tot) if e in ('Ir', 'D1mr', 'D1mw', 'DLmr'))
print(f"{case}: {per}  (per packet, steady state: {pk} packets in {len(steady)} dumps)")
PY
done
