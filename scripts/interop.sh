#!/usr/bin/env bash
# `b10x-harness mcp` driven by the agents people use, offline (part of
# `make test`, as `make interoptest`): Claude Code, Codex CLI and Gemini CLI,
# each pointed at a fake model API of the project's own on loopback
# (interop/fakemodel), and a program written with the MCP TypeScript SDK.
# The tests are interop/*_test.go; this script installs the clients and
# runs them.
#
# Packages are installed pinned, once, with `npm install --prefix` into
# ${XDG_CACHE_HOME:-$HOME/.cache}/b10x-harness/npm/NAME@VERSION (as
# scripts/mcp-inspector.sh does). A package that cannot be installed, or
# that installs without what it needs (Codex's native binary comes in an
# optional dependency), fails the script; the tests themselves fail, never
# skip, once B10X_INTEROP names the cache. B10X_HARNESS names the binary
# under test (default bin/b10x-harness); INTEROP_RUN passes a -run regex.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${B10X_HARNESS:-$repo/bin/b10x-harness}

# Keep in step with `pinned` in interop/setup_test.go.
PACKAGES=(@anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0 @modelcontextprotocol/sdk@1.32.2)

fail() { echo "interop.sh: FAIL: $*" >&2; exit 1; }

[[ -x $bin ]] || fail "$bin is not built (make build)"
command -v node >/dev/null || fail "node is not on PATH (the clients need Node.js)"
command -v npm >/dev/null || fail "npm is not on PATH"
command -v go >/dev/null || fail "go is not on PATH"
echo "node $(node --version), npm $(npm --version)"

cache=${XDG_CACHE_HOME:-$HOME/.cache}/b10x-harness/npm

# install PKG@VERSION: installs it under $cache/PKG@VERSION unless that
# version is there already.
install() {
	local spec=$1 name=${1%@*} prefix="$cache/$1"
	local pkg="$prefix/node_modules/$name/package.json"
	if [[ ! -f $pkg ]] || [[ $(node -p "require('$pkg').version") != "${spec##*@}" ]]; then
		echo "installing $spec into $prefix" >&2
		mkdir -p "$prefix"
		npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$spec" >&2 ||
			fail "npm install $spec"
	fi
	[[ $(node -p "require('$pkg').version") == "${spec##*@}" ]] || fail "$spec: another version is installed under $prefix"
}

start=$(date +%s)
for p in "${PACKAGES[@]}"; do
	install "$p"
done
# Codex's binary is in its optional dependency for this platform; npm
# skips an optional dependency it cannot install without failing.
codex_native=$(find "$cache/@openai/codex@0.171.0/node_modules/@openai" -maxdepth 6 -path '*vendor*' -type f -name codex 2>/dev/null | head -1)
[[ -n $codex_native && -x $codex_native ]] ||
	fail "@openai/codex@0.171.0 installed without its native binary (the optional dependency @openai/codex-$(node -p 'process.platform')-$(node -p 'process.arch'))"
echo "clients installed under $cache ($(($(date +%s) - start)) s)"

cd "$repo"
export CGO_ENABLED=0
log=$(mktemp /tmp/b10x-interoptest.XXXXXX)
trap 'rm -f "$log"' EXIT
status=0
B10X_INTEROP=$cache B10X_HARNESS=$bin go test -count=1 -timeout 15m ${INTEROP_RUN:+-run "$INTEROP_RUN"} -v ./interop/... >"$log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
	cat "$log" >&2
	fail "go test ./interop/... exited $status"
fi
# One line a test, with its time.
grep -E '^(--- |ok )' "$log"
echo "interop.sh: PASS ($(($(date +%s) - start)) s)"
