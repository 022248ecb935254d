// SPDX-License-Identifier: MIT
/*
 * Suite "ud_addr": UD addressing on the send side (src/ud_addr.c,
 * src/ud_qp.c and the UD parts of context.c, sq.c, tx.c, endpoint.c):
 * context creation with QPS_TRANSPORT_UD, the peer table (set, learned,
 * forgotten, full), the AH cache with its exact counts, send queues
 * sharing the context's AHs, AHs made again after a route change, and
 * -EHOSTUNREACH for a peer with no QPN.
 *
 * Contexts on one emu wire (or on the verbs provider over the libibverbs
 * test double, as test_ud_addr_verbs). Internal state (send queues, the
 * route generation) is read through src/; qps_ud_learn is called
 * directly where a test needs a sender that lies about its QPN.
 */
#define _GNU_SOURCE	/* unshare */
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qps_int.h"
#include "sq.h"
#include "ud.h"

#define IP_A "198.18.1.1"
#define IP_B "198.18.1.2"
#define IP_C "198.18.1.3"
#define IP_D "198.18.1.4"
#define IP_NONE "198.18.1.99"	/* no port has it */
#define GRP "239.3.3.1"

#define PORT_RX 7300
#define PORT_TX 7400
#define WAIT_MS 3000

static char g_wire[64];

/* A UD context on the suite's wire, tracked for cleanup. */
static struct qps_ctx *ud_ctx(const char *ip, uint32_t num_txq)
{
	struct qps_ctx_attr attr = t_emu_attr(g_wire, ip);
	struct qps_ctx *ctx = NULL;

	attr.comp_mask |= QPS_CTX_ATTR_TRANSPORT | QPS_CTX_ATTR_NUM_TXQ;
	attr.transport = QPS_TRANSPORT_UD;
	attr.num_txq = num_txq;
	CU_ASSERT_FATAL(t_suite_ctxs.n < T_CTX_MAX);
	T_EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	return ctx;
}

/* Tell @ctx where @peer receives (qps_ud_local -> qps_ud_peer_set). */
static void introduce(struct qps_ctx *ctx, struct qps_ctx *peer)
{
	struct qps_ud_addr ua;

	T_EQ_FATAL(qps_ud_local(peer, &ua), 0);
	T_EQ_FATAL(qps_ud_peer_set(ctx, &ua), 0);
}

/* UD contexts on IP_A (@a) and IP_B (@b), A knowing B; A's sender on
 * PORT_TX (@tx) and B's receiver on PORT_RX (@rb). */
static void link_ab(struct qps_ctx **a, struct qps_ctx **b,
		    struct qps_ep **tx, struct qps_ep **rb)
{
	*a = ud_ctx(IP_A, 1);
	*b = ud_ctx(IP_B, 1);
	introduce(*a, *b);
	*tx = t_ep_bound(*a, "0.0.0.0", PORT_TX, WAIT_MS);
	*rb = t_ep_bound(*b, "0.0.0.0", PORT_RX, WAIT_MS);
}

static ssize_t send_to(struct qps_ep *ep, const char *ip, unsigned short port,
		       const void *buf, size_t len)
{
	struct sockaddr_in to = t_sin(ip, port);

	return qps_sendto(ep, buf, len, 0, (struct sockaddr *)&to, sizeof(to));
}

/* Receive one datagram on @ep and check it is @want (a string). */
static void recv_is(struct qps_ep *ep, const char *want)
{
	char buf[256];
	ssize_t n = qps_recv(ep, buf, sizeof(buf), 0);

	T_EQ(n, (ssize_t)strlen(want));
	if (n == (ssize_t)strlen(want))
		CU_ASSERT(memcmp(buf, want, (size_t)n) == 0);
}

/* Send the string @msg from @tx to @ip:PORT_RX; @rx must receive it. */
static void pass(struct qps_ep *tx, const char *ip, struct qps_ep *rx,
		 const char *msg)
{
	T_EQ(send_to(tx, ip, PORT_RX, msg, strlen(msg)), (ssize_t)strlen(msg));
	recv_is(rx, msg);
}

/* Progress @ctx until no send of it is in flight: every slot used so far
 * has completed (the AH references of ud_addr.c move on slot reuse). */
static void drain_tx(struct qps_ctx *ctx)
{
	uint64_t end = t_now_ms() + WAIT_MS;
	uint32_t busy = 1, i;

	while (busy && t_now_ms() < end) {
		T_GE(qps_ctx_progress(ctx), 0);
		busy = 0;
		for (i = 0; i < ctx->nsq; i++) {
			qps_alock_lock(&ctx->sq[i].lock);
			busy += ctx->sq[i].inflight;
			qps_alock_unlock(&ctx->sq[i].lock);
		}
		if (busy)
			t_sleep_ms(1);
	}
	T_EQ(busy, 0);
}

/*
 * Move @ctx's route generation: on emu a port joining the wire (@ip), on
 * verbs a route change on the double's netdev, in the private network
 * namespace of run-on-shim.sh (the kernel's tables move the generation
 * only when the netdev's routes, addresses or links change).
 */
static void route_bump(struct qps_ctx *ctx, const char *ip)
{
	static int added;
	uint64_t gen = qps_route_gen(ctx), end;
	const char *nd = getenv("QPS_IBV_EMU_NETDEV");
	char cmd[160];

	if (!t_provider_is("verbs")) {
		(void)ud_ctx(ip, 1);
		CU_ASSERT_NOT_EQUAL(qps_route_gen(ctx), gen);
		return;
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(nd);
	snprintf(cmd, sizeof(cmd), "ip route %s 10.251.0.0/24 dev %s",
		 added ? "del" : "add", nd);
	T_EQ_FATAL(system(cmd), 0);
	added = !added;
	/* Netlink events are drained at most once a millisecond. */
	end = t_now_ms() + WAIT_MS;
	while (qps_route_gen(ctx) == gen && t_now_ms() < end)
		t_sleep_ms(1);
	CU_ASSERT_NOT_EQUAL(qps_route_gen(ctx), gen);
}

/* --- context creation --------------------------------------------------- */

static void test_ctx_attrs(void)
{
	struct qps_ctx_attr attr;
	struct qps_ctx_info info;
	struct qps_ctx *ctx = NULL, *a, *b;
	struct qps_ep *tx, *rx;
	static char big[4096];
	struct qps_stats st;
	uint32_t i;

	t_suite_begin();
	/* An unknown transport. */
	attr = t_emu_attr(g_wire, IP_A);
	attr.comp_mask |= QPS_CTX_ATTR_TRANSPORT;
	attr.transport = 2;
	T_EQ(qps_ctx_create(&attr, &ctx), -EINVAL);
	CU_ASSERT_PTR_NULL(ctx);
	/* UD writes no mlx4 WQEs: the direct path is refused... */
	attr.transport = QPS_TRANSPORT_UD;
	attr.comp_mask |= QPS_CTX_ATTR_TX_PATH;
	attr.tx_path = QPS_TX_PATH_DIRECT;
	T_EQ(qps_ctx_create(&attr, &ctx), -EOPNOTSUPP);
	CU_ASSERT_PTR_NULL(ctx);
	/* ... and auto picks the generic one, even where raw would not. */
	attr.tx_path = QPS_TX_PATH_AUTO;
	T_EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	a = ctx;
	T_EQ(a->tx_path, QPS_TX_PATH_GENERIC);
	T_EQ(a->transport, QPS_TRANSPORT_UD);
	CU_ASSERT_PTR_NOT_NULL(a->ud);
	/* No steering rules on UD: the QPN addresses the QP. */
	CU_ASSERT_PTR_NULL(a->flow_ucast);
	CU_ASSERT_PTR_NULL(a->flow_bcast);
	for (i = 0; i < a->nsq; i++)
		T_EQ(a->sq[i].qp->qp_type, IBV_QPT_UD);

	/* The largest payload: one UD message of the device's UD MTU less
	 * qpsock's header (emu on a 1500-byte wire: 1024). */
	T_EQ(qps_ctx_query(a, &info), 0);
	T_GE(a->info.ud_mtu, 256);
	T_EQ(info.max_payload, a->info.ud_mtu - QPS_UD_HDR_LEN);
	if (t_provider_is("emu"))
		T_EQ(a->info.ud_mtu, 1024);

	b = ud_ctx(IP_B, 1);
	introduce(a, b);
	rx = t_ep_bound(b, "0.0.0.0", PORT_RX, WAIT_MS);
	tx = t_ep_bound(a, "0.0.0.0", PORT_TX, WAIT_MS);
	memset(big, 'x', sizeof(big));
	T_EQ(send_to(tx, IP_B, PORT_RX, big, info.max_payload + 1), -EMSGSIZE);
	T_EQ(send_to(tx, IP_B, PORT_RX, big, info.max_payload),
	     info.max_payload);
	{
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		static char got[4096];

		T_EQ(qps_recvfrom(rx, got, sizeof(got), 0,
				  (struct sockaddr *)&from, &fl),
		     info.max_payload);
		CU_ASSERT(memcmp(got, big, info.max_payload) == 0);
		T_EQ(from.sin_addr.s_addr, t_ip4(IP_A));
		T_EQ(ntohs(from.sin_port), PORT_TX);
	}
	st = t_ctx_stats(a);
	T_EQ(st.tx_packets, 1);
	T_EQ(st.ud_ah_created, 1);
	t_suite_end();
}

/*
 * A provider without UD QPs: packet, on one end of a veth pair in a
 * private network namespace of a child process (root only; the namespace
 * and the pair vanish with the child). The check comes right after the
 * device's capabilities are known, before any QP exists.
 */
enum { NOUD_OK = 0, NOUD_WRONG = 1, NOUD_RAW_FAILED = 2, NOUD_SKIP = 77 };

static int noud_child(void)
{
	struct qps_ctx_attr attr = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			     QPS_CTX_ATTR_ADDR,
		.provider = "packet",
		.dev = "qpsud0",
	};
	struct qps_ctx *ctx = NULL;
	int ret;

	if (unshare(CLONE_NEWNET) != 0)
		return NOUD_SKIP;
	if (system("ip link add qpsud0 type veth peer name qpsud1 && "
		   "ip link set qpsud1 up && ip link set qpsud0 up && "
		   "ip addr add 10.250.0.1/24 dev qpsud0") != 0)
		return NOUD_SKIP;
	attr.addr.s_addr = t_ip4("10.250.0.1");
	ret = qps_ctx_create(&attr, &ctx);
	if (ret == -ENOENT)
		return NOUD_SKIP;	/* packet not built */
	if (ret < 0)
		return NOUD_RAW_FAILED;
	qps_ctx_destroy(ctx);
	ctx = NULL;
	attr.comp_mask |= QPS_CTX_ATTR_TRANSPORT;
	attr.transport = QPS_TRANSPORT_UD;
	ret = qps_ctx_create(&attr, &ctx);
	return ret == -EOPNOTSUPP && !ctx ? NOUD_OK : NOUD_WRONG;
}

static void test_ctx_no_ud(void)
{
	int status = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		_exit(noud_child());
	T_EQ_FATAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_FATAL(WIFEXITED(status));
	if (WEXITSTATUS(status) == NOUD_SKIP) {
		printf("\n  skipped: needs root (a network namespace with a "
		       "veth pair), ip(8) and the packet provider ");
		return;
	}
	T_EQ(WEXITSTATUS(status), NOUD_OK);
}

static void test_local(void)
{
	struct qps_ud_addr ua;
	struct qps_ctx *a, *raw;

	t_suite_begin();
	a = ud_ctx(IP_A, 2);
	memset(&ua, 0xa5, sizeof(ua));
	T_EQ(qps_ud_local(a, &ua), 0);
	T_EQ(ua.addr.s_addr, t_ip4(IP_A));
	/* QP 0's number: the QP with the receive buffers. */
	T_EQ(ua.qpn, a->qp->qp_num);
	T_EQ(ua.qpn, a->sq[0].qp->qp_num);
	T_EQ(ua.qkey, QPS_UD_QKEY);
	T_EQ(qps_ud_local(a, NULL), -EFAULT);
	T_EQ(qps_ud_local(NULL, &ua), -EINVAL);
	raw = t_suite_ctx(g_wire, IP_B);
	T_EQ(qps_ud_local(raw, &ua), -EOPNOTSUPP);
	t_suite_end();
}

/* --- the peer table ----------------------------------------------------- */

static void test_peer_set_errors(void)
{
	struct qps_ctx *a, *raw;
	struct qps_ud_addr p;
	uint32_t i;

	t_suite_begin();
	a = ud_ctx(IP_A, 1);
	raw = t_suite_ctx(g_wire, IP_B);
	memset(&p, 0, sizeof(p));
	p.addr.s_addr = t_ip4(IP_C);
	p.qpn = 0x1000000;
	T_EQ(qps_ud_peer_set(a, &p), -EINVAL);
	p.qpn = QPS_UD_MCAST_QPN;	/* the multicast QPN */
	T_EQ(qps_ud_peer_set(a, &p), -EINVAL);
	p.qpn = 0x1234;
	p.addr.s_addr = t_ip4(GRP);
	T_EQ(qps_ud_peer_set(a, &p), -EINVAL);
	p.addr.s_addr = INADDR_BROADCAST;
	T_EQ(qps_ud_peer_set(a, &p), -EINVAL);
	p.addr.s_addr = INADDR_ANY;
	T_EQ(qps_ud_peer_set(a, &p), -EINVAL);
	T_EQ(qps_ud_peer_set(a, NULL), -EFAULT);
	T_EQ(qps_ud_peer_set(NULL, &p), -EINVAL);
	p.addr.s_addr = t_ip4(IP_C);
	T_EQ(qps_ud_peer_set(raw, &p), -EOPNOTSUPP);
	/* Forgetting what was never set is no error. */
	p.qpn = 0;
	T_EQ(qps_ud_peer_set(a, &p), 0);

	/* Full: 4096 addresses, the next one is refused; a forgotten entry
	 * makes room again, and setting a known address again needs none. */
	for (i = 0; i < 4096; i++) {
		p.addr.s_addr = htonl(0x0a000001u + i);
		p.qpn = 0x100 + i;
		T_EQ_FATAL(qps_ud_peer_set(a, &p), 0);
	}
	p.addr.s_addr = htonl(0x0b000001u);
	T_EQ(qps_ud_peer_set(a, &p), -ENOSPC);
	p.addr.s_addr = htonl(0x0a000001u + 17);
	p.qpn = 0x999;
	T_EQ(qps_ud_peer_set(a, &p), 0);
	p.qpn = 0;
	T_EQ(qps_ud_peer_set(a, &p), 0);
	p.addr.s_addr = htonl(0x0b000001u);
	p.qpn = 0x42;
	T_EQ(qps_ud_peer_set(a, &p), 0);
	p.addr.s_addr = htonl(0x0b000002u);
	T_EQ(qps_ud_peer_set(a, &p), -ENOSPC);
	/* Learning into a full table learns nothing and breaks nothing. */
	qps_ud_learn(a, htonl(0x0b000003u), 0x43);
	T_EQ(t_ctx_stats(a).ud_peers_learned, 0);
	T_EQ(qps_ud_peer_known(a, htonl(0x0b000001u)), 0);
	T_EQ(qps_ud_peer_known(a, htonl(0x0a000001u + 17)), -EHOSTUNREACH);
	T_EQ(qps_ud_peer_known(a, htonl(0x0b000003u)), -EHOSTUNREACH);
	T_EQ(qps_ud_peer_known(a, htonl(0x0a000001u + 4095)), 0);
	t_suite_end();
}

/*
 * A set entry wins over learning; learned entries follow the sender;
 * forgetting a set entry lets learning in again.
 */
static void test_learn_vs_set(void)
{
	struct qps_ctx *a, *b, *c;
	struct qps_ep *ea, *eb, *ec;
	struct qps_ud_addr ua;
	struct qps_stats st;

	t_suite_begin();
	a = ud_ctx(IP_A, 1);
	b = ud_ctx(IP_B, 1);
	c = ud_ctx(IP_C, 1);
	ea = t_ep_bound(a, "0.0.0.0", PORT_RX, WAIT_MS);
	eb = t_ep_bound(b, "0.0.0.0", PORT_RX, WAIT_MS);
	ec = t_ep_bound(c, "0.0.0.0", PORT_RX, WAIT_MS);

	/* A pins B; a datagram claiming to be B from another QP does not
	 * move it, and nothing is counted as learned. */
	introduce(a, b);
	qps_ud_learn(a, t_ip4(IP_B), 0x777);
	T_EQ(t_ctx_stats(a).ud_peers_learned, 0);
	pass(ea, IP_B, eb, "pinned");

	/* C learns a wrong QPN for B first, then B's real one from B's
	 * datagram: the learned entry follows, and C's reply arrives. */
	qps_ud_learn(c, t_ip4(IP_B), 0x777);
	T_EQ(t_ctx_stats(c).ud_peers_learned, 1);
	introduce(b, c);
	pass(eb, IP_C, ec, "hello");
	T_EQ(t_ctx_stats(c).ud_peers_learned, 2);
	pass(ec, IP_B, eb, "reply");
	/* The steady state: more datagrams from B learn nothing new. */
	pass(eb, IP_C, ec, "again");
	st = t_ctx_stats(c);
	T_EQ(st.ud_peers_learned, 2);

	/* A forgets B: no QPN, -EHOSTUNREACH, counted; B's next datagram
	 * teaches A again. */
	T_EQ(qps_ud_local(b, &ua), 0);
	ua.qpn = 0;
	T_EQ(qps_ud_peer_set(a, &ua), 0);
	T_EQ(send_to(ea, IP_B, PORT_RX, "lost", 4), -EHOSTUNREACH);
	T_EQ(t_ctx_stats(a).ud_tx_no_peer, 1);
	introduce(b, a);
	pass(eb, IP_A, ea, "learn me");
	T_EQ(t_ctx_stats(a).ud_peers_learned, 1);
	pass(ea, IP_B, eb, "back");
	t_suite_end();
}

/* --- the AH cache ------------------------------------------------------- */

#define N_SENDS 20

/* N sends to one peer: one AH made, reused by the other N - 1. */
static void test_ah_counts(void)
{
	struct qps_ctx *a, *b, *c;
	struct qps_ep *tx, *rb, *rc;
	struct qps_stats st;
	char msg[32];
	int i;

	t_suite_begin();
	a = ud_ctx(IP_A, 1);
	b = ud_ctx(IP_B, 1);
	c = ud_ctx(IP_C, 1);
	introduce(a, b);
	introduce(a, c);
	tx = t_ep_bound(a, "0.0.0.0", PORT_TX, WAIT_MS);
	rb = t_ep_bound(b, "0.0.0.0", PORT_RX, WAIT_MS);
	rc = t_ep_bound(c, "0.0.0.0", PORT_RX, WAIT_MS);
	st = t_ctx_stats(a);
	T_EQ(st.ud_ah_created, 0);
	T_EQ(st.ud_ah_live, 0);

	for (i = 0; i < N_SENDS; i++) {
		snprintf(msg, sizeof(msg), "b%d", i);
		pass(tx, IP_B, rb, msg);
	}
	st = t_ctx_stats(a);
	T_EQ(st.ud_ah_created, 1);
	T_EQ(st.ud_ah_reused, N_SENDS - 1);
	T_EQ(st.ud_ah_live, 1);
	T_EQ(st.tx_packets, N_SENDS);

	/* A second peer, interleaved with the first: one AH more, and the
	 * per-queue cache holds both. */
	for (i = 0; i < N_SENDS; i++) {
		snprintf(msg, sizeof(msg), "c%d", i);
		pass(tx, IP_C, rc, msg);
		pass(tx, IP_B, rb, msg);
	}
	st = t_ctx_stats(a);
	T_EQ(st.ud_ah_created, 2);
	T_EQ(st.ud_ah_reused, 3 * N_SENDS - 2);
	T_EQ(st.ud_ah_live, 2);
	T_EQ(st.ud_tx_no_peer, 0);

	/* A connected endpoint goes through the same cache. */
	{
		struct sockaddr_in to = t_sin(IP_C, PORT_RX);

		T_EQ(qps_connect(tx, (struct sockaddr *)&to, sizeof(to)), 0);
		T_EQ(qps_send(tx, "conn", 4, 0), 4);
		recv_is(rc, "conn");
		st = t_ctx_stats(a);
		T_EQ(st.ud_ah_created, 2);
		T_EQ(st.ud_ah_reused, 3 * N_SENDS - 1);
	}
	t_suite_end();
}

/* Several send queues share the context's AH: one made in all. */
static void test_txqs_share(void)
{
	enum { NEP = 16, PER = 4 };
	struct qps_ep *tx[NEP], *rb;
	struct qps_ctx *a, *b;
	struct qps_stats st;
	uint32_t used = 0, q;
	int i, k;

	t_suite_begin();
	a = ud_ctx(IP_A, 4);
	b = ud_ctx(IP_B, 1);
	T_EQ_FATAL(a->nsq, 4);
	introduce(a, b);
	rb = t_ep_bound(b, "0.0.0.0", PORT_RX, WAIT_MS);
	/* Flows of different source ports hash over the send queues. */
	for (i = 0; i < NEP; i++)
		tx[i] = t_ep_bound(a, "0.0.0.0", (unsigned short)(PORT_TX + i),
				   WAIT_MS);
	for (k = 0; k < PER; k++)
		for (i = 0; i < NEP; i++) {
			pass(tx[i], IP_B, rb, "q");
		}
	for (q = 0; q < a->nsq; q++) {
		qps_alock_lock(&a->sq[q].lock);
		used += a->sq[q].st->packets > 0;
		qps_alock_unlock(&a->sq[q].lock);
	}
	T_GE(used, 2);
	st = t_ctx_stats(a);
	T_EQ(st.tx_packets, NEP * PER);
	T_EQ(st.ud_ah_created, 1);
	T_EQ(st.ud_ah_reused, NEP * PER - 1);
	T_EQ(st.ud_ah_live, 1);
	t_suite_end();
}

/*
 * A route change (route_bump) makes the AH again, since the
 * next hop may have moved; the old one goes once no slot or cache entry
 * names it. The send queue's free slots are a stack, so with nothing in
 * flight the next send takes the slot the last one used.
 */
static void test_route_change(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rb;
	struct qps_stats st;

	t_suite_begin();
	link_ab(&a, &b, &tx, &rb);
	pass(tx, IP_B, rb, "one");
	drain_tx(a);
	st = t_ctx_stats(a);
	T_EQ(st.ud_ah_created, 1);
	T_EQ(st.ud_ah_live, 1);

	route_bump(a, IP_D);
	pass(tx, IP_B, rb, "two");
	st = t_ctx_stats(a);
	T_EQ(st.ud_ah_created, 2);
	T_EQ(st.ud_ah_reused, 0);
	/* The old AH went with the slot's and the cache's references. */
	T_EQ(st.ud_ah_live, 1);
	pass(tx, IP_B, rb, "three");
	st = t_ctx_stats(a);
	T_EQ(st.ud_ah_created, 2);
	T_EQ(st.ud_ah_reused, 1);
	T_EQ(st.ud_ah_live, 1);
	t_suite_end();
}

/* Retired AHs in flight: many sends queued without progress, then a
 * route change; every one is delivered, and the live count falls back
 * to one once every slot was written again. */
static void test_route_change_inflight(void)
{
	enum { N = 24 };
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rb;
	struct qps_stats st;
	int i, more = QPS_MSG_MORE;

	t_suite_begin();
	link_ab(&a, &b, &tx, &rb);
	/* Doorbell held back: the WRs wait in slots naming the first AH. */
	for (i = 0; i < N; i++) {
		struct sockaddr_in to = t_sin(IP_B, PORT_RX);

		T_EQ(qps_sendto(tx, "x", 1, more, (struct sockaddr *)&to,
				sizeof(to)), 1);
	}
	route_bump(a, IP_C);
	/* The new AH for the next send; the old one still lives in the
	 * N slots. */
	T_EQ(send_to(tx, IP_B, PORT_RX, "y", 1), 1);
	st = t_ctx_stats(a);
	T_EQ(st.ud_ah_created, 2);
	T_EQ(st.ud_ah_live, 2);
	for (i = 0; i < N; i++)
		recv_is(rb, "x");
	recv_is(rb, "y");
	drain_tx(a);
	/* Write every slot once more: none names the old AH then. */
	for (i = 0; i < (int)a->tx_depth; i++) {
		pass(tx, IP_B, rb, "z");
	}
	drain_tx(a);
	st = t_ctx_stats(a);
	T_EQ(st.ud_ah_created, 2);
	T_EQ(st.ud_ah_live, 1);
	t_suite_end();
}

/*
 * The AH cache's bound: 8192 destinations (groups need no peer entry and
 * no member to get an AH), then -ENOSPC; known destinations still go.
 */
static void test_ah_full(void)
{
	enum { AHS = 8192 };
	struct qps_ep *tx;
	struct qps_ctx *a;
	struct qps_stats st;
	char ip[32];
	uint32_t i;

	t_suite_begin();
	a = ud_ctx(IP_A, 1);
	tx = t_ep_bound(a, "0.0.0.0", PORT_TX, WAIT_MS);
	for (i = 0; i < AHS; i++) {
		(void)snprintf(ip, sizeof(ip), "239.4.%u.%u", i >> 8, i & 0xff);
		T_EQ_FATAL(send_to(tx, ip, PORT_RX, "g", 1), 1);
	}
	T_EQ(send_to(tx, "239.5.0.1", PORT_RX, "g", 1), -ENOSPC);
	T_EQ(send_to(tx, "239.4.0.7", PORT_RX, "g", 1), 1);
	st = t_ctx_stats(a);
	T_EQ(st.ud_ah_created, AHS);
	T_EQ(st.ud_ah_live, AHS);
	T_EQ(st.ud_ah_reused, 1);
	T_EQ(st.tx_packets, AHS + 1);
	t_suite_end();
}

/* --- no QPN, multicast ------------------------------------------------- */

static void test_no_peer(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *ep, *rb;
	struct sockaddr_in to;
	struct qps_mreq mr;
	struct qps_stats st;

	t_suite_begin();
	a = ud_ctx(IP_A, 2);
	b = ud_ctx(IP_B, 1);
	tx = t_ep_bound(a, "0.0.0.0", PORT_TX, WAIT_MS);
	ep = t_ep_bound(a, "0.0.0.0", PORT_TX + 1, WAIT_MS);

	/* B is on the wire, but A knows no QPN for it. */
	T_EQ(send_to(tx, IP_B, PORT_RX, "a", 1), -EHOSTUNREACH);
	T_EQ(send_to(tx, IP_NONE, PORT_RX, "a", 1), -EHOSTUNREACH);
	/* UD has no broadcast. */
	T_EQ(send_to(tx, "255.255.255.255", PORT_RX, "a", 1), -EHOSTUNREACH);
	to = t_sin(IP_B, PORT_RX);
	T_EQ(qps_connect(ep, (struct sockaddr *)&to, sizeof(to)),
	     -EHOSTUNREACH);
	st = t_ctx_stats(a);
	T_EQ(st.ud_tx_no_peer, 4);
	T_EQ(st.ud_ah_created, 0);
	T_EQ(st.tx_packets, 0);

	/* Connected while known, sending after it was forgotten. */
	introduce(a, b);
	rb = t_ep_bound(b, "0.0.0.0", PORT_RX, WAIT_MS);
	T_EQ(qps_connect(ep, (struct sockaddr *)&to, sizeof(to)), 0);
	T_EQ(qps_send(ep, "c1", 2, 0), 2);
	recv_is(rb, "c1");
	{
		struct qps_ud_addr ua;

		T_EQ(qps_ud_local(b, &ua), 0);
		ua.qpn = 0;
		T_EQ(qps_ud_peer_set(a, &ua), 0);
	}
	T_EQ(qps_send(ep, "c2", 2, 0), -EHOSTUNREACH);
	st = t_ctx_stats(a);
	T_EQ(st.ud_tx_no_peer, 5);
	T_EQ(st.tx_packets, 1);

	/* Multicast needs no peer entry: QPN 0xffffff, one AH for the
	 * group, joined on B. */
	memset(&mr, 0, sizeof(mr));
	mr.group.s_addr = t_ip4(GRP);
	T_EQ(qps_join(rb, &mr, sizeof(mr)), 0);
	to = t_sin(GRP, PORT_RX);
	T_EQ(qps_connect(ep, (struct sockaddr *)&to, sizeof(to)), 0);
	T_EQ(qps_send(ep, "m1", 2, 0), 2);
	recv_is(rb, "m1");
	pass(tx, GRP, rb, "m2");
	st = t_ctx_stats(a);
	T_EQ(st.ud_tx_no_peer, 5);
	T_EQ(st.ud_ah_created, 2);	/* B's, then the group's */
	T_EQ(st.ud_ah_reused, 1);
	t_suite_end();
}

/* --- concurrency ---------------------------------------------------------- */

/*
 * Senders on two send queues while another thread sets and forgets their
 * peer and a third learns other addresses the way the receive path does:
 * every datagram is either delivered or refused with -EHOSTUNREACH, and
 * the counters add up exactly. Senders keep a bounded window ahead of the
 * receiver, so no receive queue overflows on either provider.
 */
enum { CC_SENDERS = 2, CC_FLIPS = 50, CC_WINDOW = 64 };

struct cc {
	struct qps_ctx *a, *b;
	struct qps_ep *tx[CC_SENDERS], *rx;
	uint64_t ok[CC_SENDERS], unreach[CC_SENDERS], other[CC_SENDERS];
	uint64_t tries[CC_SENDERS];
	uint64_t sent;		/* atomic: sends accepted so far */
	uint64_t received;	/* atomic */
	int senders_left;	/* atomic */
	int go;			/* atomic: the flipper runs */
	int done;		/* atomic: the flipper is through */
	uint64_t flips, learns;
};

struct cc_arg {
	struct cc *cc;
	int role;		/* < CC_SENDERS: sender; flip, learn, rx */
};

static void cc_send(struct cc *cc, int k)
{
	while (!__atomic_load_n(&cc->go, __ATOMIC_ACQUIRE))
		sched_yield();
	while (!__atomic_load_n(&cc->done, __ATOMIC_ACQUIRE)) {
		ssize_t r;

		/* Acquire: pairs with the receiver's release. */
		while (__atomic_load_n(&cc->sent, __ATOMIC_RELAXED) >=
		       __atomic_load_n(&cc->received, __ATOMIC_ACQUIRE) +
		       CC_WINDOW)
			sched_yield();
		r = send_to(cc->tx[k], IP_B, PORT_RX, "cc", 2);
		if (r == 2) {
			cc->ok[k]++;
			__atomic_fetch_add(&cc->sent, 1, __ATOMIC_RELAXED);
		} else if (r == -EHOSTUNREACH) {
			cc->unreach[k]++;
		} else {
			cc->other[k]++;
		}
		cc->tries[k]++;
	}
	__atomic_fetch_sub(&cc->senders_left, 1, __ATOMIC_RELEASE);
}

static bool cc_running(struct cc *cc)
{
	return __atomic_load_n(&cc->senders_left, __ATOMIC_ACQUIRE) > 0;
}

static void cc_flip(struct cc *cc)
{
	struct qps_ud_addr b, other;

	T_EQ(qps_ud_local(cc->b, &b), 0);
	memset(&other, 0, sizeof(other));
	__atomic_store_n(&cc->go, 1, __ATOMIC_RELEASE);
	while (cc->flips < CC_FLIPS) {
		struct qps_ud_addr forget = b;

		forget.qpn = 0;
		T_EQ(qps_ud_peer_set(cc->a, &forget), 0);
		t_sleep_ms(1);
		T_EQ(qps_ud_peer_set(cc->a, &b), 0);
		other.addr.s_addr = htonl(0x0a020000u + (cc->flips & 0xff));
		other.qpn = cc->flips & 1 ? 0 : 0x500;
		T_EQ(qps_ud_peer_set(cc->a, &other), 0);
		cc->flips++;
		t_sleep_ms(1);
	}
	__atomic_store_n(&cc->done, 1, __ATOMIC_RELEASE);
}

static void cc_learn(struct cc *cc)
{
	while (cc_running(cc)) {
		/* As the receive path calls it: under rx.lock. */
		qps_mutex_lock(&cc->a->rx.lock);
		qps_ud_learn(cc->a, htonl(0x0a030000u + (cc->learns & 0x3ff)),
			     0x600 + (uint32_t)(cc->learns >> 10 & 7));
		qps_mutex_unlock(&cc->a->rx.lock);
		cc->learns++;
	}
}

static void cc_recv(struct cc *cc)
{
	uint64_t end = 0;
	char buf[16];

	for (;;) {
		ssize_t n = qps_recv(cc->rx, buf, sizeof(buf), 0);

		if (n == 2) {
			/* Release: pairs with the senders' acquire. */
			__atomic_fetch_add(&cc->received, 1, __ATOMIC_RELEASE);
			continue;
		}
		if (cc_running(cc))
			continue;
		if (__atomic_load_n(&cc->received, __ATOMIC_RELAXED) ==
		    __atomic_load_n(&cc->sent, __ATOMIC_RELAXED))
			break;
		if (!end)
			end = t_now_ms() + WAIT_MS;
		else if (t_now_ms() > end)
			break;
	}
}

static void *cc_thread(void *p)
{
	struct cc_arg *ca = p;

	if (ca->role < CC_SENDERS)
		cc_send(ca->cc, ca->role);
	else if (ca->role == CC_SENDERS)
		cc_flip(ca->cc);
	else if (ca->role == CC_SENDERS + 1)
		cc_learn(ca->cc);
	else
		cc_recv(ca->cc);
	return NULL;
}

static void test_concurrent(void)
{
	struct cc_arg args[CC_SENDERS + 3];
	static struct cc cc;
	uint64_t ok = 0, unreach = 0;
	struct qps_stats st;
	int k;

	t_suite_begin();
	memset(&cc, 0, sizeof(cc));
	cc.a = ud_ctx(IP_A, 2);
	cc.b = ud_ctx(IP_B, 1);
	introduce(cc.a, cc.b);
	cc.rx = t_ep_bound(cc.b, "0.0.0.0", PORT_RX, 20);
	for (k = 0; k < CC_SENDERS; k++)
		cc.tx[k] = t_ep_bound(cc.a, "0.0.0.0",
				      (unsigned short)(PORT_TX + k), WAIT_MS);
	cc.senders_left = CC_SENDERS;
	for (k = 0; k < CC_SENDERS + 3; k++)
		args[k] = (struct cc_arg){ .cc = &cc, .role = k };
	t_threads_run(cc_thread, args, sizeof(args[0]), CC_SENDERS + 3);

	for (k = 0; k < CC_SENDERS; k++) {
		T_EQ(cc.other[k], 0);
		T_EQ(cc.ok[k] + cc.unreach[k], cc.tries[k]);
		ok += cc.ok[k];
		unreach += cc.unreach[k];
	}
	T_EQ(cc.received, ok);
	T_GE(ok, 1);
	T_GE(unreach, 1);
	T_EQ(cc.flips, CC_FLIPS);
	st = t_ctx_stats(cc.a);
	T_EQ(st.tx_packets, ok);
	T_EQ(st.ud_tx_no_peer, unreach);
	/* One destination, no route change: one AH, reused by the rest. */
	T_EQ(st.ud_ah_created, 1);
	T_EQ(st.ud_ah_reused, ok - 1);
	T_EQ(st.ud_ah_live, 1);
	printf("\n  %llu delivered, %llu refused (no peer), %llu flips, "
	       "%llu learns ", (unsigned long long)ok,
	       (unsigned long long)unreach, (unsigned long long)cc.flips,
	       (unsigned long long)cc.learns);
	t_suite_end();
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "ctx: transport, tx path, max payload", test_ctx_attrs },
		{ "ctx: UD on a provider without it", test_ctx_no_ud },
		{ "qps_ud_local", test_local },
		{ "peer_set: errors, full table", test_peer_set_errors },
		{ "peers: set wins, learned follows", test_learn_vs_set },
		{ "AH: created once, reused, two peers", test_ah_counts },
		{ "AH: shared by send queues", test_txqs_share },
		{ "AH: route change", test_route_change },
		{ "AH: route change with sends in flight",
		  test_route_change_inflight },
		{ "AH: the cache's bound", test_ah_full },
		{ "no QPN, broadcast, multicast", test_no_peer },
		{ "concurrent: send, set/forget, learn", test_concurrent },
		CU_TEST_INFO_NULL,
	};

	t_wire_name(g_wire, sizeof(g_wire), "udaddr");
	atexit(t_suite_cleanup);
	return t_run("ud_addr", tests);
}
