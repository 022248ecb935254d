// SPDX-License-Identifier: MIT
/*
 * qps_bench demux [--json] [--rounds R] [--pkts N] [--iters N]
 *                 [--no-pingpong]
 *
 * 1. Receive path, ns per datagram, from the receive CQE to the data in
 *    the application's buffer (progress: poll, parse, demultiplex, queue;
 *    then qps_recv: copy, release, repost), for
 *      groups 1, 100, 10000 with one subscribing endpoint (joined to all:
 *      every rule has one subscriber, the early path), and
 *      groups 1 with 4 subscribers (fan-out, one buffer shared).
 *    Traffic is uniform over the joined groups (xorshift). Each variant
 *    has its own context, joined through qps_join(); the contexts' device
 *    is emu with its receive side replaced by a generator (below), because
 *    a 10,000-group steering table is beyond emu (256 rules, 64 group
 *    filters per port) and on a NIC steering costs the host nothing: what
 *    is measured is the host's receive path alone. Each round runs every
 *    variant back to back in a rotating order; the result is the median
 *    over rounds, and each ratio the median of per-round ratios against
 *    groups 1 / subscribers 1.
 *
 * 2. Ping-pong half round trip on emu (two processes, real emu wire):
 *    one-way multicast with a unicast reply (the seed's fio test), next
 *    to unicast both ways; blocks of each alternate, median half-RTT.
 *
 * The generator: receive buffers posted by the core are kept in a FIFO;
 * each poll of the receive CQ takes the next buffers, writes a 58-byte
 * frame for the next group into each (template + group address, MAC,
 * IPv4 checksum; UDP checksum 0) and returns a completion, as the HCA
 * would after steering. Its cost does not depend on the group count.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qps_bench.h"
#include "qps_int.h"

#define BD_VARIANTS 4
#define BD_ROUNDS_MAX 99
#define BD_BATCH QPS_RX_POLL_BATCH
#define BD_PORT 9000
#define BD_GROUP_BASE 0xef010000u	/* 239.1.0.0, host order */
#define BD_PAYLOAD 16
#define BD_SUBS_MAX 4

struct bd_var {
	uint32_t groups;
	uint32_t subs;
	struct qps_ctx *ctx;
	struct qps_ep *ep[BD_SUBS_MAX];
	/* generator */
	uint32_t *rq;		/* posted buffers, FIFO */
	uint32_t rq_cap, rq_head, rq_n;
	uint32_t pending;	/* completions the next polls may return */
	uint32_t rnd;
	uint8_t tmpl[QPS_HDRS_LEN + BD_PAYLOAD];
	const struct qps_provider_ops *real;
	struct qps_provider_ops ops;
	double ns[BD_ROUNDS_MAX], demux_ns[BD_ROUNDS_MAX];
	double ratio[BD_ROUNDS_MAX];
	uint64_t early, fanout, deliveries;
};

static struct bd_var bd_vars[BD_VARIANTS] = {
	{ .groups = 1, .subs = 1 },
	{ .groups = 100, .subs = 1 },
	{ .groups = 10000, .subs = 1 },
	{ .groups = 1, .subs = 4 },
};

static struct bd_var *bd_by_cq(struct qps_cq *cq)
{
	int i;

	for (i = 0; i < BD_VARIANTS; i++)
		if (bd_vars[i].ctx && bd_vars[i].ctx->rx.cq == cq)
			return &bd_vars[i];
	return NULL;
}

static struct bd_var *bd_by_qp(struct qps_qp *qp)
{
	int i;

	for (i = 0; i < BD_VARIANTS; i++)
		if (bd_vars[i].ctx && bd_vars[i].ctx->qp == qp)
			return &bd_vars[i];
	return NULL;
}

static int bd_post_recv(struct qps_qp *qp, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad)
{
	struct bd_var *v = bd_by_qp(qp);

	for (; wr; wr = wr->next) {
		if (v->rq_n == v->rq_cap) {
			*bad = wr;
			return -ENOMEM;
		}
		v->rq[(v->rq_head + v->rq_n++) % v->rq_cap] =
			(uint32_t)wr->wr_id;
	}
	return 0;
}

static uint32_t bd_xorshift(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* One frame for group @g into receive buffer @buf. */
static uint32_t bd_frame(struct bd_var *v, uint32_t buf, uint32_t g)
{
	uint8_t *f = v->ctx->rx.buf + (size_t)buf * v->ctx->rx.buf_size;
	uint32_t daddr = htonl(BD_GROUP_BASE + g);
	uint16_t csum = 0;

	memcpy(f, v->tmpl, sizeof(v->tmpl));
	qps_mcast_mac(daddr, f);
	memcpy(f + QPS_ETH_HLEN + 16, &daddr, 4);
	memcpy(f + QPS_ETH_HLEN + 10, &csum, 2);
	csum = qps_csum_fold(qps_csum_partial(f + QPS_ETH_HLEN, QPS_IP_HLEN,
					      0));
	memcpy(f + QPS_ETH_HLEN + 10, &csum, 2);
	return sizeof(v->tmpl);
}

static int bd_poll_cq(struct qps_cq *cq, int num, struct ibv_wc *wc)
{
	struct bd_var *v = bd_by_cq(cq);
	uint32_t buf;
	int n = 0;

	if (!v)
		return bd_vars[0].real->poll_cq(cq, num, wc);
	while (n < num && v->pending && v->rq_n) {
		buf = v->rq[v->rq_head];
		v->rq_head = (v->rq_head + 1) % v->rq_cap;
		v->rq_n--;
		v->pending--;
		memset(&wc[n], 0, sizeof(wc[n]));
		wc[n].wr_id = buf;
		wc[n].status = IBV_WC_SUCCESS;
		wc[n].opcode = IBV_WC_RECV;
		wc[n].qp_num = v->ctx->qp->qp_num;
		wc[n].byte_len = bd_frame(v, buf,
					  bd_xorshift(&v->rnd) % v->groups);
		n++;
	}
	return n;
}

struct bd_flow {
	struct qps_flow base;
};

static int bd_create_flow(struct qps_qp *qp, struct ibv_flow_attr *attr,
			  struct qps_flow **out)
{
	struct bd_flow *f = calloc(1, sizeof(*f));

	(void)attr;
	if (!f)
		return -ENOMEM;
	f->base.qp = qp;
	*out = &f->base;
	return 0;
}

static int bd_destroy_flow(struct qps_flow *flow)
{
	free(flow);
	return 0;
}

static int bd_mcast(struct qps_dev *dev, struct in_addr g, struct in_addr s)
{
	(void)dev;
	(void)g;
	(void)s;
	return 0;
}

static int bd_setup(struct bd_var *v, const char *wire)
{
	struct qps_ctx_attr attr = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			     QPS_CTX_ATTR_RX_DEPTH,
		.provider = "emu",
		.dev = wire,
		.rx_depth = 1024,
	};
	struct sockaddr_in any = {
		.sin_family = AF_INET, .sin_port = htons(BD_PORT),
	};
	struct qps_frame_hdr h;
	struct qps_mreq m;
	uint32_t i, g;
	int on = 1, ret;

	ret = qps_ctx_create(&attr, &v->ctx);
	if (ret < 0)
		return ret;
	/* Take over the receive side: the buffers the core posted to emu
	 * at creation are ours now (nothing is sent on this wire). */
	v->real = v->ctx->ops;
	v->ops = *v->real;
	v->ops.post_recv = bd_post_recv;
	v->ops.poll_cq = bd_poll_cq;
	v->ops.create_flow = bd_create_flow;
	v->ops.destroy_flow = bd_destroy_flow;
	v->ops.mcast_attach = bd_mcast;
	v->ops.mcast_detach = bd_mcast;
	v->rq_cap = v->ctx->rx.depth;
	v->rq = calloc(v->rq_cap, sizeof(*v->rq));
	if (!v->rq)
		return -ENOMEM;
	for (i = 0; i < v->rq_cap; i++)
		v->rq[i] = i;
	v->rq_n = v->rq_cap;
	v->rnd = 0x9e3779b9u;
	v->ctx->ops = &v->ops;

	memset(&h, 0, sizeof(h));
	memcpy(h.src_mac, "\x02\x51\x50\x00\x00\x63", 6);
	h.saddr = htonl(0xc6120063);	/* 198.18.0.99 */
	h.daddr = htonl(BD_GROUP_BASE);
	h.sport = htons(BD_PORT + 1);
	h.dport = htons(BD_PORT);
	h.ttl = 1;
	memset(v->tmpl + QPS_HDRS_LEN, 0x5a, BD_PAYLOAD);
	ret = qps_frame_build(v->tmpl, &h, BD_PAYLOAD);
	if (ret < 0)
		return ret;
	memset(v->tmpl + QPS_ETH_HLEN + QPS_IP_HLEN + 6, 0, 2); /* no UDP csum */

	for (i = 0; i < v->subs; i++) {
		ret = qps_ep_create(v->ctx, QPS_EP_DGRAM, &v->ep[i]);
		if (!ret)
			ret = qps_setopt(v->ep[i], QPS_OPT_REUSEADDR, &on,
					 sizeof(on));
		if (!ret)
			ret = qps_bind(v->ep[i], (struct sockaddr *)&any,
				       sizeof(any));
		for (g = 0; !ret && g < v->groups; g++) {
			memset(&m, 0, sizeof(m));
			m.group.s_addr = htonl(BD_GROUP_BASE + g);
			ret = qps_join(v->ep[i], &m, sizeof(m));
		}
		if (ret < 0)
			return ret;
	}
	return 0;
}

static void bd_teardown(struct bd_var *v)
{
	uint32_t i;

	if (!v->ctx)
		return;
	for (i = 0; i < v->subs; i++)
		if (v->ep[i])
			qps_ep_close(v->ep[i]);
	/* The context's own rules were made by emu: give it its table back. */
	if (v->real)
		v->ctx->ops = v->real;
	qps_ctx_destroy(v->ctx);
	v->ctx = NULL;
	free(v->rq);
	v->rq = NULL;
}

static double bd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* @pkts datagrams through variant @v; ns per datagram (total and in
 * progress), -1 when a datagram went missing. */
static int bd_run(struct bd_var *v, uint32_t pkts, double *ns,
		  double *demux_ns)
{
	uint8_t buf[64];
	double t0, t1, tp = 0;
	uint32_t done, i, k;

	t0 = bd_now();
	for (done = 0; done < pkts; done += BD_BATCH) {
		double a = bd_now();

		v->pending = BD_BATCH;
		qps_ctx_progress(v->ctx);
		tp += bd_now() - a;
		for (k = 0; k < v->subs; k++)
			for (i = 0; i < BD_BATCH; i++)
				if (qps_recv(v->ep[k], buf, sizeof(buf),
					     QPS_MSG_DONTWAIT) != BD_PAYLOAD)
					return -1;
	}
	t1 = bd_now();
	*ns = (t1 - t0) / done;
	*demux_ns = tp / done;
	return 0;
}

static int bd_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double bd_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bd_cmp);
	return n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int bd_receive_path(int json, int rounds, uint32_t pkts)
{
	struct qps_stats st;
	char wire[64];
	int r, i, p, ret = 0;
	double t = bd_now();

	snprintf(wire, sizeof(wire), "qpsbench-demux-%d", (int)getpid());
	for (i = 0; i < BD_VARIANTS && !ret; i++) {
		ret = bd_setup(&bd_vars[i], wire);
		if (ret < 0)
			fprintf(stderr, "qps_bench demux: setup of %u groups, "
				"%u subscribers: %s\n", bd_vars[i].groups,
				bd_vars[i].subs, strerror(-ret));
	}
	if (!json && !ret)
		printf("demux: %u datagrams per variant and round, %d rounds "
		       "(setup %.0f ms)\n", pkts, rounds, (bd_now() - t) / 1e6);
	for (r = -1; r < rounds && !ret; r++) {
		for (i = 0; i < BD_VARIANTS && !ret; i++) {
			struct bd_var *v = &bd_vars[(r + 1 + i) % BD_VARIANTS];
			double ns, dns;

			if (bd_run(v, pkts, &ns, &dns) < 0) {
				fprintf(stderr, "qps_bench demux: a datagram "
					"went missing\n");
				ret = -EIO;
			} else if (r >= 0) {	/* round -1 warms up */
				v->ns[r] = ns;
				v->demux_ns[r] = dns;
			}
		}
		for (i = 0; r >= 0 && i < BD_VARIANTS; i++)
			bd_vars[i].ratio[r] = bd_vars[i].ns[r] /
					      bd_vars[0].ns[r];
	}
	for (p = 0; p < BD_VARIANTS && !ret; p++) {
		struct bd_var *v = &bd_vars[p];
		double ns, dns, ratio;

		qps_ctx_stats(v->ctx, &st, sizeof(st));
		ns = bd_median(v->ns, rounds);
		dns = bd_median(v->demux_ns, rounds);
		ratio = bd_median(v->ratio, rounds);
		if (json)
			printf("{\"bench\":\"demux\",\"groups\":%u,"
			       "\"subscribers\":%u,\"ns_per_pkt\":%.1f,"
			       "\"progress_ns_per_pkt\":%.1f,"
			       "\"ratio_vs_1x1\":%.3f,\"early\":%llu,"
			       "\"fanout\":%llu,\"deliveries\":%llu,"
			       "\"rounds\":%d}\n", v->groups, v->subs, ns, dns,
			       ratio, (unsigned long long)st.rx_demux_early,
			       (unsigned long long)st.rx_demux_fanout,
			       (unsigned long long)st.rx_packets, rounds);
		else
			printf("  groups %5u subscribers %u: %7.1f ns/datagram "
			       "(progress %6.1f), x%.3f of 1x1; early %llu "
			       "fan-out %llu\n", v->groups, v->subs, ns, dns,
			       ratio, (unsigned long long)st.rx_demux_early,
			       (unsigned long long)st.rx_demux_fanout);
	}
	for (p = 0; p < BD_VARIANTS; p++)
		bd_teardown(&bd_vars[p]);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Ping-pong on a real emu wire.                                        */

#define PP_SERVER "198.18.0.2"
#define PP_CLIENT "198.18.0.1"
#define PP_GROUP "239.2.0.1"
#define PP_SPORT 9100
#define PP_CPORT 9101
#define PP_BLOCKS 20
#define PP_SPIN 4096	/* empty polls before yielding the CPU */

static int pp_ctx(const char *wire, const char *ip, unsigned short port,
		  struct qps_ctx **ctx, struct qps_ep **ep)
{
	struct qps_ctx_attr attr = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			     QPS_CTX_ATTR_ADDR,
		.provider = "emu",
		.dev = wire,
	};
	struct sockaddr_in sin = {
		.sin_family = AF_INET, .sin_port = htons(port),
	};
	int ret;

	inet_pton(AF_INET, ip, &attr.addr);
	ret = qps_ctx_create(&attr, ctx);
	if (ret < 0)
		return ret;
	ret = qps_ep_create(*ctx, QPS_EP_DGRAM, ep);
	if (!ret)
		ret = qps_bind(*ep, (struct sockaddr *)&sin, sizeof(sin));
	return ret;
}

/* The server: echo every datagram to its sender by unicast, busy
 * polling; an empty datagram ends it. */
static int pp_server(const char *wire, int wfd)
{
	struct qps_ctx *ctx = NULL;
	struct qps_ep *ep = NULL;
	struct sockaddr_in src;
	socklen_t sl;
	struct qps_mreq m;
	uint8_t buf[64];
	uint32_t idle = 0;
	ssize_t n;
	int ret;

	ret = pp_ctx(wire, PP_SERVER, PP_SPORT, &ctx, &ep);
	memset(&m, 0, sizeof(m));
	inet_pton(AF_INET, PP_GROUP, &m.group);
	if (!ret)
		ret = qps_join(ep, &m, sizeof(m));
	if (write(wfd, ret ? "E" : "R", 1) != 1 || ret)
		goto out;
	for (;;) {
		sl = sizeof(src);
		n = qps_recvfrom(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT,
				 (struct sockaddr *)&src, &sl);
		if (n == -EAGAIN) {
			/* Two spinning processes on a busy 2-core machine:
			 * let the peer run now and then. */
			if (++idle % PP_SPIN == 0)
				sched_yield();
			continue;
		}
		if (n <= 0)
			break;
		qps_sendto(ep, buf, (size_t)n, 0, (struct sockaddr *)&src, sl);
	}
out:
	if (ctx)
		qps_ctx_destroy(ctx);
	return ret ? 1 : 0;
}

/* @iters round trips to @dst; their half-RTTs in ns into @out. */
static int pp_block(struct qps_ep *ep, const struct sockaddr_in *dst,
		    uint32_t iters, uint32_t *seq, double *out)
{
	uint32_t i, got;
	double t0;
	ssize_t n;
	int64_t spins;

	for (i = 0; i < iters; i++) {
		++*seq;
		t0 = bd_now();
		n = qps_sendto(ep, seq, sizeof(*seq), 0,
			       (const struct sockaddr *)dst, sizeof(*dst));
		if (n != sizeof(*seq))
			return n < 0 ? (int)n : -EIO;
		for (spins = 0;; spins++) {
			n = qps_recv(ep, &got, sizeof(got), QPS_MSG_DONTWAIT);
			if (n == sizeof(got) && got == *seq)
				break;
			if (spins > 100000000)
				return -ETIMEDOUT;
			if (spins % PP_SPIN == PP_SPIN - 1)
				sched_yield();
		}
		out[i] = (bd_now() - t0) / 2;
	}
	return 0;
}

static int bd_pingpong(int json, uint32_t iters)
{
	struct sockaddr_in dst[2];
	struct qps_ctx *ctx = NULL;
	struct qps_ep *ep = NULL;
	double *half[2], med[2];
	const char *name[2] = { "multicast", "unicast" };
	uint32_t per = iters / PP_BLOCKS, seq = 0, b, k;
	int p2c[2], ret, st;
	char wire[64], c = 0;
	struct pollfd pf;
	pid_t pid;

	if (!per)
		per = 1;
	snprintf(wire, sizeof(wire), "qpsbench-pp-%d", (int)getpid());
	if (pipe(p2c) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(p2c[0]);
		_exit(pp_server(wire, p2c[1]));
	}
	close(p2c[1]);
	pf.fd = p2c[0];
	pf.events = POLLIN;
	ret = -EIO;
	if (poll(&pf, 1, 10000) != 1 || read(p2c[0], &c, 1) != 1 || c != 'R')
		goto out;
	ret = pp_ctx(wire, PP_CLIENT, PP_CPORT, &ctx, &ep);
	if (ret < 0)
		goto out;
	half[0] = calloc((size_t)per * PP_BLOCKS, sizeof(double));
	half[1] = calloc((size_t)per * PP_BLOCKS, sizeof(double));
	ret = -ENOMEM;
	if (!half[0] || !half[1])
		goto free;
	memset(dst, 0, sizeof(dst));
	dst[0].sin_family = dst[1].sin_family = AF_INET;
	dst[0].sin_port = dst[1].sin_port = htons(PP_SPORT);
	inet_pton(AF_INET, PP_GROUP, &dst[0].sin_addr);
	inet_pton(AF_INET, PP_SERVER, &dst[1].sin_addr);
	/* Warm up both paths, then alternate blocks. */
	ret = pp_block(ep, &dst[0], 200, &seq, half[0]);
	if (!ret)
		ret = pp_block(ep, &dst[1], 200, &seq, half[1]);
	for (b = 0; b < PP_BLOCKS && !ret; b++)
		for (k = 0; k < 2 && !ret; k++)
			ret = pp_block(ep, &dst[(b + k) & 1], per, &seq,
				       half[(b + k) & 1] + (size_t)b * per);
	if (ret < 0)
		goto free;
	for (k = 0; k < 2; k++)
		med[k] = bd_median(half[k], (int)(per * PP_BLOCKS));
	for (k = 0; k < 2; k++) {
		if (json)
			printf("{\"bench\":\"demux\",\"pingpong\":\"%s\","
			       "\"half_rtt_ns\":%.1f,\"iters\":%u}\n", name[k],
			       med[k], per * PP_BLOCKS);
		else
			printf("  ping-pong %-9s half-RTT %7.1f ns (median of "
			       "%u)\n", name[k], med[k], per * PP_BLOCKS);
	}
	if (json)
		printf("{\"bench\":\"demux\",\"pingpong_ratio\":%.3f}\n",
		       med[0] / med[1]);
	else
		printf("  multicast/unicast %.3f\n", med[0] / med[1]);
free:
	free(half[0]);
	free(half[1]);
	/* An empty datagram stops the server. */
	qps_sendto(ep, "", 0, 0, (struct sockaddr *)&dst[1], sizeof(dst[1]));
out:
	if (ctx)
		qps_ctx_destroy(ctx);
	close(p2c[0]);
	for (b = 0; b < 500; b++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return ret;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return ret < 0 ? ret : -ETIMEDOUT;
}

static int bd_usage(void)
{
	fprintf(stderr, "usage: qps_bench demux [--json] [--rounds R] "
		"[--pkts N] [--iters N] [--no-pingpong]\n");
	return 2;
}

int qps_bench_demux(int argc, char **argv)
{
	uint32_t pkts = 32 * 2048, iters = 10000;
	int json = 0, rounds = 15, pingpong = 1, i, ret;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--no-pingpong"))
			pingpong = 0;
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--pkts") && i + 1 < argc)
			pkts = (uint32_t)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = (uint32_t)strtoul(argv[++i], NULL, 0);
		else
			return bd_usage();
	}
	if (rounds < 1 || rounds > BD_ROUNDS_MAX || pkts < BD_BATCH ||
	    !iters)
		return bd_usage();
	pkts -= pkts % BD_BATCH;
	ret = bd_receive_path(json, rounds, pkts);
	if (!ret && pingpong)
		ret = bd_pingpong(json, iters);
	if (ret < 0) {
		fprintf(stderr, "qps_bench demux: %s\n", strerror(-ret));
		return 1;
	}
	return 0;
}
