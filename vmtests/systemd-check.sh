#!/bin/bash
# Runs inside the VM vmtests/systemd.sh boots, as a oneshot service after
# boot, with systemd as PID 1: the packaged gpuguard.service started,
# inspected, made to enforce (each outcome tied to its process), reloaded,
# stopped (the sender systemd), restarted on a bad configuration, then
# SIGKILLed and SIGSTOPped (Restart=always and the watchdog bring it back,
# the next start reports the gap) with systemctl and kill(1) alone. One
# "GG-SYSTEMD PASS|FAIL name: detail" line per check on the console, then
# "GG-SYSTEMD-RESULT pass|fail" and a poweroff.
set -u
passed=0 failed=0
alerts=/var/lib/gpuguard/journal/alerts.jsonl
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
# record_with STRING...: one line of the file output holds every STRING
# (fixed strings): a record tied to its process, sender or peer.
record_with() {
    local lines
    lines=$(grep -aF -- "$1" "$alerts" 2>/dev/null) || return 1
    shift
    for string; do
        lines=$(grep -F -- "$string" <<<"$lines") || return 1
    done
}
# restarted PID RESTARTS: systemd started the unit again (NRestarts above
# RESTARTS: Restart=, not a start by hand) and the new process is ready
# (Type=notify: active only after READY=1), with a MainPID other than PID.
restarted() {
    local now
    now=$(systemctl show -P MainPID gpuguard)
    [[ $now != 0 && $now != "$1" && $(systemctl show -P NRestarts gpuguard) -gt $2 &&
        $(systemctl show -P ActiveState gpuguard) == active &&
        $(systemctl show -P SubState gpuguard) == running ]]
}
# watchdog_restarted PID RESTARTS TIMEOUTS: systemd logged a watchdog timeout
# more than TIMEOUTS, and restarted the unit.
watchdog_restarted() {
    (($(journalctl -u gpuguard -o cat | grep -c 'Watchdog timeout') > $3)) && restarted "$1" "$2"
}
# output_drops: packets the agent's nftables output chain dropped to its v4 set.
output_drops() {
    nft list chain inet gpuguard output | grep -o '@blocked_v4 counter packets [0-9]*' |
        grep -o '[0-9]*$'
}
# blocked_connect: with the listener still listening, a new connect to
# 10.77.0.1:3333 fails (bounded: 3 s) and the agent's rule counts the drop.
blocked_connect() {
    local before after
    ss -ltn | grep -q '10.77.0.1:3333' || { echo "the listener is gone"; return 1; }
    before=$(output_drops) || { echo "no drop rule for @blocked_v4"; return 1; }
    if timeout 3 bash -c 'exec 5<>/dev/tcp/10.77.0.1/3333'; then
        echo "the connect succeeded"
        return 1
    fi
    after=$(output_drops)
    ((after > before)) || { echo "drops $before -> $after"; return 1; }
}
finish() {
    # On a failure, the records the outcome checks read, for the log.
    if ((failed)); then
        grep -aE 'GG-CORR-00(19|20)|gpuguard\.enforcement|"destination"' "$alerts" 2>/dev/null |
            cut -c1-5000 | sed 's/^/GG-SYSTEMD alert: /'
    fi
    echo "GG-SYSTEMD-RESULT $([[ $failed == 0 && $passed -gt 0 ]] && echo pass || echo fail) passed=$passed failed=$failed"
    journalctl -u gpuguard --no-pager -o short-monotonic | tail -n 1000 | sed 's/^/GG-SYSTEMD agent: /'
    systemctl poweroff --no-block
    exit 0
}
trap finish EXIT

depmod -a
ip link set lo up
ip addr add 10.77.0.1/32 dev lo
# The test's "GPU": a node with the numbers the config registers as one.
mknod -m 0666 /dev/gg-gpu0 c 1 7

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
wait "$miner" 2>/dev/null
status=$?
# 143 or 137: a SIGTERM, or the SIGKILL after the grace period; sleep 120
# would have exited 0.
check kill_signal "the miner (pid $miner) ended by a signal (wait status $status)" \
    bash -c "[[ $status == 137 || $status == 143 ]]"
check kill_outcome "a kill outcome 'success' for the miner's pid $miner in the file output" \
    wait_for 10 record_with '"dataset":"gpuguard.enforcement"' \
    '"action":"kill","outcome":"success"' "\"process\":{\"pid\":$miner,"

# block_ip: a GPU process connecting to a stratum port on 10.77.0.1.
nc -l -k 10.77.0.1 3333 >/dev/null &
listener=$!
wait_for 10 bash -c 'ss -ltn | grep -q 10.77.0.1:3333'
bash -c 'exec 7<>/dev/gg-gpu0; exec 5<>/dev/tcp/10.77.0.1/3333; sleep 60' &
client=$!
# The detection and the outcome name the client's pid and the peer it
# connected to; that address is in the agent's set, and a new connect to it
# is dropped by the agent's rule (the listener, on the VM's loopback, still
# there).
check block_ip_detection "a detection naming pid $client and its peer 10.77.0.1:3333" \
    wait_for 30 record_with "\"process\":{\"pid\":$client," \
    '"destination":{"ip":"10.77.0.1","port":3333'
check block_ip_outcome "a block_ip outcome 'success' for pid $client" wait_for 30 \
    record_with '"dataset":"gpuguard.enforcement"' '"action":"block_ip","outcome":"success"' \
    "\"process\":{\"pid\":$client,"
check block_ip "10.77.0.1 in the agent's blocked_v4 set" wait_for 30 \
    bash -c 'nft list set inet gpuguard blocked_v4 | grep -qw "10\.77\.0\.1"'
check block_ip_drops "a new connect to 10.77.0.1:3333 dropped by the agent's rule" blocked_connect
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
# Sent by systemd: pid 1, its executable, in the record of this agent's stop.
check stop_reported "GG-CORR-0019: SIGTERM to the agent (pid $pid) from systemd (pid 1)" \
    record_with '"GG-CORR-0019"' '"process":{"pid":1,' '"executable":"/usr/lib/systemd/systemd"' \
    "SIGTERM to the agent (pid $pid) from pid 1 (systemd)"

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

# Restart=always after a SIGKILL, and the watchdog after a SIGSTOP; each
# time the agent is back (a new MainPID, ready) and its next start reports
# the gap (GG-CORR-0020 naming the previous agent's pid). The unit's
# WatchdogSec=30s would make the SIGSTOP check wait 30 s: a drop-in, here in
# the VM only, makes it 10 s (the agent pings every quarter of the
# WATCHDOG_USEC systemd passes it). It applies from the next start, the
# restart after the SIGKILL; everything above ran under the packaged 30 s.
mkdir -p /etc/systemd/system/gpuguard.service.d
printf '[Service]\nWatchdogSec=10s\n' >/etc/systemd/system/gpuguard.service.d/90-vmtest-watchdog.conf
systemctl daemon-reload
pid=$(systemctl show -P MainPID gpuguard)
restarts=$(systemctl show -P NRestarts gpuguard)
kill -KILL "$pid"
check restart_after_sigkill "systemd started a new agent after SIGKILL of pid $pid (Restart=always)" \
    wait_for 60 restarted "$pid" "$restarts"
# The killer is known: the kernel's signal hook kept it in the pinned map.
check down_reported_after_sigkill "GG-CORR-0020: agent (pid $pid) down, killed by SIGKILL from pid $$" \
    wait_for 20 record_with '"GG-CORR-0020"' "agent (pid $pid) was down from" \
    "killed by SIGKILL from pid $$ ("
pid=$(systemctl show -P MainPID gpuguard)
restarts=$(systemctl show -P NRestarts gpuguard)
check watchdog_10s "the new agent (pid $pid) pings a 10 s watchdog" \
    bash -c "journalctl -u gpuguard _PID=$pid -o cat | grep -q 'systemd watchdog: every 10000 ms'"
timeouts=$(journalctl -u gpuguard -o cat | grep -c 'Watchdog timeout')
kill -STOP "$pid"
check watchdog_restart "a watchdog timeout for the stopped agent (pid $pid), then a new agent" \
    wait_for 60 watchdog_restarted "$pid" "$restarts" "$timeouts"
check down_reported_after_watchdog "GG-CORR-0020: agent (pid $pid) down" \
    wait_for 20 record_with '"GG-CORR-0020"' "agent (pid $pid) was down from"
