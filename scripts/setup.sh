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

# Every stage runs; the exit status is a failure if any stage failed.
cd "$build"
status=0
ctest --output-on-failure --no-label-summary --timeout 600 -j "$(nproc)" "$@" || status=$?

# The same suites built again with AddressSanitizer + UndefinedBehaviorSanitizer
# (clang, -O1; docs/reliability.md#sanitizers): any report aborts its test.
# Not rebuilt: the fuzz targets (sanitized already) and vmtests (the VMs boot
# the build above). GPUGUARD_SANITIZE_SUITE=0 leaves this stage out.
if [[ "${GPUGUARD_SANITIZE_SUITE:-1}" == 1 ]]; then
    sanitize="${build}-sanitize"
    echo "setup: the suites again under ASan + UBSan, in $sanitize" >&2
    CC=clang CXX=clang++ cmake -S "$repo" -B "$sanitize" -G Ninja -DCMAKE_BUILD_TYPE=None \
        -DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1 -DGPUGUARD_SANITIZE=ON \
        -DGPUGUARD_WERROR=OFF -DGPUGUARD_BUILD_BENCH=OFF >/dev/null
    cmake --build "$sanitize" --parallel "$(nproc)"
    cd "$sanitize"
    # Left out here, run above: the storm's memory bound (ASan's shadow memory
    # and quarantine are not the agent's), the package (lintian on an ASan
    # binary) and the fleet of Prometheus servers (no code of ours the other
    # tests do not run).
    sanitize_exclude='^(AgentFaults\.exec_and_fork_storm.*|PackageTest\..*|FleetTest\..*)$'
    # ctest keeps only the last -E: a caller's own exclusion joins ours.
    ctest_args=()
    while (($#)); do
        case "$1" in
            -E | --exclude-regex)
                sanitize_exclude+="|$2"
                shift 2
                ;;
            *)
                ctest_args+=("$1")
                shift
                ;;
        esac
    done
    ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:strict_string_checks=1}" \
        UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
        ctest --output-on-failure --no-label-summary --timeout 600 -j "$(nproc)" \
        -E "$sanitize_exclude" "${ctest_args[@]}" || status=$?
fi
exit "$status"
