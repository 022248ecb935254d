// SPDX-License-Identifier: MIT
/*
 * Suite "txq_e2e": send-QP selection in the send path, end to end on emu
 * (tests/test_txq_select.c tests the module alone).
 *
 * - A connected endpoint computes its pick once over 10,000 sends; each
 *   destination reset (reconnect, a port joining or leaving the wire, a
 *   QP error, disconnect) costs exactly one new computation, counted by
 *   cause in qps_ctx_stats.
 * - Unconnected flows spread over the send QPs, stay in order, and a batch
 *   rings each send QP it wrote to once; the bounded-delay flusher covers
 *   every send QP. The thread policy gives each thread its own QP.
 * - Reordering: with the cpu policy a sender moves between CPU 0 and 1
 *   while its packets wait unrung (QPS_MSG_MORE) on the old QP: zero
 *   reorderings at the receiver with the in-flight rule, reorderings
 *   without it (the test-only knob), so the test can fail.
 * - Several threads send on unconnected endpoints through one flow table:
 *   sent = received + counted drops, no flow reordered (also under TSan).
 * - A connected endpoint's (peer MAC, route generation) is one update even
 *   when senders on two send queues refresh it at once: the store of one
 *   is held while another is half-way, and an older generation never
 *   replaces a newer one.
 * Each end-to-end case runs on both send paths (generic and direct).
 */
#define _GNU_SOURCE	/* sched_setaffinity, sched_getcpu */
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "endpoint.h"
#include "sq.h"

#define IP_A "198.18.0.1"
#define IP_B "198.18.0.2"
#define IP_C "198.18.0.3"
#define PORT_A 4000
#define PORT_B 5000
#define LONG_DELAY_US 1000000u
#define PKT_LEN 64

/* --- assertions that print both values -------------------------------- */

#define EQ T_EQ
#define EQ_FATAL T_EQ_FATAL
#define LE T_LE
#define GE T_GE

/* --- helpers ----------------------------------------------------------- */

/* A wire per test, so a failed test's leftovers never disturb the next. */
static char g_wire[64];

/* A context on g_wire; @nq 0 = default send QPs, @policy < 0 = default. */
static struct qps_ctx *mkctx(const char *ip, uint32_t path, uint32_t nq,
			     int policy, uint32_t delay_us)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, ip);
	struct qps_ctx *ctx = NULL;

	a.comp_mask |= QPS_CTX_ATTR_TX_PATH | QPS_CTX_ATTR_DB_DELAY;
	a.tx_path = path;
	a.db_delay_us = delay_us;
	if (nq) {
		a.comp_mask |= QPS_CTX_ATTR_NUM_TXQ;
		a.num_txq = nq;
	}
	if (policy >= 0) {
		a.comp_mask |= QPS_CTX_ATTR_TXQ_POLICY;
		a.txq_policy = (uint32_t)policy;
	}
	EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	return ctx;
}

static struct qps_ep *mkep(struct qps_ctx *ctx, const char *ip,
			   unsigned short port)
{
	return t_ep_bound(ctx, ip, port, 2000);
}

/* Datagrams send queue @q has accepted so far. */
static uint64_t sq_packets(struct qps_ctx *ctx, uint32_t q)
{
	uint64_t n;

	qps_alock_lock(&ctx->sq[q].lock);
	n = ctx->sq[q].st->packets;
	qps_alock_unlock(&ctx->sq[q].lock);
	return n;
}

static void sq_snapshot(struct qps_ctx *ctx, uint64_t *out)
{
	uint32_t q;

	for (q = 0; q < ctx->nsq; q++)
		out[q] = sq_packets(ctx, q);
}

/* Payload: which flow, and its sequence number in that flow. */
struct pkt {
	uint32_t flow;
	uint32_t seq;
	uint8_t pad[PKT_LEN - 8];
};

static ssize_t send_pkt(struct qps_ep *ep, uint32_t flow, uint32_t seq,
			int flags, const struct sockaddr_in *dst)
{
	struct pkt p;

	memset(&p, 0, sizeof(p));
	p.flow = flow;
	p.seq = seq;
	if (!dst)
		return qps_send(ep, &p, sizeof(p), flags);
	return qps_sendto(ep, &p, sizeof(p), flags,
			  (const struct sockaddr *)dst, sizeof(*dst));
}

/* Receive one packet on @ep and check it is (@flow, @seq). */
static void recv_pkt(struct qps_ep *ep, uint32_t flow, uint32_t seq)
{
	struct pkt p;

	EQ_FATAL(qps_recv(ep, &p, sizeof(p), 0), (ssize_t)sizeof(p));
	EQ_FATAL(p.flow, flow);
	EQ_FATAL(p.seq, seq);
}

#define BOTH_PATHS(fn) \
	static void fn##_generic(void) \
	{ T_EXCLUDED_RETURN(); fn(QPS_TX_PATH_GENERIC); } \
	static void fn##_direct(void) \
	{ T_EXCLUDED_RETURN(); fn(QPS_TX_PATH_DIRECT); }

/* --- attributes ---------------------------------------------------------- */

static void test_attr(void)
{
	struct qps_ctx_attr a = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV,
		.provider = "emu",
	};
	struct qps_ctx *ctx = NULL;
	struct qps_stats st;

	t_wire_name(g_wire, sizeof(g_wire), "txq-attr");
	a.dev = g_wire;
	EQ(qps_ctx_create(&a, &ctx), 0);
	st = t_ctx_stats(ctx);
	EQ(st.tx_queues, qps_txq_default_nqp());
	EQ(qps_ctx_destroy(ctx), 0);

	a.comp_mask |= QPS_CTX_ATTR_NUM_TXQ;
	a.num_txq = 4;
	EQ(qps_ctx_create(&a, &ctx), 0);
	EQ(t_ctx_stats(ctx).tx_queues, 4);
	EQ(ctx->nsq, 4);
	/* Send QP 0 receives; the others are send-only. */
	CU_ASSERT(ctx->qp == ctx->sq[0].qp);
	EQ(qps_ctx_destroy(ctx), 0);

	ctx = (struct qps_ctx *)1;
	a.num_txq = 3;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	CU_ASSERT_PTR_NULL(ctx);
	a.num_txq = 0;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	a.num_txq = 128;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	a.num_txq = 1;
	a.comp_mask |= QPS_CTX_ATTR_TXQ_POLICY;
	a.txq_policy = 3;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	a.txq_policy = QPS_TX_POLICY_THREAD;
	a.comp_mask |= QPS_CTX_ATTR_TXQ_FLOWS;
	a.txq_flows = 1000;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	a.txq_flows = 1u << 25;
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	a.txq_flows = 1024;
	EQ(qps_ctx_create(&a, &ctx), 0);
	EQ(t_ctx_stats(ctx).tx_queues, 1);
	EQ(qps_ctx_destroy(ctx), 0);
}

/* --- a connected endpoint: one computation per destination --------------- */

/* A WQE with a bad lkey on send queue @q, as if the QP had failed: its
 * error completion must reset the endpoints that cached @q. */
static void inject_bad_wqe(struct qps_ctx *ctx, uint32_t q)
{
	struct qps_sq *sq = &ctx->sq[q];
	const uint32_t len = 1000;	/* above max_inline: a data segment */
	const uint32_t bad_lkey = 0x0badbad0u;
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	uint32_t slot, head;

	qps_alock_lock(&sq->lock);
	CU_ASSERT_FATAL(sq->nfree > 0);
	slot = sq->free[--sq->nfree];
	sq->inflight++;
	qps_txq_enqueue(ctx->txq, (int)q, 1, &head);
	if (ctx->tx_path == QPS_TX_PATH_DIRECT) {
		EQ(qps_sq_mlx4_write(&sq->mlx4, sq->buf + (size_t)slot *
				     ctx->tx_slot_size, len, bad_lkey, slot,
				     true, 0), 0);
		GE(qps_sq_mlx4_ring(&sq->mlx4), QPS_SQ_RANG_DB);
	} else {
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)(sq->buf + (size_t)slot *
				       ctx->tx_slot_size);
		sge.length = len;
		sge.lkey = bad_lkey;
		wr.wr_id = slot;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		EQ(ctx->ops->post_send(sq->qp, &wr, &bad), 0);
	}
	/* In the posted order, so its completion gives the slot back. */
	qps_tx_posted_push(sq, slot);
	qps_alock_unlock(&sq->lock);
}

/* @n sends on connected @tx, received in order on @rx; returns the
 * computed picks they cost. */
static uint64_t conn_burst(struct qps_ctx *a, struct qps_ep *tx,
			   struct qps_ep *rx, uint32_t n, uint32_t *seq)
{
	uint64_t c0 = t_ctx_stats(a).txq_picks_computed;
	uint32_t i, first;

	for (first = 0; first < n; first += 32) {
		uint32_t k = n - first < 32 ? n - first : 32;

		for (i = 0; i < k; i++)
			EQ_FATAL(send_pkt(tx, 0, seq[0] + i,
					  i + 1 < k ? QPS_MSG_MORE : 0, NULL),
				 (ssize_t)sizeof(struct pkt));
		for (i = 0; i < k; i++)
			recv_pkt(rx, 0, seq[0] + i);
		seq[0] += k;
	}
	return t_ctx_stats(a).txq_picks_computed - c0;
}

static void connected_once(uint32_t path)
{
	struct qps_ctx *a, *b, *c;
	struct qps_ep *tx, *rx, *rx2;
	struct sockaddr_in db = t_sin(IP_B, PORT_B);
	struct sockaddr_in db2 = t_sin(IP_B, PORT_B + 1);
	struct sockaddr_in none = { .sin_family = AF_UNSPEC };
	uint64_t p0[QPS_MAX_TXQ], p1[QPS_MAX_TXQ];
	struct qps_stats s0, s1;
	uint32_t seq = 0, q, used = 0;
	int32_t cached;

	t_wire_name(g_wire, sizeof(g_wire), "txq-conn");
	a = mkctx(IP_A, path, 4, QPS_TX_POLICY_HASH, LONG_DELAY_US);
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, -1, 0);
	tx = mkep(a, IP_A, PORT_A);
	rx = mkep(b, IP_B, PORT_B);
	rx2 = mkep(b, IP_B, PORT_B + 1);

	/* Unset until the first send. */
	EQ(qps_connect(tx, (struct sockaddr *)&db, sizeof(db)), 0);
	EQ(atomic_load(&tx->txq_cache.qp), -1);
	s0 = t_ctx_stats(a);
	sq_snapshot(a, p0);
	EQ(conn_burst(a, tx, rx, 10000, &seq), 1);
	s1 = t_ctx_stats(a);
	sq_snapshot(a, p1);
	/* The first send may compute under another queue's lock and confirm
	 * it under its own: one more cached pick, never more computations. */
	GE(s1.txq_picks_cached - s0.txq_picks_cached, 9999);
	LE(s1.txq_picks_cached - s0.txq_picks_cached, 10000);
	EQ(s1.txq_resets_connect + s1.txq_resets_route + s1.txq_resets_qp,
	   0);
	EQ(s1.txq_flows_new, 0);	/* the flow table was not used */
	/* Every datagram went out on the cached QP. */
	cached = atomic_load(&tx->txq_cache.qp);
	CU_ASSERT_FATAL(cached >= 0 && cached < 4);
	for (q = 0; q < 4; q++) {
		EQ(p1[q] - p0[q], (int32_t)q == cached ? 10000 : 0);
		used += p1[q] != p0[q];
	}
	EQ(used, 1);

	/* Reconnect: one reset (connect), one computation. */
	EQ(qps_connect(tx, (struct sockaddr *)&db2, sizeof(db2)), 0);
	seq = 0;
	EQ(conn_burst(a, tx, rx2, 1000, &seq), 1);
	EQ(t_ctx_stats(a).txq_resets_connect, 1);

	/* A port joins the wire: the route generation moves. */
	c = mkctx(IP_C, QPS_TX_PATH_AUTO, 0, -1, 0);
	EQ(conn_burst(a, tx, rx2, 1000, &seq), 1);
	EQ(t_ctx_stats(a).txq_resets_route, 1);
	/* And leaves it. */
	EQ(qps_ctx_destroy(c), 0);
	EQ(conn_burst(a, tx, rx2, 1000, &seq), 1);
	EQ(t_ctx_stats(a).txq_resets_route, 2);
	EQ(conn_burst(a, tx, rx2, 100, &seq), 0);

	/* The cached QP fails: its error completion resets the pick. */
	s0 = t_ctx_stats(a);
	inject_bad_wqe(a, (uint32_t)atomic_load(&tx->txq_cache.qp));
	GE(qps_ctx_progress(a), 1);
	s1 = t_ctx_stats(a);
	EQ(s1.tx_errors - s0.tx_errors, 1);
	EQ(conn_burst(a, tx, rx2, 100, &seq), 1);
	s1 = t_ctx_stats(a);
	EQ(s1.txq_resets_qp, 1);
	EQ(s1.txq_resets_connect, 1);
	EQ(s1.txq_resets_route, 2);

	/* Disconnect: a reset; sending needs a destination again. */
	EQ(qps_connect(tx, (struct sockaddr *)&none, sizeof(none)), 0);
	EQ(t_ctx_stats(a).txq_resets_connect, 2);
	EQ(send_pkt(tx, 0, 0, 0, NULL), -EDESTADDRREQ);
	/* Connect again after a disconnect: the pick was already dropped,
	 * so no reset is counted, and one computation follows. */
	EQ(qps_connect(tx, (struct sockaddr *)&db, sizeof(db)), 0);
	seq = 10000;
	EQ(conn_burst(a, tx, rx, 100, &seq), 1);
	s1 = t_ctx_stats(a);
	EQ(s1.txq_resets_connect, 2);
	EQ(s1.txq_picks_computed, 6);
	EQ(s1.tx_errors, 1);
	EQ(s1.dev_tx_drops, 1);		/* the bad WQE */
	EQ(qps_recv(rx, &seq, sizeof(seq), QPS_MSG_DONTWAIT), -EAGAIN);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(connected_once)

/* --- unconnected flows -------------------------------------------------- */

#define NFLOWS 16

/* Flows to 16 ports: spread over the send QPs, each in order; a batch
 * rings each send QP it wrote to once; MORE bursts left on several send
 * QPs are all rung by the bounded delay. */
static void flows(uint32_t path)
{
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx[NFLOWS];
	struct sockaddr_in d[NFLOWS];
	struct qps_msg msgs[NFLOWS];
	struct pkt pay[NFLOWS];
	uint64_t p0[QPS_MAX_TXQ], p1[QPS_MAX_TXQ];
	struct qps_stats s0, s1;
	uint32_t f, q, round, touched = 0;

	t_wire_name(g_wire, sizeof(g_wire), "txq-flows");
	a = mkctx(IP_A, path, 4, QPS_TX_POLICY_HASH, 50000);	/* 50 ms */
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, -1, 0);
	tx = mkep(a, IP_A, PORT_A);
	for (f = 0; f < NFLOWS; f++) {
		rx[f] = mkep(b, IP_B, (unsigned short)(PORT_B + f));
		d[f] = t_sin(IP_B, (unsigned short)(PORT_B + f));
	}

	for (round = 0; round < 8; round++) {
		s0 = t_ctx_stats(a);
		sq_snapshot(a, p0);
		for (f = 0; f < NFLOWS; f++) {
			memset(&pay[f], 0, sizeof(pay[f]));
			pay[f].flow = f;
			pay[f].seq = round;
			msgs[f] = (struct qps_msg){ .buf = &pay[f],
				.len = sizeof(pay[f]),
				.dest = (struct sockaddr *)&d[f],
				.dest_len = sizeof(d[f]), .priority = -1 };
		}
		EQ(qps_sendmmsg(tx, msgs, NFLOWS, 0), NFLOWS);
		s1 = t_ctx_stats(a);
		sq_snapshot(a, p1);
		touched = 0;
		for (q = 0; q < 4; q++)
			touched += p1[q] != p0[q];
		EQ(s1.tx_doorbells - s0.tx_doorbells, touched);
		EQ(s1.tx_flush_send - s0.tx_flush_send, touched);
		for (f = 0; f < NFLOWS; f++)
			recv_pkt(rx[f], f, round);
	}
	/* Spread: more than one QP carries flows (the module's own test
	 * measures the balance). Placed once each, never moved. */
	GE(touched, 2);
	s1 = t_ctx_stats(a);
	EQ(s1.txq_flows_new, NFLOWS);
	EQ(s1.txq_flow_moves, 0);
	EQ(s1.txq_flow_deferred, 0);
	/* Unconnected sends evaluate the policy every time (what the
	 * connected endpoints' cache saves). */
	EQ(s1.txq_picks_computed, 8 * NFLOWS);
	EQ(s1.tx_packets, 8 * NFLOWS);

	/* One MORE send per flow, then silence: every send QP touched is
	 * rung by the flusher, once. */
	s0 = s1;
	sq_snapshot(a, p0);
	for (f = 0; f < NFLOWS; f++)
		EQ(send_pkt(tx, f, 100, QPS_MSG_MORE, &d[f]),
		   (ssize_t)sizeof(struct pkt));
	sq_snapshot(a, p1);
	EQ(t_ctx_stats(a).tx_doorbells, s0.tx_doorbells);
	for (f = 0; f < NFLOWS; f++)
		recv_pkt(rx[f], f, 100);
	t_sleep_ms(10);	/* the flusher may still be counting its last */
	s1 = t_ctx_stats(a);
	touched = 0;
	for (q = 0; q < 4; q++)
		touched += p1[q] != p0[q];
	EQ(s1.tx_flush_timer - s0.tx_flush_timer, touched);
	EQ(s1.tx_doorbells - s0.tx_doorbells, touched);
	EQ(s1.tx_errors, 0);
	EQ(s1.tx_wqes, s1.wqes);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}
BOTH_PATHS(flows)

/* --- thread policy: one send QP per thread ------------------------------- */

#define TP_THREADS 4
#define TP_SENDS 50

struct tp_arg {
	struct qps_ep *ep;
	struct sockaddr_in dst;
	uint32_t flow;
	int fails;
};

static void *tp_sender(void *v)
{
	struct tp_arg *t = v;
	uint32_t i;

	for (i = 0; i < TP_SENDS; i++)
		if (send_pkt(t->ep, t->flow, i, 0, &t->dst) !=
		    (ssize_t)sizeof(struct pkt))
			t->fails++;
	return NULL;
}

static void test_thread_policy(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *rx[TP_THREADS];
	struct tp_arg t[TP_THREADS];
	pthread_t th[TP_THREADS];
	uint64_t p[QPS_MAX_TXQ];
	uint32_t k, i;

	t_wire_name(g_wire, sizeof(g_wire), "txq-thread");
	a = mkctx(IP_A, QPS_TX_PATH_AUTO, TP_THREADS, QPS_TX_POLICY_THREAD,
		  0);
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, -1, 0);
	for (k = 0; k < TP_THREADS; k++) {
		rx[k] = mkep(b, IP_B, (unsigned short)(PORT_B + k));
		t[k] = (struct tp_arg){
			.ep = mkep(a, IP_A, (unsigned short)(PORT_A + k)),
			.dst = t_sin(IP_B, (unsigned short)(PORT_B + k)),
			.flow = k,
		};
	}
	/* Fresh threads get consecutive round-robin numbers: one QP each. */
	for (k = 0; k < TP_THREADS; k++)
		EQ_FATAL(pthread_create(&th[k], NULL, tp_sender, &t[k]), 0);
	for (k = 0; k < TP_THREADS; k++) {
		pthread_join(th[k], NULL);
		EQ(t[k].fails, 0);
	}
	sq_snapshot(a, p);
	for (k = 0; k < TP_THREADS; k++)
		EQ(p[k], TP_SENDS);
	for (k = 0; k < TP_THREADS; k++)
		for (i = 0; i < TP_SENDS; i++)
			recv_pkt(rx[k], k, i);
	EQ(t_ctx_stats(a).txq_flows_new, TP_THREADS);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}

/* --- reordering: a sender moved between CPU 0 and 1 ----------------------- */

#define RO_FLOWS 4
#define RO_ROUNDS 24
#define RO_BURST 4	/* packets per flow per CPU per round */

struct ro_result {
	int skipped;		/* could not run on CPU 0 and 1 */
	int fatal;		/* a send or receive failed */
	uint32_t received;
	uint32_t reorders;	/* packets older than one already seen */
	uint64_t deferred, moves;
};

struct ro_arg {
	struct qps_ctx *a;
	struct qps_ep *tx;
	struct qps_ep *rx[RO_FLOWS];
	struct sockaddr_in d[RO_FLOWS];
	struct ro_result r;
};

static bool ro_pin(int cpu)
{
	cpu_set_t set;
	int i;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		return false;
	/* The kernel moves the caller before returning; check anyway. */
	for (i = 0; i < 100 && sched_getcpu() != cpu; i++)
		sched_yield();
	return sched_getcpu() == cpu;
}

/*
 * Each round: on one CPU, RO_BURST packets per flow with QPS_MSG_MORE
 * (written to that CPU's QP, not rung); move to the other CPU; RO_BURST
 * more per flow, the last without MORE (rings the QP it is on); then
 * qps_ctx_flush rings whatever still waits, and the receiver takes all.
 * With the rule the flows stay on the first QP until it completes, so the
 * last send rings everything in order. Without it they move, the second
 * QP is rung first, and the receiver sees the first burst late.
 */
static void *ro_main(void *v)
{
	struct ro_arg *arg = v;
	struct ro_result *r = &arg->r;
	uint32_t seq[RO_FLOWS] = { 0 }, seen[RO_FLOWS] = { 0 };
	uint32_t round, half, k, f, n;
	struct pkt p;

	if (!ro_pin(0)) {
		r->skipped = 1;
		return NULL;
	}
	for (round = 0; round < RO_ROUNDS && !r->skipped && !r->fatal;
	     round++) {
		for (half = 0; half < 2; half++) {
			if (!ro_pin((int)((round + half) & 1))) {
				r->skipped = 1;
				break;
			}
			for (k = 0; k < RO_BURST; k++)
				for (f = 0; f < RO_FLOWS; f++) {
					bool last = half == 1 &&
						    k + 1 == RO_BURST &&
						    f + 1 == RO_FLOWS;

					if (send_pkt(arg->tx, f, seq[f]++,
						     last ? 0 : QPS_MSG_MORE,
						     &arg->d[f]) !=
					    (ssize_t)sizeof(p))
						r->fatal = 1;
				}
		}
		qps_ctx_flush(arg->a);
		for (f = 0; f < RO_FLOWS && !r->skipped; f++)
			for (n = 0; n < 2 * RO_BURST; n++) {
				if (qps_recv(arg->rx[f], &p, sizeof(p), 0) !=
				    (ssize_t)sizeof(p) || p.flow != f) {
					r->fatal = 1;
					break;
				}
				r->received++;
				if (p.seq + 1 < seen[f])
					r->reorders++;
				else
					seen[f] = p.seq + 1;
			}
	}
	return NULL;
}

/* The scenario on a thread of its own (its CPU affinity changes), on
 * contexts made here: 2 send QPs, cpu policy, postponed doorbells wait up
 * to 1 s, so only our sends and flushes ring them. */
static struct ro_result ro_run(uint32_t path, bool rule)
{
	struct ro_arg arg;
	struct qps_ctx *b;
	struct qps_stats st;
	pthread_t th;
	uint32_t f;

	memset(&arg, 0, sizeof(arg));
	t_wire_name(g_wire, sizeof(g_wire),
		    rule ? "txq-ro-on" : "txq-ro-off");
	arg.a = mkctx(IP_A, path, 2, QPS_TX_POLICY_CPU, LONG_DELAY_US);
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, -1, 0);
	/* The test-only knob, set while nothing sends. */
	arg.a->txq->inflight_rule = rule;
	arg.tx = mkep(arg.a, IP_A, PORT_A);
	for (f = 0; f < RO_FLOWS; f++) {
		arg.rx[f] = mkep(b, IP_B, (unsigned short)(PORT_B + f));
		arg.d[f] = t_sin(IP_B, (unsigned short)(PORT_B + f));
	}
	EQ_FATAL(pthread_create(&th, NULL, ro_main, &arg), 0);
	pthread_join(th, NULL);
	st = t_ctx_stats(arg.a);
	arg.r.deferred = st.txq_flow_deferred;
	arg.r.moves = st.txq_flow_moves;
	EQ(qps_ctx_destroy(arg.a), 0);
	EQ(qps_ctx_destroy(b), 0);
	return arg.r;
}

static void reorder_cpu(uint32_t path)
{
	struct ro_result on, off;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		printf("\n    skipped: needs CPUs 0 and 1 ");
		return;
	}
	on = ro_run(path, true);
	if (on.skipped) {
		printf("\n    skipped: cannot run on CPUs 0 and 1 ");
		return;
	}
	EQ(on.fatal, 0);
	EQ(on.received, RO_ROUNDS * RO_FLOWS * 2 * RO_BURST);
	EQ(on.reorders, 0);
	/* The rule acted: moves refused while packets waited, and flows
	 * moved to the new CPU's QP once the old one had completed. */
	GE(on.deferred, RO_ROUNDS * RO_FLOWS);
	GE(on.moves, RO_ROUNDS - 1);

	off = ro_run(path, false);
	EQ(off.fatal, 0);
	EQ(off.received, RO_ROUNDS * RO_FLOWS * 2 * RO_BURST);
	/* Without the rule the same sends are reordered. */
	GE(off.reorders, RO_ROUNDS);
	EQ(off.deferred, 0);
	printf("\n    reorderings: %u with the rule, %u without (%u packets "
	       "each) ", on.reorders, off.reorders, on.received);
}
BOTH_PATHS(reorder_cpu)

/* --- concurrent senders, one flow table ----------------------------------- */

#define CC_THREADS 4
#define CC_FLOWS 4	/* per thread: one per receiving port */
#define CC_SENDS 3000	/* per thread */

struct cc_sender {
	struct qps_ep *ep;
	const struct sockaddr_in *dst;
	uint32_t id;
	bool hop;			/* move between CPU 0 and 1 */
	uint64_t sent;
	int err;
};

struct cc_recv {
	struct qps_ep **rx;
	uint64_t received;
	uint64_t reorders;
	uint32_t seen[CC_THREADS][CC_FLOWS];
	int stop;		/* atomic */
	int bad;
};

static void *cc_send_main(void *v)
{
	struct cc_sender *s = v;
	uint32_t seq[CC_FLOWS] = { 0 };
	uint64_t rnd = 0x9e3779b97f4a7c15ull * (s->id + 1);
	struct qps_msg m[8];
	struct pkt p[8];
	uint32_t i = 0, k, f, hops = UINT32_MAX;
	int r;

	while (i < CC_SENDS) {
		/* Hop between CPU 0 and 1 now and then: with the cpu policy
		 * the thread's flows then want the other QP. */
		if (s->hop && i / 256 != hops) {
			hops = i / 256;
			ro_pin((int)((hops + s->id) & 1));
		}
		rnd ^= rnd << 13;
		rnd ^= rnd >> 7;
		rnd ^= rnd << 17;
		f = (uint32_t)(rnd >> 8) % CC_FLOWS;
		if (rnd & 1) {
			/* A batch of up to 8, across the thread's flows. */
			uint32_t n = 1 + (uint32_t)(rnd >> 20) % 8;

			if (n > CC_SENDS - i)
				n = CC_SENDS - i;

			for (k = 0; k < n; k++) {
				uint32_t g = (f + k) % CC_FLOWS;

				memset(&p[k], 0, sizeof(p[k]));
				p[k].flow = s->id * CC_FLOWS + g;
				p[k].seq = seq[g]++;
				m[k] = (struct qps_msg){ .buf = &p[k],
					.len = sizeof(p[k]),
					.dest = (const struct sockaddr *)
						&s->dst[g],
					.dest_len = sizeof(s->dst[g]),
					.priority = -1 };
			}
			r = qps_sendmmsg(s->ep, m, n,
					 (rnd & 2) ? QPS_MSG_MORE : 0);
			if (r != (int)n) {
				s->err = r;
				break;
			}
			i += n;
		} else {
			r = (int)send_pkt(s->ep, s->id * CC_FLOWS + f, seq[f]++,
					  (rnd & 2) ? QPS_MSG_MORE : 0,
					  &s->dst[f]);
			if (r != (int)sizeof(struct pkt)) {
				s->err = r;
				break;
			}
			i++;
		}
	}
	s->sent = i;
	return NULL;
}

static void *cc_recv_main(void *v)
{
	struct cc_recv *c = v;
	struct pkt p;
	uint32_t f, idle = 0;
	ssize_t n;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) || idle < 3) {
		bool any = false;

		for (f = 0; f < CC_FLOWS; f++) {
			while ((n = qps_recv(c->rx[f], &p, sizeof(p),
					     QPS_MSG_DONTWAIT)) > 0) {
				uint32_t t = p.flow / CC_FLOWS,
					 g = p.flow % CC_FLOWS;

				any = true;
				if (n != (ssize_t)sizeof(p) ||
				    t >= CC_THREADS || g != f) {
					c->bad++;
					continue;
				}
				c->received++;
				if (p.seq + 1 < c->seen[t][g])
					c->reorders++;
				else
					c->seen[t][g] = p.seq + 1;
			}
		}
		if (any) {
			idle = 0;
		} else {
			idle += __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);
			sched_yield();
		}
	}
	return NULL;
}

/* The peer MAC update: held writers and generation order. */
struct pm_writer {
	struct qps_ep *ep;
	uint64_t gen;
	uint8_t mac[6];
	int done;
};

static void *pm_store(void *arg)
{
	struct pm_writer *w = arg;

	qps_ep_peer_mac_store(w->ep, w->gen, w->mac, false);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_peer_mac_update(void)
{
	static const uint8_t m1[6] = { 2, 0, 0, 0, 0, 1 };
	static const uint8_t m2[6] = { 2, 0, 0, 0, 0, 2 };
	struct sockaddr_in db = t_sin(IP_B, PORT_B);
	struct pm_writer w = { .gen = 0 };
	struct qps_ctx *a, *b;
	struct qps_ep *tx;
	uint8_t mac[6];
	uint64_t g;
	pthread_t th;

	t_wire_name(g_wire, sizeof(g_wire), "txq-pmac");
	a = mkctx(IP_A, QPS_TX_PATH_AUTO, 2, QPS_TX_POLICY_HASH, 0);
	b = mkctx(IP_B, QPS_TX_PATH_AUTO, 0, -1, 0);
	tx = mkep(a, IP_A, PORT_A);
	EQ(qps_connect(tx, (struct sockaddr *)&db, sizeof(db)), 0);
	g = __atomic_load_n(&tx->peer_route_gen, __ATOMIC_ACQUIRE);

	/* A resolver that read an older generation finishes last: the
	 * newer MAC stays, published with its own generation. */
	qps_ep_peer_mac_store(tx, g + 2, m2, false);
	qps_ep_peer_mac_store(tx, g + 1, m1, false);
	CU_ASSERT(qps_ep_peer_mac_load(tx, g + 2, mac) &&
		  memcmp(mac, m2, 6) == 0);
	CU_ASSERT(!qps_ep_peer_mac_load(tx, g + 1, mac));

	/* A writer half-way (the lock held here) keeps another out: the
	 * second's MAC and generation appear together, after the first. */
	__atomic_store_n(&tx->peer_lock, 1, __ATOMIC_RELAXED);
	w.ep = tx;
	w.gen = g + 3;
	memcpy(w.mac, m1, 6);
	EQ_FATAL(pthread_create(&th, NULL, pm_store, &w), 0);
	t_sleep_ms(20);
	EQ(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE), 0);
	CU_ASSERT(qps_ep_peer_mac_load(tx, g + 2, mac) &&
		  memcmp(mac, m2, 6) == 0);
	__atomic_store_n(&tx->peer_lock, 0, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	CU_ASSERT(qps_ep_peer_mac_load(tx, g + 3, mac) &&
		  memcmp(mac, m1, 6) == 0);

	/* connect replaces it whatever the generation: a new peer. */
	EQ(qps_connect(tx, (struct sockaddr *)&db, sizeof(db)), 0);
	CU_ASSERT(qps_ep_peer_mac_load(tx, g, mac) && mac[1] == 0x51);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}

static void test_concurrent(void)
{
	struct qps_ctx_attr ra;
	struct qps_ctx *a, *b = NULL;
	struct qps_ep *rx[CC_FLOWS];
	struct sockaddr_in d[CC_FLOWS];
	struct cc_sender s[CC_THREADS];
	struct cc_recv c;
	pthread_t tr;
	struct qps_stats sa, sb;
	uint32_t idx[CC_THREADS * CC_FLOWS];
	uint64_t sent = 0, drops;
	uint32_t k, f, j;
	bool collide = false;

	T_EXCLUDED_RETURN();

	t_wire_name(g_wire, sizeof(g_wire), "txq-cc");
	a = mkctx(IP_A, QPS_TX_PATH_AUTO, 4, QPS_TX_POLICY_CPU,
		  QPS_DB_DELAY_DEFAULT_US);
	ra = t_emu_attr(g_wire, IP_B);
	ra.comp_mask |= QPS_CTX_ATTR_RX_DEPTH;
	ra.rx_depth = 4096;
	EQ_FATAL(qps_ctx_create(&ra, &b), 0);
	memset(&c, 0, sizeof(c));
	for (f = 0; f < CC_FLOWS; f++) {
		rx[f] = mkep(b, IP_B, (unsigned short)(PORT_B + f));
		d[f] = t_sin(IP_B, (unsigned short)(PORT_B + f));
	}
	c.rx = rx;
	for (k = 0; k < CC_THREADS; k++) {
		s[k] = (struct cc_sender){
			.ep = mkep(a, IP_A, (unsigned short)(PORT_A + k)),
			.dst = d, .id = k,
			.hop = sysconf(_SC_NPROCESSORS_ONLN) >= 2 };
		/* Flows that share a table entry may reorder each other
		 * (a documented benign race); these do not. */
		for (f = 0; f < CC_FLOWS; f++) {
			struct qps_txq_tuple t = {
				.saddr = t_sin(IP_A, 0).sin_addr.s_addr,
				.daddr = d[f].sin_addr.s_addr,
				.sport = htons((uint16_t)(PORT_A + k)),
				.dport = d[f].sin_port,
			};

			idx[k * CC_FLOWS + f] = qps_txq_flow_hash(a->txq, &t) &
						a->txq->flow_mask;
			for (j = 0; j < k * CC_FLOWS + f; j++)
				collide |= idx[j] == idx[k * CC_FLOWS + f];
		}
	}
	EQ(collide, 0);

	EQ_FATAL(pthread_create(&tr, NULL, cc_recv_main, &c), 0);
	t_threads_run(cc_send_main, s, sizeof(s[0]), CC_THREADS);
	for (k = 0; k < CC_THREADS; k++) {
		EQ(s[k].err, 0);
		EQ(s[k].sent, CC_SENDS);
		sent += s[k].sent;
	}
	/* What MORE left unrung goes now; then let the receiver drain. */
	qps_ctx_flush(a);
	t_sleep_ms(50);
	t_thread_stop(tr, &c.stop);

	EQ(c.bad, 0);
	drops = t_check_delivery(a, b, sent, c.received, &sa, &sb);
	EQ(c.reorders, 0);
	EQ(sa.txq_flows_new, CC_THREADS * CC_FLOWS);
	printf("\n    %llu sent, %llu received, %llu dropped (counted: "
	       "%llu no receive buffer, %llu receive queue full); "
	       "flow moves %llu, deferred %llu ",
	       (unsigned long long)sent, (unsigned long long)c.received,
	       (unsigned long long)drops,
	       (unsigned long long)sb.dev_rx_drops,
	       (unsigned long long)sb.rx_queue_full,
	       (unsigned long long)sa.txq_flow_moves,
	       (unsigned long long)sa.txq_flow_deferred);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}

static CU_TestInfo tests[] = {
	{ "attributes", test_attr },
	{ "connected: one computation per destination (generic)",
	  connected_once_generic },
	{ "connected: one computation per destination (direct)",
	  connected_once_direct },
	{ "unconnected flows, doorbells per send QP (generic)",
	  flows_generic },
	{ "unconnected flows, doorbells per send QP (direct)", flows_direct },
	{ "thread policy: one send QP per thread", test_thread_policy },
	{ "reordering: sender moved between CPUs (generic)",
	  reorder_cpu_generic },
	{ "reordering: sender moved between CPUs (direct)",
	  reorder_cpu_direct },
	{ "concurrent senders, one flow table", test_concurrent },
	{ "peer MAC and route generation: one update", test_peer_mac_update },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("txq_e2e", tests);
}
