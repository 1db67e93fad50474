# shellcheck shell=bash disable=SC2034,SC2154  # sourced: repo is the caller's; the arrays are for it
# tests/deploy/lib.sh: what the deployment tests share (sourced).
# Each test is a script CTest runs as root; under GPUGUARD_REQUIRE_PRIVILEGED=1
# (CI) a missing tool or privilege fails the test instead of skipping it.

log() { echo "${log_prefix:-deploy}: $*" >&2; }
fail() {
    log "FAIL: $*"
    exit 1
}
# skip_or_fail WHY: exit 77 (CTest's SKIP_RETURN_CODE here), or fail under
# GPUGUARD_REQUIRE_PRIVILEGED=1.
skip_or_fail() {
    if [[ ${GPUGUARD_REQUIRE_PRIVILEGED:-0} == 1 ]]; then
        fail "$1 (GPUGUARD_REQUIRE_PRIVILEGED=1 requires it)"
    fi
    log "SKIP: $1"
    exit 77
}
require_root_and_tools() {
    [[ $(id -u) -eq 0 ]] || skip_or_fail "needs root"
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || skip_or_fail "$tool is missing (bash scripts/install-deps.sh test)"
    done
}

# parse_build_args ARGS...: `build` from --build DIR (default REPO/build).
parse_build_args() {
    build="$repo/build"
    while (($#)); do
        case "$1" in
            --build) build="$2"; shift 2 ;;
            *) fail "unknown argument $1 (--build DIR)" ;;
        esac
    done
}

# The options every podman call here needs on a CI runner: runc (crun
# refuses a hybrid cgroup host), the cgroupfs manager (no systemd as PID 1),
# limits under the runner's hard limits.
podman_global=(--cgroup-manager=cgroupfs --runtime runc)
podman_limits=(--ulimit nofile=10000:10000 --ulimit nproc=10000:10000)

# wait_until SECONDS COMMAND...: polls COMMAND every 0.2 s; its status.
wait_until() {
    local deadline=$((SECONDS + $1))
    shift
    while ((SECONDS < deadline)); do
        "$@" && return 0
        sleep 0.2
    done
    "$@"
}

# wait_for_ready CONTAINER: until the agent in it logs "ready" (60 s at
# most); its log and a failure otherwise.
wait_for_ready() {
    local container="$1"
    logged_ready() { podman logs "$container" 2>&1 | grep -q '\[agent\] ready$'; }
    wait_until 60 logged_ready && return 0
    podman logs "$container" >&2 || true
    fail "the agent in $container did not report ready within 60 s"
}

# The image (deploy/container/build-image.sh) under a tag of the test's own;
# its base stays cached (GPUGUARD_DEPLOY_CACHE, else /var/cache/gpuguard-deploy,
# outside the clone so a runner that keeps /var/cache pays debootstrap once).
build_test_image() {
    local build="$1" tag="$2"
    GPUGUARD_DEPLOY_CACHE="${GPUGUARD_DEPLOY_CACHE:-/var/cache/gpuguard-deploy}" \
        bash "$repo/deploy/container/build-image.sh" --build "$build" --tag "$tag"
}
