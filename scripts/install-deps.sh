#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# install-deps.sh - install what qpsock's build and tests need on Debian 12.
#
# Idempotent: when every package is already installed it does nothing (no
# apt-get update, no root needed), so the other scripts can call it on every
# run. Otherwise it runs apt-get as root, through sudo when not root.
#
# Environment: QPS_SKIP_DEPS=1 skips the step entirely.
set -euo pipefail

# build-essential: gcc, g++ (header check), make, binutils (nm), libasan/ubsan
# cmake, pkg-config: configure; libibverbs-dev (+ mlx4dv.h), rdma-core,
# ibverbs-providers (libmlx4): verbs and the mlx4 direct path;
# libnl-*-dev: route resolution; libcunit1-dev: tests; iproute2: ip(8);
# libck-dev: Concurrency Kit's ck_ring, a peer in qps_bench prio;
# sockperf, procps (sysctl): test_packet's kernel peer and namespace set-up;
# netsniff-ng: trafgen, a peer in scripts/bench_packet.sh.
# perftest: ib_send_bw/ib_send_lat/raw_ethernet_bw run unmodified on the
# emu-backed libibverbs test double (tests/ibverbs_emu);
# clang (+ libclang-rt-14-dev: libFuzzer), valgrind, cppcheck, clang-tidy,
# spin: the reliability checks (fuzzing, memcheck, static analysis, model
# checking of the band ring and the owner hand-off).
# python3: scripts/check-api-doc.py (docs/api.md against the header);
# python3-matplotlib: scripts/plot_stat.py (qps_stat --record to PNGs);
# bsdutils: script(1), the pseudo-terminal test_stat_e2e.sh runs qps_stat in.
# libxdp-dev, libbpf-dev, xdp-tools (and clang above, for its BPF target):
# the xdp provider (docs/xdp.md).
# dnsmasq-base, bind9-dnsutils (dig), socat, ssmping, ffmpeg: real programs
# under qpsock-run (test_preload_programs).
# libpcap-dev: qps_dump's filter; tshark, tcpdump: test_dump_e2e.sh reads
# the captures back (tshark's setuid question answered "no" below).
PKGS=(
	build-essential
	cmake
	pkg-config
	rdma-core
	libibverbs-dev
	ibverbs-providers
	libnl-3-dev
	libnl-route-3-dev
	libcunit1-dev
	iproute2
	libck-dev
	sockperf
	procps
	netsniff-ng
	perftest
	clang
	libclang-rt-14-dev
	valgrind
	cppcheck
	clang-tidy
	spin
	python3
	python3-matplotlib
	bsdutils
	dnsmasq-base
	bind9-dnsutils
	socat
	ssmping
	ffmpeg
	libxdp-dev
	libbpf-dev
	xdp-tools
	libpcap-dev
	tshark
	tcpdump
)

if [[ "${QPS_SKIP_DEPS:-0}" == 1 ]]; then
	echo "install-deps: skipped (QPS_SKIP_DEPS=1)"
	exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	if [[ "$st" != installed ]]; then
		missing+=("$p")
	fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
	echo "install-deps: all ${#PKGS[@]} packages already installed"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: apt-get not found; install by hand: ${missing[*]}" >&2
	exit 1
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=(sudo)
	else
		echo "install-deps: missing ${missing[*]}; run as root or install sudo" >&2
		exit 1
	fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark (wireshark-common) asks whether non-root users may capture.
if command -v debconf-set-selections >/dev/null 2>&1; then
	echo "wireshark-common wireshark-common/install-setuid boolean false" |
		"${SUDO[@]}" debconf-set-selections
fi
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y --no-install-recommends "${missing[@]}"
echo "install-deps: done"
