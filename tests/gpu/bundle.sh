#!/usr/bin/env bash
# Packs the built agent for a GPU machine whose image is not Debian 12 (the
# lent GPU machines of docs/backends.md, "Checked on a real GPU": Ubuntu
# with CUDA and PyTorch, no Debian packages, nothing reachable): the stripped
# binary and every shared library it loads but the C and C++ runtimes (glibc,
# libstdc++, libgcc_s: the same or newer there, and backward compatible),
# as one gzip archive (tar and gzip are in every image) that the device
# check unpacks.
#
#   tests/gpu/bundle.sh [BUILD_DIR] [OUT_DIR]    (defaults: build .device)
set -euo pipefail
build=${1:-build}
out=${2:-.device}
binary="$build/agent/gpuguard"
[[ -x "$binary" ]] || { echo "bundle: no $binary: build first (README)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpuguard/lib" "$out"
strip -o "$stage/gpuguard/gpuguard" "$binary"
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so.* | libm.so.* | libstdc++.so.* | libgcc_s.so.* | ld-linux* | libpthread.so.* | \
            libdl.so.* | librt.so.*) continue ;;
    esac
    cp -L "$lib" "$stage/gpuguard/lib/"
done
tar -C "$stage" -czf "$out/gpuguard-bundle.tar.gz" gpuguard
echo "bundle: $out/gpuguard-bundle.tar.gz ($(du -h "$out/gpuguard-bundle.tar.gz" | cut -f1)," \
    "$(ls "$stage/gpuguard/lib" | wc -l) libraries)"
