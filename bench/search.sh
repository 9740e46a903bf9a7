#!/usr/bin/env bash
# Times `b10x-harness call search` for the regex 'func New[A-Z]' over Go's own
# source tree ($(go env GOROOT)/src) side by side with ripgrep and grep -r, in
# one hyperfine run. The call is timed as a user runs it (default --confine
# auto, which probes the kernel and applies Landlock first) and with
# --confine off (the search engine and the CLI only). Installs hyperfine and
# ripgrep (Debian packages) when they are missing. Figures are recorded in
# docs/BENCHMARKS.md.
#
#   bench/search.sh                 # 20 runs each, 3 warm-ups
#   RUNS=50 OUT=/tmp/s.md bench/search.sh   # more runs, markdown table to OUT
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v hyperfine >/dev/null || ! command -v rg >/dev/null; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench/search.sh: hyperfine and ripgrep are needed: apt-get install hyperfine ripgrep (as root)" >&2
		exit 2
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine ripgrep >/dev/null
fi

make build
bin=$PWD/bin/b10x-harness
src=$(go env GOROOT)/src

# The search must work before it is timed: fail loudly, not with a
# meaningless figure.
if ! "$bin" call --workspace "$src" search '{"pattern":"func New[A-Z]"}' >/dev/null 2>/tmp/bench-search.err; then
	echo "bench/search.sh: '$bin call search' failed:" >&2
	cat /tmp/bench-search.err >&2
	exit 1
fi

echo "host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); tree: $src"
hyperfine --warmup 3 --runs "${RUNS:-20}" -N \
	--export-markdown "${OUT:-/dev/null}" \
	-n 'b10x-harness call search (max_results 200, the default)' \
	"$bin call --workspace $src search '{\"pattern\":\"func New[A-Z]\"}'" \
	-n 'b10x-harness call search (every match)' \
	"$bin call --workspace $src search '{\"pattern\":\"func New[A-Z]\",\"max_results\":1000000}'" \
	-n 'b10x-harness call --confine off search (every match)' \
	"$bin call --confine off --workspace $src search '{\"pattern\":\"func New[A-Z]\",\"max_results\":1000000}'" \
	-n 'rg -n' \
	"rg -n 'func New[A-Z]' $src" \
	-n 'grep -rnE' \
	"grep -rnE 'func New[A-Z]' $src"
