#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench_preload.sh [--json] [--build DIR] [--rounds R] [--secs S] [--size B]
#
# The #21 benchmark, all in one run: 64-byte ping-pong half-RTT p50 of
#   kernel    sockperf pp against sockperf sr on 127.0.0.1
#   preload   the same two sockperf binaries under qpsock-run on emu
#   native    qps_send_lat on emu (the qps_* API, no interposition)
# server pinned to CPU 0, client to CPU 1 (as scripts/compare-peers), R
# rounds interleaved, then the medians and the ratios preload/kernel and
# preload/native. With --json one object per measurement and one summary
# ("bench":"preload_pp"). Prints the load average first: quote figures
# only from a run below load 1.5.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bdir=$root/build
rounds=3
secs=3
size=64
json=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--json) json=1 ;;
	--build) bdir=$(realpath "$2"); shift ;;
	--rounds) rounds=$2; shift ;;
	--secs) secs=$2; shift ;;
	--size) size=$2; shift ;;
	*) echo "usage: $0 [--json] [--build DIR] [--rounds R] [--secs S] [--size B]" >&2
	   exit 2 ;;
	esac
	shift
done
run=$bdir/tools/qpsock-run
lat=$bdir/tools/qps_send_lat
for t in "$run" "$lat"; do
	[[ -x "$t" || -f "$t" ]] || { echo "bench_preload: $t not built" >&2; exit 1; }
done
command -v sockperf >/dev/null || { echo "bench_preload: no sockperf" >&2; exit 1; }

srv=()
cli=()
if [[ $(nproc) -ge 2 ]] && command -v taskset >/dev/null; then
	srv=(taskset -c 0)
	cli=(taskset -c 1)
fi
tmp=$(mktemp -d)
wire="plb-$$"
port=23000
pid=
cleanup() {
	[[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
	rm -f /dev/shm/qpsock-emu-"$wire"* 2>/dev/null
}
trap cleanup EXIT

log() { echo "bench_preload: $*" >&2; }

# sockperf's client log: the half-RTT p50, us.
sp_p50() {
	sed -nE 's/.*percentile 50\.000 = *([0-9.]+).*/\1/p' "$1"
}

stop_server() {
	kill -INT "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
}

kernel_pp() {
	port=$((port + 1))
	"${srv[@]}" sockperf sr -i 127.0.0.1 -p "$port" >"$tmp/ks.log" 2>&1 &
	pid=$!
	sleep 0.5
	timeout 120 "${cli[@]}" sockperf pp -i 127.0.0.1 -p "$port" \
		-m "$size" -t "$secs" >"$tmp/kc.log" 2>&1
	stop_server
	sp_p50 "$tmp/kc.log"
}

preload_pp() {
	port=$((port + 1))
	QPS_DEV=$wire "${srv[@]}" sh "$run" --addr 198.18.0.1 \
		sockperf sr -i 198.18.0.1 -p "$port" >"$tmp/ps.log" 2>&1 &
	pid=$!
	sleep 1
	QPS_DEV=$wire timeout 120 "${cli[@]}" sh "$run" --stats \
		sockperf pp -i 198.18.0.1 -p "$port" -m "$size" -t "$secs" \
		>"$tmp/pc.log" 2>&1
	stop_server
	grep -q 'via qpsock' "$tmp/pc.log" ||
		{ cat "$tmp/pc.log" >&2; log "preload: not through qpsock"; exit 1; }
	sp_p50 "$tmp/pc.log"
}

native_pp() {
	port=$((port + 1))
	"${srv[@]}" "$lat" --dev "$wire" -p "$port" -s "$size" -n 100000 \
		>"$tmp/ns.log" 2>&1 &
	pid=$!
	sleep 1
	timeout 120 "${cli[@]}" "$lat" --dev "$wire" -p "$port" -s "$size" \
		-n 100000 --json 127.0.0.1 >"$tmp/nc.log" 2>&1
	wait "$pid" 2>/dev/null || true
	pid=
	sed -nE 's/.*"t_typical":([0-9.]+).*/\1/p' "$tmp/nc.log" | head -n1
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

log "load average: $(cut -d' ' -f1-3 /proc/loadavg); CPUs: ${srv[*]:-none} / ${cli[*]:-none}; $rounds rounds of $secs s, $size B"
k=() p=() n=()
for ((r = 1; r <= rounds; r++)); do
	k+=("$(kernel_pp)")
	p+=("$(preload_pp)")
	n+=("$(native_pp)")
	for m in kernel:"${k[-1]}" preload:"${p[-1]}" native:"${n[-1]}"; do
		if ((json)); then
			printf '{"bench":"preload_pp","round":%d,"path":"%s","size":%d,"p50_us":%s}\n' \
				"$r" "${m%%:*}" "$size" "${m#*:}"
		else
			printf 'round %d %-8s p50 %s us\n' "$r" "${m%%:*}" "${m#*:}"
		fi
	done
done
km=$(printf '%s\n' "${k[@]}" | median)
pm=$(printf '%s\n' "${p[@]}" | median)
nm=$(printf '%s\n' "${n[@]}" | median)
rk=$(awk -v a="$pm" -v b="$km" 'BEGIN { printf "%.3f", a / b }')
rn=$(awk -v a="$pm" -v b="$nm" 'BEGIN { printf "%.3f", a / b }')
load=$(cut -d' ' -f1 /proc/loadavg)
if ((json)); then
	printf '{"bench":"preload_pp","summary":true,"size":%d,"rounds":%d,"kernel_p50_us":%s,"preload_p50_us":%s,"native_p50_us":%s,"preload_over_kernel":%s,"preload_over_native":%s,"load":%s}\n' \
		"$size" "$rounds" "$km" "$pm" "$nm" "$rk" "$rn" "$load"
else
	echo "median p50 us: kernel $km, preload $pm, native $nm; preload/kernel $rk, preload/native $rn (load $load)"
fi
