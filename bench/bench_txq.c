// SPDX-License-Identifier: MIT
/*
 * qps_bench txq [--json] [--iters N] [--rounds R] [--qps N] [--policy P]:
 * nanoseconds per send-QP pick, three ways, measured side by side in one
 * run over the same 1,024 endpoints:
 *
 *   cached     a connected endpoint's cached pick (qps_txq_pick_cached):
 *              validate the cache slot against the route generation and
 *              the QP generation, count it (the endpoint keeps its 4-tuple
 *              from connect time, for the slow path);
 *   hash       what an unconnected send without a flow table does every
 *              time: build the 4-tuple from the endpoint and the
 *              destination sockaddr, hash it, apply the policy, count it;
 *   flowtable  an unconnected send with the flow table: the same hash,
 *              then qps_txq_pick_flow, qps_txq_enqueue (the head count)
 *              and qps_txq_flow_commit.
 *
 * Each round times the three paths back to back, in a rotating order, so
 * the ratios compare paths measured under the same machine load; the
 * result is the median over rounds of each path's ns and of each ratio.
 * Every pick's QP is summed into a sink that is printed, and the cached
 * path's recomputations are reported (0 when it really was served from
 * the cache).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qps_bench.h"
#include "txq_select.h"

#define BT_EPS 1024		/* power of two */
#define BT_ROUNDS_MAX 199

struct bt_ep {
	struct sockaddr_in local;
	struct sockaddr_in peer;
	struct qps_txq_cache cache;
	struct qps_txq_tuple tuple;	/* a connected endpoint's, set once */
};

struct bt {
	struct qps_txq_sel *sel;
	struct bt_ep *ep;
	_Atomic uint64_t route_gen;
	uint64_t iters;
	uint64_t sink;
};

enum { BT_CACHED, BT_HASH, BT_FLOW, BT_PATHS };

static const char *const bt_path_name[BT_PATHS] = {
	"cached", "hash", "flowtable",
};

static uint64_t bt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline struct qps_txq_tuple bt_tuple(const struct bt_ep *e)
{
	struct qps_txq_tuple t = {
		.saddr = e->local.sin_addr.s_addr,
		.daddr = e->peer.sin_addr.s_addr,
		.sport = e->local.sin_port,
		.dport = e->peer.sin_port,
	};

	return t;
}

static uint64_t bt_run_cached(struct bt *b)
{
	struct bt_ep *e;
	uint64_t i, sum = 0;

	for (i = 0; i < b->iters; i++) {
		e = &b->ep[i & (BT_EPS - 1)];
		sum += (uint64_t)qps_txq_pick_cached(b->sel, &e->cache,
				atomic_load_explicit(&b->route_gen,
						     memory_order_relaxed),
				&e->tuple);
	}
	return sum;
}

static uint64_t bt_run_hash(struct bt *b)
{
	struct qps_txq_tuple t;
	uint64_t i, sum = 0;

	for (i = 0; i < b->iters; i++) {
		t = bt_tuple(&b->ep[i & (BT_EPS - 1)]);
		sum += (uint64_t)qps_txq_pick_hash(b->sel, &t);
	}
	return sum;
}

static uint64_t bt_run_flow(struct bt *b)
{
	struct qps_txq_tuple t;
	uint64_t i, sum = 0;
	uint32_t h, head;
	int qp;

	for (i = 0; i < b->iters; i++) {
		t = bt_tuple(&b->ep[i & (BT_EPS - 1)]);
		h = qps_txq_flow_hash(b->sel, &t);
		qp = qps_txq_pick_flow(b->sel, h);
		qps_txq_enqueue(b->sel, qp, 1, &head);
		qps_txq_flow_commit(b->sel, h, qp, head);
		sum += (uint64_t)qp;
	}
	return sum;
}

static double bt_time(struct bt *b, int path)
{
	uint64_t t0, t1, sum;

	t0 = bt_now_ns();
	switch (path) {
	case BT_CACHED:
		sum = bt_run_cached(b);
		break;
	case BT_HASH:
		sum = bt_run_hash(b);
		break;
	default:
		sum = bt_run_flow(b);
		break;
	}
	t1 = bt_now_ns();
	b->sink += sum;
	return (double)(t1 - t0) / (double)b->iters;
}

static int bt_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double bt_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bt_cmp);
	return n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int bt_usage(void)
{
	fprintf(stderr, "usage: qps_bench txq [--json] [--iters N] "
		"[--rounds R] [--qps N] [--policy hash|cpu|thread]\n");
	return 2;
}

int qps_bench_txq(int argc, char **argv)
{
	static const char *const pol_name[QPS_TXQ_POLICY_MAX] = {
		"hash", "cpu", "thread",
	};
	struct qps_txq_attr attr = { .nqp = 4 };
	double ns[BT_PATHS][BT_ROUNDS_MAX], med[BT_PATHS];
	double ratio[2][BT_ROUNDS_MAX], cached_vs_hash, flow_vs_hash;
	struct qps_txq_stats st0, st1;
	struct bt b = { .iters = 2000000 };
	int rounds = 21, json = 0, i, r, p;
	uint64_t recomputed;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
			b.iters = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--qps") && i + 1 < argc) {
			attr.nqp = (uint32_t)strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--policy") && i + 1 < argc) {
			i++;
			for (p = 0; p < QPS_TXQ_POLICY_MAX; p++)
				if (!strcmp(argv[i], pol_name[p]))
					break;
			if (p == QPS_TXQ_POLICY_MAX)
				return bt_usage();
			attr.policy = (enum qps_txq_policy)p;
		} else {
			return bt_usage();
		}
	}
	if (!b.iters || rounds < 1 || rounds > BT_ROUNDS_MAX)
		return bt_usage();
	r = qps_txq_create(&attr, &b.sel);
	if (r < 0) {
		fprintf(stderr, "qps_bench txq: qps_txq_create: %s\n",
			strerror(-r));
		return 1;
	}
	b.ep = calloc(BT_EPS, sizeof(*b.ep));
	if (!b.ep) {
		qps_txq_destroy(b.sel);
		return 1;
	}
	atomic_init(&b.route_gen, 1);
	/* 1,024 connected endpoints: 64 local ports to 16 servers. */
	for (i = 0; i < BT_EPS; i++) {
		b.ep[i].local.sin_family = AF_INET;
		b.ep[i].local.sin_addr.s_addr = htonl(0xc6120001);
		b.ep[i].local.sin_port = htons((uint16_t)(40000 + i / 16));
		b.ep[i].peer.sin_family = AF_INET;
		b.ep[i].peer.sin_addr.s_addr = htonl(0xc6120100u + i % 16);
		b.ep[i].peer.sin_port = htons(9000);
		qps_txq_cache_init(&b.ep[i].cache);
		b.ep[i].tuple = bt_tuple(&b.ep[i]);
		qps_txq_pick_cached(b.sel, &b.ep[i].cache, 1, &b.ep[i].tuple);
	}

	recomputed = 0;
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < BT_PATHS; i++) {
			p = (r + i) % BT_PATHS;
			qps_txq_stats(b.sel, &st0);
			ns[p][r] = bt_time(&b, p);
			qps_txq_stats(b.sel, &st1);
			if (p == BT_CACHED)
				recomputed += st1.picks_computed -
					      st0.picks_computed;
		}
		ratio[0][r] = ns[BT_CACHED][r] / ns[BT_HASH][r];
		ratio[1][r] = ns[BT_FLOW][r] / ns[BT_HASH][r];
	}
	for (p = 0; p < BT_PATHS; p++)
		med[p] = bt_median(ns[p], rounds);
	cached_vs_hash = bt_median(ratio[0], rounds);
	flow_vs_hash = bt_median(ratio[1], rounds);

	if (json) {
		printf("{\"bench\":\"txq\",\"policy\":\"%s\",\"qps\":%u,"
		       "\"endpoints\":%d,\"iters\":%llu,\"rounds\":%d,"
		       "\"cached_ns\":%.3f,\"hash_ns\":%.3f,"
		       "\"flowtable_ns\":%.3f,\"cached_vs_hash\":%.3f,"
		       "\"flowtable_vs_hash\":%.3f,\"cached_recomputed\":%llu,"
		       "\"sink\":%llu}\n", pol_name[attr.policy], attr.nqp,
		       BT_EPS, (unsigned long long)b.iters, rounds,
		       med[BT_CACHED], med[BT_HASH], med[BT_FLOW],
		       cached_vs_hash, flow_vs_hash,
		       (unsigned long long)recomputed,
		       (unsigned long long)b.sink);
	} else {
		printf("txq pick, %s policy, %u QPs, %d endpoints, %llu picks "
		       "x %d rounds (median):\n", pol_name[attr.policy],
		       attr.nqp, BT_EPS, (unsigned long long)b.iters, rounds);
		for (p = 0; p < BT_PATHS; p++)
			printf("  %-10s %7.3f ns/pick\n", bt_path_name[p],
			       med[p]);
		printf("  cached/hash %.3f, flowtable/hash %.3f (median of "
		       "per-round ratios)\n", cached_vs_hash, flow_vs_hash);
		printf("  cached path recomputed %llu times\n",
		       (unsigned long long)recomputed);
	}
	free(b.ep);
	qps_txq_destroy(b.sel);
	return 0;
}
