#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# build.sh [build-dir] [extra cmake args...] - configure with warnings as
# errors and build. build-dir defaults to "build" under the repository root;
# a relative build-dir is taken from the repository root as well.
#
# Environment: QPS_JOBS (default 2: the machines have 2 cores).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bdir=${1:-build}
if [[ $# -gt 0 ]]; then
	shift
fi
if [[ "$bdir" != /* ]]; then
	bdir="$root/$bdir"
fi
jobs=${QPS_JOBS:-2}

echo "build: configuring $bdir $*"
cmake -S "$root" -B "$bdir" -DQPS_ENABLE_WERROR=ON "$@"
echo "build: building $bdir with -j$jobs"
cmake --build "$bdir" -j "$jobs"
