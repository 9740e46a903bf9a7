#!/usr/bin/env bash
# `b10x-harness mcp` against real MCP clients from npm, with this machine's
# Node (part of `make test`, as `make mcptest`):
#
#   1. the MCP Inspector's CLI mode (@modelcontextprotocol/inspector) lists
#      the tools (the names `b10x-harness tools --json` shows for the same
#      policy), reads a file with file_read (its exact content comes back)
#      and gets a refusal as an error result carrying its reason code;
#   2. the scenarios of the MCP conformance suite (@modelcontextprotocol/
#      conformance, server side) that a tools-only server must pass. The
#      suite speaks streamable HTTP only, so the server is reached through
#      supergateway (stdio → streamable HTTP, one server per session).
#
# Packages are installed pinned, once, with `npm install --prefix` into
# ${XDG_CACHE_HOME:-$HOME/.cache}/b10x-harness/npm/NAME@VERSION. Every
# check fails the script loudly; nothing is skipped. B10X_HARNESS names
# the binary (default bin/b10x-harness).
#
# Why these versions (Node 20 here): inspector 2.12.0 declares
# node >=22.19.0 but its CLI mode runs on Node 20 (npm warns EBADENGINE);
# conformance 0.1.14 and later import fs.globSync (Node 22) and fail to
# load, 0.1.13 is the newest that runs. See docs/mcp.md.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${B10X_HARNESS:-$repo/bin/b10x-harness}

INSPECTOR=@modelcontextprotocol/inspector@2.12.0
CONFORMANCE=@modelcontextprotocol/conformance@0.1.13
GATEWAY=supergateway@4.0.0
# The conformance scenarios that test the protocol rather than the suite's
# own sample tools (test_image_content, resources, prompts, completion...),
# which this server does not serve by design.
SCENARIOS=(server-initialize ping logging-set-level tools-list tools-call-error)

fail() { echo "mcp-inspector.sh: FAIL: $*" >&2; exit 1; }

[[ -x $bin ]] || fail "$bin is not built (make build)"
command -v node >/dev/null || fail "node is not on PATH (the MCP Inspector needs Node.js)"
command -v npm >/dev/null || fail "npm is not on PATH"
echo "node $(node --version), npm $(npm --version)"

cache=${XDG_CACHE_HOME:-$HOME/.cache}/b10x-harness/npm

# install PKG@VERSION: prints the prefix it is installed under.
install() {
	local spec=$1 name=${1%@*} prefix="$cache/$1"
	local pkg="$prefix/node_modules/$name/package.json"
	if [[ ! -f $pkg ]] || [[ $(node -p "require('$pkg').version") != "${spec##*@}" ]]; then
		echo "installing $spec into $prefix" >&2
		mkdir -p "$prefix"
		npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$spec" >&2 ||
			fail "npm install $spec"
	fi
	echo "$prefix"
}

tmp=$(mktemp -d /tmp/b10x-mcptest.XXXXXX)
gateway_pid=
cleanup() {
	if [[ -n $gateway_pid ]]; then
		# The gateway and the servers it started, by its process group.
		kill -- "-$gateway_pid" 2>/dev/null || true
		wait "$gateway_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

ws="$tmp/workspace"
mkdir -p "$ws"
printf 'b10x mcp test: %s\nsecond line\n' "$RANDOM$RANDOM" > "$ws/README.md"

# json FILE EXPR: evaluates EXPR (JavaScript, `j` is the parsed file).
json() { node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(eval(process.argv[2]))' "$1" "$2"; }

echo "== MCP Inspector CLI ($INSPECTOR)"
inspector="$(install "$INSPECTOR")/node_modules/.bin/mcp-inspector"
[[ -x $inspector ]] || fail "$inspector is missing after the install"

"$bin" tools --json --workspace "$ws" > "$tmp/tools.json" 2>/dev/null || fail "b10x-harness tools --json"
want=$(json "$tmp/tools.json" 'j.map(t => t.name).join(" ")') || fail "tools --json printed no tool list: $(cat "$tmp/tools.json")"
"$inspector" --cli "$bin" mcp --workspace "$ws" --method tools/list > "$tmp/list.json" ||
	fail "inspector tools/list exited $?: $(cat "$tmp/list.json")"
got=$(json "$tmp/list.json" 'j.tools.map(t => t.name).join(" ")') || fail "tools/list printed no tool list: $(cat "$tmp/list.json")"
[[ $got == "$want" ]] || fail "tools/list names: got [$got], b10x-harness tools shows [$want]"
echo "tools/list: $got"

"$inspector" --cli "$bin" mcp --workspace "$ws" --method tools/call --tool-name file_read --tool-arg path=README.md > "$tmp/call.json" ||
	fail "inspector tools/call file_read exited $?: $(cat "$tmp/call.json")"
# The outcome as data is in _meta (decision 0078); no structuredContent.
[[ $(json "$tmp/call.json" 'j._meta["b10x-harness/outcome"].status + " " + (j.structuredContent === undefined)' 2>&1) == "executed true" ]] ||
	fail "file_read not executed, or with structuredContent: $(cat "$tmp/call.json")"
json "$tmp/call.json" 'j.content[0].text' > "$tmp/text" || fail "file_read: no text content: $(cat "$tmp/call.json")"
# console.log adds one newline to the file's own last one.
printf '\n' | cat "$ws/README.md" - | cmp -s - "$tmp/text" || fail "file_read returned other content: $(cat "$tmp/call.json")"
echo "tools/call file_read: executed, the file's content"

status=0
"$inspector" --cli "$bin" mcp --workspace "$ws" --method tools/call --tool-name file_read --tool-arg path=../outside > "$tmp/refused.json" || status=$?
[[ $status -ne 0 ]] || fail "the inspector took a refused call for a success"
[[ $(json "$tmp/refused.json" 'j.isError + " " + j._meta["b10x-harness/outcome"].reason' 2>&1) == "true denied_path" ]] ||
	fail "a path outside the workspace: $(cat "$tmp/refused.json")"
echo "tools/call file_read ../outside: isError, denied_path"

echo "== MCP conformance suite, server side ($CONFORMANCE, through $GATEWAY)"
conformance="$(install "$CONFORMANCE")/node_modules/.bin/conformance"
gateway="$(install "$GATEWAY")/node_modules/.bin/supergateway"
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
setsid "$gateway" --stdio "$(printf '%q ' "$bin" mcp --workspace "$ws")" --outputTransport streamableHttp --stateful \
	--port "$port" --healthEndpoint /healthz --logLevel none > "$tmp/gateway.log" 2>&1 &
gateway_pid=$!
for _ in $(seq 100); do
	node -e 'fetch(process.argv[1]).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "http://127.0.0.1:$port/healthz" && break
	kill -0 "$gateway_pid" 2>/dev/null || fail "the gateway exited: $(cat "$tmp/gateway.log")"
	sleep 0.1
done
for sc in "${SCENARIOS[@]}"; do
	out=$("$conformance" server --url "http://127.0.0.1:$port/mcp" --scenario "$sc" 2>&1) || fail "conformance $sc exited $?:
$out"
	grep -Eq '^Passed: ([0-9]+)/\1, 0 failed' <<<"$out" || fail "conformance $sc:
$out"
	echo "conformance $sc: $(grep -E '^Passed:' <<<"$out")"
done
echo "mcp-inspector.sh: PASS"
