#!/bin/bash
# Runs inside the VM vmtests/systemd.sh boots, as a oneshot service after
# boot, with systemd as PID 1: the packaged gpuguard.service started,
# inspected, made to enforce, reloaded and stopped with systemctl. One
# "GG-SYSTEMD PASS|FAIL name: detail" line per check on the console, then
# "GG-SYSTEMD-RESULT pass|fail" and a poweroff.
set -u
passed=0 failed=0
check() { # check NAME DETAIL COMMAND...: one line, counted
    local name="$1" detail="$2"
    shift 2
    if "$@" >/tmp/check.out 2>&1; then
        echo "GG-SYSTEMD PASS $name"
        passed=$((passed + 1))
    else
        echo "GG-SYSTEMD FAIL $name: $detail: $(tr '\n' ' ' </tmp/check.out | cut -c1-300)"
        failed=$((failed + 1))
    fi
}
# wait_for SECONDS COMMAND...: polls every 100 ms until COMMAND succeeds.
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}
finish() {
    echo "GG-SYSTEMD-RESULT $([[ $failed == 0 && $passed -gt 0 ]] && echo pass || echo fail) passed=$passed failed=$failed"
    journalctl -u gpuguard --no-pager -o short-monotonic | tail -n 200 | sed 's/^/GG-SYSTEMD agent: /'
    systemctl poweroff --no-block
    exit 0
}
trap finish EXIT

depmod -a
ip link set lo up
ip addr add 10.77.0.1/32 dev lo
# The test's "GPU": a node with the numbers the config registers as one.
mknod -m 0666 /dev/gg-gpu0 c 1 7

alerts=/var/lib/gpuguard/journal/alerts.jsonl
cat >/etc/gpuguard/gpuguard.yaml <<'YAML'
log:
  level: info
sensor:
  extra_gpu_devices: ["1:7"]
enforcement:
  grace_period_ms: 500
outputs:
  - name: file
    type: file
    address: /var/lib/gpuguard/journal/alerts.jsonl
YAML
cat >/etc/gpuguard/miner-rules.yaml <<'YAML'
rules:
  - id: local-kill
    name: Test miner killed
    severity: critical
    confidence: 0.9
    action: kill
    process_name: ["gg-miner-*"]
  - id: local-deny-gpu
    name: Test miner denied the GPU
    severity: critical
    confidence: 0.9
    action: deny_gpu
    process_name: ["gg-deny-*"]
YAML
cat >/etc/gpuguard/rules.d/10-block.yaml <<'YAML'
signatures:
  override:
    - id: GG-PORT-0001
      action: block_ip
YAML
chmod 0644 /etc/gpuguard/*.yaml /etc/gpuguard/rules.d/*.yaml

# Start: Type=notify, so `systemctl start` returns once the agent said READY.
check start "systemctl start gpuguard" timeout 300 systemctl start gpuguard
check ready "active (running) with the agent's status text" \
    bash -c '[[ $(systemctl show -P ActiveState gpuguard) == active &&
               $(systemctl show -P SubState gpuguard) == running &&
               -n $(systemctl show -P StatusText gpuguard) ]]'
pid=$(systemctl show -P MainPID gpuguard)
echo "GG-SYSTEMD info: MainPID $pid, status: $(systemctl show -P StatusText gpuguard)"

# The hardening, on the running process.
check no_new_privileges "NoNewPrivs 1 in /proc/PID/status" grep -Eq '^NoNewPrivs:\s+1$' "/proc/$pid/status"
# CAP_DAC_READ_SEARCH 2, CAP_KILL 5, CAP_NET_ADMIN 12, CAP_SYS_PTRACE 19,
# CAP_SYS_RESOURCE 24, CAP_PERFMON 38, CAP_BPF 39: the unit's set, no more.
want=$(printf '%016x' $(((1 << 2) | (1 << 5) | (1 << 12) | (1 << 19) | (1 << 24) | (1 << 38) | (1 << 39))))
for set in CapEff CapPrm CapBnd; do
    check "capabilities_$set" "$set is the unit's set ($want)" \
        grep -Eq "^$set:\s+$want$" "/proc/$pid/status"
done
check protect_system_strict "/usr read-only in the agent's mount namespace" \
    bash -c "! nsenter -t $pid -m touch /usr/gg-write-test"
check state_directory_writable "the journal directory writable there" \
    nsenter -t "$pid" -m touch /var/lib/gpuguard/journal/gg-write-test

# Enforcement, not dry run, under those capabilities.
# kill: a "miner" (a copy of sleep, by name) holding the GPU node.
cp /bin/sleep /root/gg-miner-1
(exec 7<>/dev/gg-gpu0; exec /root/gg-miner-1 120) &
miner=$!
check kill "the miner (pid $miner) ended by the agent" wait_for 30 bash -c "! kill -0 $miner 2>/dev/null"
check kill_outcome "a successful kill outcome in the file output" wait_for 10 \
    grep -q "\"action\":\"kill\".*\"outcome\":\"success\"" "$alerts"
wait "$miner" 2>/dev/null

# block_ip: a GPU process connecting to a stratum port on 10.77.0.1.
nc -l -k 10.77.0.1 3333 >/dev/null &
listener=$!
wait_for 10 bash -c 'ss -ltn | grep -q 10.77.0.1:3333'
bash -c 'exec 7<>/dev/gg-gpu0; exec 5<>/dev/tcp/10.77.0.1/3333; sleep 60' &
client=$!
check block_ip "10.77.0.1 in the agent's nftables set" wait_for 30 \
    bash -c 'nft list ruleset | grep -q "10.77.0.1"'
kill "$client" "$listener" 2>/dev/null

# deny_gpu: a process named gg-deny-1 in a scope of its own opens the node,
# and again after its detection.
cp /bin/bash /root/gg-deny-1
rm -f /root/deny.result
systemd-run --scope --unit gg-deny-test /root/gg-deny-1 -c '
    exec 7<>/dev/gg-gpu0
    for i in $(seq 300); do
        sleep 0.1
        if ! : 2>/dev/null 8<>/dev/gg-gpu0; then echo denied >/root/deny.result; exit 0; fi
    done
    echo still-open >/root/deny.result' >/dev/null 2>&1 &
check deny_gpu "the node denied to the detected process's cgroup" wait_for 40 \
    grep -qx denied /root/deny.result
check deny_gpu_elsewhere "the node still opens outside that cgroup" bash -c ': 8<>/dev/gg-gpu0'

# Reload: SIGHUP through ExecReload; the same process applies log.level.
sed -i 's/level: info/level: debug/' /etc/gpuguard/gpuguard.yaml
check reload "systemctl reload" systemctl reload gpuguard
# The agent may apply the change before the SIGHUP (it watches the file too).
check reload_applied "the agent applied the change and re-read on SIGHUP, same MainPID" \
    wait_for 20 bash -c "journalctl -u gpuguard -o cat | grep -q 'applied log.level: info -> debug' &&
        journalctl -u gpuguard -o cat | grep -q 'config reload (SIGHUP)' &&
        [[ \$(systemctl show -P MainPID gpuguard) == $pid ]]"
check still_running "still active 35 s after the reload (the watchdog is pinged)" bash -c \
    "sleep 35; [[ \$(systemctl show -P ActiveState gpuguard) == active &&
                 \$(systemctl show -P MainPID gpuguard) == $pid ]]"

# Stop: a clean exit, and the stop reported (GG-CORR-0019, sender systemd).
check stop "systemctl stop" timeout 60 systemctl stop gpuguard
check stopped_cleanly "inactive, exit status 0" bash -c \
    '[[ $(systemctl show -P ActiveState gpuguard) == inactive &&
        $(systemctl show -P ExecMainStatus gpuguard) == 0 ]]'
check stop_reported "GG-CORR-0019 naming systemd in the file output" \
    grep -q '"GG-CORR-0019".*' "$alerts"

# Restart on a bad configuration (issue 39): a broken rule file and a broken
# gpuguard.yaml, then `systemctl restart` (the agent is stopped: it starts).
# The agent runs on the last good set (the configuration's copy in the
# unit's StateDirectory, the rules' in journal.dir/last-good) with both
# reported as critical detections, and the kill rule of that set still kills.
printf 'rules:\n  - id: [broken\n' >/etc/gpuguard/miner-rules.yaml
printf 'bogus_section: 1\n' >>/etc/gpuguard/gpuguard.yaml
check restart_on_bad_config "systemctl restart with a broken miner-rules.yaml and gpuguard.yaml" \
    timeout 300 systemctl restart gpuguard
check restart_running "active (running) on the last good set" \
    bash -c '[[ $(systemctl show -P ActiveState gpuguard) == active &&
               $(systemctl show -P SubState gpuguard) == running ]]'
check rules_rejected_reported "the critical GG-AGENT-0002 naming miner-rules.yaml:LINE" \
    wait_for 20 grep -Eq '"GG-AGENT-0002".*miner-rules\.yaml:[0-9]+:[0-9]+' "$alerts"
check config_rejected_reported "the critical GG-AGENT-0003 naming gpuguard.yaml and the key" \
    wait_for 20 grep -Eq '"GG-AGENT-0003".*gpuguard\.yaml:[0-9]+.*bogus_section' "$alerts"
cp /bin/sleep /root/gg-miner-2
(exec 7<>/dev/gg-gpu0; exec /root/gg-miner-2 120) &
miner=$!
check kill_on_last_good "a miner (pid $miner) still killed on the last good rules" \
    wait_for 30 bash -c "! kill -0 $miner 2>/dev/null"
wait "$miner" 2>/dev/null
