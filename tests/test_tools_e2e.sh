#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test_tools_e2e.sh BW_TOOL LAT_TOOL TEST_TOOLS - qps_send_bw and
# qps_send_lat end to end on emu: a server process and a client process
# per case on a wire of their own, checking the tables' shape, that
# #iterations matches what was asked, that drops are reported, that
# --json lines parse (TEST_TOOLS --check-json), and that mismatched
# parameters, a missing server, a busy port, an unbuilt provider and -g
# fail with a clear message and a non-zero exit. -c UD: both tools on
# the UD transport (QPN and Q_Key exchanged in the hello), sizes capped
# at the UD MTU; -c RC refused; -Q as the contexts' tx_signal, seen in
# the JSON counters (tx_signaled against wqes).
#
# With QPS_TEST_PROVIDER=packet or xdp (root), the raw-Ethernet cases run
# on that provider instead: server and client in two network namespaces
# joined by a veth pair this script makes and deletes, each on its own
# end. The UD cases and the error cases are emu's alone (neither provider
# has UD; the errors do not depend on the provider).
set -uo pipefail

bw=$1
lat=$2
checker=$3
wire="qpst7-$$"
tmp=$(mktemp -d)
spid=
fails=0
# A TCP port of our own: ctest may run other suites at the same time. It
# stays below the kernel's ephemeral range (32768 and up by default), where
# any outgoing connection's local port could already hold it.
port=$((20000 + $$ % 12000))

prov=${QPS_TEST_PROVIDER:-emu}
ns_a='' ns_b=''

cleanup() {
	if [[ -n "$spid" ]] && kill -0 "$spid" 2>/dev/null; then
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		rm -f "/dev/shm/qpsock-stat.$spid".*
	fi
	rm -f "/dev/shm/qpsock-emu-$wire"
	if [[ -n "$ns_a" ]]; then
		ip netns pids "$ns_a" 2>/dev/null | xargs -r kill 2>/dev/null
		ip netns pids "$ns_b" 2>/dev/null | xargs -r kill 2>/dev/null
		ip netns del "$ns_a" 2>/dev/null
		ip netns del "$ns_b" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# How each side runs: srv_pre/cli_pre before the tool, srv_dev/cli_dev
# after it, and the address the client reaches the server at.
if [[ $prov == emu ]]; then
	srv_pre=() cli_pre=()
	srv_dev=(--dev "$wire") cli_dev=(--dev "$wire")
	addr=127.0.0.1
else
	if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null; then
		echo "test_tools_e2e ($prov): skipped: needs root and ip"
		exit 77
	fi
	ns_a=qtta$$ ns_b=qttb$$
	if ! { ip netns add "$ns_a" && ip netns add "$ns_b" &&
		ip link add qttva netns "$ns_a" type veth peer name qttvb \
			netns "$ns_b" &&
		ip -n "$ns_a" addr add 10.79.7.1/24 dev qttva &&
		ip -n "$ns_b" addr add 10.79.7.2/24 dev qttvb &&
		ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
		ip -n "$ns_a" link set qttva up &&
		ip -n "$ns_b" link set qttvb up; }; then
		echo "test_tools_e2e ($prov): skipped: cannot make namespaces here"
		exit 77
	fi
	srv_pre=(ip netns exec "$ns_a") cli_pre=(ip netns exec "$ns_b")
	srv_dev=(--provider "$prov" --dev qttva)
	cli_dev=(--provider "$prov" --dev qttvb)
	addr=10.79.7.1
fi

fail() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
}

# start_server TOOL ARGS...: background server, waits for its banner.
# The previous server's log goes first: its banner must not be mistaken
# for this one's before the new process has truncated the file.
start_server() {
	local i
	rm -f "$tmp/srv.log"
	"$@" > "$tmp/srv.log" 2>&1 &
	spid=$!
	for ((i = 0; i < 100; i++)); do
		grep -q 'Waiting for client' "$tmp/srv.log" 2>/dev/null && return 0
		kill -0 "$spid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# server_rc: the server's exit status (bounded wait).
server_rc() {
	local i rc=0
	for ((i = 0; i < 300; i++)); do
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$spid" 2>/dev/null; then
		kill "$spid"
		echo "server still running after 30 s" >> "$tmp/srv.log"
	fi
	wait "$spid" || rc=$?
	# Killed, it could not unlink its stats segment (qps_stat would).
	rm -f "/dev/shm/qpsock-stat.$spid".*
	spid=
	return $rc
}

# run NAME TOOL "SERVER ARGS" "CLIENT ARGS": one server/client pair.
run() {
	local name=$1 tool=$2 sargs=$3 cargs=$4 crc=0 src=0
	# shellcheck disable=SC2086 # argument lists
	if ! start_server "${srv_pre[@]}" "$tool" "${srv_dev[@]}" -p "$port" \
		$sargs; then
		fail "$name: server did not start"
		cat "$tmp/srv.log" >&2
		return 1
	fi
	# shellcheck disable=SC2086
	timeout 120 "${cli_pre[@]}" "$tool" "${cli_dev[@]}" -p "$port" \
		$cargs "$addr" > "$tmp/cli.log" 2>&1 || crc=$?
	server_rc || src=$?
	cp "$tmp/cli.log" "$tmp/$name.cli"
	cp "$tmp/srv.log" "$tmp/$name.srv"
	if [[ $crc -ne 0 || $src -ne 0 ]]; then
		fail "$name: client exit $crc, server exit $src"
		echo "--- client" >&2; cat "$tmp/cli.log" >&2
		echo "--- server" >&2; cat "$tmp/srv.log" >&2
		return 1
	fi
	echo "ok: $name"
}

# rows FILE: the table rows (lines that start with a number).
rows() {
	grep -E '^ [0-9]+ ' "$1"
}

# check_rows FILE NCOLS "SIZE ITERS"...: each row has NCOLS fields and
# the given size / #iterations (ITERS '*' = any).
check_rows() {
	local f=$1 ncols=$2 i=0 want got
	shift 2
	mapfile -t lines < <(rows "$f")
	if [[ ${#lines[@]} -ne $# ]]; then
		fail "$f: ${#lines[@]} rows, want $#"
		return
	fi
	for want in "$@"; do
		read -r -a got <<< "${lines[$i]}"
		if [[ ${#got[@]} -ne $ncols ]]; then
			fail "$f: row '${lines[$i]}' has ${#got[@]} fields, want $ncols"
		fi
		read -r ws wi <<< "$want"
		if [[ "${got[0]}" != "$ws" ]]; then
			fail "$f: row $i size ${got[0]}, want $ws"
		fi
		if [[ "$wi" != '*' && "${got[1]}" != "$wi" ]]; then
			fail "$f: row $i #iterations ${got[1]}, want $wi"
		fi
		i=$((i + 1))
	done
}

check_head() {
	grep -qF "$2" "$1" || fail "$1: no header '$2'"
}

bw_head=' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]'
lat_head=' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]'

# 1. BW, iterations: the client's row says what it sent, the server's
# what arrived, and both say sent/received/lost; JSON parses.
if run bw "$bw" "-s 64 -n 5000 --json" "-s 64 -n 5000 --json"; then
	check_head "$tmp/bw.cli" "$bw_head"
	check_head "$tmp/bw.srv" "$bw_head"
	check_rows "$tmp/bw.cli" 5 "64 5000"
	check_rows "$tmp/bw.srv" 5 "64 *"
	recv=$(rows "$tmp/bw.srv" | awk '{ print $2 }')
	grep -q "sent 5000, received $recv, lost $((5000 - recv)) " "$tmp/bw.cli" ||
		fail "bw: client does not report the server's count $recv"
	"$checker" --check-json "$tmp/bw.cli" 1 || fail "bw: client JSON"
	"$checker" --check-json "$tmp/bw.srv" 1 || fail "bw: server JSON"
	grep -q '"sent":5000,' "$tmp/bw.cli" || fail "bw: JSON sent"
	grep -q '"wqes":5000,' "$tmp/bw.cli" || fail "bw: JSON wqes"
fi

# 2. Post list, CQ moderation, two QPs, two threads: 2 x 4000 messages,
# in bursts of 8 under QPS_MSG_MORE, so fewer doorbells than WQEs.
if run bw_list "$bw" "-s 32 -n 4000 -q 2" \
	"-s 32 -n 4000 -q 2 -l 8 -Q 16 --threads 2 --json"; then
	check_rows "$tmp/bw_list.cli" 5 "32 8000"
	check_head "$tmp/bw_list.cli" "Send Post List BW Test"
	j=$(grep '^{' "$tmp/bw_list.cli")
	wqes=$(sed -E 's/.*"wqes":([0-9]+).*/\1/' <<< "$j")
	dbs=$(sed -E 's/.*"doorbells":([0-9]+).*/\1/' <<< "$j")
	if [[ "$wqes" != 8000 ]] || ((dbs * 4 > wqes)); then
		fail "bw_list: wqes $wqes doorbells $dbs (want 8000, <= 2000)"
	fi
fi

# 3. All sizes: 2 .. 1024 (the emu port carries 1472), one row each.
if run bw_all "$bw" "-a -n 200" "-a -n 200 --report_gbits"; then
	check_rows "$tmp/bw_all.cli" 5 "2 200" "4 200" "8 200" "16 200" \
		"32 200" "64 200" "128 200" "256 200" "512 200" "1024 200"
	check_head "$tmp/bw_all.cli" "BW peak[Gb/sec]"
fi

# 4. Duration: a 1 s run, no peak (0.00), the middle half counted.
if run bw_dur "$bw" "-s 64 -D 1" "-s 64 -D 1"; then
	check_rows "$tmp/bw_dur.cli" 5 "64 *"
	rows "$tmp/bw_dur.cli" | awk '$3 != "0.00" || $2 < 1 { exit 1 }' ||
		fail "bw_dur: peak should be 0.00 and iterations > 0"
fi

# 5. Latency, iterations: 9 columns, min <= typical <= max, on both sides.
if run lat "$lat" "-n 2000 --json" "-n 2000 --json"; then
	check_head "$tmp/lat.cli" "$lat_head"
	check_rows "$tmp/lat.cli" 9 "2 2000"
	check_rows "$tmp/lat.srv" 9 "2 2000"
	rows "$tmp/lat.cli" | awk '!($3 <= $5 && $5 <= $4 && $3 > 0) { exit 1 }' ||
		fail "lat: t_min <= t_typical <= t_max does not hold"
	"$checker" --check-json "$tmp/lat.cli" 1 || fail "lat: client JSON"
	grep -q '"round_trips":2000,' "$tmp/lat.cli" || fail "lat: JSON"
fi

# 6. Latency, a size and a duration.
if run lat_dur "$lat" "-s 256 -D 1" "-s 256 -D 1"; then
	check_head "$tmp/lat_dur.cli" ' #bytes        #iterations       t_avg[usec]    tps average'
	check_rows "$tmp/lat_dur.cli" 4 "256 *"
fi

# expect_fail NAME PATTERN CMD...: CMD must fail with PATTERN in its output.
expect_fail() {
	local name=$1 pattern=$2 rc=0
	shift 2
	timeout 60 "$@" > "$tmp/err.log" 2>&1 || rc=$?
	if [[ $rc -eq 0 ]]; then
		fail "$name: exit 0"
	elif ! grep -q -- "$pattern" "$tmp/err.log"; then
		fail "$name: no '$pattern' in: $(cat "$tmp/err.log")"
	else
		echo "ok: $name fails: $(grep -m1 -- "$pattern" "$tmp/err.log")"
	fi
}

# json_num FILE KEY: KEY's number in FILE's (first) JSON line.
json_num() {
	grep -m1 '^{' "$1" | sed -nE "s/.*\"$2\":([0-9]+).*/\1/p"
}

# nonzero_bw FILE: every row has a BW average and a message rate > 0.
nonzero_bw() {
	rows "$1" | awk '!($4 > 0 && $5 > 0) { bad = 1 } END { exit bad }'
}

if [[ $prov == emu ]]; then
	# 6b. UD transport, BW: the header says so, both sides print their
	# table with numbers, the addresses carry a QPN and the Q_Key.
	if run bw_ud "$bw" "-c UD -s 64 -n 5000 --json" "-c UD -s 64 -n 5000 --json"; then
		for f in "$tmp/bw_ud.cli" "$tmp/bw_ud.srv"; do
			check_head "$f" "Connection type : UD"
			check_head "$f" "$bw_head"
			nonzero_bw "$f" || fail "$f: zero BW or rate: $(rows "$f")"
			grep -qE 'remote address: IP [0-9.]+ UDP [0-9]+ QPN 0x[0-9a-f]{6} Q_Key 0x01234567' "$f" ||
				fail "$f: no remote UD address (QPN, Q_Key)"
			"$checker" --check-json "$f" 1 || fail "$f: JSON"
			grep -q '"connection":"UD"' "$f" || fail "$f: JSON connection"
		done
		check_rows "$tmp/bw_ud.cli" 5 "64 5000"
		check_rows "$tmp/bw_ud.srv" 5 "64 *"
		rows "$tmp/bw_ud.srv" | awk '$2 < 1 { exit 1 }' ||
			fail "bw_ud: the server received nothing"
	fi

	# 6c. UD transport, latency: both tables, 0 < t_min <= t_typical <= t_max.
	if run lat_ud "$lat" "-c UD -n 1000 --json" "-c UD -n 1000 --json"; then
		for f in "$tmp/lat_ud.cli" "$tmp/lat_ud.srv"; do
			check_head "$f" "Connection type : UD"
			check_head "$f" "$lat_head"
			check_rows "$f" 9 "2 1000"
			rows "$f" | awk '!($3 <= $5 && $5 <= $4 && $3 > 0) { exit 1 }' ||
				fail "$f: t_min <= t_typical <= t_max does not hold"
			grep -q '"connection":"UD"' "$f" || fail "$f: JSON connection"
		done
	fi

	# 6d. UD sizes: -a stops at the UD MTU (1024 on emu) less qpsock's
	# 12-byte header, as perftest caps UD at the MTU; an explicit -s above
	# it is refused on both sides (perftest refuses it too).
	if run bw_ud_all "$bw" "-c UD -a -n 200" "-c UD -a -n 200"; then
		check_rows "$tmp/bw_ud_all.cli" 5 "2 200" "4 200" "8 200" "16 200" \
			"32 200" "64 200" "128 200" "256 200" "512 200"
	fi
	if start_server "$lat" --dev "$wire" -p "$port" -c UD -s 1024; then
		expect_fail ud_size "max message size in UD is the MTU: 1012 bytes" \
			"$lat" --dev "$wire" -p "$port" -c UD -s 1024 127.0.0.1
		src=0
		server_rc || src=$?
		if [[ $src -eq 0 ]] || ! grep -q "max message size in UD" "$tmp/srv.log"; then
			fail "ud_size: server exit $src: $(cat "$tmp/srv.log")"
		fi
	else
		fail "ud_size: server did not start"
	fi
fi

# 6e. -Q is the context's tx_signal: bursts of 16 (-l 16), a CQE asked
# for every WQE with -Q 1, once per burst with -Q 16 (the burst's last
# WQE asks anyway), on RAW and on UD; every WQE is reaped either way.
declare -A sig
conns=("RAW 1" "RAW 16")
[[ $prov == emu ]] && conns+=("UD 16")
for c in "${conns[@]}"; do
	read -r conn q <<< "$c"
	name="bw_q${q}_$conn"
	run "$name" "$bw" "-c $conn -s 64 -n 4096" \
		"-c $conn -s 64 -n 4096 -l 16 -Q $q --json" || continue
	f="$tmp/$name.cli"
	wqes=$(json_num "$f" wqes)
	reaped=$(json_num "$f" tx_reaped)
	sig[$name]=$(json_num "$f" tx_signaled)
	grep -q "tx_signaled ${sig[$name]} " "$f" ||
		fail "$name: the counts line does not show tx_signaled"
	if [[ "$wqes" != 4096 || "$reaped" != 4096 ]]; then
		fail "$name: wqes $wqes, tx_reaped $reaped (want 4096 each)"
	fi
	echo "   $name: wqes $wqes tx_signaled ${sig[$name]} tx_reaped $reaped"
done
if [[ -n "${sig[bw_q1_RAW]:-}" && "${sig[bw_q1_RAW]}" != 4096 ]]; then
	fail "-Q 1: tx_signaled ${sig[bw_q1_RAW]}, want every WQE (4096)"
fi
for name in bw_q16_RAW bw_q16_UD; do
	v=${sig[$name]:-}
	[[ -z "$v" ]] && continue
	# 256 bursts: one CQE each, a few more if the queue filled mid-burst.
	if ((v < 256 || v * 4 > 4096)); then
		fail "$name: tx_signaled $v, want 256..1024 (-Q 1: ${sig[bw_q1_RAW]:-?})"
	fi
done

if [[ $prov == emu ]]; then
	# 7. Errors: each must fail with its message.

	# Mismatch: the server refuses the client; both exit non-zero.
	if start_server "$bw" --dev "$wire" -p "$port" -n 2000; then
		expect_fail mismatch "mismatch.*-n (iterations): client 1000, server 2000" \
			"$bw" --dev "$wire" -p "$port" -n 1000 127.0.0.1
		src=0
		server_rc || src=$?
		if [[ $src -eq 0 ]] || ! grep -q "mismatch" "$tmp/srv.log"; then
			fail "mismatch: server exit $src: $(cat "$tmp/srv.log")"
		fi
	else
		fail "mismatch: server did not start"
	fi

	# Busy port: a second server on the same TCP port.
	if start_server "$lat" --dev "$wire" -p "$port"; then
		expect_fail busy_port "cannot listen on TCP port $port: Address already in use" \
			"$bw" --dev "$wire" -p "$port"
		kill "$spid"
		server_rc
	else
		fail "busy_port: server did not start"
	fi

	expect_fail no_server "cannot connect to 127.0.0.1:$port" \
		"$lat" --dev "$wire" -p "$port" 127.0.0.1
	# Built or not, the packet provider fails here (no server, or no
	# such interface), with a message either way.
	expect_fail provider "provider 'packet' is not available\|qps_ctx_create(provider packet\|cannot connect" \
		"$bw" --provider packet -p "$port" 127.0.0.1
fi

# Multicast: with qpsock's join API the server joins, the client sends to
# the group; without it, -g must say so and fail.
if ! "${cli_pre[@]}" "$bw" -g -p "$port" "${cli_dev[@]}" "$addr" \
	> "$tmp/mcg.log" 2>&1 &&
	grep -q "group join API" "$tmp/mcg.log"; then
	echo "ok: mcg unsupported in this build: $(cat "$tmp/mcg.log")"
else
	if run bw_mcg "$bw" "-g -s 64 -n 1000" "-g -s 64 -n 1000"; then
		check_head "$tmp/bw_mcg.cli" "Send BW Multicast Test"
		check_rows "$tmp/bw_mcg.cli" 5 "64 1000"
		rows "$tmp/bw_mcg.srv" | awk '$2 < 1 { exit 1 }' ||
			fail "bw_mcg: the server got none of the group's datagrams"
	fi
	if run lat_mcg "$lat" "-g -n 500" "-g -n 500"; then
		check_rows "$tmp/lat_mcg.cli" 9 "2 500"
	fi
	# UD multicast: group ::ffff:239.255.0.1, QPN 0xffffff, no peer QPN.
	if [[ $prov == emu ]] &&
		run bw_mcg_ud "$bw" "-c UD -g -s 64 -n 1000" "-c UD -g -s 64 -n 1000"; then
		check_head "$tmp/bw_mcg_ud.cli" "Connection type : UD"
		check_rows "$tmp/bw_mcg_ud.cli" 5 "64 1000"
		rows "$tmp/bw_mcg_ud.srv" | awk '$2 < 1 { exit 1 }' ||
			fail "bw_mcg_ud: the server got none of the group's datagrams"
	fi
fi
if [[ $prov == emu ]]; then
	expect_fail bad_flag "bad -s '0'" "$bw" -s 0
	expect_fail conn_rc "bad -c 'RC': qpsock is datagram-only" "$bw" -c RC
	expect_fail conn_uc "bad -c 'UC': qpsock is datagram-only" "$lat" -c UC \
		127.0.0.1
	# A UD server refuses a RAW client: the two never meet on the wire.
	if start_server "$bw" --dev "$wire" -p "$port" -c UD; then
		expect_fail conn_mismatch "mismatch.*-c (connection): client RAW, server UD" \
			"$bw" --dev "$wire" -p "$port" 127.0.0.1
		src=0
		server_rc || src=$?
		[[ $src -ne 0 ]] || fail "conn_mismatch: server exit 0"
	else
		fail "conn_mismatch: server did not start"
	fi
fi

if [[ $fails -ne 0 ]]; then
	echo "test_tools_e2e ($prov): $fails failure(s)"
	exit 1
fi
echo "test_tools_e2e ($prov): all cases passed"
