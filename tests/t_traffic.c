// SPDX-License-Identifier: MIT
#include "t_traffic.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/emu.h"
#include "qps_int.h"

struct qps_ep *t_mkep(struct qps_ctx *ctx, const char *ip,
		      unsigned short port, int reuse)
{
	struct qps_ep *ep = NULL;
	struct sockaddr_in sin;

	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	T_EQ(qps_set_nonblock(ep, 1), 0);
	if (reuse)
		T_EQ(qps_setopt(ep, QPS_OPT_REUSEADDR, &reuse, sizeof(reuse)),
		     0);
	if (ip) {
		sin = t_sin(ip, port);
		T_EQ_FATAL(qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin)),
			   0);
	}
	return ep;
}

struct qps_mreq t_mreq(const char *group, const char *source)
{
	struct qps_mreq m;

	memset(&m, 0, sizeof(m));
	m.group.s_addr = t_ip4(group);
	if (source)
		m.source.s_addr = t_ip4(source);
	return m;
}

int t_join(struct qps_ep *ep, const char *group, const char *source)
{
	struct qps_mreq m = t_mreq(group, source);

	return qps_join(ep, &m, sizeof(m));
}

int t_leave(struct qps_ep *ep, const char *group, const char *source)
{
	struct qps_mreq m = t_mreq(group, source);

	return qps_leave(ep, &m, sizeof(m));
}

void t_send_seq(struct qps_ep *tx, const char *ip, unsigned short port,
		uint32_t tag, uint32_t first, uint32_t n, int more)
{
	struct sockaddr_in d = t_sin(ip, port);
	struct t_pkt p = { .tag = tag };
	uint32_t i;
	ssize_t r;

	for (i = 0; i < n; i++) {
		int fl = more && i + 1 < n ? QPS_MSG_MORE : 0;

		p.seq = first + i;
		/* Non-blocking: a full send queue is reaped and retried. */
		while ((r = qps_sendto(tx, &p, sizeof(p), fl,
				       (struct sockaddr *)&d,
				       sizeof(d))) == -EAGAIN)
			qps_ctx_progress(tx->ctx);
		T_EQ(r, sizeof(p));
	}
}

int t_wait_stats(struct qps_ctx *ctx, uint64_t want, size_t off)
{
	int64_t end = (int64_t)t_now_ms() + T_WAIT_MS;
	struct qps_stats st;
	uint64_t v;

	for (;;) {
		qps_ctx_progress(ctx);
		st = t_ctx_stats(ctx);
		memcpy(&v, (char *)&st + off, sizeof(v));
		if (v >= want)
			return 0;
		if ((int64_t)t_now_ms() > end)
			return -ETIMEDOUT;
		usleep(200);
	}
}

int t_drain(struct qps_ep *ep, uint32_t tag, uint8_t *seen, uint32_t n)
{
	struct t_pkt p;
	int got = 0;
	ssize_t r;

	while ((r = qps_recv(ep, &p, sizeof(p), QPS_MSG_DONTWAIT)) >= 0) {
		T_EQ(r, sizeof(p));
		got++;
		if (p.tag != tag || p.seq >= n) {
			CU_FAIL("datagram from an unexpected sender");
			continue;
		}
		seen[p.seq]++;
	}
	T_EQ(r, -EAGAIN);
	return got;
}

void t_all_once(const uint8_t *seen, uint32_t n)
{
	uint32_t i, bad = 0;

	for (i = 0; i < n; i++)
		bad += seen[i] != 1;
	T_EQ(bad, 0);
}

void t_drain_all_once(struct qps_ep *ep, uint32_t tag, uint32_t n)
{
	uint8_t *seen = calloc(n ? n : 1, 1);

	if (!seen)
		CU_FAIL_FATAL("out of memory for the seen table");
	T_EQ(t_drain(ep, tag, seen, n), n);
	t_all_once(seen, n);
	free(seen);
}

void t_drain_two_once(struct qps_ep *ep, uint32_t tag1, uint32_t tag2,
		      uint32_t n)
{
	uint8_t *seen = calloc(2 * (size_t)n + 1, 1);
	uint32_t got1 = 0, got2 = 0;
	struct t_pkt p;

	if (!seen)
		CU_FAIL_FATAL("out of memory for the seen table");
	while (qps_recv(ep, &p, sizeof(p), 0) > 0) {
		if (p.tag == tag1 && p.seq < n) {
			seen[p.seq]++;
			got1++;
		} else if (p.tag == tag2 && p.seq < n) {
			seen[n + p.seq]++;
			got2++;
		}
	}
	T_EQ(got1, n);
	T_EQ(got2, n);
	t_all_once(seen, n);
	t_all_once(seen + n, n);
	free(seen);
}

void t_all_buffers_home(struct qps_ctx *ctx)
{
	uint32_t i, held = 0;

	qps_mutex_lock(&ctx->rx.lock);
	for (i = 0; i < ctx->rx.depth; i++)
		held += ctx->rx.ref[i] != 0;
	qps_mutex_unlock(&ctx->rx.lock);
	T_EQ(held, 0);
}

void t_partition_holds(const struct qps_stats *st)
{
	T_EQ(st->rx_bad[QPS_RX_OK],
	     st->rx_demux_early + st->rx_demux_fanout +
	     st->rx_demux_connected + st->rx_demux_bound +
	     st->rx_no_endpoint);
}

uint32_t t_emu_mac_refs(struct qps_ctx *ctx)
{
	struct qps_emu_dev *dev = qps_emu_dev(ctx->dev);
	uint32_t i, n = 0;

	for (i = 0; i < QPS_EMU_MAX_MC; i++)
		n += dev->sp->mc[i].refcnt;
	return n;
}
