#!/usr/bin/env bash
# The README's second command: install what is missing (test oracles included) and run the
# whole test suite. DPDK tests need root (they open vdev ports with --no-huge).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
cargo test --workspace --locked "$@"
# The libibverbs binding (feature `verbs`, off by default): it must build, and its test
# skips with "no RDMA device" where there is none.
cargo test -p peregrine-dta --features verbs --locked --test verbs "$@"
