#!/bin/sh
# bench/net.sh: the proxy of --allow-domain against a direct connection,
# in one run on loopback: throughput of 1 GiB (target: the proxy moves at
# least half of what a direct connection does) and the time from dialling
# to the first byte back (target: the proxy adds at most 1 ms at the
# median). The proxy is the harness's own code (package egress), served
# in the benchmark's process as the harness serves it for a run call.
set -eu
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
out=$(go test -run '^$' -bench 'BenchmarkThroughput|BenchmarkConnect' -benchtime "${BENCHTIME_GIB:-5x}" -count 1 ./egress/ 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -E '^Benchmark'
printf '\nload: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
echo "$out" | awk '
/^BenchmarkThroughput\/direct/ { for (i=1;i<=NF;i++) if ($(i+1)=="MB/s") d=$i }
/^BenchmarkThroughput\/proxy/  { for (i=1;i<=NF;i++) if ($(i+1)=="MB/s") p=$i }
/^BenchmarkConnect\/direct/    { for (i=1;i<=NF;i++) if ($(i+1)=="p50-µs") cd=$i }
/^BenchmarkConnect\/proxy/     { for (i=1;i<=NF;i++) if ($(i+1)=="p50-µs") cp=$i }
END {
	printf "throughput: direct %s MB/s, proxy %s MB/s: %.2fx (target >= 0.5x)\n", d, p, p/d
	printf "connect to first byte p50: direct %s us, proxy %s us: +%d us (target <= 1000 us)\n", cd, cp, cp-cd
	if (p/d < 0.5 || cp-cd > 1000) exit 1
}'
