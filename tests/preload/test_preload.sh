#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test_preload.sh PART QPSOCK_RUN TEST_PRELOAD_CALLS SRCDIR - programs
# under qpsock-run on a private emu wire (docs/preload.md):
#   calls     test_preload_calls under the preload, the same assertions
#             test_preload_calls_kernel makes on the kernel;
#   sockperf  sockperf server and client both under qpsock-run, ping-pong
#             with each of sockperf's waits (recvfrom, epoll, poll,
#             select): 0 dropped, and the --stats lines show the
#             datagrams went through qpsock;
#   python    test_preload.py (stdlib only) under the preload.
# Exit 77 (skipped) when a program it needs is missing.
set -u

part=$1 run=$2 calls=$3 src=$4
wire="pl-$part-$$"
tmp=$(mktemp -d)
export QPS_DEV=$wire
unset QPS_PROVIDER

cleanup() {
	[[ -n "${srv:-}" ]] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
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

case $part in
calls)
	PL_TEST_ADDR=198.18.0.1 "$run" --addr 198.18.0.1 "$calls" ||
		fail "test_preload_calls under the preload"
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
		"$run" --stats --addr 198.18.0.1 sockperf sr "${sargs[@]}" \
			>"$tmp/sr.$io" 2>&1 &
		srv=$!
		sleep 1
		timeout 30 "$run" --stats sockperf pp -i 198.18.0.1 -p 11112 \
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
python)
	command -v python3 >/dev/null || {
		echo "test_preload python: skipped: no python3"
		exit 77
	}
	"$run" --stats --addr 198.18.0.1 python3 "$src/test_preload.py" \
		198.18.0.1 || fail "test_preload.py under the preload"
	;;
*)
	fail "unknown part $part"
	;;
esac
echo "test_preload $part: ok"
