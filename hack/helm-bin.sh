#!/usr/bin/env bash
# Builds the helm command that the chart tests run (lint, template, install,
# upgrade, uninstall of charts/spotter in the lab), from Helm's Go module pinned in
# hack/tools/helm, into a cache directory keyed by its version and the tool
# module's go.sum. Nothing that is already there is rebuilt.
#
#   hack/helm-bin.sh            build what is missing, print the directory
#   hack/helm-bin.sh --dir      print the directory only (builds nothing)
#
# The cache is the one of hack/kube-bin.sh, outside the work tree so that fresh
# clones (CI) reuse it:
#   ${SPOTTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spotter}
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=$root/hack/tools/helm
HELM_VERSION=$(awk '$1 == "helm.sh/helm/v4" {print $2}' "$tools/go.mod")
cache=${SPOTTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spotter}

# helm prints its version (helm version) and checks charts' kubeVersion against
# it; stamp the pinned one, as Helm's Makefile does.
pkg=helm.sh/helm/v4/internal/version
ldflags="-s -w -X $pkg.version=$HELM_VERSION -X $pkg.gitTreeState=clean"

# The key covers everything that changes the output: the version, the pinned
# module sums, the Go toolchain and the build flags.
key=$( (cat "$tools/go.sum"; go env GOVERSION; echo "$ldflags") | sha256sum | cut -c1-12)
dir=$cache/helm-$HELM_VERSION-$key

if [[ ${1:-} == --dir ]]; then
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
log() { printf '[helm-bin] %s\n' "$*" >&2; }

# Concurrent callers (parallel test binaries, make) wait for one build.
exec 9>"$dir/.lock"
flock 9

if [[ ! -x $dir/helm ]]; then
	log "building helm $HELM_VERSION..."
	start=$SECONDS
	(cd "$tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/helm.tmp" helm.sh/helm/v4/cmd/helm)
	mv "$dir/helm.tmp" "$dir/helm"
	log "built helm in $((SECONDS - start))s"
fi

echo "$dir"
