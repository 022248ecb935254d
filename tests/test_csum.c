// SPDX-License-Identifier: MIT
/*
 * Suite "csum": checksum offload end to end on emu (QPS_DEV_CAP_CSUM),
 * on both send paths, with offload on and off ($QPS_CSUM_OFFLOAD):
 * - every frame on the wire carries right IPv4 header and UDP checksums;
 *   with offload the frame the core writes has both fields 0 and its WQE
 *   asks the device for them, without it the core fills them and asks
 *   nothing; the receiver gets every datagram as sent;
 * - a datagram above the MTU: the fragments' WQEs ask for no offload, each
 *   fragment's header checksum is right, the first carries the UDP
 *   checksum of the whole datagram, and the receiver reassembles it;
 * - frames put on the wire with a wrong UDP or a wrong IPv4 header
 *   checksum are dropped by the receiver and counted (rx_bad[]), whether
 *   or not it offloads;
 * - a connected endpoint's headers follow its TTL, TOS and peer;
 * - qps_stats.csum_offload says which.
 */
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu/emu.h"
#include "frames.h"
#include "sq.h"

#define EQ T_EQ
#define EQ_FATAL T_EQ_FATAL
#define GE T_GE

#define IP_A "198.18.0.1"
#define IP_B "198.18.0.2"
#define IP_C "198.18.0.3"
#define PORT_A 4000
#define PORT_B 5000
#define MAX_FRAMES 16
#define BIG 4000	/* three fragments at the default MTU of 1500 */

static char g_wire[64];

/* What the wire saw, and what the core handed to its send path. */
struct cap {
	unsigned int n;
	uint32_t len[MAX_FRAMES];
	uint8_t f[MAX_FRAMES][QPS_EMU_FRAME_MAX];
};

static struct cap g_wire_cap, g_core_cap;
static uint32_t g_core_flags[MAX_FRAMES];

static void tap(void *arg, const uint8_t *frame, uint32_t len)
{
	struct cap *c = arg;

	if (c->n < MAX_FRAMES && len <= QPS_EMU_FRAME_MAX) {
		memcpy(c->f[c->n], frame, len);
		c->len[c->n++] = len;
	}
}

/* The queue's send path, recording each frame as the core wrote it, and
 * with @g_corrupt set, damaging it first (at that offset). */
static struct qps_sq_path rec_path;
static const struct qps_sq_path *real_path;
static int g_corrupt = -1;
static unsigned int g_core_pieces;	/* frames written from pieces */

static int rec_write(struct qps_sq *sq, uint32_t slot,
		     const struct qps_tx_frame *pieces, uint32_t len,
		     bool signaled)
{
	uint8_t *f = sq->buf + (size_t)slot * sq->ctx->tx_slot_size;
	struct cap *c = &g_core_cap;

	/* A frame in pieces is recorded whole; damaged, it is written from
	 * the slot. */
	if (pieces) {
		if (pieces->plen)
			memcpy(f + QPS_HDRS_LEN, pieces->payload,
			       pieces->plen);
		qps_tx_frame_hdrs(f, pieces);
		EQ(len, QPS_HDRS_LEN + pieces->plen);
		g_core_pieces++;
		if (g_corrupt >= 0)
			pieces = NULL;
	}
	if (g_corrupt >= 0)
		f[g_corrupt] ^= 0x5a;
	if (c->n < MAX_FRAMES && len <= QPS_EMU_FRAME_MAX) {
		g_core_flags[c->n] = sq->meta[slot].flags;
		memcpy(c->f[c->n], f, len);
		c->len[c->n++] = len;
	}
	return real_path->write(sq, slot, pieces, len, signaled);
}

static struct qps_ctx *mkctx(const char *ip, uint32_t path, bool offload)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, ip);
	struct qps_ctx *ctx = NULL;

	a.comp_mask |= QPS_CTX_ATTR_TX_PATH | QPS_CTX_ATTR_NUM_TXQ;
	a.tx_path = path;
	a.num_txq = 1;
	EQ_FATAL(setenv("QPS_CSUM_OFFLOAD", offload ? "on" : "off", 1), 0);
	EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	unsetenv("QPS_CSUM_OFFLOAD");
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	EQ(t_ctx_stats(ctx).csum_offload, offload);
	return ctx;
}

/* Record what @ctx sends, at both ends of its (single) send queue. */
static void record(struct qps_ctx *ctx)
{
	struct qps_sq *sq = &ctx->sq[0];

	memset(&g_wire_cap, 0, sizeof(g_wire_cap));
	memset(&g_core_cap, 0, sizeof(g_core_cap));
	g_corrupt = -1;
	g_core_pieces = 0;
	real_path = sq->path;
	rec_path = *real_path;
	rec_path.write = rec_write;
	qps_alock_lock(&sq->lock);
	sq->path = &rec_path;
	qps_alock_unlock(&sq->lock);
	qps_emu_test_set_tap(ctx->dev, tap, &g_wire_cap);
}

static void unrecord(struct qps_ctx *ctx)
{
	struct qps_sq *sq = &ctx->sq[0];

	qps_emu_test_set_tap(ctx->dev, NULL, NULL);
	qps_alock_lock(&sq->lock);
	sq->path = real_path;
	qps_alock_unlock(&sq->lock);
}

static uint16_t be16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static bool ip_sum_ok(const uint8_t *f)
{
	return qps_csum_fold(qps_csum_partial(f + QPS_ETH_HLEN, QPS_IP_HLEN,
					      0)) == 0;
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 13 + seed);
}

#define BOTH(fn) \
	static void fn##_generic_on(void) { fn(QPS_TX_PATH_GENERIC, true); } \
	static void fn##_generic_off(void) \
	{ fn(QPS_TX_PATH_GENERIC, false); } \
	static void fn##_direct_on(void) { fn(QPS_TX_PATH_DIRECT, true); } \
	static void fn##_direct_off(void) { fn(QPS_TX_PATH_DIRECT, false); }

/* --- datagrams of one frame --------------------------------------------- */

static void wire_sums(uint32_t path, bool offload)
{
	static const size_t sizes[] = { 0, 1, 2, 63, 64, 200, 1471, 1472 };
	const size_t n = sizeof(sizes) / sizeof(sizes[0]);
	struct sockaddr_in sb = t_sin(IP_B, PORT_B);
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	uint8_t buf[1472], got[1472];
	unsigned int pieces = 0;
	size_t i;

	t_wire_name(g_wire, sizeof(g_wire), "csum-wire");
	a = mkctx(IP_A, path, offload);
	b = mkctx(IP_B, path, offload);
	eb = t_ep_bound(b, IP_B, PORT_B, 2000);
	ea = t_ep_bound(a, IP_A, PORT_A, 2000);
	EQ_FATAL(qps_connect(ea, (struct sockaddr *)&sb, sizeof(sb)), 0);
	record(a);
	for (i = 0; i < n; i++) {
		/* An empty datagram needs no buffer. */
		const uint8_t *p = sizes[i] ? buf : NULL;

		fill(buf, sizes[i], (unsigned int)i);
		/* Connected and unconnected sends build alike. */
		if (i & 1)
			EQ_FATAL(qps_sendto(ea, p, sizes[i], 0,
					    (struct sockaddr *)&sb,
					    sizeof(sb)), (ssize_t)sizes[i]);
		else
			EQ_FATAL(qps_send(ea, p, sizes[i], 0),
				 (ssize_t)sizes[i]);
		EQ_FATAL(qps_recv(eb, got, sizeof(got), 0), (ssize_t)sizes[i]);
		EQ(memcmp(got, buf, sizes[i]), 0);
	}
	EQ_FATAL(g_wire_cap.n, n);
	EQ_FATAL(g_core_cap.n, n);
	/* With the device summing, the direct path writes a frame that fits
	 * inline from its headers and the caller's payload, never built in
	 * its slot (sq_path.h); the wire has it whole all the same. */
	for (i = 0; i < n; i++)
		pieces += QPS_HDRS_LEN + sizes[i] <= a->sq[0].pieces_max;
	if (path == QPS_TX_PATH_DIRECT)
		EQ(pieces, 5);
	EQ(g_core_pieces, offload ? pieces : 0);
	for (i = 0; i < n; i++) {
		const uint8_t *w = g_wire_cap.f[i], *c = g_core_cap.f[i];

		EQ(g_wire_cap.len[i], QPS_HDRS_LEN + sizes[i]);
		/* qpsock's own parser checks both sums in software. */
		EQ(qps_frame_parse(w, g_wire_cap.len[i], NULL), QPS_RX_OK);
		CU_ASSERT(be16_at(w + QPS_ETH_HLEN + QPS_IP_HLEN + 6) != 0);
		EQ(!!(g_core_flags[i] & QPS_TXM_CSUM), offload);
		if (offload) {
			EQ(be16_at(c + QPS_ETH_HLEN + 10), 0);
			EQ(be16_at(c + QPS_ETH_HLEN + QPS_IP_HLEN + 6), 0);
		} else {
			/* As sent: the device computed nothing. */
			EQ(memcmp(c, w, g_wire_cap.len[i]), 0);
		}
	}
	unrecord(a);
	EQ(t_ctx_stats(b).rx_bad[QPS_RX_OK], n);
	EQ(qps_ep_close(ea), 0);
	EQ(qps_ep_close(eb), 0);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH(wire_sums)

/*
 * A connected endpoint's headers, which the core keeps per send queue
 * while they stay valid: they follow TTL and TOS changes and a connect
 * to another peer and back, the IP ID still counts up by one, the
 * lengths are each datagram's, and the sums on the wire are right.
 */
/* Wire frame @i: a valid datagram of @len bytes to @to's MAC and
 * address, port @dport, with @ttl and @tos, its IP ID the one after
 * frame @i - 1's. */
static void wire_hdr_check(size_t i, const struct qps_ctx_info *to,
			   uint16_t dport, size_t len, uint8_t ttl,
			   uint8_t tos)
{
	const uint8_t *w = g_wire_cap.f[i];
	const uint8_t *ip = w + QPS_ETH_HLEN;

	EQ(g_wire_cap.len[i], QPS_HDRS_LEN + len);
	EQ(qps_frame_parse(w, g_wire_cap.len[i], NULL), QPS_RX_OK);
	EQ(memcmp(w, to->mac, 6), 0);
	EQ(memcmp(ip + 16, &to->addr.s_addr, 4), 0);
	EQ(ip[8], ttl);
	EQ(ip[1], tos);
	EQ(be16_at(ip + 2), QPS_IP_HLEN + QPS_UDP_HLEN + len);
	EQ(be16_at(ip + QPS_IP_HLEN + 2), dport);
	EQ(be16_at(ip + QPS_IP_HLEN + 4), QPS_UDP_HLEN + len);
	if (i)
		EQ((uint16_t)(be16_at(ip + 4) -
			      be16_at(g_wire_cap.f[i - 1] + QPS_ETH_HLEN + 4)),
		   1);
}

/* The sender A and the receivers B and C on one wire, and what B and C
 * are. */
struct trio {
	struct qps_ctx *a, *b, *c;
	struct qps_ctx_info ib, ic;
};

static void trio_open(struct trio *t, const char *tag, uint32_t path,
		      bool offload)
{
	t_wire_name(g_wire, sizeof(g_wire), tag);
	t->a = mkctx(IP_A, path, offload);
	t->b = mkctx(IP_B, path, offload);
	t->c = mkctx(IP_C, path, offload);
	EQ_FATAL(qps_ctx_query(t->b, &t->ib), 0);
	EQ_FATAL(qps_ctx_query(t->c, &t->ic), 0);
}

static void trio_close(struct trio *t)
{
	EQ(qps_ctx_destroy(t->a), 0);
	EQ(qps_ctx_destroy(t->b), 0);
	EQ(qps_ctx_destroy(t->c), 0);
}

static void conn_hdrs(uint32_t path, bool offload)
{
	static const struct {
		char peer;		/* 'B' or 'C': connected to */
		int ttl, tos;		/* set before the send; 0: left */
		size_t len;
		uint8_t want_ttl, want_tos;
	} step[] = {
		{ 'B', 0, 0, 64, 64, 0 },
		{ 'B', 0, 0, 1, 64, 0 },
		{ 'B', 9, 0x20, 64, 9, 0x20 },
		{ 'C', 0, 0, 200, 9, 0x20 },
		{ 'B', 0, 0, 64, 9, 0x20 },
		{ 'B', -1, 0, 0, 64, 0x20 },
	};
	const size_t n = sizeof(step) / sizeof(step[0]);
	struct sockaddr_in sb = t_sin(IP_B, PORT_B), sc = t_sin(IP_C, PORT_B);
	struct qps_ep *ea, *eb, *ec;
	uint8_t buf[200], got[200];
	struct trio t;
	size_t i;

	trio_open(&t, "csum-conn", path, offload);
	eb = t_ep_bound(t.b, IP_B, PORT_B, 2000);
	ec = t_ep_bound(t.c, IP_C, PORT_B, 2000);
	ea = t_ep_bound(t.a, IP_A, PORT_A, 2000);
	record(t.a);
	for (i = 0; i < n; i++) {
		const struct sockaddr_in *to = step[i].peer == 'B' ? &sb : &sc;

		if (i == 0 || step[i].peer != step[i - 1].peer)
			EQ_FATAL(qps_connect(ea, (const struct sockaddr *)to,
					     sizeof(*to)), 0);
		if (step[i].ttl)
			EQ(qps_setopt(ea, QPS_OPT_TTL, &step[i].ttl,
				      sizeof(int)), 0);
		if (step[i].tos)
			EQ(qps_setopt(ea, QPS_OPT_TOS, &step[i].tos,
				      sizeof(int)), 0);
		fill(buf, step[i].len, (unsigned int)i);
		EQ_FATAL(qps_send(ea, buf, step[i].len, 0),
			 (ssize_t)step[i].len);
		EQ_FATAL(qps_recv(step[i].peer == 'B' ? eb : ec, got,
				  sizeof(got), 0), (ssize_t)step[i].len);
		EQ(memcmp(got, buf, step[i].len), 0);
	}
	unrecord(t.a);
	EQ_FATAL(g_wire_cap.n, n);
	for (i = 0; i < n; i++)
		wire_hdr_check(i, step[i].peer == 'B' ? &t.ib : &t.ic, PORT_B,
			       step[i].len, step[i].want_ttl,
			       step[i].want_tos);
	EQ(qps_ep_close(ea), 0);
	EQ(qps_ep_close(eb), 0);
	EQ(qps_ep_close(ec), 0);
	trio_close(&t);
}
BOTH(conn_hdrs)

/* An unconnected sender's headers follow each datagram's destination
 * (address, port) and the endpoint's TTL and TOS, interleaved with a
 * connected endpoint's on the same queue: with the device summing, the
 * queue's header template is kept only while all of them stay. */
static void unconn_hdrs(uint32_t path, bool offload)
{
	static const struct {
		char to;		/* 'B', 'b' (B's second port), 'C' */
		bool conn;		/* by the endpoint connected to C */
		int ttl, tos;		/* set before the send; 0: left */
		size_t len;
		uint8_t want_ttl, want_tos;
	} step[] = {
		{ 'B', false, 0, 0, 64, 64, 0 },
		{ 'B', false, 0, 0, 1, 64, 0 },
		{ 'b', false, 0, 0, 64, 64, 0 },
		{ 'C', false, 0, 0, 200, 64, 0 },
		{ 'C', true, 0, 0, 64, 64, 0 },
		{ 'C', false, 9, 0x20, 64, 9, 0x20 },
		{ 'B', false, 0, 0, 0, 9, 0x20 },
		{ 'C', true, 0, 0, 64, 64, 0 },
		{ 'b', false, 0, 0, 64, 9, 0x20 },
	};
	const size_t n = sizeof(step) / sizeof(step[0]);
	struct sockaddr_in sb = t_sin(IP_B, PORT_B);
	struct sockaddr_in sb2 = t_sin(IP_B, PORT_B + 1);
	struct sockaddr_in sc = t_sin(IP_C, PORT_B);
	struct qps_ep *ea, *ea2, *eb, *eb2, *ec;
	uint8_t buf[200], got[200];
	struct trio t;
	size_t i;

	trio_open(&t, "csum-unconn", path, offload);
	eb = t_ep_bound(t.b, IP_B, PORT_B, 2000);
	eb2 = t_ep_bound(t.b, IP_B, PORT_B + 1, 2000);
	ec = t_ep_bound(t.c, IP_C, PORT_B, 2000);
	ea = t_ep_bound(t.a, IP_A, PORT_A, 2000);
	ea2 = t_ep_bound(t.a, IP_A, PORT_A + 1, 2000);
	EQ_FATAL(qps_connect(ea2, (const struct sockaddr *)&sc, sizeof(sc)),
		 0);
	record(t.a);
	for (i = 0; i < n; i++) {
		const struct sockaddr_in *to = step[i].to == 'B' ? &sb :
					       step[i].to == 'b' ? &sb2 : &sc;
		struct qps_ep *from = step[i].conn ? ea2 : ea;
		struct qps_ep *rx = step[i].to == 'B' ? eb :
				    step[i].to == 'b' ? eb2 : ec;
		ssize_t sent;

		if (step[i].ttl)
			EQ(qps_setopt(from, QPS_OPT_TTL, &step[i].ttl,
				      sizeof(int)), 0);
		if (step[i].tos)
			EQ(qps_setopt(from, QPS_OPT_TOS, &step[i].tos,
				      sizeof(int)), 0);
		fill(buf, step[i].len, (unsigned int)i);
		sent = step[i].conn ?
		       qps_send(from, buf, step[i].len, 0) :
		       qps_sendto(from, buf, step[i].len, 0,
				  (const struct sockaddr *)to, sizeof(*to));
		EQ_FATAL(sent, (ssize_t)step[i].len);
		EQ_FATAL(qps_recv(rx, got, sizeof(got), 0),
			 (ssize_t)step[i].len);
		EQ(memcmp(got, buf, step[i].len), 0);
	}
	unrecord(t.a);
	EQ_FATAL(g_wire_cap.n, n);
	for (i = 0; i < n; i++)
		wire_hdr_check(i, step[i].to == 'C' ? &t.ic : &t.ib,
			       step[i].to == 'b' ? PORT_B + 1 : PORT_B,
			       step[i].len, step[i].want_ttl,
			       step[i].want_tos);
	EQ(qps_ep_close(ea), 0);
	EQ(qps_ep_close(ea2), 0);
	EQ(qps_ep_close(eb), 0);
	EQ(qps_ep_close(eb2), 0);
	EQ(qps_ep_close(ec), 0);
	trio_close(&t);
}
BOTH(unconn_hdrs)

/*
 * Two threads, each with an endpoint connected to its own port of B,
 * send through the one send queue of a shallow ring, so that each often
 * waits for a slot with the queue's lock dropped while the other sends:
 * every datagram still reaches its own sender's port (the headers are
 * taken from the queue's template only once the slot is held).
 */
#define RACE_N 4000

struct racer {
	struct qps_ep *ep;
	uint8_t id;
	int err;
	bool done;		/* atomic */
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	uint8_t buf[32];
	int i;

	memset(buf, r->id, sizeof(buf));
	for (i = 0; i < RACE_N && !r->err; i++) {
		ssize_t n = qps_send(r->ep, buf, sizeof(buf),
				     i % 4 != 3 ? QPS_MSG_MORE : 0);

		if (n != (ssize_t)sizeof(buf))
			r->err = n < 0 ? (int)n : -EIO;
	}
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void conn_race(uint32_t path, bool offload)
{
	struct qps_ctx_attr at;
	struct qps_ctx *a = NULL, *b;
	struct qps_ep *eb[2];
	struct racer rc[2];
	pthread_t th[2];
	uint8_t got[64];
	unsigned int k, seen[2] = { 0, 0 }, wrong = 0, idle = 0;

	t_wire_name(g_wire, sizeof(g_wire), "csum-race");
	at = t_emu_attr(g_wire, IP_A);
	at.comp_mask |= QPS_CTX_ATTR_TX_PATH | QPS_CTX_ATTR_NUM_TXQ |
			QPS_CTX_ATTR_TX_DEPTH;
	at.tx_path = path;
	at.num_txq = 1;
	at.tx_depth = 4;
	EQ_FATAL(setenv("QPS_CSUM_OFFLOAD", offload ? "on" : "off", 1), 0);
	EQ_FATAL(qps_ctx_create(&at, &a), 0);
	unsetenv("QPS_CSUM_OFFLOAD");
	b = mkctx(IP_B, path, offload);
	for (k = 0; k < 2; k++) {
		struct sockaddr_in to = t_sin(IP_B, PORT_B + (int)k);

		eb[k] = t_ep_bound(b, IP_B, PORT_B + (int)k, 2000);
		rc[k] = (struct racer){
			.ep = t_ep_bound(a, IP_A, PORT_A + (int)k, 2000),
			.id = (uint8_t)(k + 1),
		};
		EQ_FATAL(qps_connect(rc[k].ep, (struct sockaddr *)&to,
				     sizeof(to)), 0);
	}
	for (k = 0; k < 2; k++)
		EQ_FATAL(pthread_create(&th[k], NULL, racer_main, &rc[k]), 0);
	/* Drain both ports until the senders are done and nothing came for
	 * a while: what the receive queues could not hold is counted by B,
	 * never delivered to the other port. */
	while (!__atomic_load_n(&rc[0].done, __ATOMIC_ACQUIRE) ||
	       !__atomic_load_n(&rc[1].done, __ATOMIC_ACQUIRE) || idle < 50) {
		bool any = false;

		for (k = 0; k < 2; k++) {
			ssize_t n = qps_recv(eb[k], got, sizeof(got),
					     QPS_MSG_DONTWAIT);

			if (n <= 0)
				continue;
			any = true;
			seen[k]++;
			wrong += n != 32 || got[0] != k + 1 || got[31] != k + 1;
		}
		if (any)
			idle = 0;
		else if (++idle > 1)
			usleep(1000);
	}
	for (k = 0; k < 2; k++) {
		pthread_join(th[k], NULL);
		EQ(rc[k].err, 0);
		EQ(qps_ep_close(rc[k].ep), 0);
		EQ(qps_ep_close(eb[k]), 0);
	}
	/* B may have dropped any of them (its buffers full), not all. */
	GE(seen[0] + seen[1], 1);
	EQ(wrong, 0);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH(conn_race)

/* --- fragments ------------------------------------------------------------ */

static void frags(uint32_t path, bool offload)
{
	struct sockaddr_in sb = t_sin(IP_B, PORT_B);
	struct qps_frame_hdr h;
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	uint8_t *buf = malloc(BIG), *got = malloc(BIG);
	uint8_t udp[QPS_UDP_HLEN];
	const uint8_t *first;
	unsigned int i;

	CU_ASSERT_FATAL(buf && got);
	t_wire_name(g_wire, sizeof(g_wire), "csum-frag");
	a = mkctx(IP_A, path, offload);
	b = mkctx(IP_B, path, offload);
	eb = t_ep_bound(b, IP_B, PORT_B, 2000);
	ea = t_ep_bound(a, IP_A, PORT_A, 2000);
	fill(buf, BIG, 5);
	record(a);
	EQ_FATAL(qps_sendto(ea, buf, BIG, 0, (struct sockaddr *)&sb,
			    sizeof(sb)), BIG);
	EQ_FATAL(qps_recv(eb, got, BIG, 0), BIG);
	EQ(memcmp(got, buf, BIG), 0);
	unrecord(a);
	EQ_FATAL(g_wire_cap.n, 3);
	EQ_FATAL(g_core_cap.n, 3);
	for (i = 0; i < 3; i++) {
		CU_ASSERT(ip_sum_ok(g_wire_cap.f[i]));
		EQ(g_core_flags[i] & QPS_TXM_CSUM, 0);
		EQ(memcmp(g_core_cap.f[i], g_wire_cap.f[i],
			  g_wire_cap.len[i]), 0);
	}
	/* The UDP checksum over the whole datagram, in the first one. */
	first = g_wire_cap.f[0] + QPS_ETH_HLEN + QPS_IP_HLEN;
	memset(&h, 0, sizeof(h));
	h.saddr = t_ip4(IP_A);
	h.daddr = t_ip4(IP_B);
	h.sport = htons(PORT_A);
	h.dport = htons(PORT_B);
	qps_udp_hdr_build(udp, &h, BIG, qps_csum_partial(buf, BIG, 0));
	EQ(memcmp(first, udp, QPS_UDP_HLEN), 0);
	CU_ASSERT(be16_at(udp + 6) != 0);
	EQ(t_ctx_stats(b).rx_reasm_ok, 1);
	EQ(t_ctx_stats(b).rx_bad[QPS_RX_BAD_UDP_CSUM], 0);
	EQ(qps_ep_close(ea), 0);
	EQ(qps_ep_close(eb), 0);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
	free(buf);
	free(got);
}
BOTH(frags)

/* --- bad checksums dropped -------------------------------------------- */

/*
 * C sends with its sums in software and damages each frame just before
 * the device takes it: a wrong UDP checksum, a wrong IPv4 header checksum
 * (its TTL changed after the sum: a header that still parses), a payload
 * byte changed. B drops each and counts it; a good frame after them
 * still arrives.
 */
static void bad_dropped(uint32_t path, bool offload)
{
	static const struct {
		int off;
		enum qps_rx_reason why;
	} bad[] = {
		{ QPS_ETH_HLEN + QPS_IP_HLEN + 6, QPS_RX_BAD_UDP_CSUM },
		{ QPS_ETH_HLEN + 8, QPS_RX_BAD_IP_CSUM },
		{ QPS_HDRS_LEN + 3, QPS_RX_BAD_UDP_CSUM },
	};
	struct sockaddr_in sb = t_sin(IP_B, PORT_B);
	struct qps_ctx *b, *c;
	struct qps_ep *eb, *ec;
	struct qps_stats s0, s1;
	uint8_t buf[64], got[64];
	unsigned int i;

	t_wire_name(g_wire, sizeof(g_wire), "csum-bad");
	b = mkctx(IP_B, path, offload);
	c = mkctx(IP_C, path, false);
	eb = t_ep_bound(b, IP_B, PORT_B, 2000);
	ec = t_ep_bound(c, IP_C, PORT_A, 2000);
	fill(buf, sizeof(buf), 9);
	record(c);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s0 = t_ctx_stats(b);
		g_corrupt = bad[i].off;
		EQ_FATAL(qps_sendto(ec, buf, sizeof(buf), 0,
				    (struct sockaddr *)&sb, sizeof(sb)),
			 (ssize_t)sizeof(buf));
		EQ(qps_recv(eb, got, sizeof(got), QPS_MSG_DONTWAIT), -EAGAIN);
		s1 = t_ctx_stats(b);
		EQ(s1.rx_bad[bad[i].why] - s0.rx_bad[bad[i].why], 1);
		EQ(s1.rx_bad[QPS_RX_OK], s0.rx_bad[QPS_RX_OK]);
		EQ(s1.rx_packets, s0.rx_packets);
	}
	g_corrupt = -1;
	EQ_FATAL(qps_sendto(ec, buf, sizeof(buf), 0, (struct sockaddr *)&sb,
			    sizeof(sb)), (ssize_t)sizeof(buf));
	EQ_FATAL(qps_recv(eb, got, sizeof(got), 0), (ssize_t)sizeof(buf));
	EQ(memcmp(got, buf, sizeof(buf)), 0);
	unrecord(c);
	EQ(qps_ep_close(ec), 0);
	EQ(qps_ep_close(eb), 0);
	EQ(qps_ctx_destroy(c), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH(bad_dropped)

/* --- the switch --------------------------------------------------------- */

static void test_env(void)
{
	struct qps_ctx_attr a;
	struct qps_ctx *ctx = NULL;

	t_wire_name(g_wire, sizeof(g_wire), "csum-env");
	a = t_emu_attr(g_wire, IP_A);
	EQ(qps_ctx_create(&a, &ctx), 0);
	EQ(t_ctx_stats(ctx).csum_offload, 1);	/* emu: on by default */
	EQ(qps_ctx_destroy(ctx), 0);
	EQ_FATAL(setenv("QPS_CSUM_OFFLOAD", "sometimes", 1), 0);
	ctx = NULL;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	CU_ASSERT_PTR_NULL(ctx);
	EQ_FATAL(setenv("QPS_CSUM_OFFLOAD", "0", 1), 0);
	EQ(qps_ctx_create(&a, &ctx), 0);
	EQ(t_ctx_stats(ctx).csum_offload, 0);
	EQ(qps_ctx_destroy(ctx), 0);
	unsetenv("QPS_CSUM_OFFLOAD");
	/* UD frames are the device's to build: nothing for the core. */
	a.comp_mask |= QPS_CTX_ATTR_TRANSPORT | QPS_CTX_ATTR_TX_PATH;
	a.transport = QPS_TRANSPORT_UD;
	a.tx_path = QPS_TX_PATH_GENERIC;
	EQ(qps_ctx_create(&a, &ctx), 0);
	EQ(t_ctx_stats(ctx).csum_offload, 0);
	EQ(qps_ctx_destroy(ctx), 0);
}

static CU_TestInfo tests[] = {
	{ "QPS_CSUM_OFFLOAD, and the gauge", test_env },
	{ "wire sums, generic, offload", wire_sums_generic_on },
	{ "wire sums, generic, software", wire_sums_generic_off },
	{ "wire sums, direct, offload", wire_sums_direct_on },
	{ "wire sums, direct, software", wire_sums_direct_off },
	{ "connected headers, generic, offload", conn_hdrs_generic_on },
	{ "connected headers, generic, software", conn_hdrs_generic_off },
	{ "connected headers, direct, offload", conn_hdrs_direct_on },
	{ "connected headers, direct, software", conn_hdrs_direct_off },
	{ "unconnected headers, generic, offload", unconn_hdrs_generic_on },
	{ "unconnected headers, generic, software", unconn_hdrs_generic_off },
	{ "unconnected headers, direct, offload", unconn_hdrs_direct_on },
	{ "unconnected headers, direct, software", unconn_hdrs_direct_off },
	{ "two senders on one queue, generic, offload", conn_race_generic_on },
	{ "two senders on one queue, generic, software", conn_race_generic_off },
	{ "two senders on one queue, direct, offload", conn_race_direct_on },
	{ "two senders on one queue, direct, software", conn_race_direct_off },
	{ "fragments, generic, offload", frags_generic_on },
	{ "fragments, generic, software", frags_generic_off },
	{ "fragments, direct, offload", frags_direct_on },
	{ "fragments, direct, software", frags_direct_off },
	{ "bad sums dropped, generic, offload", bad_dropped_generic_on },
	{ "bad sums dropped, generic, software", bad_dropped_generic_off },
	{ "bad sums dropped, direct, offload", bad_dropped_direct_on },
	{ "bad sums dropped, direct, software", bad_dropped_direct_off },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("csum", tests);
}
