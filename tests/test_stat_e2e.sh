#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test_stat_e2e.sh QPS_STAT STAT_PEER [PLOT_SCRIPT] - qps_stat from another
# process:
#   snapshot  what qps_stat --json -p reads equals what qps_ctx_stats and
#             qps_ep_stats said inside the process once traffic stopped
#             (unicast with a full queue and a truncation, a multicast
#             fan-out to three endpoints, one source-filtered); the list
#             view shows the process
#   interval  qps_stat -i 1 in a pseudo-terminal (script) redraws like top
#             with non-zero rates; without a terminal, one line per interval
#   record    --record writes one JSON line per interval (and plots, when
#             matplotlib is there)
#   sigkill   a killed process's segment is reported stale and removed
#   errors    exit status 1: no such pid, a segment of another build
#   leftover  no segment of this test's processes is left in /dev/shm
set -euo pipefail

stat=$1
peer=$2
plot=${3:-}
tmp=$(mktemp -d)
wire="t-stat-$$"
pids=()
fails=0

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
		rm -f "/dev/shm/qpsock-stat.$p".*
	done
	rm -f "/dev/shm/qpsock-emu-$wire" "/dev/shm/qpsock-emu-$wire".* \
		"/dev/shm/qpsock-stat.$$".*
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# start NAME ARGS...: stat_peer in the background; waits for its READY file.
start() {
	local name=$1 i
	shift
	"$peer" "$@" > "$tmp/$name.log" 2>&1 &
	pids+=($!)
	for ((i = 0; i < 200; i++)); do
		[[ -e "$tmp/$name.ready" ]] && return 0
		kill -0 "${pids[-1]}" 2>/dev/null || break
		sleep 0.05
	done
	cat "$tmp/$name.log"
	return 1
}

stop() {
	local pid=$1 rc=0
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	[[ $rc -eq 0 ]] || fail "stat_peer $pid exited $rc"
}

# --- snapshot: the counters across processes ---------------------------
if start snap snapshot "$wire" "$tmp/inside.json" "$tmp/snap.ready"; then
	spid=${pids[-1]}
	"$stat" --json -p "$spid" > "$tmp/outside.json" ||
		fail "qps_stat --json -p $spid exited $?"
	python3 - "$tmp/inside.json" "$tmp/outside.json" <<'EOF' || fail snapshot
import json, sys
inside = json.load(open(sys.argv[1]))
outside = json.load(open(sys.argv[2]))
ins = {c["ctx"]: c for c in inside["contexts"]}
outs = {c["ctx"]: c for c in outside["contexts"]}
bad = 0
if sorted(ins) != sorted(outs) or len(ins) != 2:
    print("contexts differ:", sorted(ins), sorted(outs)); sys.exit(1)
for k, c in ins.items():
    o = outs[k]
    for name, v in c["counters"].items():
        if o["counters"].get(name) != v:
            print(f"ctx {k} {name}: inside {v}, qps_stat {o['counters'].get(name)}")
            bad += 1
    oe = {e["slot"]: e for e in o["endpoints"]}
    if sorted(oe) != sorted(e["slot"] for e in c["endpoints"]):
        print(f"ctx {k}: endpoint slots differ"); bad += 1
    for e in c["endpoints"]:
        for name, v in e.items():
            if oe.get(e["slot"], {}).get(name) != v:
                print(f"ctx {k} ep {e['slot']} {name}: inside {v}, "
                      f"qps_stat {oe.get(e['slot'], {}).get(name)}")
                bad += 1
# What the traffic must have produced (stat_peer.c): not just "equal".
a, b = ins[min(ins)], ins[max(ins)]
eps = sorted(b["endpoints"], key=lambda e: e["slot"])
want = [(100, 0, 1, 0), (4, 6, 0, 0), (50, 0, 0, 0), (50, 0, 0, 0), (0, 0, 0, 50)]
got = [(e["rx_packets"], e["rx_queue_full"], e["rx_truncated"], e["rx_filtered"]) for e in eps]
if got != want:
    print("receiver endpoints:", got, "want", want); bad += 1
if eps[1]["rxq_hwm"] != 4 or eps[1]["rxq_depth"] != 4 or eps[1]["rcvbuf"] != 4:
    print("full queue gauges:", eps[1]); bad += 1
if [e["ngroups"] for e in eps[2:]] != [1, 1, 1]:
    print("groups:", [e["ngroups"] for e in eps]); bad += 1
tx = a["endpoints"][0]
if (tx["tx_packets"], tx["priority"], tx["band"]) != (160, 6, 0) or tx["txq"] < 0:
    print("sender endpoint:", tx); bad += 1
if b["counters"]["rx_packets"] != sum(e["rx_packets"] for e in eps):
    print("endpoint rx_packets do not add up to the context's"); bad += 1
mc = [e for e in outs[max(outs)]["endpoints"] if e["ngroups"]]
if [g["group"] for e in mc for g in e["groups"]] != ["239.1.2.3"] * 3 or \
   mc[2]["groups"][0]["source"] != "198.18.0.9":
    print("memberships:", [e["groups"] for e in mc]); bad += 1
sys.exit(1 if bad else 0)
EOF
	"$stat" > "$tmp/list.txt" || fail "qps_stat (list) exited $?"
	[[ $(grep -c "^$spid " "$tmp/list.txt") -eq 2 ]] ||
		{ cat "$tmp/list.txt"; fail "list: not two contexts of $spid"; }
	"$stat" -p "$spid" -c 1 > "$tmp/detail.txt" ||
		fail "qps_stat -p $spid -c 1 exited $?"
	grep -q "^multicast and demultiplexing" "$tmp/detail.txt" &&
		grep -q "^endpoints: 5 open" "$tmp/detail.txt" &&
		grep -q "239.1.2.3(src 198.18.0.9)" "$tmp/detail.txt" ||
		{ cat "$tmp/detail.txt"; fail "detail view"; }
	stop "$spid"
	[[ ! -e "/dev/shm/qpsock-stat.$spid.0" ]] ||
		fail "segment of $spid left after qps_ctx_destroy"
else
	fail "stat_peer snapshot did not start"
fi

# --- interval, record: rates while traffic flows -------------------------
if start flow flow "$wire" "$tmp/flow.ready"; then
	fpid=${pids[-1]}
	# A terminal: script(1) gives qps_stat a pty; it redraws as top.
	TERM=xterm script -qec "$stat -p $fpid -c 1 -i 1 -n 3" /dev/null \
		> "$tmp/tty.txt" 2>&1 || fail "qps_stat -i 1 (tty) exited $?"
	redraws=$(grep -o $'\e\\[H\e\\[2J' "$tmp/tty.txt" | wc -l)
	[[ $redraws -eq 3 ]] || fail "tty: $redraws redraws, want 3"
	rates=$(grep -c "^rates: rx [1-9][0-9]* dgram/s" "$tmp/tty.txt" || true)
	[[ $rates -eq 3 ]] ||
		{ cat -v "$tmp/tty.txt" | head -20; fail "tty: $rates rate lines with rx > 0, want 3"; }
	# Not a terminal: a header, then one line per interval and context.
	"$stat" -p "$fpid" -i 0.5 -n 2 > "$tmp/lines.txt" ||
		fail "qps_stat -i (pipe) exited $?"
	[[ $(wc -l < "$tmp/lines.txt") -eq 5 ]] &&
		! grep -q $'\e' "$tmp/lines.txt" &&
		awk -v p="$fpid" '$2 == p && $3 == 0 && $6 > 0 { n++ } END { exit n != 2 }' \
			"$tmp/lines.txt" ||
		{ cat "$tmp/lines.txt"; fail "pipe: want a header and 2 lines per context, tx > 0"; }
	"$stat" -p "$fpid" -i 0.5 -n 3 --record "$tmp/rec.jsonl" > /dev/null ||
		fail "--record exited $?"
	python3 - "$tmp/rec.jsonl" <<'EOF' || fail record
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 6, len(lines)
for l in lines:
    c = l["context"]
    assert l["time"] > 0 and "rates" in c and "counters" in c, l
    if c["ctx"] == 1:
        assert c["rates"]["rx_pps"] > 0, c["rates"]
EOF
	# The first python3 with matplotlib (a pyenv python3 may hide
	# Debian's python3-matplotlib); none: the plots are not checked.
	py=
	for p in python3 /usr/bin/python3; do
		if "$p" -c 'import matplotlib' 2>/dev/null; then
			py=$p
			break
		fi
	done
	if [[ -n "$plot" && -n "$py" ]]; then
		"$py" "$plot" "$tmp/rec.jsonl" -o "$tmp/plots" > /dev/null ||
			fail "plot_stat.py exited $?"
		[[ $(find "$tmp/plots" -name '*.png' -size +1k | wc -l) -eq 4 ]] ||
			fail "plot_stat.py: not 4 PNGs"
	else
		echo "test_stat_e2e: no matplotlib, plot_stat.py not run"
	fi

	# --- sigkill: stale, removed -----------------------------------------
	kill -9 "$fpid"
	wait "$fpid" 2>/dev/null || true
	[[ -e "/dev/shm/qpsock-stat.$fpid.0" ]] || fail "killed: no segment to find"
	"$stat" > "$tmp/stale.out" 2> "$tmp/stale.err" ||
		fail "qps_stat after a kill exited $?"
	[[ $(grep -c "process $fpid is gone: stale, removed" "$tmp/stale.err") -eq 2 ]] ||
		{ cat "$tmp/stale.err"; fail "stale: not reported for both contexts"; }
	! grep -q "^$fpid " "$tmp/stale.out" || fail "stale: still listed"
	! ls /dev/shm/qpsock-stat."$fpid".* > /dev/null 2>&1 ||
		fail "stale: segment not removed"
	rc=0
	"$stat" -p "$fpid" 2> "$tmp/gone.err" || rc=$?
	[[ $rc -eq 1 ]] && grep -q "no process $fpid" "$tmp/gone.err" ||
		fail "-p of a dead pid: exit $rc, $(cat "$tmp/gone.err")"
else
	fail "stat_peer flow did not start"
fi

# --- errors: exit status 1 with a message ------------------------------
true &
dead=$!
wait "$dead"
rc=0
"$stat" -p "$dead" 2> "$tmp/err1" || rc=$?
[[ $rc -eq 1 ]] && grep -q "^qps_stat: no process $dead$" "$tmp/err1" ||
	fail "bad pid: exit $rc, $(cat "$tmp/err1")"
rc=0
"$stat" -p $$ 2> "$tmp/err2" || rc=$?
[[ $rc -eq 1 ]] && grep -q "publishes no qpsock counters" "$tmp/err2" ||
	fail "pid without a segment: exit $rc, $(cat "$tmp/err2")"
# A segment of another build: right magic, another layout number.
python3 - "/dev/shm/qpsock-stat.$$.7" <<'EOF'
import struct, sys
hdr = struct.pack("<QI", 0x5441545350535150, 999) + bytes(4096 - 12)
open(sys.argv[1], "wb").write(hdr)
EOF
rc=0
"$stat" -p $$ 2> "$tmp/err3" || rc=$?
[[ $rc -eq 1 ]] && grep -q "another build of libqpsock" "$tmp/err3" ||
	fail "other build: exit $rc, $(cat "$tmp/err3")"
rm -f "/dev/shm/qpsock-stat.$$.7"
rc=0
"$stat" -c 1 2> /dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "-c without -p: exit $rc, want 2 (usage)"

# --- leftover -----------------------------------------------------------
for p in "${pids[@]}"; do
	! ls /dev/shm/qpsock-stat."$p".* > /dev/null 2>&1 ||
		fail "segment of $p left in /dev/shm"
done

if [[ $fails -ne 0 ]]; then
	echo "test_stat_e2e: $fails failure(s)"
	exit 1
fi
echo "test_stat_e2e: ok"
