#!/usr/bin/env bash
# The README's first command: install what is missing, build, run the daemon on the bundled
# default (pcap replay of generated traffic: no NIC, no hugepages), print what it did.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release --locked --bin peregrine
mkdir -p out
exec target/release/peregrine run --config examples/quickstart.toml "$@"
