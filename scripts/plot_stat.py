#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Plot a `qps_stat --record FILE -i S` time series.

usage: scripts/plot_stat.py FILE.jsonl [-o DIR]

Writes into DIR (default: the current directory), one line per context
(pid/ctx) in each:
  rates.png       datagrams/s received and sent
  drops.png       drops/s (receive queue full, errors, band full, device)
  band_depth.png  datagrams parked in each priority band (gauge)
  doorbells.png   doorbells per WQE over each interval
Needs matplotlib (Debian: python3-matplotlib); prints the files written.
"""
import argparse
import json
import os
import sys


def load(path):
    series = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
                c = rec["context"]
                key = "%d/%d %s" % (c["pid"], c["ctx"], c["command"])
                series.setdefault(key, []).append((rec["time"], c))
            except (ValueError, KeyError) as e:
                sys.exit("plot_stat: %s:%d: not a qps_stat --record line (%s)"
                         % (path, n, e))
    return series


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("-o", "--out", default=".")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_stat: needs matplotlib (Debian: python3-matplotlib)")
    series = load(args.file)
    if not series:
        sys.exit("plot_stat: %s holds no samples" % args.file)
    t0 = min(s[0][0] for s in series.values())
    os.makedirs(args.out, exist_ok=True)

    def figure(name, title, ylabel, lines):
        fig, ax = plt.subplots(figsize=(8, 4))
        # A line that stays 0 (the receive rate of a sender) only hides
        # the others; if every one does, keep them all.
        shown = [ln for ln in lines if any(ln[2])] or lines
        for label, xs, ys in shown:
            ax.plot(xs, ys, marker=".", label=label)
        ax.set_title(title)
        ax.set_xlabel("seconds")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        path = os.path.join(args.out, name)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        print(path)

    def xs(samples):
        return [t - t0 for t, _ in samples]

    rates, drops, depth, dbw = [], [], [], []
    for key, s in sorted(series.items()):
        x = xs(s)
        rates.append((key + " rx", x, [c["rates"]["rx_pps"] for _, c in s]))
        rates.append((key + " tx", x, [c["rates"]["tx_pps"] for _, c in s]))
        drops.append((key, x, [c["rates"]["drops_ps"] for _, c in s]))
        for b in range(3):
            depth.append(("%s band %d" % (key, b), x,
                          [c["counters"]["tx_band_depth"][b] for _, c in s]))
        dbw.append((key, x, [c["rates"]["doorbells_per_wqe"] for _, c in s]))
    figure("rates.png", "datagrams per second", "datagrams/s", rates)
    figure("drops.png", "drops per second", "drops/s", drops)
    figure("band_depth.png", "priority band depth", "datagrams parked", depth)
    figure("doorbells.png", "doorbells per WQE", "doorbells/WQE", dbw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
