# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034,SC2154
# (variables are the caller's: it sets root and extra_rm, reads the rest)
#
# bench_netns.sh - sourced by the veth benchmarks (bench_packet.sh,
# bench_xdp.sh), not run: their common options, checks and the veth pair
# between two network namespaces. The caller sets set -euo pipefail and
# root (the repository) first.
#
#   bench_start TAG WHY SECS "$@"
#                          --json --secs S (default SECS) --rounds R
#                          (default 3) --build DIR into json, secs, rounds,
#                          build; bench and echo_bin. Exits unless root
#                          (77) and both binaries are built; TAG and WHY
#                          make the message
#   bench_netns_up A B VA VB
#                          namespaces A and B, veth VA (10.77.0.1,
#                          02:77:00:00:00:01) to VB (10.77.0.2, ...:02),
#                          static neighbours in A, $tmp, and a cleanup trap
#                          that kills ${pids[@]}, deletes both namespaces
#                          and removes $tmp and ${extra_rm[@]} (if set)
#   median, field          a column's median; key=value's value from stdin

bench_start() { # tag why secs args...
	local tag=$1 why=$2 b

	secs=$3
	shift 3
	json=0
	rounds=3
	build=$root/build
	while [[ $# -gt 0 ]]; do
		case $1 in
		--json) json=1 ;;
		--secs) secs=$2; shift ;;
		--rounds) rounds=$2; shift ;;
		--build) build=$2; shift ;;
		*) echo "usage: $0 [--json] [--secs S] [--rounds R] [--build DIR]" >&2
		   exit 2 ;;
		esac
		shift
	done
	bench=$build/bench/qps_bench
	echo_bin=$build/examples/qps_echo
	if [[ $(id -u) -ne 0 ]]; then
		echo "$tag: needs root ($why)" >&2
		exit 77
	fi
	for b in "$bench" "$echo_bin"; do
		[[ -x $b ]] || { echo "$tag: $b not built" >&2; exit 1; }
	done
}

bench_netns_cleanup() {
	local p

	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	ip netns del "$A" 2>/dev/null || true
	ip netns del "$B" 2>/dev/null || true
	rm -rf "$tmp" ${extra_rm[@]+"${extra_rm[@]}"}
}

# The caller's names carry its PID, so that two runs do not collide.
bench_netns_up() { # A B VA VB
	A=$1; B=$2; VA=$3; VB=$4
	tmp=$(mktemp -d)
	pids=()
	trap bench_netns_cleanup EXIT
	trap 'exit 130' INT TERM

	ip netns add "$A"; ip netns add "$B"
	ip link add "$VA" netns "$A" type veth peer name "$VB" netns "$B"
	ip -n "$A" link set "$VA" address 02:77:00:00:00:01
	ip -n "$B" link set "$VB" address 02:77:00:00:00:02
	for ns in "$A" "$B"; do
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		ip -n "$ns" link set lo up
	done
	ip -n "$A" addr add 10.77.0.1/24 dev "$VA"
	ip -n "$B" addr add 10.77.0.2/24 dev "$VB"
	ip -n "$A" link set "$VA" up; ip -n "$B" link set "$VB" up
	ip -n "$A" neigh replace 10.77.0.99 lladdr 02:77:00:00:00:99 dev "$VA" nud permanent
	ip -n "$A" neigh replace 10.77.0.2 lladdr 02:77:00:00:00:02 dev "$VA" nud permanent
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print 0 }'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
