#!/usr/bin/env bash
# Runs the harness in containers from the project's image and checks that
# what doctor says matches what happens (`make containertest`).
#
#   scripts/container-test.sh [IMAGE]    (default: localhost/b10x-harness:dev,
#                                          built by make image when missing)
#
# Cases: seccomp profile x user x /proc.
#   profile  runtime-default  the engine's own default profile
#            shipped          deploy/seccomp/b10x-harness.json
#            docker-default   deploy/seccomp/upstream-default.json (Docker's
#                             default: no user namespaces without CAP_SYS_ADMIN)
#   user     root, 1000
#   /proc    masked (the engine's default), unmasked
#            (--security-opt systempaths=unconfined)
#
# In each container: doctor --workspace W, tools, one `call run` of cat
# and one exec of cat. A case passes when doctor publishes run exactly
# when tools does, the run call executes and exec works (and prints the
# file); when run is withheld, the call and exec must fail and doctor must
# say why. Then scripts/container-attacks.sh (the executing section of the
# attack corpus) runs in a container set up as the Kubernetes pods are.
# Two cases have a fixed expectation: shipped + uid 1000 +
# unmasked /proc must execute (that is what the profile is for), and
# docker-default + uid 1000 must lack userns with a fix that names the
# seccomp profile. Exit status 1 when any case fails; 0 with a SKIP line
# when no engine is there and none can be installed
# (CONTAINERTEST_REQUIRE=1 makes that a failure; CI's .ci/run sets it).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
image=${1:-localhost/b10x-harness:dev}
. deploy/container-runtime.sh

start=$(date +%s.%N)
if ! ct_pick; then
	if [ "${CONTAINERTEST_REQUIRE:-}" = 1 ]; then
		echo "containertest: FAIL: no container engine (CONTAINERTEST_REQUIRE=1)"
		exit 1
	fi
	echo "containertest: SKIP: no container engine can be run or installed here"
	exit 0
fi
if ! "${CT[@]}" image exists "$image" 2>/dev/null && ! "${CT[@]}" image inspect "$image" >/dev/null 2>&1; then
	./deploy/build-image.sh "$image" || exit 1
fi

# The script each container runs (busybox sh). It prints key=value lines.
inner='
W=$1
cd "$W" || exit 9
echo "container-test-$$" > probe.txt
b10x-harness doctor --workspace . > /tmp/doctor.txt 2>&1
if grep -q "^--confine auto: publishes \[.* run" /tmp/doctor.txt; then echo doctor_run=yes; else echo doctor_run=no; fi
echo "doctor_userns=$(grep "^userns " /tmp/doctor.txt | awk "{print \$2}")"
echo "doctor_userns_fix=$(grep "^  userns: " /tmp/doctor.txt | head -n 1)"
echo "doctor_why=$(grep -m 1 "^  not run: " /tmp/doctor.txt)"
b10x-harness tools --workspace . --allow-program cat > /tmp/tools.txt 2>&1
if grep -q "^  run " /tmp/tools.txt; then echo tools_run=yes; else echo tools_run=no; fi
b10x-harness call --workspace . --allow-program cat --yes run "{\"argv\":[\"cat\",\"probe.txt\"]}" > /tmp/call.txt 2>/dev/null
echo "call_status=$(sed -n "s/^{\"status\":\"\([a-z_]*\)\".*/\1/p" /tmp/call.txt | head -n 1)"
if grep -q "container-test-$$" /tmp/call.txt; then echo call_out=yes; else echo call_out=no; fi
b10x-harness exec --workspace . -- cat probe.txt > /tmp/exec.txt 2>/tmp/exec.err
echo "exec_rc=$?"
if grep -q "container-test-$$" /tmp/exec.txt; then echo exec_out=yes; else echo exec_out=no; fi
echo "exec_err=$(grep -m 1 "spawn:\|refus" /tmp/exec.err)"
'

fails=0
cases=0
printf '%-16s %-5s %-9s %-8s %-6s %-14s %-9s %s\n' PROFILE USER PROC DOCTOR TOOLS CALL EXEC VERDICT
for profile in runtime-default shipped docker-default; do
	for user in root 1000; do
		for proc in masked unmasked; do
			cases=$((cases + 1))
			opts=()
			case $profile in
			shipped) opts+=(--security-opt "seccomp=$root/deploy/seccomp/b10x-harness.json") ;;
			docker-default) opts+=(--security-opt "seccomp=$root/deploy/seccomp/upstream-default.json") ;;
			esac
			[ "$proc" = unmasked ] && opts+=(--security-opt systempaths=unconfined)
			if [ "$user" = root ]; then
				ws=/workspace
			else
				ws=/home/user
				opts+=(--user 1000:1000)
			fi
			t0=$(date +%s.%N)
			out=$("${CT[@]}" run --rm --network none "${opts[@]}" --entrypoint /bin/sh "$image" -c "$inner" sh "$ws" 2>&1)
			rc=$?
			t1=$(date +%s.%N)
			get() { printf '%s\n' "$out" | sed -n "s/^$1=//p" | head -n 1; }
			doctor=$(get doctor_run) tools=$(get tools_run) call=$(get call_status) callout=$(get call_out)
			execrc=$(get exec_rc) execout=$(get exec_out) userns=$(get doctor_userns) fix=$(get doctor_userns_fix)
			why=$(get doctor_why) execerr=$(get exec_err)
			problems=()
			[ "$rc" = 0 ] || problems+=("container exited $rc: $(printf '%s' "$out" | tail -n 3)")
			[ -n "$doctor" ] && [ -n "$tools" ] && [ -n "$call" ] && [ -n "$execrc" ] || problems+=("missing output")
			[ "$doctor" = "$tools" ] || problems+=("doctor publishes run: $doctor, tools: $tools")
			if [ "$doctor" = yes ]; then
				[ "$call" = executed ] && [ "$callout" = yes ] || problems+=("doctor publishes run but the call is $call")
				[ "$execrc" = 0 ] && [ "$execout" = yes ] || problems+=("doctor publishes run but exec exited $execrc: $execerr")
			else
				[ "$call" != executed ] || problems+=("doctor withholds run but the call executed")
				[ "$execrc" != 0 ] || problems+=("doctor withholds run but exec exited 0")
				[ -n "$why" ] || problems+=("doctor withholds run without a 'not run:' reason")
			fi
			if [ "$profile/$user/$proc" = shipped/1000/unmasked ] && [ "$call" != executed ]; then
				problems+=("the shipped profile with an unmasked /proc must let a non-root run call execute")
			fi
			if [ "$profile/$user" = docker-default/1000 ]; then
				[ "$userns" = NO ] || problems+=("Docker's default profile should refuse user namespaces, doctor says userns $userns")
				case $fix in
				*seccomp*) ;;
				*) problems+=("doctor does not name the seccomp profile as the userns fix: ${fix:-none}") ;;
				esac
			fi
			verdict=ok
			if [ ${#problems[@]} -gt 0 ]; then
				verdict=FAIL
				fails=$((fails + 1))
			fi
			printf '%-16s %-5s %-9s %-8s %-6s %-14s %-9s %s (%.1f s)\n' "$profile" "$user" "$proc" "run:$doctor" "$tools" "$call" "rc=$execrc" "$verdict" "$(awk "BEGIN{print $t1 - $t0}")"
			[ "$doctor" = no ] && [ -n "$why" ] && echo "    doctor: ${why#  }"
			for p in "${problems[@]}"; do echo "    FAIL: $p"; done
		done
	done
done
# The executing section of the attack corpus, in a container set up as the
# Kubernetes manifests set up their pods: uid 1000, no capabilities, no
# privilege escalation, the shipped profile, an unmasked /proc.
cases=$((cases + 1))
t0=$(date +%s.%N)
out=$("${CT[@]}" run --rm --network none --user 1000:1000 --cap-drop ALL --security-opt no-new-privileges \
	--security-opt "seccomp=$root/deploy/seccomp/b10x-harness.json" --security-opt systempaths=unconfined \
	-v "$root/scripts/container-attacks.sh:/attacks.sh:ro" --entrypoint /bin/sh "$image" /attacks.sh 2>&1)
rc=$?
t1=$(date +%s.%N)
verdict=ok
if [ "$rc" != 0 ] || ! printf '%s\n' "$out" | grep -q '^attacks: [0-9]* passed, 0 failed$'; then
	verdict=FAIL
	fails=$((fails + 1))
fi
printf 'attacks (shipped, 1000, unmasked, --cap-drop ALL, no-new-privileges): %s (%.1f s)\n' "$verdict" "$(awk "BEGIN{print $t1 - $t0}")"
printf '%s\n' "$out" | sed 's/^/    /'

end=$(date +%s.%N)
echo "containertest: $cases cases in $(awk "BEGIN{printf \"%.1f\", $end - $start}") s with ${CT[*]}"
echo "containertest: $((cases - fails)) passed, $fails failed"
[ "$fails" = 0 ]
