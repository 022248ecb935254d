// SPDX-License-Identifier: MIT
/*
 * qps_bench SUBCOMMAND [--json] [options]: the project's benchmarks. Each
 * subcommand measures its variants side by side in one run and prints
 * ratios; with --json, one JSON object per result line.
 */
#include <stdio.h>
#include <string.h>

#include "qps_bench.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *what;
} qps_benches[] = {
	{ "core", qps_bench_core, "the core's cost per datagram on the null device" },
	{ "demux", qps_bench_demux, "receive demux: groups, subscribers, multicast ping-pong" },
	{ "ipfrag", qps_bench_ipfrag, "IPv4 reassembly under hostile fragments: floods, collisions, tiny fragments" },
	{ "doorbell", qps_bench_doorbell, "postponed doorbells: send rate by batch size" },
	{ "doorbell-delay", qps_bench_doorbell_delay, "how long a postponed doorbell waits, by db_delay_us and flusher policy" },
	{ "packet", qps_bench_packet, "packet provider: TX rates, ping-pong (scripts/bench_packet.sh)" },
	{ "prio", qps_bench_prio, "priority send queues vs a mutex and ck_ring" },
	{ "txq", qps_bench_txq, "send-QP pick: cached vs hash vs flow table" },
	{ NULL, NULL, NULL },
};

static int qps_bench_usage(FILE *f)
{
	unsigned int i;

	fprintf(f, "usage: qps_bench SUBCOMMAND [--json] [options]\n");
	for (i = 0; qps_benches[i].name; i++)
		fprintf(f, "  %-15s %s\n", qps_benches[i].name,
			qps_benches[i].what);
	return 2;
}

int main(int argc, char **argv)
{
	unsigned int i;

	if (argc < 2)
		return qps_bench_usage(stderr);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		qps_bench_usage(stdout);
		return 0;
	}
	for (i = 0; qps_benches[i].name; i++)
		if (!strcmp(argv[1], qps_benches[i].name))
			return qps_benches[i].run(argc - 1, argv + 1);
	fprintf(stderr, "qps_bench: unknown subcommand '%s'\n", argv[1]);
	return qps_bench_usage(stderr);
}
