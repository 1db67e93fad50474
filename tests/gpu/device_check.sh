#!/usr/bin/env bash
# Every check that needs a real NVIDIA GPU, as one command for a machine
# the `device` tool lends (docs/backends.md, "Checked on a real GPU"),
# whose image is not Debian 12: first, here, `tests/gpu/bundle.sh` (the
# agent and its libraries in .device/), then from the repository root
#
#   run(command="bash tests/gpu/device_check.sh", carry=[".device"], timeout_s=560)
#
# Parts, all by default, or name some: acceptance (tests/gpu/real_gpu_check.sh,
# its eight checks), pipes (issue 40 point 6: what GPM reports while a
# tensor and a hash workload each run alone, gpm-<w>.jsonl, a `gpuguard gpus
# --watch` reading a second; then the agent judging the pipe rules over
# both, agent-pipes.*), cost (point 5: bench/gpu_job_cost.py, cost.txt).
# Everything goes under $OUT with machine.txt and steps.log; a step that
# fails (the agent's BPF on a sandboxed kernel, say) is logged and the rest
# run. Prepared on a machine without a GPU: only its flow was run there.
set -u
OUT=${OUT:-/tmp/gg-device-out}
mkdir -p "$OUT"
root=$(mktemp -d)
tar -xzf .device/gpuguard-bundle.tar.gz -C "$root" || exit 1
gg="$root/gpuguard/gpuguard"
workloads=bench/gpu_workloads.py
export LD_LIBRARY_PATH="$root/gpuguard/lib"
step() { echo "== $(date -u +%T) $*" | tee -a "$OUT/steps.log"; }

acceptance() {
    timeout 240 bash tests/gpu/real_gpu_check.sh "$gg" >"$OUT/acceptance.txt" 2>&1
    step "acceptance: $(grep -c '^PASS' "$OUT/acceptance.txt") passed," \
        "$(grep -c '^FAIL' "$OUT/acceptance.txt") failed"
}

# What GPM reports while each workload runs alone, then the agent judging
# the pipes: the hash workload, then the tensor one, alone for 40 s each,
# under rules of 15 s windows (GG-CORR-0036's mix, the tensor counter's).
pipes() {
    for workload in tensor hash; do
        step "gpm under $workload"
        python3 "$workloads" "$workload" 25 >"$OUT/workload-$workload.json" 2>&1 &
        sleep 6
        timeout 15 "$gg" gpus --json --watch --interval 1000 >"$OUT/gpm-$workload.jsonl" \
            2>"$OUT/gpm-$workload.err"
        wait
    done
    step "agent judging the pipes"
    cat >"$root/pipes.yaml" <<'RULES'
rules:
  - id: DEVICE-PIPES-HASH
    name: a hash kernel's pipe mix (15 s)
    severity: warning
    window: 1h
    when:
      gpu_held: true
      gpu_pipe_mix: {for: 15s, integer_or_dram_above_percent: 25, tensor_below_percent: 1, fp_below_percent: 5}
  - id: DEVICE-PIPES-TENSOR
    name: the tensor pipes busy (15 s)
    severity: notice
    window: 1h
    when:
      gpu_held: true
      gpu_pipe_mix: {for: 15s, tensor_above_percent: 10}
RULES
    printf 'journal:\n  dir: %s\ncontrol:\n  socket: %s\nrules:\n  correlation_files: [%s]\nbackends:\n  interval_ms: 1000\n' \
        "$root/journal" "$root/control.sock" "$root/pipes.yaml" >"$root/agent.yaml"
    "$gg" run --config "$root/agent.yaml" --json >"$OUT/agent-pipes.jsonl" \
        2>"$OUT/agent-pipes.err" &
    local agent=$!
    for _ in $(seq 60); do
        grep -q '\[agent\] ready' "$OUT/agent-pipes.err" && break
        kill -0 $agent 2>/dev/null || break
        sleep 1
    done
    if ! grep -q '\[agent\] ready' "$OUT/agent-pipes.err"; then
        step "the agent did not start: see agent-pipes.err"
        kill -TERM $agent 2>/dev/null
        return
    fi
    python3 "$workloads" hash 40 >"$OUT/agent-hash.json" 2>&1
    python3 "$workloads" tensor 40 >"$OUT/agent-tensor.json" 2>&1
    kill -TERM $agent
    wait $agent
    grep -h '"DEVICE-PIPES-\|"GG-CORR-' "$OUT/agent-pipes.jsonl" \
        >"$OUT/agent-pipes-detections.jsonl"
    step "detections: $(wc -l <"$OUT/agent-pipes-detections.jsonl")"
}

# What the agent costs a real GPU job (point 5).
cost() {
    timeout 300 python3 bench/gpu_job_cost.py --agent "$gg" --rounds 2 --seconds 12 \
        >"$OUT/cost.txt" 2>&1
    step "cost: $(grep -c 'median' "$OUT/cost.txt") workloads measured"
}

step machine
{
    uname -a
    nvidia-smi --query-gpu=name,driver_version,mig.mode.current --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
    ls /sys/kernel/btf/vmlinux
} >"$OUT/machine.txt" 2>&1
timeout 30 "$gg" gpus --json >"$OUT/gpus-idle.json" 2>"$OUT/gpus-idle.err"
for part in ${*:-acceptance pipes cost}; do
    case $part in
        acceptance | pipes | cost) step "$part" && $part ;;
        *) step "no part '$part' (acceptance, pipes, cost)" ;;
    esac
done
step done
