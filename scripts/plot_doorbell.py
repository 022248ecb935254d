#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Plot `qps_bench doorbell --json` output: message rate by batch size.

usage: scripts/plot_doorbell.py RESULTS.jsonl OUT.png

One panel per cost model value, one line per (path, api). Needs gnuplot
(Debian: gnuplot-nox); the JSON lines are read with the standard library.
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if line.startswith('{'):
                r = json.loads(line)
                if r.get('bench') == 'doorbell':
                    rows.append(r)
    if not rows:
        print('plot_doorbell: no doorbell results in', sys.argv[1],
              file=sys.stderr)
        return 1
    costs = sorted({r['cost_model_ns'] for r in rows})
    series = sorted({(r['path'], r['api']) for r in rows})
    size = rows[0].get('msg_size', 64)
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for cost in costs:
            for path, api in series:
                pts = sorted((r['batch'], r['msgs_per_sec'] / 1e6)
                             for r in rows if r['cost_model_ns'] == cost
                             and r['path'] == path and r['api'] == api)
                name = os.path.join(tmp, f'{cost}-{path}-{api}.dat')
                with open(name, 'w') as d:
                    for b, m in pts:
                        d.write(f'{b} {m}\n')
                files[(cost, path, api)] = name
        batches = sorted({r['batch'] for r in rows})
        ymax = max(r['msgs_per_sec'] for r in rows) / 1e6 * 1.15
        styles = {('generic', 'sendmmsg'): 'lw 2 dt 1 lc rgb "#1f77b4"',
                  ('generic', 'msg_more'): 'lw 2 dt 2 lc rgb "#1f77b4"',
                  ('direct', 'sendmmsg'): 'lw 2 dt 1 lc rgb "#d62728"',
                  ('direct', 'msg_more'): 'lw 2 dt 2 lc rgb "#d62728"'}
        g = [f'set terminal pngcairo size {520 * len(costs)},420 '
             'font "sans,10" noenhanced',
             f'set output "{sys.argv[2]}"',
             f'set multiplot layout 1,{len(costs)} title "qps_bench '
             f'doorbell: {size}-byte datagrams on emu, doorbell once per '
             'batch"',
             'set logscale x 2',
             'set xtics (' + ', '.join(f'"{b}" {b}' for b in batches) + ')',
             f'set xrange [{batches[0] * 0.8}:{batches[-1] * 1.25}]',
             f'set yrange [0:{ymax:.3f}]',
             'set xlabel "batch size (datagrams per doorbell)"',
             'set ylabel "million datagrams / s"',
             'set key bottom right',
             'set grid']
        for cost in costs:
            g.append(f'set title "cost model {cost} ns per doorbell / '
                     'BlueFlame write"')
            plots = []
            for path, api in series:
                st = styles.get((path, api), 'lw 2')
                plots.append(f'"{files[(cost, path, api)]}" using 1:2 '
                             f'with linespoints {st} pt 7 '
                             f'title "{path}, {api}"')
            g.append('plot ' + ', '.join(plots))
        g.append('unset multiplot')
        subprocess.run(['gnuplot'], input='\n'.join(g) + '\n', text=True,
                       check=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
