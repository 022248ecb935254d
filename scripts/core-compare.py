#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compare two builds' `qps_bench core` side by side, in one run.

usage: scripts/core-compare.py BEFORE AFTER [--runs N] [--case C ...]
                               [--csum hw|sw] [--instr] [--json] [--single]
                               [--before-env VAR=VALUE ...]

BEFORE and AFTER are qps_bench binaries (each build's own, linked with its
own library). For every case the two run alternately, N times each (5 by
default), so that a change in the machine's load falls on both; the
table gives each build's best and median run and after/before of the
best. Cases default to all of them; a case one binary does not know (an
older build has no device floors) is run on the other alone, "-" for
the missing side.

--instr adds instructions per datagram from callgrind (valgrind must be
installed): `--toggle-collect=bc_loop`, one round of 200 ms, the loop's
instructions over its datagrams (`dgrams_all`), and how many of them are
the null provider's own functions (callgrind_annotate; the instructions a
NIC would spend instead of the host). No other load moves that
count; on a shared or virtual machine it is the figure to trust, the wall
clock the one to sanity-check it with.

Every row carries the load average range its runs saw: quote figures
measured below 1.5 only (one benchmark thread alone makes it 1.0).

With --csum sw, a BEFORE older than checksum offload (no --csum option:
its core computed every checksum) is run without the option.

--json prints one object per case ("bench":"core_compare") instead of
the table.

--single compares thread modes instead of builds: AFTER runs each case's
`_single` twin (a single-threaded context, docs/api.md "Thread mode"),
BEFORE the case itself; give the same binary twice. Cases default to
those that have a twin.

--before-env VAR=VALUE sets an environment variable for BEFORE's runs
only: with the same binary twice, `--before-env QPS_THREAD_MODE=mutex`
compares plain locks with the default biased ones (docs/api.md "Thread
mode"; a `_single` case sets its mode itself and is not moved by it).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

CASES = ["send_connected_b1", "send_connected_b32", "sendto_b1",
         "sendmmsg_b32", "sendmmsg_connected_b32", "send_bands_2thr",
         "recv_unicast", "recv_mcast_1",
         "recv_mcast_4", "device_floor_b1", "device_floor_b32",
         "device_floor_b32_locks", "send_connected_b1_single",
         "send_connected_b32_single", "sendto_b1_single",
         "sendmmsg_b32_single", "device_floor_b32_locks_single"]

NULL_SRC = re.compile(r"\s(\S*/)?providers/null/[^/\s]+:")


def core_run(bench, case, csum, env):
    """One `qps_bench core` run of @case: its JSON object, or None when
    the binary does not know the case or the run failed."""
    cmd = [bench, "core", "--json", "--case", case, "--csum", csum]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, check=False, env=env)
    if p.returncode == 2 and csum == "sw" and "--csum" not in p.stderr:
        # A build older than checksum offload: its core computed every
        # checksum, which is what sw measures.
        p = subprocess.run(cmd[:-2], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, check=False,
                           env=env)
    if p.returncode != 0:
        return None
    for line in p.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("case") == case:
            return rec
    return None


def instr_per_dgram(bench, case, csum, env):
    """Callgrind's count of bc_loop's instructions per datagram."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
               "--toggle-collect=bc_loop", bench, "core", "--json", "--case",
               case, "--ms", "200", "--rounds", "1", "--csum", csum]
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, check=False,
                           env=env)
        if p.returncode != 0:
            return None
        rec = None
        for line in p.stdout.splitlines():
            if line.startswith("{") and '"case"' in line:
                rec = json.loads(line)
        total = None
        with open(out) as f:
            for line in f:
                if line.startswith("totals:"):
                    total = int(line.split()[1])
        if not rec or not total or not rec.get("dgrams_all"):
            return None
        return (total / rec["dgrams_all"],
                null_instr(out) / rec["dgrams_all"])


def null_instr(out):
    """The null provider's own instructions in callgrind file @out: its
    functions' exclusive counts (not the libc calls they make), which a
    NIC would not spend on the host."""
    p = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100",
                        out], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True, check=False)
    n = 0
    for line in p.stdout.splitlines():
        f = line.split()
        # Files are named relative to the working directory when they
        # are below it, absolute otherwise.
        if len(f) >= 2 and NULL_SRC.search(line):
            try:
                n += int(f[0].replace(",", ""))
            except ValueError:
                pass
    return n


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


def side_case(args, side, case):
    """The case @side runs: with --single, AFTER runs the twin."""
    return case + "_single" if args.single and side == "after" else case


def side_env(args, side):
    """The environment @side's runs get."""
    env = dict(os.environ)
    if side == "before":
        for kv in args.before_env or []:
            k, _, v = kv.partition("=")
            env[k] = v
    return env


def compare(args, case):
    """Alternated runs of @case; a side whose binary does not run it
    (an older build without a newer case) is left out of the row."""
    runs = {"before": [], "after": []}
    sides = ["before", "after"]
    for _ in range(args.runs):
        for side in list(sides):
            rec = core_run(getattr(args, side),
                           side_case(args, side, case), args.csum,
                           side_env(args, side))
            if rec is None:
                print("%s: the %s binary did not run it%s" %
                      (case, side, "" if not runs[side] else
                       " on run %d; its side is left out" %
                       (len(runs[side]) + 1)), file=sys.stderr)
                sides.remove(side)
                runs[side] = []
                continue
            runs[side].append(rec)
    if not sides:
        return None
    row = {"bench": "core_compare", "case": case, "csum": args.csum,
           "runs": args.runs}
    loads = []
    for side in ("before", "after"):
        ns = [r["ns_per_dgram"] for r in runs[side]]
        row[side + "_ns"] = min(ns) if ns else None
        row[side + "_ns_median"] = median(ns) if ns else None
        loads += [r["loadavg"] for r in runs[side]]
    row["ratio"] = (round(row["after_ns"] / row["before_ns"], 3)
                    if len(sides) == 2 else None)
    row["loadavg_min"] = min(loads)
    row["loadavg_max"] = max(loads)
    if args.instr:
        for side in ("before", "after"):
            i = (instr_per_dgram(getattr(args, side),
                                 side_case(args, side, case), args.csum,
                                 side_env(args, side))
                 if side in sides else None)
            row[side + "_instr"] = round(i[0]) if i else None
            row[side + "_null_instr"] = round(i[1]) if i else None
        if row["before_instr"] and row["after_instr"]:
            row["instr_ratio"] = round(row["after_instr"] /
                                       row["before_instr"], 3)
    return row


def fmt(v, spec):
    return spec % v if v is not None else "%*s" % (len(spec % 0.0), "-")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--case", action="append", choices=CASES)
    ap.add_argument("--csum", choices=["hw", "sw"], default="hw")
    ap.add_argument("--instr", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--single", action="store_true")
    ap.add_argument("--before-env", action="append", metavar="VAR=VALUE")
    args = ap.parse_args()
    for kv in args.before_env or []:
        if "=" not in kv or kv.startswith("="):
            ap.error("--before-env wants VAR=VALUE, not %r" % kv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    for side in ("before", "after"):
        if not os.access(getattr(args, side), os.X_OK):
            ap.error("%s: not an executable" % getattr(args, side))

    if not args.json:
        hdr = "%-20s %10s %10s %6s %10s %10s  %s" % (
            "case", "before ns", "after ns", "ratio", "before med",
            "after med", "load")
        if args.instr:
            hdr += "  instr before -> after (null device's own)"
        print(hdr)
    cases = args.case or CASES
    if args.single:
        cases = [c for c in cases if c + "_single" in CASES]
    for case in cases:
        row = compare(args, case)
        if row is None:
            print("%s: skipped, neither binary runs it" % case,
                  file=sys.stderr)
            continue
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        line = "%-20s %s %s %s %s %s  %.2f-%.2f" % (
            case, fmt(row["before_ns"], "%10.1f"),
            fmt(row["after_ns"], "%10.1f"), fmt(row["ratio"], "%6.3f"),
            fmt(row["before_ns_median"], "%10.1f"),
            fmt(row["after_ns_median"], "%10.1f"),
            row["loadavg_min"], row["loadavg_max"])
        if args.instr:
            line += "  %s -> %s (null %s -> %s)" % (
                row["before_instr"], row["after_instr"],
                row["before_null_instr"], row["after_null_instr"])
        print(line, flush=True)

if __name__ == "__main__":
    main()
