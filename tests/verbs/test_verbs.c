// SPDX-License-Identifier: MIT
/*
 * The verbs provider's own behaviour (providers/verbs), on the libibverbs
 * test double in run-on-shim.sh's private network namespace: discovery
 * from the GID table and the netdev, resolution through the netdev's
 * kernel neighbour table, IGMP membership, UD ops, counters, errors.
 *
 * Without the shim (QPS_PROVIDER is not "verbs") only the no-device path
 * runs, against the system libibverbs; on a host that has RDMA devices it
 * skips, since there the no-device answer is not the right one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <endian.h>
#include <infiniband/mlx4dv.h>

#include "sq.h"
#include "t_util.h"
#include "verbs/verbs.h"

#define IP_A "198.18.0.1"
#define IP_B "198.18.0.2"
#define IP_FOREIGN "198.18.0.200"	/* routed to the netdev, no host */
#define NETDEV_ENV "QPS_IBV_EMU_NETDEV"

static struct t_ctxs g_ctxs;
static char g_wire[64];

static void end_test(void)
{
	t_ctxs_destroy(&g_ctxs, 1);
}

static struct qps_ctx *mkctx(const char *ip)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, ip);
	struct qps_ctx *ctx = NULL;

	T_EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	t_ctxs_add(&g_ctxs, ctx);
	return ctx;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct in_addr in4(const char *ip)
{
	struct in_addr a;

	inet_pton(AF_INET, ip, &a);
	return a;
}

/* Is @group joined on the netdev, as /proc/net/igmp (this netns) says? */
static int igmp_joined(const char *netdev, const char *group)
{
	struct in_addr g = in4(group);
	char line[256], want[16], dev[32];
	int in_dev = 0, found = 0;
	FILE *f = fopen("/proc/net/igmp", "re");

	/* The file prints the group as the host-order hex of the network
	 * order word. */
	snprintf(want, sizeof(want), "%08X", g.s_addr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	while (fgets(line, sizeof(line), f)) {
		if (line[0] != '\t' && sscanf(line, "%*d %31s", dev) == 1)
			in_dev = !strcmp(dev, netdev);
		else if (in_dev && strstr(line, want))
			found = 1;
	}
	fclose(f);
	return found;
}

/* ------------------------------------------------------------------ */

static void test_no_device(void)
{
	struct qps_ctx_attr a = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER,
		.provider = "verbs",
	};
	struct ibv_device **list;
	struct qps_ctx *ctx = NULL;
	int n = 0;

	if (t_provider_is("verbs")) {
		printf("\n    (the shim has a device: covered by the others) ");
		return;
	}
	list = ibv_get_device_list(&n);
	if (list)
		ibv_free_device_list(list);
	if (n > 0) {
		printf("\n    SKIP: this host has %d RDMA device(s) ", n);
		return;
	}
	T_EQ(qps_ctx_create(&a, &ctx), -ENODEV);
	CU_ASSERT_PTR_NULL(ctx);
}

static void test_discovery(void)
{
	struct qps_ctx_info ia, ib;
	struct qps_ctx *a, *b;

	t_wire_name(g_wire, sizeof(g_wire), "vb-disc");
	a = mkctx(IP_A);
	b = mkctx(IP_B);
	T_EQ(qps_ctx_query(a, &ia), 0);
	T_EQ(qps_ctx_query(b, &ib), 0);
	CU_ASSERT_STRING_EQUAL(ia.provider, "verbs");
	/* The address is the one found in the GID table. */
	T_EQ(ia.addr.s_addr, in4(IP_A).s_addr);
	T_EQ(ib.addr.s_addr, in4(IP_B).s_addr);
	/* Two ports of the wire: two MACs, neither the netdev's own. */
	CU_ASSERT(memcmp(ia.mac, ib.mac, 6) != 0);
	/* The veth's MTU, not active_mtu's IB MTU (1024). */
	T_EQ(ia.mtu, 1500);
	T_EQ(ia.max_payload, 1500 - 28);
	end_test();
}

/* An address that no GID of the port carries is refused. */
static void test_addr_not_on_port(void)
{
	struct qps_ctx_attr a;
	struct qps_ctx *ctx = NULL;

	t_wire_name(g_wire, sizeof(g_wire), "vb-addr");
	a = t_emu_attr(g_wire, IP_A);
	/* The double's port gets IP_A; ask for another. */
	a.addr = in4("198.18.0.77");
	T_EQ(qps_ctx_create(&a, &ctx), -EADDRNOTAVAIL);
	CU_ASSERT_PTR_NULL(ctx);
}

static void test_dev_names(void)
{
	const char *bad[] = { "qpsemu0:", "qpsemu0:0", "qpsemu0:x",
			      "qpsemu0:256" };
	struct qps_ctx_attr a;
	struct qps_ctx *ctx = NULL;
	unsigned int i;

	t_wire_name(g_wire, sizeof(g_wire), "vb-name");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = t_emu_attr(g_wire, IP_A);
		a.comp_mask |= QPS_CTX_ATTR_DEV;
		a.dev = bad[i];
		T_EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	}
	a = t_emu_attr(g_wire, IP_A);
	a.comp_mask |= QPS_CTX_ATTR_DEV;
	a.dev = "nosuchdev0";
	T_EQ(qps_ctx_create(&a, &ctx), -ENODEV);
	a.dev = "qpsemu0:1";
	T_EQ(qps_ctx_create(&a, &ctx), 0);
	t_ctxs_add(&g_ctxs, ctx);
	end_test();
}

/* The direct path is opt-in and mlx4 only: asked for on the double, it is
 * refused with the reason, not silently replaced. */
static void test_direct_refused(void)
{
	struct qps_ctx_attr a;
	struct qps_ctx *ctx = NULL;

	t_wire_name(g_wire, sizeof(g_wire), "vb-direct");
	a = t_emu_attr(g_wire, IP_A);
	a.comp_mask |= QPS_CTX_ATTR_TX_PATH;
	a.tx_path = QPS_TX_PATH_DIRECT;
	T_EQ(qps_ctx_create(&a, &ctx), -EOPNOTSUPP);
	CU_ASSERT_PTR_NULL(ctx);
}

static void test_resolve(void)
{
	const struct qps_provider_ops *ops;
	struct qps_ctx_info ib;
	struct qps_ctx *a, *b;
	uint8_t mac[6];
	const uint8_t mc[6] = { 0x01, 0x00, 0x5e, 0x7f, 0x01, 0x02 };
	uint64_t t0, gen0;

	t_wire_name(g_wire, sizeof(g_wire), "vb-res");
	a = mkctx(IP_A);
	b = mkctx(IP_B);
	ops = a->ops;
	T_EQ(qps_ctx_query(b, &ib), 0);

	/* The neighbour entry the double published for B's port is B's
	 * MAC as discovered from its GID 0. */
	T_EQ(ops->resolve(a->dev, in4(IP_B), mac), 0);
	CU_ASSERT(memcmp(mac, ib.mac, 6) == 0);
	T_EQ(ops->resolve(a->dev, in4("239.255.1.2"), mac), 0);
	CU_ASSERT(memcmp(mac, mc, 6) == 0);
	T_EQ(ops->resolve(a->dev, in4(IP_B), NULL), -EINVAL);

	/* No host answers ARP there: bounded by QPS_VERBS_RESOLVE_MS. */
	t0 = mono_ms();
	T_EQ(ops->resolve(a->dev, in4(IP_FOREIGN), mac), -EHOSTUNREACH);
	T_LE(mono_ms() - t0, 2500);
	/* No route at all. */
	T_EQ(ops->resolve(a->dev, in4("203.0.113.9"), mac), -EHOSTUNREACH);

	/* B's port leaves: its neighbour entry goes, which moves A's
	 * generation since A handed that MAC out. */
	gen0 = ops->route_gen(a->dev);
	g_ctxs.n--;
	T_EQ(qps_ctx_destroy(b), 0);
	t_sleep_ms(20);
	CU_ASSERT(ops->route_gen(a->dev) != gen0);
	end_test();
}

/* Datagrams between two contexts through endpoints, resolution included;
 * the device counters see the WQEs and completions. */
static void test_traffic_counters(void)
{
	struct qps_dev_counters c0, c1;
	struct sockaddr_in to = t_sin(IP_B, 7100);
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx;
	char buf[64];
	int i, got = 0;

	t_wire_name(g_wire, sizeof(g_wire), "vb-traffic");
	a = mkctx(IP_A);
	b = mkctx(IP_B);
	tx = t_ep_bound(a, IP_A, 7000, 2000);
	rx = t_ep_bound(b, IP_B, 7100, 2000);
	T_EQ(a->ops->counters(a->dev, &c0), 0);
	for (i = 0; i < 16; i++) {
		snprintf(buf, sizeof(buf), "dgram %d", i);
		T_EQ(qps_sendto(tx, buf, strlen(buf), 0,
				(struct sockaddr *)&to, sizeof(to)),
		     (long long)strlen(buf));
	}
	for (i = 0; i < 16; i++) {
		char want[64];
		ssize_t n = qps_recv(rx, buf, sizeof(buf) - 1, 0);

		if (n < 0)
			break;
		buf[n] = '\0';
		snprintf(want, sizeof(want), "dgram %d", i);
		CU_ASSERT_STRING_EQUAL(buf, want);
		got++;
	}
	T_EQ(got, 16);
	/* The double reports IBV_DEVICE_RAW_IP_CSUM on an Ethernet port:
	 * the sums went to the device both ways, and all were right. */
	T_EQ(t_ctx_stats(a).csum_offload, 1);
	T_EQ(t_ctx_stats(b).rx_bad[QPS_RX_OK], 16);
	T_EQ(t_ctx_stats(b).rx_bad[QPS_RX_BAD_UDP_CSUM], 0);
	T_EQ(qps_ep_close(tx), 0);
	T_EQ(qps_ep_close(rx), 0);
	T_EQ(a->ops->counters(a->dev, &c1), 0);
	T_GE(c1.wqes - c0.wqes, 16);
	T_GE(c1.doorbells - c0.doorbells, 1);
	T_LE(c1.doorbells - c0.doorbells, c1.wqes - c0.wqes);
	end_test();
}

/* Multicast membership goes to the kernel on the netdev: IGMP. */
static void test_igmp(void)
{
	const char *nd = getenv(NETDEV_ENV);
	struct in_addr g = in4("239.1.2.3"), any = { 0 };
	const struct qps_provider_ops *ops;
	struct qps_ctx *a;

	if (!nd) {
		printf("\n    SKIP: no %s (run-on-shim.sh sets it) ",
		       NETDEV_ENV);
		return;
	}
	t_wire_name(g_wire, sizeof(g_wire), "vb-igmp");
	a = mkctx(IP_A);
	ops = a->ops;
	CU_ASSERT(!igmp_joined(nd, "239.1.2.3"));
	T_EQ(ops->mcast_attach(a->dev, g, any), 0);
	CU_ASSERT(igmp_joined(nd, "239.1.2.3"));
	T_EQ(ops->mcast_attach(a->dev, g, any), 0);
	T_EQ(ops->mcast_detach(a->dev, g, any), 0);
	CU_ASSERT(igmp_joined(nd, "239.1.2.3"));	/* one ref left */
	T_EQ(ops->mcast_detach(a->dev, g, any), 0);
	CU_ASSERT(!igmp_joined(nd, "239.1.2.3"));
	T_EQ(ops->mcast_detach(a->dev, g, any), -ENOENT);
	T_EQ(ops->mcast_attach(a->dev, in4(IP_B), any), -EINVAL);
	/* Through an endpoint, as an application joins. */
	{
		struct qps_ep *ep = t_ep_bound(a, "0.0.0.0", 7200, 100);
		struct qps_mreq m = { .group = g };

		T_EQ(qps_join(ep, &m, sizeof(m)), 0);
		CU_ASSERT(igmp_joined(nd, "239.1.2.3"));
		T_EQ(qps_leave(ep, &m, sizeof(m)), 0);
		CU_ASSERT(!igmp_joined(nd, "239.1.2.3"));
		T_EQ(qps_ep_close(ep), 0);
	}
	end_test();
}

/* Raw-packet QPs take the state alone, plus the port for INIT: ERR,
 * RESET, and back up (the core's recovery). */
static void test_raw_modify(void)
{
	static const struct {
		enum ibv_qp_state st;
		int mask;
		int want;
	} steps[] = {
		{ IBV_QPS_INIT, IBV_QP_STATE, -EINVAL },
		{ IBV_QPS_ERR, IBV_QP_STATE | IBV_QP_PORT, -EINVAL },
		{ IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_QKEY, -EINVAL },
		{ IBV_QPS_ERR, IBV_QP_STATE, 0 },
		{ IBV_QPS_RESET, IBV_QP_STATE, 0 },
		{ IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PORT, 0 },
		{ IBV_QPS_RTR, IBV_QP_STATE, 0 },
		{ IBV_QPS_RTS, IBV_QP_STATE, 0 },
	};
	struct ibv_qp_attr qa;
	struct qps_ctx *a;
	struct qps_qp *qp;
	unsigned int i;

	t_wire_name(g_wire, sizeof(g_wire), "vb-raw");
	a = mkctx(IP_A);
	qp = a->sq[0].qp;
	T_EQ(a->ops->modify_qp(qp, NULL, IBV_QP_STATE), -EINVAL);
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = steps[i].st;
		T_EQ(a->ops->modify_qp(qp, &qa, steps[i].mask), steps[i].want);
	}
	end_test();
}

/*
 * The direct path's own ring indices follow the QP through RESET, as
 * libmlx4's do and as the HCA, which restarts at WQE 0, needs: a QP that
 * the direct path had used (head, tail and wr_id map moved on) comes out
 * of RESET with all three back at zero. The double has no mlx4 ring, so
 * the QP is given the state the direct path would have left; the reset
 * itself is the provider's real modify_qp on a real QP of the double.
 */
static void test_direct_reset(void)
{
	struct ibv_qp_attr qa;
	struct qps_verbs_qp *vq;
	struct qps_ctx *a;
	struct qps_qp *qp;
	uint32_t i;

	t_wire_name(g_wire, sizeof(g_wire), "vb-dreset");
	a = mkctx(IP_A);
	qp = a->sq[0].qp;
	vq = qps_verbs_qp(qp);
	CU_ASSERT_FALSE_FATAL(vq->direct);
	vq->wqe_cnt = 8;
	vq->wrid = calloc(vq->wqe_cnt, sizeof(*vq->wrid));	/* freed by destroy */
	CU_ASSERT_PTR_NOT_NULL_FATAL(vq->wrid);
	for (i = 0; i < vq->wqe_cnt; i++)
		vq->wrid[i] = 100 + i;
	vq->head = 13;
	vq->tail = 11;
	vq->direct = true;
	/* ERR is not RESET: the indices stay for the flushes to map. */
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_ERR;
	T_EQ(a->ops->modify_qp(qp, &qa, IBV_QP_STATE), 0);
	T_EQ(vq->head, 13);
	T_EQ(vq->tail, 11);
	qa.qp_state = IBV_QPS_RESET;
	T_EQ(a->ops->modify_qp(qp, &qa, IBV_QP_STATE), 0);
	T_EQ(vq->head, 0);
	T_EQ(vq->tail, 0);
	for (i = 0; i < vq->wqe_cnt; i++)
		T_EQ(vq->wrid[i], 0);
	/* The generic path's QPs never had these indices. */
	vq->direct = false;
	end_test();
}

struct ud_side {
	struct qps_ctx *ctx;
	struct qps_cq *cq;
	struct qps_qp *qp;
	struct qps_mr *mr;
	uint8_t *buf;
};

static void ud_open(struct ud_side *s, const char *ip)
{
	const struct qps_provider_ops *ops;
	struct qps_qp_init_attr qa;
	struct ibv_qp_attr ma;

	s->ctx = mkctx(ip);
	ops = s->ctx->ops;
	s->buf = calloc(1, 8192);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->buf);
	T_EQ_FATAL(ops->create_cq(s->ctx->dev, 64, &s->cq), 0);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_UD;
	qa.send_cq = qa.recv_cq = s->cq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	T_EQ_FATAL(ops->create_qp(s->ctx->dev, &qa, &s->qp), 0);
	T_EQ_FATAL(ops->reg_mr(s->ctx->dev, s->buf, 8192, &s->mr), 0);
	memset(&ma, 0, sizeof(ma));
	ma.qp_state = IBV_QPS_INIT;
	ma.qkey = 0x11111111;
	T_EQ_FATAL(ops->modify_qp(s->qp, &ma, IBV_QP_STATE |
				  IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY), 0);
	ma.qp_state = IBV_QPS_RTR;
	T_EQ_FATAL(ops->modify_qp(s->qp, &ma, IBV_QP_STATE), 0);
	ma.qp_state = IBV_QPS_RTS;
	T_EQ_FATAL(ops->modify_qp(s->qp, &ma,
				  IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
}

static void ud_close(struct ud_side *s)
{
	const struct qps_provider_ops *ops = s->ctx->ops;

	T_EQ(ops->destroy_qp(s->qp), 0);
	T_EQ(ops->dereg_mr(s->mr), 0);
	T_EQ(ops->destroy_cq(s->cq), 0);
	free(s->buf);
}

static int ud_poll(struct ud_side *s, struct ibv_wc *wc)
{
	int i, n = 0;

	for (i = 0; i < 2000 && n == 0; i++) {
		n = s->ctx->ops->poll_cq(s->cq, 1, wc);
		if (!n)
			t_sleep_ms(1);
	}
	return n;
}

/* UD over RoCE v2 through the verbs ops: GIDs, an AH, a send with Q_Key,
 * the GRH in front of the payload on receive. */
static void test_ud(void)
{
	const struct qps_provider_ops *ops;
	struct ud_side a, b;
	union ibv_gid ga, gb;
	struct ibv_ah_attr ah_attr;
	struct qps_ah *ah = NULL;
	struct ibv_sge sge;
	struct ibv_send_wr swr, *bad_s;
	struct ibv_recv_wr rwr, *bad_r;
	struct ibv_wc wc;
	static const char msg[] = "ud over verbs";

	t_wire_name(g_wire, sizeof(g_wire), "vb-ud");
	ud_open(&a, IP_A);
	ud_open(&b, IP_B);
	ops = a.ctx->ops;
	CU_ASSERT_FATAL(a.ctx->info.caps & QPS_DEV_CAP_UD);
	/* GID 1 is ::ffff:<address> on each side. */
	T_EQ(ops->query_gid(a.ctx->dev, QPS_GID_ROCE_V2_IPV4, &ga), 0);
	T_EQ(ops->query_gid(b.ctx->dev, QPS_GID_ROCE_V2_IPV4, &gb), 0);
	CU_ASSERT(!memcmp(&ga.raw[12], &a.ctx->info.addr.s_addr, 4));
	CU_ASSERT(!memcmp(&gb.raw[12], &b.ctx->info.addr.s_addr, 4));
	T_EQ(ops->query_gid(a.ctx->dev, -1, &ga), -EINVAL);

	memset(&ah_attr, 0, sizeof(ah_attr));
	T_EQ(ops->create_ah(a.ctx->dev, &ah_attr, &ah), -EINVAL); /* no GRH */
	ah_attr.is_global = 1;
	ah_attr.grh.dgid = gb;
	ah_attr.grh.sgid_index = QPS_GID_ROCE_V2_IPV4;
	ah_attr.grh.hop_limit = 64;
	T_EQ_FATAL(ops->create_ah(a.ctx->dev, &ah_attr, &ah), 0);
	CU_ASSERT_PTR_NOT_NULL(ah->ibv);

	sge.addr = (uintptr_t)b.buf;
	sge.length = 4096;
	sge.lkey = b.mr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 77;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	T_EQ(ops->post_recv(b.qp, &rwr, &bad_r), 0);

	memcpy(a.buf, msg, sizeof(msg));
	{
		struct ibv_sge ss = { .addr = (uintptr_t)a.buf,
				      .length = sizeof(msg),
				      .lkey = a.mr->lkey };

		memset(&swr, 0, sizeof(swr));
		swr.wr_id = 5;
		swr.sg_list = &ss;
		swr.num_sge = 1;
		swr.opcode = IBV_WR_SEND;
		swr.send_flags = IBV_SEND_SIGNALED;
		swr.wr.ud.ah = ah->ibv;
		swr.wr.ud.remote_qpn = b.qp->qp_num;
		swr.wr.ud.remote_qkey = 0x11111111;
		T_EQ(ops->post_send(a.qp, &swr, &bad_s), 0);
	}
	T_EQ(ud_poll(&a, &wc), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(wc.wr_id, 5);
	T_EQ(ud_poll(&b, &wc), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(wc.wr_id, 77);
	T_EQ(wc.byte_len, 40 + sizeof(msg));
	T_EQ(wc.src_qp, a.qp->qp_num);
	CU_ASSERT(memcmp(b.buf + 40, msg, sizeof(msg)) == 0);

	T_EQ(ops->destroy_ah(ah), 0);
	ud_close(&a);
	ud_close(&b);
	end_test();
}

/* The direct path's completion side without a device: libmlx4's poll_cq
 * leaves its own (stale) wr_ids; each send completion of the QP is mapped
 * to the oldest outstanding WQE that asked for one. */
static void test_mlx4_completions(void)
{
	static uint8_t ring[8 << 6] __attribute__((aligned(64)));
	uint64_t wrid[8];
	struct qps_verbs_qp vq;
	struct ibv_wc wc[4];
	uint32_t i;

	memset(&vq, 0, sizeof(vq));
	memset(ring, 0, sizeof(ring));
	vq.base.qp_num = 0x42;
	vq.sq_buf = ring;
	vq.wqe_cnt = 8;
	vq.wqe_shift = 6;
	vq.wrid = wrid;
	for (i = 0; i < 8; i++)
		wrid[i] = 100 + i;
#define SIGNAL(ind) \
	(((struct mlx4_wqe_ctrl_seg *)(void *)(ring + (((ind) & 7) << 6))) \
	 ->srcrb_flags = htobe32(MLX4_WQE_CTRL_CQ_UPDATE))
	/* WQEs 0..4 written, 1, 3 and 4 signalled. */
	SIGNAL(1);
	SIGNAL(3);
	SIGNAL(4);
	vq.head = 5;
	memset(wc, 0, sizeof(wc));
	for (i = 0; i < 4; i++) {
		wc[i].qp_num = 0x42;
		wc[i].wr_id = 7;	/* libmlx4's stale value */
	}
	wc[1].qp_num = 0x43;		/* another QP's: untouched */
	qps_verbs_mlx4_complete(&vq, wc, 4);
	T_EQ(wc[0].wr_id, 101);
	T_EQ(wc[1].wr_id, 7);
	T_EQ(wc[2].wr_id, 103);
	T_EQ(wc[3].wr_id, 104);
	T_EQ(vq.tail, 5);
	/* Nothing outstanding: a completion that is not ours. */
	wc[0].wr_id = 7;
	qps_verbs_mlx4_complete(&vq, wc, 1);
	T_EQ(wc[0].wr_id, UINT64_MAX);
	T_EQ(vq.tail, 5);
	/* An error is charged like a success, up to the next WQE that
	 * asked (the failing one lies before it, and those before that
	 * completed); a flush with nothing left outstanding is not ours. */
	memset(ring, 0, sizeof(ring));
	SIGNAL(6);
	vq.head = 7;
	wc[0].status = IBV_WC_LOC_PROT_ERR;
	wc[1].qp_num = 0x42;
	wc[1].status = IBV_WC_WR_FLUSH_ERR;
	qps_verbs_mlx4_complete(&vq, wc, 2);
	T_EQ(wc[0].wr_id, 106);
	T_EQ(wc[1].wr_id, UINT64_MAX);
	T_EQ(vq.tail, 7);
	/* Across the 32-bit wrap of the indices. */
	vq.tail = 0xfffffffeu;
	vq.head = 0x00000001u;
	memset(ring, 0, sizeof(ring));
	SIGNAL(0xffffffffu);
	SIGNAL(0);
	wc[0].status = wc[1].status = IBV_WC_SUCCESS;
	qps_verbs_mlx4_complete(&vq, wc, 2);
	T_EQ(wc[0].wr_id, 100 + (0xffffffffu & 7));
	T_EQ(wc[1].wr_id, 100);
	T_EQ(vq.tail, 1);
#undef SIGNAL
}

static CU_TestInfo tests[] = {
	{ "no device: -ENODEV", test_no_device },
	{ "direct path: completions to our wr_ids", test_mlx4_completions },
	{ "discovery: address, MAC, MTU", test_discovery },
	{ "an address not on the port", test_addr_not_on_port },
	{ "device[:port] names", test_dev_names },
	{ "direct path refused off mlx4", test_direct_refused },
	{ "resolve through the kernel neighbour table", test_resolve },
	{ "datagrams and counters", test_traffic_counters },
	{ "multicast joins the kernel (IGMP)", test_igmp },
	{ "raw-packet QP modify", test_raw_modify },
	{ "direct path: ring indices restart at RESET", test_direct_reset },
	{ "UD: GIDs, AH, Q_Key, GRH", test_ud },
	CU_TEST_INFO_NULL,
};

static void cleanup_atexit(void)
{
	t_ctxs_destroy(&g_ctxs, 0);
}

int main(void)
{
	atexit(cleanup_atexit);
	if (!t_provider_is("verbs")) {
		/* Only the no-device check means anything here. */
		tests[2].pName = NULL;
		tests[2].pTestFunc = NULL;
	}
	return t_run("verbs", tests);
}
