#!/usr/bin/env bash
# Times one confined spawn of /bin/true, side by side in one hyperfine run:
# bare /bin/true, bubblewrap with every namespace (Debian's bubblewrap), and
# `b10x-harness exec --confine auto -- /bin/true` with every layer this host
# offers (Landlock, user/pid/mount/net/ipc/uts namespaces, no_new_privs,
# seccomp, a cgroup leaf with cgroup.kill where cgroup2 allows one). Target:
# our median at most 0.8x bubblewrap's. Then the per-call cost from a
# started process (a session's run calls), against bubblewrap started from
# the same process, in one go test run. Installs hyperfine and bubblewrap
# when they are missing. Figures are recorded in docs/BENCHMARKS.md.
#
#   bench/spawn.sh                  # 50 runs each, 5 warm-ups
#   RUNS=200 OUT=/tmp/spawn.md bench/spawn.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v hyperfine >/dev/null || ! command -v bwrap >/dev/null; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench/spawn.sh: hyperfine and bubblewrap are needed: apt-get install hyperfine bubblewrap (as root)" >&2
		exit 2
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine bubblewrap >/dev/null
fi

make build
bin=$PWD/bin/b10x-harness
ws=$(mktemp -d /tmp/b10x-spawn-bench.XXXXXX)
trap 'rm -rf "$ws"' EXIT

# The confined spawn must work before it is timed.
if ! "$bin" exec --workspace "$ws" --confine auto -- /bin/true 2>/tmp/bench-spawn.err; then
	echo "bench/spawn.sh: '$bin exec -- /bin/true' failed:" >&2
	cat /tmp/bench-spawn.err >&2
	exit 1
fi

echo "host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
hyperfine --warmup 5 --runs "${RUNS:-50}" -N \
	--export-markdown "${OUT:-/dev/null}" \
	-n 'bare /bin/true' '/bin/true' \
	-n 'bwrap --unshare-all' 'bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent /bin/true' \
	-n 'b10x-harness exec --confine auto' "$bin exec --workspace $ws --confine auto -- /bin/true"

# The same spawn from a process that has already started, as a session's
# run calls are: go test's benchmarks, side by side in one run, with the
# embedded helper image (make build put it in), with the binary itself
# re-executed as the helper, through the broker, and bubblewrap started
# from the same process.
echo
echo "per call, from a started process ($(cut -d' ' -f1-3 /proc/loadavg)):"
CGO_ENABLED=0 go test -ldflags="$(make -s helper-ldflags)" ./confine/spawn -run '^$' -bench 'True' -benchtime "${RUNS:-50}x" -count "${COUNT:-3}" |
	grep -E '^Benchmark'
