#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test_preload_fallback.sh QPSOCK_RUN TEST_PRELOAD_FALLBACK - the program
# under qpsock-run on a private emu wire, with the assertions it makes on
# the kernel (test_preload_fallback_kernel); then, in its --debug and
# --stats lines, that every socket given an option qpsock cannot honour
# before it moved data fell back to the kernel, and every one given it
# afterwards said the refusal (docs/preload.md "What falls back, what is
# refused"). Exit 77 (skipped) in sanitizer builds.
set -u

run=(sh "$1") prog=$2
if [[ -n "${QPS_TEST_SANITIZE:-}" ]]; then
	echo "test_preload_fallback: skipped: built with QPS_SANITIZE=$QPS_TEST_SANITIZE"
	exit 77
fi
wire="pl-fallback-$$"
tmp=$(mktemp -d)
export QPS_DEV=$wire
unset QPS_PROVIDER

cleanup() {
	rm -rf "$tmp"
	rm -f /dev/shm/qpsock-emu-"$wire"* 2>/dev/null
}
trap cleanup EXIT

fail() {
	echo "test_preload_fallback: FAIL: $*"
	exit 1
}

PL_TEST_ADDR=198.18.0.1 "${run[@]}" --stats --debug --addr 198.18.0.1 \
	"$prog" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "under the preload"; }
cat "$tmp/out"

# Before any datagram moved: on the kernel, said once per socket.
for why in "UDP_SEGMENT" "UDP_GRO" "IP_RECVERR" "SO_BINDTODEVICE" \
	"IP_MULTICAST_IF" "SO_ATTACH_REUSEPORT_CBPF"; do
	grep -q "fd [0-9]*: $why, which qpsock cannot honour: left on the kernel" \
		"$tmp/out" || fail "no fallback for $why"
done
# Afterwards: refused, said once per socket, on its stats line.
for what in "UDP_SEGMENT" "UDP_SEGMENT control message" "UDP_GRO" \
	"IP_RECVERR" "SO_BINDTODEVICE" "IP_MULTICAST_IF" \
	"SO_ATTACH_REUSEPORT_CBPF"; do
	grep -q "fd [0-9]*: $what refused (" "$tmp/out" ||
		fail "no refusal said for $what"
	grep -q "via qpsock; refused [0-9]* (first $what)" "$tmp/out" ||
		fail "no stats line counts the refusal of $what"
done
if ! grep -q "io_uring unavailable" "$tmp/out"; then
	grep -q "registered with io_uring, whose operations qpsock cannot see: left on the kernel" \
		"$tmp/out" || fail "no fallback for an io_uring registration"
	grep -q "io_uring registration refused (Bad file descriptor)" \
		"$tmp/out" || fail "no refusal said for an io_uring registration"
fi
echo "test_preload_fallback: ok"
