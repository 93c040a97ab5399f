#!/usr/bin/env bash
# Paired alternating rounds of two pg-upf binaries (A = before, B = after) on one case each,
# in one session, so machine load hits both alike. Prints each round and the median of the
# per-round B/A ratios.
#   perf/scripts/pg-upf-ab.sh A B [rounds] [case...]     case = dir,inner_bytes,sessions
# e.g. perf/scripts/pg-upf-ab.sh /tmp/pg-upf-before target/release/pg-upf 9 ul,64,10000 dl,64,10000
# ARGS_A / ARGS_B: extra arguments for one side, e.g. the same binary with both feeds:
#   ARGS_A='--feed stored' ARGS_B='--feed patched' perf/scripts/pg-upf-ab.sh P P 7 ul,64,100000
set -euo pipefail
a=$1 b=$2 rounds=${3:-7}
shift 3 || shift $#
cases=("${@:-ul,64,10000}")
secs=${SECONDS_PER_ROUND:-1.5}
run() { "$1" --case "$2" --seconds "$secs" --core 1 --burst 32 --inject 32 $3 | awk '{print $1}'; }
for c in "${cases[@]}"; do
  ratios=()
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2)); then pb=$(run "$b" "$c" "${ARGS_B:-}"); pa=$(run "$a" "$c" "${ARGS_A:-}"); else pa=$(run "$a" "$c" "${ARGS_A:-}"); pb=$(run "$b" "$c" "${ARGS_B:-}"); fi
    ratio=$(python3 -c "print(f'{$pb/$pa:.3f}')")
    ratios+=("$ratio")
    printf '%s round %d: A %.2f Mpps  B %.2f Mpps  B/A %s\n' "$c" "$r" "$(python3 -c "print($pa/1e6)")" "$(python3 -c "print($pb/1e6)")" "$ratio"
  done
  printf '%s median B/A over %d rounds: %s (load average now: %s)\n' "$c" "$rounds" \
    "$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
done
