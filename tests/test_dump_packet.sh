#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test_dump_packet.sh QPS_DUMP QPSOCK_RUN - qps_dump on the packet provider:
# an unmodified program (python3) under qpsock-run --dump on one end of a
# veth pair in a private network namespace sends to a group (three
# datagrams and one in fragments) and receives from a kernel socket on the
# other end (one small, one fragmented). tshark finds every datagram in
# the capture, payloads as sent, IPv4 and UDP checksums good.
# Root only (77 otherwise), as the packet suites.
set -euo pipefail

dump=$1
run=$2

if [[ -n "${QPS_TEST_SANITIZE:-}" ]]; then
	# Preloaded (qpsock-run): a sanitizer build needs its runtime first.
	echo "SKIP: built with QPS_SANITIZE=$QPS_TEST_SANITIZE"
	exit 77
fi
if [[ "${QPS_DUMP_NETNS:-}" != 1 ]]; then
	if [[ $(id -u) -ne 0 ]]; then
		echo "SKIP: needs root (a network namespace with a veth pair)"
		exit 77
	fi
	for t in unshare nsenter ip tshark python3; do
		if ! command -v "$t" >/dev/null; then
			echo "SKIP: $t is not installed"
			exit 77
		fi
	done
	exec unshare --net env QPS_DUMP_NETNS=1 bash "$0" "$@"
fi

tmp=$(mktemp -d)
kpid=
nspid=
cleanup() {
	[[ -n "$kpid" ]] && kill "$kpid" 2>/dev/null
	[[ -n "$nspid" ]] && kill "$nspid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# The kernel peer's end in a namespace of its own, held by a sleeper.
unshare --net sleep 120 &
nspid=$!
sleep 0.1
peer() { nsenter -t "$nspid" -n "$@"; }
ip link set lo up
ip link add qpd0 type veth peer name qpd1 netns "$nspid"
ip link set qpd0 up
ip addr add 10.77.0.1/24 dev qpd0
peer ip link set lo up
peer ip link set qpd1 up
peer ip addr add 10.77.0.2/24 dev qpd1

# The kernel peer: a small datagram and a fragmented one, again and again,
# until the program has both.
peer python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(250):
    s.sendto(b"kernel %d" % i, ("10.77.0.1", 40001))
    s.sendto(b"K" * 3000, ("10.77.0.1", 40001))
    time.sleep(0.02)
' 2> /dev/null &
kpid=$!

QPS_DUMP_BIN=$dump sh "$run" --provider packet -d qpd0 --addr 10.77.0.1 \
	--dump "$tmp/p.pcap" -- python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 40001))
s.settimeout(5)
for i in range(3):
    s.sendto(b"packet %d" % i, ("239.1.2.3", 40002))
s.sendto(bytes(range(256)) * 12, ("239.1.2.3", 40002))
small = big = False
while not (small and big):
    d, _ = s.recvfrom(4096)
    small = small or d.startswith(b"kernel")
    big = big or d == b"K" * 3000
' 2> "$tmp/run.err" || { cat "$tmp/run.err"; echo "FAIL: the program"; exit 1; }
for ((i = 0; i < 50; i++)); do
	grep -q "packets captured" "$tmp/run.err" && break
	sleep 0.1
done
cat "$tmp/run.err"

tshark -r "$tmp/p.pcap" -o udp.check_checksum:TRUE -o ip.check_checksum:TRUE \
	-T fields -E separator=/t -e ip.src -e ip.checksum.status \
	-e udp.checksum.status -e ip.flags.mf -e data.data \
	2>/dev/null > "$tmp/fields"
python3 - "$tmp/fields" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
sent = {("packet %d" % i).encode().hex() for i in range(3)}
sent.add((bytes(range(256)) * 12).hex())
got_tx, got_small, got_big = set(), False, False
for src, ipok, udpok, mf, data in rows:
    if ipok != "1":
        sys.exit("FAIL: IPv4 checksum status %s" % ipok)
    if mf == "0" and udpok not in ("1",):
        sys.exit("FAIL: UDP checksum status %s from %s" % (udpok, src))
    if mf != "0":
        continue
    if src == "10.77.0.1":
        got_tx.add(data)
    elif bytes.fromhex(data).startswith(b"kernel"):
        got_small = True
    elif data == (b"K" * 3000).hex():
        got_big = True
if got_tx != sent:
    sys.exit("FAIL: sent payloads: %d of %d found" % (len(got_tx & sent), len(sent)))
if not (got_small and got_big):
    sys.exit("FAIL: received: small %s, fragmented %s" % (got_small, got_big))
print("all passed: %d frames" % len(rows))
EOF
