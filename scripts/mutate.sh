#!/usr/bin/env bash
# mutate.sh: the mutation harness (docs/decisions/0044-mutation-harness.md).
#
# For each mutation in scripts/mutations.txt it copies the repository's
# files (tracked and untracked, not ignored: the tree as it is now, never
# modified) into a scratch directory once, applies the mutation there,
# rebuilds the helper image, compiles the listed packages' tests, runs them
# on this host with CGO_ENABLED=0 and a timeout, and restores the file.
#
#   KILLED    the tests failed: some test notices the mutation
#   SURVIVED  the tests passed: no test notices it; write one that does
#   STALE     a snippet is not in the file exactly once: the list no longer
#             matches the code; update it
#   BROKEN    the mutated tree does not compile: fix the entry
#
# It prints a table and exits nonzero unless every mutation was KILLED.
#
# Usage: scripts/mutate.sh [-f list] [-t seconds] [-k] [id ...]
#   -f list     the mutations file (default scripts/mutations.txt)
#   -t seconds  timeout of each mutation's test run (default 600)
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

export CGO_ENABLED=0
export PATH=/usr/local/go/bin:$PATH
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

results=()
fail=0
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
	files=()
	rm -rf "$scratch/orig"
	mkdir -p "$scratch/orig"
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
		files+=("$f")
		k=${#files[@]}
		cp "$path" "$scratch/orig/$k"
		content=$(cat "$path"; printf x)
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
		printf '%s' "${content%%"$find"*}$repl$after" >"$path"
		diff -u --label "a/$f" --label "b/$f" "$scratch/orig/$k" "$path" >>"$log" || true
	done
	if [[ -z $status ]]; then
		read -r -a pkgs <<<"${pkgss[i]}"
		runargs=()
		[[ -n ${runs[i]} ]] && runargs=(-run "${runs[i]}")
		(
			cd "$tree"
			ld=$(make -s helper-ldflags 2>>"$log") || exit 3
			"$GO" test -c -o "$scratch/bin/" -ldflags="$ld" "${pkgs[@]}" >>"$log" 2>&1 || exit 3
			rm -rf "$scratch/bin"
			echo "== go test -count=1 -p 1 ${runargs[*]} ${pkgs[*]}" >>"$log"
			B10X_REQUIRE_HELPER_IMAGE=1 timeout -k 10 "$timeout_s" \
				"$GO" test -count=1 -p 1 -timeout "$((timeout_s - 10))s" -ldflags="$ld" "${runargs[@]}" "${pkgs[@]}" >>"$log" 2>&1
		) && rc=0 || rc=$?
		case $rc in
		0) status=SURVIVED ;;
		3) status=BROKEN ;;
		124 | 137) status=KILLED; echo "(timed out)" >>"$log" ;;
		*) status=KILLED ;;
		esac
	fi
	# Restore every file this mutation touched, last edit first.
	for ((k = ${#files[@]}; k >= 1; k--)); do
		cp "$scratch/orig/$k" "$tree/${files[k - 1]}"
	done
	[[ $status == KILLED ]] || fail=1
	failed=$(grep -E '^(--- FAIL|FAIL|panic:)' "$log" | grep -v '^FAIL$' | head -3 | tr '\n' ' ' || true)
	printf '%-9s %-24s %s\n' "$status" "$id" "${failed:0:140}"
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
if [[ $fail != 0 ]]; then
	echo "mutate: not every mutation was killed" >&2
	exit 1
fi
echo "mutate: every mutation killed"
