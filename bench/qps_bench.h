/* SPDX-License-Identifier: MIT */
#ifndef QPS_BENCH_H
#define QPS_BENCH_H

#include <stdint.h>

/* One entry point per subcommand; argv[0] is the subcommand name. */
int qps_bench_core(int argc, char **argv);
int qps_bench_doorbell(int argc, char **argv);
int qps_bench_doorbell_delay(int argc, char **argv);
int qps_bench_demux(int argc, char **argv);
int qps_bench_txq(int argc, char **argv);
int qps_bench_prio(int argc, char **argv);
int qps_bench_packet(int argc, char **argv);
int qps_bench_ipfrag(int argc, char **argv);

/* bench_cycles.c: user-space CPU cycles of the calling thread; open
 * returns -1 where perf_event_open is not available. */
int qps_bench_cycles_open(void);
uint64_t qps_bench_cycles_read(int fd);
void qps_bench_cycles_close(int fd);

#endif
