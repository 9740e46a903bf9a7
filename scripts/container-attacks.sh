#!/bin/sh
# The attacks that execute programs (the run and exec attack cases), run
# inside a container from the project's image by scripts/container-test.sh,
# as a non-root user whose container allows run calls. busybox sh: no bash.
# Prints "attack NAME ok" or "attack NAME FAIL: why" per case, then
# "attacks: N passed, N failed"; exits 1 when any failed.
#
# Not here: the fork bomb (a container gives the harness no pids.max, so
# only the container's own limit would bound it) and the planted-binary
# cases that need a program on PATH the image does not have.
set -u
home=${HOME:-/home/user}
secret=do-not-leak-$$
key=key-do-not-leak-$$
mkdir -p "$home/outside" "$home/ws/sub"
printf 'TOKEN=%s\n' "$secret" > "$home/outside/secret.env"
ln -sf ../outside "$home/ws/linkout"
cd "$home/ws" || exit 1
export ANTHROPIC_API_KEY="$key"

pass=0
fail=0
ok() { echo "attack $1 ok"; pass=$((pass + 1)); }
bad() { echo "attack $1 FAIL: $2"; fail=$((fail + 1)); }

call() {
	b10x-harness call --workspace . --allow-program cat --allow-program sh --allow-program echo \
		--allow-program env --yes run "$1" 2>/dev/null
}
status() { sed -n 's/^{"status":"\([a-z_]*\)".*/\1/p' | head -n 1; }
reason() { sed -n 's/.*"reason":"\([a-z_]*\)".*/\1/p' | head -n 1; }

# Controls: outside the sandbox the secret and the key are there to be
# found, and a setsid'd sleep survives its shell; so their absence below
# means the sandbox stopped them.
case $(cat "$home/outside/secret.env") in *"$secret"*) ok control-secret ;; *) bad control-secret "the planted secret cannot be read" ;; esac
case $(env) in *"$key"*) ok control-key ;; *) bad control-key "the key is not in the harness's environment" ;; esac
setsid sh -c "sleep 1001 </dev/null >/dev/null 2>&1 &"
sleep 1
if ps -o pid,args | grep -v grep | grep -q 'sleep 1001'; then
	ok control-survivor
	pkill -f 'sleep 1001' 2>/dev/null || kill $(ps -o pid,args | grep 'sleep 1001' | grep -v grep | awk '{print $1}')
else
	bad control-survivor "ps cannot see a setsid'd sleep: the survivors check would prove nothing"
fi

# Run calls publish here, or the rest would prove nothing.
out=$(call '{"argv":["echo","alive"]}')
case $out in
*'"status":"executed"'*alive*) ok published ;;
*) bad published "a plain run call did not execute: $out"; echo "attacks: $pass passed, $fail failed"; exit 1 ;;
esac

# The child cannot read outside the workspace.
for argv in '["cat","../outside/secret.env"]' "[\"cat\",\"$home/outside/secret.env\"]" \
	'["sh","-c","cat ../outside/secret.env"]' '["cat","linkout/secret.env"]'; do
	out=$(call "{\"argv\":$argv}")
	case $out in
	*"$secret"*) bad read-outside "$argv printed the secret" ;;
	*'"status":"executed"'* | *'"status":"failed"'* | *'"status":"refused"'*) ok "read-outside $argv" ;;
	*) bad read-outside "$argv: no outcome: $out" ;;
	esac
done

# Nor write there.
out=$(call '{"argv":["sh","-c","echo x > ../outside/planted; echo x > /home/user/planted2"]}')
if [ -e "$home/outside/planted" ] || [ -e "$home/planted2" ]; then
	bad write-outside "a file was created outside the workspace"
else
	ok write-outside
fi

# Only the environment the policy passes: the harness's API key never
# reaches the child, neither directly nor through /proc.
out=$(call '{"argv":["env"]}')
case $out in
*"$key"*) bad env "the API key reached the child" ;;
*'"status":"executed"'*) ok env ;;
*) bad env "env did not execute: $out" ;;
esac
out=$(call '{"argv":["sh","-c","cat /proc/*/environ /proc/1/environ 2>/dev/null; ls /proc"]}')
case $out in
*"$key"*) bad proc-environ "the API key was read through /proc" ;;
*) ok proc-environ ;;
esac

# The argv reaches execve as is: shell syntax in an argument is bytes.
out=$(call '{"argv":["echo","hi; cat ../outside/secret.env && $(id) `id` > /tmp/x"]}')
case $out in
*"$secret"*) bad argv-literal "the secret was printed" ;;
*'hi; cat ../outside/secret.env \u0026\u0026 $(id) `id` \u003e /tmp/x'* | *'hi; cat ../outside/secret.env && $(id) `id` > /tmp/x'*) ok argv-literal ;;
*) bad argv-literal "the argument was not echoed as is: $out" ;;
esac

# argv[0] must be a declared program, resolved at start.
for argv in '["./cat"]' '["/tmp/x/cat"]' '["cat/../../bin/sh"]' '["CAT"]' '["ls"]'; do
	out=$(call "{\"argv\":$argv}")
	if [ "$(printf '%s' "$out" | status)" = refused ] && [ "$(printf '%s' "$out" | reason)" = program_not_allowed ]; then
		ok "not-allowed $argv"
	else
		bad not-allowed "$argv: $out"
	fi
done

# A working directory outside the workspace, directly or through a link.
for cwd in ../outside linkout /; do
	out=$(call "{\"argv\":[\"cat\",\"secret.env\"],\"cwd\":\"$cwd\"}")
	case $out in
	*"$secret"*) bad cwd-outside "cwd $cwd printed the secret" ;;
	*'"status":"executed"'*) bad cwd-outside "cwd $cwd was accepted: $out" ;;
	*) ok "cwd-outside $cwd" ;;
	esac
done

# Nothing survives the call: setsid and a double fork, then exit.
out=$(call '{"argv":["sh","-c","setsid sh -c \"sleep 1000 </dev/null >/dev/null 2>&1 &\"; echo forked"]}')
sleep 1
if ps -o pid,args 2>/dev/null | grep -v grep | grep -q 'sleep 1000'; then
	bad survivors "a sleep 1000 outlived its call: $(ps -o pid,args | grep 'sleep 1000' | grep -v grep)"
else
	case $out in
	*'"status":"executed"'*forked*) ok survivors ;;
	*) bad survivors "the call did not execute: $out" ;;
	esac
fi

echo "attacks: $pass passed, $fail failed"
[ "$fail" = 0 ]
