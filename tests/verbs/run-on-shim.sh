#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run-on-shim.sh SHIM_DIR TEST [ARGS...] - run a CUnit suite on the verbs
# provider over the libibverbs test double (tests/ibverbs_emu), in a
# private network namespace that holds the double's "RoCE netdev":
#
#   qpsv0   one end of a veth pair (the kernel here has veth but no
#           dummy), up, 198.19.255.254/15, which routes emu's
#           198.18.0.0/15 through it. Its peer qpsv1 is up with no
#           address: ARP for an unknown neighbour goes out and is never
#           answered, as for an absent host.
#           The double names it in GID 0 (ndev_ifindex) and publishes a
#           permanent neighbour entry (port IPv4 -> port MAC) per opened
#           device, which is what the verbs provider resolves through.
#
# Exit: the suite's status; 77 (skip) without root or without the double.
# The namespace, the veth pair and its neighbours vanish with the last
# process in it; emu wires the suite leaves behind are removed at exit.
set -euo pipefail

if [[ $# -lt 2 ]]; then
	echo "usage: $0 SHIM_DIR TEST [ARGS...]" >&2
	exit 2
fi
shim=$1
shift

if [[ $(id -u) -ne 0 ]]; then
	echo "SKIP: $(basename "$1") on verbs needs root (a private network" \
	     "namespace with a veth netdev)"
	exit 77
fi
if [[ ! -e "$shim/libibverbs.so.1" ]]; then
	echo "SKIP: the libibverbs test double is not built" \
	     "($shim/libibverbs.so.1 is missing)"
	exit 77
fi
if [[ ! -x "$1" ]]; then
	echo "$0: $1: not an executable" >&2
	exit 2
fi

if [[ "${QPS_SHIM_NETNS:-}" != 1 ]]; then
	if ! command -v unshare >/dev/null || ! command -v ip >/dev/null; then
		echo "SKIP: needs unshare (util-linux) and ip (iproute2)"
		exit 77
	fi
	exec unshare --net env QPS_SHIM_NETNS=1 bash "$0" "$shim" "$@"
fi

# In the private namespace from here on.
ndev=qpsv0
wire="verbs-shim-$$"
tpid=
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
	rm -f "/dev/shm/qpsock-emu-$wire"
	# The suites name their wires t-<tag>-<pid>; a suite that fails
	# fatally leaves its ports, and so its wires, behind.
	if [[ -n "$tpid" ]]; then
		rm -f /dev/shm/qpsock-emu-t-*-"$tpid"
	fi
}
trap cleanup EXIT

ip link set lo up
ip link add "$ndev" type veth peer name "${ndev%0}1"
ip link set "${ndev%0}1" up
ip link set "$ndev" up
ip addr add 198.19.255.254/15 dev "$ndev"

export QPS_PROVIDER=verbs
export QPS_IBV_EMU_NETDEV="$ndev"
export QPS_EMU_WIRE="$wire"
export LD_LIBRARY_PATH="$shim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# An unknown neighbour never answers on the veth: fail fast.
export QPS_VERBS_RESOLVE_MS="${QPS_VERBS_RESOLVE_MS:-300}"

echo "run-on-shim: $(basename "$1") on verbs over $shim/libibverbs.so.1," \
     "netdev $ndev (veth) in a private netns"
status=0
"$@" &
tpid=$!
wait "$tpid" || status=$?
exit "$status"
