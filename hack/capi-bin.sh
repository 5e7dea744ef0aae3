#!/usr/bin/env bash
# Builds the Cluster API core controller manager that the lab's Cluster API tests
# run, from the Go module pinned in hack/tools/capi, into a cache directory keyed by
# its version and the tool module's go.sum, next to it the CRDs of Cluster API's
# core and its KubeadmControlPlane (crds/), and those of the last release that
# serves v1beta1 alone (crds-v1beta1/). Nothing that is already there is
# rebuilt.
#
#   hack/capi-bin.sh            build what is missing, print the directory
#   hack/capi-bin.sh --dir      print the directory only (builds nothing)
#
# The cache is the one of hack/kube-bin.sh, outside the work tree so that fresh
# clones (CI) reuse it:
#   ${SPOTTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spotter}
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=$root/hack/tools/capi
CAPI_VERSION=$(awk '$1 == "sigs.k8s.io/cluster-api" {print $2}' "$tools/go.mod")
cache=${SPOTTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spotter}

# Cluster API logs its version at start; stamp the pinned one. Changing the flags
# invalidates the Go build cache for the whole manager.
major=${CAPI_VERSION#v}
major=${major%%.*}
minor=${CAPI_VERSION#v*.}
minor=${minor%%.*}
pkg=sigs.k8s.io/cluster-api/version
ldflags="-s -w -X $pkg.gitVersion=$CAPI_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"

# The key covers everything that changes the output: the version, the pinned
# module sums, the Go toolchain and the build flags.
key=$( (cat "$tools/go.sum"; go env GOVERSION; echo "$ldflags") | sha256sum | cut -c1-12)
dir=$cache/capi-$CAPI_VERSION-$key

if [[ ${1:-} == --dir ]]; then
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
log() { printf '[capi-bin] %s\n' "$*" >&2; }

# Concurrent callers (parallel test binaries, make) wait for one build.
exec 9>"$dir/.lock"
flock 9

# The manager's main package is core/ of the module (its Dockerfile builds the
# same package); hack/tools/capi names it as a tool.
if [[ ! -x $dir/cluster-api-manager ]]; then
	log "building cluster-api-manager $CAPI_VERSION..."
	start=$SECONDS
	(cd "$tools" && go build -trimpath -ldflags "$ldflags" -o "$dir/cluster-api-manager.tmp" sigs.k8s.io/cluster-api/core)
	mv "$dir/cluster-api-manager.tmp" "$dir/cluster-api-manager"
	log "built cluster-api-manager in $((SECONDS - start))s"
fi

# The CRDs as generated (config/crd/bases), without the kustomize patches that
# point their conversion at the manager's webhook: the lab writes and reads the
# storage version only, so the apiserver needs no conversion. Besides the core's,
# the KubeadmControlPlane CRD of the same module (controlplane/kubeadm), which
# Spotter reads to refuse a control plane on spot; no controller serves it in the
# lab. Each file is checked for on its own, so that a cache directory made before
# a file was added gets it (the key covers the manager, not the list of CRDs).
kcp=controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml
if [[ ! -d $dir/crds || ! -f $dir/crds/$kcp ]]; then
	src=$(cd "$tools" && go mod download -json "sigs.k8s.io/cluster-api@$CAPI_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
fi
if [[ ! -d $dir/crds ]]; then
	rm -rf "$dir/crds.tmp"
	mkdir -p "$dir/crds.tmp"
	cp "$src"/core/config/crd/bases/*.yaml "$dir/crds.tmp/"
	chmod -R u+w "$dir/crds.tmp"
	mv "$dir/crds.tmp" "$dir/crds"
fi
if [[ ! -f $dir/crds/$kcp ]]; then
	# Written under a name the *.yaml readers skip, then renamed: a reader sees
	# the whole file or none.
	cp "$src/controlplane/kubeadm/config/crd/bases/$kcp" "$dir/crds/.$kcp.tmp"
	chmod u+w "$dir/crds/.$kcp.tmp"
	mv "$dir/crds/.$kcp.tmp" "$dir/crds/$kcp"
fi

# The CRDs of the last Cluster API release that serves cluster.x-k8s.io/v1beta1
# alone (v1.10; v1beta2 came with v1.11), core and KubeadmControlPlane, for the
# tests of the provider against a management cluster that serves v1beta1 only.
# Only the module's sources are downloaded (no build, no entry in any go.sum).
V1BETA1_VERSION=v1.10.7
if [[ ! -d $dir/crds-v1beta1 ]]; then
	log "downloading the v1beta1 CRDs of Cluster API $V1BETA1_VERSION..."
	old=$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/cluster-api@$V1BETA1_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	rm -rf "$dir/crds-v1beta1.tmp"
	mkdir -p "$dir/crds-v1beta1.tmp"
	cp "$old"/config/crd/bases/*.yaml "$old/controlplane/kubeadm/config/crd/bases/$kcp" "$dir/crds-v1beta1.tmp/"
	chmod -R u+w "$dir/crds-v1beta1.tmp"
	mv "$dir/crds-v1beta1.tmp" "$dir/crds-v1beta1"
fi

echo "$dir"
