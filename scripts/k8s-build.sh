#!/usr/bin/env bash
# Builds the parts of the test cluster (make k8stest) from source, each
# pinned, into ${XDG_CACHE_HOME:-~/.cache}/b10x-harness/k8s/<part>-<version>/bin
# (outside the clone, so that a clean clone reuses it), and prints each
# part's bin directory. A part whose directory holds a .done file is not built again, so a
# version bump rebuilds only that part. Nothing is downloaded but Go
# modules (from the module proxy) and, for runc, Debian's libseccomp-dev.
#
#   scripts/k8s-build.sh          build what is missing, print the cache
#   K8S_CACHE=DIR scripts/...     another cache directory
#
# The parts, and why each is built the way it is:
#   kubernetes  kube-apiserver, kube-controller-manager, kube-scheduler,
#               kubelet and kubectl from k8s.io/kubernetes. Its go.mod
#               replaces its staging modules with ./staging/src/..., which
#               the module's zip leaves out, so go install refuses it: the
#               module is copied here and each staging module is replaced
#               with the published module of the same release (v0.X.Y for
#               v1.X.Y). Static (CGO_ENABLED=0), stripped.
#   etcd        go.etcd.io/etcd/server/v3's etcdmain, from a two-line main
#               of this script's own (the server module holds no program).
#   containerd  containerd, containerd-shim-runc-v2 and ctr; version 2, for
#               user-namespaced pods (hostUsers: false).
#   runc        with seccomp (cgo and libseccomp, linked statically: the
#               node has no C library), version >= 1.2 for idmapped mounts.
#   cni         the loopback, ptp and host-local plugins.
#   pause       the pod sandbox's process: a main of this script's own that
#               waits for a signal (there is no registry to pull one from).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/b10x-harness/k8s}
export CGO_ENABLED=0 GOFLAGS=-trimpath GOWORK=off
export PATH="/usr/local/go/bin:$PATH"

KUBERNETES=v1.37.2
ETCD=v3.6.16
CONTAINERD=v2.4.2
RUNC=v1.5.3
CNI=v1.10.0

say() { echo "k8s-build: $*" >&2; }

# part NAME VERSION: prints the part's directory; returns 1 if it is built.
part() {
	local d=$cache/$1-$2
	echo "$d"
	[[ -f $d/.done ]] && return 1
	rm -rf "$d"
	mkdir -p "$d/bin"
	return 0
}

done_part() { date -u +%FT%TZ >"$1/.done"; }

build_kubernetes() {
	local d
	d=$(part kubernetes "$KUBERNETES") || return 0
	say "kubernetes $KUBERNETES (about 20 minutes on 2 cores, once)"
	local src
	src=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -d $src ]] || { say "k8s.io/kubernetes@$KUBERNETES: no module directory"; return 1; }
	cp -r "$src" "$d/src"
	chmod -R u+w "$d/src"
	local staging=v0.${KUBERNETES#v1.}
	(
		cd "$d/src"
		rm -f go.work go.work.sum
		local m args=()
		for m in $(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*|\1|p' go.mod); do
			args+=("-replace=$m=$m@$staging")
		done
		[[ ${#args[@]} -gt 0 ]] || { say "no staging replace in k8s.io/kubernetes's go.mod"; exit 1; }
		go mod edit "${args[@]}"
		local v=k8s.io/component-base/version minor=${KUBERNETES#v1.}
		minor=${minor%%.*}
		local ld="-s -w -X $v.gitVersion=$KUBERNETES -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
		go build -mod=mod -ldflags="$ld" -o "$d/bin/" \
			./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubelet ./cmd/kubectl
	)
	rm -rf "$d/src"
	done_part "$d"
}

# gomain DIR MODULE@VERSION GOFILE: builds a main of this script's own
# against MODULE in a module of its own under DIR/src.
gomain() {
	local d=$1 req=$2 file=$3 name=$4
	mkdir -p "$d/src"
	cat >"$d/src/main.go" <<<"$file"
	(
		cd "$d/src"
		go mod init "b10x.local/$name" >/dev/null 2>&1
		[[ -n $req ]] && go get "$req" >/dev/null
		go mod tidy >/dev/null
		go build -ldflags="-s -w" -o "$d/bin/$name" .
	)
	rm -rf "$d/src"
}

build_etcd() {
	local d
	d=$(part etcd "$ETCD") || return 0
	say "etcd $ETCD"
	gomain "$d" "go.etcd.io/etcd/server/v3@$ETCD" 'package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }' etcd
	done_part "$d"
}

build_pause() {
	local d
	d=$(part pause v1) || return 0
	say "pause"
	gomain "$d" "" 'package main

import (
	"os"
	"os/signal"
	"syscall"
)

// The pod sandbox'"'"'s process: it holds the namespaces until told to stop.
func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}' pause
	done_part "$d"
}

build_containerd() {
	local d
	d=$(part containerd "$CONTAINERD") || return 0
	say "containerd $CONTAINERD"
	GOBIN=$d/bin go install -ldflags="-s -w" -tags "no_btrfs no_devmapper no_zfs" \
		"github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD" \
		"github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD"
	done_part "$d"
}

build_runc() {
	local d
	d=$(part runc "$RUNC") || return 0
	say "runc $RUNC"
	if [[ ! -f /usr/include/seccomp.h ]]; then
		[[ $(id -u) = 0 ]] || { say "runc needs libseccomp-dev (apt-get install libseccomp-dev, as root)"; return 1; }
		say "installing libseccomp-dev with apt-get"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev >/dev/null ||
			{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev >/dev/null; }
	fi
	CGO_ENABLED=1 GOBIN=$d/bin go install -tags "seccomp netgo osusergo" \
		-ldflags="-s -w -extldflags=-static" "github.com/opencontainers/runc@$RUNC"
	done_part "$d"
}

build_cni() {
	local d
	d=$(part cni "$CNI") || return 0
	say "cni plugins $CNI"
	local p=github.com/containernetworking/plugins/plugins
	GOBIN=$d/bin go install -ldflags="-s -w" "$p/main/loopback@$CNI" "$p/main/ptp@$CNI" "$p/ipam/host-local@$CNI"
	done_part "$d"
}

mkdir -p "$cache"
start=$SECONDS
build_pause
build_cni
build_etcd
build_containerd
build_runc
build_kubernetes
[[ $((SECONDS - start)) -gt 5 ]] && say "built in $((SECONDS - start)) s"
# The parts' bin directories, one per line, for the caller's PATH.
for p in "kubernetes-$KUBERNETES" "etcd-$ETCD" "containerd-$CONTAINERD" "runc-$RUNC" "cni-$CNI" pause-v1; do
	echo "$cache/$p/bin"
done
