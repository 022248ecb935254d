#!/bin/sh
# SPDX-License-Identifier: MIT
#
# abi-check.sh SHIM [SYSTEM_LIB] - the emulated libibverbs exports exactly
# what the system one does: the same SONAME, and the same dynamic symbols
# (name, version node, hidden or default, function or object). Prints the
# differences; 77 when there is no system libibverbs to compare with.
set -eu
shim=$1
sys=${2:-/usr/lib/x86_64-linux-gnu/libibverbs.so.1}
if [ ! -r "$sys" ] || ! command -v objdump >/dev/null; then
	echo "abi-check: no $sys or no objdump, skipped"
	exit 77
fi

syms() {
	# "<DF|DO> <version, parenthesised when hidden> <name>"
	objdump -T "$1" | awk 'NF >= 2 && $0 !~ /\*UND\*/ &&
		$(NF-1) ~ /IBVERBS|QPS|qps|GLIBC|Base/ {
		v = $(NF-1); t = ($0 ~ / DO /) ? "DO" : "DF"
		print t, v, $NF }' | grep -v 'GLIBC' | sort
}
soname() {
	objdump -p "$1" | awk '$1 == "SONAME" { print $2 }'
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
syms "$sys" >"$tmp/sys"
syms "$shim" >"$tmp/shim"
status=0
if [ "$(soname "$sys")" != "$(soname "$shim")" ]; then
	echo "abi-check: SONAME $(soname "$shim"), want $(soname "$sys")"
	status=1
fi
if ! diff -u "$tmp/sys" "$tmp/shim" >"$tmp/diff"; then
	echo "abi-check: exported symbols differ (- system, + emulated):"
	grep '^[-+][^-+]' "$tmp/diff"
	status=1
fi
n=$(wc -l <"$tmp/shim")
[ $status = 0 ] &&
	echo "abi-check: $n symbols, same names, versions, kinds as $sys"
# Nothing of qpsock may leak: every exported name is a libibverbs one.
if objdump -T "$shim" | grep -v '\*UND\*' | grep -q ' qps_'; then
	echo "abi-check: qpsock internals exported:"
	objdump -T "$shim" | grep -v '\*UND\*' | grep ' qps_'
	status=1
fi
exit $status
