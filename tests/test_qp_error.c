// SPDX-License-Identifier: MIT
/*
 * QP errors (qp_recover.c): a QP put into the error state, as a device
 * does on a fatal WQE error, must not take the context with it. What it
 * held completes as counted errors, the next progress call brings it back
 * through RESET, its receive buffers are posted again, its steering rules
 * and memberships still hold, and traffic resumes. A QP that cannot come
 * back fails its sends with -ENETDOWN. Runs on emu and, through
 * tests/verbs/run-on-shim.sh, on the verbs provider over the libibverbs
 * test double, where the error state is the double's.
 */
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qps_int.h"
#include "sq.h"
#include "emu/emu.h"

#define IP_TX "198.18.0.91"
#define IP_RX "198.18.0.92"
#define PORT_RX 9100
#define PORT_TX 9101
#define GROUP "239.9.1.1"
#define RX_DEPTH 32

static char g_wire[64];

static uint32_t g_transport = QPS_TRANSPORT_RAW;

static struct qps_ctx *ctx_open(const char *ip, uint32_t num_txq)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, ip);
	struct qps_ctx *ctx = NULL;

	/* test_dead swaps ctx->ops on a live context, which the stats
	 * thread of a published context reads: keep the counters private. */
	a.comp_mask |= QPS_CTX_ATTR_RX_DEPTH | QPS_CTX_ATTR_NUM_TXQ |
		       QPS_CTX_ATTR_TRANSPORT | QPS_CTX_ATTR_STATS;
	a.stats = 0;
	a.rx_depth = RX_DEPTH;
	a.num_txq = num_txq;
	a.transport = g_transport;
	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	return ctx;
}

static int qp_fail(struct qps_ctx *ctx, struct qps_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	return ctx->ops->modify_qp(qp, &a, IBV_QP_STATE);
}

/* Receive everything queued on @ep within @ms, progressing @peer (the
 * sender, whose recovery may be what is awaited) as well. */
static int drain(struct qps_ep *ep, struct qps_ctx *peer, int want, int ms)
{
	uint64_t end = t_now_ms() + (uint64_t)ms;
	char buf[64];
	int got = 0;

	while (got < want && t_now_ms() < end) {
		if (qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT) >= 0) {
			got++;
			continue;
		}
		qps_ctx_progress(peer);
		usleep(200);
	}
	return got;
}

static int send_n(struct qps_ep *ep, int n)
{
	int i, ok = 0;

	for (i = 0; i < n; i++)
		ok += qps_send(ep, "qp", 2, 0) == 2;
	qps_ctx_flush(ep->ctx);
	return ok;
}

struct pair {
	struct qps_ctx *tx, *rx;
	struct qps_ep *out, *in;
};

static void pair_open(struct pair *p, uint32_t num_txq)
{
	struct sockaddr_in dst = t_sin(IP_RX, PORT_RX);

	t_suite_begin();
	p->tx = ctx_open(IP_TX, num_txq);
	p->rx = ctx_open(IP_RX, 1);
	if (g_transport == QPS_TRANSPORT_UD) {
		struct qps_ud_addr ua;

		T_EQ_FATAL(qps_ud_local(p->rx, &ua), 0);
		T_EQ_FATAL(qps_ud_peer_set(p->tx, &ua), 0);
		T_EQ_FATAL(qps_ud_local(p->tx, &ua), 0);
		T_EQ_FATAL(qps_ud_peer_set(p->rx, &ua), 0);
	}
	p->in = t_ep_bound(p->rx, IP_RX, PORT_RX, 2000);
	p->out = t_ep_bound(p->tx, IP_TX, PORT_TX, 2000);
	T_EQ_FATAL(qps_connect(p->out, (const struct sockaddr *)&dst,
			       sizeof(dst)), 0);
	T_EQ(send_n(p->out, 4), 4);
	T_EQ(drain(p->in, p->tx, 4, 2000), 4);
}

/* Progress @ctx until it reports @n recoveries (bounded). */
static struct qps_stats recovered(struct qps_ctx *ctx, uint64_t n)
{
	uint64_t end = t_now_ms() + 2000;
	struct qps_stats st = t_ctx_stats(ctx);

	while (st.qp_recoveries < n && t_now_ms() < end) {
		qps_ctx_progress(ctx);
		usleep(200);
		st = t_ctx_stats(ctx);
	}
	T_EQ(st.qp_recoveries, n);
	return st;
}

/* The sending context's QP fails (it is also its receiving QP): what is
 * sent into the error state is flushed and counted, the QP comes back,
 * and both directions work again, with every receive buffer reposted. */
static void test_send_qp(void)
{
	struct sockaddr_in back = t_sin(IP_TX, PORT_TX);
	struct qps_stats st;
	struct pair p;
	int i, ok = 0;

	pair_open(&p, 1);
	T_EQ(qp_fail(p.tx, p.tx->sq[0].qp), 0);
	T_EQ(send_n(p.out, 8), 8);
	st = recovered(p.tx, 1);
	T_EQ(st.qp_errors, 1);
	T_EQ(st.tx_errors, 8);
	T_EQ(send_n(p.out, 16), 16);
	T_EQ(drain(p.in, p.tx, 16, 2000), 16);
	/* A full receive ring's worth back, undrained until all are sent:
	 * each buffer was posted again. */
	for (i = 0; i < RX_DEPTH; i++)
		ok += qps_sendto(p.in, "r", 1, 0, (struct sockaddr *)&back,
				 sizeof(back)) == 1;
	qps_ctx_flush(p.rx);
	T_EQ(ok, RX_DEPTH);
	T_EQ(drain(p.out, p.rx, RX_DEPTH, 2000), RX_DEPTH);
	st = t_ctx_stats(p.tx);
	T_EQ(st.qp_errors, 1);
	t_suite_end();
}

/* The receiving QP fails: progress returns instead of chasing buffers
 * that come straight back flushed; each posted buffer is counted once in
 * rx_errors, and after the recovery a full ring's worth arrives. */
static void test_recv_qp(void)
{
	struct qps_stats st;
	struct pair p;

	pair_open(&p, 1);
	T_EQ(qp_fail(p.rx, p.rx->qp), 0);
	T_GE(qps_ctx_progress(p.rx), 0);
	st = recovered(p.rx, 1);
	T_EQ(st.qp_errors, 1);
	T_EQ(st.rx_errors, RX_DEPTH);
	T_EQ(st.tx_errors, 0);
	T_EQ(send_n(p.out, RX_DEPTH), RX_DEPTH);
	T_EQ(drain(p.in, p.tx, RX_DEPTH, 3000), RX_DEPTH);
	t_suite_end();
}

/* Five failures in a row, each recovered, traffic between each. */
static void test_repeated(void)
{
	struct qps_stats st;
	struct pair p;
	int k;

	pair_open(&p, 1);
	for (k = 1; k <= 5; k++) {
		T_EQ(qp_fail(p.tx, p.tx->sq[0].qp), 0);
		T_EQ(send_n(p.out, 2), 2);
		recovered(p.tx, (uint64_t)k);
		T_EQ(send_n(p.out, 8), 8);
		T_EQ(drain(p.in, p.tx, 8, 2000), 8);
	}
	st = t_ctx_stats(p.tx);
	T_EQ(st.qp_errors, 5);
	T_EQ(st.tx_errors, 10);
	t_suite_end();
}

/* A send-only QP (send queue 1) fails: it comes back alone; the
 * context's receiving QP is never reset (no receive buffer flushed). */
static void test_second_txq(void)
{
	struct sockaddr_in dst = t_sin(IP_RX, PORT_RX);
	struct qps_ep *eps[16];
	struct qps_stats st;
	struct pair p;
	int i, sent = 0, got;

	pair_open(&p, 2);
	for (i = 0; i < 16; i++) {
		eps[i] = t_ep_bound(p.tx, IP_TX, (unsigned short)(PORT_TX + 1 +
							  i), 2000);
		T_EQ(qps_connect(eps[i], (const struct sockaddr *)&dst,
				 sizeof(dst)), 0);
	}
	T_EQ(qp_fail(p.tx, p.tx->sq[1].qp), 0);
	for (i = 0; i < 16; i++)
		sent += send_n(eps[i], 1);
	T_EQ(sent, 16);
	st = recovered(p.tx, 1);
	T_EQ(st.qp_errors, 1);
	T_GE(st.tx_errors, 1);
	T_EQ(st.rx_errors, 0);
	got = drain(p.in, p.tx, 16 - (int)st.tx_errors, 2000);
	T_EQ(got, 16 - (int)st.tx_errors);
	for (i = 0; i < 16; i++)
		sent += send_n(eps[i], 1);
	T_EQ(drain(p.in, p.tx, 16, 2000), 16);
	t_suite_end();
}

/* Steering rules and group memberships belong to the QP number: after
 * the receiving QP came back, the group is still delivered. */
static void test_membership(void)
{
	struct sockaddr_in grp = t_sin(GROUP, PORT_RX);
	struct qps_mreq m = { .group.s_addr = t_ip4(GROUP) };
	struct qps_ep *member, *out;
	struct qps_stats st;
	struct pair p;
	int i, ok = 0;

	pair_open(&p, 1);
	member = t_ep_bound(p.rx, "0.0.0.0", PORT_RX + 50, 2000);
	grp.sin_port = htons(PORT_RX + 50);
	T_EQ(qps_join(member, &m, sizeof(m)), 0);
	out = t_ep_bound(p.tx, IP_TX, PORT_TX + 50, 2000);
	T_EQ(qp_fail(p.rx, p.rx->qp), 0);
	T_GE(qps_ctx_progress(p.rx), 0);
	recovered(p.rx, 1);
	for (i = 0; i < 8; i++)
		ok += qps_sendto(out, "g", 1, 0, (struct sockaddr *)&grp,
				 sizeof(grp)) == 1;
	qps_ctx_flush(p.tx);
	T_EQ(ok, 8);
	T_EQ(drain(member, p.tx, 8, 2000), 8);
	st = t_ctx_stats(p.rx);
	/* Raw: the port's rule and the group's own where the device takes
	 * it; UD: the attachment. */
	T_EQ(st.mc_rules, g_transport == QPS_TRANSPORT_UD ||
	     !(p.rx->info.caps & QPS_DEV_CAP_MC_GROUP_RULE) ? 1 : 2);
	t_suite_end();
}

/* The same on the UD transport: its QPs come back with their Q_Key, the
 * peers stay known, and group attachments hold. */
static void test_ud(void)
{
	g_transport = QPS_TRANSPORT_UD;
	test_send_qp();
	test_recv_qp();
	test_membership();
	g_transport = QPS_TRANSPORT_RAW;
}

/* A provider whose modify_qp refuses to bring a QP back up. */
static const struct qps_provider_ops *g_real_ops;

static int modify_no_init(struct qps_qp *qp, struct ibv_qp_attr *attr,
			  int mask)
{
	if (attr && attr->qp_state == IBV_QPS_INIT)
		return -EIO;
	return g_real_ops->modify_qp(qp, attr, mask);
}

/* The QP cannot be brought back: its sends fail with -ENETDOWN rather
 * than vanish, and the context still closes cleanly. */
static void test_dead(void)
{
	struct qps_provider_ops ops;
	struct qps_stats st;
	struct pair p;
	uint64_t end;
	ssize_t r = 0;

	pair_open(&p, 1);
	g_real_ops = p.tx->ops;
	ops = *g_real_ops;
	ops.modify_qp = modify_no_init;
	p.tx->ops = &ops;
	T_EQ(qp_fail(p.tx, p.tx->sq[0].qp), 0);
	T_EQ(send_n(p.out, 2), 2);
	end = t_now_ms() + 2000;
	while (t_now_ms() < end) {
		qps_ctx_progress(p.tx);
		r = qps_send(p.out, "d", 1, 0);
		if (r == -ENETDOWN)
			break;
		usleep(200);
	}
	T_EQ(r, -ENETDOWN);
	st = t_ctx_stats(p.tx);
	T_EQ(st.qp_errors, 1);
	T_EQ(st.qp_recoveries, 0);
	p.tx->ops = g_real_ops;
	t_suite_end();
}

/*
 * After RESET the device starts again at WQE 0. A provider that kept its
 * ring indices (emu told to, as the verbs direct path did) would have
 * the direct path write where the device never looks until the slots
 * run out: the send path must refuse that ring (qps_sq_mlx4_init,
 * -EPROTO), so the queue is given up and says so with -ENETDOWN.
 */
static void test_ring_not_restarted(void)
{
	struct qps_stats st;
	struct pair p;
	uint64_t end;
	ssize_t r = 0;

	pair_open(&p, 1);
	if (strcmp(p.tx->provider, "emu") != 0 ||
	    p.tx->tx_ops != &qps_sq_path_mlx4 ||
	    g_transport != QPS_TRANSPORT_RAW) {
		t_suite_end();
		return;	/* emu's hook on the direct path only */
	}
	qps_emu_test_keep_sq_index(p.tx->sq[0].qp, true);
	T_EQ(qp_fail(p.tx, p.tx->sq[0].qp), 0);
	T_EQ(send_n(p.out, 2), 2);
	end = t_now_ms() + 2000;
	while (t_now_ms() < end) {
		qps_ctx_progress(p.tx);
		/* Non-blocking: a ring the device never reads runs out of
		 * slots (-EAGAIN) instead of blocking. */
		r = qps_send(p.out, "d", 1, QPS_MSG_DONTWAIT);
		if (r == -ENETDOWN)
			break;
		usleep(200);
	}
	T_EQ(r, -ENETDOWN);
	st = t_ctx_stats(p.tx);
	T_EQ(st.qp_recoveries, 0);
	qps_emu_test_keep_sq_index(p.tx->sq[0].qp, false);
	t_suite_end();
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "send QP fails: flushed, counted, back up", test_send_qp },
		{ "receive QP fails: no spin, buffers reposted",
		  test_recv_qp },
		{ "five failures in a row", test_repeated },
		{ "a send-only QP fails alone", test_second_txq },
		{ "memberships survive the recovery", test_membership },
		{ "a QP that cannot come back: -ENETDOWN", test_dead },
		{ "a ring that did not restart at RESET is refused",
		  test_ring_not_restarted },
		{ "UD: send QP, receive QP, memberships", test_ud },
		CU_TEST_INFO_NULL,
	};
	int ret;

	t_wire_name(g_wire, sizeof(g_wire), "qperr");
	atexit(t_suite_cleanup);
	ret = t_run("test_qp_error", tests);
	return ret;
}
