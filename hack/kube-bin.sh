#!/usr/bin/env bash
# Builds the Kubernetes binaries that Spotter's integration and e2e tests run
# (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, kwok) from
# Go modules, into a cache directory keyed by their versions and the tool modules'
# go.sum. A binary that is already there is not rebuilt.
#
#   hack/kube-bin.sh            build what is missing, print the directory
#   hack/kube-bin.sh --dir      print the directory only (builds nothing)
#   hack/kube-bin.sh --oldest [--dir]
#                               the same for the oldest Kubernetes minor the chart
#                               supports (OLDEST_KUBE_VERSION, hack/tools/kube-oldest):
#                               its kube-apiserver, kube-scheduler and
#                               kube-controller-manager, beside the etcd, kubectl
#                               and kwok of the default set (built first if missing)
#
# The cache lives outside the work tree so that fresh clones (CI) reuse it:
#   ${SPOTTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spotter}
# The Go build cache makes a rebuild after a version bump incremental as well.
set -euo pipefail

KUBE_VERSION=v1.37.1
OLDEST_KUBE_VERSION=v1.32.13
KWOK_VERSION=v0.8.0

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=$root/hack/tools
kube_tools=$tools/kube
oldest=
if [[ ${1:-} == --oldest ]]; then
	oldest=1
	shift
	KUBE_VERSION=$OLDEST_KUBE_VERSION
	kube_tools=$tools/kube-oldest
fi
etcd_version=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$tools/etcd/go.mod")
cache=${SPOTTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spotter}

# One set of flags for every build: changing them invalidates the Go build cache
# for all of Kubernetes. kubectl refuses a server whose version it cannot parse, so
# the version is stamped into both places Kubernetes reads it from.
major=${KUBE_VERSION#v}
major=${major%%.*}
minor=${KUBE_VERSION#v*.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

# The key covers everything that changes the binaries: the versions, the pinned
# module sums, the Go toolchain and the build flags.
key=$( (cat "$kube_tools/go.sum" "$tools/etcd/go.sum"; go env GOVERSION; echo "$ldflags") | sha256sum | cut -c1-12)
dir=$cache/k8s-$KUBE_VERSION-etcd-$etcd_version-kwok-$KWOK_VERSION-$key

if [[ ${1:-} == --dir ]]; then
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
log() { printf '[kube-bin] %s\n' "$*" >&2; }

# Concurrent callers (parallel test binaries, make) wait for one build.
exec 9>"$dir/.lock"
flock 9

build() { # name, module dir, package
	local name=$1 mod=$2 pkg=$3 start
	if [[ -x $dir/$name ]]; then
		return 0
	fi
	log "building $name ($pkg)..."
	start=$SECONDS
	(cd "$mod" && go build -trimpath -ldflags "$ldflags" -o "$dir/$name.tmp" "$pkg")
	mv "$dir/$name.tmp" "$dir/$name"
	log "built $name in $((SECONDS - start))s"
}

if [[ -n $oldest ]]; then
	for name in kube-apiserver kube-scheduler kube-controller-manager; do
		build "$name" "$kube_tools" "k8s.io/kubernetes/cmd/$name"
	done
	# etcd, kwok and its stages: the default set's (etcd 3.6 serves 1.32's
	# apiserver). kubectl too, only for the lab's set to be whole: no test of
	# the oldest minor runs it.
	main=$(bash "${BASH_SOURCE[0]}")
	for name in etcd kubectl kwok kwok-stages; do
		[[ -e $dir/$name ]] || cp -R "$main/$name" "$dir/$name"
	done
	echo "$dir"
	exit 0
fi

build etcd "$tools/etcd" .
for name in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
	build "$name" "$kube_tools" "k8s.io/kubernetes/cmd/$name"
done

if [[ ! -x $dir/kwok ]]; then
	log "building kwok $KWOK_VERSION..."
	start=$SECONDS
	GOBIN=$dir/.gobin go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
	mv "$dir/.gobin/kwok" "$dir/kwok"
	rmdir "$dir/.gobin"
	log "built kwok in $((SECONDS - start))s"
fi

# kwok does nothing without Stage objects. Copy the stages it ships (node initialize,
# lease heartbeat, pod lifecycle); the lab harness adjusts pod-delete so that a pod
# goes when its grace period ends, as on a real kubelet.
if [[ ! -d $dir/kwok-stages ]]; then
	src=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	mkdir -p "$dir/kwok-stages.tmp"
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		cp "$src/kustomize/stage/$f" "$dir/kwok-stages.tmp/"
	done
	chmod -R u+w "$dir/kwok-stages.tmp"
	mv "$dir/kwok-stages.tmp" "$dir/kwok-stages"
fi

echo "$dir"
