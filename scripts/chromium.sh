#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium, installing Debian's
# chromium package with apt-get when none is on the PATH (root only), as
# the VM tests install qemu. The record report's tests render pages in it
# (cmd/b10x-harness/report_test.go); B10X_CHROMIUM overrides the search.
set -euo pipefail
find_chromium() {
	if [[ -n ${B10X_CHROMIUM:-} ]]; then
		echo "$B10X_CHROMIUM"
		return
	fi
	command -v chromium || command -v chromium-browser || true
}
path=$(find_chromium)
if [[ -z $path ]]; then
	if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
		echo "chromium.sh: no chromium on PATH, and it cannot be installed here (needs root and apt-get)" >&2
		exit 1
	fi
	echo "chromium.sh: installing Debian's chromium with apt-get" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; } ||
		{ echo "chromium.sh: apt-get install chromium failed" >&2; exit 1; }
	path=$(find_chromium)
fi
[[ -x $path ]] || { echo "chromium.sh: $path is not executable" >&2; exit 1; }
echo "$path"
