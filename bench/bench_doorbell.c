// SPDX-License-Identifier: MIT
/*
 * qps_bench doorbell [--json] [--rounds R] [--ms M] [--size B]
 *                    [--batches 1,4,...] [--costs 0,100]:
 * the send rate of 64-byte datagrams on emu by batch size, with the
 * doorbell rung once per batch, on both send paths (generic WR chains,
 * direct mlx4 WQEs + BlueFlame), through both ways of saying "more
 * follows" (one qps_sendmmsg of the batch; batch-1 sends with
 * QPS_MSG_MORE and one without), with the emu cost model off and on.
 *
 * Every configuration has its own context on its own wire, created once;
 * datagrams go to a multicast group nobody joined, so the device builds
 * and routes each frame and the wire drops it (a transmit-only test, as
 * pktgen is). Each round runs every configuration for M ms, in an order
 * that rotates per round; a batch size's speedup is the median over
 * rounds of (its rate / batch 1's rate) in the same round, so ratios
 * compare runs made under the same machine load. The cost model
 * (docs/emu.md) is set explicitly for every run and printed in every
 * line (cost_model_ns: spin per doorbell and per BlueFlame write).
 *
 * In the same run, completion moderation side by side: tx_signal 1 (a
 * CQE per WQE) against tx_signal 16, qps_sendmmsg bursts of 32, cost
 * model off, both paths; each with its own context, rounds interleaved
 * the same way, the speedup the median of per-round rate ratios.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qps_bench.h"
#include "qps_int.h"
#include "emu/emu.h"

#define BD_MAX_BATCHES 8
#define BD_MAX_COSTS 4
#define BD_MAX_ROUNDS 51
#define BD_MAX_BATCH 256
#define BD_SINK "239.255.77.1"
#define BD_MOD_BATCH 32
#define BD_MOD_SIGNAL 16

enum { BD_API_MMSG, BD_API_MORE, BD_APIS };
static const char *const bd_api_name[BD_APIS] = { "sendmmsg", "msg_more" };
static const uint32_t bd_paths[2] = { QPS_TX_PATH_GENERIC,
				      QPS_TX_PATH_DIRECT };

struct bd_opts {
	int json;
	unsigned int rounds;
	unsigned int ms;
	unsigned int size;
	unsigned int nbatch;
	unsigned int batch[BD_MAX_BATCHES];
	unsigned int ncost;
	unsigned int cost[BD_MAX_COSTS];
};

/* One configuration: path x api x cost x batch. */
struct bd_cfg {
	unsigned int path, api, cost, batch;	/* indexes */
	double rate[BD_MAX_ROUNDS];		/* msgs/s per round */
	uint64_t msgs, rings, bf;		/* device counts, all rounds */
};

struct bd_ctx {
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	char wire[64];
};

static int bd_parse_list(const char *s, unsigned int *out, unsigned int max,
			 unsigned int *n)
{
	char *end;
	unsigned long v;

	*n = 0;
	while (*s) {
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno || end == s || v > 1000000 || *n == max)
			return -EINVAL;
		out[(*n)++] = (unsigned int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -EINVAL;
	}
	return *n ? 0 : -EINVAL;
}

static int bd_usage(void)
{
	fprintf(stderr, "usage: qps_bench doorbell [--json] [--rounds R] "
		"[--ms M] [--size B] [--batches 1,4,16,32,64] "
		"[--costs 0,100]\n");
	return 2;
}

static int bd_opts_parse(int argc, char **argv, struct bd_opts *o)
{
	int i;

	memset(o, 0, sizeof(*o));
	o->rounds = 9;
	o->ms = 25;
	o->size = 64;
	bd_parse_list("1,4,16,32,64", o->batch, BD_MAX_BATCHES, &o->nbatch);
	bd_parse_list("0,100", o->cost, BD_MAX_COSTS, &o->ncost);
	for (i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--json")) {
			o->json = 1;
			continue;
		}
		if (!v)
			return -EINVAL;
		if (!strcmp(argv[i], "--rounds"))
			o->rounds = (unsigned int)atoi(v);
		else if (!strcmp(argv[i], "--ms"))
			o->ms = (unsigned int)atoi(v);
		else if (!strcmp(argv[i], "--size"))
			o->size = (unsigned int)atoi(v);
		else if (!strcmp(argv[i], "--batches")) {
			if (bd_parse_list(v, o->batch, BD_MAX_BATCHES,
					  &o->nbatch))
				return -EINVAL;
		} else if (!strcmp(argv[i], "--costs")) {
			if (bd_parse_list(v, o->cost, BD_MAX_COSTS, &o->ncost))
				return -EINVAL;
		} else {
			return -EINVAL;
		}
		i++;
	}
	if (!o->rounds || o->rounds > BD_MAX_ROUNDS || !o->ms ||
	    o->ms > 10000 || o->size > 1472)
		return -EINVAL;
	for (i = 0; i < (int)o->nbatch; i++)
		if (!o->batch[i] || o->batch[i] > BD_MAX_BATCH)
			return -EINVAL;
	for (i = 0; i < (int)o->ncost; i++)
		if (o->cost[i] > QPS_EMU_COST_MAX_NS)
			return -EINVAL;
	return 0;
}

/* @tx_signal 0: the default. */
static int bd_open(struct bd_ctx *c, uint32_t path, unsigned int idx,
		   uint32_t tx_signal)
{
	struct qps_ctx_attr a = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			     QPS_CTX_ATTR_TX_PATH |
			     (tx_signal ? QPS_CTX_ATTR_TX_SIGNAL : 0),
		.provider = "emu",
		.tx_path = path,
		.tx_signal = tx_signal,
	};
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons(9) };
	int ret;

	snprintf(c->wire, sizeof(c->wire), "qps-bench-db-%d-%u",
		 (int)getpid(), idx);
	a.dev = c->wire;
	inet_pton(AF_INET, BD_SINK, &dst.sin_addr);
	ret = qps_ctx_create(&a, &c->ctx);
	if (ret < 0)
		return ret;
	ret = qps_ep_create(c->ctx, QPS_EP_DGRAM, &c->ep);
	if (!ret)
		ret = qps_connect(c->ep, (struct sockaddr *)&dst, sizeof(dst));
	return ret;
}

/* Send batches for @ms; returns the messages sent, or -errno. */
static int64_t bd_run(struct bd_ctx *c, unsigned int api, unsigned int batch,
		      const uint8_t *payload, size_t size, unsigned int ms,
		      double *secs)
{
	struct qps_msg m[BD_MAX_BATCH];
	unsigned int check = batch >= 64 ? 1 : 64 / batch;
	uint64_t t0, t = 0, end;
	int64_t sent = 0;
	unsigned int i, k;
	ssize_t r;

	for (i = 0; i < batch; i++)
		m[i] = (struct qps_msg){ .buf = payload, .len = size,
					 .priority = -1 };
	t0 = qps_now_ns();
	end = t0 + (uint64_t)ms * 1000000u;
	for (;;) {
		for (k = 0; k < check; k++) {
			if (api == BD_API_MMSG) {
				r = qps_sendmmsg(c->ep, m, batch, 0);
				if (r != (ssize_t)batch)
					return r < 0 ? r : -EIO;
			} else {
				for (i = 0; i < batch; i++) {
					r = qps_send(c->ep, payload, size,
						     i + 1 < batch ?
						     QPS_MSG_MORE : 0);
					if (r != (ssize_t)size)
						return r < 0 ? r : -EIO;
				}
			}
			sent += batch;
		}
		t = qps_now_ns();
		if (t >= end)
			break;
	}
	*secs = (double)(t - t0) / 1e9;
	return sent;
}

static int bd_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double bd_median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), bd_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Completion moderation: path x tx_signal {1, BD_MOD_SIGNAL}. */
struct bd_mod {
	struct bd_ctx x;
	unsigned int path;			/* index into bd_paths */
	uint32_t signal;
	double rate[BD_MAX_ROUNDS];
	uint64_t wqes, cqes, signaled, reaped;	/* all rounds */
};

static void bd_mod_close(struct bd_mod *m)
{
	unsigned int i;

	for (i = 0; i < 4; i++)
		if (m[i].x.ctx)
			qps_ctx_destroy(m[i].x.ctx);
}

static void bd_mod_print(const struct bd_opts *o, struct bd_mod *m)
{
	double ratio[BD_MAX_ROUNDS], rate[BD_MAX_ROUNDS];
	unsigned int i, r;

	if (!o->json)
		printf("completion moderation on emu: qps_sendmmsg bursts of "
		       "%u, cost model off; tx_signal 1 vs %u; medians; "
		       "speedup = rate / tx_signal-1 rate in the same "
		       "round\n", BD_MOD_BATCH, BD_MOD_SIGNAL);
	for (i = 0; i < 4; i++) {
		const struct bd_mod *c = &m[i];
		/* tx_signal 1 of the same path: the entry before. */
		const struct bd_mod *base = &m[i & ~1u];
		double cqe = c->wqes ? (double)c->cqes / c->wqes : 0;
		double sp, med;

		for (r = 0; r < o->rounds; r++) {
			ratio[r] = c->rate[r] / base->rate[r];
			rate[r] = c->rate[r];
		}
		sp = bd_median(ratio, o->rounds);
		med = bd_median(rate, o->rounds);
		if (o->json)
			printf("{\"bench\":\"doorbell_moderation\","
			       "\"path\":\"%s\",\"api\":\"sendmmsg\","
			       "\"batch\":%u,\"tx_signal\":%u,"
			       "\"cost_model_ns\":0,\"msg_size\":%u,"
			       "\"msgs_per_sec\":%.0f,"
			       "\"cqes_per_wqe\":%.5f,"
			       "\"signaled_per_wqe\":%.5f,"
			       "\"reaped\":%llu,\"wqes\":%llu,"
			       "\"speedup_vs_signal1\":%.3f,"
			       "\"rounds\":%u}\n",
			       c->path ? "direct" : "generic", BD_MOD_BATCH,
			       c->signal, o->size, med, cqe,
			       c->wqes ? (double)c->signaled / c->wqes : 0,
			       (unsigned long long)c->reaped,
			       (unsigned long long)c->wqes, sp, o->rounds);
		else
			printf("  %s tx_signal %2u  %10.0f msgs/s  %.4f "
			       "CQEs/WQE  x%.3f\n", c->path ? "direct " :
			       "generic", c->signal, med, cqe, sp);
	}
}

/*
 * tx_signal 1 against BD_MOD_SIGNAL on both paths, rounds interleaved as
 * in the main table. CQEs per WQE come from the device's counters.
 */
static int bd_moderation(const struct bd_opts *o, const uint8_t *payload)
{
	struct bd_mod m[4];
	unsigned int i, r;
	int ret = 1;

	memset(m, 0, sizeof(m));
	for (i = 0; i < 4; i++) {
		int e;

		m[i].path = i / 2;
		m[i].signal = i % 2 ? BD_MOD_SIGNAL : 1;
		e = bd_open(&m[i].x, bd_paths[m[i].path], 2 + i, m[i].signal);
		if (e < 0) {
			fprintf(stderr, "qps_bench doorbell: moderation "
				"context: %s\n", strerror(-e));
			goto out;
		}
		qps_emu_set_cost(m[i].x.ctx->dev, 0, 0);
	}
	for (r = 0; r <= o->rounds; r++) {
		for (i = 0; i < 4; i++) {
			struct bd_mod *c = &m[(i + r) % 4];
			struct qps_stats s0, s1;
			double secs = 0;
			int64_t n;

			qps_ctx_stats(c->x.ctx, &s0, sizeof(s0));
			n = bd_run(&c->x, BD_API_MMSG, BD_MOD_BATCH, payload,
				   o->size, r ? o->ms : o->ms / 4 + 1, &secs);
			/* Reaped before the count: what this run posted. */
			qps_ctx_progress(c->x.ctx);
			qps_ctx_stats(c->x.ctx, &s1, sizeof(s1));
			if (n < 0) {
				fprintf(stderr, "qps_bench doorbell: "
					"moderation run failed: %s\n",
					strerror((int)-n));
				goto out;
			}
			if (!r)
				continue;
			c->rate[r - 1] = (double)n / secs;
			c->wqes += s1.wqes - s0.wqes;
			c->cqes += s1.tx_cqes - s0.tx_cqes;
			c->signaled += s1.tx_signaled - s0.tx_signaled;
			c->reaped += s1.tx_reaped - s0.tx_reaped;
		}
	}
	bd_mod_print(o, m);
	ret = 0;
out:
	bd_mod_close(m);
	return ret;
}

int qps_bench_doorbell(int argc, char **argv)
{
	struct bd_opts o;
	struct bd_ctx ctx[2];
	struct bd_cfg *cfg;
	uint8_t payload[1472];
	unsigned int ncfg, i, r, p, a, cs, b;
	int ret = 1;

	if (bd_opts_parse(argc, argv, &o))
		return bd_usage();
	if (getenv("QPS_EMU_DB_NS") || getenv("QPS_EMU_BF_NS"))
		fprintf(stderr, "qps_bench doorbell: QPS_EMU_DB_NS/BF_NS are "
			"ignored: each run sets cost_model_ns itself\n");
	memset(ctx, 0, sizeof(ctx));
	for (p = 0; p < 2; p++) {
		int e = bd_open(&ctx[p], bd_paths[p], p, 0);

		if (e < 0) {
			fprintf(stderr, "qps_bench doorbell: %s context: %s\n",
				p ? "direct" : "generic", strerror(-e));
			goto out;
		}
	}
	memset(payload, 0x5a, sizeof(payload));
	ncfg = 2 * BD_APIS * o.ncost * o.nbatch;
	cfg = calloc(ncfg, sizeof(*cfg));
	if (!cfg)
		goto out;
	i = 0;
	for (p = 0; p < 2; p++)
		for (a = 0; a < BD_APIS; a++)
			for (cs = 0; cs < o.ncost; cs++)
				for (b = 0; b < o.nbatch; b++)
					cfg[i++] = (struct bd_cfg){ .path = p,
						.api = a, .cost = cs,
						.batch = b };

	/* Round 0 warms up and is not recorded. */
	for (r = 0; r <= o.rounds; r++) {
		for (i = 0; i < ncfg; i++) {
			struct bd_cfg *c = &cfg[(i + r * 7) % ncfg];
			struct bd_ctx *x = &ctx[c->path];
			struct qps_stats s0, s1;
			uint32_t db_ns, bf_ns;
			double secs = 0;
			int64_t n;

			qps_emu_set_cost(x->ctx->dev, o.cost[c->cost],
					 o.cost[c->cost]);
			qps_ctx_stats(x->ctx, &s0, sizeof(s0));
			n = bd_run(x, c->api, o.batch[c->batch], payload,
				   o.size, r ? o.ms : o.ms / 4 + 1, &secs);
			qps_ctx_stats(x->ctx, &s1, sizeof(s1));
			qps_emu_get_cost(x->ctx->dev, &db_ns, &bf_ns);
			if (n < 0 || db_ns != o.cost[c->cost] ||
			    bf_ns != o.cost[c->cost]) {
				fprintf(stderr, "qps_bench doorbell: run "
					"failed: %s\n", strerror(n < 0 ?
					(int)-n : EINVAL));
				free(cfg);
				goto out;
			}
			if (!r)
				continue;
			c->rate[r - 1] = (double)n / secs;
			c->msgs += s1.wqes - s0.wqes;
			c->rings += s1.doorbells - s0.doorbells;
			c->bf += s1.bf_writes - s0.bf_writes;
		}
	}
	qps_emu_set_cost(ctx[0].ctx->dev, 0, 0);
	qps_emu_set_cost(ctx[1].ctx->dev, 0, 0);

	if (!o.json)
		printf("doorbell batching on emu: %u-byte datagrams, %u rounds "
		       "of %u ms per configuration; medians; speedup = rate / "
		       "batch-1 rate in the same round\n", o.size, o.rounds,
		       o.ms);
	for (i = 0; i < ncfg; i++) {
		struct bd_cfg *c = &cfg[i];
		/* Batch 1 of the same path, api and cost: listed first. */
		struct bd_cfg *base = c - c->batch;
		double ratio[BD_MAX_ROUNDS], rate[BD_MAX_ROUNDS];
		double sp, med;

		for (r = 0; r < o.rounds; r++) {
			ratio[r] = c->rate[r] / base->rate[r];
			rate[r] = c->rate[r];
		}
		sp = bd_median(ratio, o.rounds);
		med = bd_median(rate, o.rounds);
		if (o.json) {
			printf("{\"bench\":\"doorbell\",\"path\":\"%s\","
			       "\"api\":\"%s\",\"batch\":%u,"
			       "\"cost_model_ns\":%u,\"msg_size\":%u,"
			       "\"msgs_per_sec\":%.0f,"
			       "\"doorbells_per_msg\":%.5f,"
			       "\"bf_writes_per_msg\":%.5f,"
			       "\"speedup_vs_batch1\":%.3f,\"baseline_batch\":%u,"
			       "\"rounds\":%u}\n",
			       c->path ? "direct" : "generic",
			       bd_api_name[c->api], o.batch[c->batch],
			       o.cost[c->cost], o.size, med,
			       c->msgs ? (double)c->rings / c->msgs : 0,
			       c->msgs ? (double)c->bf / c->msgs : 0, sp,
			       o.batch[0], o.rounds);
		} else {
			if (!c->batch)
				printf("%s path, %s, cost model %u ns:\n",
				       c->path ? "direct" : "generic",
				       bd_api_name[c->api], o.cost[c->cost]);
			printf("  batch %3u  %10.0f msgs/s  %.4f doorbells/msg"
			       "  %.4f BF/msg  x%.2f\n", o.batch[c->batch], med,
			       c->msgs ? (double)c->rings / c->msgs : 0,
			       c->msgs ? (double)c->bf / c->msgs : 0, sp);
		}
	}
	fflush(stdout);
	free(cfg);
	ret = bd_moderation(&o, payload);
	fflush(stdout);
out:
	for (p = 0; p < 2; p++)
		if (ctx[p].ctx)
			qps_ctx_destroy(ctx[p].ctx);
	return ret;
}
