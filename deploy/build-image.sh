#!/usr/bin/env bash
# Builds the container image from the Containerfile, FROM scratch, with no
# registry: the root file system is laid out here first (the Containerfile
# has no RUN step), then copied in. `make image` runs it after `make build`.
#
#   deploy/build-image.sh [IMAGE]     (default: localhost/b10x-harness:dev)
#
# The image holds the harness (bin/b10x-harness, as `make build` made it)
# at /usr/local/bin/b10x-harness, a static busybox with its applet links in
# /bin, /sbin, /usr/bin and /usr/sbin, /tmp (mode 1777), /etc/passwd and
# /etc/group with root, user (1000) and nobody, and /home/user owned by
# 1000. busybox comes from Debian's busybox-static package (installed with
# apt-get when /bin/busybox is missing); any static busybox at BUSYBOX
# will do.
#
# STAGE_ONLY=1 lays out bin/image and stops: no container engine is
# needed (make k8stest imports the tree into the test cluster's
# containerd itself).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
image=${1:-localhost/b10x-harness:dev}
stage=bin/image
busybox=${BUSYBOX:-/bin/busybox}

. deploy/container-runtime.sh

[ -x bin/b10x-harness ] || { echo "build-image: bin/b10x-harness is missing (run make build)" >&2; exit 1; }
if [ ! -x "$busybox" ] && [ -z "${BUSYBOX:-}" ] && [ "$(id -u)" = 0 ]; then
	echo "build-image: installing busybox-static with apt-get" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
fi
[ -x "$busybox" ] || { echo "build-image: no busybox at $busybox (apt-get install busybox-static, or set BUSYBOX)" >&2; exit 1; }
# A dynamically linked busybox would need its libraries in the image.
if ldd "$busybox" >/dev/null 2>&1; then
	echo "build-image: $busybox is not statically linked" >&2
	exit 1
fi

[ -n "${STAGE_ONLY:-}" ] || ct_pick || exit 1

rm -rf "$stage"
mkdir -p "$stage/rootfs" "$stage/home"
r=$stage/rootfs
mkdir -p "$r/bin" "$r/sbin" "$r/usr/bin" "$r/usr/sbin" "$r/usr/local/bin" "$r/etc" "$r/tmp" "$r/root" "$r/workspace"
chmod 1777 "$r/tmp"
chmod 0700 "$r/root"
install -m 0755 bin/b10x-harness "$r/usr/local/bin/b10x-harness"
install -m 0755 "$busybox" "$r/bin/busybox"
# Applet links, made here because the image has no RUN step.
n=0
while read -r applet; do
	case $applet in
	bin/busybox | "") continue ;;
	esac
	[ -e "$r/$applet" ] && continue
	mkdir -p "$r/$(dirname "$applet")"
	ln -s /bin/busybox "$r/$applet"
	n=$((n + 1))
done < <("$busybox" --list-full)
cat >"$r/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
user:x:1000:1000:user:/home/user:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$r/etc/group" <<'EOF'
root:x:0:
user:x:1000:
nogroup:x:65534:
EOF
chmod 0644 "$r/etc/passwd" "$r/etc/group"
mkdir -p "$stage/home/user"
chmod 0755 "$stage/home/user"
cp Containerfile "$stage/Containerfile"

if [ -n "${STAGE_ONLY:-}" ]; then
	echo "build-image: $n busybox applet links; staged in $stage (STAGE_ONLY)" >&2
	exit 0
fi

echo "build-image: $n busybox applet links; building $image with ${CT[*]}" >&2
"${CT[@]}" build --no-cache -t "$image" -f "$stage/Containerfile" "$stage"
