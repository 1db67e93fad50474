#!/usr/bin/env bash
# vmtests/systemd.sh: the packaged unit (packaging/gpuguard.service) under a
# real systemd as PID 1, in a VM (docs/vmtests.md#the-unit-under-systemd).
#
# A Debian 12 root filesystem made by debootstrap from the package mirror
# (cached in BUILD/vmtests-cache), the built gpuguard as /usr/sbin/gpuguard
# with its libraries, the unit as the package installs it, and
# vmtests/systemd-check.sh as a service that runs after boot: it starts the
# agent with `systemctl start`, checks READY, the hardening the unit declares
# (ProtectSystem=strict, NoNewPrivileges, the capability set) on the running
# process, enforcement (kill, an nftables block, a GPU node denied) under
# exactly those capabilities, `systemctl reload` and `stop`, the restart
# after a SIGKILL and the watchdog's after a SIGSTOP, then powers off.
# The whole tree is the VM's initramfs (systemd runs from it as the root),
# booted with Debian's 6.12 cloud kernel under qemu.
#
#   bash vmtests/systemd.sh [--build DIR] [--kernel PKG] [--timeout S] [--prepare]
#
# --prepare only makes the cached root filesystem (scripts/setup.sh runs it
# in the background while the build compiles); a run waits for one in
# progress (a lock in the cache).
#
# Exit status 0 only when every check passed; the console log goes to
# BUILD/vmtests/systemd.log.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_prefix="vmtests/systemd"
source "$repo/vmtests/lib.sh"

build="${GPUGUARD_BUILD_DIR:-$repo/build}"
kernel_name=linux-image-6.12-cloud-amd64
timeout_s=900
prepare_only=0
while (($#)); do
    case "$1" in
        --build) build="$2"; shift 2 ;;
        --kernel) kernel_name="$2"; shift 2 ;;
        --timeout) timeout_s="$2"; shift 2 ;;
        --prepare) prepare_only=1; shift ;;
        *) die "unknown argument $1 (--build DIR, --kernel PKG, --timeout S, --prepare)" ;;
    esac
done
build="$(cd "$build" && pwd)"
for tool in qemu-system-x86_64 debootstrap cpio apt-get dpkg ldd timeout flock; do
    command -v "$tool" >/dev/null || die "$tool is missing (bash scripts/install-deps.sh installs it)"
done
gpuguard="$build/agent/gpuguard"

out="$build/vmtests"
cache="$build/vmtests-cache"
work="$out/systemd-work"
mkdir -p "$out" "$cache"

# The root filesystem: systemd, the tools the unit and the checks run
# (nft, ip, modprobe for nf_tables, nsenter and capsh-free /proc reads).
packages=systemd,systemd-sysv,dbus,kmod,nftables,iproute2,procps,netcat-openbsd
mirror=$(awk '/^URIs:/ { print $2; exit } /^deb / { print $2; exit }' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
tarball="$cache/systemd-rootfs-bookworm-$(echo "$packages" | md5sum | cut -c1-8).tar"
prepare_rootfs() {
    [[ ! -s $tarball ]] || return 0
    local tree="$cache/debootstrap.$$"
    log "debootstrap bookworm ($packages) from $mirror"
    rm -rf "$tree"
    debootstrap --variant=minbase --include="$packages" bookworm "$tree" "$mirror" \
        >"$out/systemd-debootstrap.log" 2>&1 ||
        die "debootstrap failed: see $out/systemd-debootstrap.log"
    # Documentation, locales and apt's lists: not needed in a RAM-held root.
    rm -rf "$tree"/usr/share/{doc,man,info,locale} "$tree"/var/lib/apt/lists/* \
        "$tree"/var/cache/apt/*
    tar -C "$tree" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$tree"
}
# One debootstrap at a time: a run waits for a --prepare in progress.
exec {lock}>"$cache/systemd-rootfs.lock"
flock "$lock"
prepare_rootfs
flock -u "$lock"
((!prepare_only)) || exit 0

[[ -x $gpuguard ]] || die "$gpuguard is missing: build it first"
rm -rf "$work"
mkdir -p "$work"
root="$work/root"
mkdir -p "$root"
tar -C "$root" -xf "$tarball"

# The agent as the package installs it: binary, unit, an empty rules
# directory; its configuration comes from the check (the test's own).
copy_with_libraries "$root" "$gpuguard"
mv "$root/$gpuguard" "$root/usr/sbin/gpuguard"
rmdir -p "$(dirname "$root/$gpuguard")" 2>/dev/null || true
strip --strip-debug "$root/usr/sbin/gpuguard"
install -m 0644 "$repo/packaging/gpuguard.service" "$root/lib/systemd/system/gpuguard.service"
install -d -m 0755 "$root/etc/gpuguard" "$root/etc/gpuguard/rules.d"
install -m 0755 "$repo/vmtests/systemd-check.sh" "$root/usr/local/sbin/gg-systemd-check"
cat >"$root/lib/systemd/system/gg-systemd-check.service" <<'UNIT'
[Unit]
Description=gpuguard vmtests: the unit under systemd
After=basic.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/gg-systemd-check
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target
UNIT
ln -sf /lib/systemd/system/gg-systemd-check.service \
    "$root/etc/systemd/system/multi-user.target.wants/gg-systemd-check.service"
echo gg-vmtest >"$root/etc/hostname"

# The kernel and its modules (nf_tables is one; modprobe finds them after the
# check's depmod).
package=$(resolve_package "$kernel_name")
unpacked=$(fetch_kernel "$package")
images=("$unpacked"/boot/vmlinuz-*)
vmlinuz=${images[0]}
release=${vmlinuz##*/vmlinuz-}
mkdir -p "$root/lib/modules"
cp -a "$unpacked/lib/modules/$release" "$root/lib/modules/"

(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$work/root.cpio"
log "root filesystem: $(du -h "$work/root.cpio" | cut -f1); booting $release (tcg)"
rm -rf "$root"

logfile="$out/systemd.log"
started=$SECONDS
# One vCPU: with two, the guest kernel now and then oopsed under
# multi-threaded TCG on an int3 its live code patching had left, which the
# other vCPU still ran from a stale translation ("Oops: int3 ...
# sched_clock_cpu" in its boot; "Oops: int3 ... bpf_lsm_file_open" after
# the checks, once the agent's restarted sensor attached its LSM program,
# 2026-11-29). A single vCPU runs no other CPU's stale code; the checks
# take about as long. Still at most two boots: a boot that died with no
# check started is tried once more, and the log says so; a failure once
# the checks started is never retried.
for boot in 1 2; do
    set +e
    timeout "$timeout_s" qemu-system-x86_64 -accel "tcg,thread=multi" -cpu max -m 3G -smp 1 \
        -display none -no-reboot -nic none -serial stdio -monitor none \
        -kernel "$vmlinuz" -initrd "$work/root.cpio" \
        -append "console=ttyS0 rdinit=/sbin/init panic=-1 loglevel=4 lsm=landlock,lockdown,yama,integrity,apparmor,bpf systemd.show_status=0" \
        </dev/null 2>&1 | sed -u 's/\r$//' | tee "$logfile" | sed -u 's/^/[systemd] /'
    set -e
    if [[ $boot == 1 ]] && ! grep -aq 'GG-SYSTEMD' "$logfile" &&
        grep -aqE 'Oops:|Kernel panic' "$logfile"; then
        cp "$logfile" "$out/systemd-boot1.log"
        log "the guest kernel failed in its boot before any check (log: $out/systemd-boot1.log): booting once more"
        continue
    fi
    break
done
rm -f "$work/root.cpio"
log "boot and checks: $((SECONDS - started)) s"
grep -a 'GG-SYSTEMD FAIL' "$logfile" | sed 's/^.*GG-SYSTEMD/  GG-SYSTEMD/' >&2 || true
result=$(grep -a 'GG-SYSTEMD-RESULT ' "$logfile" | tail -n 1 || true)
echo "${result:-GG-SYSTEMD-RESULT none: no result line (boot failure or timeout; see $logfile)}"
[[ $result == *"GG-SYSTEMD-RESULT pass"* ]]
