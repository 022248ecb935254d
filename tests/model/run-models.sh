#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run-models.sh [--full] - model-check tests/model/*.pml with spin.
#
# Every check is one pan run with bounded depth (-m) and memory (MEMLIM):
#   safety  assertions and invalid end states, exhaustive
#   ltl     the model's "eventually" property (acceptance cycles)
# The correct models must pass; every mutant (a known mistake, -DMUT_*)
# and every reachability probe (-DREACH_*: asserts false on a path the
# proofs rely on) must fail, or the checks prove nothing. A search that
# hits the depth or memory bound counts as a failure, never as a pass.
#
# Prints one line per check: model, bounds, check, expected, result,
# states, depth, seconds. Exit 0 when every result is as expected, 1
# otherwise, 77 when spin or a C compiler is missing.
#
# --full adds the larger bounds recorded in docs/reliability.md (several
# minutes and up to 6 GB).
#
# Environment: QPS_MODEL_MEMLIM (MB, default 1536, 6144 with --full),
# QPS_MODEL_DEPTH (default 20000), CC (default cc).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
full=0
[[ "${1:-}" == "--full" ]] && full=1
memlim=${QPS_MODEL_MEMLIM:-1536}
((full)) && memlim=${QPS_MODEL_MEMLIM:-6144}
# At the default sizes compiling pan.c with -O2 costs more CPU than it
# saves; the --full checks pass -O2 themselves.
opt=-O0
depth=${QPS_MODEL_DEPTH:-20000}
cc=${CC:-cc}

if ! command -v spin >/dev/null || ! command -v "$cc" >/dev/null; then
	echo "run-models: SKIP: needs spin and a C compiler (apt-get install spin gcc)"
	exit 77
fi

work=$(mktemp -d /tmp/qps-model.XXXXXX)
trap 'rm -rf "$work"' EXIT

bad=0
total=0

# check MODEL "DEFINES" safety|ltl pass|fail [extra cc flags]
check() {
	local model=$1 defs=$2 mode=$3 want=$4 ccx=${5:-}
	local dir out got states dep t0 t1 secs ltl
	local -a pan_args=(-m"$depth")

	total=$((total + 1))
	dir="$work/$total"
	mkdir -p "$dir"
	cp "$here/$model.pml" "$dir/"
	ltl=$(sed -n 's/^ltl \([a-z_]*\) .*/\1/p' "$here/$model.pml" | head -1)
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	if ! (cd "$dir" && spin -a $defs "$model.pml" >spin.log 2>&1); then
		got=ERROR
	else
		if [[ $mode == safety ]]; then
			ccx="$ccx -DSAFETY -DNOCLAIM"
		else
			pan_args+=(-a -N "$ltl")
		fi
		# shellcheck disable=SC2086
		if ! (cd "$dir" && $cc $opt -w -DMEMLIM="$memlim" $ccx -o pan \
		      pan.c >cc.log 2>&1); then
			got=ERROR
		else
			(cd "$dir" && ./pan "${pan_args[@]}" >pan.log 2>&1)
			out="$dir/pan.log"
			if grep -q "errors: 0" "$out" &&
			   ! grep -qE "out of memory|max search depth too small|Search not completed" "$out"; then
				got=pass
			elif grep -qE "errors: [1-9]" "$out"; then
				got=fail
			else
				got=INCOMPLETE
			fi
		fi
	fi
	t1=$(date +%s.%N)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$dir/pan.log" 2>/dev/null | head -1)
	dep=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$dir/pan.log" 2>/dev/null | head -1)
	what=$(grep -m1 -E "^pan:1?:? ?(assertion violated|acceptance cycle|invalid end state)" \
		"$dir/pan.log" 2>/dev/null | sed 's/^pan:1\{0,1\}: *//; s/ (at depth.*//' | cut -c1-60)
	printf '%-10s %-28s %-6s want %-4s got %-10s states %-9s depth %-4s %6ss%s\n' \
		"$model" "${defs//-D/}" "$mode" "$want" "$got" "${states:-?}" \
		"${dep:-?}" "$secs" "${what:+ ($what)}"
	if [[ $got != "$want" ]]; then
		bad=$((bad + 1))
		echo "run-models: UNEXPECTED: $model $defs $mode; pan output follows"
		tail -n 30 "$dir/pan.log" 2>/dev/null || cat "$dir/spin.log" "$dir/cc.log"
	fi
}

ring_b="-DNPROD=2 -DNITEMS=2 -DCAP=2"
own_b="-DNPROD=2 -DNITEMS=2 -DCAP=2"

# MPSC ring: the proofs, then the mistakes they must catch.
check mpsc_ring "$ring_b" safety pass
check mpsc_ring "$ring_b" ltl pass
check mpsc_ring "-DNPROD=3 -DNITEMS=1 -DCAP=2" safety pass
check mpsc_ring "-DNPROD=2 -DNITEMS=3 -DCAP=4" safety pass
for m in MUT_PUBLISH_FIRST MUT_NO_SPACE_CHECK MUT_PLAIN_CLAIM \
	 MUT_CONSUME_EARLY REACH_FULL REACH_REFRESH REACH_PARTIAL REACH_WRAP; do
	check mpsc_ring "$ring_b -D$m" safety fail
done

# Owner hand-off.
check prio_owner "$own_b" safety pass
check prio_owner "$own_b" ltl pass
# With one item per producer no send has a previous one of its own: this
# run checks every producer's finished sends (ORDER_ALL), and the mutant
# after the loop shows that it can fail.
check prio_owner "-DNPROD=3 -DNITEMS=1 -DCAP=2 -DORDER_ALL" safety pass \
	"-DCOLLAPSE"
for m in MUT_NO_MISSED_RECHECK MUT_SKIP_RELEASE_PUBLISH MUT_PLAIN_FLAG \
	 MUT_PLAIN_TAKE MUT_RELAXED_BACKLOG MUT_LOCKED_NO_STATE \
	 MUT_LOCKED_NO_BACKLOG REACH_SKIP REACH_REDRAIN REACH_KICK_RUN \
	 REACH_BYPASS REACH_LINGER_HIT REACH_LOCKED_BYPASS; do
	check prio_owner "$own_b -D$m" safety fail
done
check prio_owner "-DNPROD=3 -DNITEMS=1 -DCAP=2 -DORDER_ALL -DMUT_LOCKED_NO_BACKLOG" \
	safety fail

# The send queues' two-sided lock (single-threaded contexts), the
# application's stores through a TSO store buffer.
check alock "" safety pass
check alock "-DNAPP=3 -DNLIB=2 -DNLIBR=2" safety pass
for m in MUT_NO_MEMBARRIER MUT_NO_WAIT MUT_APP_NO_CHECK \
	 MUT_APP_SLOW_KEEPS_IN MUT_LATE_CLEAR REACH_APP_SLOW REACH_LIB_WAITS; do
	check alock "-D$m" safety fail
done

# The same lock biased (multi-threaded contexts): two application threads
# that may own it, a library thread, every thread's stores through TSO.
check alock_bias "" safety pass
check alock_bias "-DRUN=2 -DNLIB=0" safety pass
for m in MUT_NO_MEMBARRIER MUT_NO_WAIT MUT_EARLY_APP_MUTEX MUT_OWNER_MOVES \
	 REACH_FAST REACH_REOPEN REACH_CLOSE_WAITS; do
	check alock_bias "-D$m" safety fail
done

# Three producers with two items each do not fit the hand-off model in
# 6 GB; it gets more stalls (kicks) and a larger ring instead.
if ((full)); then
	check mpsc_ring "-DNPROD=3 -DNITEMS=2 -DCAP=2" safety pass \
		"-DCOLLAPSE -O2"
	check mpsc_ring "-DNPROD=3 -DNITEMS=2 -DCAP=4" safety pass \
		"-DCOLLAPSE -O2"
	check prio_owner "-DNPROD=2 -DNITEMS=2 -DCAP=4" safety pass \
		"-DCOLLAPSE -O2"
	check prio_owner "-DNPROD=2 -DNITEMS=2 -DCAP=2 -DMAXSTALL=2" safety \
		pass "-DCOLLAPSE -O2"
	check prio_owner "-DNPROD=2 -DNITEMS=2 -DCAP=2 -DORDER_ALL" safety \
		pass "-DCOLLAPSE -O2"
	check alock "-DNAPP=4 -DNLIB=2 -DNLIBR=2" safety pass "-DCOLLAPSE -O2"
	check alock "-DNAPP=3 -DNLIB=3 -DNLIBR=2" safety pass "-DCOLLAPSE -O2"
	check alock_bias "-DNAPP=4" safety pass "-DCOLLAPSE -O2"
	check alock_bias "-DNAPP=4 -DRUN=2" safety pass "-DCOLLAPSE -O2"
	check alock_bias "-DNLIB=2" safety pass "-DCOLLAPSE -O2"
fi

echo "run-models: $((total - bad))/$total checks as expected"
((bad == 0))
