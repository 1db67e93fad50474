#!/usr/bin/env bash
# vmtests: runs the privileged eBPF GoogleTests (tests/bpf) on other kernels.
#
# For each kernel package (Debian's, fetched with `apt-get download` and
# unpacked with `dpkg -x`) it builds an initramfs holding busybox, the built
# `gpuguard` and `gpuguard_bpf_tests` binaries (at their build-tree paths, which
# are compiled into the tests), the host tools the tests drive and every
# shared library ldd finds, boots it under qemu with BPF LSM enabled, and
# reads the results back from the serial console (vmtests/init.sh is /init).
#
#   bash vmtests/run.sh [--kernel PKG]... [--build DIR] [--filter GTEST_FILTER]
#                       [--modes "MODE..."] [--accel auto|kvm|tcg] [--timeout S]
#                       [--memory M] [--smp N] [--jobs N]
#
# --jobs N boots up to N kernels at once (each its own qemu; with --smp 1 on
# a 2-core host, two kernels take about the time of one).
#
# Default kernels: Debian 12's 6.1 and 6.12 cloud kernels. PKG may be a
# meta-package (linux-image-cloud-amd64) or a concrete one
# (linux-image-6.12.117+deb12-amd64). Exit status 0 only when every kernel
# passed. Logs, probe tables and summary.txt go to BUILD/vmtests/, downloaded
# packages to BUILD/vmtests-cache/.
#
# The host kernel is covered by CTest (`ctest -L privileged`, the same
# binary); this script only boots other kernels.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The kernel-dependent subset of tests/bpf: program loading, every tracing
# hook, in-kernel kill, cgroup and LSM enforcement, nftables blocking and the
# feature probe. Left out, because they test the agent's user-space pipeline
# on top of hooks the suites above already cover, and assert wall-clock
# latencies (detections within 100 ms) that an emulated CPU cannot keep:
#   AgentRunTest.*     `gpuguard run`/`ps` CLI end to end
#   AgentDetectTest.*  live detection, rule reload and journal replay
#   ControlSocketTest.* the agent's Unix control socket (no BPF at all)
# Their tools (bash, env) are in the image, so --filter '*' runs them too.
default_filter="SensorLoaderTest.*:SensorProbe.*:OpenTracingTest.*:IoctlTracingTest.*"
default_filter+=":ConnectTracingTest.*:ConnectLoopbackFilter.*:SchedTracingTest.*"
default_filter+=":RingBufferDrops.*:KillNowTest.*:CgroupEnforceTest.*:LsmEnforce.*"
default_filter+=":NftBlockerTest.*:FileChangeTracingTest.*:TamperTracingTest.*"
# Kernel module loads (never on a build host): the sensor's module_load event
# and GG-CORR-0018 from the real agent (no latency bound: it runs here).
default_filter+=":ModuleLoadTest.*:ModuleLoadAgentTest.*"

# The sensor's attachment modes (sensor.attach): the filter above runs in the
# first, the sensor's own suites again in each other one; the events must
# not depend on the mode. Debian's kernels allow all three (this build host
# refuses fentry, so kernel_functions is tested only here).
default_modes="kernel_functions raw_syscalls syscall_tracepoints"
mode_filter="OpenTracingTest.*:IoctlTracingTest.*:ConnectTracingTest.*:ConnectLoopbackFilter.*"
mode_filter+=":SchedTracingTest.*:RingBufferDrops.*:KillNowTest.*:FileChangeTracingTest.*:TamperTracingTest.*"
# Payload sampling through the syscall hooks of kernel_functions (the
# socket-layer variant needs 6.3+: its cases would skip on 6.1, and a skip
# fails here).
# Left out: the file-write count comes from /proc/PID/io's write_bytes, which
# stays 0 on the VM's RAM-backed root (no block device), whatever the mode.
payload_filter=":Hooks/PayloadTracingTest.*/syscall_tracepoints"
payload_filter+="-Hooks/PayloadTracingTest.gpu_process_sends_and_file_writes_are_counted/*"
# In the first mode only: the other modes' payload paths run on the host.
default_filter+="$payload_filter"

# Debian 12's 6.1 kernel and the 6.12 backport, cloud flavour (a third of the
# size of the generic one; serial console and everything BPF needs built in).
default_kernels=(linux-image-cloud-amd64 linux-image-6.12-cloud-amd64)

# BPF LSM only runs when "bpf" is in the boot-time LSM list; Debian's default
# list has it, but naming it keeps the LSM test meaningful if that changes.
lsm_list="landlock,lockdown,yama,integrity,apparmor,bpf"

# Modules the tests load through the kernel: veth pairs (connect and cgroup
# connect tests) and nf_tables (the nftables blocker). Dependencies follow.
wanted_modules=(veth nf_tables)
# Modules the tests load themselves (ModuleLoadTest): in the image, not loaded
# by /init; the last one's path (after its dependencies) reaches them as
# GPUGUARD_VMTEST_MODULE.
# dummy (drivers/net/dummy.ko): in-tree, no dependencies, does nothing until
# a dummy link is made.
test_modules=(dummy)

# Host programs the tests execute, copied in with their libraries. The tests
# exec these exact paths (/bin/sleep and /bin/sh are copied and renamed by the
# kill_now tests, so they must be real binaries, not busybox links).
host_tools=(/usr/sbin/ip /usr/sbin/nft /usr/bin/nsenter /usr/bin/bash /usr/bin/dash
    /usr/bin/sleep /usr/bin/true /usr/bin/env)

kernels=()
build="${GPUGUARD_BUILD_DIR:-$repo/build}"
filter="$default_filter"
modes="$default_modes"
accel=auto
timeout_s=1800
memory=2G
smp=2
jobs=1

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-0}"
}

while (($#)); do
    case "$1" in
        -h | --help) usage 0 ;;
        --kernel | --build | --filter | --modes | --accel | --timeout | --memory | --smp | --jobs)
            (($# >= 2)) || { echo "vmtests: $1 needs a value" >&2; exit 2; } ;;&
        --kernel) kernels+=("$2"); shift 2 ;;
        --build) build="$2"; shift 2 ;;
        --filter) filter="$2"; shift 2 ;;
        --modes) modes="$2"; shift 2 ;;
        --accel) accel="$2"; shift 2 ;;
        --timeout) timeout_s="$2"; shift 2 ;;
        --memory) memory="$2"; shift 2 ;;
        --smp) smp="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        *) echo "vmtests: unknown argument $1" >&2; usage 2 >&2 ;;
    esac
done
[[ $accel == auto || $accel == kvm || $accel == tcg ]] || {
    echo "vmtests: --accel takes auto, kvm or tcg" >&2
    exit 2
}
((${#kernels[@]})) || kernels=("${default_kernels[@]}")
build="$(cd "$build" && pwd)"

source "$repo/vmtests/lib.sh"

for tool in qemu-system-x86_64 cpio apt-get apt-cache dpkg ldd strip timeout xz; do
    command -v "$tool" >/dev/null || die "$tool is missing (bash scripts/install-deps.sh installs it)"
done
# busybox-static: the dynamically linked busybox would need its libc in /init's
# world before anything is mounted; the static one has none.
busybox=/bin/busybox
if [[ ! -x $busybox ]] || ldd "$busybox" >/dev/null 2>&1; then
    die "$busybox must be the static busybox (package busybox-static)"
fi

gpuguard="$build/agent/gpuguard"
tests="$build/tests/bpf/gpuguard_bpf_tests"
for binary in "$gpuguard" "$tests"; do
    [[ -x $binary ]] || die "$binary is missing: build it first (ninja -C $build gpuguard gpuguard_bpf_tests)"
done

out="$build/vmtests"
cache="$build/vmtests-cache"
work="$out/work"
mkdir -p "$out" "$cache"
rm -rf "$work"
mkdir -p "$work"

# ---------------------------------------------------------------------------
# The common part of the initramfs: busybox, tools, test binaries, libraries.
# ---------------------------------------------------------------------------

build_common_image() {
    local root="$work/common"
    log "building the common initramfs part"
    mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,vmtests,proc,sys,dev,tmp,run}
    # Debian 12's merged /usr: /bin/sh and /usr/bin/sh are one file, as the
    # tests (which exec /bin/sh and expect that name back) assume.
    ln -s usr/bin "$root/bin"
    ln -s usr/sbin "$root/sbin"
    ln -s usr/lib "$root/lib"
    ln -s usr/lib64 "$root/lib64"

    local tool
    for tool in "${host_tools[@]}"; do
        [[ -x $tool ]] || die "$tool is missing (bash scripts/install-deps.sh installs it)"
        copy_with_libraries "$root" "$tool"
    done
    ln -s dash "$root/usr/bin/sh"

    # The binaries keep their build-tree paths: GPUGUARD_BINARY and the fake
    # NVML library path are compiled into the tests. Debug info is stripped
    # to keep the image (which lives in the VM's RAM) small.
    copy_with_libraries "$root" "$gpuguard"
    copy_with_libraries "$root" "$tests"
    strip --strip-debug "$root/$gpuguard" "$root/$tests"
    # The fake NVML library (AgentRunTest, outside the default filter).
    local nvml
    while read -r nvml; do
        copy_with_libraries "$root" "$nvml"
    done < <(find "$build/tests" -path '*/fake_nvml_lib/*' -name 'libnvidia-ml.so*')

    # busybox provides everything else (mount, insmod, awk, ...), without
    # replacing the real tools copied above.
    cp "$busybox" "$root/bin/busybox"
    local applet
    for applet in $("$busybox" --list-full); do
        [[ -e $root/$applet || -L $root/$applet ]] || ln -s /bin/busybox "$root/$applet"
    done

    # Tests run children as nobody (65534) and look users up.
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
        >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    install -m 0755 "$repo/vmtests/init.sh" "$root/init"

    # Uncompressed: qemu loads it directly and the kernel skips a slow
    # (emulated) decompression; the VM's RAM holds it either way.
    (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$work/common.cpio"
    log "common part: $(du -h "$work/common.cpio" | cut -f1)"
}

# ---------------------------------------------------------------------------
# Kernels: resolve, download (cached), unpack, pick modules.
# ---------------------------------------------------------------------------

# Builds the kernel's part of the initramfs (modules, config) into $2.cpio.
build_kernel_image() {
    local unpacked="$1" part="$2" label="$3"
    local root="$work/$label" release moddir
    release=$(basename "$(ls -d "$unpacked"/lib/modules/*)")
    moddir="$unpacked/lib/modules/$release"
    mkdir -p "$root/vmtests"

    # Debian's packages ship no modules.dep (depmod runs at install time), so
    # dependencies come from each module's .modinfo "depends=" field. Modules
    # are decompressed here: busybox insmod does not read .ko.xz/.ko.zst.
    # They go under usr/lib (the common part's /lib is a link to it).
    local list="$root/vmtests/modules"
    : >"$list"
    mkdir -p "$root/usr/lib/modules/$release"
    local -A module_paths=() loaded=()
    local path name
    while read -r path; do
        name=$(basename "$path")
        name=${name%%.ko*}
        module_paths[${name//-/_}]=$path
    done < <(find "$moddir/kernel" -name '*.ko*')

    # Appends a module to the load list after its dependencies (depth first).
    add_module() {
        local module="${1//-/_}" path target dep
        [[ -z ${loaded[$module]:-} ]] || return 0
        loaded[$module]=1
        if grep -Eq "/${1}\.ko\$|/${module}\.ko\$" "$moddir/modules.builtin"; then return 0; fi
        path=${module_paths[$module]:-}
        [[ -n $path ]] || die "$release: module $module is neither built in nor packaged"
        target="usr/lib/modules/$release/$module.ko"
        case "$path" in
            *.xz) xz -dc "$path" >"$root/$target" ;;
            *.zst) zstd -qdc "$path" >"$root/$target" ;;
            *.gz) gzip -dc "$path" >"$root/$target" ;;
            *) cp "$path" "$root/$target" ;;
        esac
        for dep in $(tr '\0' '\n' <"$root/$target" | sed -n 's/^depends=//p' | tr ',' ' '); do
            add_module "$dep"
        done
        echo "/$target" >>"$list"
    }
    for name in "${wanted_modules[@]}"; do add_module "$name"; done
    log "$release: modules $(tr '\n' ' ' <"$list")"
    # The tests' own (add_module writes to whatever $list names).
    local boot_list="$list"
    list="$root/vmtests/test-modules"
    : >"$list"
    for name in "${test_modules[@]}"; do add_module "$name"; done
    list="$boot_list"

    {
        printf 'VMTEST_LABEL=%q\n' "$label"
        printf 'VMTEST_FILTER=%q\n' "$filter"
        printf 'VMTEST_MODES=%q\n' "$modes"
        printf 'VMTEST_MODE_FILTER=%q\n' "$mode_filter"
        printf 'VMTEST_TESTS=%q\n' "$tests"
        printf 'VMTEST_GPUGUARD=%q\n' "$gpuguard"
        printf 'VMTEST_MODULE=%q\n' "$(tail -n 1 "$root/vmtests/test-modules")"
    } >"$root/vmtests/config"

    (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$part.cpio"
}

# ---------------------------------------------------------------------------
# qemu
# ---------------------------------------------------------------------------

kvm_usable() {
    # KVM can exist and still hang at boot (nested virtualisation on some
    # hosts): boot a tiny image once and see whether it gets to userspace.
    [[ -w /dev/kvm ]] || return 1
    local kernel="$1" root="$work/kvmcheck"
    mkdir -p "$root/bin"
    cp "$busybox" "$root/bin/busybox"
    printf '#!/bin/busybox sh\n/bin/busybox echo VMTEST-KVM-OK\n/bin/busybox poweroff -f\n' >"$root/init"
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet) >"$work/kvmcheck.cpio"
    local output
    output=$(timeout 30 qemu-system-x86_64 -accel kvm -cpu host -m 256M -smp 1 -display none \
        -no-reboot -nic none -serial stdio -monitor none -kernel "$kernel" \
        -initrd "$work/kvmcheck.cpio" -append "console=ttyS0 panic=-1 quiet" \
        </dev/null 2>/dev/null || true)
    [[ $output == *VMTEST-KVM-OK* ]]
}

boot() {
    local kernel="$1" initrd="$2" label="$3" logfile="$4" accel_args
    if [[ $accel == kvm ]]; then
        accel_args=(-accel kvm -cpu host)
    else
        # Multi-threaded TCG: one host thread per vCPU.
        accel_args=(-accel "tcg,thread=multi" -cpu max)
    fi
    # panic=-1 turns a crash into a reboot, which -no-reboot makes an exit.
    # The console's CRs are dropped; each line is shown live with its kernel.
    set +e
    timeout "$timeout_s" qemu-system-x86_64 "${accel_args[@]}" \
        -m "$memory" -smp "$smp" -display none -no-reboot -nic none \
        -serial stdio -monitor none -kernel "$kernel" -initrd "$initrd" \
        -append "console=ttyS0 panic=-1 loglevel=4 lsm=$lsm_list" </dev/null 2>&1 |
        sed -u 's/\r$//' | tee "$logfile" | sed -u "s/^/[$label] /"
    local qemu_status=${PIPESTATUS[0]}
    set -e
    # The verdict comes from the log's VMTEST-RESULT line, not qemu's status.
    if ((qemu_status == 124)); then log "$label: timed out after ${timeout_s}s"; fi
    return 0
}

# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

# run_kernel PACKAGE UNPACKED: boots one kernel; its summary lines go to
# $out/RELEASE.summary, and a failure leaves $out/RELEASE.failed.
run_kernel() {
    local package="$1" unpacked="$2"
    local images=("$unpacked"/boot/vmlinuz-*)
    local vmlinuz=${images[0]}
    [[ -e $vmlinuz ]] || die "$package has no /boot/vmlinuz-*"
    local release=${vmlinuz##*/vmlinuz-}
    local label=$release
    rm -f "$out/$label.failed"

    if [[ $accel == auto ]]; then
        if kvm_usable "$vmlinuz"; then accel=kvm; else accel=tcg; fi
        log "accelerator: $accel"
    fi

    build_kernel_image "$unpacked" "$work/$label" "$label"
    cat "$work/common.cpio" "$work/$label.cpio" >"$work/$label.initrd"

    local logfile="$out/$label.log"
    log "booting $release ($package, $accel, -smp $smp, -m $memory)"
    local started=$SECONDS
    boot "$vmlinuz" "$work/$label.initrd" "$label" "$logfile"
    local elapsed=$((SECONDS - started))
    # The probe table, for the README's compatibility table.
    sed -n '/^VMTEST-PROBE-BEGIN/,/^VMTEST-PROBE-END/p' "$logfile" | sed '1d;$d' >"$out/$label.probe.txt"

    local result features verdict
    result=$(grep -a '^VMTEST-RESULT ' "$logfile" | tail -n 1 || true)
    features=$(grep -a '^VMTEST-FEATURES ' "$logfile" | tail -n 1 | cut -d' ' -f2- || true)
    if [[ $result == *" status=pass "* ]]; then
        verdict=PASS
    else
        verdict=FAIL
        touch "$out/$label.failed"
        [[ -n $result ]] || result="no result line (boot failure, crash or timeout; see $logfile)"
        grep -a '^\[  FAILED  \] .* ms)$' "$logfile" | sed 's/^/  /' >&2 || true
    fi
    {
        echo "$verdict $release ($package) accel=$accel boot+tests=${elapsed}s ${result#VMTEST-RESULT }"
        echo "features $release: $features"
    } >"$out/$label.summary"
}

build_common_image
summary="$out/summary.txt"
: >"$summary"
# Downloads one after the other (apt), then up to --jobs kernels boot at once.
packages=() unpacked_dirs=()
for name in "${kernels[@]}"; do
    package=$(resolve_package "$name")
    packages+=("$package")
    unpacked_dirs+=("$(fetch_kernel "$package")")
done
running=0
for i in "${!packages[@]}"; do
    run_kernel "${packages[$i]}" "${unpacked_dirs[$i]}" &
    running=$((running + 1))
    if ((running >= jobs)); then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true
failures=0
for unpacked in "${unpacked_dirs[@]}"; do
    images=("$unpacked"/boot/vmlinuz-*)
    release=${images[0]##*/vmlinuz-}
    if [[ -f "$out/$release.summary" ]]; then
        cat "$out/$release.summary" >>"$summary"
    else
        echo "FAIL $release: no summary" >>"$summary"
        failures=$((failures + 1))
    fi
    [[ ! -f "$out/$release.failed" ]] || failures=$((failures + 1))
done

echo
echo "vmtests summary (logs in $out):"
cat "$summary"
((failures == 0))
