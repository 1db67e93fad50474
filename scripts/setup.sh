#!/usr/bin/env bash
# The two set-up commands of the README, as root on Debian 12:
#   bash scripts/setup.sh run  [-- gpuguard run args]   install, build, start the agent
#   bash scripts/setup.sh test [-- ctest args]          install, build, run every test
# GPUGUARD_BUILD_DIR overrides the build directory (default: build).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GPUGUARD_BUILD_DIR:-$repo/build}"
mode="${1:-}"
shift || true
if [[ "${1:-}" == "--" ]]; then shift; fi

case "$mode" in
    run | test) ;;
    *)
        echo "usage: $0 run|test [-- extra arguments]" >&2
        exit 2
        ;;
esac

bash "$repo/scripts/install-deps.sh"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --parallel "$(nproc)"

if [[ "$mode" == run ]]; then
    echo "setup: starting gpuguard (Ctrl-C stops it and detaches every program)" >&2
    exec "$build/agent/gpuguard" run --print-events "$@"
fi

# ctest's summary must be the last thing printed: exec it.
cd "$build"
exec ctest --output-on-failure --no-label-summary --timeout 600 -j "$(nproc)" "$@"
