#!/usr/bin/env bash
# make k8stest: the project's Kubernetes manifests on a real single-node
# cluster, inside the k8s-node VM shape (docs/decisions/0088).
#
#   scripts/k8stest.sh [-run REGEXP]
#
# 1. scripts/k8s-build.sh builds the cluster's parts, pinned, into
#    ~/.cache/b10x-harness/k8s (once; later runs and clean clones reuse them).
# 2. deploy/build-image.sh stages the harness's image tree (bin/image)
#    without a container engine: the node imports it into containerd.
# 3. vmtest boots k8s-node with the parts, the image tree and deploy/ as a
#    payload and runs ./k8stest/ (built with the k8stest tag) inside it.
#
# Nothing of the cluster runs on the host: the kubelet and containerd
# manage the guest's cgroups, mounts and addresses, which end with it.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="/usr/local/go/bin:$PATH" CGO_ENABLED=0
GO=${GO:-go}
say() { echo "k8stest: $*" >&2; }

start=$SECONDS
out=$(scripts/k8s-build.sh) || { say "scripts/k8s-build.sh failed"; exit 1; }
mapfile -t bins <<<"$out"
[[ -n $out && ${#bins[@]} -gt 0 ]] || { say "scripts/k8s-build.sh printed no directory"; exit 1; }
say "cluster parts ready in $((SECONDS - start)) s"

make -s build helper
HL=$(make -s helper-ldflags)
STAGE_ONLY=1 deploy/build-image.sh

# One payload tree: the parts' programs hard-linked into bin/ (the cache
# and the payload are on one file system), the image tree, and deploy/.
payload=$root/.cache/k8stest-payload
rm -rf "$payload"
mkdir -p "$payload/bin" "$payload/deploy"
for d in "${bins[@]}"; do
	for f in "$d"/*; do
		ln "$f" "$payload/bin/" 2>/dev/null || cp "$f" "$payload/bin/"
	done
done
cp -r deploy/k8s deploy/seccomp "$payload/deploy/"
# The CI step's image: the harness's tree with this machine's make and
# the C library it links (the shipped image has no make).
cp -a bin/image/rootfs "$payload/ci-rootfs"
make_bin=$(command -v make)
for f in "$make_bin" $(ldd "$make_bin" | grep -o '/[^ ]*'); do
	mkdir -p "$payload/ci-rootfs$(dirname "$f")"
	cp -L "$f" "$payload/ci-rootfs$f"
done

boot() {
	GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=k8stest" $GO run ./vmtest -ldflags="$HL" \
		-env B10X_REQUIRE_HELPER_IMAGE=1 -timeout 40m -shape-timeout 50m \
		-shapes k8s-node -pkgs ./k8stest/ \
		-payload "$payload/bin=/opt/k8s/bin" \
		-payload "$root/bin/image/rootfs=/opt/k8s/rootfs" \
		-payload "$payload/deploy=/opt/k8s/deploy" \
		-payload "$payload/ci-rootfs=/opt/k8s/ci-rootfs" "$@"
}
# Under TCG the guest's kernel has died of a double fault in the kubelet's
# mkdir, once in about six runs on a loaded host: the emulator, not
# anything under test (the test's own failures end with the guest's DONE
# line). Such a crash, and only that, is booted once more, and said.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! boot "$@" 2>&1 | tee "$log"; then
	if grep -q 'Kernel panic' "$log" && grep -q 'the guest never printed its final DONE line' "$log"; then
		say "the guest's kernel panicked before the test ended (above); booting once more"
		boot "$@"
	else
		exit 1
	fi
fi
say "done in $((SECONDS - start)) s"
