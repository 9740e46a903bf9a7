#!/usr/bin/env bash
# mutate.sh: the mutation harness (docs/decisions/0044-mutation-harness.md).
#
# For each mutation in scripts/mutations.txt it copies the repository's
# files (tracked and untracked, not ignored: the tree as it is now, never
# modified) into a scratch directory once, applies the mutation there,
# rebuilds the helper image, compiles the listed packages' tests, runs them
# on this host with CGO_ENABLED=0 and a timeout, and restores the file.
#
# Before the first mutation of a given pkgs and run, it runs those same
# tests on the unmutated scratch tree (the baseline, once per distinct
# pair): a failure there is the tests' or the machine's, not the
# mutation's, and is never counted as a kill.
#
#   KILLED        a listed test failed: some test notices the mutation
#   SURVIVED      the tests passed: no test notices it; write one that does
#   TIMEOUT       no test failed, but the run timed out (go test's own
#                 -timeout panic, or this script's): a hang is not a kill;
#                 give the test that should notice a deadline of its own
#   BASELINE-FAIL the listed tests fail (or time out, or do not compile) on
#                 the unmutated tree: the mutation was not applied; fix the
#                 test or the environment first
#   STALE         a snippet is not in the file exactly once: the list no
#                 longer matches the code; update it
#   BROKEN        the mutated tree does not compile: fix the entry
#
# It prints a table and exits nonzero unless every mutation was KILLED.
#
# Usage: scripts/mutate.sh [-f list] [-t seconds] [-k] [id ...]
#   -f list     the mutations file (default scripts/mutations.txt)
#   -t seconds  timeout of each test run, the baseline's included (default
#               600, at least 15; go test gets 10 s less, so that its
#               panic names the test that hung)
#   -k          keep the scratch directory and its logs
#   id ...      run only these mutations (default: all)
#
# It runs tests on the host only, one package at a time (-p 1): the VM
# shapes are too slow for a run per mutation.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
list=$repo/scripts/mutations.txt
timeout_s=600
keep=0
while getopts 'f:t:k' opt; do
	case $opt in
	f) list=$OPTARG ;;
	t) timeout_s=$OPTARG ;;
	k) keep=1 ;;
	*) echo "usage: $0 [-f list] [-t seconds] [-k] [id ...]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
only=("$@")
[[ $timeout_s =~ ^[0-9]+$ && $timeout_s -ge 15 ]] || { echo "mutate: -t $timeout_s: want whole seconds, at least 15" >&2; exit 2; }

export CGO_ENABLED=0
export PATH=/usr/local/go/bin:$PATH
# interop/'s tests run the binary $B10X_HARNESS names when it is set; unset,
# they build the harness from the tree they are in: the mutated one here.
unset B10X_HARNESS
GO=${GO:-go}

# unescape VAR TEXT: \n is a newline, \t a tab, \\ a backslash.
unescape() {
	local s=$2 nl=$'\n' tab=$'\t' bs=$'\x01'
	s=${s//\\\\/$bs}
	s=${s//\\n/$nl}
	s=${s//\\t/$tab}
	s=${s//$bs/\\}
	printf -v "$1" '%s' "$s"
}

# ---- parse the list into parallel arrays, one element per mutation ----
ids=() whys=() pkgss=() runs=() edits=()
# edits[i] is a sequence of records "file<RS>find<RS>replace" joined by <GS>.
RS=$'\x1e' GS=$'\x1d'
cur=-1 curfile= pendfind= havefind=0 lineno=0
parse_err() { echo "mutate: $list:$lineno: $*" >&2; exit 2; }
while IFS= read -r line || [[ -n $line ]]; do
	lineno=$((lineno + 1))
	[[ -z ${line//[[:space:]]/} || $line == \#* ]] && continue
	[[ $line == *:* ]] || parse_err "not a \"key: value\" line: $line"
	key=${line%%:*}
	val=${line#*:}
	val=${val# }
	case $key in
	id)
		[[ $havefind == 0 ]] || parse_err "find without replace in ${ids[cur]}"
		cur=$((cur + 1)) curfile=
		ids[cur]=$val whys[cur]= pkgss[cur]= runs[cur]= edits[cur]=
		;;
	why | pkgs | run | file | find | replace)
		[[ $cur -ge 0 ]] || parse_err "$key before the first id"
		case $key in
		why) whys[cur]=$val ;;
		pkgs) pkgss[cur]=$val ;;
		run) runs[cur]=$val ;;
		file) curfile=$val ;;
		find)
			[[ -n $curfile ]] || parse_err "find before file"
			[[ $havefind == 0 ]] || parse_err "two finds in a row"
			[[ -n $val ]] || parse_err "empty find"
			pendfind=$val havefind=1
			;;
		replace)
			[[ $havefind == 1 ]] || parse_err "replace without find"
			[[ -n ${edits[cur]} ]] && edits[cur]+=$GS
			edits[cur]+=$curfile$RS$pendfind$RS$val
			havefind=0
			;;
		esac
		;;
	*) parse_err "unknown key $key" ;;
	esac
done <"$list"
[[ $havefind == 0 ]] || parse_err "find without replace at the end"
for i in "${!ids[@]}"; do
	[[ -n ${edits[i]} && -n ${pkgss[i]} && -n ${whys[i]} ]] || { echo "mutate: ${ids[i]}: needs why, file, find, replace and pkgs" >&2; exit 2; }
	for j in "${!ids[@]}"; do
		[[ $j -lt $i && ${ids[j]} == "${ids[i]}" ]] && { echo "mutate: id ${ids[i]} is used twice" >&2; exit 2; }
	done
done
for o in "${only[@]}"; do
	found=0
	for id in "${ids[@]}"; do [[ $id == "$o" ]] && found=1; done
	[[ $found == 1 ]] || { echo "mutate: no mutation $o in $list" >&2; exit 2; }
done

# ---- the scratch tree ----
scratch=$(mktemp -d /tmp/b10x-mutate.XXXXXX)
if [[ $keep == 0 ]]; then
	trap 'rm -rf "$scratch"' EXIT
fi
tree=$scratch/tree
logs=$scratch/logs
mkdir -p "$tree" "$logs"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
	tar --null -T - -cf -) | tar -C "$tree" -xf -
echo "mutate: scratch tree $tree (from $repo), ${#ids[@]} mutations in $list, timeout ${timeout_s}s each"

# runtests LOG PKGS RUN: rebuilds the helper image in the scratch tree,
# compiles the tests of PKGS (space separated) and runs those RUN selects
# (all when empty), appending everything to LOG. It returns 0 when they
# passed, 3 when they do not compile, 124 or 137 when this script's timeout
# ended them, otherwise go test's status.
runtests() {
	local log=$1 run=$3 ld
	local -a pkgs runargs=()
	read -r -a pkgs <<<"$2"
	[[ -n $run ]] && runargs=(-run "$run")
	(
		cd "$tree"
		ld=$(make -s helper-ldflags 2>>"$log") || exit 3
		"$GO" test -c -o "$scratch/bin/" -ldflags="$ld" "${pkgs[@]}" >>"$log" 2>&1 || exit 3
		rm -rf "$scratch/bin"
		echo "== go test -count=1 -p 1 ${runargs[*]} ${pkgs[*]}" >>"$log"
		B10X_REQUIRE_HELPER_IMAGE=1 timeout -k 10 "$timeout_s" \
			"$GO" test -count=1 -p 1 -timeout "$((timeout_s - 10))s" -ldflags="$ld" "${runargs[@]}" "${pkgs[@]}" >>"$log" 2>&1
	)
}

# testoutput LOG: the output of LOG's last test run (after its "== go test" line).
testoutput() { awk '/^== go test /{out = ""; on = 1; next} on {out = out $0 "\n"} END {printf "%s", out}' "$1"; }

# timedout LOG RC: whether the test run that returned RC timed out, by
# this script's timeout or by go test's -timeout panic.
timedout() {
	[[ $2 == 124 || $2 == 137 ]] && return 0
	testoutput "$1" | grep -q '^panic: test timed out after '
}

# failures LOG: the first failure lines of LOG's last test run, on one line.
failures() {
	local f
	f=$(testoutput "$1" | grep -E '^(--- FAIL|FAIL|panic:)' | grep -v '^FAIL$' | head -3 | tr '\n' ' ' || true)
	printf '%s' "${f:0:140}"
}

# Baselines, by pkgs and run: their status (passed, failed, timed out, does
# not compile) and log.
declare -A base_status=() base_log=()
nbase=0
# baseline PKGS RUN: runs the tests of PKGS that RUN selects on the tree as
# it is (every mutation restored), once per pair; sets base_key.
baseline() {
	local pkgs=$1 run=$2 log rc t0 st
	base_key=$pkgs$RS$run
	[[ -n ${base_status[$base_key]+x} ]] && return 0
	nbase=$((nbase + 1))
	log=$logs/baseline-$nbase.log
	echo "== baseline $nbase: the unmutated tree, pkgs $pkgs, run ${run:-(all)}" >"$log"
	t0=$SECONDS
	runtests "$log" "$pkgs" "$run" && rc=0 || rc=$?
	if [[ $rc == 0 ]]; then
		st=passed
	elif [[ $rc == 3 ]]; then
		st="does not compile"
	elif timedout "$log" "$rc"; then
		st="timed out"
	else
		st=failed
	fi
	base_status[$base_key]=$st base_log[$base_key]=$log
	echo "mutate: baseline $nbase (pkgs $pkgs, run ${run:-(all)}): $st in $((SECONDS - t0))s"
}

results=()
fail=0
nbasefail=0 ntimeout=0
for i in "${!ids[@]}"; do
	id=${ids[i]}
	if [[ ${#only[@]} -gt 0 ]]; then
		sel=0
		for o in "${only[@]}"; do [[ $o == "$id" ]] && sel=1; done
		[[ $sel == 1 ]] || continue
	fi
	log=$logs/$id.log
	echo "== $id: ${whys[i]}" >"$log"
	status=
	failed=
	# The mutated files are made beside the tree first (new/K from orig/K,
	# edit after edit), so that the baseline can still run on the tree as
	# it is; they are copied in only after it.
	files=()
	declare -A work=()
	rm -rf "$scratch/orig" "$scratch/new"
	mkdir -p "$scratch/orig" "$scratch/new"
	IFS=$GS read -r -d '' -a recs < <(printf '%s\0' "${edits[i]}")
	for rec in "${recs[@]}"; do
		IFS=$RS read -r -d '' f find repl < <(printf '%s\0' "$rec") || true
		unescape find "$find"
		unescape repl "$repl"
		path=$tree/$f
		if [[ ! -f $path ]]; then
			echo "$f: no such file" >>"$log"
			status=STALE
			break
		fi
		if [[ -z ${work[$f]+x} ]]; then
			files+=("$f")
			k=${#files[@]}
			cp "$path" "$scratch/orig/$k"
			cp "$path" "$scratch/new/$k"
			work[$f]=$scratch/new/$k
		fi
		w=${work[$f]}
		content=$(cat "$w"; printf x)
		content=${content%x}
		after=${content#*"$find"}
		if [[ $after == "$content" ]]; then
			echo "$f: snippet not found: $find" >>"$log"
			status=STALE
			break
		fi
		if [[ $after == *"$find"* ]]; then
			echo "$f: snippet found more than once: $find" >>"$log"
			status=STALE
			break
		fi
		printf '%s' "${content%%"$find"*}$repl$after" >"$w.next"
		diff -u --label "a/$f" --label "b/$f" "$w" "$w.next" >>"$log" || true
		mv "$w.next" "$w"
	done
	unset work
	if [[ -z $status ]]; then
		baseline "${pkgss[i]}" "${runs[i]}"
		bst=${base_status[$base_key]}
		if [[ $bst != passed ]]; then
			echo "== baseline: the unmutated tree $bst (${base_log[$base_key]}); the mutation was not applied" >>"$log"
			status=BASELINE-FAIL
			if [[ $bst == "does not compile" ]]; then
				failed="baseline $bst: $(grep -v '^== ' "${base_log[$base_key]}" | head -2 | tr '\n' ' ' || true)"
			else
				failed="baseline $bst: $(failures "${base_log[$base_key]}")"
			fi
			failed=${failed:0:140}
		fi
	fi
	if [[ -z $status ]]; then
		for k in "${!files[@]}"; do
			cp "$scratch/new/$((k + 1))" "$tree/${files[k]}"
		done
		runtests "$log" "${pkgss[i]}" "${runs[i]}" && rc=0 || rc=$?
		if [[ $rc == 0 ]]; then
			status=SURVIVED
		elif [[ $rc == 3 ]]; then
			status=BROKEN
		elif timedout "$log" "$rc"; then
			# A test that failed before the hang still noticed the mutation.
			if testoutput "$log" | grep -q '^ *--- FAIL'; then
				status=KILLED
				echo "(a test failed; the run then timed out)" >>"$log"
			else
				status=TIMEOUT
				echo "(timed out: no test failed before it)" >>"$log"
			fi
		else
			status=KILLED
		fi
		# Restore every file this mutation touched.
		for k in "${!files[@]}"; do
			cp "$scratch/orig/$((k + 1))" "$tree/${files[k]}"
		done
		failed=$(failures "$log")
	fi
	[[ $status == KILLED ]] || fail=1
	[[ $status == BASELINE-FAIL ]] && nbasefail=$((nbasefail + 1))
	[[ $status == TIMEOUT ]] && ntimeout=$((ntimeout + 1))
	printf '%-9s %-24s %s\n' "$status" "$id" "$failed"
	results+=("$status|$id|${whys[i]}")
done

echo
echo "| mutation | result | what it breaks |"
echo "|---|---|---|"
for r in "${results[@]}"; do
	IFS='|' read -r st id why <<<"$r"
	echo "| $id | $st | $why |"
done
if [[ $keep == 1 ]]; then
	echo "mutate: logs in $logs"
fi
if [[ $nbasefail != 0 ]]; then
	echo "mutate: $nbasefail BASELINE-FAIL: their tests fail on the unmutated tree, so those mutations were not tried" >&2
fi
if [[ $ntimeout != 0 ]]; then
	echo "mutate: $ntimeout TIMEOUT: no test failed, the run timed out; a hang is not a kill" >&2
fi
if [[ $fail != 0 ]]; then
	echo "mutate: not every mutation was killed" >&2
	exit 1
fi
echo "mutate: every mutation killed"
