#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench_packet.sh - the packet provider on a veth pair, side by side in one
# run (root; two network namespaces made and deleted here):
#   TX only: the sender's frames go to a MAC nobody has (static neighbour
#   10.77.0.99), so the peer drops them at L2 and the sender's own cost is
#   measured. Variants, interleaved for --rounds rounds, medians reported:
#     qps1     qpsock, one send per doorbell (post list 1)
#     qps32    qpsock, QPS_MSG_MORE bursts of 32 (post list 32)
#     raw1, raw32  the provider alone (prebuilt WR chains of 1 or 32 per
#              post_send): how much of the cost is the core's
#     mmsg32   kernel UDP sendmmsg(), 32 datagrams per call
#     trafgen  netsniff-ng's trafgen (AF_PACKET TX ring), one CPU
#   Ping-pong, 64-byte sockperf messages, half round trip:
#     qps      qps_bench packet pp -> qps_echo -B (both qpsock, busy-polling)
#     sockperf sockperf pp -> sockperf sr (kernel UDP on both sides)
#     sockperf->qps_echo  kernel client against the qpsock server, busy
#              (-B) and in its default mode (blocking receives with the
#              busy-poll budget), whose idle CPU is measured first
#   The kernel socket behind a bound port: bind time held vs. the core's
#   table alone (qps_bench packet bind), and a kernel peer's sendmmsg rate
#   to a held and an unheld qpsock port (qps_bench packet hold).
#   Sender pinned to CPU 0, receivers/servers to CPU 1.
#
# usage: scripts/bench_packet.sh [--json] [--secs S] [--rounds R] [--build DIR]
# Needs: qps_bench and qps_echo built in DIR (default build), trafgen
# (netsniff-ng) and sockperf; a missing peer is reported and left out.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/bench_netns.sh
. "$root/scripts/bench_netns.sh"
bench_start bench_packet "network namespaces, AF_PACKET" 1 "$@"

S=$$
bench_netns_up "qbpa$S" "qbpb$S" "qba$S" "qbb$S"

inA() { ip netns exec "$A" taskset -c 0 "$@"; }

tx_qps() {
	inA "$bench" packet tx-qps --dev "$VA" --dst 10.77.0.99 --batch "$1" \
		--secs "$secs" | field pps
}
tx_raw() {
	inA "$bench" packet tx-raw --dev "$VA" --dst 10.77.0.99 --batch "$1" \
		--secs "$secs" | field pps
}
tx_mmsg() {
	inA "$bench" packet tx-mmsg --dst 10.77.0.99 --batch 32 --secs "$secs" |
		field pps
}
have_trafgen=0
command -v trafgen >/dev/null && have_trafgen=1
cat > "$tmp/tg.cfg" <<'EOF'
{ eth(da=02:77:00:00:00:99, sa=02:77:00:00:00:01, type=0x0800),
  ipv4(saddr=10.77.0.1, daddr=10.77.0.99, ttl=64, proto=17),
  udp(sport=4000, dport=9), fill(0x41, 64) }
EOF
tx_trafgen() {
	# SIGINT ends it with its totals: packets and time on CPU 0.
	inA timeout -s INT "$secs" trafgen -o "$VA" -i "$tmp/tg.cfg" --cpus 1 \
		> "$tmp/tg.out" 2>&1 || true
	tr '\r' '\n' < "$tmp/tg.out" |
		awk '/packets outgoing/ { p = $1 }
		     /sec,.*usec on CPU/ { t = $1 + $3 / 1e6 }
		     END { if (t > 0) printf "%.0f\n", p / t; else print 0 }'
}

declare -A res
variants=(qps1 qps32 raw1 raw32 mmsg32)
[[ $have_trafgen -eq 1 ]] && variants+=(trafgen)
for ((r = 0; r < rounds; r++)); do
	res[qps1]+="$(tx_qps 1) "
	res[qps32]+="$(tx_qps 32) "
	res[raw1]+="$(tx_raw 1) "
	res[raw32]+="$(tx_raw 32) "
	res[mmsg32]+="$(tx_mmsg) "
	[[ $have_trafgen -eq 1 ]] && res[trafgen]+="$(tx_trafgen) "
done
declare -A med
for v in "${variants[@]}"; do
	med[$v]=$(tr ' ' '\n' <<< "${res[$v]}" | grep . | median)
done

# Ping-pong.
pp_secs=$((secs < 2 ? 2 : secs))
# Started without a wrapper function, so that $! is the server itself.
ip netns exec "$B" taskset -c 1 "$echo_bin" --provider packet -d "$VB" -p 11111 -B \
	> "$tmp/echo.out" 2>&1 &
pids+=($!)
sleep 0.5
inA "$bench" packet pp --dev "$VA" --dst 10.77.0.2 --port 11111 \
	--secs "$pp_secs" > "$tmp/pp.out"
qps_avg=$(field lat_avg_us < "$tmp/pp.out")
qps_p50=$(field lat_p50_us < "$tmp/pp.out")
sp_avg=0; sp_p50=0; spq_avg=0; spq_p50=0; spd_avg=0; spd_p50=0; idle_pct=0
if command -v sockperf >/dev/null; then
	sp_lat() { # avg and p50 of a sockperf pp output
		awk '/Summary: Latency is/ { a = $5 }
		     /percentile 50.000/ { p = $NF } END { print a + 0, p + 0 }' "$1"
	}
	inA sockperf pp -i 10.77.0.2 -p 11111 -m 64 -t "$pp_secs" \
		> "$tmp/spq.out" 2>&1 || true
	read -r spq_avg spq_p50 < <(sp_lat "$tmp/spq.out")
	# qps_echo in its default mode (blocking receives, the default
	# busy-poll budget): first its CPU while idle, then under sockperf.
	ip netns exec "$B" taskset -c 1 "$echo_bin" --provider packet \
		-d "$VB" -p 11113 > "$tmp/echod.out" 2>&1 &
	epid=$!
	pids+=("$epid")
	sleep 0.5
	cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
	t0=$(cpu_ticks "$epid")
	sleep 3
	idle_pct=$(awk -v a="$t0" -v b="$(cpu_ticks "$epid")" \
		-v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz / 3 * 100 }')
	inA sockperf pp -i 10.77.0.2 -p 11113 -m 64 -t "$pp_secs" \
		> "$tmp/spd.out" 2>&1 || true
	read -r spd_avg spd_p50 < <(sp_lat "$tmp/spd.out")
	ip netns exec "$B" taskset -c 1 sockperf sr -i 10.77.0.2 -p 11112 \
		> "$tmp/sr.out" 2>&1 &
	pids+=($!)
	sleep 0.5
	inA sockperf pp -i 10.77.0.2 -p 11112 -m 64 -t "$pp_secs" \
		> "$tmp/sp.out" 2>&1 || true
	read -r sp_avg sp_p50 < <(sp_lat "$tmp/sp.out")
else
	echo "bench_packet: sockperf not installed: no kernel ping-pong peer" >&2
fi
for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

# The kernel socket behind a bound port: its cost per bind, and per
# datagram the kernel receives for the port (the peer's sendmmsg rate,
# CPU-bound on CPU 0, where veth runs A's receive path too), held or not.
inA "$bench" packet bind --dev "$VA" > "$tmp/bind.out"
bind_held=$(field held_ns < "$tmp/bind.out")
bind_table=$(field table_ns < "$tmp/bind.out")
hold_rate() {
	local flag=${1:-} hp i
	: > "$tmp/hold.out"
	ip netns exec "$A" taskset -c 1 "$bench" packet hold --dev "$VA" \
		--port 9100 --secs $((secs + 1)) $flag > "$tmp/hold.out" &
	hp=$!
	for ((i = 0; i < 50; i++)); do
		grep -q holding "$tmp/hold.out" && break
		sleep 0.05
	done
	ip netns exec "$B" taskset -c 0 "$bench" packet tx-mmsg \
		--dst 10.77.0.1 --port 9100 --batch 32 --secs "$secs" | field pps
	wait "$hp" || true
}
for ((r = 0; r < rounds; r++)); do
	res[rx_held]+="$(hold_rate) "
	res[rx_table]+="$(hold_rate --no-hold) "
done
for v in rx_held rx_table; do
	med[$v]=$(tr ' ' '\n' <<< "${res[$v]}" | grep . | median)
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "null" }'; }
r_batch=$(ratio "${med[qps32]}" "${med[qps1]}")
r_raw=$(ratio "${med[raw32]}" "${med[raw1]}")
r_mmsg=$(ratio "${med[qps32]}" "${med[mmsg32]}")
r_tg=$(ratio "${med[qps32]}" "${med[trafgen]:-0}")
r_lat=$(ratio "$qps_avg" "$sp_avg")
r_lat50=$(ratio "$qps_p50" "$sp_p50")

if [[ $json -eq 1 ]]; then
	for v in "${variants[@]}"; do
		printf '{"bench":"packet","case":"tx_only","variant":"%s","size":64,"rounds":%d,"secs":%s,"pps_median":%s,"pps_all":[%s]}\n' \
			"$v" "$rounds" "$secs" "${med[$v]}" \
			"$(tr ' ' '\n' <<< "${res[$v]}" | grep . | paste -sd,)"
	done
	printf '{"bench":"packet","case":"pingpong","size":64,"qps_half_rtt_avg_us":%s,"qps_half_rtt_p50_us":%s,"sockperf_avg_us":%s,"sockperf_p50_us":%s,"sockperf_to_qps_echo_avg_us":%s}\n' \
		"${qps_avg:-0}" "${qps_p50:-0}" "$sp_avg" "$sp_p50" "$spq_avg"
	printf '{"bench":"packet","ratios":{"qps32_over_qps1":%s,"raw32_over_raw1":%s,"qps32_over_sendmmsg32":%s,"qps32_over_trafgen":%s,"qps_over_sockperf_half_rtt_avg":%s,"qps_over_sockperf_half_rtt_p50":%s}}\n' \
		"$r_batch" "$r_raw" "$r_mmsg" "$r_tg" "$r_lat" "$r_lat50"
	printf '{"bench":"packet","case":"echo_modes","size":64,"sockperf_to_qps_echo_default_avg_us":%s,"sockperf_to_qps_echo_default_p50_us":%s,"sockperf_to_qps_echo_busy_avg_us":%s,"sockperf_to_qps_echo_busy_p50_us":%s,"sockperf_to_kernel_avg_us":%s,"sockperf_to_kernel_p50_us":%s,"default_over_kernel_p50":%s,"qps_echo_idle_cpu_pct":%s}\n' \
		"$spd_avg" "$spd_p50" "$spq_avg" "$spq_p50" "$sp_avg" "$sp_p50" \
		"$(ratio "$spd_p50" "$sp_p50")" "$idle_pct"
	printf '{"bench":"packet","case":"held_port","bind_held_ns":%s,"bind_table_ns":%s,"rx_held_pps_median":%s,"rx_table_pps_median":%s,"rx_held_over_table":%s}\n' \
		"${bind_held:-0}" "${bind_table:-0}" "${med[rx_held]}" \
		"${med[rx_table]}" "$(ratio "${med[rx_held]}" "${med[rx_table]}")"
	exit 0
fi
echo "packet provider on veth, 64-byte payloads, TX only (peer drops at L2),"
echo "median of $rounds interleaved ${secs}s runs, sender on CPU 0:"
for v in "${variants[@]}"; do
	printf '  %-8s %10s pps   (%s)\n' "$v" "${med[$v]}" "${res[$v]% }"
done
echo "ping-pong, 64 bytes, half round trip (us):"
printf '  qpsock pp -> qps_echo -B    avg %s  p50 %s\n' "$qps_avg" "$qps_p50"
printf '  sockperf pp -> sockperf sr  avg %s  p50 %s\n' "$sp_avg" "$sp_p50"
printf '  sockperf pp -> qps_echo -B  avg %s  p50 %s\n' "$spq_avg" "$spq_p50"
printf '  sockperf pp -> qps_echo     avg %s  p50 %s  (default mode: busy-poll budget, then sleep; idle CPU %s%%)\n' \
	"$spd_avg" "$spd_p50" "$idle_pct"
echo "the kernel socket behind a bound port:"
printf '  bind: %s ns held in the kernel, %s ns in the table alone\n' \
	"$bind_held" "$bind_table"
printf '  kernel peer sendmmsg to the port: %s pps held, %s pps not (%s)\n' \
	"${med[rx_held]}" "${med[rx_table]}" \
	"$(ratio "${med[rx_held]}" "${med[rx_table]}")"
echo "ratios: qps32/qps1 $r_batch (target >= 3; provider alone $r_raw)," \
	"qps32/sendmmsg32 $r_mmsg" \
	"(>= 1.2), qps32/trafgen $r_tg (>= 0.9), qps/sockperf half-RTT avg" \
	"$r_lat p50 $r_lat50 (<= 0.8)"
