#!/usr/bin/env bash
# Install the system packages Peregrine needs on Debian 12 (bookworm), only what is missing.
#   scripts/deps.sh          build and run: DPDK 22.11 headers and libs, clang for bindgen,
#                            libibverbs-dev (peregrine-dta's `verbs` feature, built in CI)
#   scripts/deps.sh --test   also the test oracles: dpdk-testpmd, tshark, Scapy (pip), iproute2,
#                            ethtool (veth checksum offload in the netns TCP test), XGBoost (pip,
#                            the Kestrel evaluation's detector training)
set -euo pipefail

want=(libdpdk-dev pkg-config clang libclang-dev libzmq3-dev libibverbs-dev)
if [[ "${1:-}" == "--test" ]]; then
  want+=(dpdk dpdk-dev tshark python3-pip iproute2 ethtool)
fi
command -v cargo >/dev/null 2>&1 || want+=(cargo rustc)

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"

if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  # tshark asks whether non-root users may capture; answer for it.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if [[ "${1:-}" == "--test" ]]; then
  if ! python3 -c 'import scapy' 2>/dev/null; then
    echo "deps: installing scapy (test oracle) from PyPI" >&2
    python3 -m pip install -q scapy 2>/dev/null || python3 -m pip install -q --break-system-packages scapy
  fi
  # The Kestrel evaluation's detectors (perf/scripts/kestrel_train.py), pinned: its test
  # checks the Rust evaluator against this version's predictions.
  if ! python3 -c 'import xgboost, numpy; assert xgboost.__version__ == "2.1.3"' 2>/dev/null; then
    echo "deps: installing xgboost 2.1.3 (Kestrel evaluation) from PyPI" >&2
    python3 -m pip install -q xgboost==2.1.3 2>/dev/null || python3 -m pip install -q --break-system-packages xgboost==2.1.3
  fi
fi

pkg-config --atleast-version=22.11 libdpdk || { echo "deps: DPDK >= 22.11 not found by pkg-config" >&2; exit 1; }
