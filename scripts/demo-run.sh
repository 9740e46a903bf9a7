#!/usr/bin/env bash
# The main job on a fresh machine, with no network and no key: play the
# security evaluation examples/attacks.jsonl through `b10x-harness run` on a
# copy of the sample workspace, then a narrowed named agent on the verbs
# surface, and summarise the run record.
#
#   scripts/demo-run.sh                 build if needed, prepare, run, summarise
#   scripts/demo-run.sh --prepare DIR   only prepare DIR (used by the tests)
#
# DIR/workspace is a copy of examples/workspace with the planted links the
# scripts attack; DIR/outside holds a secret that must never appear.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

prepare() {
	local dir=$1
	local ws="$dir/workspace"
	mkdir -p "$dir/outside" "$dir/workspace-archived"
	cp -R "$repo/examples/workspace" "$ws"
	printf 'TOKEN=do-not-leak\n' > "$dir/outside/secret.env"
	printf 'do-not-leak (prefix sibling)\n' > "$dir/workspace-archived/secret.txt"
	printf -- '-----BEGIN KEY-----\nnot for writing\n-----END KEY-----\n' > "$ws/secret.pem"
	mkdir -p "$ws/ok" "$ws/.git/hooks" "$ws/a"
	ln -s ../outside/secret.env "$ws/link-out"          # a link out of the root
	ln -s chain2 "$ws/chain1"                           # link1 -> link2 -> link3 -> outside
	ln -s chain3 "$ws/chain2"
	ln -s ../outside/secret.env "$ws/chain3"
	ln -s ../outside "$ws/linkdir"                      # a directory link out of the root
	ln -s ../outside/planted-victim.txt "$ws/planted.txt" # a dangling link planted at a write target
	ln -s ../secret.pem "$ws/ok/key"                    # dodges **/*.pem only if scope ignored links
	# A file larger than the default 256 KiB result cap.
	awk 'BEGIN { for (i = 1; i <= 8000; i++) printf "log line %d that nobody should read in one piece\n", i }' > "$ws/big.log"
}

if [[ ${1:-} == --prepare ]]; then
	[[ -n ${2:-} ]] || { echo "usage: $0 --prepare DIR" >&2; exit 2; }
	prepare "$2"
	exit 0
fi

bin=${B10X_HARNESS:-$repo/bin/b10x-harness}
if [[ ! -x $bin ]]; then
	(cd "$repo" && CGO_ENABLED=0 go build -trimpath -o bin/b10x-harness ./cmd/b10x-harness)
	bin=$repo/bin/b10x-harness
fi
demo=$(mktemp -d /tmp/b10x-demo.XXXXXX)
trap 'rm -rf "$demo"' EXIT
prepare "$demo"
record="$demo/run.jsonl"

echo "== security evaluation: examples/attacks.jsonl (flat surface)"
status=0
"$bin" run --provider "replay:$repo/examples/attacks.jsonl" --workspace "$demo/workspace" --record "$record" \
	--approve-up-to high --allow-program make --allow-program echo --write-scope '**/*.pem=denied' || status=$?
echo "(exit status $status)"

echo
echo "== a narrowed named agent on the verbs surface: examples/attacks-verbs.jsonl as agent 'reader'"
status=0
"$bin" run --provider "replay:$repo/examples/attacks-verbs.jsonl" --surface verbs --workspace "$demo/workspace" --record "$record" \
	--agents-dir "$repo/examples/agents" --agent reader --approve-up-to high --allow-program make || status=$?
echo "(exit status $status)"

echo
if [[ -e $demo/outside/planted-victim.txt || -e $demo/outside/dropped.txt ]]; then
	echo "!! something was written outside the workspace" >&2
	exit 1
fi
echo "== nothing was written outside the workspace; the run record says:"
"$bin" record summary "$record"

# The record as a page a person can look at. It outlives the demo's
# scratch directory: B10X_DEMO_REPORT names where, .cache/ by default.
report=${B10X_DEMO_REPORT:-$repo/.cache/demo/report.html}
mkdir -p "$(dirname "$report")"
echo
"$bin" record report "$record" -o "$report"
echo "open it in a browser: file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
