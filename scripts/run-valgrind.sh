#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run-valgrind.sh <build-dir> [suite...] - run the CUnit suites of a normal
# (non-sanitizer) build under valgrind memcheck, two at a time:
#   valgrind --error-exitcode=1 --leak-check=full
#            --errors-for-leak-kinds=definite,indirect
#            --suppressions=tests/valgrind.supp
# A suite fails on any memcheck error, a definite or indirect leak, or its
# own failure. Prints one line per suite and a summary; exit 0 when all
# passed, 1 otherwise, 77 when valgrind is missing.
#
# Suites: every test_* executable under <build-dir>/tests except
#   test_packet       creates network namespaces and veth pairs and runs
#                     sockperf/qps_echo as other processes: its netns
#                     set-up dominates and the code it drives is the
#                     packet provider, not the core; it stays in the ASan
#                     run.
#   test_ibverbs_emu  checks that the libibverbs answering is the one in
#                     $LD_LIBRARY_PATH, which valgrind rewrites.
#   test_preload_fork starts its servers by exec'ing /proc/<pid>/exe,
#                     which under valgrind is valgrind's own tool.
#   test_peer_kill    re-executes /proc/self/exe as the process it kills,
#                     which under valgrind is valgrind's own tool.
# The *_verbs runs of the suites (through tests/verbs/run-on-shim.sh in a
# network namespace) are not repeated here: same suites, same core code.
# Sizes: QPS_TEST_PRIO_MSGS (test_prio's threaded runs) is lowered to
# 20000 unless set; QPS_TEST_WAKE_MS (test_endpoint's bound on a wake-up)
# is raised to 250. Environment: QPS_VALGRIND_JOBS (default 2),
# QPS_VALGRIND_TIMEOUT (s per suite, default 600).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ $# -lt 1 ]]; then
	echo "usage: $0 <build-dir> [suite...]" >&2
	exit 2
fi
bdir=$1
shift
[[ "$bdir" != /* ]] && bdir="$root/$bdir"
if ! command -v valgrind >/dev/null; then
	echo "run-valgrind: SKIP: valgrind not installed"
	exit 77
fi
if grep -qE "^QPS_SANITIZE:[A-Z]*=(address|thread)" \
	"$bdir/CMakeCache.txt" 2>/dev/null; then
	echo "run-valgrind: $bdir is a sanitizer build; use a plain one" >&2
	exit 2
fi

excluded="test_packet test_ibverbs_emu test_peer_kill test_preload_fork"
if [[ $# -gt 0 ]]; then
	suites=("$@")
else
	suites=()
	for f in "$bdir"/tests/test_* "$bdir"/tests/*/test_*; do
		n=$(basename "$f")
		[[ -x $f && -f $f ]] || continue
		[[ " $excluded " == *" $n "* ]] && continue
		suites+=("${f#"$bdir"/tests/}")
	done
fi
if [[ ${#suites[@]} -eq 0 ]]; then
	echo "run-valgrind: no test_* suites in $bdir/tests (built?)" >&2
	exit 1
fi

export QPS_TEST_PRIO_MSGS=${QPS_TEST_PRIO_MSGS:-20000}
# valgrind runs one thread at a time: a woken receiver waits its turn.
export QPS_TEST_WAKE_MS=${QPS_TEST_WAKE_MS:-250}
jobs=${QPS_VALGRIND_JOBS:-2}
tmo=${QPS_VALGRIND_TIMEOUT:-600}
logs=$(mktemp -d /tmp/qps-valgrind.XXXXXX)
export root bdir logs tmo

# run_one <path under tests/>: one suite, one summary line.
run_one() {
	local p=$1 s t0 t1 rc res errs defs
	s=$(basename "$p")
	t0=$(date +%s)
	(cd "$(dirname "$bdir/tests/$p")" &&
	 timeout "$tmo" valgrind -q --fair-sched=yes --error-exitcode=1 \
		--leak-check=full \
		--errors-for-leak-kinds=definite,indirect \
		--show-leak-kinds=definite,indirect \
		--suppressions="$root/tests/valgrind.supp" \
		--log-file="$logs/$s.vg.%p" "./$s" >"$logs/$s.out" 2>&1)
	rc=$?
	t1=$(date +%s)
	case $rc in
	0) res=pass ;;
	77) res=skip ;;
	124) res=TIMEOUT ;;
	*) res=FAIL ;;
	esac
	# First lines of memcheck reports (errors and counted leaks).
	errs=$(cat "$logs/$s".vg.* 2>/dev/null |
	       grep -cE "^==[0-9]+== [A-Z].*(Invalid|uninitialised|Mismatched|Syscall param|definitely lost|indirectly lost|Source and destination)")
	defs=$(grep -hE "^[[:space:]]+asserts" "$logs/$s.out" |
	       awk '{print $3 "/" $4}')
	printf 'valgrind %-16s %-7s %4ss  memcheck reports %s  asserts run/passed %s\n' \
		"$s" "$res" "$((t1 - t0))" "$errs" "${defs:-?}"
	[[ $res == pass || $res == skip ]] && return 0
	echo "---- $s: valgrind log"
	cat "$logs/$s".vg.* 2>/dev/null | head -n 80
	echo "---- $s: output (tail)"
	tail -n 20 "$logs/$s.out"
	return 1
}
export -f run_one

start=$(date +%s)
printf '%s\n' "${suites[@]}" |
	xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} >"$logs/summary" 2>&1
rc=$?
cat "$logs/summary"
nfail=$(grep -c "^valgrind .* \(FAIL\|TIMEOUT\)" "$logs/summary")
echo "run-valgrind: ${#suites[@]} suites, $nfail failed," \
     "$(($(date +%s) - start))s (excluded: $excluded)"
rm -rf "$logs"
# Valgrind keeps the client's RLIMIT_NOFILE itself: a descriptor the
# kernel returns at or above it is closed again and the call fails with
# EMFILE, after O_CREAT made the file. test_exhaust lowers the limit, so
# its stats segment open leaves an empty file the kernel alone never
# would: removed here once its process is gone.
for f in /dev/shm/qpsock-stat.*; do
	[[ -f $f && ! -s $f ]] || continue
	pid=${f#/dev/shm/qpsock-stat.}
	pid=${pid%%.*}
	kill -0 "$pid" 2>/dev/null || rm -f "$f"
done
[[ $rc -eq 0 && $nfail -eq 0 ]]
