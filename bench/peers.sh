#!/usr/bin/env bash
# Start-up against the peers (issue 17), in ONE hyperfine run: bare
# /bin/true, bubblewrap, firejail, Codex's Linux sandbox and Anthropic's
# sandbox-runtime when they install and run, `b10x-harness exec -- /bin/true`
# and `b10x-harness --version`. Installs hyperfine, bubblewrap and firejail
# with apt when missing; Codex (@openai/codex) and sandbox-runtime
# (@anthropic-ai/sandbox-runtime, which needs ripgrep and socat) with npm into
# a cache directory, both optional: a peer that does not install or run is
# left out and the output says why. Figures go in docs/BENCHMARKS.md
# ("Start-up against the peers"). Then run calls through one MCP session
# (`b10x-harness mcp`, bench/mcprun) beside bubblewrap started from the
# same client process (issue 34): a burst of BURST calls sent at once, and
# calls one at a time with PAUSE between them (the model's turn), in an
# empty workspace and in a copy of Go's src/; figures
# in docs/BENCHMARKS.md ("MCP: a burst of run calls and calls with a pause,
# against bubblewrap").
#
#   bench/peers.sh                       # 30 runs each, 3 warm-ups
#   RUNS=50 OUT=/tmp/peers.md bench/peers.sh
#   BURST=4 BURSTS=20 PAUSED_CALLS=40 PAUSE=100ms bench/peers.sh   # the MCP cases' defaults
#   TREE_BURSTS=5 TREE_CALLS=20 bench/peers.sh   # the same in a copy of Go's src/
#   BIN=/tmp/old/bin/b10x-harness bench/peers.sh   # another binary beside this one
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for c in hyperfine:hyperfine bwrap:bubblewrap firejail:firejail; do
	command -v "${c%%:*}" >/dev/null || need+=("${c#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench/peers.sh: needed: apt-get install ${need[*]} (as root)" >&2
		exit 2
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

make build >/dev/null
bin=$PWD/bin/b10x-harness
ws=$(mktemp -d /tmp/b10x-peers-bench.XXXXXX)
trap 'rm -rf "$ws"' EXIT

args=(-n 'bare /bin/true' '/bin/true'
	-n 'bwrap --unshare-all' 'bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent /bin/true'
	-n 'firejail --noprofile' 'firejail --quiet --noprofile /bin/true')

# Optional peers from npm, into a cache directory (not the project tree).
cache=${XDG_CACHE_HOME:-$HOME/.cache}/b10x-bench/npm
skip() { echo "peers: $1 left out: $2"; }
if command -v npm >/dev/null; then
	mkdir -p "$cache"
	if [ ! -x "$cache/node_modules/.bin/codex" ] || [ ! -x "$cache/node_modules/.bin/srt" ]; then
		npm install --no-audit --no-fund --prefix "$cache" @openai/codex @anthropic-ai/sandbox-runtime >/dev/null 2>&1 || true
	fi
	codex=$(find "$cache/node_modules/@openai" -path '*/vendor/*/bin/codex' -type f 2>/dev/null | head -1)
	if [ -z "$codex" ]; then
		skip codex "npm did not install @openai/codex's native binary into $cache"
	elif ! out=$("$codex" sandbox /bin/true 2>&1); then
		skip codex "'codex sandbox /bin/true' failed: $(echo "$out" | head -3)"
	else
		args+=(-n 'codex sandbox (native)' "$codex sandbox /bin/true")
	fi
	srt=$cache/node_modules/.bin/srt
	if [ ! -x "$srt" ]; then
		skip srt "npm did not install @anthropic-ai/sandbox-runtime into $cache"
	else
		for c in rg:ripgrep socat:socat; do
			command -v "${c%%:*}" >/dev/null || { [ "$(id -u)" -eq 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${c#*:}" >/dev/null || true; }
		done
		if ! out=$("$srt" /bin/true 2>&1); then
			skip srt "'srt /bin/true' failed: $(echo "$out" | head -3)"
		else
			args+=(-n 'srt (sandbox-runtime)' "$srt /bin/true")
		fi
	fi
else
	skip "codex and srt" "npm is not installed"
fi

# The confined spawn must work before it is timed.
if ! "$bin" exec --workspace "$ws" -- /bin/true 2>/tmp/bench-peers.err; then
	echo "bench/peers.sh: '$bin exec -- /bin/true' failed:" >&2
	cat /tmp/bench-peers.err >&2
	exit 1
fi
args+=(-n 'b10x-harness exec' "$bin exec --workspace $ws -- /bin/true"
	-n 'b10x-harness --version' "$bin --version")
if [ -n "${BIN:-}" ]; then
	args+=(-n "$BIN exec" "$BIN exec --workspace $ws -- /bin/true"
		-n "$BIN --version" "$BIN --version")
fi

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(nproc) CPUs; uptime:$(uptime | sed 's/.*up[^,]*,[^,]*,//')"
echo "binary: $(stat -c %s "$bin" | awk '{printf "%.1f MB", $1/1e6}'), $(git rev-parse --short HEAD)"
hyperfine -N --warmup "${WARMUP:-3}" --runs "${RUNS:-30}" --export-markdown "${OUT:-/dev/null}" "${args[@]}"

# One run call inside a session. A replay's calls come back to back, so the
# sandbox started behind a call is still being built when the next comes.
calls=40
{
	for _ in $(seq $calls); do
		echo '{"text": "again", "tool_calls": [{"name": "run", "arguments": {"argv": ["true"]}}]}'
	done
	echo '{"text": "done"}'
} >"$ws.calls.jsonl"
echo '{"text": "done"}' >"$ws.none.jsonl"
trap 'rm -rf "$ws" "$ws.calls.jsonl" "$ws.none.jsonl" "$ws.json"' EXIT
session=("$bin" run --workspace "$ws" --allow-program true --approve-up-to high --max-turns $((calls + 2)))
"${session[@]}" --provider "replay:$ws.calls.jsonl" >/dev/null
hyperfine -N --warmup 1 --runs "${SESSION_RUNS:-10}" --export-json "$ws.json" \
	-n "run: $calls calls" "${session[*]} --provider replay:$ws.calls.jsonl" \
	-n 'run: no call' "${session[*]} --provider replay:$ws.none.jsonl" >/dev/null
python3 - "$ws.json" "$calls" <<'PY'
import json, sys
r = {x["command"]: x["mean"] for x in json.load(open(sys.argv[1]))["results"]}
n = int(sys.argv[2])
with_calls = next(v for k, v in r.items() if k.endswith("calls"))
without = next(v for k, v in r.items() if k.endswith("no call"))
print(f"run call in a session, back to back (replay of {n} minus none): {(with_calls - without) / n * 1000:.1f} ms per call")
PY

# Run calls through one MCP session, each case beside bubblewrap from the
# same client process: a burst sent at once (the first answer, and the
# second and later calls each), and calls with a pause between them (p50,
# p90). mcprun fails if any call is an error or exits other than 0.
go build -o "$ws.mcprun" ./bench/mcprun
trap 'rm -rf "$ws" "$ws.calls.jsonl" "$ws.none.jsonl" "$ws.json" "$ws.mcprun" "$ws.mcprun.err"' EXIT
"$ws.mcprun" -n "${BURST:-4}" -bursts "${BURSTS:-20}" -calls "${PAUSED_CALLS:-40}" -pause "${PAUSE:-100ms}" -- \
	"$bin" mcp --workspace "$ws" --allow-program true --approve-up-to high 2>"$ws.mcprun.err" ||
	{ cat "$ws.mcprun.err" >&2; exit 1; }

# The same in a workspace that holds a repository's worth of files (a copy
# of Go's src/, 11,000 files): what a call costs that grows with the tree
# (the gate reads the read scope's masks and the protected paths before
# each call) shows here, not in the empty workspace above.
tree=$(mktemp -d /tmp/b10x-peers-tree.XXXXXX)
trap 'rm -rf "$ws" "$ws.calls.jsonl" "$ws.none.jsonl" "$ws.json" "$ws.mcprun" "$ws.mcprun.err" "$tree"' EXIT
cp -a "$(go env GOROOT)/src/." "$tree/"
echo "a workspace of $(find "$tree" -type f | wc -l) files:"
"$ws.mcprun" -n "${BURST:-4}" -bursts "${TREE_BURSTS:-5}" -calls "${TREE_CALLS:-20}" -pause "${PAUSE:-100ms}" -- \
	"$bin" mcp --workspace "$tree" --allow-program true --approve-up-to high 2>"$ws.mcprun.err" ||
	{ cat "$ws.mcprun.err" >&2; exit 1; }

# With the model's turn between calls, side by side with bubblewrap: the
# spawn alone, then the whole session's call (surface, gate, run tool,
# broker; its ns/call metric).
CGO_ENABLED=0 go test -ldflags="$(make -s helper-ldflags)" ./confine/spawn -run '^$' \
	-bench 'BenchmarkRunTrue$|RunTruePrestarted|RunTrueBackToBack|BwrapTrue' -benchtime "${BENCHTIME:-40x}" -count "${COUNT:-2}" |
	grep -E '^Benchmark'
CGO_ENABLED=0 go test -ldflags="$(make -s helper-ldflags)" ./session -run '^$' \
	-bench 'SessionRun' -benchtime "${BENCHTIME:-40x}" -count "${COUNT:-2}" |
	grep -E '^Benchmark'

