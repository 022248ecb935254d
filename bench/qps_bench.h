/* SPDX-License-Identifier: MIT */
#ifndef QPS_BENCH_H
#define QPS_BENCH_H

/* One entry point per subcommand; argv[0] is the subcommand name. */
int qps_bench_doorbell(int argc, char **argv);
int qps_bench_doorbell_delay(int argc, char **argv);
int qps_bench_demux(int argc, char **argv);
int qps_bench_txq(int argc, char **argv);
int qps_bench_prio(int argc, char **argv);
int qps_bench_packet(int argc, char **argv);

#endif
