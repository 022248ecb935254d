#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2317 # functions run indirectly (trap, step)
#
# run-tests.sh - everything CI checks, in order:
#   deps        scripts/install-deps.sh
#   headers     scripts/check-headers.sh (C and C++, version script vs header)
#   static      scripts/run-static.sh build-static (cppcheck + clang-tidy on
#               src/ and providers/; fails on any finding)
#   build       scripts/build.sh build (-Werror)
#   symbols     libqpsock.so exports exactly the header's functions
#   ctest       ctest --output-on-failure in build
#   build-asan  scripts/build.sh build-asan -DQPS_SANITIZE=address (ASan+UBSan)
#   ctest-asan  ctest --output-on-failure in build-asan
#   build-tsan  build-tsan -DQPS_SANITIZE=thread, only the suites whose
#               receive paths race on purpose (test_mcast), the
#               lockless send queues (test_prio), the futex mutex
#               of the send queues and rx.lock (test_mutex), the doorbell
#               flusher thread (test_doorbell) and concurrent senders
#               on one flow table (test_txq_e2e)
#   ctest-tsan  those suites under ThreadSanitizer
#   install     cmake --install into a temporary prefix, then a consumer
#               built with find_package(qpsock) and one with pkg-config
#   valgrind    scripts/run-valgrind.sh build (unit suites under memcheck)
#   fuzz        tests/fuzz/run-fuzz.sh build-fuzz 30 (each libFuzzer
#               harness for 20 s, clang, on its corpus + regressions)
#   demo        scripts/run-demo.sh (two processes on an emu wire)
#   soak        build/bench/qps_soak --seconds 60 (3 processes x 2 threads
#               on one emu wire, every flow reconciled; reliability.md)
# A failed step does not stop independent later steps; the exit status is
# non-zero if any step failed, and the last line is a plain summary.
#
# Environment: QPS_SKIP_DEPS=1, QPS_JOBS (build jobs, default 2),
# QPS_FUZZ_SECONDS (per harness, default 20), QPS_SOAK_SECONDS (default 60),
# QPS_CTEST_JOBS (default 1), QPS_CTEST_BUDGET (seconds per ctest run,
# default 600), ASAN_OPTIONS / UBSAN_OPTIONS (defaults below).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

ctest_jobs=${QPS_CTEST_JOBS:-1}
ctest_budget=${QPS_CTEST_BUDGET:-600}
start=$(date +%s)
tmp=$(mktemp -d)
# emu wires of the install check, removed on exit (steps run in subshells).
wire_cmake="qpsck-$$-c"
wire_pc="qpsck-$$-p"
wire_readme="qpsck-$$-r"
wires=("$wire_cmake" "$wire_pc" "$wire_readme")
passed=()
failed=()
skipped=()

cleanup() {
	local w
	for w in "${wires[@]}"; do
		rm -f "/dev/shm/qpsock-emu-$w" "/dev/shm/qpsock-emu-$w".* \
			"/dev/shm/qpsock-emu-$w"-*
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# step NAME FUNCTION: run FUNCTION with errexit in a subshell and record it.
step() {
	local name=$1 t0 rc
	shift
	echo
	echo "==== $name ===="
	t0=$(date +%s)
	set +e
	(set -e; "$@")
	rc=$?
	set -e
	if [[ $rc -eq 0 ]]; then
		passed+=("$name")
		echo "==== $name: ok ($(($(date +%s) - t0))s) ===="
	else
		failed+=("$name")
		echo "==== $name: FAILED (exit $rc, $(($(date +%s) - t0))s) ====" >&2
	fi
	return 0
}

skip() {
	skipped+=("$1")
	echo
	echo "==== $1: skipped ($2) ===="
}

ok() {
	local s
	for s in "${passed[@]}"; do
		[[ "$s" == "$1" ]] && return 0
	done
	return 1
}

header_functions() {
	"${CC:-gcc}" -E -P -x c include/qpsock/qpsock.h |
		grep -oE '\bqps_[a-z0-9_]+[[:space:]]*\(' |
		sed -E 's/[[:space:]]*\($//' | sort -u
}

check_symbols() {
	local lib
	lib=$(find build -name 'libqpsock.so' -print -quit)
	if [[ -z "$lib" ]]; then
		echo "symbols: libqpsock.so not found under build/" >&2
		return 1
	fi
	header_functions > "$tmp/header.syms"
	# Defined dynamic symbols other than the version node itself.
	nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' |
		sort -u > "$tmp/lib.raw"
	if grep -vE '@@QPSOCK_0\.[0-9]+$' "$tmp/lib.raw" > "$tmp/unversioned"; then
		echo "symbols: exported outside a QPSOCK_0.x version:" >&2
		cat "$tmp/unversioned" >&2
		return 1
	fi
	sed 's/@.*//' "$tmp/lib.raw" | sort -u > "$tmp/lib.syms"
	if ! diff -u "$tmp/header.syms" "$tmp/lib.syms" > "$tmp/sym.diff"; then
		echo "symbols: exports differ from qpsock.h (- header only, + library only):" >&2
		tail -n +3 "$tmp/sym.diff" >&2
		return 1
	fi
	echo "symbols: $lib exports the $(wc -l < "$tmp/lib.syms") functions of qpsock.h"
}

run_ctest() {
	local bdir=$1
	# timeout signals ctest's whole process group, test children included.
	timeout --kill-after=30 "$ctest_budget" \
		ctest --test-dir "$bdir" --output-on-failure -j "$ctest_jobs"
}

# A trivial sanitized program must run here first; LeakSanitizer needs
# ptrace-like rights that some containers lack, and then only leak checks
# are turned off (with a message), not the sanitizers.
asan_env() {
	local probe=$tmp/asan-probe
	printf 'int main(void) { return 0; }\n' > "$probe.c"
	"${CC:-gcc}" -fsanitize=address,undefined "$probe.c" -o "$probe"
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	if "$probe" > "$tmp/asan-probe.log" 2>&1; then
		return 0
	fi
	if ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" "$probe" > /dev/null 2>&1; then
		echo "ctest-asan: LeakSanitizer does not work here; running with detect_leaks=0:"
		sed 's/^/  /' "$tmp/asan-probe.log"
		export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
		return 0
	fi
	echo "ctest-asan: a trivial ASan program fails on this machine:" >&2
	sed 's/^/  /' "$tmp/asan-probe.log" >&2
	echo "  (on kernels with vm.mmap_rnd_bits > 28, try: sysctl vm.mmap_rnd_bits=28)" >&2
	return 1
}

ctest_asan() {
	asan_env
	echo "ASAN_OPTIONS=$ASAN_OPTIONS"
	echo "UBSAN_OPTIONS=$UBSAN_OPTIONS"
	# Instrumented code: a woken thread takes longer to run again.
	QPS_TEST_WAKE_MS=${QPS_TEST_WAKE_MS:-50} run_ctest build-asan
}

# ThreadSanitizer: only the suites that race on purpose are built and run.
# No -Werror here: GCC warns that TSan does not model
# atomic_thread_fence (the -Werror build above checks warnings).
tsan_suites=(test_mcast test_prio test_mutex test_doorbell test_txq_e2e
	test_prio_e2e test_ud test_ud_addr test_qp_error test_dump)
tsan_build() {
	cmake -S . -B build-tsan -DQPS_SANITIZE=thread \
		-DCMAKE_BUILD_TYPE=Debug -DQPS_ENABLE_WERROR=OFF
	cmake --build build-tsan -j "${QPS_JOBS:-2}" \
		--target "${tsan_suites[@]}"
}

ctest_tsan() {
	local probe=$tmp/tsan-probe re
	printf 'int main(void) { return 0; }\n' > "$probe.c"
	"${CC:-gcc}" -fsanitize=thread "$probe.c" -o "$probe"
	if ! "$probe" > "$tmp/tsan-probe.log" 2>&1; then
		echo "ctest-tsan: a trivial TSan program fails here:" >&2
		sed 's/^/  /' "$tmp/tsan-probe.log" >&2
		echo "  (on kernels with vm.mmap_rnd_bits > 28, try: sysctl vm.mmap_rnd_bits=28)" >&2
		return 1
	fi
	export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
	echo "TSAN_OPTIONS=$TSAN_OPTIONS"
	re="^($(IFS='|'; echo "${tsan_suites[*]}"))\$"
	timeout --kill-after=30 "$ctest_budget" \
		ctest --test-dir build-tsan --output-on-failure -R "$re"
}

install_check() {
	local prefix=$tmp/prefix libdir pc pcflags
	cmake --install build --prefix "$prefix"
	libdir=$(dirname "$(find "$prefix" -name 'libqpsock.so' -print -quit)")
	if [[ ! -f "$libdir/libqpsock.so" ]]; then
		echo "install: no libqpsock.so under $prefix" >&2
		return 1
	fi
	test -f "$prefix/include/qpsock/qpsock.h"
	test -f "$libdir/pkgconfig/qpsock.pc"
	test -f "$libdir/cmake/qpsock/qpsockConfig.cmake"
	echo "install: ok: $prefix (libdir ${libdir#"$prefix"/})"

	# 0. Installed programs find the library with no loader help.
	local prog
	for prog in qps_send_bw qps_send_lat qps_stat qps_demo qps_echo; do
		if env -u LD_LIBRARY_PATH ldd "$prefix/bin/$prog" |
			grep 'not found'; then
			echo "install: $prog does not find its libraries" >&2
			return 1
		fi
	done
	echo "install: programs run from $prefix/bin without LD_LIBRARY_PATH"
	# The preload finds libqpsock beside it; qpsock-run finds the preload.
	if env -u LD_LIBRARY_PATH ldd "$libdir/libqpsock-preload.so" |
		grep 'not found'; then
		echo "install: libqpsock-preload.so does not find libqpsock" >&2
		return 1
	fi
	env -u LD_LIBRARY_PATH "$prefix/bin/qpsock-run" true
	echo "install: qpsock-run runs a program with the installed preload"

	# 1. CMake consumer: find_package(qpsock) + qpsock::qpsock.
	cmake -S tests/consumer-check -B "$tmp/consumer-cmake" \
		-DCMAKE_PREFIX_PATH="$prefix"
	cmake --build "$tmp/consumer-cmake"
	LD_LIBRARY_PATH="$libdir" "$tmp/consumer-cmake/consumer" "$wire_cmake"

	# 2. pkg-config consumer: qpsock.pc is relative to its own location,
	# so the staged prefix needs no rewriting.
	pc="$libdir/pkgconfig/qpsock.pc"
	# shellcheck disable=SC2016 # a literal ${pcfiledir}
	grep -q '^prefix=${pcfiledir}/' "$pc"
	export PKG_CONFIG_PATH="$libdir/pkgconfig"
	pkg-config --exists --print-errors qpsock
	pcflags=$(pkg-config --cflags --libs qpsock)
	echo "install: pkg-config --cflags --libs qpsock: $pcflags"
	# shellcheck disable=SC2086 # pcflags is a list of words
	"${CC:-cc}" -Wall -Wextra -Werror -o "$tmp/consumer-pc" \
		tests/consumer-check/main.c $pcflags
	LD_LIBRARY_PATH="$libdir" "$tmp/consumer-pc" "$wire_pc"

	# 3. The README's program, as printed, through pkg-config.
	awk '/^## Using it/ { on = 1 } on && /^```c$/ { inc = 1; next }
	     inc && /^```$/ { exit } inc' README.md > "$tmp/readme.c"
	# shellcheck disable=SC2086 # pcflags is a list of words
	"${CC:-cc}" -Wall -Wextra -Werror -o "$tmp/readme" "$tmp/readme.c" \
		$pcflags
	QPS_DEV="$wire_readme" LD_LIBRARY_PATH="$libdir" "$tmp/readme"
}

step deps bash scripts/install-deps.sh
step headers bash scripts/check-headers.sh
step static bash scripts/run-static.sh build-static
step build bash scripts/build.sh build
if ok build; then
	step symbols check_symbols
	step ctest run_ctest build
	step install install_check
else
	skip symbols "build failed"
	skip ctest "build failed"
	skip install "build failed"
fi
step build-asan bash scripts/build.sh build-asan \
	-DQPS_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug
if ok build-asan; then
	step ctest-asan ctest_asan
else
	skip ctest-asan "build-asan failed"
fi
step build-tsan tsan_build
if ok build-tsan; then
	step ctest-tsan ctest_tsan
else
	skip ctest-tsan "build-tsan failed"
fi
if ok build; then
	step valgrind bash scripts/run-valgrind.sh build
else
	skip valgrind "build failed"
fi
step fuzz bash tests/fuzz/run-fuzz.sh build-fuzz "${QPS_FUZZ_SECONDS:-20}"
if ok build; then
	step demo env QPS_SKIP_DEPS=1 bash scripts/run-demo.sh
	step soak build/bench/qps_soak --seconds "${QPS_SOAK_SECONDS:-60}"
else
	skip demo "build failed"
	skip soak "build failed"
fi

elapsed=$(($(date +%s) - start))
echo
if [[ ${#failed[@]} -eq 0 && ${#skipped[@]} -eq 0 ]]; then
	echo "run-tests: PASS: ${#passed[@]} steps (${passed[*]}) in ${elapsed}s"
	exit 0
fi
echo "run-tests: FAIL: failed: ${failed[*]:-none}; skipped: ${skipped[*]:-none}; passed: ${passed[*]:-none} (${elapsed}s)"
exit 1
