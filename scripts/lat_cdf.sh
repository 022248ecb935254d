#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# lat_cdf.sh [--build-dir DIR] [--iters N] [--secs S] [--out PNG] - the
# latency CDF of qpsock on emu against kernel UDP on loopback, one run,
# 64-byte ping-pong, server on CPU 0 and client on CPU 1 (as
# compare-peers pins them): qps_send_lat -n N -H, then sockperf pp -t S
# --full-log; scripts/plot_lat_cdf.py draws both (default
# docs/img/lat_cdf.png) and prints their percentiles and the load average.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bdir=$root/build
iters=100000
secs=5
out=$root/docs/img/lat_cdf.png
while [[ $# -gt 0 ]]; do
	case $1 in
	--build-dir) bdir=$2; shift ;;
	--iters) iters=$2; shift ;;
	--secs) secs=$2; shift ;;
	--out) out=$2; shift ;;
	*) echo "usage: $0 [--build-dir DIR] [--iters N] [--secs S] [--out PNG]" >&2
	   exit 2 ;;
	esac
	shift
done
lat=$bdir/tools/qps_send_lat
[[ -x $lat ]] || { echo "lat_cdf: $lat not built" >&2; exit 1; }
command -v sockperf >/dev/null || { echo "lat_cdf: sockperf not installed" >&2; exit 1; }
py=python3
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null && py=/usr/bin/python3

tmp=$(mktemp -d)
wire="qpscdf-$$"
port=$((21000 + $$ % 5000))
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -f "/dev/shm/qpsock-emu-$wire"
	rm -rf "$tmp"
}
trap cleanup EXIT
srv=(taskset -c 0)
cli=(taskset -c 1)

echo "lat_cdf: load average $(cut -d' ' -f1-3 /proc/loadavg)"
"${srv[@]}" "$lat" --dev "$wire" -p "$port" -s 64 -n "$iters" \
	> "$tmp/s.log" 2>&1 &
pids=($!)
for ((i = 0; i < 100; i++)); do
	grep -q 'Waiting for client' "$tmp/s.log" 2>/dev/null && break
	sleep 0.05
done
"${cli[@]}" "$lat" --dev "$wire" -p "$port" -s 64 -n "$iters" -H 127.0.0.1 \
	> "$tmp/qps.out"
wait "${pids[0]}" || true

"${srv[@]}" sockperf sr -i 127.0.0.1 -p "$port" > "$tmp/sr.log" 2>&1 &
pids=($!)
sleep 0.5
"${cli[@]}" sockperf pp -i 127.0.0.1 -p "$port" -m 64 -t "$secs" \
	--full-log "$tmp/sp.csv" > "$tmp/sp.log" 2>&1
kill "${pids[0]}" 2>/dev/null || true

mkdir -p "$(dirname "$out")"
"$py" "$root/scripts/plot_lat_cdf.py" "$tmp/qps.out" "$tmp/sp.csv" "$out"
echo "lat_cdf: load average $(cut -d' ' -f1-3 /proc/loadavg); wrote $out"
