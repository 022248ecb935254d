#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run-hw.sh - qpsock's verbs provider on a real ConnectX-3 (mlx4): checks
# the prerequisites, runs the test suites and the tools with
# QPS_PROVIDER=verbs, and prints a summary to paste into an issue.
# Prerequisites and the two set-ups (two ports back to back, or two hosts)
# are in tests/hw/README.md. Never run in CI: there is no RDMA hardware.
#
# usage: run-hw.sh [options]
#   -b DIR       build directory (default: build; built with scripts/build.sh
#                when it has no test binaries)
#   -d DEV       RDMA device[:port] of this end (default mlx4_0:1)
#   -D DEV       RDMA device[:port] of the other end on this host (two
#                ports back to back, e.g. mlx4_0:2): the tools' servers
#   -S ADDR      the servers' IPv4 address: on -D's netdev, or the peer
#                host's (then start the servers there, see README.md)
#   -s           set up the suites' addresses (198.18.0.1-4, .0.91-92 and
#                198.18.1.1-4, /15) on -d's netdev for the run, removed at
#                exit
#   -n ITERS     iterations per tool run (default 100000)
#   -q           quick: suites only, no tools
#   -h           this text
#
# Exit status: 0 when every suite passed and every tool run completed.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bdir=build
dev=mlx4_0:1
peer_dev=
server=
setup=0
iters=100000
quick=0

usage() {
	sed -n '/^# usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'
}

while getopts "b:d:D:S:sn:qh" opt; do
	case $opt in
	b) bdir=$OPTARG ;;
	d) dev=$OPTARG ;;
	D) peer_dev=$OPTARG ;;
	S) server=$OPTARG ;;
	s) setup=1 ;;
	n) iters=$OPTARG ;;
	q) quick=1 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
if [[ "$bdir" != /* ]]; then
	bdir="$root/$bdir"
fi

log=$(mktemp -d /tmp/qps-hw.XXXXXX)
summary="$log/summary.md"
added_addrs=()
pids=()
failed=0

# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
	local a pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null
	done
	for a in "${added_addrs[@]}"; do
		ip addr del "$a" dev "$ndev" 2>/dev/null
	done
}
trap cleanup EXIT

say() { printf '%s\n' "$*" | tee -a "$summary"; }
die() { echo "run-hw: $*" >&2; exit 1; }

ibname=${dev%%:*}
port=1
if [[ "$dev" == *:* ]]; then
	port=${dev##*:}
fi

# --- prerequisites ---------------------------------------------------------

command -v ibv_devinfo >/dev/null ||
	die "ibv_devinfo not found (apt-get install ibverbs-utils)"
ibv_devinfo -d "$ibname" >/dev/null 2>&1 ||
	die "no RDMA device $ibname (ibv_devices lists them;" \
	    "is mlx4_ib loaded?)"
if [[ $(id -u) -ne 0 ]]; then
	echo "run-hw: not root: the test binaries need CAP_NET_RAW for raw" \
	     "packet QPs (setcap cap_net_raw+ep on them, or run as root)" >&2
fi
mgm=/sys/module/mlx4_core/parameters/log_num_mgm_entry_size
if [[ -r $mgm ]] && (($(cat "$mgm") >= 0)); then
	die "mlx4_core log_num_mgm_entry_size=$(cat "$mgm"): device-managed" \
	    "flow steering is off; reload mlx4_core with" \
	    "log_num_mgm_entry_size=-1 (README.md)"
fi
ndev_path="/sys/class/infiniband/$ibname/ports/$port/gid_attrs/ndevs/0"
ndev=$(cat "$ndev_path" 2>/dev/null) ||
	die "$ibname port $port has no netdev (not an Ethernet/RoCE port?)"
state=$(ibv_devinfo -d "$ibname" -i "$port" | awk '/state:/ {print $2; exit}')
[[ "$state" == PORT_ACTIVE ]] ||
	die "$ibname port $port is $state: cable it and bring $ndev up"

if ((setup)); then
	for a in 198.18.0.1/15 198.18.0.2/15 198.18.0.3/15 198.18.0.4/15 \
		 198.18.0.91/15 198.18.0.92/15 198.18.1.1/15 198.18.1.2/15 \
		 198.18.1.3/15 198.18.1.4/15; do
		if ip addr add "$a" dev "$ndev" 2>/dev/null; then
			added_addrs+=("$a")
		fi
	done
	sleep 1		# the kernel adds their RoCE GIDs asynchronously
fi

if [[ ! -x "$bdir/tests/test_endpoint" ]]; then
	"$root/scripts/build.sh" "$bdir" >"$log/build.log" 2>&1 ||
		die "build failed: $log/build.log"
fi

# --- summary header --------------------------------------------------------

: >"$summary"
say "### qpsock verbs on hardware ($(date -u '+%Y-%m-%d %H:%M UTC'))"
say ""
say '```'
say "host     $(uname -n), kernel $(uname -r)"
rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')
say "qpsock   $rev"
say "rdma     $(dpkg-query -W -f='${Version}' ibverbs-providers 2>/dev/null ||
	      echo '?')"
ibv_devinfo -d "$ibname" -i "$port" 2>/dev/null |
	awk '/fw_ver|vendor_part_id|board_id|link_layer|active_mtu|state:/ {
		$1 = $1; print "device   " $0 }' | tee -a "$summary"
say "netdev   $ndev: $(ip -br addr show dev "$ndev" 2>/dev/null)"
say "mlx4     log_num_mgm_entry_size=$(cat "$mgm" 2>/dev/null || echo '?')"
say '```'

dmesg_start=$(dmesg 2>/dev/null | wc -l)

# --- the suites --------------------------------------------------------------

run_suite() {
	local t=$1 out="$log/$1.log" rc line
	QPS_PROVIDER=verbs QPS_DEV="$dev" timeout 600 "$bdir/tests/$t" \
		>"$out" 2>&1
	rc=$?
	line=$(awk '/^ +tests +[0-9]/ {print "ran " $3 ", passed " $4 \
		", failed " $5}' "$out")
	if ((rc != 0)); then
		failed=1
	fi
	say "$(printf '%-14s rc=%-3d %s, %s skipped' "$t" "$rc" \
		"${line:-no summary}" "$(grep -c ' SKIP ' "$out")")"
	grep -E '^ +[0-9]+\. ' "$out" | head -5 | tee -a "$summary"
}

say ""
say "Suites (QPS_PROVIDER=verbs QPS_DEV=$dev; logs in $log):"
say '```'
for t in test_endpoint test_mcast test_doorbell test_prio_e2e test_txq_e2e \
	 test_api test_ud test_ud_addr test_qp_error; do
	run_suite "$t"
done
say '```'

# --- the tools ---------------------------------------------------------------

# run_pair NAME TOOL PATH ARGS...: a server (on -D, when given) and a client
# on -d with QPS_TX_PATH=PATH; prints the client's result lines.
run_pair() {
	local name=$1 tool=$2 path=$3 out="$log/$1.log" spid rc
	shift 3
	if [[ -n "$peer_dev" ]]; then
		QPS_TX_PATH=$path "$bdir/tools/$tool" --provider verbs \
			-d "$peer_dev" "$@" >"$log/$name.server.log" 2>&1 &
		spid=$!
		pids+=("$spid")
		sleep 1
	fi
	QPS_TX_PATH=$path timeout 300 "$bdir/tools/$tool" --provider verbs \
		-d "$dev" "$@" "$server" >"$out" 2>&1
	rc=$?
	if [[ -n "${spid:-}" ]]; then
		wait "$spid" 2>/dev/null
	fi
	if ((rc != 0)); then
		failed=1
		say "$name: rc=$rc (see $out)"
		tail -3 "$out" | tee -a "$summary"
		return
	fi
	say "$name:"
	grep -E '^ *[0-9]+ +[0-9]' "$out" | tee -a "$summary"
}

if ((!quick)); then
	if [[ -z "$server" ]]; then
		say ""
		say "Tools skipped: no -S (the servers' address)."
	else
		say ""
		say "Tools (server ${peer_dev:-on the peer host} at $server," \
		    "client $dev, -n $iters):"
		say '```'
		for path in generic direct; do
			run_pair "send_bw_64_l1_$path" qps_send_bw "$path" \
				-s 64 -n "$iters" -l 1
			run_pair "send_bw_64_l32_$path" qps_send_bw "$path" \
				-s 64 -n "$iters" -l 32
			run_pair "send_lat_64_$path" qps_send_lat "$path" \
				-s 64 -n "$iters"
		done
		say '```'
	fi
	# qps_bench doorbell drives emu's cost model and has no verbs mode:
	# its table is the reference the hardware numbers above compare to.
	say ""
	say "Reference: qps_bench doorbell on emu (not hardware):"
	say '```'
	"$bdir/bench/qps_bench" doorbell --rounds 3 --ms 200 2>&1 |
		tail -12 | tee -a "$summary"
	say '```'
fi

# --- kernel messages ---------------------------------------------------------

say ""
say "Kernel messages from mlx4 during the run:"
say '```'
dmesg 2>/dev/null | tail -n +"$((dmesg_start + 1))" | grep -i mlx4 |
	tail -20 | tee -a "$summary"
say '```'
say ""
say "Result: $( ((failed)) && echo FAILED || echo passed) (full logs: $log)"
exit "$failed"
