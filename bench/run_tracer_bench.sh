#!/usr/bin/env bash
# Runs bench/tracer_overhead_bench against bpftrace and auditd, installing
# them first (Debian packages). As root, after scripts/setup.sh built the tree.
#   bash bench/run_tracer_bench.sh [--rounds=N] [google benchmark flags]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GPUGUARD_BUILD_DIR:-$repo/build}"
missing=()
for pkg in bpftrace auditd; do
    dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null | grep -qx installed || missing+=("$pkg")
done
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cmake --build "$build" --target tracer_overhead_bench
exec "$build/bench/tracer_overhead_bench" --benchmark_min_time=0.3 "$@"
