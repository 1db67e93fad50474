#!/usr/bin/env bash
# deploy/container/build-image.sh: gpuguard's container image from the
# project's own Debian package (docs/deployment.md#the-container-image).
#
#   bash deploy/container/build-image.sh [--build DIR | --deb FILE]
#        [--tag IMAGE] [--cache DIR] [--mirror URL] [--base-only]
#
# 1. The package: FILE, or `cpack -G DEB` in the build tree DIR (default
#    build; the agent must be built there already: nothing is compiled).
# 2. The base: Debian 12 made by `debootstrap --variant=minbase` with the
#    package's Depends and Recommends (so the image's libraries are Debian's,
#    not copies of the build host's), as a tarball in the cache directory
#    keyed by that package list, imported with `podman import` as
#    localhost/gpuguard-base:bookworm-KEY. Made once per package list:
#    later runs import the cached tarball, or find the image already there.
# 3. `podman build` of deploy/container/Containerfile on that base: the
#    package installed with dpkg. No registry and no network.
#
# Prints the image's name on stdout (default localhost/gpuguard:VERSION);
# with --base-only, steps 1 and 2 only and the base's name (scripts/setup.sh
# makes the base so while the tests start: a build waits for it, a lock).
# Root only (debootstrap, and the rootful podman store the agent runs from).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
log() { echo "build-image: $*" >&2; }
die() {
    log "$*"
    exit 2
}

build="$repo/build"
deb=""
tag=""
cache=""
mirror=""
base_only=0
while (($#)); do
    case "$1" in
        --build) build="$2"; shift 2 ;;
        --deb) deb="$2"; shift 2 ;;
        --tag) tag="$2"; shift 2 ;;
        --cache) cache="$2"; shift 2 ;;
        --mirror) mirror="$2"; shift 2 ;;
        --base-only) base_only=1; shift ;;
        *) die "unknown argument $1 (--build DIR, --deb FILE, --tag IMAGE, --cache DIR, --mirror URL, --base-only)" ;;
    esac
done
[[ $(id -u) -eq 0 ]] || die "run as root (debootstrap and the rootful podman store)"
for tool in podman debootstrap dpkg-deb tar flock md5sum; do
    command -v "$tool" >/dev/null || die "$tool is missing (bash scripts/install-deps.sh test installs it)"
done
cache="${cache:-${GPUGUARD_DEPLOY_CACHE:-$build/deploy-cache}}"
mkdir -p "$cache"
# The host's podman needs runc (crun refuses a hybrid cgroup host) and the
# cgroupfs manager (no systemd as PID 1 on a CI runner); both work elsewhere.
podman=(podman --cgroup-manager=cgroupfs --runtime runc)

work="$(mktemp -d "$cache/context.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# 1. The package.
if [[ -z $deb ]]; then
    [[ -x $build/agent/gpuguard ]] || die "$build/agent/gpuguard is missing: build the agent first"
    [[ -f $build/CPackConfig.cmake ]] || die "$build is not a configured build tree"
    # cpack installs the packaging files too: a custom target, part of a
    # full build (built here only when missing: tests run this beside
    # other users of the build tree).
    if [[ ! -f $build/packaging/gpuguard.8.gz || ! -f $build/packaging/changelog.gz ]]; then
        cmake --build "$build" --target gpuguard_packaging_files >/dev/null
    fi
    cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/package" >"$work/cpack.log" 2>&1 ||
        { cat "$work/cpack.log" >&2; die "cpack failed"; }
    debs=("$work"/package/*.deb)
    deb="${debs[0]}"
fi
[[ -f $deb ]] || die "no package at $deb"
version="$(dpkg-deb -f "$deb" Version)"
tag="${tag:-localhost/gpuguard:$version}"

# 2. The base: the package's dependencies by name (versions are Debian 12's
# own), plus the CA bundle the HTTPS outputs verify against.
packages="$( (dpkg-deb -f "$deb" Depends; echo ,; dpkg-deb -f "$deb" Recommends; echo , ca-certificates) |
    tr ',' '\n' | sed -E 's/\|.*//; s/\(.*\)//; s/[[:space:]]//g' | grep -v '^$' | sort -u | paste -sd,)"
# debootstrap resolves no virtual package (libspdlog1.10-fmt9 is one): the
# build host's installed package that provides it, the one the agent was
# linked against.
real_packages=()
for name in ${packages//,/ }; do
    if [[ $(dpkg-query -W -f '${db:Status-Status}' "$name" 2>/dev/null) == installed ]]; then
        real_packages+=("$name")
        continue
    fi
    provider="$(dpkg-query -W -f '${Package} ${Provides}\n' |
        awk -v want="$name" '{ for (i = 2; i <= NF; i++) { p = $i; sub(/[,(].*/, "", p); if (p == want && found == "") found = $1 } } END { print found }')"
    [[ -n $provider ]] || die "no installed package provides $name (install the build dependencies first)"
    real_packages+=("$provider")
done
packages="$(printf '%s\n' "${real_packages[@]}" | sort -u | paste -sd,)"
key="$(echo "bookworm $packages" | md5sum | cut -c1-12)"
base="localhost/gpuguard-base:bookworm-$key"
tarball="$cache/gpuguard-base-bookworm-$key.tar"
if [[ -z $mirror ]]; then
    # The mirror apt already uses (CI runners have one close by).
    mirror=$(awk '/^URIs:/ { print $2; exit } /^deb / { print $2; exit }' \
        /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true)
    mirror=${mirror:-http://deb.debian.org/debian}
fi
exec {lock}>"$cache/base.lock"  # one debootstrap at a time
flock "$lock"
if ! podman image exists "$base"; then
    if [[ ! -s $tarball ]]; then
        tree="$cache/debootstrap.$$"
        rm -rf "$tree"
        log "debootstrap bookworm from $mirror with $packages"
        started=$(date +%s)
        debootstrap --variant=minbase --include="$packages" bookworm "$tree" "$mirror" \
            >"$cache/debootstrap.log" 2>&1 ||
            { tail -n 20 "$cache/debootstrap.log" >&2; rm -rf "$tree"; die "debootstrap failed: see $cache/debootstrap.log"; }
        # Documentation, locales, apt's lists and caches: not needed to run.
        rm -rf "$tree"/usr/share/{doc,man,info,locale} "$tree"/var/lib/apt/lists/* \
            "$tree"/var/cache/apt/*.bin "$tree"/var/cache/apt/archives/*.deb
        tar --numeric-owner -C "$tree" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
        rm -rf "$tree"
        log "base made in $(($(date +%s) - started)) s ($(du -m "$tarball" | cut -f1) MiB)"
    fi
    "${podman[@]}" import --quiet --change 'CMD ["/bin/bash"]' "$tarball" "$base" >/dev/null
    log "imported $base"
fi
flock -u "$lock"
if ((base_only)); then
    echo "$base"
    exit 0
fi

# 3. The image.
cp "$deb" "$work/gpuguard.deb"
"${podman[@]}" build --quiet --network none --build-arg "BASE=$base" \
    -f "$here/Containerfile" -t "$tag" "$work" >/dev/null
log "built $tag from $(basename "$deb") on $base"
echo "$tag"
