#!/usr/bin/env bash
# The two set-up commands of the README, as root on Debian 12:
#   bash scripts/setup.sh run  [-- gpuguard run args]   install, build, start the agent
#   bash scripts/setup.sh test [-- ctest args]          install, build, run every test
# GPUGUARD_BUILD_DIR overrides the build directory (default: build, or one
# under /var/cache/gpuguard-build for a tree in /tmp, /var/tmp or /dev/shm).
# GPUGUARD_WERROR=1 turns compiler warnings into errors (CI sets it).
# GPUGUARD_SANITIZE_SUITE=0 leaves the ASan + UBSan stage out of `test`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GPUGUARD_BUILD_DIR:-$repo/build}"
# A tree under a temporary directory (a clone in /tmp) would build the test
# programs there, and the live tests' own workers would then be what the
# agent rightly reports: GPU programs run from a temporary location
# (GG-CORR-0005). Its default build directory goes under /var/cache.
if [[ -z ${GPUGUARD_BUILD_DIR:-} && $repo =~ ^(/tmp|/var/tmp|/dev/shm)(/|$) ]]; then
    build="/var/cache/gpuguard-build/$(printf '%s' "$repo" | sha256sum | cut -c1-16)/build"
    echo "setup: $repo is under a temporary directory; building in $build" >&2
fi
export GPUGUARD_BUILD_DIR="$build"
release="${build}-release"   # setup.sh test: the agent with Unix Makefiles, Release
sanitize="${build}-sanitize" # setup.sh test: the suites under ASan + UBSan
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

# Root, from a root shell or through sudo where it exists: apt-get installs
# the packages, and the agent loads BPF programs. Nothing here calls sudo.
if [[ $(id -u) -ne 0 ]]; then
    echo "setup: run as root (from a root shell: bash scripts/setup.sh $mode; or with sudo)" >&2
    exit 1
fi

werror=OFF
if [[ "${GPUGUARD_WERROR:-0}" == 1 ]]; then werror=ON; fi
jobs="$(nproc)"

# The plain build: RelWithDebInfo (-O2, line tables), the tree's ccache when
# installed (CMakeLists.txt). `run` and `test` share it: what `run` built,
# `test` does not build again.
configure_plain() {
    cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DGPUGUARD_WERROR="$werror" "$@" >/dev/null
}

if [[ "$mode" == run ]]; then
    bash "$repo/scripts/install-deps.sh" run
    # Only the agent: no tests, fuzz targets or benchmarks to configure or build.
    configure_plain -DGPUGUARD_BUILD_TESTS=OFF -DGPUGUARD_BUILD_BENCH=OFF
    cmake --build "$build" --parallel "$jobs" --target gpuguard
    echo "setup: starting gpuguard (Ctrl-C stops it and detaches every program)" >&2
    exec "$build/agent/gpuguard" run --print-events "$@"
fi

# The tests' agents and CLI runs share one cache of the compiled signature
# pack (docs/signatures.md#compiled-pack-cache) in the build tree, not the
# host's /var/cache/gpuguard: the first compiles it, the rest load it.
export GPUGUARD_RULE_CACHE_DIR="${GPUGUARD_RULE_CACHE_DIR-$build/rule-cache}"

# ---- test: every stage runs and is timed; the exit status is a failure if
# any stage failed. The table at the end says where the time went.
stage_names=()
stage_seconds=()
summaries=()  # CTest's summary line of each test stage, repeated last
status=0
started_all=$(date +%s)

# stage NAME COMMAND...: runs COMMAND, records its seconds, returns its status.
stage() {
    local name="$1"
    shift
    echo "setup: stage '$name'" >&2
    local started
    started=$(date +%s)
    local result=0
    "$@" || result=$?
    stage_names+=("$name")
    stage_seconds+=($(($(date +%s) - started)))
    return "$result"
}

# run_ctest LOG DIR ARGS...: CTest in DIR, its output shown and kept in LOG.
run_ctest() {
    local log="$1" dir="$2"
    shift 2
    (set -o pipefail && cd "$dir" && ctest "$@" 2>&1 | tee "$log")
}

# ctest_stage NAME DIR ARGS...: a CTest run whose summary line is kept.
ctest_stage() {
    local name="$1" dir="$2"
    shift 2
    local log="$dir/ctest-${name// /-}.log"
    local result=0
    stage "$name" run_ctest "$log" "$dir" "$@" || result=$?
    summarise_ctest "$name" "$dir" "$log" "$result"
    return "$result"
}

# summarise_ctest NAME DIR LOG STATUS: the run's summary line and failures,
# kept for the end of the output.
summarise_ctest() {
    local name="$1" dir="$2" log="$3" result="$4"
    local summary
    summary="$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1 || true)"
    summaries+=("$name: ${summary:-no summary (ctest status $result)}")
    # The failed tests' names again at the very end, where CI's tail shows them.
    local failed grouped=0
    while IFS= read -r failed; do
        summaries+=("  failed: ${failed#"${failed%%[![:space:]]*}"}")
        # A whole gtest suite in one CTest test (a name without a '.', as
        # Corpus/ScenarioTest): its failed cases too.
        [[ $failed =~ ^[[:space:]]*[0-9]+\ -\ [^.\ ]+\ \( && ! $failed =~ " vmtests " ]] && grouped=1
    done < <(sed -n '/^The following tests FAILED:/,/^$/p' "$log" | grep -E '^\s+[0-9]+ - ' || true)
    # The unit under systemd: its failed checks.
    if grep -qE '^\s+[0-9]+ - vmtests\.systemd ' "$log" && [[ -f $dir/vmtests/systemd.log ]]; then
        while IFS= read -r failed; do
            summaries+=("    $failed")
        done < <(grep -a 'GG-SYSTEMD FAIL\|GG-SYSTEMD-RESULT' "$dir/vmtests/systemd.log" | cut -c1-300 | head -n 20)
    fi
    if ((grouped)); then
        while IFS= read -r failed; do
            summaries+=("    $failed")
        done < <(grep -aE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$log" | head -n 20)
    fi
    # vmtests is one CTest test for many gtest cases in two VMs: its failed
    # kernels and cases too, or the tail cannot tell a flake from a hang.
    if grep -qE '^\s+[0-9]+ - vmtests ' "$log" && [[ -d $dir/vmtests ]]; then
        local line
        while IFS= read -r line; do
            summaries+=("    $line")
        done < <(grep -h '^FAIL ' "$dir"/vmtests/*.summary 2>/dev/null
            grep -ah '^\[  FAILED  \] .* ms)$' "$dir"/vmtests/*.log 2>/dev/null | head -n 20
            # What failed, not only where: the first assertions' own lines.
            grep -ah -A3 ': Failure$' "$dir"/vmtests/*.log 2>/dev/null | cut -c1-300 | head -n 24)
    fi
    return 0
}

print_table() {
    echo
    echo "setup: stage                                        seconds"
    local i
    for i in "${!stage_names[@]}"; do
        printf 'setup:   %-44s %6d\n' "${stage_names[$i]}" "${stage_seconds[$i]}"
    done
    printf 'setup:   %-44s %6d\n' "total" "$(($(date +%s) - started_all))"
    print_slowest || true  # a report: it never changes the exit status
    local line
    for line in "${summaries[@]}"; do echo "$line"; done
}

# The ten slowest tests of every CTest stage and the ten slowest compile
# units of each Ninja build (the latest entry per object in .ninja_log; a
# ccache hit counts as what it took), so each run shows where its time went.
print_slowest() {
    local logs=("$build"/ctest-*.log "$build"/setup-background/vmtests.log "$sanitize"/ctest-*.log)
    local log dir
    echo
    echo "setup: slowest tests                                          seconds"
    for log in "${logs[@]}"; do
        [[ -f $log ]] || continue
        sed -nE 's/^.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/p' "$log" |
            sort -rn | awk 'NR <= 10' |
            awk -v stage="$(basename "$log" .log)" '{ printf "setup:   %-52s %8.1f  %s\n", $2, $1, stage }'
    done
    echo "setup: slowest compile units                                  seconds"
    for dir in "$build" "$sanitize"; do
        [[ -f $dir/.ninja_log ]] || continue
        awk '!/^#/ && $4 ~ /\.o$/ { took[$4] = ($2 - $1) / 1000 }
             END { for (o in took) print took[o], o }' "$dir/.ninja_log" |
            sort -rn | awk 'NR <= 10' |
            awk -v build="$(basename "$dir")" '{ printf "setup:   %-52s %8.1f  %s\n", $2, $1, build }'
    done
}
trap print_table EXIT

stage install bash "$repo/scripts/install-deps.sh" test
stage configure configure_plain -DGPUGUARD_BUILD_TESTS=ON -DGPUGUARD_BUILD_BENCH=ON
# The systemd VM's root filesystem (debootstrap: mostly download and
# unpacking) is made while the build compiles; vmtests.systemd waits for it.
(nice -n 19 bash "$repo/vmtests/systemd.sh" --build "$build" --prepare \
    >"$build/systemd-prepare.log" 2>&1 || true) &
stage build cmake --build "$build" --parallel "$jobs"
# The container image's Debian 12 base (tests/deploy; debootstrap, mostly
# download) is made while the first tests run, once per package list in a
# cache outside the clone; the deploy tests wait for it (a lock).
export GPUGUARD_DEPLOY_CACHE="${GPUGUARD_DEPLOY_CACHE:-/var/cache/gpuguard-deploy}"
(nice -n 19 bash "$repo/deploy/container/build-image.sh" --build "$build" --base-only \
    >"$build/deploy-base.log" 2>&1 || true) &

# Two more builds, which need nothing but CPU, run at nice 19 alongside the
# tests, one after the other: those mostly wait (on agents starting,
# timeouts; about 40 % of two cores busy), and at nice 19 a compiler gets a
# core only while no test wants it.
#  - The build most people type: CMake's default generator (Unix Makefiles)
#    in Release, the agent alone, without -Werror.
#  - The ASan + UBSan build (clang, -O1; docs/reliability.md#sanitizers) of
#    the agent binary and the test binaries of the parsers, correlator,
#    journal, outputs, backends, rules and signatures and the agent's own
#    suites. Not rebuilt: the fuzz targets (sanitized already), benchmarks
#    and vmtests (the VMs boot the plain build).
sanitize_suite="${GPUGUARD_SANITIZE_SUITE:-1}"
background_dir="$build/setup-background"
rm -rf "$background_dir"
mkdir -p "$background_dir"
sanitize_targets=(gpuguard siem_emit gpuguard_common_tests gpuguard_events_tests
    gpuguard_state_tests gpuguard_enforce_tests gpuguard_detect_tests gpuguard_daemon_tests
    gpuguard_backends_tests gpuguard_journal_tests gpuguard_netintel_tests gpuguard_rules_tests
    gpuguard_signatures_tests gpuguard_siem_tests gpuguard_siem_peer_tests
    gpuguard_ops_tests gpuguard_bpf_tests)
release_build() {
    cmake -S "$repo" -B "$release" -DCMAKE_BUILD_TYPE=Release -DGPUGUARD_BUILD_TESTS=OFF \
        -DGPUGUARD_BUILD_BENCH=OFF &&
        cmake --build "$release" --parallel "$jobs" --target gpuguard
}
sanitizer_build() {
    CC=clang CXX=clang++ cmake -S "$repo" -B "$sanitize" -G Ninja -DCMAKE_BUILD_TYPE=None \
        -DCMAKE_C_FLAGS="-O1 -g1" -DCMAKE_CXX_FLAGS="-O1 -g1" -DGPUGUARD_SANITIZE=ON \
        -DGPUGUARD_WERROR=OFF -DGPUGUARD_BUILD_BENCH=OFF &&
        cmake --build "$sanitize" --parallel "$jobs" --target "${sanitize_targets[@]}"
}
# background_build NAME FUNCTION [ARGS...]: runs it, leaving NAME.log,
# NAME.seconds, NAME.status.
background_build() {
    local name="$1" function="$2" started result=0
    shift 2
    started=$(date +%s)
    "$function" "$@" >"$background_dir/$name.log" 2>&1 || result=$?
    echo $(($(date +%s) - started)) >"$background_dir/$name.seconds"
    echo "$result" >"$background_dir/$name.status"
}
# The sanitizer build first: the sanitizer tests wait for it, nothing waits
# for the release build.
(
    renice -n 19 -p "$BASHPID" >/dev/null
    if [[ "$sanitize_suite" == 1 ]]; then background_build sanitize sanitizer_build; fi
    background_build release release_build
) &
background_pid=$!

# The host's own tests; the VMs (label vmtests) come after them, below.
ctest_stage "plain tests" "$build" --output-on-failure --no-label-summary --timeout 600 \
    -j "$jobs" -LE vmtests "$@" || status=$?

# The VMs (vmtests: Debian's kernels under qemu; vmtests.systemd: the unit
# under a real systemd) run beside the sanitizer stage, not before it: they
# change nothing on the host (every kernel, BPF program and nftables rule
# they touch is the guest's), and the sanitizer tests leave most of a core
# idle. Their output is shown when they end.
vm_tests() {
    cd "$build" && ctest --output-on-failure --no-label-summary --timeout 1800 -L vmtests "$@"
}
vm_started=$(date +%s)
background_build vmtests vm_tests "$@" &
vm_pid=$!

# collect_build NAME LABEL: its row in the table; its log's tail when it failed.
collect_build() {
    [[ -f "$background_dir/$1.status" ]] || return 0
    stage_names+=("$2")
    stage_seconds+=("$(cat "$background_dir/$1.seconds")")
    if [[ "$(cat "$background_dir/$1.status")" != 0 ]]; then
        echo "setup: $2 failed; the end of $background_dir/$1.log:" >&2
        tail -n 40 "$background_dir/$1.log" >&2
        return 1
    fi
}
# wait_for_status NAME: until the background job NAME has finished (or the
# background chain has ended without it).
wait_for_status() {
    while [[ ! -f "$background_dir/$1.status" ]] && kill -0 "$background_pid" 2>/dev/null; do
        sleep 2
    done
}
if [[ "$sanitize_suite" == 1 ]]; then
    stage "wait for the sanitizer build" wait_for_status sanitize
    collect_build sanitize "sanitizer build (during plain tests)" || status=$?
fi

if [[ "$sanitize_suite" == 1 && "$(cat "$background_dir/sanitize.status" 2>/dev/null)" == 0 ]]; then
    # The agent binary's suites under ASan: the CLI end to end, live
    # detection and enforcement, the control socket, Stratum on a live agent.
    # Left to the plain stage: the kernel-facing suites (each BPF hook family,
    # cgroup and nftables enforcement: their user-space side is what the agent
    # suites drive), the operations suites (package, fleet, service, storm,
    # stalled output: the agent binary again, under systemd-like conditions),
    # and targets not built here (CTest lists them as *_NOT_BUILT).
    kernel_suites='OpenTracingTest|IoctlTracingTest|ConnectTracingTest|ConnectLoopbackFilter'
    kernel_suites+='|ConnectAll|SchedTracingTest|RingBufferDrops|KillNowTest|CgroupEnforceTest'
    kernel_suites+='|NftBlockerTest|SensorLoaderTest|SensorProbe|PayloadTracingTest|LsmEnforce|ConnectWatchList'
    kernel_suites+='|FileChangeTracingTest|TamperTracingTest'
    # deploy.*: the image is built from the plain build's package (a
    # sanitized binary's package would need a base of its own).
    sanitize_exclude="(_NOT_BUILT\$|^([A-Za-z_]+/)*($kernel_suites)\\.|^fuzz\\.|^vmtests(\\.|\$)|^deploy\\.)"
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
    export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:strict_string_checks=1}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
    ctest_stage "sanitizer tests" "$sanitize" --output-on-failure --no-label-summary \
        --timeout 600 -j "$jobs" -E "$sanitize_exclude" "${ctest_args[@]}" || status=$?
fi

stage "wait for the VM tests" wait "$vm_pid" || status=$?
cat "$background_dir/vmtests.log"
vm_status="$(cat "$background_dir/vmtests.status" 2>/dev/null || echo 1)"
stage_names+=("VM tests (from the end of the plain tests)")
stage_seconds+=($(($(date +%s) - vm_started)))
summarise_ctest "VM tests" "$build" "$background_dir/vmtests.log" "$vm_status"
[[ $vm_status == 0 ]] || status=1

stage "wait for the release build" wait "$background_pid" || status=$?
collect_build release "release build (Makefiles; in the background)" || status=$?
exit "$status"
