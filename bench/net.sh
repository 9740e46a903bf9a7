#!/bin/sh
# bench/net.sh: the proxy of --allow-domain against a direct connection,
# side by side in one run (docs/BENCHMARKS.md, "The egress proxy"). The
# proxy is the harness's own code (package egress), served in the
# benchmark's process as the harness serves it for a run call; its
# listener is plain TCP, as the run helper opens it.
#
#   throughput  1 GiB directly and 1 GiB through a CONNECT tunnel in each
#               pair, the order alternating (BenchmarkThroughputPaired):
#               host   everything on the host's loopback;
#               netns  as a run call has it: the client and the proxy's
#                      listener in a network namespace of the benchmark's
#                      own (root), the server on the host, reached by the
#                      proxy; direct is a server inside that namespace.
#               Target: the median pair's ratio (direct time / proxied
#               time) at least 0.8 (issue 31).
#   reference   1 GiB directly, through the tunnel spliced, and through the
#               tunnel copied through a buffer (BenchmarkThroughput).
#   connect     dialling to the first byte back (BenchmarkConnect); target:
#               the proxy adds at most 1 ms at the median.
#
# PAIRS (default 6) pairs per shape; BENCHTIME_GIB (default 3x) for the
# reference rows; CONNECTS (default 2000x) connections for connect. It prints the benchmark lines, the load average before
# and after, and a summary; it exits 1 when a target is missed.
set -eu
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
before=$(cut -d' ' -f1-3 /proc/loadavg)
out=$(go test -run '^$' -bench 'BenchmarkThroughputPaired' -benchtime "${PAIRS:-6}x" -count 1 ./egress/ 2>&1) || { echo "$out"; exit 1; }
ref=$(go test -run '^$' -bench 'BenchmarkThroughput$' -benchtime "${BENCHTIME_GIB:-3x}" -count 1 ./egress/ 2>&1) || { echo "$ref"; exit 1; }
con=$(go test -run '^$' -bench 'BenchmarkConnect' -benchtime "${CONNECTS:-2000x}" -count 1 ./egress/ 2>&1) || { echo "$con"; exit 1; }
ref=$(printf '%s\n%s\n' "$ref" "$con")
after=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%s\n%s\n' "$out" "$ref" | grep -E '^Benchmark|SKIP'
printf '\nload average: %s before, %s after; %s CPUs\n' "$before" "$after" "$(nproc)"
printf '%s\n%s\n' "$out" "$ref" | awk '
function metric(name,   i) { for (i = 1; i < NF; i++) if ($(i+1) == name) return $i; return "" }
/^BenchmarkThroughputPaired\// {
	split($1, p, "/"); shape = p[2]; sub(/-[0-9]+$/, "", shape)
	shapes[++n] = shape
	r[shape] = metric("ratio"); lo[shape] = metric("min-ratio"); hi[shape] = metric("max-ratio")
	d[shape] = metric("direct-MB/s"); x[shape] = metric("proxy-MB/s")
	dc[shape] = metric("direct-cpu-ms/GiB"); xc[shape] = metric("proxy-cpu-ms/GiB")
}
/^BenchmarkThroughput\// { split($1, p, "/"); v = p[2]; sub(/-[0-9]+$/, "", v); t[v] = metric("MB/s") }
/^BenchmarkConnect\/direct/ { cd = metric("p50-µs") }
/^BenchmarkConnect\/proxy/  { cp = metric("p50-µs") }
END {
	fail = 0
	for (i = 1; i <= n; i++) {
		s = shapes[i]
		printf "throughput, %s: direct %s MB/s, proxy %s MB/s; median pair %.2fx (lowest %.2f, highest %.2f; target >= 0.8x); CPU per GiB: direct %s ms, proxy %s ms\n", s, d[s], x[s], r[s], lo[s], hi[s], dc[s], xc[s]
		if (r[s] < 0.8) fail = 1
	}
	printf "reference: direct %s MB/s, tunnel spliced %s MB/s, tunnel copied %s MB/s\n", t["direct"], t["proxy"], t["proxy-copy"]
	printf "connect to first byte p50: direct %s us, proxy %s us: +%d us (target <= 1000 us)\n", cd, cp, cp - cd
	if (cp - cd > 1000) fail = 1
	exit fail
}'
