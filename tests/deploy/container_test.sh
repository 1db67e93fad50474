#!/usr/bin/env bash
# The agent in its container image (deploy/container), run with podman the
# way docs/deployment.md says, sees and kills a miner on the host and a
# miner in another container, spares a process that merely holds the GPU,
# names the other container, and writes its journal to the host path.
#
#   bash tests/deploy/container_test.sh --build DIR
#
# The GPU is the live tests' fake one: a node made by mknod with the
# numbers of /dev/full (1:7, which runc's default device list lets a
# container open as /dev/full), registered with sensor.extra_gpu_devices.
# The miners carry a pool name unique to this run on their command line,
# and only a rule on that name kills: nothing else on the host is acted on.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log_prefix="deploy.container"
source "$repo/tests/deploy/lib.sh"

parse_build_args "$@"
require_root_and_tools podman runc debootstrap cpack dpkg-deb
started=$SECONDS

tag=$$
image="localhost/gpuguard-test:$tag"
agent="gg-deploy-agent-$tag"
miner="gg-deploy-miner-$tag"
scratch="/var/lib/gpuguard-test-deploy-$tag"  # not /tmp: executables there are suspect
pool="gg-deploy-pool-$tag.example"
host_miner=0
bystander=0
cleanup() {
    local pid
    for pid in "$host_miner" "$bystander"; do
        ((pid > 0)) || continue
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    podman "${podman_global[@]}" rm --force --time 0 "$agent" "$miner" >/dev/null 2>&1 || true
    podman rmi --force "$image" >/dev/null 2>&1 || true
    rm -rf "$scratch"
}
trap cleanup EXIT

build_test_image "$build" "$image" >/dev/null || fail "the image was not built"
image_seconds=$((SECONDS - started))

mkdir -p "$scratch/journal" "$scratch/rules.d"
mknod -m 0666 "$scratch/gpu0" c 1 7
mkfifo -m 0600 "$scratch/idle"
# The agent's configuration, mounted over the image's default: the fake GPU,
# the outputs and journal on the host path, a quick kill.
cat >"$scratch/gpuguard.yaml" <<EOF
sensor:
  extra_gpu_devices: ["1:7"]
control:
  socket: /var/lib/gpuguard/control.sock
rules:
  main_file: /var/lib/gpuguard/miner-rules.yaml
  drop_in_dir: /var/lib/gpuguard/rules.d
journal:
  dir: /var/lib/gpuguard/journal
enforcement:
  grace_period_ms: 500
outputs:
  - name: file
    type: file
    address: /var/lib/gpuguard/alerts.jsonl
EOF
cat >"$scratch/miner-rules.yaml" <<EOF
rules:
  - id: local-deploy-test-pool
    name: this test's pool on a command line
    action: kill
    cmdline: ['${pool//./\\.}']
EOF
chmod 0600 "$scratch/gpuguard.yaml" "$scratch/miner-rules.yaml"

# As docs/deployment.md runs it (plus the runner's podman options).
podman "${podman_global[@]}" run --detach --name "$agent" "${podman_limits[@]}" \
    --privileged --pid=host --cgroupns=host --network=host \
    -v /sys/fs/cgroup:/sys/fs/cgroup -v /sys/kernel/tracing:/sys/kernel/tracing \
    -v /var/lib/containers:/var/lib/containers:ro \
    -v "$scratch:/var/lib/gpuguard" \
    -v "$scratch/gpuguard.yaml:/etc/gpuguard/gpuguard.yaml:ro" \
    "$image" run --config /etc/gpuguard/gpuguard.yaml >/dev/null || fail "podman run of the agent"
wait_for_ready "$agent"
ready_seconds=$((SECONDS - started))
agent_pid="$(podman inspect --format '{{.State.Pid}}' "$agent")"
# --pid=host: the agent is a host process, under its own host pid.
grep -q '^gpuguard$' "/proc/$agent_pid/comm" || fail "the container's process $agent_pid is not gpuguard"

# A miner on the host, a bystander on the host (the GPU held, no miner's
# command line), and a miner in another container (its own pid namespace),
# each holding the fake GPU and waiting on a FIFO nobody writes. The miners
# open the GPU, then exec into the pool's command line (as a miner that
# finds its GPU before it connects): no command line before theirs names
# the pool in full, podman's included (a rule that matched podman's would
# kill podman).
miner_script='exec 5<>"$0" 6<>"$1"; exec bash -c "read -t 60 -u 6" miner --url "stratum+tcp://$2.example:3333"'
bash -c "$miner_script" "$scratch/gpu0" "$scratch/idle" "${pool%.example}" &
host_miner=$!
bash -c 'exec 5<>"$0" 6<>"$1"; read -t 60 -u 6' "$scratch/gpu0" "$scratch/idle" --epochs 3 &
bystander=$!
container_id="$(podman "${podman_global[@]}" run --detach --name "$miner" "${podman_limits[@]}" \
    --network none --entrypoint /bin/bash "$image" \
    -c 'mkfifo /tmp/idle && exec bash -c "$0" /dev/full /tmp/idle "$1"' "$miner_script" "${pool%.example}")" ||
    fail "podman run of the miner container"
log "agent pid $agent_pid; host miner $host_miner, bystander $bystander, container $container_id"

alerts="$scratch/alerts.jsonl"
# record_where FIELD=VALUE...: the first output record whose dotted fields
# (gpuguard.record, process.pid, ...) all hold those values, as JSON.
record_where() {
    [[ -f $alerts ]] || return 1
    python3 -c '
import json, sys
wanted = [arg.split("=", 1) for arg in sys.argv[2:]]
def field(record, path):
    for part in path.split("."):
        record = record.get(part) if isinstance(record, dict) else None
    return record
for line in open(sys.argv[1]):
    record = json.loads(line)
    if all(str(field(record, path)) == value for path, value in wanted):
        print(line.strip())
        sys.exit(0)
sys.exit(1)' "$alerts" "$@"
}
have_record() { record_where "$@" >/dev/null; }
detection=(gpuguard.record=detection rule.id=GG-CORR-0001)
killed=(gpuguard.record=enforcement event.action=kill event.outcome=success)

# The host miner: the detection of a miner holding a GPU, and its kill.
wait_until 15 have_record "${detection[@]}" process.pid="$host_miner" ||
    fail "no GG-CORR-0001 (a miner holding a GPU) for the host miner: $(cut -c1-300 "$alerts" 2>/dev/null)"
wait_until 10 have_record "${killed[@]}" process.pid="$host_miner" ||
    fail "no successful kill of the host miner: $(grep "\"pid\":$host_miner" "$alerts" | cut -c1-300)"
wait "$host_miner" && fail "the host miner exited by itself" || host_status=$?
host_miner=0
[[ $host_status == 143 || $host_status == 137 ]] ||
    fail "the host miner ended with $host_status, not by SIGTERM or SIGKILL"

# The container's miner: its detection names the container (the agent reads
# podman's state through the read-only /var/lib/containers mount) and gives
# its host pid; that pid is killed, and the container ends with it.
wait_until 15 have_record "${detection[@]}" container.id="$container_id" ||
    fail "no GG-CORR-0001 naming the miner's container: $(cut -c1-300 "$alerts" 2>/dev/null)"
container_detection="$(record_where "${detection[@]}" container.id="$container_id")"
container_miner="$(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
c = r["container"]
assert c.get("name") == sys.argv[2] and c.get("runtime") == "podman", c
assert "stratum+tcp://" in r["process"]["command_line"], r["process"]
print(r["process"]["pid"])' "$container_detection" "$miner")" ||
    fail "the container miner's detection: $container_detection"
wait_until 10 have_record "${killed[@]}" process.pid="$container_miner" ||
    fail "no successful kill of the container's miner (pid $container_miner)"
podman_exit="$(timeout 15 podman wait "$miner")" || fail "the miner container is still running"
[[ $podman_exit == 143 || $podman_exit == 137 ]] || fail "the miner container ended with $podman_exit"
log "host miner and container miner (host pid $container_miner) detected and killed"

# The bystander holds the GPU and lives on: nothing killed it.
kill -0 "$bystander" || fail "the bystander (no miner's command line) was killed"
have_record gpuguard.record=enforcement process.pid="$bystander" &&
    fail "an enforcement record for the bystander"

# Stopped as a container is stopped (SIGTERM): a clean exit, and the
# journal's segments are on the host path.
podman "${podman_global[@]}" stop --time 20 "$agent" >/dev/null
agent_exit="$(podman inspect --format '{{.State.ExitCode}}' "$agent")"
[[ $agent_exit == 0 ]] || { podman logs "$agent" | tail -n 20 >&2; fail "the agent exited with $agent_exit"; }
compgen -G "$scratch/journal/*" >/dev/null || fail "no journal in the host path $scratch/journal"
"$build/agent/gpuguard" journal verify --dir "$scratch/journal" >/dev/null ||
    fail "gpuguard journal verify on the container's journal"
log "PASS: image ${image_seconds} s, agent ready at ${ready_seconds} s, total $((SECONDS - started)) s"
