#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test_cli.sh PROG... - every installed program speaks one option language:
# --help goes to stdout once (no line printed twice) and exits 0, names
# --provider and -d/--dev; an unknown option exits non-zero, saying so on
# stderr. Then qps_demo recv/send and qps_echo run on an emu wire with
# the long spellings only.
set -uo pipefail

wire="qpscli-$$"
tmp=$(mktemp -d)
fails=0
pids=()

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -f "/dev/shm/qpsock-emu-$wire"
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
}

demo=
echo_bin=
for prog in "$@"; do
	name=$(basename "$prog")
	case $name in
	qps_demo) demo=$prog ;;
	qps_echo) echo_bin=$prog ;;
	esac
	if ! "$prog" --help >"$tmp/help" 2>"$tmp/help.err"; then
		fail "$name --help: exit status $?"
	fi
	[[ -s "$tmp/help.err" ]] && fail "$name --help wrote to stderr"
	dup=$(grep -v '^[[:space:]]*$' "$tmp/help" | sort | uniq -d)
	[[ -n "$dup" ]] && fail "$name --help printed twice: $dup"
	grep -q -- '--provider' "$tmp/help" ||
		fail "$name --help does not name --provider"
	grep -qE -- '-d, --dev' "$tmp/help" ||
		fail "$name --help does not name -d, --dev"
	if "$prog" --no-such-option >/dev/null 2>"$tmp/bad.err"; then
		fail "$name accepted --no-such-option"
	fi
	grep -qiE 'usage|--help' "$tmp/bad.err" ||
		fail "$name: no usage or pointer to --help on stderr after a bad option"
done

if [[ -n "$demo" ]]; then
	"$demo" recv --provider emu --dev "$wire" --addr 198.18.0.41 \
		--port 9050 --count 3 >"$tmp/recv" 2>&1 &
	pids+=($!)
	for ((i = 0; i < 50; i++)); do
		grep -q 'listening on' "$tmp/recv" && break
		sleep 0.1
	done
	timeout 30 "$demo" send --provider emu --dev "$wire" \
		--addr 198.18.0.42 --dest 198.18.0.41 --port 9050 --count 3 \
		--burst 3 >"$tmp/send" 2>&1 || fail "qps_demo send: $(cat "$tmp/send")"
	if wait "${pids[0]}"; then
		pids=()
	else
		fail "qps_demo recv: $(cat "$tmp/recv")"
		pids=()
	fi
fi

if [[ -n "$echo_bin" ]]; then
	t0=$(date +%s%N)
	timeout 20 "$echo_bin" --provider emu --dev "$wire" \
		--addr 198.18.0.43 --port 11111 --seconds 1 \
		>"$tmp/echo" 2>&1 || fail "qps_echo long options: $(cat "$tmp/echo")"
	ms=$((($(date +%s%N) - t0) / 1000000))
	((ms >= 1000)) || fail "qps_echo --seconds 1 stopped after $ms ms"
fi

if ((fails)); then
	echo "test_cli: $fails failure(s)"
	exit 1
fi
echo "test_cli: PASS ($# programs)"
