#!/usr/bin/env bash
# The main job on a fresh machine, with no network and no key: build the
# harness, show what a model would be given on a sample workspace, and pass a
# few calls — ordinary ones and attacks — through the gate. Each outcome is
# printed, and the run record is summarised at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./bin/b10x-harness
demo=$(mktemp -d /tmp/b10x-demo.XXXXXX)
trap 'rm -rf "$demo"' EXIT
ws="$demo/workspace"
mkdir -p "$ws/src" "$demo/outside"
printf 'package main\n\nfunc main() { println("hello") }\n' > "$ws/src/main.go"
printf 'TOKEN=do-not-leak\n' > "$demo/outside/secret.env"
ln -s ../../outside/secret.env "$ws/src/link-out" # from src/, two levels up: outside the root
record="$demo/run.jsonl"

echo "== tools --surface flat (what a model would see)"
"$bin" tools --workspace "$ws"
echo
echo "== tools --surface verbs"
"$bin" tools --surface verbs --workspace "$ws"

call() {
	echo
	echo "== call $*"
	"$bin" call --workspace "$ws" --record "$record" "$@" || echo "(exit status $?)"
}
call file_read '{"path":"src/main.go"}'
call search '{"pattern":"func [a-z]+"}'
call find '{"pattern":"**/*.go"}'
call file_read '{"path":"../outside/secret.env"}'
call file_read '{"path":"src/link-out"}'
call file_read '{"path":"/proc/self/root/etc/passwd"}'
call --surface verbs tool_invoke '{"name":"run","arguments":{"argv":["sh","-c","cat /etc/shadow"]}}'
call file_write '{"path":"src/new.txt","content":"hi\n"}'
echo
echo "== record summary"
"$bin" record summary "$record"
