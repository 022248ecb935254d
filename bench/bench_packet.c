// SPDX-License-Identifier: MIT
/*
 * qps_bench packet MODE [--json] [options]: one measurement of the packet
 * provider's side; scripts/bench_packet.sh runs the modes side by side in
 * two network namespaces and prints the ratios.
 *
 *   tx-qps   --dev IF --dst IP [--port P] [--batch N] [--size B] [--secs S]
 *            qpsock sends of B-byte payloads; every N-th send goes without
 *            QPS_MSG_MORE, so N is the post list (WRs per doorbell)
 *   tx-raw   --dev IF --dst IP [--port P] [--batch N] [--size B] [--secs S]
 *            the provider alone: chains of N prebuilt WRs per post_send
 *            (one kick each), no core in the way
 *   tx-mmsg  --dst IP [--port P] [--batch N] [--size B] [--secs S]
 *            kernel UDP sendmmsg() of N datagrams per call
 *   pp       --dev IF --dst IP [--port P] [--size B] [--secs S]
 *            qpsock ping-pong with sockperf's header against a sockperf
 *            server or examples/qps_echo, busy-polling; half round trips
 *   bind     --dev IF [--batch N]
 *            N endpoints bound to ephemeral ports and closed, with the
 *            port held in the kernel (hold_port) and with the core's table
 *            alone (the op stubbed in a copy of the ops table),
 *            interleaved over 5 rounds: the kernel socket's cost per bind
 *   hold     --dev IF --port P [--secs S] [--no-hold]
 *            one endpoint bound to 0.0.0.0:P, draining what arrives for
 *            S seconds (the receiver of a tx-mmsg run from the peer): the
 *            kernel's per-datagram cost with and without the socket
 *
 * Output: one line "mode=... pps=..." (or "... lat_avg_us=...") or, with
 * --json, one JSON object.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <qpsock/qpsock.h>

#include "frames.h"
#include "provider.h"
#include "qps_int.h"
#include "qps_bench.h"

#define BP_MAX_BATCH 256
#define BP_MAX_SIZE 1472
#define BP_HDR 14
#define BP_MAX_SAMPLES (1u << 22)
#define BP_PP_TIMEOUT_NS 100000000ull
#define BP_WARMUP 1000

struct bp_opts {
	const char *mode, *dev;
	struct sockaddr_in dst;
	unsigned int batch, size;
	double secs;
	bool json, no_hold;
};

/* The provider measured: packet, or $QPS_BENCH_PROVIDER (scripts/
 * bench_xdp.sh runs the same modes on xdp). */
static const char *bp_provider(void)
{
	const char *p = getenv("QPS_BENCH_PROVIDER");

	return p && *p ? p : "packet";
}

static uint64_t bp_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int bp_usage(void)
{
	fprintf(stderr,
		"usage: qps_bench packet tx-qps|tx-raw|tx-mmsg|pp [--json] [--dev IF] "
		"--dst IP [--port P] [--batch N] [--size B] [--secs S]\n"
		"       qps_bench packet bind --dev IF [--batch N] [--json]\n"
		"       qps_bench packet hold --dev IF --port P [--secs S] "
		"[--no-hold] [--json]\n");
	return 2;
}

static int bp_parse(int argc, char **argv, struct bp_opts *o)
{
	unsigned long port = 9;
	int i;

	memset(o, 0, sizeof(*o));
	o->batch = 1;
	o->size = 64;
	o->secs = 1.0;
	o->dst.sin_family = AF_INET;
	if (argc < 2)
		return -1;
	o->mode = argv[1];
	for (i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--json")) {
			o->json = true;
			continue;
		}
		if (!strcmp(a, "--no-hold")) {
			o->no_hold = true;
			continue;
		}
		if (!v)
			return -1;
		i++;
		if (!strcmp(a, "--dev"))
			o->dev = v;
		else if (!strcmp(a, "--dst")) {
			if (inet_pton(AF_INET, v, &o->dst.sin_addr) != 1)
				return -1;
		} else if (!strcmp(a, "--port"))
			port = strtoul(v, NULL, 10);
		else if (!strcmp(a, "--batch"))
			o->batch = (unsigned int)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--size"))
			o->size = (unsigned int)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--secs"))
			o->secs = strtod(v, NULL);
		else
			return -1;
	}
	/* bind and hold have no destination; bind's batch is a count. */
	if (!strcmp(o->mode, "bind") || !strcmp(o->mode, "hold"))
		o->dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!strcmp(o->mode, "bind") && o->batch == 1)
		o->batch = BP_MAX_BATCH;
	if (!o->dst.sin_addr.s_addr || !port || port > 65535 || !o->batch ||
	    o->batch > BP_MAX_BATCH || o->size < BP_HDR ||
	    o->size > BP_MAX_SIZE || o->secs <= 0 || o->secs > 600)
		return -1;
	o->dst.sin_port = htons((uint16_t)port);
	return 0;
}

static int bp_ctx(const struct bp_opts *o, struct qps_ctx **ctx,
		  struct qps_ep **ep)
{
	struct qps_ctx_attr attr = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV,
		.provider = bp_provider(),
		.dev = o->dev,
	};
	int ret;

	if (!o->dev)
		return -EINVAL;
	ret = qps_ctx_create(&attr, ctx);
	if (ret < 0)
		return ret;
	ret = qps_ep_create(*ctx, QPS_EP_DGRAM, ep);
	if (!ret)
		ret = qps_connect(*ep, (const struct sockaddr *)&o->dst,
				  sizeof(o->dst));
	if (ret < 0)
		qps_ctx_destroy(*ctx);
	return ret;
}

static void bp_print_rate(const struct bp_opts *o, uint64_t pkts,
			  uint64_t ns, const struct qps_stats *st)
{
	double pps = ns ? (double)pkts * 1e9 / (double)ns : 0;
	double per_db = st && st->doorbells ?
			(double)st->wqes / (double)st->doorbells : 0;

	if (o->json)
		printf("{\"bench\":\"packet\",\"mode\":\"%s\",\"batch\":%u,"
		       "\"size\":%u,\"packets\":%llu,\"secs\":%.3f,"
		       "\"pps\":%.0f,\"wqes_per_doorbell\":%.2f}\n",
		       o->mode, o->batch, o->size, (unsigned long long)pkts,
		       (double)ns / 1e9, pps, per_db);
	else
		printf("mode=%s batch=%u size=%u packets=%llu secs=%.3f "
		       "pps=%.0f wqes_per_doorbell=%.2f\n", o->mode, o->batch,
		       o->size, (unsigned long long)pkts, (double)ns / 1e9,
		       pps, per_db);
}

static int bp_tx_qps(const struct bp_opts *o)
{
	static uint8_t buf[BP_MAX_SIZE];
	struct qps_stats st;
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	uint64_t t0, end, n = 0;
	ssize_t r;
	int ret;

	ret = bp_ctx(o, &ctx, &ep);
	if (ret < 0) {
		fprintf(stderr, "packet tx-qps: %s\n", strerror(-ret));
		return 1;
	}
	memset(buf, 0x41, sizeof(buf));
	t0 = bp_now();
	end = t0 + (uint64_t)(o->secs * 1e9);
	while (bp_now() < end) {
		unsigned int i;

		for (i = 0; i < o->batch; i++) {
			r = qps_send(ep, buf, o->size,
				     i + 1 < o->batch ? QPS_MSG_MORE : 0);
			if (r < 0) {
				fprintf(stderr, "packet tx-qps: %s\n",
					strerror((int)-r));
				qps_ctx_destroy(ctx);
				return 1;
			}
		}
		n += o->batch;
	}
	qps_ctx_progress(ctx);
	end = bp_now();
	qps_ctx_stats(ctx, &st, sizeof(st));
	bp_print_rate(o, n, end - t0, &st);
	qps_ctx_destroy(ctx);
	return 0;
}

struct bp_raw {
	const struct qps_provider_ops *P;
	struct qps_dev *dev;
	struct qps_dev_info info;
	struct qps_cq *scq, *rcq;
	struct qps_qp *qp;
	struct qps_mr *mr;
	uint8_t *frame;
};

static void bp_raw_close(struct bp_raw *r)
{
	if (r->qp)
		r->P->destroy_qp(r->qp);
	if (r->mr)
		r->P->dereg_mr(r->mr);
	if (r->scq)
		r->P->destroy_cq(r->scq);
	if (r->rcq)
		r->P->destroy_cq(r->rcq);
	if (r->dev)
		r->P->close(r->dev);
	free(r->frame);
}

static int bp_raw_open(const struct bp_opts *o, struct bp_raw *r, int *len)
{
	struct qps_dev_attr da = { .dev = o->dev };
	struct qps_qp_init_attr qa;
	struct qps_frame_hdr h;
	int ret;

	memset(r, 0, sizeof(*r));
	ret = qps_provider_find(bp_provider(), &r->P);
	if (!ret)
		ret = r->P->open(&da, &r->dev);
	if (ret < 0)
		return ret;
	r->dev->ops = r->P;
	r->P->query(r->dev, &r->info);
	memset(&h, 0, sizeof(h));
	ret = r->P->resolve(r->dev, o->dst.sin_addr, h.dst_mac);
	if (!ret)
		ret = r->P->create_cq(r->dev, 512, &r->scq);
	if (!ret)
		ret = r->P->create_cq(r->dev, 16, &r->rcq);
	if (ret < 0)
		return ret;
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RAW_PACKET;
	qa.send_cq = r->scq;
	qa.recv_cq = r->rcq;
	qa.cap.max_send_wr = 256;
	qa.cap.max_send_sge = 1;
	ret = r->P->create_qp(r->dev, &qa, &r->qp);
	if (ret < 0)
		return ret;
	r->frame = calloc(1, 2048);
	if (!r->frame)
		return -ENOMEM;
	memcpy(h.src_mac, r->info.mac, 6);
	h.saddr = r->info.addr.s_addr;
	h.daddr = o->dst.sin_addr.s_addr;
	h.sport = htons(4000);
	h.dport = o->dst.sin_port;
	memset(r->frame + QPS_HDRS_LEN, 0x41, o->size);
	*len = qps_frame_build(r->frame, &h, o->size);
	if (*len < 0)
		return *len;
	return r->P->reg_mr(r->dev, r->frame, 2048, &r->mr);
}

static int bp_tx_raw(const struct bp_opts *o)
{
	struct ibv_send_wr wr[BP_MAX_BATCH], *bad;
	struct ibv_sge sge;
	struct ibv_wc wc[64];
	struct qps_dev_counters dc;
	struct qps_stats st;
	struct bp_raw r;
	uint64_t t0, end, n = 0, inflight = 0;
	unsigned int i;
	int len, k, ret;

	ret = bp_raw_open(o, &r, &len);
	if (ret < 0) {
		fprintf(stderr, "packet tx-raw: %s\n", strerror(-ret));
		bp_raw_close(&r);
		return 1;
	}
	sge = (struct ibv_sge){ (uintptr_t)r.frame, (uint32_t)len,
				r.mr->lkey };
	for (i = 0; i < o->batch; i++)
		wr[i] = (struct ibv_send_wr){
			.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
			.next = i + 1 < o->batch ? &wr[i + 1] : NULL };
	t0 = bp_now();
	end = t0 + (uint64_t)(o->secs * 1e9);
	while (bp_now() < end) {
		while (inflight + o->batch > 256) {
			k = r.P->poll_cq(r.scq, 64, wc);
			inflight -= k > 0 ? (uint64_t)k : 0;
		}
		ret = r.P->post_send(r.qp, wr, &bad);
		if (ret < 0) {
			fprintf(stderr, "packet tx-raw: %s\n", strerror(-ret));
			break;
		}
		inflight += o->batch;
		n += o->batch;
	}
	while (inflight) {
		k = r.P->poll_cq(r.scq, 64, wc);
		inflight -= k > 0 ? (uint64_t)k : 0;
	}
	end = bp_now();
	r.P->counters(r.dev, &dc);
	memset(&st, 0, sizeof(st));
	st.wqes = dc.wqes;
	st.doorbells = dc.doorbells;
	bp_print_rate(o, n, end - t0, &st);
	bp_raw_close(&r);
	return ret < 0 ? 1 : 0;
}

static int bp_tx_mmsg(const struct bp_opts *o)
{
	static uint8_t buf[BP_MAX_SIZE];
	struct mmsghdr m[BP_MAX_BATCH];
	struct iovec iov[BP_MAX_BATCH];
	uint64_t t0, end, n = 0;
	unsigned int i;
	int fd, r;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)&o->dst,
			      sizeof(o->dst)) < 0) {
		perror("packet tx-mmsg");
		return 1;
	}
	memset(buf, 0x41, sizeof(buf));
	memset(m, 0, sizeof(m));
	for (i = 0; i < o->batch; i++) {
		iov[i].iov_base = buf;
		iov[i].iov_len = o->size;
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
	}
	t0 = bp_now();
	end = t0 + (uint64_t)(o->secs * 1e9);
	while (bp_now() < end) {
		r = sendmmsg(fd, m, o->batch, 0);
		if (r < 0 && errno != EINTR && errno != ENOBUFS &&
		    errno != EAGAIN) {
			perror("packet tx-mmsg: sendmmsg");
			close(fd);
			return 1;
		}
		n += r > 0 ? (uint64_t)r : 0;
	}
	bp_print_rate(o, n, bp_now() - t0, NULL);
	close(fd);
	return 0;
}

static int bp_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int bp_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void bp_put(uint8_t *p, uint64_t v, int bytes)
{
	int i;

	for (i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* One ping (sockperf header, flags CLIENT|PONG) and its pong; the round
 * trip in ns, or 0 when the pong did not come in time. */
static uint64_t bp_ping(struct qps_ep *ep, uint8_t *msg, uint8_t *rx,
			unsigned int size, uint64_t seq)
{
	uint64_t t0 = bp_now(), t;
	ssize_t r;

	bp_put(msg, seq, 8);
	if (qps_send(ep, msg, size, 0) != (ssize_t)size)
		return 0;
	for (;;) {
		r = qps_recv(ep, rx, BP_MAX_SIZE, QPS_MSG_DONTWAIT);
		t = bp_now();
		if (r == (ssize_t)size && !memcmp(rx, msg, 8))
			return t - t0;
		if (t - t0 > BP_PP_TIMEOUT_NS)
			return 0;
	}
}

static int bp_pp(const struct bp_opts *o)
{
	static uint8_t msg[BP_MAX_SIZE], rx[BP_MAX_SIZE];
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	uint64_t *s, end, seq = 1, lost = 0, sum = 0, rtt;
	size_t n = 0, i;
	int ret;

	ret = bp_ctx(o, &ctx, &ep);
	if (ret < 0) {
		fprintf(stderr, "packet pp: %s\n", strerror(-ret));
		return 1;
	}
	s = calloc(BP_MAX_SAMPLES, sizeof(*s));
	if (!s) {
		qps_ctx_destroy(ctx);
		return 1;
	}
	bp_put(msg + 8, 0x3, 2);
	bp_put(msg + 10, o->size, 4);
	for (i = 0; i < BP_WARMUP; i++)
		bp_ping(ep, msg, rx, o->size, seq++);
	end = bp_now() + (uint64_t)(o->secs * 1e9);
	while (bp_now() < end && n < BP_MAX_SAMPLES) {
		rtt = bp_ping(ep, msg, rx, o->size, seq++);
		if (!rtt) {
			lost++;
			continue;
		}
		s[n++] = rtt;
		sum += rtt;
	}
	qsort(s, n, sizeof(*s), bp_cmp);
	if (o->json)
		printf("{\"bench\":\"packet\",\"mode\":\"pp\",\"size\":%u,"
		       "\"samples\":%zu,\"lost\":%llu,\"lat_avg_us\":%.3f,"
		       "\"lat_p50_us\":%.3f,\"lat_p99_us\":%.3f}\n", o->size, n,
		       (unsigned long long)lost,
		       n ? (double)sum / (double)n / 2e3 : 0,
		       n ? (double)s[n / 2] / 2e3 : 0,
		       n ? (double)s[n * 99 / 100] / 2e3 : 0);
	else
		printf("mode=pp size=%u samples=%zu lost=%llu lat_avg_us=%.3f "
		       "lat_p50_us=%.3f lat_p99_us=%.3f\n", o->size, n,
		       (unsigned long long)lost,
		       n ? (double)sum / (double)n / 2e3 : 0,
		       n ? (double)s[n / 2] / 2e3 : 0,
		       n ? (double)s[n * 99 / 100] / 2e3 : 0);
	free(s);
	qps_ctx_destroy(ctx);
	return n ? 0 : 1;
}

/* The core's table alone: what a device that is not the host's does. */
static int bp_no_hold(struct qps_dev *dev, int fd, struct in_addr addr,
		      uint16_t *port, unsigned int flags)
{
	(void)dev;
	(void)fd;
	(void)addr;
	(void)port;
	(void)flags;
	return -EOPNOTSUPP;
}

static int bp_packet_ctx(const struct bp_opts *o, struct qps_ctx **ctx)
{
	struct qps_ctx_attr attr = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV,
		.provider = bp_provider(),
		.dev = o->dev,
	};

	return o->dev ? qps_ctx_create(&attr, ctx) : -EINVAL;
}

/* @n endpoints bound to port 0 then closed; ns per bind. */
static double bp_bind_round(struct qps_ctx *ctx, unsigned int n)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct qps_ep *ep[BP_MAX_BATCH];
	uint64_t t0, ns;
	unsigned int i;

	for (i = 0; i < n; i++)
		if (qps_ep_create(ctx, QPS_EP_DGRAM, &ep[i]) < 0)
			return -1;
	t0 = bp_now();
	for (i = 0; i < n; i++)
		if (qps_bind(ep[i], (struct sockaddr *)&any, sizeof(any)) < 0)
			return -1;
	ns = bp_now() - t0;
	for (i = 0; i < n; i++)
		qps_ep_close(ep[i]);
	return (double)ns / n;
}

static int bp_bind(const struct bp_opts *o)
{
	double held[5], table[5], h, t;
	struct qps_provider_ops stubbed;
	const struct qps_provider_ops *real;
	struct qps_ctx *ctx;
	int r, ret = bp_packet_ctx(o, &ctx);

	if (ret < 0) {
		fprintf(stderr, "packet bind: %s\n", strerror(-ret));
		return 1;
	}
	real = ctx->ops;
	stubbed = *real;
	stubbed.hold_port = bp_no_hold;
	for (r = 0; r < 5; r++) {
		ctx->ops = real;
		held[r] = bp_bind_round(ctx, o->batch);
		ctx->ops = &stubbed;
		table[r] = bp_bind_round(ctx, o->batch);
	}
	ctx->ops = real;
	qps_ctx_destroy(ctx);
	qsort(held, 5, sizeof(held[0]), bp_cmp_double);
	qsort(table, 5, sizeof(table[0]), bp_cmp_double);
	h = held[2];
	t = table[2];
	if (h < 0 || t < 0) {
		fprintf(stderr, "packet bind: a bind failed\n");
		return 1;
	}
	if (o->json)
		printf("{\"bench\":\"packet\",\"mode\":\"bind\","
		       "\"endpoints\":%u,\"held_ns_per_bind\":%.0f,"
		       "\"table_ns_per_bind\":%.0f,\"ratio\":%.2f}\n",
		       o->batch, h, t, t > 0 ? h / t : 0);
	else
		printf("mode=bind endpoints=%u held_ns=%.0f table_ns=%.0f "
		       "ratio=%.2f\n", o->batch, h, t, t > 0 ? h / t : 0);
	return 0;
}

static int bp_hold(const struct bp_opts *o)
{
	struct sockaddr_in any = { .sin_family = AF_INET,
				   .sin_port = o->dst.sin_port };
	struct qps_provider_ops stubbed;
	uint8_t buf[BP_MAX_SIZE];
	uint64_t end, n = 0;
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	int ret = bp_packet_ctx(o, &ctx);

	if (ret < 0) {
		fprintf(stderr, "packet hold: %s\n", strerror(-ret));
		return 1;
	}
	if (o->no_hold) {
		stubbed = *ctx->ops;
		stubbed.hold_port = bp_no_hold;
		ctx->ops = &stubbed;
	}
	ret = qps_ep_create(ctx, QPS_EP_DGRAM, &ep);
	if (!ret)
		ret = qps_bind(ep, (struct sockaddr *)&any, sizeof(any));
	if (ret < 0) {
		fprintf(stderr, "packet hold: %s\n", strerror(-ret));
		qps_ctx_destroy(ctx);
		return 1;
	}
	/* Ready: the peer starts sending now. */
	printf("holding\n");
	fflush(stdout);
	end = bp_now() + (uint64_t)(o->secs * 1e9);
	while (bp_now() < end)
		n += qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT) >= 0;
	if (o->json)
		printf("{\"bench\":\"packet\",\"mode\":\"hold\","
		       "\"held\":%s,\"received\":%llu}\n",
		       o->no_hold ? "false" : "true", (unsigned long long)n);
	else
		printf("mode=hold held=%d received=%llu\n", !o->no_hold,
		       (unsigned long long)n);
	qps_ctx_destroy(ctx);
	return 0;
}

int qps_bench_packet(int argc, char **argv)
{
	struct bp_opts o;

	if (bp_parse(argc, argv, &o) < 0)
		return bp_usage();
	if (!strcmp(o.mode, "tx-qps"))
		return bp_tx_qps(&o);
	if (!strcmp(o.mode, "tx-raw"))
		return bp_tx_raw(&o);
	if (!strcmp(o.mode, "tx-mmsg"))
		return bp_tx_mmsg(&o);
	if (!strcmp(o.mode, "pp"))
		return bp_pp(&o);
	if (!strcmp(o.mode, "bind"))
		return bp_bind(&o);
	if (!strcmp(o.mode, "hold"))
		return bp_hold(&o);
	return bp_usage();
}
