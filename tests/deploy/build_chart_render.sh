#!/usr/bin/env bash
# Builds tests/deploy/chart_render (Go, offline: Debian's golang-go and the
# sprig and yaml sources Debian installs under /usr/share/gocode, GOPATH
# mode) into BUILD/deploy/chart_render and prints its path.
#   bash tests/deploy/build_chart_render.sh BUILD
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$1/deploy"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$here/chart_render"
GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$out/go-cache" GOFLAGS='' GOPROXY=off \
    go build -o "$out/chart_render" . >&2
echo "$out/chart_render"
