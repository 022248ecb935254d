#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2317 # functions run indirectly (trap, step)
#
# run-demo.sh - install dependencies, build, and run examples/qps_demo on the
# emu provider: a receiver process in the background and a sender process,
# attached to a shared-memory wire with a name unique to this run. Then
# qps_send_bw, server and client as two processes on the same wire (TCP
# handshake on 127.0.0.1), prints perftest's BW table.
#
# Exit status: 0 when every process succeeded, 1 otherwise.
# Environment: QPS_SKIP_DEPS=1 (skip install-deps), QPS_BUILD_DIR (default
# build), QPS_DEMO_COUNT (datagrams, default 10), QPS_JOBS (build jobs),
# QPS_DEMO_BW_PORT (qps_send_bw's TCP port, default perftest's 18515).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bdir=${QPS_BUILD_DIR:-build}
count=${QPS_DEMO_COUNT:-10}
port=9000
recv_ip=198.18.0.10
send_ip=198.18.0.11
wire="qpsdemo-$$-$RANDOM"
rpid=
bpid=
tmp=
bw_port=${QPS_DEMO_BW_PORT:-18515}

cleanup() {
	local p
	for p in "$rpid" "$bpid"; do
		if [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; then
			kill "$p" 2>/dev/null || true
			wait "$p" 2>/dev/null || true
		fi
	done
	rm -f "/dev/shm/qpsock-emu-$wire" "/dev/shm/qpsock-emu-$wire".* \
		"/dev/shm/qpsock-emu-$wire"-*
	if [[ -n "$tmp" ]]; then
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bash scripts/install-deps.sh
bash scripts/build.sh "$bdir"

if [[ "$bdir" = /* ]]; then
	demo="$bdir/examples/qps_demo"
else
	demo="$root/$bdir/examples/qps_demo"
fi
if [[ ! -x "$demo" ]]; then
	echo "run-demo: FAIL: $demo was not built" >&2
	exit 1
fi

tmp=$(mktemp -d)
recv_cmd=("$demo" recv --provider emu -d "$wire" -a "$recv_ip" -p "$port" -n "$count")
send_cmd=("$demo" send --provider emu -d "$wire" -a "$send_ip" --dest "$recv_ip"
	-p "$port" -n "$count")

echo
echo "run-demo: wire '$wire'"
echo "run-demo: receiver: ${recv_cmd[*]}"
"${recv_cmd[@]}" > "$tmp/recv.log" 2>&1 &
rpid=$!

# Start the sender once the receiver is bound (its "listening on" line), so
# the first datagrams are not sent to a port nobody holds yet. The sender
# also retries resolution by itself for 5 s.
for ((i = 0; i < 100; i++)); do
	if grep -q 'listening on' "$tmp/recv.log" 2>/dev/null; then
		break
	fi
	if ! kill -0 "$rpid" 2>/dev/null; then
		break
	fi
	sleep 0.1
done

echo "run-demo: sender:   ${send_cmd[*]}"
src=0
timeout 60 "${send_cmd[@]}" > "$tmp/send.log" 2>&1 || src=$?

# A failed sender means the receiver cannot succeed: stop it now.
if [[ $src -ne 0 ]] && kill -0 "$rpid" 2>/dev/null; then
	echo "run-demo: sender failed; killing the receiver"
	kill "$rpid" 2>/dev/null || true
fi
# The receiver waits at most 5 s per datagram; give it a bounded time.
rrc=0
for ((i = 0; i < 600; i++)); do
	if ! kill -0 "$rpid" 2>/dev/null; then
		break
	fi
	sleep 0.1
done
if kill -0 "$rpid" 2>/dev/null; then
	echo "run-demo: receiver still running after 60 s; killing it" >&2
	kill "$rpid" 2>/dev/null || true
fi
wait "$rpid" || rrc=$?
rpid=

echo
echo "---- receiver (exit $rrc) ----"
cat "$tmp/recv.log"
echo "---- sender (exit $src) ----"
cat "$tmp/send.log"
echo

# qps_send_bw as perftest's ib_send_bw: the server first, the client once
# the server waits for it; the table comes from both sides.
bw_bin="$(dirname "$demo")/../tools/qps_send_bw"
bw_args=(--dev "$wire" -p "$bw_port" -s 64 -n 10000)
bsrc=1
bcrc=1
if [[ -x "$bw_bin" ]]; then
	echo "run-demo: qps_send_bw server: qps_send_bw ${bw_args[*]}"
	"$bw_bin" "${bw_args[@]}" > "$tmp/bw-server.log" 2>&1 &
	bpid=$!
	for ((i = 0; i < 100; i++)); do
		grep -q 'Waiting for client' "$tmp/bw-server.log" 2>/dev/null && break
		kill -0 "$bpid" 2>/dev/null || break
		sleep 0.1
	done
	echo "run-demo: qps_send_bw client: qps_send_bw ${bw_args[*]} 127.0.0.1"
	bcrc=0
	timeout 60 "$bw_bin" "${bw_args[@]}" 127.0.0.1 > "$tmp/bw-client.log" 2>&1 ||
		bcrc=$?
	for ((i = 0; i < 300; i++)); do
		kill -0 "$bpid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$bpid" 2>/dev/null || true
	bsrc=0
	wait "$bpid" || bsrc=$?
	bpid=
	echo
	echo "---- qps_send_bw server (exit $bsrc) ----"
	cat "$tmp/bw-server.log"
	echo "---- qps_send_bw client (exit $bcrc) ----"
	cat "$tmp/bw-client.log"
	echo
else
	echo "run-demo: FAIL: $bw_bin was not built" >&2
fi

if [[ $rrc -eq 0 && $src -eq 0 && $bsrc -eq 0 && $bcrc -eq 0 ]]; then
	echo "run-demo: PASS: $count datagrams $send_ip -> $recv_ip:$port and qps_send_bw on emu wire '$wire'"
	exit 0
fi
echo "run-demo: FAIL: receiver exit $rrc, sender exit $src, qps_send_bw server exit $bsrc, client exit $bcrc"
exit 1
