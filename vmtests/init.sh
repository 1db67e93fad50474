#!/bin/busybox sh
# /init of the vmtests initramfs (see vmtests/run.sh): sets up the file systems
# the agent expects on a real host, runs the selected privileged GoogleTests
# and `gpuguard probe`, reports through the serial console and powers off.
#
# It runs as PID 1 under busybox sh, so there is no `set -e` (a failing step
# must still reach the report and the power-off) and no `set -u` (busybox sh
# expands unset variables in the config consistently). Every line the host
# parses starts with "VMTEST-".

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
bb=/bin/busybox

# Whatever happens below, never return: PID 1 exiting panics the kernel, which
# the host would only notice at its timeout.
finish() {
    $bb sync
    $bb poweroff -f
    $bb sleep 60
}
trap finish EXIT

$bb mkdir -p /proc /sys /dev /tmp /run /sys/fs/cgroup
$bb mount -t proc proc /proc
$bb mount -t sysfs sysfs /sys
$bb mount -t devtmpfs devtmpfs /dev
$bb mkdir -p /dev/pts /dev/shm
$bb mount -t devpts devpts /dev/pts
$bb mount -t tmpfs tmpfs /dev/shm
# /tmp stays on the initramfs (already RAM): a tmpfs there would hide a
# build tree under /tmp, whose paths the tests have compiled in.
$bb chmod 1777 /tmp
$bb mount -t tmpfs tmpfs /run
# The agent attaches tracepoints through tracefs; older tooling looks under
# debugfs/tracing, so both are mounted as on a stock Debian host.
$bb mount -t tracefs tracefs /sys/kernel/tracing
$bb mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# securityfs: `gpuguard probe` reads the active LSM list from it.
$bb mount -t securityfs securityfs /sys/kernel/security
$bb mount -t cgroup2 cgroup2 /sys/fs/cgroup
$bb mount -t bpf bpffs /sys/fs/bpf

# Written by run.sh: VMTEST_LABEL, VMTEST_FILTER, VMTEST_MODES, VMTEST_MODE_FILTER,
# VMTEST_TESTS, VMTEST_GPUGUARD, VMTEST_MODULE (the module the tests load).
. /vmtests/config

echo "VMTEST-BOOT kernel=$($bb uname -r) label=$VMTEST_LABEL lsm=$($bb cat /sys/kernel/security/lsm)"

# Modules the tests need (veth, nf_tables, ...), decompressed and ordered
# dependencies first by run.sh; built-in ones are not listed.
if [ -f /vmtests/modules ]; then
    while read -r module; do
        [ -n "$module" ] || continue
        $bb insmod "$module" || echo "VMTEST-WARN insmod $module failed"
    done </vmtests/modules
fi

# Tests create network namespaces of their own; the initial one only needs
# loopback (the agent's loopback pool tests connect to 127.0.0.1).
ip link set lo up

# The same binary and filter as on a host; missing capabilities fail instead
# of skipping. The output goes to the console live (a hang stays visible) and
# to a file the counts below are taken from.
cd /tmp || exit 1
start=$($bb date +%s)
# The whole filter in the first attachment mode, the sensor's suites in each
# other one (a mode the kernel refuses fails them: nothing skips).
tests_rc=0
: >/tmp/tests.log
filter="$VMTEST_FILTER"
for mode in ${VMTEST_MODES:-auto}; do
    echo "VMTEST-MODE $mode"
    {
        # Whole-agent start-up under TCG takes 30-60 s: allowed, not measured.
        GPUGUARD_TEST_ATTACH=$mode GPUGUARD_REQUIRE_PRIVILEGED=1 GPUGUARD_TEST_START_TIMEOUT_S=180 \
            GPUGUARD_VMTEST_MODULE="$VMTEST_MODULE" "$VMTEST_TESTS" --gtest_color=no \
            "--gtest_filter=$filter"
        echo $? >/tmp/tests.rc
    } 2>&1 | $bb tee -a /tmp/tests.log
    rc=$($bb cat /tmp/tests.rc 2>/dev/null || echo 255)
    [ "$rc" = 0 ] || tests_rc=$rc
    filter="$VMTEST_MODE_FILTER"
done
seconds=$(($($bb date +%s) - start))
# One line per finished test carries its duration "(N ms)"; gtest's closing
# summary repeats failed and skipped names without one, so count only those.
passed=$($bb grep -c '^\[       OK \] .* ms)$' /tmp/tests.log)
failed=$($bb grep -c '^\[  FAILED  \] .* ms)$' /tmp/tests.log)
skipped=$($bb grep -c '^\[  SKIPPED \] .* ms)$' /tmp/tests.log)

echo "VMTEST-PROBE-BEGIN"
"$VMTEST_GPUGUARD" probe >/tmp/probe.txt 2>&1
probe_rc=$?
$bb cat /tmp/probe.txt
echo "VMTEST-PROBE-END rc=$probe_rc"
# One compact line for the host: feature=available|unavailable|MISSING ...
echo "VMTEST-FEATURES $($bb awk 'NR > 1 && NF >= 2 { printf "%s=%s ", $1, $2 }' /tmp/probe.txt)"

# Every selected test must have run here: a skip (e.g. the LSM deny test on
# a kernel without BPF LSM) is a failure of the run, not a pass.
status=pass
if [ "$tests_rc" != 0 ] || [ "$failed" != 0 ] || [ "$skipped" != 0 ] || [ "$passed" = 0 ] ||
    [ "$probe_rc" != 0 ]; then
    status=fail
    echo "VMTEST-DMESG-BEGIN"
    $bb dmesg | $bb tail -n 40
    echo "VMTEST-DMESG-END"
fi
echo "VMTEST-RESULT kernel=$($bb uname -r) status=$status passed=$passed failed=$failed" \
    "skipped=$skipped tests_rc=$tests_rc probe_rc=$probe_rc seconds=$seconds"
