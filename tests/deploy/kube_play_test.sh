#!/usr/bin/env bash
# The Helm chart's DaemonSet pod, as the chart renders it (its pod template
# as a Pod, with the ConfigMap: tests/deploy/chart_render -pod), runs under
# `podman kube play` with the image of deploy/container: the agent starts
# from the ConfigMap's gpuguard.yaml and miner-rules.yaml, reports ready,
# answers the liveness probe's GET /metrics on the node's loopback, runs in
# the host's pid and cgroup namespaces, and stops cleanly on `kube down`.
#
#   bash tests/deploy/kube_play_test.sh --build DIR
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log_prefix="deploy.kube_play"
source "$repo/tests/deploy/lib.sh"

parse_build_args "$@"
require_root_and_tools podman runc debootstrap cpack dpkg-deb go curl
started=$SECONDS

tag=$$
image_repository="localhost/gpuguard-test"
image="$image_repository:$tag"
scratch="/var/lib/gpuguard-test-kube-$tag"
release="gg-kube-$tag"
port=$((20000 + tag % 20000))  # the probe's port, on the host's loopback
pod_yaml="$scratch/pod.yaml"
cleanup() {
    [[ -f $pod_yaml ]] && podman kube down "$pod_yaml" >/dev/null 2>&1 || true
    podman rmi --force "$image" >/dev/null 2>&1 || true
    rm -rf "$scratch"
}
trap cleanup EXIT
mkdir -p "$scratch/state"

# kube play takes no podman options per container: the runner's (runc, the
# cgroupfs manager, limits under its hard limits) come from a
# containers.conf of the test's own.
cat >"$scratch/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=10000:10000", "nproc=10000:10000"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
export CONTAINERS_CONF="$scratch/containers.conf"

build_test_image "$build" "$image" >/dev/null || fail "the image was not built"
renderer="$(bash "$repo/tests/deploy/build_chart_render.sh" "$build")" || fail "chart_render was not built"

# The documented values, changed only where this runner differs: the image
# just built, the state on a scratch path, a free port, podman's state as
# the runtime state to read, a rule to show the ConfigMap's rules are read.
cat >"$scratch/values.yaml" <<EOF
image:
  repository: $image_repository
  tag: "$tag"
  pullPolicy: Never
hostPaths:
  state: $scratch/state
  runtimeState: [/var/lib/containers]
metrics:
  port: $port
config:
  metrics: {enabled: true, listen: 127.0.0.1, port: $port}
  control: {socket: /run/gpuguard/control.sock}
  # podman before 4.4 plays the pod in a pid namespace of its own (below):
  # the agent, which refuses to start there, is let start and says so.
  sensor: {require_host_pid_namespace: false}
minerRules:
  rules:
    - id: local-kube-play-$tag
      action: alert
      process_name: [gg-kube-play-$tag]
EOF
"$renderer" -chart "$repo/deploy/helm/gpuguard" -name "$release" -namespace default \
    -f "$scratch/values.yaml" -check -pod >"$pod_yaml" || fail "the chart did not render"

podman kube play "$pod_yaml" >"$scratch/play.log" 2>&1 || { cat "$scratch/play.log" >&2; fail "podman kube play"; }
pod="$release-gpuguard"
container="$pod-gpuguard"
podman container exists "$container" || fail "no container $container: $(podman ps -a --format '{{.Names}}')"
wait_for_ready "$container"
ready_seconds=$((SECONDS - started))
logs="$(podman logs "$container" 2>&1)"
grep -q "rules: .*(/etc/gpuguard/miner-rules.yaml, /etc/gpuguard/rules.d)" <<<"$logs" ||
    fail "the agent did not read the ConfigMap's rules: $(grep 'rules:' <<<"$logs")"

# The liveness probe's request, as the kubelet makes it (hostNetwork: the
# node's loopback).
metrics="$(curl -fsS --max-time 5 "http://127.0.0.1:$port/metrics")" || fail "GET /metrics on port $port"
grep -q '^gpuguard_' <<<"$metrics" || fail "/metrics has no gpuguard_ series"

# nsenter put the agent in the host's cgroup namespace. hostPID: Debian
# 12's podman (4.3) plays the pod in a pid namespace of its own whatever the
# spec says (it honours hostPID from 4.4 on; Kubernetes always does), so
# the host's pid namespace is checked only where podman honoured it; the
# container test (deploy.container, --pid=host) shows the agent there.
pid="$(podman inspect --format '{{.State.Pid}}' "$container")"
grep -q '^gpuguard$' "/proc/$pid/comm" || fail "the pod's process $pid is not gpuguard"
[[ $(readlink "/proc/$pid/ns/cgroup") == "$(readlink /proc/self/ns/cgroup)" ]] ||
    fail "the agent is not in the host's cgroup namespace: $(readlink /proc/$pid/ns/cgroup) $(readlink /proc/self/ns/cgroup)"
pid_mode="$(podman inspect --format '{{.HostConfig.PidMode}}' "$container")"
if [[ $pid_mode == host ]]; then
    [[ $(readlink "/proc/$pid/ns/pid") == "$(readlink /proc/self/ns/pid)" ]] ||
        fail "hostPID: the agent is not in the host's pid namespace"
else
    log "podman $(podman version --format '{{.Client.Version}}') ignored hostPID (pid mode $pid_mode)"
    grep -q "critical \[agent\] gpuguard runs in a pid namespace of its own" <<<"$logs" ||
        fail "the agent outside the host's pid namespace did not say so at critical"
fi
# The agent's own rule from the ConfigMap is in force (gpuguard status
# through the control socket, inside the pod).
podman exec "$container" /usr/sbin/gpuguard status --json >"$scratch/status.json" ||
    fail "gpuguard status in the pod"
python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); assert s["rules"]["signatures"] > 0, s["rules"]' \
    "$scratch/status.json" || fail "gpuguard status: $(head -c 400 "$scratch/status.json")"

# Torn down: the pod stopped (SIGTERM) ends the agent cleanly, its journal
# on the host path; kube down removes it all.
podman pod stop --time 20 "$pod" >/dev/null || fail "podman pod stop"
exit_code="$(podman inspect --format '{{.State.ExitCode}}' "$container")"
[[ $exit_code == 0 ]] || { podman logs "$container" 2>&1 | tail -n 20 >&2; fail "the agent exited with $exit_code"; }
compgen -G "$scratch/state/journal/*" >/dev/null || fail "no journal under the hostPath $scratch/state"
podman kube down "$pod_yaml" >/dev/null || fail "podman kube down"
podman container exists "$container" && fail "the pod's container outlived kube down"
log "PASS: agent ready at ${ready_seconds} s, total $((SECONDS - started)) s"
