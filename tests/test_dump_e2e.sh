#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test_dump_e2e.sh QPS_DUMP DUMP_PEER [QPSOCK_RUN] - qps_dump from another process
# against dump_peer (emu, or the verbs double under run-on-shim.sh):
#   exchange  unicast, multicast and a fragmented datagram captured; tshark
#             finds every frame (sent and received), every payload byte-exact,
#             valid IPv4 and UDP checksums, stamps inside the run
#   ud        UD datagrams between two UD contexts captured as the RoCE v2
#             frames the device sends: tshark decodes them (infiniband,
#             UD SEND only), IPv4 checksums and ICRCs valid, payloads
#             byte-exact, the sent and received frames of each the same
#             but for the source MAC the receiver is not told
#   filter    a tcpdump expression keeps only what it names; -w - through
#             tcpdump -r -; a second dumper is refused
#   pcapng    the exchange again, in pcapng
#   opts      -c (one context), --rx (one direction), -s (snap length)
#   overflow  a capture that cannot keep up drops from the capture (counted
#             by qps_dump), never from the traffic
#   attach    attach and detach repeatedly under load, kill -9 a dumper:
#             traffic unaffected, the dead dumper's ring removed, the next
#             dumper takes over
#   perm      another user cannot attach (root only: setpriv)
#   run       qpsock-run --dump (QPSOCK_RUN, emu only) captures an
#             unmodified program's first datagrams
# Skips (77) without tshark or tcpdump.
set -euo pipefail

dump=$1
peer=$2
run=${3:-}
tmp=$(mktemp -d)
pids=()
fails=0

for t in tshark tcpdump python3; do
	if ! command -v "$t" >/dev/null; then
		echo "SKIP: $t is not installed (scripts/install-deps.sh)"
		exit 77
	fi
done

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
		rm -f "/dev/shm/qpsock-stat.$p".* "/dev/shm/qpsock-dump.$p".* \
			"/dev/shm/qpsock-emu-t-dump-$p"
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# wait_for FILE PATTERN [TENTHS]: until FILE has a line matching PATTERN
# that many times (LISTEN_N, default 1).
wait_for() {
	local f=$1 pat=$2 n=${3:-50} want=${LISTEN_N:-1} i
	for ((i = 0; i < n; i++)); do
		if [[ -f "$f" ]] &&
		   (($(grep -c -- "$pat" "$f" || true) >= want)); then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# start_peer DIR ARGS...: dump_peer in the background, until DIR/ready.
start_peer() {
	local d=$1
	shift
	mkdir -p "$d"
	"$peer" "$1" "$d" "${@:2}" > "$d/peer.log" 2>&1 &
	peer_pid=$!
	pids+=("$peer_pid")
	for ((i = 0; i < 100; i++)); do
		[[ -f "$d/ready" ]] && return 0
		sleep 0.05
	done
	cat "$d/peer.log"
	fail "dump_peer $1 never became ready"
	return 1
}

# check_exchange PCAP DIR: every frame of the exchange, twice (sent by A,
# received by B), payloads as sent, checksums good, stamps in [t0, t1].
# tshark's reassembly is off: a datagram's fragments are seen twice with
# one IP ID, and the two copies may interleave (docs/dump.md, ordering),
# so the fragments are put together and the UDP checksum verified here.
check_exchange() {
	tshark -r "$1" -o ip.defragment:FALSE -o udp.check_checksum:TRUE \
		-o ip.check_checksum:TRUE \
		-T fields -E separator=/t -e frame.time_epoch \
		-e ip.checksum.status -e udp.checksum.status -e ip.flags.mf \
		-e ip.frag_offset -e ip.src -e ip.dst -e ip.id -e udp.srcport \
		-e udp.dstport -e udp.length -e udp.checksum -e data.data \
		2>/dev/null > "$2/fields" || return 1
	python3 - "$2" <<'EOF'
import socket
import struct
import sys
from decimal import Decimal
d = sys.argv[1]
sent = open(d + "/sent").read().split()
t0 = Decimal(open(d + "/t0").read()) / 10**9
t1 = Decimal(open(d + "/t1").read()) / 10**9
rows = [l.rstrip("\n").split("\t") for l in open(d + "/fields")]
# 3 unicast, 2 multicast, one datagram in 3 fragments; each seen twice.
if len(rows) != 2 * (len(sent) - 1 + 3):
    sys.exit("frames: %d, want %d" % (len(rows), 2 * (len(sent) + 2)))

def udp_ok(src, dst, sport, dport, csum, payload):
    ulen = 8 + len(payload)
    b = (socket.inet_aton(src) + socket.inet_aton(dst) +
         struct.pack("!BBHHHHH", 0, 17, ulen, sport, dport, ulen, 0) +
         payload)
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    want = ~s & 0xffff
    return csum == (want or 0xffff)

got = []
frags = {}
for (ts, ipok, udpok, mf, off, src, dst, ipid, sport, dport, ulen, csum,
     data) in rows:
    if not t0 <= Decimal(ts) <= t1:
        sys.exit("stamp %s outside [%s, %s]" % (ts, t0, t1))
    if ipok != "1":
        sys.exit("IPv4 checksum status %s" % ipok)
    off = int(off or 0)
    if mf == "0" and off == 0:
        if udpok != "1":
            sys.exit("UDP checksum status %s" % udpok)
        got.append(data)
        continue
    # Each offset twice: the first copy of an offset goes to the first
    # datagram, the second to the second.
    k = (src, dst, ipid)
    f = frags.setdefault(k, [{}, {}])
    copy = 1 if off in f[0] else 0
    if off in f[copy]:
        sys.exit("fragment at %d seen more than twice" % off)
    f[copy][off] = (mf, sport, dport, ulen, csum, bytes.fromhex(data))
for (src, dst, ipid), copies in frags.items():
    for f in copies:
        if not f or 0 not in f:
            sys.exit("fragments of id %s: the first is missing" % ipid)
        ip = b""
        for off in sorted(f):
            if off * 8 != len(ip) + (8 if off else 0) and off:
                sys.exit("fragments of id %s: a hole at %d" % (ipid, off))
            ip += f[off][5]
        if f[max(f)][0] != "0":
            sys.exit("fragments of id %s: the last is missing" % ipid)
        _, sport, dport, ulen, csum, _ = f[0]
        if int(ulen) != 8 + len(ip):
            sys.exit("fragments of id %s: UDP length %s, %d bytes" %
                     (ipid, ulen, len(ip)))
        if not udp_ok(src, dst, int(sport), int(dport), int(csum, 16), ip):
            sys.exit("fragments of id %s: UDP checksum bad" % ipid)
        got.append(ip.hex())
want = sorted(sent * 2)
if sorted(got) != want:
    sys.exit("payloads differ from those sent")
EOF
}

# check_ud DIR: DIR/u.pcap holds each datagram of DIR/sent twice (sent,
# received) as RoCE v2 UD frames: IPv4 checksum and ICRC (CRC-32 of 8
# bytes of 1s and the packet, variant fields masked to 1s) valid, the
# payload byte-exact, both frames alike but for the source MAC.
check_ud() {
	python3 - "$1" <<'EOF'
import struct, sys, zlib
d = sys.argv[1]
sent = [bytes.fromhex(l) for l in open(d + "/sent").read().split()]
raw = open(d + "/u.pcap", "rb").read()
if struct.unpack_from("<I", raw)[0] not in (0xa1b2c3d4, 0xa1b23c4d):
    sys.exit("not a little-endian pcap")
off, frames = 24, []
while off < len(raw):
    _, _, cap, wire = struct.unpack_from("<IIII", raw, off)
    if cap != wire:
        sys.exit("frame cut")
    frames.append(raw[off + 16:off + 16 + cap])
    off += 16 + cap
if len(frames) != 2 * len(sent):
    sys.exit("frames: %d, want %d" % (len(frames), 2 * len(sent)))
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s
got = []
for f in frames:
    ip = f[14:]
    tot = struct.unpack_from("!H", ip, 2)[0]
    if len(ip) != tot or csum(ip[:20]) != 0xffff:
        sys.exit("IPv4 header or checksum bad")
    if struct.unpack_from("!H", ip, 22)[0] != 4791 or ip[28] != 0x64:
        sys.exit("not a RoCE v2 UD SEND only")
    m = bytearray(ip[:-4])
    m[1] = m[8] = m[10] = m[11] = m[26] = m[27] = m[32] = 0xff
    if zlib.crc32(b"\xff" * 8 + bytes(m)) != struct.unpack("<I", ip[-4:])[0]:
        sys.exit("ICRC bad")
    pad = (ip[29] >> 4) & 3
    # IPv4, UDP, BTH, DETH, then qpsock's 12-byte UD header.
    got.append((ip[20 + 8 + 12 + 8 + 12:tot - 4 - pad], f[12:]))
if sorted(g[0] for g in got) != sorted(sent * 2):
    sys.exit("payloads differ from those sent")
rest = sorted(g[1] for g in got)
if any(rest[i] != rest[i + 1] for i in range(0, len(rest), 2)):
    sys.exit("a sent and a received frame differ")
EOF
}

echo "== exchange"
d=$tmp/ex
start_peer "$d" exchange
"$dump" -p "$peer_pid" -w "$d/x.pcap" 2> "$d/dump.err" &
dpid=$!
if LISTEN_N=2 wait_for "$d/dump.err" "listening on" 50; then
	touch "$d/go"
	wait "$peer_pid" || fail "exchange: dump_peer failed: $(cat "$d/peer.log")"
	wait "$dpid" || fail "exchange: qps_dump exit status $?"
	grep -q "^16 packets captured" "$d/dump.err" ||
		fail "exchange: $(cat "$d/dump.err")"
	grep -q "^0 packets dropped by capture ring" "$d/dump.err" ||
		fail "exchange: drops: $(cat "$d/dump.err")"
	err=$(check_exchange "$d/x.pcap" "$d" 2>&1) ||
		fail "exchange: tshark: $err"
else
	fail "exchange: qps_dump never attached: $(cat "$d/dump.err")"
fi

echo "== ud"
d=$tmp/ud
start_peer "$d" ud
"$dump" -p "$peer_pid" -w "$d/u.pcap" 2> "$d/dump.err" &
dpid=$!
if LISTEN_N=2 wait_for "$d/dump.err" "listening on" 50; then
	touch "$d/go"
	wait "$peer_pid" || fail "ud: dump_peer failed: $(cat "$d/peer.log")"
	wait "$dpid" || fail "ud: qps_dump exit status $?"
	grep -q "^4 packets captured" "$d/dump.err" ||
		fail "ud: $(cat "$d/dump.err")"
	n=$(tshark -r "$d/u.pcap" -o ip.check_checksum:TRUE \
		-Y 'infiniband.bth.opcode == 100 && udp.dstport == 4791 &&
		    ip.checksum.status == 1 && infiniband.deth.srcqp' \
		2>/dev/null | wc -l)
	[[ $n == 4 ]] || fail "ud: tshark decoded $n UD frames, want 4"
	err=$(check_ud "$d" 2>&1) || fail "ud: $err"
else
	fail "ud: qps_dump never attached: $(cat "$d/dump.err")"
fi

echo "== filter, through tcpdump -r -, a second dumper"
d=$tmp/flt
start_peer "$d" exchange
"$dump" -p "$peer_pid" -w - udp dst port 40002 2> "$d/dump.err" |
	tcpdump -nn -r - > "$d/td.out" 2> "$d/td.err" &
dpid=$!
if LISTEN_N=2 wait_for "$d/dump.err" "listening on" 50; then
	"$dump" -p "$peer_pid" -w "$d/none.pcap" 2> "$d/busy.err" &&
		fail "filter: a second dumper attached to the same contexts"
	grep -q "another qps_dump is attached" "$d/busy.err" ||
		fail "filter: second dumper: $(cat "$d/busy.err")"
	touch "$d/go"
	wait "$peer_pid" || fail "filter: dump_peer failed"
	wait "$dpid" || fail "filter: pipeline exit status $?"
	n=$(grep -c "> 239.1.2.3.40002: UDP, length 11" "$d/td.out" || true)
	all=$(wc -l < "$d/td.out")
	[[ "$n" == 4 && "$all" == 4 ]] ||
		fail "filter: tcpdump read $all frames, $n multicast: $(cat "$d/td.out")"
	grep -q "^4 packets captured" "$d/dump.err" ||
		fail "filter: $(cat "$d/dump.err")"
	echo "tcpdump -r - excerpt:"
	head -2 "$d/td.out"
else
	fail "filter: qps_dump never attached: $(cat "$d/dump.err")"
fi

echo "== pcapng"
d=$tmp/ng
start_peer "$d" exchange
"$dump" -p "$peer_pid" --pcapng -w "$d/x.pcapng" 2> "$d/dump.err" &
dpid=$!
if LISTEN_N=2 wait_for "$d/dump.err" "listening on" 50; then
	touch "$d/go"
	wait "$peer_pid" || fail "pcapng: dump_peer failed"
	wait "$dpid" || fail "pcapng: qps_dump exit status $?"
	err=$(check_exchange "$d/x.pcapng" "$d" 2>&1) ||
		fail "pcapng: tshark: $err"
else
	fail "pcapng: qps_dump never attached: $(cat "$d/dump.err")"
fi

echo "== -c, --rx, -s"
d=$tmp/opts
start_peer "$d" exchange
# Context 1 only receives: 8 frames, cut to 100 bytes.
"$dump" -p "$peer_pid" -c 1 --rx -s 100 -w "$d/x.pcap" 2> "$d/dump.err" &
dpid=$!
if wait_for "$d/dump.err" "listening on pid $peer_pid ctx 1" 50; then
	touch "$d/go"
	wait "$peer_pid" || fail "opts: dump_peer failed"
	wait "$dpid" || fail "opts: qps_dump exit status $?"
	grep -q "ctx 0" "$d/dump.err" && fail "opts: -c 1 took context 0"
	tshark -r "$d/x.pcap" -T fields -E separator=/t -e frame.cap_len \
		-e frame.len -e ip.dst 2>/dev/null > "$d/fields"
	n=$(wc -l < "$d/fields")
	long=$(awk -F'\t' '$1 > 100 || ($2 > 100 && $1 != 100)' "$d/fields" | wc -l)
	cut=$(awk -F'\t' '$2 == 1514 && $1 == 100' "$d/fields" | wc -l)
	[[ "$n" == 8 && "$long" == 0 && "$cut" == 2 ]] ||
		fail "opts: $n frames, $long not cut to 100, $cut full fragments cut: $(cat "$d/fields")"
else
	fail "opts: qps_dump never attached: $(cat "$d/dump.err")"
fi

echo "== overflow"
d=$tmp/ovf
start_peer "$d" flood 1500
# A reader that does not read for a second: the pipe fills, qps_dump
# blocks writing, the 64 KiB sub-rings overflow.
"$dump" -p "$peer_pid" -B 64 -w - 2> "$d/dump.err" |
	{ sleep 1; cat > /dev/null; } &
dpid=$!
wait "$peer_pid" || fail "overflow: the traffic lost datagrams: $(cat "$d/result" 2>/dev/null)"
wait "$dpid" || true
read -r sent got txerr < "$d/result" || true
[[ "${sent:-0}" -gt 0 && "$sent" == "$got" && "$txerr" == 0 ]] ||
	fail "overflow: sent ${sent:-?} received ${got:-?} tx_errors ${txerr:-?}"
drops=$(sed -n 's/^\([0-9]*\) packets dropped by capture ring$/\1/p' "$d/dump.err")
[[ "${drops:-0}" -gt 0 ]] ||
	fail "overflow: no drop reported: $(cat "$d/dump.err")"
echo "overflow: sent $sent, received $got; qps_dump: $(tr '\n' ' ' < "$d/dump.err")"

echo "== attach, detach, kill -9 under load"
d=$tmp/att
start_peer "$d" flood 3000
for i in 1 2 3 4; do
	"$dump" -p "$peer_pid" -w /dev/null 2> "$d/a$i.err" &
	dpid=$!
	LISTEN_N=2 wait_for "$d/a$i.err" "listening on" 20 ||
		fail "attach $i: never attached: $(cat "$d/a$i.err")"
	kill -INT "$dpid"
	wait "$dpid" || fail "attach $i: exit status $?"
	grep -q "packets captured" "$d/a$i.err" ||
		fail "attach $i: no summary: $(cat "$d/a$i.err")"
done
"$dump" -p "$peer_pid" -w /dev/null 2> "$d/k.err" &
dpid=$!
LISTEN_N=2 wait_for "$d/k.err" "listening on" 20 ||
	fail "kill: never attached: $(cat "$d/k.err")"
kill -9 "$dpid"
wait "$dpid" 2>/dev/null || true
# The context sees the dead dumper's lock gone on its next tick and
# removes the ring.
for ((i = 0; i < 20; i++)); do
	compgen -G "/dev/shm/qpsock-dump.$peer_pid.*" > /dev/null || break
	sleep 0.1
done
compgen -G "/dev/shm/qpsock-dump.$peer_pid.*" > /dev/null &&
	fail "kill: the dead dumper's ring is still there"
"$dump" -p "$peer_pid" -w /dev/null 2> "$d/after.err" &
dpid=$!
LISTEN_N=2 wait_for "$d/after.err" "listening on" 20 ||
	fail "kill: the next dumper cannot attach: $(cat "$d/after.err")"
kill -INT "$dpid" 2>/dev/null || true
wait "$dpid" || true
wait "$peer_pid" || fail "attach: the traffic lost datagrams: $(cat "$d/result")"

echo "== permission"
if [[ $(id -u) -ne 0 ]] || ! command -v setpriv > /dev/null; then
	echo "skipped: needs root and setpriv"
elif ! setpriv --reuid=nobody --regid=nogroup --clear-groups \
		test -x "$dump"; then
	echo "skipped: nobody cannot run $dump"
else
	d=$tmp/perm
	start_peer "$d" flood 1500
	if setpriv --reuid=nobody --regid=nogroup --clear-groups \
		"$dump" -p "$peer_pid" -w /dev/null > /dev/null 2> "$d/p.err"; then
		fail "perm: nobody attached to root's process"
	fi
	grep -q "permission denied" "$d/p.err" ||
		fail "perm: $(cat "$d/p.err")"
	compgen -G "/dev/shm/qpsock-dump.$peer_pid.*" > /dev/null &&
		fail "perm: a ring was made"
	wait "$peer_pid" || fail "perm: traffic"
fi
# The other way round: root captures nobody's process (not on the verbs
# double, whose port needs root to set up its neighbours).
if [[ $(id -u) -eq 0 && "${QPS_PROVIDER:-emu}" == emu ]] &&
   command -v setpriv > /dev/null &&
   setpriv --reuid=nobody --regid=nogroup --clear-groups test -x "$dump"; then
	d=$tmp/other
	mkdir -p "$d"
	chmod 711 "$tmp"
	chmod 777 "$d"
	setpriv --reuid=nobody --regid=nogroup --clear-groups \
		"$peer" flood "$d" 1500 > "$d/peer.log" 2>&1 &
	peer_pid=$!
	pids+=("$peer_pid")
	for ((i = 0; i < 100; i++)); do
		[[ -f "$d/ready" ]] && break
		sleep 0.05
	done
	"$dump" -p "$peer_pid" -n 100 -w "$d/o.pcap" 2> "$d/o.err" ||
		fail "perm: root cannot capture nobody's process: $(cat "$d/o.err")"
	grep -q "^100 packets captured" "$d/o.err" ||
		fail "perm: root: $(cat "$d/o.err")"
	wait "$peer_pid" || fail "perm: nobody's traffic: $(cat "$d/peer.log")"
fi

echo "== qpsock-run --dump"
if [[ -z "$run" || "${QPS_PROVIDER:-emu}" != emu ]]; then
	echo "skipped: emu with qpsock-run only"
elif [[ -n "${QPS_TEST_SANITIZE:-}" ]]; then
	# A preloaded sanitizer build needs its runtime first (test_preload).
	echo "skipped: built with QPS_SANITIZE=$QPS_TEST_SANITIZE"
else
	d=$tmp/run
	mkdir -p "$d"
	wire="t-dump-run-$$"
	QPS_DUMP_BIN=$dump sh "$run" --provider emu -d "$wire" \
		--addr 198.19.0.1 --dump "$d/r.pcap" -- python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3):
    s.sendto(b"first %d" % i, ("239.1.2.3", 40002))
' 2> "$d/run.err" || fail "run: status $?: $(cat "$d/run.err")"
	rm -f "/dev/shm/qpsock-emu-$wire"
	# qps_dump writes its last pass once the program is gone.
	for ((i = 0; i < 50; i++)); do
		grep -q "packets captured" "$d/run.err" && break
		sleep 0.1
	done
	n=$(tshark -r "$d/r.pcap" -Y 'udp.dstport == 40002 && data.data contains "first"' \
		2>/dev/null | wc -l)
	[[ "$n" == 3 ]] || fail "run: $n of 3 datagrams captured: $(cat "$d/run.err")"
fi

if ((fails)); then
	echo "$fails failure(s)"
	exit 1
fi
echo "all passed"
