#!/usr/bin/env bash
# `b10x-harness mcp` against the reference MCP filesystem server from npm
# (@modelcontextprotocol/server-filesystem, installed pinned into the same
# cache as scripts/mcp-inspector.sh) on the same directory, in one run of
# bench/mcpbench: time from process start to the first tools/list answer;
# tools/call reading a 1 KiB file, p50 and p99 over CALLS calls on one
# connection; VmRSS of the server's process tree after those calls (and
# its anonymous part). Each server is run RUNS times, alternately, with the
# go-sdk client and with raw JSON-RPC lines over pipes (the servers without
# the go-sdk client's cost); each table gives the medians and the ratio. A
# third server, the go-sdk floor (a go-sdk server with one tool returning
# the file, bench/mcpbench -floor), shows what the SDK and the pipes cost on
# their own. Targets: start ≤ 0.5×, p50 ≤ 0.2×, p99 ≤ 0.2×, memory ≤ 0.5×
# the reference's. Figures are recorded in docs/BENCHMARKS.md ("MCP
# server").
#
#   bench/mcp.sh                 # 5 runs of 1,000 calls each
#   RUNS=9 CALLS=2000 bench/mcp.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
CALLS=${CALLS:-1000}
REFERENCE=@modelcontextprotocol/server-filesystem@2026.8.31

command -v node >/dev/null && command -v npm >/dev/null || { echo "bench/mcp.sh: node and npm are needed" >&2; exit 2; }
make -s build
bin=$PWD/bin/b10x-harness

prefix=${XDG_CACHE_HOME:-$HOME/.cache}/b10x-harness/npm/$REFERENCE
pkg=$prefix/node_modules/@modelcontextprotocol/server-filesystem/package.json
if [[ ! -f $pkg ]] || [[ $(node -p "require('$pkg').version") != "${REFERENCE##*@}" ]]; then
	mkdir -p "$prefix"
	npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$REFERENCE" >&2
fi
reference=$prefix/node_modules/.bin/mcp-server-filesystem

dir=$(mktemp -d /tmp/b10x-mcp-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
head -c 768 /dev/urandom | base64 -w 64 | head -c 1024 > "$dir/f.txt"

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
echo "load: $(uptime)"
echo "node $(node --version), $REFERENCE, b10x-harness $(git rev-parse --short HEAD)"
go build -o "$dir/mcpbench" ./bench/mcpbench
"$dir/mcpbench" -runs "$RUNS" -calls "$CALLS" -want "$dir/f.txt" \
	"b10x-harness mcp=file_read={\"path\":\"f.txt\"}=$bin mcp --workspace $dir" \
	"server-filesystem=read_text_file={\"path\":\"$dir/f.txt\"}=$reference $dir" \
	"go-sdk floor=read={}=$dir/mcpbench -floor $dir/f.txt"
