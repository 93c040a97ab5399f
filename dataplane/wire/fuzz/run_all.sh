#!/usr/bin/env bash
# Run every fuzz target in turn for SECONDS (default 60) each, one fuzzer at a time.
#
#   dataplane/wire/fuzz/run_all.sh [SECONDS] [TARGET...]
#
# Each target's committed seeds are copied into the scratch corpus/<target>/ (gitignored),
# which libFuzzer then grows. Logs go to corpus/logs/<target>.log; crashes to
# artifacts/<target>/. Prints "target runs seconds crashes" per target at the end.
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
mkdir -p corpus/logs
cargo +nightly fuzz build -a >/dev/null 2>&1 || cargo +nightly fuzz build -a || exit 1
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    cp -n "seeds/$t"/* "corpus/$t/" 2>/dev/null || true
    cargo +nightly fuzz run -a "$t" "corpus/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 \
        >"corpus/logs/$t.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "corpus/logs/$t.log" | tail -1)
    took=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "corpus/logs/$t.log" | tail -1)
    crashes=$(ls "artifacts/$t" 2>/dev/null | grep -c -E '^(crash|oom|timeout|leak)-' || true)
    echo "$t ${runs:-?} ${took:-?} $crashes rc=$rc"
done
