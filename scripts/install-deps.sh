#!/usr/bin/env bash
# Installs the Debian 12 packages gpuguard needs.
#   install-deps.sh run    what building and running the agent needs
#   install-deps.sh test   that, plus what the tests, benchmarks and VMs drive
#                          (the default)
# Idempotent: when all packages are present it changes nothing and needs no
# network; otherwise it runs `apt-get update` once and installs the missing ones.
set -euo pipefail

mode="${1:-test}"

# Building and running the agent: compilers, the BPF tool chain, the libraries.
run_packages=(
    build-essential cmake ninja-build pkg-config ccache
    clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
    libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
    libhyperscan-dev libyara-dev libhowardhinnant-date-dev libnftables-dev libcurl4-openssl-dev libcpp-httplib-dev
    libssl-dev libzstd-dev libsimdjson-dev
    # sd_notify for the systemd unit (Type=notify, watchdog)
    libsystemd-dev
    # the kubelet's PodResources API (kubelet/): gRPC, stubs generated at build time
    libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev
)

# Tests, benchmarks and the VMs: the real peers and tools they drive.
test_packages=(
    libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev
    # tools the tests drive (prometheus ships promtool; /metrics tests use both)
    prometheus
    # siem/ tests and bench: a real syslog collector with both TLS drivers, a test CA
    rsyslog rsyslog-openssl rsyslog-gnutls openssl
    nftables iproute2 util-linux procps clang-format
    # tests/ops: the unit's capability set (capsh), the Debian package (cpack
    # -G DEB runs dpkg-shlibdeps; dpkg --root installs it; lintian checks it)
    libcap2-bin systemd dpkg-dev fakeroot lintian
    # tests/ops: the status page rendered by a real browser (headless)
    chromium
    # vmtests/: boots Debian's kernels under qemu with a busybox initramfs,
    # and the unit under a real systemd in a Debian root made by debootstrap
    qemu-system-x86 busybox-static cpio xz-utils debootstrap
    # tests/bpf container test: a real podman container (runc: crun refuses
    # hybrid cgroup hosts) from a busybox root filesystem the test builds;
    # tests/deploy: the agent's image (deploy/container, on a debootstrap
    # base), its pod under `podman kube play` (catatonit: the pod's pause
    # image), the probe's GET /metrics (curl)
    podman runc catatonit curl
    # tests/deploy chart test: the Helm chart rendered without helm (not in
    # Debian 12) by a Go program on Debian's sprig and yaml sources
    golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev
    # tests/bpf Slurm test: a real single-node Slurm the test starts on
    # loopback (controller, node daemon, munge authentication, clients)
    slurmctld slurmd slurm-client munge
    # tests/bpf proxy test: a real SOCKS5 proxy and a plain TCP forwarder on
    # loopback, the way a miner reaches its pool through one
    microsocks socat
)

case "$mode" in
    run) packages=("${run_packages[@]}") ;;
    test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
    *)
        echo "usage: $0 [run|test]" >&2
        exit 2
        ;;
esac

if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: run as root (apt-get needs it)" >&2
    exit 1
fi

missing=()
for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null | grep -qx installed; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} == 0)); then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
