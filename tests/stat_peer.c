// SPDX-License-Identifier: MIT
/*
 * stat_peer - the process test_stat_e2e.sh looks at with qps_stat. Two
 * contexts on an emu wire: A sends, B receives.
 *
 *   stat_peer snapshot WIRE OUT READY
 *	unicast (a receive queue overflowed, a datagram truncated) and a
 *	multicast fan-out to three endpoints (one of them source-filtered);
 *	then, traffic stopped, writes what qps_ctx_stats and qps_ep_stats say
 *	to OUT as JSON, waits until both segments' snapshots are newer, creates
 *	READY and sleeps until SIGTERM.
 *   stat_peer flow WIRE READY
 *	creates READY and sends A -> B, receiving, until SIGTERM.
 *
 * Exit status 0 on SIGTERM, 1 on any failure (with a message).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "qps_int.h"
#include "stat_fields.h"

#define N_UCAST 100
#define N_FULL 10
#define FULL_RCVBUF 4
#define N_MCAST 50
#define MC_GROUP "239.1.2.3"
#define MC_PORT 7100

static volatile sig_atomic_t stop_flag;

static void on_term(int sig)
{
	(void)sig;
	stop_flag = 1;
}

#define CHECK(expr) do { \
	long long v_ = (long long)(expr); \
	if (v_ < 0) { \
		fprintf(stderr, "stat_peer: %s:%d: %s = %lld\n", __FILE__, \
			__LINE__, #expr, v_); \
		exit(1); \
	} \
} while (0)

static struct sockaddr_in sin_of(const char *ip, unsigned short port)
{
	struct sockaddr_in s;

	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

static struct qps_ctx *ctx_open(const char *wire, const char *ip)
{
	struct qps_ctx_attr a = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			     QPS_CTX_ATTR_ADDR,
		.provider = "emu",
		.dev = wire,
	};
	struct qps_ctx *ctx = NULL;

	inet_pton(AF_INET, ip, &a.addr);
	CHECK(qps_ctx_create(&a, &ctx));
	return ctx;
}

static struct qps_ep *ep_bound(struct qps_ctx *ctx, const char *ip,
			       unsigned short port, int reuse)
{
	struct sockaddr_in s = sin_of(ip, port);
	struct qps_ep *ep = NULL;
	int ms = 5000;

	CHECK(qps_ep_create(ctx, QPS_EP_DGRAM, &ep));
	if (reuse)
		CHECK(qps_setopt(ep, QPS_OPT_REUSEADDR, &reuse, sizeof(reuse)));
	CHECK(qps_bind(ep, (struct sockaddr *)&s, sizeof(s)));
	CHECK(qps_setopt(ep, QPS_OPT_RCVTIMEO, &ms, sizeof(ms)));
	return ep;
}

static void join(struct qps_ep *ep, const char *source)
{
	struct qps_mreq m;

	memset(&m, 0, sizeof(m));
	inet_pton(AF_INET, MC_GROUP, &m.group);
	if (source)
		inet_pton(AF_INET, source, &m.source);
	CHECK(qps_join(ep, &m, sizeof(m)));
}

static void recv_n(struct qps_ep *ep, int n, size_t len)
{
	char buf[2048];
	int i;

	for (i = 0; i < n; i++)
		CHECK(qps_recv(ep, buf, len, 0));
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void json_ctx(FILE *f, struct qps_ctx *ctx)
{
	struct qps_stats st;
	unsigned int i, k;
	uint32_t e;
	int first = 1;

	CHECK(qps_ctx_stats(ctx, &st, sizeof(st)));
	fprintf(f, "{\"ctx\":%u,\"counters\":{", ctx->stat.hdr->ctx_id);
	for (i = 0; i < sf_nfields; i++) {
		const struct sf_field *fl = &sf_fields[i];

		fprintf(f, "%s\"%s\":", i ? "," : "", fl->name);
		if (fl->n == 1) {
			fprintf(f, "%" PRIu64, sf_get(&st, fl, 0));
			continue;
		}
		fputc('[', f);
		for (k = 0; k < fl->n; k++)
			fprintf(f, "%s%" PRIu64, k ? "," : "",
				sf_get(&st, fl, k));
		fputc(']', f);
	}
	fputs("},\"endpoints\":[", f);
	for (e = 0; e < ctx->ept.max; e++) {
		struct qps_ep *ep = &ctx->ept.eps[e];
		struct qps_ep_counters c;

		if (qps_ep_stats(ep, &c, sizeof(c)) < 0)
			continue;
		fprintf(f, "%s{\"slot\":%u,\"priority\":%d,\"band\":%u,"
			"\"txq\":%d,\"rcvbuf\":%u,\"rxq_depth\":%u,"
			"\"rxq_hwm\":%u,\"rx_packets\":%" PRIu64
			",\"rx_bytes\":%" PRIu64 ",\"rx_queue_full\":%" PRIu64
			",\"rx_truncated\":%" PRIu64 ",\"rx_filtered\":%" PRIu64
			",\"tx_packets\":%" PRIu64 ",\"tx_bytes\":%" PRIu64
			",\"tx_drops\":%" PRIu64 ",\"ngroups\":%u}",
			first ? "" : ",", e, c.priority, c.band, c.txq,
			c.rcvbuf, c.rxq_depth, c.rxq_hwm, c.rx_packets,
			c.rx_bytes, c.rx_queue_full, c.rx_truncated,
			c.rx_filtered, c.tx_packets, c.tx_bytes, c.tx_drops,
			c.ngroups);
		first = 0;
	}
	fputs("]}", f);
}

/* Until the publisher has snapshot both contexts after @t (10 s at most):
 * qps_stat then reads what qps_ctx_stats said. */
static void wait_snap(struct qps_ctx *a, struct qps_ctx *b, uint64_t t)
{
	int i;

	for (i = 0; i < 1000; i++) {
		if (atomic_load(&a->stat.hdr->snap_ns) > t &&
		    atomic_load(&b->stat.hdr->snap_ns) > t)
			return;
		usleep(10000);
	}
	fprintf(stderr, "stat_peer: no snapshot after 10 s\n");
	exit(1);
}

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	close(fd);
}

static int snapshot(struct qps_ctx *a, struct qps_ctx *b, const char *out,
		    const char *ready)
{
	struct sockaddr_in dst = sin_of("198.18.0.2", 7000);
	struct sockaddr_in full = sin_of("198.18.0.2", 7001);
	struct sockaddr_in grp = sin_of(MC_GROUP, MC_PORT);
	struct qps_ep *tx, *u, *q, *m1, *m2, *m3;
	char payload[200];
	int i, rcvbuf = FULL_RCVBUF, prio = 6;
	uint64_t t;
	FILE *f;

	memset(payload, 'x', sizeof(payload));
	u = ep_bound(b, "198.18.0.2", 7000, 0);
	q = ep_bound(b, "198.18.0.2", 7001, 0);
	CHECK(qps_setopt(q, QPS_OPT_RCVBUF, &rcvbuf, sizeof(rcvbuf)));
	m1 = ep_bound(b, MC_GROUP, MC_PORT, 1);
	m2 = ep_bound(b, MC_GROUP, MC_PORT, 1);
	m3 = ep_bound(b, MC_GROUP, MC_PORT, 1);
	join(m1, NULL);
	join(m2, NULL);
	join(m3, "198.18.0.9");	/* not A: every datagram filtered */

	CHECK(qps_ep_create(a, QPS_EP_DGRAM, &tx));
	CHECK(qps_setopt(tx, QPS_OPT_PRIORITY, &prio, sizeof(prio)));
	CHECK(qps_connect(tx, (struct sockaddr *)&dst, sizeof(dst)));
	for (i = 0; i < N_UCAST; i++)
		CHECK(qps_send(tx, payload, 64 + (size_t)(i % 100),
			       i % 4 != 3 ? QPS_MSG_MORE : 0));
	CHECK(qps_flush(tx));
	recv_n(u, N_UCAST - 1, sizeof(payload));
	recv_n(u, 1, 10);	/* truncated */
	for (i = 0; i < N_FULL; i++)
		CHECK(qps_sendto(tx, payload, 32, 0, (struct sockaddr *)&full,
				 sizeof(full)));
	for (i = 0; i < N_MCAST; i++)
		CHECK(qps_sendto(tx, payload, 100, 0, (struct sockaddr *)&grp,
				 sizeof(grp)));
	recv_n(m1, N_MCAST, sizeof(payload));
	recv_n(m2, N_MCAST, sizeof(payload));
	/* Everything sent has arrived: the full queue took its share. */
	CHECK(qps_ctx_progress(b));
	CHECK(qps_ctx_progress(a));

	f = fopen(out, "w");
	if (!f) {
		perror(out);
		return 1;
	}
	t = realtime_ns();
	fprintf(f, "{\"pid\":%d,\"contexts\":[", (int)getpid());
	json_ctx(f, a);
	fputc(',', f);
	json_ctx(f, b);
	fputs("]}\n", f);
	fclose(f);
	wait_snap(a, b, t);
	touch(ready);
	while (!stop_flag)
		usleep(20000);
	(void)m3;
	return 0;
}

static int flow(struct qps_ctx *a, struct qps_ctx *b, const char *ready)
{
	struct sockaddr_in dst = sin_of("198.18.0.2", 7000);
	struct qps_ep *tx, *rx;
	char buf[256];
	int i, nb = 1;

	rx = ep_bound(b, "198.18.0.2", 7000, 0);
	CHECK(qps_setopt(rx, QPS_OPT_NONBLOCK, &nb, sizeof(nb)));
	CHECK(qps_ep_create(a, QPS_EP_DGRAM, &tx));
	CHECK(qps_connect(tx, (struct sockaddr *)&dst, sizeof(dst)));
	memset(buf, 'y', sizeof(buf));
	touch(ready);
	while (!stop_flag) {
		for (i = 0; i < 16; i++)
			if (qps_send(tx, buf, 128, i < 15 ? QPS_MSG_MORE : 0) <
			    0)
				break;
		while (qps_recv(rx, buf, sizeof(buf), 0) >= 0)
			;
		usleep(1000);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct qps_ctx *a, *b;
	int rc;

	if (argc < 4 || (strcmp(argv[1], "snapshot") == 0 && argc < 5)) {
		fprintf(stderr, "usage: stat_peer snapshot WIRE OUT READY | "
			"flow WIRE READY\n");
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	a = ctx_open(argv[2], "198.18.0.1");
	b = ctx_open(argv[2], "198.18.0.2");
	if (!strcmp(argv[1], "snapshot"))
		rc = snapshot(a, b, argv[3], argv[4]);
	else
		rc = flow(a, b, argv[3]);
	CHECK(qps_ctx_destroy(a));
	CHECK(qps_ctx_destroy(b));
	return rc;
}
