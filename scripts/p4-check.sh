#!/usr/bin/env bash
# The P4 twin's checks in one command (issue 16):
#  1. structural check: every table/action/parameter/extern/header field the generator writes
#     is declared in the P4 sources (always runs; a declaration scan, not a compile);
#  2. entries generated for examples/quickstart.toml and, for the TNA telemetry program
#     (Kestrel, fridge, DTA reporter), examples/p4-telemetry.toml (always runs);
#  3. with p4test: every TNA program (p4/tna/*.p4: upf, upf_telemetry, int_transit) compiled
#     with `p4test --std p4-16 -D__TARGET_TOFINO__=1`, and upf_telemetry again with
#     -DPG_KESTREL_ONE_BANK
#     (P4C_TNA_INCLUDE: the directory holding tna.p4, if p4c does not find it itself);
#  4. with p4c-bm2-ss: the v1model twin compiled;
#  5. with simple_switch + simple_switch_CLI: the differential test, the quickstart pcaps
#     through simple_switch (pcap-file mode) loaded with the generated entries and through
#     `peregrine run`, outputs compared packet by packet (p4/scripts/pcap_diff.py; every
#     expected difference is a v1model limit listed in p4/README.md).
# Tools are taken from $P4C_BIN_DIR, else PATH. A missing tool prints why its step is skipped;
# the script then passes (CI has no P4 toolchain).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${P4_OUT:-target/p4}
mkdir -p "$out"

tool() {
    if [ -n "${P4C_BIN_DIR:-}" ] && [ -x "$P4C_BIN_DIR/$1" ]; then
        echo "$P4C_BIN_DIR/$1"
    else
        command -v "$1" || true
    fi
}

cargo build -q -p peregrine-p4gen --bin peregrine-p4
gen=target/debug/peregrine-p4
"$gen" check --p4-dir p4
"$gen" entries --config examples/quickstart.toml --out-dir "$out" --int-namespace 1
"$gen" entries --config examples/p4-telemetry.toml --out-dir "$out/telemetry"

p4test=$(tool p4test)
if [ -z "$p4test" ]; then
    echo "p4-check: SKIP TNA compile: p4test not found (set P4C_BIN_DIR)"
else
    for f in p4/tna/*.p4; do
        echo "p4-check: p4test $f"
        "$p4test" --std p4-16 -D__TARGET_TOFINO__=1 ${P4C_TNA_INCLUDE:+-I "$P4C_TNA_INCLUDE"} "$f"
    done
    echo "p4-check: p4test -DPG_KESTREL_ONE_BANK p4/tna/upf_telemetry.p4"
    "$p4test" --std p4-16 -D__TARGET_TOFINO__=1 -DPG_KESTREL_ONE_BANK \
        ${P4C_TNA_INCLUDE:+-I "$P4C_TNA_INCLUDE"} p4/tna/upf_telemetry.p4
fi

bm2=$(tool p4c-bm2-ss)
if [ -z "$bm2" ]; then
    echo "p4-check: SKIP v1model compile: p4c-bm2-ss not found (set P4C_BIN_DIR)"
    echo "p4-check: SKIP differential test: needs the compiled v1model twin"
    exit 0
fi
echo "p4-check: p4c-bm2-ss p4/v1model/upf_int.p4"
"$bm2" --std p4-16 -o "$out/upf_int.json" p4/v1model/upf_int.p4

ss=$(tool simple_switch)
cli=$(tool simple_switch_CLI)
if [ -z "$ss" ] || [ -z "$cli" ]; then
    echo "p4-check: SKIP differential test: simple_switch / simple_switch_CLI not found"
    exit 0
fi

# Software side: the daemon on the same config and pcaps.
cargo build -q --release -p peregrine --bin peregrine
target/release/peregrine run --config examples/quickstart.toml >/dev/null
# Twin side: simple_switch reads <iface>_in.pcap and writes <iface>_out.pcap; ports are the
# config's indices (n3 = 0, n6 = 1), the CPU port is 255.
work=$(mktemp -d)
trap 'rm -rf "$work"; [ -n "${sspid:-}" ] && kill "$sspid" 2>/dev/null || true' EXIT
cp examples/traffic/quickstart-ul.pcap "$work/n3_in.pcap"
cp examples/traffic/quickstart-dl.pcap "$work/n6_in.pcap"
: > "$work/cpu_in.pcap"
python3 p4/scripts/pcap_diff.py --empty "$work/cpu_in.pcap"
(cd "$work" && "$ss" --use-files 10 --priority-queues 8 --thrift-port 9190 \
    -i 0@n3 -i 1@n6 -i 255@cpu "$OLDPWD/$out/upf_int.json" >"$work/ss.log" 2>&1) &
sspid=$!
sleep 2
"$cli" --thrift-port 9190 < "$out/upf_int.bmv2.txt" > "$work/cli.log"
# Wait for the replay (starts after 10 s) to drain.
sleep 15
kill "$sspid" 2>/dev/null || true
wait "$sspid" 2>/dev/null || true
python3 p4/scripts/pcap_diff.py out/n3-tx.pcap "$work/n3_out.pcap" \
    out/n6-tx.pcap "$work/n6_out.pcap"
