#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""plot_lat_cdf.py QPS_H_OUT SOCKPERF_CSV OUT_PNG [TITLE]

The latency CDF of one run: qps_send_lat -H's samples ("i, usec" after a
"#, usec" line) against sockperf --full-log's ("i, tx, rx, usec"), both
half round trips, on a log axis. Prints p50/p99/p99.9 of each.
"""
import sys


def qps_samples(path):
    out, on = [], False
    with open(path) as f:
        for line in f:
            if line.startswith("#, usec"):
                on = True
                continue
            if not on:
                continue
            parts = line.split(",")
            if len(parts) != 2:
                break
            try:
                out.append(float(parts[1]))
            except ValueError:
                break
    return sorted(out)


def sockperf_samples(path):
    out = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 4 and parts[0].isdigit():
                out.append(float(parts[3]))
    return sorted(out)


def pct(v, p):
    return v[min(len(v) - 1, int(p * len(v)))]


def main():
    if len(sys.argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    series = [("qpsock emu (qps_send_lat)", qps_samples(sys.argv[1])),
              ("kernel UDP loopback (sockperf)", sockperf_samples(sys.argv[2]))]
    for name, v in series:
        if not v:
            print(f"plot_lat_cdf: no samples for {name}", file=sys.stderr)
            return 1
        print(f"{name}: n={len(v)} p50={pct(v, .5):.3f} p99={pct(v, .99):.3f} "
              f"p99.9={pct(v, .999):.3f} max={v[-1]:.3f} usec")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, v in series:
        n = len(v)
        ax.step(v, [(i + 1) / n for i in range(n)], where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("half round trip (usec)")
    ax.set_ylabel("fraction of messages")
    ax.set_ylim(0, 1)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(sys.argv[4] if len(sys.argv) > 4 else "64-byte ping-pong latency")
    fig.tight_layout()
    fig.savefig(sys.argv[3], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
