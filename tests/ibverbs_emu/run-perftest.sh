#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run-perftest.sh SHIM_DIR - Debian's perftest, unmodified, on the emulated
# libibverbs in SHIM_DIR (the directory holding its libibverbs.so.1):
# ib_send_bw -c UD, ib_send_lat -c UD and raw_ethernet_bw, each as a server
# and a client process on a fresh emu wire. Checks that both sides print
# their result table with nonzero numbers, prints the tables, and exits 0;
# 1 on a failure, 77 when perftest is not installed.
set -u

shim=${1:?usage: run-perftest.sh SHIM_DIR}
for t in ib_send_bw ib_send_lat raw_ethernet_bw; do
	if ! command -v "$t" >/dev/null; then
		echo "run-perftest: $t not installed (apt-get install perftest), skipped"
		exit 77
	fi
done
if [ ! -e "$shim/libibverbs.so.1" ]; then
	echo "run-perftest: no libibverbs.so.1 in $shim"
	exit 1
fi

export LD_LIBRARY_PATH=$shim
export QPS_EMU_WIRE=ibvemu-pt-$$
unset QPS_IBV_EMU_NETDEV
tmp=$(mktemp -d)
server=
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null
	rm -rf "$tmp"
	rm -f "/dev/shm/qpsock-emu-$QPS_EMU_WIRE"
}
trap cleanup EXIT

# A TCP port nobody listens on, for perftest's own connection setup.
pick_port() {
	local p
	for p in $(seq $((20000 + $$ % 5000)) 26000); do
		if ! ss -Htln "sport = :$p" | grep -q .; then
			echo "$p"
			return
		fi
	done
	echo 18515
}

# wait_ready PORT PID FILE PATTERN: until the server is ready, or died.
# It opens the device first, then listens on PORT for the client's TCP
# connection; raw_ethernet_bw has no TCP exchange and is ready once it
# printed PATTERN into FILE.
wait_ready() {
	local i
	for i in $(seq 100); do
		if [ -n "$4" ]; then
			grep -q "$4" "$3" && return 0
		else
			ss -Htln "sport = :$1" | grep -q . && return 0
		fi
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# The table: the "#bytes" header and the result lines under it.
table() {
	awk '/#bytes/ { on = 1 } on { print } on && /^-+$/ { exit }' "$1"
}

# check_table FILE NAME FIELD...: every given field of the result line is
# a number > 0.
check_table() {
	local f=$1 name=$2 line
	shift 2
	line=$(awk '/#bytes/ { getline; print; exit }' "$f")
	if [ -z "$line" ]; then
		echo "FAIL $name: no result table"
		sed 's/^/    /' "$f" | tail -15
		return 1
	fi
	for i in "$@"; do
		if ! echo "$line" | awk -v i="$i" '{ exit !($i + 0 > 0) }'; then
			echo "FAIL $name: field $i of \"$line\" is not > 0"
			return 1
		fi
	done
	return 0
}

fails=0
# run NAME "SERVER ARGS" "CLIENT ARGS" FIELDS [READY]: one server/client
# pair (READY: see wait_ready).
run() {
	local name=$1 sargs=$2 cargs=$3 fields=$4 ready=${5:-} port rc
	port=$(pick_port)
	rm -f "/dev/shm/qpsock-emu-$QPS_EMU_WIRE"
	# shellcheck disable=SC2086
	timeout 60 stdbuf -oL $sargs -p "$port" >"$tmp/$name.server" 2>&1 &
	server=$!
	if ! wait_ready "$port" "$server" "$tmp/$name.server" "$ready"; then
		echo "FAIL $name: server did not start"
		sed 's/^/    /' "$tmp/$name.server" | tail -15
		fails=$((fails + 1))
		return
	fi
	# shellcheck disable=SC2086
	timeout 60 stdbuf -oL $cargs -p "$port" >"$tmp/$name.client" 2>&1
	rc=$?
	wait "$server"
	rc=$((rc | $?))
	server=
	echo "== $name"
	echo "   server: $sargs"
	echo "   client: $cargs"
	# shellcheck disable=SC2086
	if [ $rc -ne 0 ] ||
	   ! check_table "$tmp/$name.server" "$name server" $fields ||
	   ! check_table "$tmp/$name.client" "$name client" $fields; then
		echo "FAIL $name (exit codes $rc)"
		tail -5 "$tmp/$name.server" "$tmp/$name.client"
		fails=$((fails + 1))
		return
	fi
	echo "-- server"
	table "$tmp/$name.server"
	echo "-- client"
	table "$tmp/$name.client"
}

dev="-d qpsemu0"
# Bandwidth runs for a duration: a receiver that falls behind drops
# datagrams (UD and raw Ethernet are unreliable), and a run counted in
# iterations would then wait forever for the missing ones.
run send_bw_ud "ib_send_bw $dev -c UD -x 1 -D 2" \
	"ib_send_bw $dev -c UD -x 1 -D 2 127.0.0.1" "1 2 4"
run send_lat_ud "ib_send_lat $dev -c UD -x 1 -n 1000" \
	"ib_send_lat $dev -c UD -x 1 -n 1000 127.0.0.1" "1 2 3 6"
# A fresh wire gives the server port 0 (MAC 02:51:50:00:00:00) and the
# client port 1.
m0=02:51:50:00:00:00
m1=02:51:50:00:00:01
run raw_ethernet_bw \
	"raw_ethernet_bw $dev --server -D 2 --source_mac $m0 --dest_mac $m1" \
	"raw_ethernet_bw $dev --client -D 2 --source_mac $m1 --dest_mac $m0" \
	"1 2 4" "MAC attached"

if [ $fails -ne 0 ]; then
	echo "run-perftest: $fails of 3 failed"
	exit 1
fi
echo "run-perftest: all 3 passed"
exit 0
