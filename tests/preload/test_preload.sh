#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test_preload.sh PART QPSOCK_RUN TEST_PRELOAD_CALLS SRCDIR - programs
# under qpsock-run on a private emu wire (docs/preload.md):
#   calls     test_preload_calls under the preload, the same assertions
#             test_preload_calls_kernel makes on the kernel;
#   fortify   the same, built with _FORTIFY_SOURCE=2 (__recv_chk...);
#   exec      test_preload_exec: an offloaded fd left open across a
#             failed exec and an exec is offloaded again;
#   libinit   test_preload_libinit (beside test_preload_calls): socket
#             calls from another library's constructor and destructor;
#   sockperf  sockperf server and client both under qpsock-run, ping-pong
#             with each of sockperf's waits (recvfrom, epoll, poll,
#             select): 0 dropped, and the --stats lines show the
#             datagrams went through qpsock;
#   sockperf_load
#             sockperf throughput (tp) and under-load (ul), unicast and
#             with a feed file of three multicast groups, server and
#             client under qpsock-run: every datagram the client's
#             context sent is in the server's context as received or as
#             a counted drop (the --stats context lines), ul replies with
#             0 dropped, each group received;
#   offload   test_preload_offload.py with QPS_PRELOAD_OFFLOAD=multicast
#             and QPS_PRELOAD_GROUPS, then QPS_PRELOAD_PORTS: offloaded
#             sockets get qpsock's datagrams, kernel ones only kernel
#             datagrams on 127.0.0.1; the --stats and --debug lines name
#             the same sockets;
#   python    test_preload.py (stdlib only) under the preload, and a
#             program exec'd by a shell under qpsock-run;
#   fork      test_preload_fork: a daemon, prefork workers and a fork per
#             request serving kernel clients from qpsock-run, on emu (the
#             daemon) and on packet between two namespaces; needs root for
#             packet;
#   fork_xdp  the fork cases and socat's fork mode under qpsock-run
#             --provider xdp between two namespaces; needs root;
#   packet    sockperf under qpsock-run --provider packet in one network
#             namespace against a kernel sockperf in another (a veth pair
#             this script makes and deletes), both directions; needs root;
#             with QPS_TEST_PROVIDER=xdp, the same on xdp.
# Exit 77 (skipped) when a program it needs is missing.
set -u

part=$1 calls=$3 src=$4
run=(sh "$2")
# A sanitizer's runtime must come first in a process; preloaded into
# programs (sockperf, python3, the test) an instrumented preload cannot.
if [[ -n "${QPS_TEST_SANITIZE:-}" ]]; then
	echo "test_preload $part: skipped: built with QPS_SANITIZE=$QPS_TEST_SANITIZE"
	exit 77
fi
wire="pl-$part-$$"
tmp=$(mktemp -d)
export QPS_DEV=$wire
unset QPS_PROVIDER

cleanup() {
	[[ -n "${srv:-}" ]] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
	if [[ -n "${ns_a:-}" ]]; then
		ip netns pids "$ns_a" 2>/dev/null | xargs -r kill 2>/dev/null
		ip netns pids "$ns_b" 2>/dev/null | xargs -r kill 2>/dev/null
		ip netns del "$ns_a" 2>/dev/null
		ip netns del "$ns_b" 2>/dev/null
	fi
	rm -rf "$tmp"
	# Every process destroys its context at exit; a crash must not
	# leave the wire behind.
	rm -f /dev/shm/qpsock-emu-"$wire"* 2>/dev/null
}
trap cleanup EXIT

fail() {
	echo "test_preload $part: FAIL: $*"
	exit 1
}

# Two namespaces joined by a veth pair, 10.79.NET.1 in the first and
# 10.79.NET.2 in the second; names from ns_a, ns_b, if_a, if_b. False
# when this machine cannot make them.
make_ns() {
	local net=$1

	ip netns add "$ns_a" && ip netns add "$ns_b" &&
		ip link add "$if_a" netns "$ns_a" type veth peer name "$if_b" \
			netns "$ns_b" &&
		ip -n "$ns_a" addr add "10.79.$net.1/24" dev "$if_a" &&
		ip -n "$ns_b" addr add "10.79.$net.2/24" dev "$if_b" &&
		ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
		ip -n "$ns_a" link set "$if_a" up &&
		ip -n "$ns_b" link set "$if_b" up
}

# needs_ns NET PROG...: the programs, root, and the two namespaces of
# make_ns NET (ns_a, ns_b, if_a, if_b set by the caller); else skipped,
# saying which is missing.
needs_ns() {
	local net=$1 p
	shift
	for p in "$@"; do
		command -v "$p" >/dev/null || {
			echo "test_preload $part: skipped: needs $p"
			exit 77
		}
	done
	if [[ $(id -u) -ne 0 ]]; then
		echo "test_preload $part: skipped: needs root"
		exit 77
	fi
	if ! make_ns "$net"; then
		echo "test_preload $part: skipped: cannot make namespaces here"
		exit 77
	fi
}

case $part in
calls)
	PL_TEST_ADDR=198.18.0.1 "${run[@]}" --addr 198.18.0.1 "$calls" ||
		fail "test_preload_calls under the preload"
	;;
fortify)
	# Built with _FORTIFY_SOURCE=2 beside test_preload_calls.
	prog=${calls}_fortify
	nm -D "$prog" | grep -q __recv_chk ||
		fail "$prog calls no fortified entry"
	PL_TEST_ADDR=198.18.0.1 "${run[@]}" --addr 198.18.0.1 "$prog" ||
		fail "fortified test_preload_calls under the preload"
	;;
libinit)
	PL_TEST_ADDR=198.18.0.1 "${run[@]}" --stats --debug --addr 198.18.0.1 \
		"$(dirname "$calls")/test_preload_libinit" >"$tmp/out" 2>&1 ||
		{ cat "$tmp/out"; fail "test_preload_libinit under the preload"; }
	cat "$tmp/out"
	# The dlopen'ed library's receiver went through qpsock, in its
	# constructor, main and its destructor; the linked library's sockets,
	# made before the preload's constructor, are the kernel's without a
	# word (none fell back: none was offloaded).
	grep -q "udp 198.18.0.1:[0-9]* peer -: rx 3 datagrams" "$tmp/out" ||
		fail "the dlopen'ed library's socket was not offloaded"
	! grep -q "left on the kernel" "$tmp/out" ||
		fail "a socket made before the preload's constructor was offloaded"
	;;
exec)
	PL_TEST_ADDR=198.18.0.1 "${run[@]}" --stats --debug --addr 198.18.0.1 \
		"$(dirname "$calls")/test_preload_exec" >"$tmp/out" 2>&1 ||
		{ cat "$tmp/out"; fail "test_preload_exec under the preload"; }
	cat "$tmp/out"
	for want in "offloaded again after a failed exec" \
		"offloaded again after exec" \
		"udp 198.18.0.1:[0-9]* peer -: rx 1 datagrams .*via qpsock" \
		"context 198.18.0.1 "; do
		grep -q "$want" "$tmp/out" || fail "exec: no '$want'"
	done
	# Each exec freed the wire port: the context after it has the same
	# address (three context lines, at the failed exec, the exec and
	# the exit, all 198.18.0.1).
	n=$(grep -c "context 198.18.0.1 " "$tmp/out")
	[[ $n -eq 3 ]] || fail "exec: $n context lines on 198.18.0.1, want 3"
	;;
sockperf)
	command -v sockperf >/dev/null || {
		echo "test_preload sockperf: skipped: sockperf not installed"
		exit 77
	}
	printf 'U:198.18.0.1:11111\nU:198.18.0.1:11112\n' >"$tmp/feed"
	for io in recvfrom epoll poll select; do
		if [[ $io == recvfrom ]]; then
			sargs=(-i 198.18.0.1 -p 11112)
		else
			sargs=(-f "$tmp/feed" -F "$io")
		fi
		"${run[@]}" --stats --addr 198.18.0.1 sockperf sr "${sargs[@]}" \
			>"$tmp/sr.$io" 2>&1 &
		srv=$!
		sleep 1
		timeout 30 "${run[@]}" --stats sockperf pp -i 198.18.0.1 -p 11112 \
			-t 1 -m 64 >"$tmp/pp.$io" 2>&1 ||
			{ cat "$tmp/pp.$io"; fail "sockperf pp ($io) failed"; }
		kill -INT "$srv"
		wait "$srv"
		srv=
		cat "$tmp/pp.$io" "$tmp/sr.$io" |
			grep -E 'dropped messages|Summary|qpsock-preload'
		grep -q '# dropped messages = 0;' "$tmp/pp.$io" ||
			fail "sockperf ($io): messages dropped"
		# Replies the client got went through qpsock on both sides.
		got=$(sed -n 's/.*ReceivedMessages=\([0-9]*\).*/\1/p' \
			"$tmp/pp.$io" | head -1)
		[[ -n "$got" && "$got" -gt 0 ]] ||
			fail "sockperf ($io): nothing received"
		crx=$(sed -n 's/.*rx \([0-9]*\) datagrams.*via qpsock/\1/p' \
			"$tmp/pp.$io" | head -1)
		stx=$(sed -n 's/.*udp 198.18.0.1:11112 .*tx \([0-9]*\) datagrams.*/\1/p' \
			"$tmp/sr.$io" | head -1)
		[[ -n "$crx" && "$crx" -ge "$got" ]] ||
			fail "sockperf ($io): client stats rx '$crx' < $got"
		[[ -n "$stx" && "$stx" -ge "$got" ]] ||
			fail "sockperf ($io): server stats tx '$stx' < $got"
	done
	;;
sockperf_load)
	command -v sockperf >/dev/null || {
		echo "test_preload sockperf_load: skipped: sockperf not installed"
		exit 77
	}
	# Groups only: sockperf's --mc-tx-if/--mc-rx-if name emu addresses,
	# which the kernel refuses, so a socket the preload missed fails
	# instead of sending to a real interface.
	printf 'U:239.1.0.1:11121\nU:239.1.0.2:11122\nU:239.1.0.3:11123\n' \
		>"$tmp/mc"
	stat=$(dirname "$2")/qps_stat
	# ctx FILE N: the Nth number (1 rx, 2 tx, 3 drops) of the context line.
	ctx() {
		sed -n 's/.*context .*: rx \([0-9]*\) datagrams tx \([0-9]*\) datagrams drops \([0-9]*\) .*via qpsock/\'"$2"'/p' \
			"$1" | head -1
	}
	for t in tp ul mc-tp mc-ul; do
		mode=${t#mc-}
		if [[ $t == mc-* ]]; then
			sargs=(-f "$tmp/mc" --mc-rx-if 198.18.0.1)
			cargs=(-f "$tmp/mc" --mc-tx-if 198.18.0.2)
		else
			sargs=(-i 198.18.0.1 -p 11111)
			cargs=(-i 198.18.0.1 -p 11111)
		fi
		"${run[@]}" --stats --addr 198.18.0.1 sockperf sr "${sargs[@]}" \
			>"$tmp/sr.$t" 2>&1 &
		srv=$!
		# Ready once it blocks on its sockets (its warm-up sent).
		for _ in $(seq 50); do
			grep -q 'to block on socket' "$tmp/sr.$t" && break
			sleep 0.1
		done
		timeout 30 "${run[@]}" --stats --addr 198.18.0.2 sockperf "$mode" \
			"${cargs[@]}" -t 1 -m 64 >"$tmp/cl.$t" 2>&1 ||
			{ cat "$tmp/cl.$t"; fail "sockperf $t failed"; }
		# What is still on the wire reaches the server first: until its
		# context (read live by qps_stat) has counted as many datagrams,
		# received or dropped by the device, as the client sent, or 5 s.
		want=$(ctx "$tmp/cl.$t" 2)
		for _ in $(seq 50); do
			got=$("$stat" -p "$srv" --json 2>/dev/null |
				sed -n 's/.*"rx_packets":\([0-9]*\).*"dev_rx_drops":\([0-9]*\).*/\1 \2/p' |
				head -1)
			[[ -n "$got" && -n "$want" ]] &&
				(( ${got% *} + ${got#* } >= want )) && break
			sleep 0.1
		done
		kill -INT "$srv"
		wait "$srv"
		srv=
		grep -hE 'dropped messages|Total|qpsock-preload' \
			"$tmp/cl.$t" "$tmp/sr.$t"
		ctx_tx=$(ctx "$tmp/cl.$t" 2) srv_rx=$(ctx "$tmp/sr.$t" 1)
		srv_drops=$(ctx "$tmp/sr.$t" 3)
		[[ -n "$ctx_tx" && -n "$srv_rx" && -n "$srv_drops" ]] ||
			fail "sockperf $t: a context stats line is missing"
		[[ $srv_rx -gt 0 ]] || fail "sockperf $t: nothing received"
		# Unicast: the client is the server's only sender, so exactly.
		# Groups: the server's own sends to them come back as counted
		# device drops too.
		if [[ $t == mc-* ]]; then
			[[ $((srv_rx + srv_drops)) -ge $ctx_tx ]]
		else
			[[ $((srv_rx + srv_drops)) -eq $ctx_tx ]]
		fi || fail "sockperf $t: client sent $ctx_tx, server received" \
			"$srv_rx and counted $srv_drops dropped"
		# sockperf's own count went through qpsock.
		n=$(sed -n 's/.*Total \([0-9]*\) messages received.*/\1/p' \
			"$tmp/sr.$t")
		[[ -n "$n" && $n -gt 0 && $n -le $srv_rx ]] ||
			fail "sockperf $t: server handled '$n', qpsock rx $srv_rx"
		if [[ $mode == ul ]]; then
			grep -q '# dropped messages = 0;' "$tmp/cl.$t" ||
				fail "sockperf $t: messages dropped"
			got=$(sed -n 's/.*ReceivedMessages=\([0-9]*\).*/\1/p' \
				"$tmp/cl.$t" | head -1)
			crx=$(ctx "$tmp/cl.$t" 1)
			[[ -n "$got" && $got -gt 0 && $crx -ge $got ]] ||
				fail "sockperf $t: $got replies, client rx '$crx'"
		fi
		if [[ $t == mc-* ]]; then
			for p in 11121 11122 11123; do
				grep -qE "udp 0.0.0.0:$p peer -: rx [1-9]" \
					"$tmp/sr.$t" ||
					fail "sockperf $t: group port $p got nothing"
			done
		fi
	done
	;;
offload)
	command -v python3 >/dev/null || {
		echo "test_preload offload: skipped: no python3"
		exit 77
	}
	QPS_PRELOAD_OFFLOAD=multicast QPS_PRELOAD_GROUPS=239.1.0.0/16,x \
		"${run[@]}" --stats --debug --addr 198.18.0.1 python3 \
		"$src/test_preload_offload.py" multicast 198.18.0.1 \
		>"$tmp/mc" 2>&1 || { cat "$tmp/mc"; fail "multicast mode"; }
	QPS_PRELOAD_PORTS=5810,5820-5821 \
		"${run[@]}" --stats --debug --addr 198.18.0.1 python3 \
		"$src/test_preload_offload.py" ports 198.18.0.1 \
		>"$tmp/ports" 2>&1 || { cat "$tmp/ports"; fail "ports"; }
	cat "$tmp/mc" "$tmp/ports"
	for want in "udp 0.0.0.0:5801 .*via qpsock" \
		"udp 239.1.2.3:5802 .*via qpsock" \
		"udp 0.0.0.0:[0-9]* peer -: rx 0 datagrams (0 bytes) tx 2 .*via qpsock" \
		"QPS_PRELOAD_GROUPS: 'x' is not a group" \
		"not a multicast socket" \
		"group 239.2.0.1 is not in QPS_PRELOAD_GROUPS" \
		"group 239.2.0.2 is not in QPS_PRELOAD_GROUPS"; do
		grep -q "$want" "$tmp/mc" || fail "multicast mode: no '$want'"
	done
	n=$(grep -c "not a multicast socket" "$tmp/mc")
	# The unicast bind and the connect.
	[[ $n -eq 2 ]] || fail "multicast mode: $n sockets not multicast, want 2"
	for want in "udp 0.0.0.0:5810 .*via qpsock" \
		"udp 0.0.0.0:5821 .*via qpsock" \
		"local port 5811 is not in QPS_PRELOAD_PORTS" \
		"destination port 5899 is not in QPS_PRELOAD_PORTS"; do
		grep -q "$want" "$tmp/ports" || fail "ports: no '$want'"
	done
	! grep -qE "udp [0-9.]*:(5804|5805|5806|5807) " "$tmp/mc" ||
		fail "multicast mode: a kernel socket has a stats line"
	! grep -qE "udp [0-9.]*:(5811|5899) " "$tmp/ports" ||
		fail "ports: a kernel socket has a stats line"
	;;
python)
	command -v python3 >/dev/null || {
		echo "test_preload python: skipped: no python3"
		exit 77
	}
	"${run[@]}" --stats --addr 198.18.0.1 python3 "$src/test_preload.py" \
		198.18.0.1 || fail "test_preload.py under the preload"
	# The preload survives exec: a program started by a shell started by
	# qpsock-run is offloaded too.
	"${run[@]}" --stats sh -c 'exec python3 -c "import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((\"\", 5700))
s.close()"' 2>"$tmp/exec.err" || fail "python3 after exec"
	cat "$tmp/exec.err"
	grep -q 'udp 0.0.0.0:5700 .*via qpsock' "$tmp/exec.err" ||
		fail "the program after exec was not offloaded"
	;;
packet)
	# QPS_TEST_PROVIDER=xdp: the same on xdp.
	tprov=${QPS_TEST_PROVIDER:-packet}
	ns_a=plpa$$ ns_b=plpb$$ if_a=plva$$ if_b=plvb$$
	needs_ns 0 ip sockperf
	# qpsock server, kernel client; then kernel server, qpsock client.
	for dir in in out; do
		if [[ $dir == in ]]; then
			ip netns exec "$ns_a" "${run[@]}" --provider "$tprov" \
				--dev "$if_a" --stats sockperf sr -i 10.79.0.1 \
				-p 11111 >"$tmp/sr.$dir" 2>&1 &
			srv=$!
			sleep 1
			ip netns exec "$ns_b" timeout 30 sockperf pp \
				-i 10.79.0.1 -p 11111 -t 1 -m 64 \
				>"$tmp/pp.$dir" 2>&1 || fail "kernel sockperf pp"
			qps=$tmp/sr.$dir
		else
			ip netns exec "$ns_b" sockperf sr -i 10.79.0.2 \
				-p 11111 >"$tmp/sr.$dir" 2>&1 &
			srv=$!
			sleep 1
			ip netns exec "$ns_a" timeout 30 "${run[@]}" --provider \
				"$tprov" --dev "$if_a" --stats sockperf pp \
				-i 10.79.0.2 -p 11111 -t 1 -m 64 \
				>"$tmp/pp.$dir" 2>&1 || fail "qpsock sockperf pp"
			qps=$tmp/pp.$dir
		fi
		ip netns pids "$ns_a" | xargs -r kill -INT
		ip netns pids "$ns_b" | xargs -r kill -INT
		wait "$srv"
		srv=
		grep -hE 'dropped messages|Summary|qpsock-preload' \
			"$tmp/pp.$dir" "$tmp/sr.$dir"
		grep -q '# dropped messages = 0;' "$tmp/pp.$dir" ||
			fail "sockperf ($dir): messages dropped"
		got=$(sed -n 's/.*ReceivedMessages=\([0-9]*\).*/\1/p' \
			"$tmp/pp.$dir" | head -1)
		n=$(sed -n 's/.*rx \([0-9]*\) datagrams.*via qpsock/\1/p' \
			"$qps" | head -1)
		[[ -n "$got" && "$got" -gt 0 && -n "$n" && "$n" -ge "$got" ]] ||
			fail "sockperf ($dir): $got replies, qpsock rx '$n'"
	done
	;;
programs)
	# Unmodified programs under qpsock-run --provider packet in one
	# namespace, kernel clients in another and on the server's own
	# loopback: dnsmasq daemonizing (its default) and in the foreground,
	# answering dig from the wire, from 127.0.0.1 and from the server's
	# own address; socat UDP echo with and without fork; socat receiving
	# 2048-byte multicast datagrams; ssmping (source-specific join);
	# ffmpeg receiving a multicast stream and exiting. qps_stat (the
	# daemon's stderr is /dev/null) or --stats must show the queries
	# went through qpsock. $calls is qps_stat here.
	stat=$calls
	ns_a=plra$$ ns_b=plrb$$ if_a=plrva$$ if_b=plrvb$$
	needs_ns 5 dnsmasq dig socat ip ssmping ssmpingd ffmpeg
	qrun=(ip netns exec "$ns_a" "${run[@]}" --provider packet --dev "$if_a")
	printf '10.1.2.3 hello.test\n' >"$tmp/hosts"
	ask() {	# NS SERVER: one answer, or fail
		local a
		a=$(ip netns exec "$1" dig +short +time=2 +tries=2 @"$2" \
			-p 5353 hello.test)
		[[ "$a" == 10.1.2.3 ]] || fail "dnsmasq: dig @$2 from $1: '$a'"
	}
	for mode in daemon foreground; do
		pidf=$tmp/dnsmasq.$mode.pid
		args=(dnsmasq --no-resolv --no-hosts --addn-hosts="$tmp/hosts"
			-p 5353 --pid-file="$pidf" --user=root
			--log-facility="$tmp/dnsmasq.log")
		if [[ $mode == daemon ]]; then
			"${qrun[@]}" "${args[@]}" ||
				fail "dnsmasq did not start ($mode)"
		else
			"${qrun[@]}" "${args[@]}" -k &
			srv=$!
		fi
		for i in {1..50}; do [[ -s "$pidf" ]] && break; sleep 0.1; done
		pid=$(cat "$pidf") || fail "dnsmasq wrote no pid ($mode)"
		sleep 0.3
		for i in 1 2 3; do ask "$ns_b" 10.79.5.1; done
		for i in 1 2; do ask "$ns_a" 127.0.0.1; done
		ask "$ns_a" 10.79.5.1
		"$stat" -p "$pid" --json >"$tmp/stat.$mode" ||
			fail "qps_stat -p $pid ($mode)"
		rx=$(grep -o '"rx_packets":[0-9]*' "$tmp/stat.$mode" | head -1 |
			cut -d: -f2)
		echo "dnsmasq ($mode, pid $pid): 6 queries answered, qpsock rx_packets $rx"
		[[ -n "$rx" && "$rx" -ge 6 ]] ||
			fail "dnsmasq ($mode): qpsock counted '$rx' datagrams"
		kill "$pid"
		[[ $mode == foreground ]] && wait "$srv"
		srv=
	done
	# socat: a child per peer, then one process for one peer.
	"${qrun[@]}" --stats socat UDP4-LISTEN:7000,fork,reuseaddr \
		EXEC:/bin/cat 2>"$tmp/socat.fork" &
	srv=$!
	"${qrun[@]}" --stats socat UDP4-LISTEN:7001,reuseaddr PIPE \
		2>"$tmp/socat.one" &
	srv2=$!
	sleep 1
	for i in 1 2 3 4 5; do
		got=$(echo "req-$i" | ip netns exec "$ns_b" timeout 5 \
			socat -t 2 - UDP4:10.79.5.1:7000)
		[[ "$got" == "req-$i" ]] || fail "socat fork: req-$i echoed '$got'"
	done
	got=$(echo once | ip netns exec "$ns_b" timeout 5 \
		socat -t 2 - UDP4:10.79.5.1:7001)
	[[ "$got" == once ]] || fail "socat: echoed '$got'"
	sleep 0.3
	# SIGINT: socat exits through exit(), so the stats lines come out.
	kill -INT "$srv" "$srv2"
	wait "$srv" "$srv2"
	srv=
	n=$(grep -h 'udp 0.0.0.0:700[01] .*via qpsock' "$tmp/socat.fork" \
		"$tmp/socat.one" | sed -n 's/.*: rx \([0-9]*\) datagrams.*/\1/p' |
		awk '{ s += $1 } END { print s + 0 }')
	echo "socat: 6 requests echoed, qpsock rx $n datagrams on ports 7000-7001"
	[[ "$n" -ge 6 ]] || { cat "$tmp/socat.fork" "$tmp/socat.one";
		fail "socat: qpsock received $n datagrams"; }
	# A multicast receiver of 2048-byte datagrams (above the MTU: two
	# fragments each), the join made by socat's ip-add-membership.
	"${qrun[@]}" --stats socat -u -b 65536 \
		UDP4-RECV:7100,ip-add-membership=239.7.7.7:10.79.5.1 \
		OPEN:"$tmp/mc.out",creat,trunc 2>"$tmp/socat.mc" &
	srv=$!
	sleep 1
	: >"$tmp/mc.in"
	for i in 1 2 3 4 5; do
		head -c 2048 /dev/urandom >"$tmp/mc.$i"
		cat "$tmp/mc.$i" >>"$tmp/mc.in"
		ip netns exec "$ns_b" socat -u -b 65536 OPEN:"$tmp/mc.$i" \
			UDP4-DATAGRAM:239.7.7.7:7100,ip-multicast-if=10.79.5.2 ||
			fail "socat multicast: send $i"
	done
	sleep 0.5
	kill -INT "$srv"
	wait "$srv"
	srv=
	n=$(sed -n 's/.*udp 0.0.0.0:7100 .*: rx \([0-9]*\) datagrams.*via qpsock/\1/p' \
		"$tmp/socat.mc")
	echo "socat multicast: $(stat -c %s "$tmp/mc.out") of 10240 bytes, qpsock rx '$n' datagrams"
	cmp -s "$tmp/mc.in" "$tmp/mc.out" ||
		{ cat "$tmp/socat.mc"; fail "socat multicast: 2048-byte datagrams lost"; }
	[[ "$n" == 5 ]] || { cat "$tmp/socat.mc"; fail "socat multicast: qpsock rx '$n'"; }
	# ssmping: a source-specific join (MCAST_JOIN_SOURCE_GROUP on a
	# socket bound to the SSM group), unicast and multicast replies from
	# a kernel ssmpingd.
	ip netns exec "$ns_b" ssmpingd >"$tmp/ssmpingd.log" 2>&1 &
	srv=$!
	sleep 0.5
	ip netns exec "$ns_a" timeout 20 "${run[@]}" --provider packet \
		--dev "$if_a" --stats ssmping -c 5 10.79.5.2 >"$tmp/ssmping" 2>&1 ||
		{ cat "$tmp/ssmping"; fail "ssmping failed"; }
	kill "$srv"
	wait "$srv" 2>/dev/null
	srv=
	n=$(grep -c '^multicast from 10.79.5.2' "$tmp/ssmping")
	g=$(sed -n 's/.*udp 232\.43\.211\.234:[0-9]* .*: rx \([0-9]*\) datagrams.*via qpsock/\1/p' \
		"$tmp/ssmping")
	echo "ssmping: $n of 5 multicast replies, qpsock rx '$g' on the SSM group"
	[[ "$n" -ge 4 && "${g:-0}" -ge "$n" ]] ||
		{ cat "$tmp/ssmping"; fail "ssmping: $n multicast replies, qpsock '$g'"; }
	# ffmpeg receiving a multicast MPEG-TS stream that goes on after it
	# stops: its UDP thread is cancelled inside recvfrom, and the process
	# must exit 0 within a second of its last frame (its last -progress
	# write).
	ip netns exec "$ns_b" timeout 30 ffmpeg -nostdin -loglevel error -re \
		-f lavfi -i testsrc=size=160x120:rate=25 -t 20 -c:v mpeg2video \
		-f mpegts "udp://239.9.9.9:5004?pkt_size=1316&localaddr=10.79.5.2&ttl=2" \
		>"$tmp/ffmpeg.tx" 2>&1 &
	srv=$!
	rc=0
	ip netns exec "$ns_a" timeout 15 "${run[@]}" --provider packet \
		--dev "$if_a" --stats ffmpeg -nostdin -loglevel error \
		-analyzeduration 1000000 \
		-i "udp://239.9.9.9:5004?localaddr=10.79.5.1" -t 2 \
		-progress "$tmp/ffmpeg.progress" -f null - >"$tmp/ffmpeg.rx" 2>&1 ||
		rc=$?
	end=$(date +%s%N)
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	srv=
	last=$(stat -c %.9Y "$tmp/ffmpeg.progress" 2>/dev/null | tr -d .)
	g=$(sed -n 's/.*udp 239\.9\.9\.9:5004 .*: rx \([0-9]*\) datagrams.*via qpsock/\1/p' \
		"$tmp/ffmpeg.rx")
	ms=$(( (end - ${last:-0}) / 1000000 ))
	echo "ffmpeg: exit $rc, ${ms} ms after its last frame, qpsock rx '$g' datagrams"
	[[ $rc -eq 0 ]] || { cat "$tmp/ffmpeg.rx"; fail "ffmpeg exited $rc"; }
	grep -q '^progress=end' "$tmp/ffmpeg.progress" ||
		fail "ffmpeg: no end of progress"
	[[ $ms -le 1000 ]] || fail "ffmpeg: exited ${ms} ms after its last frame"
	[[ "${g:-0}" -ge 20 ]] || { cat "$tmp/ffmpeg.rx"; fail "ffmpeg: qpsock rx '$g'"; }
	;;
fork)
	# $calls is test_preload_fork here: the client on the kernel, the
	# server it starts under qpsock-run. emu first (on the wire, both
	# sides preloaded; the daemon case alone: docs/preload.md "fork"),
	# then packet between two namespaces against the kernel client.
	export PL_FORK_LOG=$tmp/emu.log PL_FORK_QPSOCK=1 PL_FORK_CASES=1
	PL_TEST_ADDR=198.18.0.1 \
		PL_FORK_SERVER="sh $2 --stats --addr 198.18.0.1" \
		"${run[@]}" --addr 198.18.0.2 "$calls" ||
		{ cat "$PL_FORK_LOG"; fail "fork cases on emu"; }
	if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null; then
		echo "test_preload fork: packet part skipped: needs root and ip"
		exit 0
	fi
	ns_a=plfa$$ ns_b=plfb$$ if_a=plfva$$ if_b=plfvb$$
	if ! make_ns 1; then
		echo "test_preload fork: packet part skipped: cannot make namespaces here"
		exit 0
	fi
	export PL_FORK_LOG=$tmp/packet.log PL_FORK_CASES=7
	PL_TEST_ADDR=10.79.1.1 \
		PL_FORK_SERVER="ip netns exec $ns_a sh $2 --stats --provider packet --dev $if_a" \
		ip netns exec "$ns_b" "$calls" ||
		{ cat "$PL_FORK_LOG"; fail "fork cases on packet"; }
	;;
fork_xdp)
	# The fork cases and socat's fork mode on xdp, whose interface holds
	# one context: the parent's. A child that takes a socket takes it on
	# packet beside it (docs/preload.md "fork"), with the datagrams the
	# parent had queued; the parent's mark leaves the socket it lets go,
	# so that the port's traffic is no longer the parent's.
	ns_a=plxa$$ ns_b=plxb$$ if_a=plxva$$ if_b=plxvb$$
	needs_ns 2 ip socat
	qrun=(ip netns exec "$ns_a" "${run[@]}" --stats --debug --provider xdp
		--dev "$if_a")
	export PL_FORK_LOG=$tmp/xdp.log PL_FORK_CASES=7
	PL_TEST_ADDR=10.79.2.1 PL_FORK_SERVER="${qrun[*]}" \
		ip netns exec "$ns_b" "$calls" ||
		{ cat "$PL_FORK_LOG"; fail "fork cases on xdp"; }
	grep -q 'xdp.*native XDP\|xdp.*generic' "$PL_FORK_LOG" ||
		{ cat "$PL_FORK_LOG"; fail "the server's context was not on xdp"; }
	grep -q 'this process uses the packet provider' "$PL_FORK_LOG" ||
		{ cat "$PL_FORK_LOG"; fail "no child took a socket on packet"; }
	"${qrun[@]}" socat UDP4-LISTEN:7000,fork,reuseaddr EXEC:/bin/cat \
		2>"$tmp/socat.fork" &
	srv=$!
	sleep 1
	for i in 1 2 3 4 5; do
		got=$(echo "req-$i" | ip netns exec "$ns_b" timeout 5 \
			socat -t 2 - UDP4:10.79.2.1:7000)
		[[ "$got" == "req-$i" ]] ||
			{ cat "$tmp/socat.fork"; fail "socat fork: req-$i echoed '$got'"; }
	done
	kill -INT "$srv"
	wait "$srv"
	srv=
	n=$(grep -c 'queued datagrams handed on' "$tmp/socat.fork")
	t=$(grep -c 'datagrams taken over' "$tmp/socat.fork")
	echo "socat fork on xdp: 5 requests echoed; handed on $n times, taken over $t times"
	[[ "$n" -ge 5 && "$t" -ge 5 ]] ||
		{ cat "$tmp/socat.fork"; fail "socat fork: the first datagrams did not go through qpsock"; }
	;;
*)
	fail "unknown part $part"
	;;
esac
echo "test_preload $part: ok"
