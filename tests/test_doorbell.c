// SPDX-License-Identifier: MIT
/*
 * Suite "doorbell": postponed doorbells and BlueFlame on the send path.
 *
 * Exact doorbell counts for MORE bursts, batches and single sends; the
 * direct path's BlueFlame choice (last WQE of a burst, only when small)
 * with identical bytes on the wire either way; no stranded packet (the
 * bounded delay, close, destroy, flush, progress); a full send queue in
 * the middle of a burst; qps_sendmmsg's contract; the emu cost model.
 * Every end-to-end case runs on both send paths (generic and direct).
 */
#include "t_util.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sq.h"
#include "emu/emu.h"

#define IP_A "198.18.0.1"
#define IP_B "198.18.0.2"
#define IP_C "198.18.0.3"
#define PORT_B 5000
#define PORT_B2 5001
#define PORT_C 6000
#define SINK "239.1.2.3"	/* a group nobody joined: frames go nowhere */
#define LONG_DELAY_US 1000000u

/* --- assertions that print both values -------------------------------- */

#define EQ T_EQ
#define EQ_FATAL T_EQ_FATAL
#define LE T_LE
#define GE T_GE

/* --- helpers ----------------------------------------------------------- */

/* A wire per test, so a failed test's leftovers never disturb the next. */
static char g_wire[64];

static struct qps_ctx *mkctx(const char *ip, uint32_t path, uint32_t delay_us,
			     uint32_t tx_depth)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, ip);
	struct qps_ctx *ctx = NULL;

	a.comp_mask |= QPS_CTX_ATTR_TX_PATH | QPS_CTX_ATTR_DB_DELAY;
	a.tx_path = path;
	a.db_delay_us = delay_us;
	if (tx_depth) {
		a.comp_mask |= QPS_CTX_ATTR_TX_DEPTH;
		a.tx_depth = tx_depth;
	}
	EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	if (path != QPS_TX_PATH_AUTO)
		EQ_FATAL(ctx->tx_path, path);
	return ctx;
}

static struct qps_ep *mkep(struct qps_ctx *ctx, const char *ip,
			   unsigned short port)
{
	return t_ep_bound(ctx, ip, port, 2000);
}

/* Register writes as the device saw them (doorbell only, BF only). */
static struct qps_emu_counters dev_ctrs(struct qps_ctx *ctx)
{
	struct qps_emu_counters c;

	EQ(qps_emu_counters_all(ctx->dev, &c), 0);
	return c;
}

/* Payload @i of a test: its index, then a pattern; @len >= 4 or 0. */
static void fill(uint8_t *p, size_t len, uint32_t i)
{
	size_t k;

	for (k = 0; k < len; k++)
		p[k] = (uint8_t)(i * 7 + k * 13);
	if (len >= 4)
		memcpy(p, &i, 4);
}

static ssize_t send_to(struct qps_ep *ep, const void *buf, size_t len,
		       int flags, const char *ip, unsigned short port)
{
	struct sockaddr_in d = t_sin(ip, port);

	return qps_sendto(ep, buf, len, flags, (struct sockaddr *)&d,
			  sizeof(d));
}

/* Receive datagram @i of @len bytes and check every byte. */
static void recv_check(struct qps_ep *ep, uint32_t i, size_t len)
{
	uint8_t got[2048], want[2048];
	ssize_t n = qps_recv(ep, got, sizeof(got), 0);

	EQ_FATAL(n, (ssize_t)len);
	fill(want, len, i);
	CU_ASSERT_FATAL(memcmp(got, want, len) == 0);
}

static double now_ms(void)
{
	return (double)qps_now_ns() / 1e6;
}

/* How many send queues the flows from port 4000 to @d[0..n-1] take. */
static uint32_t send_queues(struct qps_ctx *ctx,
			    const struct qps_ctx_info *info,
			    const struct sockaddr_in *const *d, uint32_t n)
{
	uint64_t used = 0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct qps_txq_tuple t = {
			.saddr = info->addr.s_addr,
			.daddr = d[i]->sin_addr.s_addr,
			.sport = htons(4000),
			.dport = d[i]->sin_port,
		};

		used |= 1ull << qps_txq_pick_hash(ctx->txq, &t);
	}
	return (uint32_t)__builtin_popcountll(used);
}

#define BOTH_PATHS(fn) \
	static void fn##_generic(void) \
	{ T_EXCLUDED_RETURN(); fn(QPS_TX_PATH_GENERIC); } \
	static void fn##_direct(void) \
	{ T_EXCLUDED_RETURN(); fn(QPS_TX_PATH_DIRECT); }

/* --- exact doorbell counts ---------------------------------------------- */

static void counts(uint32_t path)
{
	struct qps_ctx *a;
	struct qps_ep *tx;
	struct qps_msg msgs[64];
	struct sockaddr_in sink = t_sin(SINK, 9);
	struct qps_stats s0, s1;
	struct qps_emu_counters c0, c1;
	uint8_t buf[64];
	int i;

	t_wire_name(g_wire, sizeof(g_wire), "db-counts");
	a = mkctx(IP_A, path, LONG_DELAY_US, 0);
	tx = mkep(a, IP_A, 4000);

	fill(buf, sizeof(buf), 1);
	/* 32 sends with MORE, then one without: one doorbell. */
	s0 = t_ctx_stats(a);
	c0 = dev_ctrs(a);
	for (i = 0; i < 32; i++)
		EQ(send_to(tx, buf, 64, QPS_MSG_MORE, SINK, 9), 64);
	s1 = t_ctx_stats(a);
	EQ(s1.doorbells, s0.doorbells);		/* nothing rung yet */
	EQ(s1.wqes, s0.wqes);			/* and nothing sent */
	EQ(send_to(tx, buf, 64, 0, SINK, 9), 64);
	s1 = t_ctx_stats(a);
	c1 = dev_ctrs(a);
	EQ(s1.doorbells - s0.doorbells, 1);
	EQ(s1.tx_doorbells - s0.tx_doorbells, 1);
	EQ(s1.tx_flush_send - s0.tx_flush_send, 1);
	EQ(s1.wqes - s0.wqes, 33);
	EQ(s1.tx_wqes - s0.tx_wqes, 33);
	if (path == QPS_TX_PATH_DIRECT) {
		/* The last WQE of the burst went through BlueFlame. */
		EQ(c1.dev.bf_writes - c0.dev.bf_writes, 1);
		EQ(c1.dev.doorbells - c0.dev.doorbells, 0);
		EQ(s1.tx_bf - s0.tx_bf, 1);
	} else {
		EQ(c1.dev.bf_writes - c0.dev.bf_writes, 0);
		EQ(c1.dev.doorbells - c0.dev.doorbells, 1);
		EQ(s1.tx_bf, 0);
	}

	/* One batch of 64: one doorbell. */
	s0 = s1;
	for (i = 0; i < 64; i++) {
		msgs[i] = (struct qps_msg){ .buf = buf, .len = 64,
			.dest = (struct sockaddr *)&sink,
			.dest_len = sizeof(sink), .priority = -1,
			.result = -1 };
	}
	EQ(qps_sendmmsg(tx, msgs, 64, 0), 64);
	for (i = 0; i < 64; i++)
		EQ(msgs[i].result, 64);
	s1 = t_ctx_stats(a);
	EQ(s1.doorbells - s0.doorbells, 1);
	EQ(s1.tx_doorbells - s0.tx_doorbells, 1);
	EQ(s1.wqes - s0.wqes, 64);

	/* 1,000 sends without MORE: 1,000 doorbells. */
	s0 = s1;
	for (i = 0; i < 1000; i++)
		EQ_FATAL(send_to(tx, buf, 64, 0, SINK, 9), 64);
	s1 = t_ctx_stats(a);
	EQ(s1.doorbells - s0.doorbells, 1000);
	EQ(s1.tx_doorbells - s0.tx_doorbells, 1000);
	EQ(s1.wqes - s0.wqes, 1000);
	EQ(s1.tx_flush_send - s0.tx_flush_send, 1000);
	/* Doorbells per packet over the whole test: 1002 per 1097. */
	EQ(s1.tx_doorbells, 1002);
	EQ(s1.tx_db_ppm, 1002ull * 1000000 / 1097);
	EQ(s1.tx_wqes, 1097);
	EQ(s1.tx_errors, 0);
	EQ(qps_ctx_destroy(a), 0);
}
BOTH_PATHS(counts)

/* --- end to end, both paths ------------------------------------------- */

/* Bursts to three endpoints on two contexts, sizes 0..max, connected and
 * unconnected; every byte checked, in order; core and device agree. */
static void e2e(uint32_t path)
{
	struct qps_ctx *a, *b, *c;
	struct qps_ep *tx, *cx, *rb, *rb2, *rc;
	struct sockaddr_in db = t_sin(IP_B, PORT_B), db2 = t_sin(IP_B, PORT_B2);
	struct sockaddr_in dc = t_sin(IP_C, PORT_C);
	static uint8_t pay[48][1472];
	struct qps_msg msgs[48];
	struct qps_ctx_info info;
	struct qps_stats s;
	struct qps_emu_counters dv;
	const size_t sizes[] = { 0, 4, 18, 64, 100, 182, 183, 500, 1000, 1472 };
	uint32_t i, nb = 0, nb2 = 0, nc = 0, round, nq;

	t_wire_name(g_wire, sizeof(g_wire), "db-e2e");
	a = mkctx(IP_A, path, LONG_DELAY_US, 0);
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, 0);
	c = mkctx(IP_C, QPS_TX_PATH_AUTO, 0, 0);
	tx = mkep(a, IP_A, 4000);
	cx = mkep(a, IP_A, 4001);
	rb = mkep(b, IP_B, PORT_B);
	rb2 = mkep(b, IP_B, PORT_B2);
	rc = mkep(c, IP_C, PORT_C);

	EQ(qps_ctx_query(a, &info), 0);
	EQ(info.max_payload, 1472);
	EQ(qps_connect(cx, (struct sockaddr *)&dc, sizeof(dc)), 0);
	for (round = 0; round < 3; round++) {
		uint32_t base = round * 100;

		/* A batch across three destinations. */
		for (i = 0; i < 48; i++) {
			size_t len = sizes[(i + round) % 10];
			const struct sockaddr_in *d = i % 3 == 0 ? &db :
						      i % 3 == 1 ? &db2 : &dc;

			fill(pay[i], len, base + i);
			msgs[i] = (struct qps_msg){ .buf = pay[i], .len = len,
				.dest = (const struct sockaddr *)d,
				.dest_len = sizeof(*d), .priority = (int)(i % 16),
				.result = -1 };
		}
		EQ(qps_sendmmsg(tx, msgs, 48, 0), 48);
		for (i = 0; i < 48; i++) {
			size_t len = sizes[(i + round) % 10];

			EQ(msgs[i].result, (ssize_t)len);
			if (i % 3 == 0)
				recv_check(rb, base + i, len);
			else if (i % 3 == 1)
				recv_check(rb2, base + i, len);
			else
				recv_check(rc, base + i, len);
		}
		nb += 16;
		nb2 += 16;
		nc += 16;
		/* A MORE burst on the connected endpoint. */
		for (i = 0; i < 20; i++) {
			size_t len = sizes[i % 10];
			uint8_t p[1472];

			fill(p, len, base + 50 + i);
			EQ(qps_send(cx, p, len, i < 19 ? QPS_MSG_MORE : 0),
			   (ssize_t)len);
		}
		for (i = 0; i < 20; i++)
			recv_check(rc, base + 50 + i, sizes[i % 10]);
		nc += 20;
	}
	EQ(qps_recv(rb, pay[0], 8, QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(qps_recv(rc, pay[0], 8, QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(qps_ctx_progress(a) >= 0, 1);
	s = t_ctx_stats(a);
	dv = dev_ctrs(a);
	EQ(s.tx_packets, nb + nb2 + nc);
	EQ(s.tx_errors, 0);
	/* The core's view of the send queue is the device's. */
	EQ(s.tx_wqes, s.wqes);
	EQ(s.tx_doorbells, s.doorbells);
	EQ(s.tx_bf, s.bf_writes);
	EQ(s.tx_doorbells, dv.dev.doorbells + dv.dev.bf_writes);
	/* Three MORE bursts, and three batches that each ring every send
	 * queue they wrote to once: the three flows may take different send
	 * QPs (hash policy; how many depends on the context's num_txq). */
	nq = send_queues(a, &info, (const struct sockaddr_in *[]){ &db, &db2,
			 &dc }, 3);
	EQ(s.tx_doorbells, 3 * nq + 3);
	EQ(s.tx_bf, path == QPS_TX_PATH_DIRECT ? 3 * nq + 3 : 0);
	EQ(dv.malformed, 0);
	EQ(dv.bf_bad, 0);
	EQ(s.dev_tx_drops, 0);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
	EQ(qps_ctx_destroy(c), 0);
}
BOTH_PATHS(e2e)

/* --- no stranded packet ------------------------------------------------- */

/* MORE on the last send, then silence: the flusher rings within the
 * bounded delay, and not before it. */
static void stranding(uint32_t path)
{
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx;
	uint8_t p[64];
	double t0, dt;

	t_wire_name(g_wire, sizeof(g_wire), "db-strandin");
	a = mkctx(IP_A, path, 200000, 0);	/* 200 ms */
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, 0);
	tx = mkep(a, IP_A, 4000);
	rx = mkep(b, IP_B, PORT_B);

	fill(p, 64, 7);
	t0 = now_ms();
	EQ(send_to(tx, p, 64, QPS_MSG_MORE, IP_B, PORT_B), 64);
	EQ(t_ctx_stats(a).doorbells, 0);
	t_sleep_ms(20);
	/* Not yet: the delay is a bound, and nothing else rang. */
	EQ(qps_recv(rx, p, sizeof(p), QPS_MSG_DONTWAIT), -EAGAIN);
	recv_check(rx, 7, 64);
	dt = now_ms() - t0;
	GE(dt, 195.0);
	LE(dt, 2000.0);
	EQ(t_ctx_stats(a).tx_flush_timer, 1);
	EQ(t_ctx_stats(a).doorbells, 1);
	EQ(qps_ctx_destroy(a), 0);

	/* The default delay (tens of us): delivered well within 0.5 s even
	 * on a loaded machine. Then let the flusher go idle (it lingers
	 * 64 periods) and check that the next burst wakes it. */
	a = mkctx(IP_A, path, QPS_DB_DELAY_DEFAULT_US, 0);
	tx = mkep(a, IP_A, 4000);
	for (int k = 0; k < 2; k++) {
		fill(p, 64, 20u + (uint32_t)k);
		t0 = now_ms();
		EQ(send_to(tx, p, 64, QPS_MSG_MORE, IP_B, PORT_B), 64);
		recv_check(rx, 20u + (uint32_t)k, 64);
		LE(now_ms() - t0, 500.0);
		EQ(t_ctx_stats(a).tx_flush_timer, (uint64_t)k + 1);
		EQ(t_ctx_stats(a).tx_doorbells, (uint64_t)k + 1);
		for (int w = 0; w < 200 &&
		     !__atomic_load_n(&a->db_timer.idle, __ATOMIC_SEQ_CST); w++)
			t_sleep_ms(5);
		EQ(__atomic_load_n(&a->db_timer.idle, __ATOMIC_SEQ_CST), 1);
	}
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(stranding)

/* Close, destroy, flush and progress ring a postponed doorbell at once
 * (the delay is 1 s, so the flusher is not what rang). */
static void flush_points(uint32_t path)
{
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx;
	struct qps_stats s0, s1;
	uint8_t p[100];

	t_wire_name(g_wire, sizeof(g_wire), "db-flush_po");
	a = mkctx(IP_A, path, LONG_DELAY_US, 0);
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, 0);
	tx = mkep(a, IP_A, 4000);
	rx = mkep(b, IP_B, PORT_B);

	/* Explicit flush, endpoint and context. */
	EQ(qps_flush(tx), 0);
	EQ(qps_ctx_flush(a), 0);
	fill(p, 100, 1);
	EQ(send_to(tx, p, 100, QPS_MSG_MORE, IP_B, PORT_B), 100);
	fill(p, 100, 2);
	EQ(send_to(tx, p, 100, QPS_MSG_MORE, IP_B, PORT_B), 100);
	EQ(qps_recv(rx, p, sizeof(p), QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(qps_flush(tx), 2);
	EQ(qps_flush(tx), 0);
	recv_check(rx, 1, 100);
	recv_check(rx, 2, 100);
	fill(p, 100, 3);
	EQ(send_to(tx, p, 100, QPS_MSG_MORE, IP_B, PORT_B), 100);
	EQ(qps_ctx_flush(a), 1);
	recv_check(rx, 3, 100);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_flush_explicit, 2);

	/* Progress. */
	s0 = s1;
	fill(p, 100, 4);
	EQ(send_to(tx, p, 100, QPS_MSG_MORE, IP_B, PORT_B), 100);
	EQ(qps_ctx_progress(a) >= 0, 1);
	recv_check(rx, 4, 100);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_flush_poll - s0.tx_flush_poll, 1);

	/* A receive call on the sending context. */
	s0 = s1;
	fill(p, 100, 5);
	EQ(send_to(tx, p, 100, QPS_MSG_MORE, IP_B, PORT_B), 100);
	EQ(qps_recv(tx, p, sizeof(p), QPS_MSG_DONTWAIT), -EAGAIN);
	recv_check(rx, 5, 100);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_flush_poll - s0.tx_flush_poll, 1);

	/* Endpoint close. */
	s0 = s1;
	fill(p, 100, 6);
	EQ(send_to(tx, p, 100, QPS_MSG_MORE, IP_B, PORT_B), 100);
	EQ(qps_ep_close(tx), 0);
	EQ(qps_recv(rx, p, sizeof(p), QPS_MSG_DONTWAIT), 100);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_flush_close - s0.tx_flush_close, 1);
	EQ(s1.tx_flush_poll - s0.tx_flush_poll, 0);
	EQ(s1.tx_flush_timer, 0);

	/* Context destroy. */
	tx = mkep(a, IP_A, 4000);
	fill(p, 100, 7);
	EQ(send_to(tx, p, 100, QPS_MSG_MORE, IP_B, PORT_B), 100);
	EQ(qps_ctx_destroy(a), 0);
	recv_check(rx, 7, 100);

	/* Delay 0: MORE never outlives the call. */
	a = mkctx(IP_A, path, 0, 0);
	tx = mkep(a, IP_A, 4000);
	fill(p, 100, 8);
	EQ(send_to(tx, p, 100, QPS_MSG_MORE, IP_B, PORT_B), 100);
	EQ(qps_recv(rx, p, sizeof(p), QPS_MSG_DONTWAIT), 100);
	EQ(t_ctx_stats(a).tx_flush_send, 1);
	EQ(a->db_timer.started, 0);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(flush_points)

/* --- a full send queue in the middle of a burst -------------------------- */

static void full_mid_burst(uint32_t path)
{
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx;
	struct sockaddr_in db = t_sin(IP_B, PORT_B);
	static uint8_t pay[64][64];
	struct qps_msg msgs[64];
	struct qps_stats s0, s1;
	uint32_t i, sent;
	int r, steps = 0;

	t_wire_name(g_wire, sizeof(g_wire), "db-full_mid");
	a = mkctx(IP_A, path, LONG_DELAY_US, 16);
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, 0);
	tx = mkep(a, IP_A, 4000);
	rx = mkep(b, IP_B, PORT_B);

	/* 64 MORE sends through 16 slots: rung every 16, nothing lost. */
	s0 = t_ctx_stats(a);
	for (i = 0; i < 64; i++) {
		fill(pay[i], 64, i);
		EQ_FATAL(send_to(tx, pay[i], 64, i < 63 ? QPS_MSG_MORE : 0,
				 IP_B, PORT_B), 64);
	}
	for (i = 0; i < 64; i++)
		recv_check(rx, i, 64);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_doorbells - s0.tx_doorbells, 4);
	EQ(s1.tx_flush_full - s0.tx_flush_full, 3);
	EQ(s1.tx_flush_send - s0.tx_flush_send, 1);

	/* The same as one batch. */
	s0 = s1;
	for (i = 0; i < 64; i++) {
		fill(pay[i], 64, 100 + i);
		msgs[i] = (struct qps_msg){ .buf = pay[i], .len = 64,
			.dest = (struct sockaddr *)&db, .dest_len = sizeof(db),
			.priority = -1 };
	}
	EQ(qps_sendmmsg(tx, msgs, 64, 0), 64);
	for (i = 0; i < 64; i++)
		recv_check(rx, 100 + i, 64);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_doorbells - s0.tx_doorbells, 4);
	EQ(s1.tx_flush_full - s0.tx_flush_full, 3);

	/* A device that does not run (stepping): the queue fills, the
	 * doorbell is rung, the non-blocking batch stops with -EAGAIN and
	 * tells which messages were not tried; once the device runs, the
	 * rest goes, in order. */
	qps_emu_set_stepping(a->dev, true);
	s0 = t_ctx_stats(a);
	for (i = 0; i < 64; i++) {
		fill(pay[i], 64, 200 + i);
		msgs[i] = (struct qps_msg){ .buf = pay[i], .len = 64,
			.dest = (struct sockaddr *)&db, .dest_len = sizeof(db),
			.priority = -1 };
	}
	r = qps_sendmmsg(tx, msgs, 64, QPS_MSG_DONTWAIT);
	EQ_FATAL(r, 16);
	EQ(msgs[15].result, 64);
	EQ(msgs[16].result, -EAGAIN);
	EQ(msgs[17].result, -ECANCELED);
	EQ(msgs[63].result, -ECANCELED);
	s1 = t_ctx_stats(a);
	EQ(s1.wqes - s0.wqes, 0);		/* the device has not run */
	EQ(s1.tx_wqes - s0.tx_wqes, 16);
	GE(s1.tx_flush_full - s0.tx_flush_full, 1);
	EQ(qps_recv(rx, pay[0], 64, QPS_MSG_DONTWAIT), -EAGAIN);
	sent = (uint32_t)r;
	while (sent < 64 && steps < 100) {
		steps++;
		EQ(qps_emu_step(a->dev, 0) > 0, 1);
		r = qps_sendmmsg(tx, msgs + sent, 64 - sent, QPS_MSG_DONTWAIT);
		if (r > 0)
			sent += (uint32_t)r;
		else
			EQ(r, -EAGAIN);
	}
	EQ(sent, 64);
	qps_emu_set_stepping(a->dev, false);
	for (i = 0; i < 64; i++)
		recv_check(rx, 200 + i, 64);
	EQ(qps_recv(rx, pay[0], 64, QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(t_ctx_stats(a).tx_errors, 0);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(full_mid_burst)

/* --- completion moderation (tx_signal) ------------------------------------ */

/* A context with one or two send QPs and @sig as tx_signal (0: default). */
static struct qps_ctx *mkctx_sig(uint32_t path, uint32_t sig, uint32_t nq)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, IP_A);
	struct qps_ctx *ctx = NULL;

	a.comp_mask |= QPS_CTX_ATTR_TX_PATH | QPS_CTX_ATTR_DB_DELAY |
		       QPS_CTX_ATTR_NUM_TXQ;
	a.tx_path = path;
	a.db_delay_us = LONG_DELAY_US;
	a.num_txq = nq;
	if (sig) {
		a.comp_mask |= QPS_CTX_ATTR_TX_SIGNAL;
		a.tx_signal = sig;
	}
	EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	EQ_FATAL(ctx->tx_path, path);
	EQ_FATAL(ctx->tx_signal, sig ? sig : QPS_TX_SIGNAL_DEFAULT);
	return ctx;
}

/* Every slot of @sq is back and its QP has no datagram in flight. */
static void all_back(struct qps_ctx *ctx, struct qps_sq *sq)
{
	uint32_t enq, done;

	qps_alock_lock(&sq->lock);
	EQ(sq->nfree, ctx->tx_depth);
	EQ(sq->inflight, 0);
	EQ(sq->post_head - sq->post_tail, 0);
	EQ(sq->unrung, 0);
	qps_alock_unlock(&sq->lock);
	EQ(qps_txq_qp_counts(ctx->txq, (int)sq->idx, &enq, &done), 0);
	EQ(enq, done);
}

/*
 * Which of the @n WQEs written on @sq from posted position @pos (direct:
 * from ring index @ind) asked for a completion, as the device was given
 * them: the WR flags (generic) or the ctrl segment's CQ_UPDATE (direct).
 * Bit i for the i-th WQE.
 */
static uint64_t sig_mask(struct qps_ctx *ctx, struct qps_sq *sq, uint32_t pos,
			 uint32_t ind, uint32_t n)
{
	uint64_t m = 0;
	uint32_t i;

	for (i = 0; i < n && i < 64; i++) {
		uint32_t slot = sq->posted[(pos + i) & sq->post_mask];
		bool sig;

		if (ctx->tx_path == QPS_TX_PATH_DIRECT) {
			const struct qps_mlx4_sq *r = &sq->mlx4.m;
			const uint8_t *w = (const uint8_t *)r->buf +
				((size_t)((ind + i) & (r->wqe_cnt - 1)) <<
				 r->wqe_shift);
			uint32_t fl;

			memcpy(&fl, w + 8, 4);	/* srcrb_flags */
			sig = be32toh(fl) & MLX4_WQE_CTRL_CQ_UPDATE;
		} else {
			sig = sq->wr[slot].send_flags & IBV_SEND_SIGNALED;
		}
		if (sig)
			m |= 1ull << i;
	}
	return m;
}

/* A destination port whose flow from port 4000 takes send QP @q. */
static unsigned short port_for_queue(struct qps_ctx *ctx, uint32_t q)
{
	struct qps_txq_tuple t = {
		.saddr = ctx->info.addr.s_addr,
		.daddr = t_ip4(SINK),
		.sport = htons(4000),
	};
	unsigned short port;

	for (port = 9; port < 9 + 4096; port++) {
		t.dport = htons(port);
		if (qps_txq_pick_hash(ctx->txq, &t) == (int)q)
			return port;
	}
	CU_FAIL_FATAL("no port hashes to the send queue");
	return 0;
}

static void batch_to(struct qps_msg *m, uint32_t n, const void *buf,
		     const struct sockaddr_in *d)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		m[i] = (struct qps_msg){ .buf = buf, .len = 64,
			.dest = (const struct sockaddr *)d,
			.dest_len = sizeof(*d), .priority = -1,
			.result = -1 };
}

/* Bursts of 64 with tx_signal 16 and 1; MORE sends then a flush. */
static void moderation(uint32_t path)
{
	struct qps_ctx *a;
	struct qps_ep *tx;
	struct qps_sq *sq;
	struct qps_msg msgs[64];
	struct sockaddr_in sink = t_sin(SINK, 9);
	struct qps_stats s0, s1;
	uint32_t pos, ind;
	uint8_t buf[64];
	int i, round;

	t_wire_name(g_wire, sizeof(g_wire), "db-moderate");
	fill(buf, sizeof(buf), 1);

	/* tx_signal 16: four completions per 64, every slot back, three
	 * times over. */
	a = mkctx_sig(path, 16, 1);
	sq = &a->sq[0];
	tx = mkep(a, IP_A, 4000);
	batch_to(msgs, 64, buf, &sink);
	for (round = 0; round < 3; round++) {
		s0 = t_ctx_stats(a);
		pos = sq->post_head;
		ind = sq->mlx4.head;
		EQ_FATAL(qps_sendmmsg(tx, msgs, 64, 0), 64);
		EQ(sig_mask(a, sq, pos, ind, 64),
		   1ull << 15 | 1ull << 31 | 1ull << 47 | 1ull << 63);
		GE(qps_ctx_progress(a), 64);
		s1 = t_ctx_stats(a);
		EQ(s1.tx_signaled - s0.tx_signaled, 4);
		EQ(s1.tx_cqes - s0.tx_cqes, 4);	/* the device's */
		EQ(s1.tx_reaped - s0.tx_reaped, 64);
		EQ(s1.wqes - s0.wqes, 64);
		EQ(s1.tx_errors, 0);
		all_back(a, sq);
	}
	EQ(t_ctx_stats(a).tx_reaped, 3 * 64);

	/* 20 with MORE, then a flush: the 16th and the tail (20th). */
	s0 = t_ctx_stats(a);
	pos = sq->post_head;
	ind = sq->mlx4.head;
	for (i = 0; i < 20; i++)
		EQ_FATAL(send_to(tx, buf, 64, QPS_MSG_MORE, SINK, 9), 64);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_signaled - s0.tx_signaled, 1);	/* the 16th, so far */
	EQ(s1.tx_cqes - s0.tx_cqes, 0);		/* nothing rung */
	EQ(qps_ctx_flush(a), 20);
	EQ(sig_mask(a, sq, pos, ind, 20), 1ull << 15 | 1ull << 19);
	GE(qps_ctx_progress(a), 20);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_signaled - s0.tx_signaled, 2);
	EQ(s1.tx_cqes - s0.tx_cqes, 2);
	EQ(s1.tx_reaped - s0.tx_reaped, 20);
	all_back(a, sq);

	/* A few single sends with MORE: only the tail asks. */
	s0 = t_ctx_stats(a);
	pos = sq->post_head;
	ind = sq->mlx4.head;
	for (i = 0; i < 5; i++)
		EQ_FATAL(send_to(tx, buf, 64, QPS_MSG_MORE, SINK, 9), 64);
	EQ(qps_flush(tx), 5);
	EQ(sig_mask(a, sq, pos, ind, 5), 1ull << 4);
	GE(qps_ctx_progress(a), 5);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_signaled - s0.tx_signaled, 1);
	EQ(s1.tx_cqes - s0.tx_cqes, 1);
	EQ(s1.tx_reaped - s0.tx_reaped, 5);
	all_back(a, sq);

	/* Sends without MORE: each is the tail of its doorbell. */
	s0 = t_ctx_stats(a);
	for (i = 0; i < 10; i++)
		EQ_FATAL(send_to(tx, buf, 64, 0, SINK, 9), 64);
	GE(qps_ctx_progress(a), 10);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_signaled - s0.tx_signaled, 10);
	EQ(s1.tx_reaped - s0.tx_reaped, 10);
	all_back(a, sq);
	EQ(qps_ctx_destroy(a), 0);

	/* tx_signal 1: every WQE asks. */
	a = mkctx_sig(path, 1, 1);
	sq = &a->sq[0];
	tx = mkep(a, IP_A, 4000);
	s0 = t_ctx_stats(a);
	pos = sq->post_head;
	ind = sq->mlx4.head;
	EQ_FATAL(qps_sendmmsg(tx, msgs, 64, 0), 64);
	EQ(sig_mask(a, sq, pos, ind, 64), ~0ull);
	GE(qps_ctx_progress(a), 64);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_signaled - s0.tx_signaled, 64);
	EQ(s1.tx_cqes - s0.tx_cqes, 64);
	EQ(s1.tx_reaped - s0.tx_reaped, 64);
	all_back(a, sq);
	EQ(qps_ctx_destroy(a), 0);
}
BOTH_PATHS(moderation)

/*
 * A QP that fails in the middle of a moderated batch: the device runs 10
 * of 20 WQEs (tx_signal 4: CQEs for the 4th and 8th; the 9th and 10th
 * completed without one), then the QP goes to the error state and the
 * other 10 are flushed, each with its own error CQE. Everything is reaped,
 * 10 errors, no slot lost. Send QP 1 of two, so the receiving QP 0 stays
 * up.
 */
static void moderation_error(uint32_t path)
{
	struct qps_ctx *a;
	struct qps_ep *tx;
	struct qps_sq *sq;
	struct qps_msg msgs[20];
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct sockaddr_in d;
	struct qps_stats s0, s1;
	uint8_t buf[64];
	int n, tries;

	t_wire_name(g_wire, sizeof(g_wire), "db-mod_err");
	a = mkctx_sig(path, 4, 2);
	sq = &a->sq[1];
	tx = mkep(a, IP_A, 4000);
	d = t_sin(SINK, port_for_queue(a, 1));
	fill(buf, sizeof(buf), 2);
	batch_to(msgs, 20, buf, &d);

	qps_emu_set_stepping(a->dev, true);
	s0 = t_ctx_stats(a);
	EQ_FATAL(qps_sendmmsg(tx, msgs, 20, 0), 20);
	EQ(sq->inflight, 20);
	EQ(qps_emu_step(a->dev, 10), 10);
	EQ(qps_ctx_progress(a), 8);		/* up to the 8th's CQE */
	EQ(sq->inflight, 12);
	EQ_FATAL(a->ops->modify_qp(sq->qp, &qa, IBV_QP_STATE), 0);
	qps_emu_set_stepping(a->dev, false);
	/* The flush is reaped by progress (and the QP may be brought back
	 * by it); wait for the last of it. */
	for (tries = 0; tries < 200 && t_ctx_stats(a).tx_reaped -
	     s0.tx_reaped < 20; tries++) {
		n = qps_ctx_progress(a);
		GE(n, 0);
		if (!n)
			t_sleep_ms(1);
	}
	s1 = t_ctx_stats(a);
	EQ(s1.tx_reaped - s0.tx_reaped, 20);
	EQ(s1.tx_errors - s0.tx_errors, 10);	/* the 11th..20th */
	EQ(s1.tx_signaled - s0.tx_signaled, 5);	/* 4, 8, 12, 16, 20 */
	EQ(s1.tx_cqes - s0.tx_cqes, 12);	/* 2 + 10 errors */
	all_back(a, sq);
	all_back(a, &a->sq[0]);
	EQ(qps_ctx_destroy(a), 0);
}
BOTH_PATHS(moderation_error)

/* tx_signal is 1..tx_depth; the default is QPS_TX_SIGNAL_DEFAULT. */
static void moderation_attr(void)
{
	struct qps_ctx_attr a;
	struct qps_ctx *ctx = NULL;

	T_EXCLUDED_RETURN();
	t_wire_name(g_wire, sizeof(g_wire), "db-mod_attr");
	a = t_emu_attr(g_wire, IP_A);
	a.comp_mask |= QPS_CTX_ATTR_TX_SIGNAL | QPS_CTX_ATTR_TX_DEPTH;
	a.tx_depth = 64;
	a.tx_signal = 0;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	CU_ASSERT_PTR_NULL(ctx);
	a.tx_signal = 65;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	CU_ASSERT_PTR_NULL(ctx);
	a.tx_signal = UINT32_MAX;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	a.tx_signal = 64;
	EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	EQ(ctx->tx_signal, 64);
	EQ(qps_ctx_destroy(ctx), 0);
	/* Not asked for: the default, whatever the field holds. */
	a.comp_mask &= ~(uint64_t)QPS_CTX_ATTR_TX_SIGNAL;
	a.tx_signal = 0;
	EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	EQ(ctx->tx_signal, QPS_TX_SIGNAL_DEFAULT);
	EQ(qps_ctx_destroy(ctx), 0);
	/* A depth below the default: capped to the depth. */
	a.tx_depth = 8;
	EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	EQ(ctx->tx_signal, 8);
	EQ(qps_ctx_destroy(ctx), 0);
}

/* --- BlueFlame on the direct send queue ---------------------------------- */

struct bare {
	const struct qps_provider_ops *ops;
	struct qps_dev *dev;
	struct qps_dev_info info;
	struct qps_cq *cq;
	struct qps_qp *qp;
	struct qps_mr *mr;
	uint8_t *frames;
};

/* A bare emu device with one send-only QP of @max_inline, and room for
 * BARE_FRAMES frames of up to 2048 bytes. */
#define BARE_FRAMES 24

static void bare_open(struct bare *x, uint32_t max_inline)
{
	struct qps_dev_attr da = { .dev = g_wire };
	struct qps_qp_init_attr qa;

	memset(x, 0, sizeof(*x));
	EQ_FATAL(qps_provider_find("emu", &x->ops), 0);
	EQ_FATAL(x->ops->open(&da, &x->dev), 0);
	x->dev->ops = x->ops;
	EQ_FATAL(x->ops->query(x->dev, &x->info), 0);
	EQ_FATAL(x->ops->create_cq(x->dev, 64, &x->cq), 0);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RAW_PACKET;
	qa.send_cq = x->cq;
	qa.cap.max_send_wr = 32;
	qa.cap.max_send_sge = 1;
	qa.cap.max_inline_data = max_inline;
	EQ_FATAL(x->ops->create_qp(x->dev, &qa, &x->qp), 0);
	x->frames = aligned_alloc(4096, BARE_FRAMES * 2048);
	CU_ASSERT_PTR_NOT_NULL_FATAL(x->frames);
	EQ_FATAL(x->ops->reg_mr(x->dev, x->frames, BARE_FRAMES * 2048,
				&x->mr), 0);
}

static void bare_close(struct bare *x)
{
	struct ibv_wc wc[32];

	while (x->ops->poll_cq(x->cq, 32, wc) > 0)
		;
	EQ(x->ops->dereg_mr(x->mr), 0);
	EQ(x->ops->destroy_qp(x->qp), 0);
	EQ(x->ops->destroy_cq(x->cq), 0);
	EQ(x->ops->close(x->dev), 0);
	free(x->frames);
}

/* Two bare QPs, each on its own device, both devices in stepping mode:
 * what is written into their rings is compared, nothing runs. */
static void bare_open_stepping(struct bare *g, struct bare *d)
{
	bare_open(g, 0);
	bare_open(d, 0);
	qps_emu_set_stepping(g->dev, true);
	qps_emu_set_stepping(d->dev, true);
}

/* Frame @k (payload @i of @len bytes) to @ip:@port of @mac. */
static uint32_t bare_frame(struct bare *x, unsigned int k, uint32_t i,
			   size_t len, const uint8_t mac[6], const char *ip,
			   unsigned short port)
{
	uint8_t *f = x->frames + (size_t)k * 2048;
	struct qps_frame_hdr h;
	int n;

	memset(&h, 0, sizeof(h));
	memcpy(h.dst_mac, mac, 6);
	memcpy(h.src_mac, x->info.mac, 6);
	h.saddr = x->info.addr.s_addr;
	inet_pton(AF_INET, ip, &h.daddr);
	h.sport = htons(7000);
	h.dport = htons(port);
	fill(f + QPS_HDRS_LEN, len, i);
	n = qps_frame_build(f, &h, len);
	CU_ASSERT_FATAL(n > 0);
	return (uint32_t)n;
}

/* Write frames of the payload sizes @lens as one burst and ring once;
 * returns what the ring wrote. */
static int burst(struct bare *x, struct qps_sq_mlx4 *sq, const size_t *lens,
		 unsigned int n, uint32_t first, const uint8_t mac[6])
{
	unsigned int k;

	for (k = 0; k < n; k++) {
		uint32_t fl = bare_frame(x, k, first + k, lens[k], mac, IP_B,
					 PORT_B);

		EQ_FATAL(qps_sq_mlx4_write(sq, x->frames + (size_t)k * 2048,
					   fl, x->mr->lkey, first + k,
					   k == n - 1, 0), 0);
	}
	return qps_sq_mlx4_ring(sq);
}

static void blueflame(void)
{
	struct qps_ctx *b;
	struct qps_ep *rx;
	struct qps_ctx_info bi;
	struct qps_emu_qp_counters c0, c1;
	struct qps_sq_mlx4 sq;
	struct bare x;
	const size_t small[1] = { 100 }, large[1] = { 400 };
	const size_t mixed_bf[4] = { 400, 400, 400, 100 };
	const size_t mixed_db[4] = { 100, 100, 100, 400 };
	const size_t big[2] = { 1400, 1000 };
	uint32_t i;

	T_EXCLUDED_RETURN();
	t_wire_name(g_wire, sizeof(g_wire), "db-blueflam");
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, 0);
	rx = mkep(b, IP_B, PORT_B);

	EQ(qps_ctx_query(b, &bi), 0);
	/* A 512-byte stride: inline WQEs up to 464 bytes, so a WQE can be
	 * too large for a 256-byte BlueFlame half. */
	bare_open(&x, 464);
	EQ_FATAL(qps_sq_mlx4_init(&sq, x.qp), 0);
	EQ(sq.m.wqe_shift, 9);
	EQ(sq.max_inline, 464);
	EQ(sq.bf, 1);
	EQ(sq.m.bf_buf_size, 256);

	/* Small (a 142-byte frame inline: a 192-byte WQE): BlueFlame. */
	EQ(qps_emu_qp_counters(x.qp, &c0), 0);
	EQ(burst(&x, &sq, small, 1, 0, bi.mac), QPS_SQ_RANG_BF);
	EQ(sq.m.bf_state->off, 256);			/* the other half next */
	recv_check(rx, 0, 100);
	/* Large (442 bytes inline: a 512-byte WQE): the doorbell. */
	EQ(burst(&x, &sq, large, 1, 1, bi.mac), QPS_SQ_RANG_DB);
	recv_check(rx, 1, 400);
	/* The same small frame with BlueFlame off: identical bytes. */
	sq.bf = false;
	EQ(burst(&x, &sq, small, 1, 0, bi.mac), QPS_SQ_RANG_DB);
	recv_check(rx, 0, 100);
	sq.bf = true;
	/* Only the last WQE of a burst decides. */
	EQ(burst(&x, &sq, mixed_bf, 4, 10, bi.mac), QPS_SQ_RANG_BF);
	for (i = 0; i < 4; i++)
		recv_check(rx, 10 + i, mixed_bf[i]);
	EQ(burst(&x, &sq, mixed_db, 4, 20, bi.mac), QPS_SQ_RANG_DB);
	for (i = 0; i < 4; i++)
		recv_check(rx, 20 + i, mixed_db[i]);
	/* Frames above max_inline: data segments (32-byte WQEs), BF. */
	EQ(burst(&x, &sq, big, 2, 30, bi.mac), QPS_SQ_RANG_BF);
	recv_check(rx, 30, 1400);
	recv_check(rx, 31, 1000);
	EQ(sq.m.bf_state->off, 256);
	/* Nothing written: nothing rung. */
	EQ(qps_sq_mlx4_ring(&sq), QPS_SQ_RANG_NONE);
	EQ(qps_emu_qp_counters(x.qp, &c1), 0);
	EQ(c1.tx.bf_writes - c0.tx.bf_writes, 3);
	EQ(c1.tx.doorbells - c0.tx.doorbells, 3);
	EQ(c1.tx.wqes - c0.tx.wqes, 13);
	EQ(c1.tx.malformed, 0);
	EQ(c1.tx.bf_bad, 0);
	EQ(c1.tx.tx_drops, 0);
	bare_close(&x);
	EQ(qps_ctx_destroy(b), 0);
}

/* The direct path writes the ring exactly as the provider's post_send
 * does (inline and data segments); only the wr_id table tells them apart.
 * Payloads around every inline chunk boundary (frames of 44, 104, 164
 * and 224 bytes fill one to four chunks), last chunks of every size
 * class the writer copies apart (2, 3, 5, 12, 20, 31, 32 bytes and
 * more), and a data segment. */
static void same_wqe_bytes(void)
{
	struct bare g, d;
	struct qps_sq_mlx4 sq;
	struct qps_mlx4_sq gm;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	const uint8_t mac[6] = { 2, 0x51, 0x50, 0, 0, 15 };
	static const size_t lens[] = { 0, 1, 2, 3, 4, 5, 7, 14, 22, 33, 34,
				       61, 62, 63, 100, 121, 122, 123, 181,
				       182, 1200 };
	const unsigned int nlens = sizeof(lens) / sizeof(lens[0]);
	unsigned int k;
	int rang;

	T_EXCLUDED_RETURN();
	t_wire_name(g_wire, sizeof(g_wire), "db-same_wqe");

	bare_open_stepping(&g, &d);
	EQ_FATAL(qps_sq_mlx4_init(&sq, d.qp), 0);
	EQ_FATAL(g.ops->mlx4_sq(g.qp, &gm), 0);
	EQ(gm.wqe_shift, sq.m.wqe_shift);
	/* Both queues point at the same frames (same address and lkey in
	 * the data segments). The devices stay in stepping mode: only the
	 * rings are compared, nothing runs. */
	for (k = 0; k < nlens; k++) {
		uint32_t fl = bare_frame(&g, k, k, lens[k], mac, IP_B, 9);

		sge.addr = (uintptr_t)(g.frames + (size_t)k * 2048);
		sge.length = fl;
		sge.lkey = g.mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = k;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED |
				(fl <= g.qp->cap.max_inline_data ?
				 IBV_SEND_INLINE : 0);
		EQ(g.ops->post_send(g.qp, &wr, &bad), 0);
		EQ(qps_sq_mlx4_write(&sq, g.frames + (size_t)k * 2048, fl,
				     g.mr->lkey, k, true, 0), 0);
	}
	/* The newest WQE's owner word waits for the ring (sq_mlx4.c). */
	rang = qps_sq_mlx4_ring(&sq);
	GE(rang, QPS_SQ_RANG_DB);
	for (k = 0; k < nlens; k++) {
		const uint8_t *wg, *wd;
		uint8_t w[2048];
		uint32_t size;

		wg = (const uint8_t *)gm.buf + ((size_t)k << gm.wqe_shift);
		wd = (const uint8_t *)sq.m.buf + ((size_t)k << sq.m.wqe_shift);
		size = (uint32_t)(wg[7] & 0x3f) * 16;
		EQ((wd[7] & 0x3f) * 16, size);
		memcpy(w, wd, size);
		if (k + 1 == nlens && rang == QPS_SQ_RANG_BF) {
			/* Rung by BlueFlame, as libmlx4 does it: its index
			 * in the owner word and the QP number over the vlan
			 * bytes, in the ring too. Else as post_send. */
			EQ(w[1] << 8 | w[2], k);
			EQ((uint32_t)w[4] << 16 | w[5] << 8 | w[6],
			   d.qp->qp_num);
			w[1] = w[2] = w[4] = w[5] = w[6] = 0;
		}
		CU_ASSERT(memcmp(wg, w, size) == 0);
		EQ(sq.m.wrid[k], k);
	}
	EQ(*sq.m.head, nlens);
	EQ(sq.max_inline, 224);
	bare_close(&g);
	bare_close(&d);
}

/*
 * A frame written in pieces (sq_path.h) makes the same WQE as the frame
 * written whole: headers from a template and an IP ID, payloads around
 * every inline chunk boundary up to the inline
 * limit, an empty one without an address. No headers, a payload without
 * an address, or a frame over the inline limit is refused.
 */
static void pieces_wqe_bytes(void)
{
	static const uint32_t lens[] = { 0, 1, 2, 3, 61, 62, 63, 64, 121,
					 122, 123, 181, 182 };
	const unsigned int nlens = sizeof(lens) / sizeof(lens[0]);
	const uint32_t csum = MLX4_WQE_CTRL_IP_HDR_CSUM |
			      MLX4_WQE_CTRL_TCP_UDP_CSUM;
	uint8_t frame[QPS_HDRS_LEN + 256], tmpl[QPS_HDRS_LEN], payload[256];
	struct qps_sq_mlx4 whole, parts;
	struct qps_frame_hdr h;
	struct qps_tx_frame f;
	struct bare g, d;
	unsigned int k;

	T_EXCLUDED_RETURN();
	t_wire_name(g_wire, sizeof(g_wire), "db-pieces");
	bare_open_stepping(&g, &d);
	EQ_FATAL(qps_sq_mlx4_init(&whole, g.qp), 0);
	EQ_FATAL(qps_sq_mlx4_init(&parts, d.qp), 0);
	EQ_FATAL(parts.max_inline, QPS_HDRS_LEN + lens[nlens - 1]);
	memset(&h, 0, sizeof(h));
	memcpy(h.src_mac, g.info.mac, 6);
	h.dst_mac[0] = 2;
	h.saddr = g.info.addr.s_addr;
	inet_pton(AF_INET, IP_B, &h.daddr);
	h.sport = htons(7000);
	h.dport = htons(9000);
	h.ttl = 64;
	for (k = 0; k < nlens; k++) {
		h.ip_id = htons((uint16_t)(100 + k));
		fill(payload, lens[k], k);
		memcpy(frame + QPS_HDRS_LEN, payload, lens[k]);
		EQ_FATAL(qps_frame_build_hw(frame, &h, lens[k]),
			 (int)(QPS_HDRS_LEN + lens[k]));
		EQ(qps_sq_mlx4_write(&whole, frame, QPS_HDRS_LEN + lens[k],
				     g.mr->lkey, k, true, csum), 0);
		/* The template: another IP ID, and no payload. */
		h.ip_id = (uint16_t)(k & 1 ? 0 : 0xffff);
		EQ_FATAL(qps_frame_build_hw(tmpl, &h, 0), QPS_HDRS_LEN);
		memset(&f, 0, sizeof(f));
		f.tmpl = tmpl;
		f.ip_id = htons((uint16_t)(100 + k));
		f.payload = lens[k] ? payload : NULL;
		f.plen = lens[k];
		EQ(qps_sq_mlx4_write_pieces(&parts, &f, k, true, csum), 0);
	}
	/* Unrung: the newest WQE's owner word is the old lap's in both. */
	for (k = 0; k < nlens; k++) {
		const uint8_t *ww = (const uint8_t *)whole.m.buf +
				    ((size_t)k << whole.m.wqe_shift);
		const uint8_t *wp = (const uint8_t *)parts.m.buf +
				    ((size_t)k << parts.m.wqe_shift);
		uint32_t size = (uint32_t)(ww[7] & 0x3f) * 16;

		EQ((wp[7] & 0x3f) * 16, size);
		CU_ASSERT(memcmp(ww, wp, size) == 0);
		EQ(parts.m.wrid[k], k);
	}
	f = (struct qps_tx_frame){ .payload = payload, .plen = 1 };
	EQ(qps_sq_mlx4_write_pieces(&parts, &f, 0, true, csum), -EINVAL);
	f = (struct qps_tx_frame){ .tmpl = tmpl, .plen = 1 };
	EQ(qps_sq_mlx4_write_pieces(&parts, &f, 0, true, csum), -EINVAL);
	f = (struct qps_tx_frame){ .tmpl = tmpl, .payload = payload,
				   .plen = lens[nlens - 1] + 1 };
	EQ(qps_sq_mlx4_write_pieces(&parts, &f, 0, true, csum), -EMSGSIZE);
	EQ(*parts.m.head, nlens);
	bare_close(&g);
	bare_close(&d);
}

/* --- qps_sendmmsg's contract ---------------------------------------------- */

static void sendmmsg_api(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx;
	struct sockaddr_in db = t_sin(IP_B, PORT_B);
	struct sockaddr_in6 d6;
	struct qps_msg m[4];
	uint8_t p[64];
	struct qps_ctx_attr bad = { .comp_mask = QPS_CTX_ATTR_PROVIDER |
		QPS_CTX_ATTR_DEV | QPS_CTX_ATTR_TX_PATH, .provider = "emu",
		.dev = g_wire, .tx_path = 3 };
	struct qps_ctx *none = NULL;
	int i;

	t_wire_name(g_wire, sizeof(g_wire), "db-sendmmsg");
	a = mkctx(IP_A, QPS_TX_PATH_AUTO, LONG_DELAY_US, 0);
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, 0);
	rx = mkep(b, IP_B, PORT_B);

	EQ(qps_ep_create(a, QPS_EP_DGRAM, &tx), 0);
	fill(p, 64, 0);
	for (i = 0; i < 4; i++)
		m[i] = (struct qps_msg){ .buf = p, .len = 64,
			.dest = (struct sockaddr *)&db, .dest_len = sizeof(db),
			.priority = -1, .result = 12345 };
	errno = 4321;
	EQ(qps_sendmmsg(NULL, m, 4, 0), -EBADF);
	EQ(qps_sendmmsg(tx, m, 4, 0x1), -EINVAL);
	EQ(qps_sendmmsg(tx, m, 0, 0), 0);
	EQ(qps_sendmmsg(tx, NULL, 1, 0), -EFAULT);
	EQ(qps_sendmmsg(tx, m, 1u << 31, 0), -EINVAL);
	EQ(m[0].result, 12345);		/* call-level errors write nothing */
	/* The first message fails: its -errno is the answer. */
	m[0].priority = 16;
	EQ(qps_sendmmsg(tx, m, 4, 0), -EINVAL);
	EQ(m[0].result, -EINVAL);
	EQ(m[1].result, -ECANCELED);
	m[0].priority = -2;
	EQ(qps_sendmmsg(tx, m, 1, 0), -EINVAL);
	m[0].priority = 15;
	m[2].len = 65508;	/* above what IPv4 carries */
	EQ(qps_sendmmsg(tx, m, 4, 0), 2);
	EQ(m[0].result, 64);
	EQ(m[1].result, 64);
	EQ(m[2].result, -EMSGSIZE);
	EQ(m[3].result, -ECANCELED);
	/* What was accepted before the failure was rung, not stranded. */
	recv_check(rx, 0, 64);
	recv_check(rx, 0, 64);
	m[2].len = 64;
	m[1].dest = NULL;
	EQ(qps_sendmmsg(tx, m, 4, 0), 1);
	EQ(m[1].result, -EDESTADDRREQ);
	recv_check(rx, 0, 64);
	memset(&d6, 0, sizeof(d6));
	d6.sin6_family = AF_INET6;
	m[1].dest = (struct sockaddr *)&d6;
	m[1].dest_len = sizeof(d6);
	EQ(qps_sendmmsg(tx, m + 1, 3, 0), -EAFNOSUPPORT);
	m[1].buf = NULL;
	m[1].dest = (struct sockaddr *)&db;
	m[1].dest_len = sizeof(db);
	EQ(qps_sendmmsg(tx, m + 1, 1, 0), -EFAULT);
	/* Connected: dest NULL is the peer. */
	m[1].buf = p;
	EQ(qps_connect(tx, (struct sockaddr *)&db, sizeof(db)), 0);
	m[0].dest = m[1].dest = NULL;
	EQ(qps_sendmmsg(tx, m, 2, QPS_MSG_DONTWAIT), 2);
	recv_check(rx, 0, 64);
	recv_check(rx, 0, 64);
	/* MORE on the batch: the last doorbell waits for a flush too. */
	EQ(qps_sendmmsg(tx, m, 2, QPS_MSG_MORE), 2);
	EQ(qps_recv(rx, p, sizeof(p), QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(qps_flush(tx), 2);
	recv_check(rx, 0, 64);
	recv_check(rx, 0, 64);
	EQ(qps_flush(NULL), -EBADF);
	EQ(qps_ctx_flush(NULL), -EINVAL);
	EQ(errno, 4321);

	/* Context attributes. */
	EQ(qps_ctx_create(&bad, &none), -EINVAL);
	bad.tx_path = QPS_TX_PATH_GENERIC;
	bad.comp_mask |= QPS_CTX_ATTR_DB_DELAY;
	bad.db_delay_us = QPS_DB_DELAY_MAX_US + 1;
	EQ(qps_ctx_create(&bad, &none), -EINVAL);
	CU_ASSERT_PTR_NULL(none);
	setenv("QPS_TX_PATH", "sideways", 1);
	EQ(t_ctx_emu(g_wire, NULL, &none), -EINVAL);
	setenv("QPS_TX_PATH", "generic", 1);
	EQ(t_ctx_emu(g_wire, NULL, &none), 0);
	EQ(none->tx_path, QPS_TX_PATH_GENERIC);
	EQ(qps_ctx_destroy(none), 0);
	unsetenv("QPS_TX_PATH");
	EQ(t_ctx_emu(g_wire, NULL, &none), 0);
	/* auto: direct on emu; generic on verbs off mlx4 */
	EQ(none->tx_path, t_provider_is("emu") ? QPS_TX_PATH_DIRECT :
	   QPS_TX_PATH_GENERIC);
	EQ(qps_ctx_destroy(none), 0);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}

/* --- the emu cost model ------------------------------------------------- */

static void cost_model(void)
{
	struct qps_ctx *a;
	struct qps_ep *tx;
	struct qps_ctx *none = NULL;
	uint32_t db, bf;
	uint8_t p[64];
	double t0;
	int i;

	T_EXCLUDED_RETURN();
	t_wire_name(g_wire, sizeof(g_wire), "db-cost_mod");

	setenv("QPS_EMU_DB_NS", "12x", 1);
	EQ(t_ctx_emu(g_wire, NULL, &none), -EINVAL);
	setenv("QPS_EMU_DB_NS", "2000000", 1);
	EQ(t_ctx_emu(g_wire, NULL, &none), -EINVAL);
	setenv("QPS_EMU_DB_NS", "300000", 1);	/* 0.3 ms per doorbell */
	setenv("QPS_EMU_BF_NS", "200000", 1);
	a = mkctx(IP_A, QPS_TX_PATH_GENERIC, 0, 0);
	unsetenv("QPS_EMU_DB_NS");
	unsetenv("QPS_EMU_BF_NS");
	qps_emu_get_cost(a->dev, &db, &bf);
	EQ(db, 300000);
	EQ(bf, 200000);
	tx = mkep(a, IP_A, 4000);
	fill(p, 64, 0);
	t0 = now_ms();
	for (i = 0; i < 10; i++)
		EQ(send_to(tx, p, 64, 0, SINK, 9), 64);
	GE(now_ms() - t0, 3.0);			/* 10 doorbells */
	EQ(qps_emu_set_cost(a->dev, QPS_EMU_COST_MAX_NS + 1, 0), -EINVAL);
	EQ(qps_emu_set_cost(a->dev, 0, 0), 0);
	qps_emu_get_cost(a->dev, &db, &bf);
	EQ(db, 0);
	EQ(bf, 0);
	EQ(qps_ctx_destroy(a), 0);
}

static CU_TestInfo tests[] = {
	{ "exact doorbell counts, generic", counts_generic },
	{ "exact doorbell counts, direct", counts_direct },
	{ "end to end, generic", e2e_generic },
	{ "end to end, direct", e2e_direct },
	{ "bounded delay, generic", stranding_generic },
	{ "bounded delay, direct", stranding_direct },
	{ "close, destroy, flush, progress, generic", flush_points_generic },
	{ "close, destroy, flush, progress, direct", flush_points_direct },
	{ "full mid-burst, generic", full_mid_burst_generic },
	{ "full mid-burst, direct", full_mid_burst_direct },
	{ "completion moderation, generic", moderation_generic },
	{ "completion moderation, direct", moderation_direct },
	{ "moderation and an error mid-batch, generic",
	  moderation_error_generic },
	{ "moderation and an error mid-batch, direct",
	  moderation_error_direct },
	{ "tx_signal attribute", moderation_attr },
	{ "BlueFlame: last WQE, small only, same bytes", blueflame },
	{ "direct WQEs equal post_send's", same_wqe_bytes },
	{ "a frame in pieces makes the same WQE", pieces_wqe_bytes },
	{ "qps_sendmmsg contract and attributes", sendmmsg_api },
	{ "emu cost model", cost_model },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	unsetenv("QPS_TX_PATH");
	unsetenv("QPS_EMU_DB_NS");
	unsetenv("QPS_EMU_BF_NS");
	return t_run("doorbell", tests);
}
