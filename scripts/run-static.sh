#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run-static.sh [build-dir] - static analysis of src/, providers/, preload/:
# cppcheck and clang-tidy (checks in .clang-tidy) on every .c file there,
# with the flags the build uses (compile_commands.json). Prints each finding
# as "file:line: check: message", then a count per tool; exits 1 on any
# finding, 2 when it cannot run.
#
# build-dir defaults to "build-static"; a relative one is taken from the
# repository root. It is only configured, never built: the database is all
# the analysers need. Every provider is turned on there so that no file of
# providers/ goes unchecked. Findings and raw logs stay in build-dir/static/.
#
# Environment: QPS_JOBS (clang-tidy processes, default 2: the machines have
# 2 cores), CPPCHECK and CLANG_TIDY (the binaries to use).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bdir=${1:-build-static}
if [[ "$bdir" != /* ]]; then
	bdir="$root/$bdir"
fi
jobs=${QPS_JOBS:-2}
out="$bdir/static"

cppcheck=${CPPCHECK:-cppcheck}
if [[ -z "${CLANG_TIDY:-}" ]]; then
	if command -v clang-tidy-14 >/dev/null; then
		CLANG_TIDY=clang-tidy-14
	else
		CLANG_TIDY=clang-tidy
	fi
fi
for t in "$cppcheck" "$CLANG_TIDY"; do
	if ! command -v "$t" >/dev/null; then
		echo "run-static: $t not found (scripts/install-deps.sh installs it)" >&2
		exit 2
	fi
done

echo "run-static: configuring $bdir"
cmake -S "$root" -B "$bdir" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
	-DQPS_WITH_VERBS=ON -DQPS_WITH_PACKET=ON -DQPS_WITH_XDP=ON >/dev/null
db="$bdir/compile_commands.json"
mkdir -p "$out"
# The one generated source (the XDP program's bytes) must exist for the
# analysers to load the database.
if grep -q 'xdp_prog_obj\.c' "$db"; then
	cmake --build "$bdir" --target qps_xdp_prog_obj >/dev/null
fi

# The sources to check: every .c file under src/, providers/ and preload/,
# each of which must be in the database, or it would be analysed with
# wrong flags (or not at all). Not the XDP program (*.bpf.c): clang
# compiles it for the BPF target, with -Werror, outside the database.
find "$root/src" "$root/providers" "$root/preload" -name '*.c' \
	! -name '*.bpf.c' | sort >"$out/files"
sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' "$db" | sort -u >"$out/db-files"
missing=$(comm -23 "$out/files" "$out/db-files")
if [[ -n "$missing" ]]; then
	echo "run-static: not in $db (not part of the build?):" >&2
	echo "${missing//"$root"\//  }" >&2
	exit 2
fi
nfiles=$(wc -l <"$out/files")

# cppcheck. The one suppression-worthy pattern, QPS_ERRNO_GUARD (a variable
# read only by its cleanup handler), is marked "unused" in qps_int.h
# instead, so no --suppress is needed; a genuine false positive gets an
# inline "cppcheck-suppress id" comment saying why.
echo "run-static: cppcheck $("$cppcheck" --version | cut -d' ' -f2) on $nfiles files"
rc_cpp=0
"$cppcheck" --project="$db" --library=posix --library=gnu \
	--enable=warning,style,performance,portability \
	--inline-suppr --error-exitcode=1 --quiet -j "$jobs" \
	--file-filter="$root/src/*" --file-filter="$root/providers/*" \
	--file-filter="$root/preload/*" \
	--template='{file}:{line}: cppcheck-{id}: {message}' \
	2>"$out/cppcheck.log" || rc_cpp=$?
grep -E '^[^ ]+:[0-9]+: cppcheck-' "$out/cppcheck.log" |
	sed "s|^$root/||" | sort -u >"$out/cppcheck.txt" || true

# clang-tidy, one process per file, $jobs at a time, each with its own
# log (parallel writers would interleave). A run that fails (a file that
# does not compile, a crash) is a finding too, and does not stop the
# others. Warnings in a header (HeaderFilterRegex) come once per file
# including it: deduplicated.
tidy_one() {
	local f=$1 log rc=0

	log="$out/tidy/$(echo "${f#"$root"/}" | tr / _).log"
	"$CLANG_TIDY" -p "$bdir" --config-file="$root/.clang-tidy" --quiet \
		"$f" >"$log" 2>"$log.err" || rc=$?
	if [[ $rc -ne 0 ]]; then
		echo "$f:0:0: error: clang-tidy exited $rc, see $log.err" \
			"[clang-tidy-run]" >>"$log"
	fi
}
export -f tidy_one
export CLANG_TIDY root bdir out
echo "run-static: $("$CLANG_TIDY" --version | grep -o 'version [0-9.]*' |
	sed 's/version/clang-tidy/') on $nfiles files, $jobs at a time"
rm -rf "$out/tidy"
mkdir -p "$out/tidy"
# shellcheck disable=SC2016 # $1 is for the inner bash
xargs -P "$jobs" -n 1 bash -c 'tidy_one "$1"' tidy_one <"$out/files"
cat "$out"/tidy/*.log >"$out/clang-tidy.log"
# A message may span lines (the analyzer's padding report does); its check
# name ends the line that ends the message.
awk -v root="$root/" '
function emit(check) {
	if (!msg)
		return
	print loc ": " check ": " msg
	msg = ""
}
/^[^ :]+:[0-9]+:[0-9]+: (warning|error): / {
	emit("unknown")
	split($0, f, ":")
	loc = f[1] ":" f[2]
	if (index(loc, root) == 1)
		loc = substr(loc, length(root) + 1)
	msg = $0
	sub(/^[^ ]+ (warning|error): /, "", msg)
}
msg && /\[[A-Za-z0-9.,_-]+\]$/ {
	check = $0
	sub(/.*\[/, "", check)
	sub(/\]$/, "", check)
	if ($0 !~ /^[^ :]+:[0-9]+:[0-9]+: /)
		msg = msg " " $0
	sub(/ *\[[^]]*\]$/, "", msg)
	emit(check)
}
END { emit("unknown") }
' "$out/clang-tidy.log" | sort -u >"$out/clang-tidy.txt"

cat "$out/cppcheck.txt" "$out/clang-tidy.txt" | sort -t: -k1,1 -k2,2n \
	>"$out/findings.txt"
cat "$out/findings.txt"
n_cpp=$(wc -l <"$out/cppcheck.txt")
n_tidy=$(wc -l <"$out/clang-tidy.txt")
echo "run-static: cppcheck $n_cpp, clang-tidy $n_tidy finding(s) in" \
	"$nfiles files (list: $out/findings.txt)"

# cppcheck failing without a finding we could parse failed to run.
if [[ $n_cpp -eq 0 && $rc_cpp -ne 0 ]]; then
	echo "run-static: cppcheck exited $rc_cpp; see $out/cppcheck.log" >&2
	exit 2
fi
if [[ $n_cpp -ne 0 || $n_tidy -ne 0 ]]; then
	exit 1
fi
