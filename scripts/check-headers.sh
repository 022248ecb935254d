#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check-headers.sh - the public header must compile alone, as C and as C++,
# with no warnings; src/libqpsock.map must export exactly the functions
# it declares; and docs/api.md must agree with it (check-api-doc.py).
#
# Environment: CC (default gcc), CXX (default g++; skipped if absent).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
hdr="$root/include/qpsock/qpsock.h"
map="$root/src/libqpsock.map"
cc=${CC:-gcc}
cxx=${CXX:-g++}
fail=0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A unit that includes the header twice (include guard) and nothing else.
printf '#include <qpsock/qpsock.h>\n#include <qpsock/qpsock.h>\n' > "$tmp/twice.c"
cp "$tmp/twice.c" "$tmp/twice.cc"

run() {
	local what=$1
	shift
	if "$@"; then
		echo "check-headers: ok    $what"
	else
		echo "check-headers: FAIL  $what" >&2
		fail=1
	fi
}

cwarn=(-fsyntax-only -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
	-Wmissing-prototypes -Wundef)
run "C, header alone" \
	"$cc" "${cwarn[@]}" -x c "$hdr"
for std in c99 c11 gnu11 c17; do
	run "C -std=$std -pedantic, included twice" \
		"$cc" "${cwarn[@]}" -std="$std" -pedantic -I "$root/include" \
		"$tmp/twice.c"
done

if command -v "$cxx" >/dev/null 2>&1; then
	cxxwarn=(-fsyntax-only -Wall -Wextra -Werror -Wshadow -Wundef)
	run "C++, header alone" \
		"$cxx" "${cxxwarn[@]}" -x c++ "$hdr"
	for std in c++11 c++17; do
		run "C++ -std=$std -pedantic, included twice" \
			"$cxx" "${cxxwarn[@]}" -std="$std" -pedantic \
			-I "$root/include" "$tmp/twice.cc"
	done
else
	echo "check-headers: skip  C++ ($cxx not found)"
fi

# Every function the header declares, and only those, in the version script.
if [[ -f "$map" ]]; then
	"$cc" -E -P -x c "$hdr" |
		grep -oE '\bqps_[a-z0-9_]+[[:space:]]*\(' |
		sed -E 's/[[:space:]]*\($//' | sort -u > "$tmp/header.syms"
	sed -e 's,/\*.*\*/,,g' -e 's,#.*,,' "$map" | tr -s ' \t;{}' '\n' |
		grep -E '^qps_[a-z0-9_]+$' | sort -u > "$tmp/map.syms"
	if diff -u "$tmp/header.syms" "$tmp/map.syms" > "$tmp/diff"; then
		echo "check-headers: ok    libqpsock.map matches qpsock.h" \
			"($(wc -l < "$tmp/header.syms") functions)"
	else
		echo "check-headers: FAIL  libqpsock.map differs from qpsock.h" \
			"(- header only, + map only):" >&2
		tail -n +3 "$tmp/diff" >&2
		fail=1
	fi
else
	echo "check-headers: FAIL  $map missing" >&2
	fail=1
fi

# docs/api.md states the same prototypes, errors and versions.
if python3 "$root/scripts/check-api-doc.py" "$root"; then
	echo "check-headers: ok    docs/api.md matches qpsock.h"
else
	echo "check-headers: FAIL  docs/api.md differs from qpsock.h" >&2
	fail=1
fi

exit "$fail"
