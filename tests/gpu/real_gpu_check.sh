#!/usr/bin/env bash
# gpuguard against a real NVIDIA GPU and real CUDA processes: a manual
# acceptance check for hosts with a GPU, PyTorch and root (CI has no GPU and
# never runs it; the suites test the same paths on fake NVML and mknod nodes).
#
#   sudo tests/gpu/real_gpu_check.sh [path/to/gpuguard]     (default: build/agent/gpuguard)
#
# Checks, each printed PASS or FAIL (exit 1 on any FAIL):
#  - the NVML backend (the real libnvidia-ml.so.1, dlopen'ed) reports the GPU
#    and a CUDA process's memory;
#  - the /proc bootstrap finds a CUDA process started before the agent;
#  - the sensor reports a CUDA process's opens of /dev/nvidia* and of
#    nvidia-uvm (a dynamic major read from /proc/devices) by device number;
#  - the agent is not listed as a GPU process (NVML's own fds);
#  - detections: a CUDA process whose command line carries a stratum URL is
#    killed (GG-CORR-0001, action kill through its pidfd); an innocent-looking
#    one connecting to a loopback pool is GG-CORR-0002 and its stratum login
#    GG-CORR-0003; one taking 26 GiB without computing is GG-CORR-0008 (needs
#    a GPU with more than 30 GiB free);
#  - `gpuguard replay` of the journal gives the live detections again.
# The workloads run about a minute; everything goes to a scratch directory.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
gpuguard="$(realpath "${1:-$here/../../build/agent/gpuguard}")"
work="$(mktemp -d /tmp/gg-real-gpu.XXXXXX)"
port=3333
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
}
trap cleanup EXIT
failures=0
check() {  # check NAME COMMAND...: PASS when the command succeeds
    local name="$1"
    shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
python_has() { python3 -c "$1" 2>/dev/null; }

echo "gpuguard: $gpuguard; scratch: $work"
nvidia-smi -L || { echo "FAIL no NVIDIA GPU (nvidia-smi)"; exit 1; }
python_has "import torch; assert torch.cuda.is_available()" || {
    echo "FAIL PyTorch with CUDA is needed for the workloads"
    exit 1
}

"$gpuguard" gpus --json >"$work/gpus-idle.json" 2>"$work/gpus.log"
check "NVML backend reports the GPU" python3 -c "
import json, sys
d = json.load(open('$work/gpus-idle.json'))
nv = [g for g in d['devices'] if g['backend'] == 'nvml']
print('  ', [(g['model'], g['metrics'].get('memory_total_bytes')) for g in nv])
sys.exit(not nv or not nv[0]['metrics'].get('memory_total_bytes'))"

python3 "$here/workload.py" compute 150 3 >"$work/early.log" 2>&1 &
early=$!
pids+=("$early")
for _ in $(seq 60); do
    "$gpuguard" gpus --json >"$work/gpus-busy.json" 2>>"$work/gpus.log"
    grep -q "\"pid\": $early" "$work/gpus-busy.json" && break
    sleep 0.5
done
check "NVML reports the CUDA process's memory" python3 -c "
import json, sys
p = [p for p in json.load(open('$work/gpus-busy.json'))['processes'] if p['pid'] == $early]
print('  ', p)
sys.exit(not p or not p[0].get('memory_bytes'))"

mkdir -p "$work/rules.d"
cat >"$work/miner-rules.yaml" <<YAML
signatures:
  override:
    - {id: GG-STRATUM-0001, action: kill}
YAML
cat >"$work/config.yaml" <<YAML
control:
  socket: $work/control.sock
sensor:
  connect_loopback: true
backends:
  interval_ms: 500
journal:
  dir: $work/journal
rules:
  main_file: $work/miner-rules.yaml
  drop_in_dir: $work/rules.d
enforcement:
  grace_period_ms: 1000
outputs:
  - name: file
    type: file
    address: $work/alerts.jsonl
YAML
"$gpuguard" run --config "$work/config.yaml" --json --print-events --event-types gpu_open \
    >"$work/run.jsonl" 2>"$work/agent.log" &
agent=$!
pids+=("$agent")
for _ in $(seq 120); do
    grep -q '\[agent\] ready' "$work/agent.log" && break
    kill -0 "$agent" 2>/dev/null || break
    sleep 0.5
done
if ! grep -q '\[agent\] ready' "$work/agent.log"; then
    echo "FAIL agent not ready"
    cat "$work/agent.log"
    exit 1
fi

python3 "$here/pool.py" "$port" 90 >"$work/pool.log" 2>&1 &
pids+=($!)
sleep 1
python3 "$here/workload.py" compute 60 1 -o "stratum+tcp://127.0.0.1:$port" -u 48edfHu7V9Z84Yzz \
    >"$work/miner.log" 2>&1 &
miner=$!
pids+=("$miner")
python3 "$here/workload.py" netminer 45 "127.0.0.1:$port" >"$work/netminer.log" 2>&1 &
netminer=$!
pids+=("$netminer")
python3 "$here/workload.py" hoard 26 30 >"$work/hoard.log" 2>&1 &
hoarder=$!
pids+=("$hoarder")
echo "   early=$early miner=$miner netminer=$netminer hoarder=$hoarder agent=$agent"

# Until every expected detection is in (at most 60 s).
expect="GG-CORR-0001:$miner GG-CORR-0002:$netminer GG-CORR-0003:$netminer GG-CORR-0008:$hoarder"
seen() {
    python3 -c "
import json, sys
got = set()
for line in open('$work/alerts.jsonl'):
    r = json.loads(line)
    if r.get('gpuguard', {}).get('record', 'detection') == 'detection' and 'rule' in r:
        got.add('%s:%s' % (r['rule']['id'], r['process']['pid']))
missing = [e for e in '$expect'.split() if e not in got]
if missing and len(sys.argv) > 1: print('   missing:', missing, 'got:', sorted(got))
sys.exit(bool(missing))" "$@" 2>/dev/null
}
for _ in $(seq 120); do seen && break; sleep 0.5; done
check "detections $expect" seen verbose
check "miner-by-command-line killed through its pidfd" python3 -c "
import json, sys
ok = [r for r in map(json.loads, open('$work/alerts.jsonl'))
      if r.get('gpuguard', {}).get('record') == 'enforcement' and r['process']['pid'] == $miner
      and r['event']['action'] == 'kill' and r['gpuguard']['enforcement']['outcome'] == 'success']
sys.exit(not ok)"

"$gpuguard" ps --socket "$work/control.sock" --json >"$work/ps.json"
"$gpuguard" ps --socket "$work/control.sock"
check "the agent is not a GPU process; the early one is (bootstrap), with NVML's memory" python3 -c "
import json, sys
ps = {p['pid']: p for p in json.load(open('$work/ps.json'))}
sys.exit($agent in ps or $early not in ps
         or not any(u.get('memory_bytes') for u in ps[$early].get('gpu_usage', [])))"
uvm_major=$(awk '$2 == "nvidia-uvm" {print $1}' /proc/devices)
check "gpu_open events of a CUDA process by device number (195:*, nvidia-uvm $uvm_major:*)" python3 -c "
import json, sys
events = [json.loads(l) for l in open('$work/run.jsonl')]
devices = {e['gpu_open']['device'] for e in events
           if e.get('type') == 'gpu_open' and e['process']['pid'] == $netminer}
print('  ', sorted(devices))
sys.exit(not any(d.startswith('195:') for d in devices) or not any(d.startswith('$uvm_major:') for d in devices))"

kill -TERM "$agent"
wait "$agent"
check "agent stops cleanly on SIGTERM" test $? -eq 0
"$gpuguard" replay --rules "$work/miner-rules.yaml" "$work/journal" >"$work/replay.jsonl" 2>"$work/replay.log"
check "replay of the journal gives the live detections again" python3 -c "
import json, sys
key = lambda r: (r['rule']['id'], r['process']['pid'], r['gpuguard']['detection']['update'])
live = sorted(key(r) for r in map(json.loads, open('$work/alerts.jsonl'))
              if r.get('gpuguard', {}).get('record', 'detection') == 'detection' and 'rule' in r)
replayed = sorted(key(r) for r in map(json.loads, open('$work/replay.jsonl')))
print('   live', live); print('   replayed', replayed)
sys.exit(live != replayed)"

echo "$failures check(s) failed; files in $work"
exit $((failures > 0))
