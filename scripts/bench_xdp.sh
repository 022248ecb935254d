#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench_xdp.sh - the xdp provider against packet and DPDK's net_af_xdp on
# a veth pair, 64-byte payloads (root; two network namespaces made and
# deleted here). Cases, interleaved for --rounds rounds, medians reported:
#   tx        packets per second a sender puts on the wire, frames to a MAC
#             nobody has (the peer drops them at L2): qps_bench packet
#             tx-qps, QPS_MSG_MORE bursts of 32 (post list 32), on xdp
#             and on packet; dpdk-testpmd txonly on the same veth. CPU 0.
#   rx        packets per second a receiver takes from a kernel sendmmsg
#             peer (qps_bench packet tx-mmsg, CPU 0, namespace B) to a
#             bound port: qps_echo -B on CPU 1 (its rx_packets: the
#             peer's payloads are no sockperf messages, so it answers
#             none), on xdp and packet; dpdk-testpmd rxonly on CPU 1.
#   pingpong  half round trip p50 (us): qps_bench packet pp (CPU 0)
#             against qps_echo -B (CPU 1), both ends on the same provider.
# The load average is printed with the results: the machine is shared.
#
# usage: scripts/bench_xdp.sh [--json] [--secs S] [--rounds R] [--build DIR]
# Needs: qps_bench and qps_echo built in DIR (default build) with the xdp
# provider; dpdk-testpmd with net_af_xdp (left out, reported, if absent).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/bench_netns.sh
. "$root/scripts/bench_netns.sh"
bench_start bench_xdp "network namespaces, AF_XDP" 2 "$@"
have_dpdk=0
command -v dpdk-testpmd >/dev/null && have_dpdk=1
[[ $have_dpdk -eq 1 ]] || echo "bench_xdp: no dpdk-testpmd: its column is 0" >&2

S=$$
extra_rm=("/var/run/dpdk/qbx$S")
bench_netns_up "qbxa$S" "qbxb$S" "qxa$S" "qxb$S"
ip -n "$B" neigh replace 10.77.0.1 lladdr 02:77:00:00:00:01 dev "$VB" nud permanent

tx_qps() { # provider
	QPS_BENCH_PROVIDER=$1 ip netns exec "$A" taskset -c 0 "$bench" packet \
		tx-qps --dev "$VA" --dst 10.77.0.99 --batch 32 --secs "$secs" \
		2>/dev/null | field pps
}
# testpmd in namespace A on the veth: forwarding lcore @2, for @secs
# (stdin closes then); prints packets per second of the @3 counter.
testpmd() { # mode main-lcore fwd-lcore RX|TX
	local t0 t1
	t0=$(date +%s.%N)
	(sleep "$secs") | ip netns exec "$A" dpdk-testpmd --no-pci --no-huge \
		-m 256 -l 0,1 --main-lcore "$2" --file-prefix "qbx$S" \
		--vdev "net_af_xdp0,iface=$VA,start_queue=0,queue_count=1" -- \
		--forward-mode="$1" --txpkts=64 --total-num-mbufs=16384 \
		> "$tmp/pmd.out" 2>&1 || true
	t1=$(date +%s.%N)
	awk -v k="$4-packets:" -v t0="$t0" -v t1="$t1" '
		/Accumulated forward statistics/ { acc = 1 }
		acc && $1 == k { n = $2 }
		END { if (n && t1 > t0) printf "%.0f\n", n / (t1 - t0); else print 0 }' \
		"$tmp/pmd.out"
}
tx_dpdk() { [[ $have_dpdk -eq 1 ]] && testpmd txonly 1 0 TX || echo 0; }
rx_dpdk() { [[ $have_dpdk -eq 1 ]] && testpmd rxonly 0 1 RX || echo 0; }
peer_blast() {
	ip netns exec "$B" taskset -c 0 "$bench" packet tx-mmsg \
		--dst 10.77.0.1 --port 9200 --batch 32 --secs "$secs" >/dev/null
}
rx_qps() { # provider
	local ep n
	ip netns exec "$A" taskset -c 1 "$echo_bin" --provider "$1" -d "$VA" \
		-p 9200 -B > "$tmp/echo.out" 2>&1 &
	ep=$!
	sleep 0.5
	peer_blast
	kill -INT "$ep" 2>/dev/null || true
	wait "$ep" 2>/dev/null || true
	n=$(sed -n 's/.*stats: rx_packets=\([0-9]*\).*/\1/p' "$tmp/echo.out")
	awk -v n="${n:-0}" -v s="$secs" 'BEGIN { printf "%.0f\n", n / s }'
}
rx_pmd() {
	local pp
	rx_dpdk > "$tmp/rxd.out" &
	pp=$!
	sleep 1
	peer_blast
	wait "$pp" || true
	cat "$tmp/rxd.out"
}
pp_qps() { # provider
	local ep
	ip netns exec "$B" taskset -c 1 "$echo_bin" --provider "$1" -d "$VB" \
		-p 11111 -B > "$tmp/ppe.out" 2>&1 &
	ep=$!
	sleep 0.5
	QPS_BENCH_PROVIDER=$1 ip netns exec "$A" taskset -c 0 "$bench" packet \
		pp --dev "$VA" --dst 10.77.0.2 --port 11111 --secs "$secs" \
		2>/dev/null | field lat_p50_us
	kill -INT "$ep" 2>/dev/null || true
	wait "$ep" 2>/dev/null || true
}

declare -A res
for ((r = 0; r < rounds; r++)); do
	res[tx_xdp]+="$(tx_qps xdp) "
	res[tx_packet]+="$(tx_qps packet) "
	res[tx_dpdk]+="$(tx_dpdk) "
	res[rx_xdp]+="$(rx_qps xdp) "
	res[rx_packet]+="$(rx_qps packet) "
	res[rx_dpdk]+="$(rx_pmd) "
	res[pp_xdp]+="$(pp_qps xdp) "
	res[pp_packet]+="$(pp_qps packet) "
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A med
for k in "${!res[@]}"; do
	med[$k]=$(tr ' ' '\n' <<< "${res[$k]}" | grep . | median)
	med[$k]=${med[$k]:-0}
done

if [[ $json -eq 1 ]]; then
	printf '{"bench":"xdp","case":"tx","xdp":%s,"packet":%s,"dpdk_af_xdp":%s,"unit":"pps","rounds":%d,"secs":%s,"loadavg":"%s"}\n' \
		"${med[tx_xdp]}" "${med[tx_packet]}" "${med[tx_dpdk]}" "$rounds" "$secs" "$load"
	printf '{"bench":"xdp","case":"rx","xdp":%s,"packet":%s,"dpdk_af_xdp":%s,"unit":"pps","rounds":%d,"secs":%s,"loadavg":"%s"}\n' \
		"${med[rx_xdp]}" "${med[rx_packet]}" "${med[rx_dpdk]}" "$rounds" "$secs" "$load"
	printf '{"bench":"xdp","case":"pingpong","xdp":%s,"packet":%s,"unit":"us","rounds":%d,"secs":%s,"loadavg":"%s"}\n' \
		"${med[pp_xdp]}" "${med[pp_packet]}" "$rounds" "$secs" "$load"
	exit 0
fi
echo "veth, 64-byte payloads, median of $rounds interleaved ${secs}s runs (load $load):"
printf '  %-9s %12s %12s %12s\n' case xdp packet dpdk_af_xdp
printf '  %-9s %12s %12s %12s  pps\n' tx "${med[tx_xdp]}" "${med[tx_packet]}" "${med[tx_dpdk]}"
printf '  %-9s %12s %12s %12s  pps\n' rx "${med[rx_xdp]}" "${med[rx_packet]}" "${med[rx_dpdk]}"
printf '  %-9s %12s %12s %12s  us (half RTT p50)\n' pingpong "${med[pp_xdp]}" "${med[pp_packet]}" "-"
