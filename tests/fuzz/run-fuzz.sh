#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run-fuzz.sh <build-dir> <seconds-per-harness> [harness...]
#
# Configures <build-dir> with clang and -DQPS_FUZZ=ON if it is not yet,
# builds the harnesses, then runs each (default: all six) for the given
# time, one at a time, on a copy of its seed corpus plus its crash
# regressions. Exits non-zero on the first crash, leak or timeout; the
# input is left in <build-dir>/fuzz-out/<harness>/ (crash-*, timeout-*,
# leak-*), which is where a new regression file comes from.
#
# Environment: QPS_JOBS (build jobs, default 2), QPS_FUZZ_ARGS (extra
# libFuzzer flags, e.g. -runs=10000000), QPS_FUZZ_NICE (default 10).
set -euo pipefail

if [[ $# -lt 2 ]]; then
	echo "usage: $0 <build-dir> <seconds-per-harness> [harness...]" >&2
	exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bdir=$(realpath -m "$1")
secs=$2
shift 2
harnesses=("$@")
if [[ ${#harnesses[@]} -eq 0 ]]; then
	harnesses=(fuzz_frames fuzz_emu_wire fuzz_api fuzz_ipfrag fuzz_stat fuzz_dump)
fi
jobs=${QPS_JOBS:-2}
nice_lvl=${QPS_FUZZ_NICE:-10}

if [[ ! -f "$bdir/CMakeCache.txt" ]] ||
   ! grep -q '^QPS_FUZZ:BOOL=ON' "$bdir/CMakeCache.txt"; then
	# -Werror stays off here: clang warns where gcc does not (the
	# gcc build is the warning gate); the fuzz build checks behaviour.
	CC=${CC:-clang} cmake -S "$root" -B "$bdir" -DQPS_FUZZ=ON \
		-DQPS_ENABLE_WERROR=OFF -DQPS_BUILD_EXAMPLES=OFF
fi
cmake --build "$bdir" -j "$jobs" --target "${harnesses[@]}"

# Wires of harness processes that died without cleaning up (a crash).
cleanup_shm() {
	local f pid
	for f in /dev/shm/qpsock-emu-fz-*; do
		[[ -e $f ]] || continue
		pid=${f##*-}
		if [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$f"
		fi
	done
}

status=0
for h in "${harnesses[@]}"; do
	out="$bdir/fuzz-out/$h"
	mkdir -p "$out/corpus"
	cp -n "$root/tests/fuzz/corpus/$h/"* "$out/corpus/" 2>/dev/null || true
	echo "run-fuzz: $h for ${secs}s"
	set +e
	# QPS_FUZZ_ARGS is a list of flags: split on purpose.
	# shellcheck disable=SC2086
	(cd "$out" && nice -n "$nice_lvl" "$bdir/tests/fuzz/$h" \
		-max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 \
		-print_final_stats=1 ${QPS_FUZZ_ARGS:-} \
		corpus "$root/tests/fuzz/regress/$h") > "$out/log" 2>&1
	rc=$?
	set -e
	cleanup_shm
	grep -E '^stat::|^Done|#[0-9]+[[:space:]]+DONE' "$out/log" | sed "s/^/  $h: /"
	if [[ $rc -ne 0 ]]; then
		echo "run-fuzz: $h FAILED (exit $rc); see $out/log" >&2
		grep -E 'ERROR|invariant|artifact' "$out/log" | head -5 >&2
		status=1
		break
	fi
done
exit $status
