// SPDX-License-Identifier: MIT
/*
 * The emulated libibverbs (tests/ibverbs_emu), through the public verbs
 * API only: this program links against the system libibverbs and ctest
 * runs it with LD_LIBRARY_PATH pointing at the emulation, as perftest and
 * the verbs provider are run. Every context opens its own port on a wire
 * private to this process.
 */
#define _GNU_SOURCE	/* dlvsym, dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <infiniband/mlx4dv.h>
#include <infiniband/verbs.h>

#include "t_util.h"

#define BUF_SIZE	65536
#define QKEY		0x11111111u
#define ETH_HLEN	14
#define GRH_LEN		40

static char g_wire[64];

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;		/* heap memory: not emu's pool */
	uint8_t mac[6];
	union ibv_gid gid[2];
};

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	CU_ASSERT_PTR_NOT_NULL_FATAL(list);
	CU_ASSERT_PTR_NOT_NULL_FATAL(list[0]);
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	return ctx;
}

/* RESET -> INIT -> RTR -> RTS, with what each QP type needs. */
static int qp_up(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PORT;
	int r;

	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
	}
	r = ibv_modify_qp(qp, &a, mask);
	if (r)
		return r;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	r = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (r)
		return r;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE |
			     (qp->qp_type == IBV_QPT_UD ? IBV_QP_SQ_PSN : 0));
}

/* Open a context with one QP of @type on one CQ of @cqe entries. */
static void side_open(struct side *s, enum ibv_qp_type type, int cqe,
		      bool channel)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = type,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64,
			 .max_send_sge = 2, .max_recv_sge = 2 },
	};
	const uint8_t *id;

	memset(s, 0, sizeof(*s));
	s->ctx = open_dev();
	T_EQ_FATAL(ibv_query_gid(s->ctx, 1, 0, &s->gid[0]), 0);
	T_EQ_FATAL(ibv_query_gid(s->ctx, 1, 1, &s->gid[1]), 0);
	/* The port's MAC, from the EUI-64 of its link-local GID. */
	id = &s->gid[0].raw[8];
	s->mac[0] = id[0] ^ 2;
	s->mac[1] = id[1];
	s->mac[2] = id[2];
	memcpy(&s->mac[3], &id[5], 3);
	s->pd = ibv_alloc_pd(s->ctx);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->pd);
	if (channel) {
		s->ch = ibv_create_comp_channel(s->ctx);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s->ch);
	}
	s->cq = ibv_create_cq(s->ctx, cqe, s, s->ch, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->cq);
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &ia);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->qp);
	CU_ASSERT(ia.cap.max_send_wr >= 64);
	T_EQ(s->qp->state, IBV_QPS_RESET);
	s->buf = aligned_alloc(64, BUF_SIZE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->buf);
	memset(s->buf, 0, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->mr);
}

static void side_close(struct side *s)
{
	if (s->qp)
		T_EQ(ibv_destroy_qp(s->qp), 0);
	if (s->mr)
		T_EQ(ibv_dereg_mr(s->mr), 0);
	if (s->cq)
		T_EQ(ibv_destroy_cq(s->cq), 0);
	if (s->ch)
		T_EQ(ibv_destroy_comp_channel(s->ch), 0);
	if (s->pd)
		T_EQ(ibv_dealloc_pd(s->pd), 0);
	if (s->ctx)
		T_EQ(ibv_close_device(s->ctx), 0);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

/* Post a receive of @len bytes at @off of the side's buffer, in two SGEs
 * (the emulation scatters from its bounce slot). */
static int post_recv(struct side *s, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sge[2] = {
		{ (uintptr_t)s->buf + off, 16, s->mr->lkey },
		{ (uintptr_t)s->buf + off + 16, len - 16, s->mr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sge,
				  .num_sge = 2 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

/* Send @len bytes at @off of the side's buffer on its raw QP. */
static int post_raw(struct side *s, uint64_t wr_id, size_t off, uint32_t len,
		    uint32_t lkey)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	return ibv_post_send(s->qp, &wr, &bad);
}

/* Write an Ethernet frame (experimental EtherType) of @len bytes. */
static void make_frame(uint8_t *f, const uint8_t *dst, const uint8_t *src,
		       uint32_t len, uint8_t seed)
{
	uint32_t i;

	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	f[12] = 0x88;
	f[13] = 0xb5;
	for (i = ETH_HLEN; i < len; i++)
		f[i] = (uint8_t)(seed + i);
}

/* Poll @cq until @n completions or @ms milliseconds; returns how many. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms)
{
	int got = 0, r, i;

	for (i = 0; i <= ms * 10 && got < n; i++) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			return r;
		got += r;
		if (got < n)
			usleep(100);
	}
	return got;
}

/* A raw steering rule for @mac (ETH spec only). */
struct eth_rule {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_eth eth;
};

static struct ibv_flow *eth_flow(struct ibv_qp *qp, const uint8_t *mac)
{
	struct eth_rule r = {
		.attr = { .type = IBV_FLOW_ATTR_NORMAL, .size = sizeof(r),
			  .num_of_specs = 1, .port = 1 },
		.eth = { .type = IBV_FLOW_SPEC_ETH,
			 .size = sizeof(struct ibv_flow_spec_eth) },
	};

	memcpy(r.eth.val.dst_mac, mac, 6);
	memset(r.eth.mask.dst_mac, 0xff, 6);
	return ibv_create_flow(qp, &r.attr);
}

/* Two raw-packet sides, B steering its MAC to its QP, both in RTS. */
static struct ibv_flow *raw_pair(struct side *a, struct side *b, int b_cqe,
				 bool b_channel)
{
	struct ibv_flow *f;

	side_open(a, IBV_QPT_RAW_PACKET, 128, false);
	side_open(b, IBV_QPT_RAW_PACKET, b_cqe, b_channel);
	T_EQ_FATAL(qp_up(a->qp), 0);
	T_EQ_FATAL(qp_up(b->qp), 0);
	f = eth_flow(b->qp, b->mac);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	return f;
}

/* --- tests --------------------------------------------------------------- */

static void t_runs_on_shim(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	const char *dir = getenv("LD_LIBRARY_PATH");
	char real_dir[4096], real_lib[4096];
	Dl_info info;
	void *sym;

	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	sym = dlsym(h, "ibv_get_device_list");
	CU_ASSERT_PTR_NOT_NULL_FATAL(sym);
	CU_ASSERT_FATAL(dladdr(sym, &info) != 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
	CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(dir, real_dir));
	CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(info.dli_fname, real_lib));
	/* The library that answers is the one in the emulation's dir. */
	T_EQ(strncmp(real_lib, real_dir, strlen(real_dir)), 0);
	/* qpsock's own names stay inside it. */
	CU_ASSERT_PTR_NULL(dlsym(h, "qps_provider_find"));
	CU_ASSERT_PTR_NULL(dlsym(h, "qps_emu_ops"));
	CU_ASSERT_PTR_NULL(dlsym(h, "qps_ibvemu_poll_cq"));
	dlclose(h);
}

static void t_symbol_versions(void)
{
	static const char *const v[][2] = {
		{ "ibv_get_device_list", "IBVERBS_1.1" },
		{ "ibv_create_comp_channel", "IBVERBS_1.0" },
		{ "ibv_get_pkey_index", "IBVERBS_1.5" },
		{ "ibv_qp_to_qp_ex", "IBVERBS_1.6" },
		{ "ibv_reg_mr_iova", "IBVERBS_1.7" },
		{ "ibv_reg_mr_iova2", "IBVERBS_1.8" },
		{ "ibv_get_device_index", "IBVERBS_1.9" },
		{ "ibv_query_ece", "IBVERBS_1.10" },
		{ "_ibv_query_gid_ex", "IBVERBS_1.11" },
		{ "ibv_reg_dmabuf_mr", "IBVERBS_1.12" },
		{ "ibv_is_fork_initialized", "IBVERBS_1.13" },
		{ "ibv_query_qp_data_in_order", "IBVERBS_1.14" },
		{ "verbs_register_driver_34", "IBVERBS_PRIVATE_34" },
		{ "ibv_cmd_create_qp", "IBVERBS_PRIVATE_34" },
	};
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *(*alloc_pd_10)(struct ibv_context *);
	void (*reg34)(const void *);
	struct ibv_context *ctx;
	unsigned int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		if (!dlvsym(h, v[i][0], v[i][1]))
			fprintf(stderr, "  missing %s@%s\n", v[i][0], v[i][1]);
		CU_ASSERT_PTR_NOT_NULL(dlvsym(h, v[i][0], v[i][1]));
	}
	/* The default version is the 1.1 one, the 1.0 one is another. */
	CU_ASSERT(dlsym(h, "ibv_alloc_pd") == dlvsym(h, "ibv_alloc_pd",
						    "IBVERBS_1.1"));
	*(void **)&alloc_pd_10 = dlvsym(h, "ibv_alloc_pd", "IBVERBS_1.0");
	CU_ASSERT_PTR_NOT_NULL_FATAL(alloc_pd_10);
	CU_ASSERT(*(void **)&alloc_pd_10 != dlsym(h, "ibv_alloc_pd"));
	/* Stubs fail cleanly; registration from a provider is accepted. */
	ctx = open_dev();
	errno = 0;
	CU_ASSERT_PTR_NULL(alloc_pd_10(ctx));
	T_EQ(errno, EOPNOTSUPP);
	*(void **)&reg34 = dlvsym(h, "verbs_register_driver_34",
				  "IBVERBS_PRIVATE_34");
	CU_ASSERT_PTR_NOT_NULL_FATAL(reg34);
	reg34(NULL);
	errno = 0;
	CU_ASSERT_PTR_NULL(ibv_create_srq(NULL, NULL));
	T_EQ(errno, EOPNOTSUPP);
	T_EQ(ibv_resize_cq(NULL, 4), EOPNOTSUPP);
	T_EQ(ibv_close_device(ctx), 0);
	dlclose(h);
}

static void t_device(void)
{
	struct ibv_device **list;
	struct ibv_device_attr_ex dx;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_gid_entry ge[4];
	struct ibv_context *c1, *c2;
	union ibv_gid g1, g2;
	__be16 pkey;
	int n = -1;

	list = ibv_get_device_list(&n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(list);
	T_EQ(n, 1);
	CU_ASSERT_STRING_EQUAL(ibv_get_device_name(list[0]), "qpsemu0");
	T_EQ(list[0]->node_type, IBV_NODE_CA);
	T_EQ(list[0]->transport_type, IBV_TRANSPORT_IB);
	CU_ASSERT_PTR_NULL(list[1]);
	ibv_free_device_list(list);

	c1 = open_dev();
	c2 = open_dev();
	T_EQ(ibv_query_device(c1, &da), 0);
	T_EQ(da.vendor_part_id, 4099);	/* ConnectX-3 */
	T_EQ(da.phys_port_cnt, 1);
	CU_ASSERT(da.max_qp_wr >= 1024);
	T_EQ(ibv_query_device_ex(c1, NULL, &dx), 0);
	T_EQ(dx.orig_attr.max_cqe, da.max_cqe);

	T_EQ(ibv_query_port(c1, 1, &pa), 0);
	T_EQ(pa.state, IBV_PORT_ACTIVE);
	T_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	T_EQ(pa.active_mtu, IBV_MTU_1024);	/* 1500-byte wire */
	T_EQ(pa.gid_tbl_len, 2);
	T_EQ(ibv_query_port(c1, 2, &pa), EINVAL);

	/* Index 0: RoCE v1 link-local; 1: RoCE v2 of the IPv4 address;
	 * each context is its own port. */
	T_EQ(ibv_query_gid(c1, 1, 0, &g1), 0);
	T_EQ(g1.raw[0], 0xfe);
	T_EQ(g1.raw[1], 0x80);
	T_EQ(ibv_query_gid(c1, 1, 1, &g1), 0);
	T_EQ(ibv_query_gid(c2, 1, 1, &g2), 0);
	CU_ASSERT(IN6_IS_ADDR_V4MAPPED((struct in6_addr *)g1.raw));
	T_EQ(g1.raw[12], 198);
	T_EQ(g1.raw[13], 18);
	CU_ASSERT(memcmp(&g1, &g2, sizeof(g1)) != 0);
	T_EQ(ibv_query_gid(c1, 1, 2, &g1), -1);

	T_EQ(ibv_query_gid_ex(c1, 1, 0, &ge[0], 0), 0);
	T_EQ(ge[0].gid_type, IBV_GID_TYPE_ROCE_V1);
	T_EQ(ge[0].ndev_ifindex, 0);
	T_EQ(ibv_query_gid_ex(c1, 1, 1, &ge[0], 0), 0);
	T_EQ(ge[0].gid_type, IBV_GID_TYPE_ROCE_V2);
	T_EQ(ibv_query_gid_ex(c1, 1, 2, &ge[0], 0), ENODATA);
	T_EQ(ibv_query_gid_ex(c1, 1, 0, &ge[0], 1), EINVAL);
	T_EQ(ibv_query_gid_table(c1, ge, 4, 0), 2);
	T_EQ(ge[1].gid_index, 1);
	T_EQ(ibv_query_gid_table(c1, ge, 1, 0), -EINVAL);

	T_EQ(ibv_query_pkey(c1, 1, 0, &pkey), 0);
	T_EQ(be16toh(pkey), 0xffff);
	T_EQ(ibv_get_pkey_index(c1, 1, htobe16(0xffff)), 0);
	T_EQ(ibv_close_device(c2), 0);

	/* $QPS_IBV_EMU_ADDR picks the next port's address. */
	setenv("QPS_IBV_EMU_ADDR", "198.18.0.200", 1);
	c2 = open_dev();
	T_EQ(ibv_query_gid(c2, 1, 1, &g2), 0);
	T_EQ(g2.raw[15], 200);
	list = ibv_get_device_list(NULL);
	errno = 0;
	CU_ASSERT_PTR_NULL(ibv_open_device(list[0]));	/* taken */
	T_EQ(errno, EADDRINUSE);
	setenv("QPS_IBV_EMU_ADDR", "no.such", 1);
	errno = 0;
	CU_ASSERT_PTR_NULL(ibv_open_device(list[0]));
	T_EQ(errno, EINVAL);
	unsetenv("QPS_IBV_EMU_ADDR");
	ibv_free_device_list(list);
	T_EQ(ibv_close_device(c2), 0);
	T_EQ(ibv_close_device(c1), 0);
}

static void t_strings_rates_fork(void)
{
	CU_ASSERT_STRING_EQUAL(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR),
			       "Work Request Flushed Error");
	CU_ASSERT_STRING_EQUAL(ibv_wc_status_str((enum ibv_wc_status)999),
			       "unknown");
	CU_ASSERT_STRING_EQUAL(ibv_event_type_str(IBV_EVENT_QP_FATAL),
			       "local work queue catastrophic error");
	CU_ASSERT_STRING_EQUAL(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
	CU_ASSERT_PTR_NOT_NULL(ibv_node_type_str(IBV_NODE_CA));
	T_EQ(ibv_rate_to_mult(IBV_RATE_10_GBPS), 4);
	T_EQ(mult_to_ibv_rate(16), IBV_RATE_40_GBPS);
	T_EQ(ibv_rate_to_mbps(IBV_RATE_100_GBPS), 103125);
	T_EQ(mbps_to_ibv_rate(25781), IBV_RATE_25_GBPS);
	T_EQ(mult_to_ibv_rate(3), IBV_RATE_MAX);
	T_EQ(ibv_fork_init(), 0);
	T_EQ(ibv_is_fork_initialized(), IBV_FORK_ENABLED);
}

static void t_raw_send_recv(void)
{
	struct side a, b;
	struct ibv_flow *f;
	struct ibv_wc wc[4];
	uint32_t len = 200;

	f = raw_pair(&a, &b, 128, false);
	T_EQ(post_recv(&b, 77, 4096, 1600), 0);
	make_frame(a.buf, b.mac, a.mac, len, 3);
	T_EQ(post_raw(&a, 5, 0, len, a.mr->lkey), 0);
	T_EQ(poll_n(a.cq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].wr_id, 5);
	T_EQ(wc[0].opcode, IBV_WC_SEND);
	T_EQ(poll_n(b.cq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].wr_id, 77);
	T_EQ(wc[0].opcode, IBV_WC_RECV);
	T_EQ(wc[0].byte_len, len);
	T_EQ(wc[0].qp_num, b.qp->qp_num);
	/* Scattered over both SGEs of the user's (heap) buffer. */
	T_EQ(memcmp(b.buf + 4096, a.buf, len), 0);
	T_EQ(ibv_destroy_qp(b.qp), EBUSY);	/* the rule still points here */
	T_EQ(ibv_destroy_flow(f), 0);
	side_close(&a);
	side_close(&b);
}

static void t_raw_states(void)
{
	struct side a;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_send_wr *bad;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND };

	side_open(&a, IBV_QPT_RAW_PACKET, 64, false);
	sge = (struct ibv_sge){ (uintptr_t)a.buf, 64, a.mr->lkey };
	/* No sending before RTS, no skipping states. */
	T_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	CU_ASSERT(bad == &wr);
	qa.qp_state = IBV_QPS_RTS;
	T_EQ(ibv_modify_qp(a.qp, &qa, IBV_QP_STATE), EINVAL);
	T_EQ(qp_up(a.qp), 0);
	T_EQ(ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi), 0);
	T_EQ(qa.qp_state, IBV_QPS_RTS);
	T_EQ(qi.qp_type, IBV_QPT_RAW_PACKET);
	T_EQ(a.qp->state, IBV_QPS_RTS);
	side_close(&a);
}

/* libmlx4's direct verbs, as the verbs provider dlopens them, refuse the
 * emulated QP instead of reading a struct mlx4_qp that is not there. */
static void t_mlx4dv_refused(void)
{
	int (*init_obj)(struct mlx4dv_obj *, uint64_t);
	struct mlx4dv_qp dq;
	struct mlx4dv_obj obj;
	struct side a;
	void *h;

	h = dlopen("libmlx4.so.1", RTLD_NOW | RTLD_LOCAL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	*(void **)&init_obj = dlsym(h, "mlx4dv_init_obj");
	CU_ASSERT_PTR_NOT_NULL_FATAL(init_obj);
	side_open(&a, IBV_QPT_RAW_PACKET, 64, false);
	memset(&obj, 0, sizeof(obj));
	obj.qp.in = a.qp;
	obj.qp.out = &dq;
	T_EQ(init_obj(&obj, MLX4DV_OBJ_QP), EOPNOTSUPP);
	side_close(&a);
	dlclose(h);
}

/* The device clock now, as ibv_query_rt_values_ex gives it. */
static uint64_t raw_clock(struct ibv_context *ctx)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };

	T_EQ(ibv_query_rt_values_ex(ctx, &v), 0);
	return (uint64_t)v.raw_clock.tv_nsec;
}

/* Extended CQs: the clock is described and readable, wc_flags beyond
 * what is kept are refused, and a send completion read through the
 * extended calls carries a stamp between two reads of the clock. */
static void t_cq_ex_timestamps(void)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 16,
		.wc_flags = IBV_WC_STANDARD_FLAGS |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
	};
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RAW_PACKET,
		.cap = { .max_send_wr = 8, .max_send_sge = 1 },
	};
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	struct ibv_device_attr_ex ax;
	struct ibv_cq_ex *cqx;
	struct side a;
	uint64_t c0, c1, ts;

	memset(&a, 0, sizeof(a));
	a.ctx = open_dev();
	memset(&ax, 0, sizeof(ax));
	T_EQ(ibv_query_device_ex(a.ctx, NULL, &ax), 0);
	T_EQ(ax.completion_timestamp_mask, (1ull << 48) - 1);
	T_EQ(ax.hca_core_clock, 427000);
	c0 = raw_clock(a.ctx);
	CU_ASSERT(raw_clock(a.ctx) >= c0);

	ca.wc_flags |= IBV_WC_EX_WITH_FLOW_TAG;
	CU_ASSERT_PTR_NULL(ibv_create_cq_ex(a.ctx, &ca));
	T_EQ(errno, EOPNOTSUPP);
	ca.wc_flags &= ~(uint64_t)IBV_WC_EX_WITH_FLOW_TAG;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	CU_ASSERT_PTR_NULL(ibv_create_cq_ex(a.ctx, &ca));
	T_EQ(errno, EINVAL);
	ca.comp_mask = 0;
	cqx = ibv_create_cq_ex(a.ctx, &ca);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cqx);
	a.cq = ibv_cq_ex_to_cq(cqx);
	T_EQ(ibv_start_poll(cqx, &pa), ENOENT);

	a.pd = ibv_alloc_pd(a.ctx);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.pd);
	ia.send_cq = ia.recv_cq = a.cq;
	a.qp = ibv_create_qp(a.pd, &ia);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.qp);
	T_EQ_FATAL(qp_up(a.qp), 0);
	a.buf = aligned_alloc(64, BUF_SIZE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.buf);
	memset(a.buf, 0, BUF_SIZE);
	a.mr = ibv_reg_mr(a.pd, a.buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.mr);

	c0 = raw_clock(a.ctx);
	T_EQ(post_raw(&a, 9, 0, 64, a.mr->lkey), 0);
	c1 = raw_clock(a.ctx);
	T_EQ(ibv_start_poll(cqx, &pa), 0);
	T_EQ(cqx->wr_id, 9);
	T_EQ(cqx->status, IBV_WC_SUCCESS);
	T_EQ(ibv_wc_read_opcode(cqx), IBV_WC_SEND);
	T_EQ(ibv_wc_read_qp_num(cqx), a.qp->qp_num);
	ts = ibv_wc_read_completion_ts(cqx);
	CU_ASSERT(ts >= c0 && ts <= c1);
	T_EQ(ibv_next_poll(cqx), ENOENT);
	ibv_end_poll(cqx);
	side_close(&a);
}

static void t_completion_channel(void)
{
	struct side a, b;
	struct ibv_flow *f;
	struct ibv_cq *ev_cq;
	struct ibv_wc wc;
	struct pollfd pfd;
	void *ev_ctx;

	f = raw_pair(&a, &b, 64, true);
	T_EQ(post_recv(&b, 1, 0, 1600), 0);
	T_EQ(ibv_req_notify_cq(b.cq, 0), 0);
	pfd = (struct pollfd){ .fd = b.ch->fd, .events = POLLIN };
	T_EQ(poll(&pfd, 1, 0), 0);	/* nothing yet */
	make_frame(a.buf, b.mac, a.mac, 100, 1);
	T_EQ(post_raw(&a, 1, 0, 100, a.mr->lkey), 0);
	T_EQ(poll(&pfd, 1, 2000), 1);
	T_EQ(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx), 0);
	CU_ASSERT(ev_cq == b.cq);
	CU_ASSERT(ev_ctx == &b);
	ibv_ack_cq_events(ev_cq, 1);
	T_EQ(b.cq->comp_events_completed, 1);
	T_EQ(poll_n(b.cq, &wc, 1, 1000), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	/* Disarmed now: a non-blocking channel has nothing more. */
	T_EQ(fcntl(b.ch->fd, F_SETFL, O_NONBLOCK), 0);
	errno = 0;
	T_EQ(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx), -1);
	T_EQ(errno, EAGAIN);
	/* A channel in use by a CQ cannot go. */
	T_EQ(ibv_destroy_comp_channel(b.ch), EBUSY);
	T_EQ(ibv_destroy_flow(f), 0);
	side_close(&a);
	side_close(&b);
}

static void t_raw_multicast_rule(void)
{
	static const uint8_t group[6] = { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 };
	struct side a, b;
	struct ibv_flow *f, *mf;
	struct ibv_wc wc[2];

	f = raw_pair(&a, &b, 64, false);
	T_EQ(post_recv(&b, 1, 0, 1600), 0);
	/* The rule alone makes the port accept the group's MAC, as
	 * device-managed steering does on mlx4. */
	mf = eth_flow(b.qp, group);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mf);
	make_frame(a.buf, group, a.mac, 120, 9);
	T_EQ(post_raw(&a, 1, 0, 120, a.mr->lkey), 0);
	T_EQ(poll_n(a.cq, wc, 1, 1000), 1);
	T_EQ(poll_n(b.cq, wc, 1, 1000), 1);
	T_EQ(wc[0].byte_len, 120);
	T_EQ(ibv_destroy_flow(mf), 0);
	/* Gone with the rule: the frame reaches no one. */
	T_EQ(post_raw(&a, 2, 0, 120, a.mr->lkey), 0);
	T_EQ(poll_n(a.cq, wc, 1, 1000), 1);
	T_EQ(poll_n(b.cq, wc, 1, 100), 0);
	T_EQ(ibv_destroy_flow(f), 0);
	side_close(&a);
	side_close(&b);
}

static void t_qp_err_flush(void)
{
	struct side a, b;
	struct ibv_flow *f;
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[8];
	int i, n;

	f = raw_pair(&a, &b, 64, false);
	for (i = 0; i < 4; i++)
		T_EQ(post_recv(&b, 10 + i, (size_t)i * 2048, 1600), 0);
	T_EQ(ibv_modify_qp(b.qp, &qa, IBV_QP_STATE), 0);
	T_EQ(b.qp->state, IBV_QPS_ERR);
	n = poll_n(b.cq, wc, 4, 1000);
	T_EQ(n, 4);
	for (i = 0; i < n; i++) {
		T_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		T_EQ(wc[i].wr_id, 10 + i);
	}
	/* Posted while in ERR: flushed too. */
	T_EQ(post_recv(&b, 99, 0, 1600), 0);
	T_EQ(poll_n(b.cq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	T_EQ(wc[0].wr_id, 99);
	/* RESET and up again: the QP works. */
	qa.qp_state = IBV_QPS_RESET;
	T_EQ(ibv_modify_qp(b.qp, &qa, IBV_QP_STATE), 0);
	T_EQ(qp_up(b.qp), 0);
	T_EQ(post_recv(&b, 7, 0, 1600), 0);
	make_frame(a.buf, b.mac, a.mac, 90, 4);
	T_EQ(post_raw(&a, 1, 0, 90, a.mr->lkey), 0);
	T_EQ(poll_n(b.cq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].wr_id, 7);
	T_EQ(ibv_destroy_flow(f), 0);
	side_close(&a);
	side_close(&b);
}

/* A WQE with a bad lkey fails; the QP goes to ERR and the failure is
 * reported as an async event, as the HCA does. */
static void t_injected_qp_error(void)
{
	struct side a;
	struct ibv_async_event ev;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_wc wc;
	struct pollfd pfd;
	uint8_t dst[6] = { 0x02, 0x51, 0x50, 0x00, 0x00, 0x7f };

	side_open(&a, IBV_QPT_RAW_PACKET, 64, false);
	T_EQ(qp_up(a.qp), 0);
	make_frame(a.buf, dst, a.mac, 64, 0);
	T_EQ(post_raw(&a, 1, 0, 64, a.mr->lkey ^ 0x5a5a00), 0);
	T_EQ(poll_n(a.cq, &wc, 1, 1000), 1);
	T_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
	T_EQ(ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi), 0);
	T_EQ(qa.qp_state, IBV_QPS_ERR);
	pfd = (struct pollfd){ .fd = a.ctx->async_fd, .events = POLLIN };
	T_EQ(poll(&pfd, 1, 1000), 1);
	T_EQ(ibv_get_async_event(a.ctx, &ev), 0);
	T_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
	CU_ASSERT(ev.element.qp == a.qp);
	ibv_ack_async_event(&ev);
	T_EQ(a.qp->events_completed, 1);
	/* Later sends complete flushed. */
	T_EQ(post_raw(&a, 2, 0, 64, a.mr->lkey), 0);
	T_EQ(poll_n(a.cq, &wc, 1, 1000), 1);
	T_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	T_EQ(wc.wr_id, 2);
	side_close(&a);
}

static void t_flow_errors(void)
{
	struct {
		struct ibv_flow_attr attr;
		struct ibv_flow_spec_tcp_udp tcp;
	} tr = {
		.attr = { .type = IBV_FLOW_ATTR_NORMAL, .size = sizeof(tr),
			  .num_of_specs = 1, .port = 1 },
		.tcp = { .type = IBV_FLOW_SPEC_TCP,
			 .size = sizeof(struct ibv_flow_spec_tcp_udp),
			 .val.dst_port = 80, .mask.dst_port = 0xffff },
	};
	struct side a;

	side_open(&a, IBV_QPT_RAW_PACKET, 64, false);
	errno = 0;
	CU_ASSERT_PTR_NULL(ibv_create_flow(a.qp, &tr.attr));
	T_EQ(errno, EOPNOTSUPP);
	/* A rule the device refuses, through emu's injection hook. */
	setenv("QPS_IBV_EMU_FLOW_ERR", "ENOSPC", 1);
	errno = 0;
	CU_ASSERT_PTR_NULL(eth_flow(a.qp, a.mac));
	T_EQ(errno, ENOSPC);
	setenv("QPS_IBV_EMU_FLOW_ERR", "12", 1);
	errno = 0;
	CU_ASSERT_PTR_NULL(eth_flow(a.qp, a.mac));
	T_EQ(errno, ENOMEM);
	unsetenv("QPS_IBV_EMU_FLOW_ERR");
	side_close(&a);
}

/* More frames than the receive CQ holds: the CQ reports the overrun
 * once drained, with an async CQ_ERR event. */
static void t_cq_overrun(void)
{
	struct side a, b;
	struct ibv_flow *f;
	struct ibv_async_event ev;
	struct ibv_wc wc[8];
	int i;

	f = raw_pair(&a, &b, 4, false);
	T_EQ(b.cq->cqe, 4);
	for (i = 0; i < 8; i++)
		T_EQ(post_recv(&b, (uint64_t)i, (size_t)i * 2048, 1600), 0);
	make_frame(a.buf, b.mac, a.mac, 80, 2);
	for (i = 0; i < 8; i++)
		T_EQ(post_raw(&a, (uint64_t)i, 0, 80, a.mr->lkey), 0);
	T_EQ(poll_n(a.cq, wc, 8, 1000), 8);
	T_EQ(ibv_poll_cq(b.cq, 8, wc), 4);
	CU_ASSERT(ibv_poll_cq(b.cq, 8, wc) < 0);
	T_EQ(ibv_get_async_event(b.ctx, &ev), 0);
	T_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
	CU_ASSERT(ev.element.cq == b.cq);
	ibv_ack_async_event(&ev);
	T_EQ(b.cq->async_events_completed, 1);
	T_EQ(ibv_destroy_flow(f), 0);
	side_close(&a);
	side_close(&b);
}

static void t_ud(void)
{
	struct side a, b;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_ah *ah, *back;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	uint32_t i, len = 256;

	side_open(&a, IBV_QPT_UD, 64, false);
	side_open(&b, IBV_QPT_UD, 64, false);
	T_EQ_FATAL(qp_up(a.qp), 0);
	T_EQ_FATAL(qp_up(b.qp), 0);
	T_EQ(post_recv(&b, 3, 0, GRH_LEN + len), 0);
	T_EQ(post_recv(&a, 4, 0, GRH_LEN + len), 0);

	aa.grh.dgid = b.gid[1];
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(a.pd, &aa);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ah);
	CU_ASSERT(ah->context == a.ctx && ah->pd == a.pd);
	for (i = 0; i < len; i++)
		a.buf[8192 + i] = (uint8_t)(i * 7);
	sge = (struct ibv_sge){ (uintptr_t)a.buf + 8192, len, a.mr->lkey };
	wr.wr_id = 11;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = b.qp->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	T_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	T_EQ(poll_n(a.cq, &wc, 1, 1000), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(poll_n(b.cq, &wc, 1, 1000), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(wc.wr_id, 3);
	T_EQ(wc.byte_len, GRH_LEN + len);
	T_EQ(wc.src_qp, a.qp->qp_num);
	CU_ASSERT(wc.wc_flags & IBV_WC_GRH);
	T_EQ(memcmp(b.buf + GRH_LEN, a.buf + 8192, len), 0);

	/* Answer from the completion's GRH. */
	back = ibv_create_ah_from_wc(b.pd, &wc, (struct ibv_grh *)b.buf, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(back);
	sge = (struct ibv_sge){ (uintptr_t)b.buf + GRH_LEN, 32, b.mr->lkey };
	wr.wr_id = 12;
	wr.wr.ud.ah = back;
	wr.wr.ud.remote_qpn = wc.src_qp;
	T_EQ(ibv_post_send(b.qp, &wr, &bad), 0);
	T_EQ(poll_n(b.cq, &wc, 1, 1000), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(poll_n(a.cq, &wc, 1, 1000), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(wc.wr_id, 4);
	T_EQ(wc.byte_len, GRH_LEN + 32);
	T_EQ(memcmp(a.buf + GRH_LEN, a.buf + 8192, 32), 0);
	T_EQ(ibv_destroy_ah(back), 0);
	T_EQ(ibv_destroy_ah(ah), 0);
	side_close(&a);
	side_close(&b);
}

/* UD multicast: a QP attached to ::ffff:239.1.2.3 receives what is sent
 * to that GID (QPN 0xffffff); detached, it does not. */
static void t_ud_multicast(void)
{
	union ibv_gid mgid = { .raw = { [10] = 0xff, [11] = 0xff,
					[12] = 239, [13] = 1, [14] = 2,
					[15] = 3 } };
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct side a, b;
	struct ibv_ah *ah;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	side_open(&a, IBV_QPT_UD, 64, false);
	side_open(&b, IBV_QPT_UD, 64, false);
	T_EQ_FATAL(qp_up(a.qp), 0);
	T_EQ_FATAL(qp_up(b.qp), 0);
	T_EQ(ibv_attach_mcast(b.qp, &mgid, 0), 0);
	T_EQ(post_recv(&b, 1, 0, GRH_LEN + 64), 0);
	aa.grh.dgid = mgid;
	aa.grh.sgid_index = 1;
	ah = ibv_create_ah(a.pd, &aa);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ah);
	sge = (struct ibv_sge){ (uintptr_t)a.buf, 64, a.mr->lkey };
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0xffffff;
	wr.wr.ud.remote_qkey = QKEY;
	T_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	T_EQ(poll_n(a.cq, &wc, 1, 1000), 1);
	T_EQ(poll_n(b.cq, &wc, 1, 1000), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(wc.byte_len, GRH_LEN + 64);
	T_EQ(ibv_detach_mcast(b.qp, &mgid, 0), 0);
	T_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	T_EQ(poll_n(a.cq, &wc, 1, 1000), 1);
	T_EQ(poll_n(b.cq, &wc, 1, 100), 0);
	T_EQ(ibv_destroy_ah(ah), 0);
	side_close(&a);
	side_close(&b);
}

/* $QPS_IBV_EMU_NETDEV: open publishes this port's neighbour entry on the
 * netdev, close removes it. Needs root for a veth pair (this kernel may
 * lack the dummy driver). */
static char g_netdev[IFNAMSIZ];

/* A test that stopped half-way leaves no netdev behind. */
static void netdev_cleanup(void)
{
	char cmd[64];

	if (!g_netdev[0])
		return;
	snprintf(cmd, sizeof(cmd), "ip link del %s 2>/dev/null", g_netdev);
	if (system(cmd) == 0)
		g_netdev[0] = '\0';
}

static bool neigh_listed(const char *dev, const char *ip, const char *mac)
{
	char cmd[128], line[256];
	bool found = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ip -4 neigh show dev %s 2>/dev/null", dev);
	p = popen(cmd, "r");
	if (!p)
		return false;
	while (fgets(line, sizeof(line), p))
		if (strstr(line, ip) && strstr(line, mac) &&
		    strstr(line, "PERMANENT"))
			found = true;
	pclose(p);
	return found;
}

static void t_neighbour(void)
{
	char dev[IFNAMSIZ - 1], cmd[96], ip[INET_ADDRSTRLEN], mac[18];
	struct ibv_gid_entry ge;
	struct ibv_context *ctx;
	union ibv_gid g;
	const uint8_t *id;

	snprintf(dev, sizeof(dev), "qpsibv%d", (int)getpid() % 100000);
	snprintf(cmd, sizeof(cmd),
		 "ip link add %s type veth peer name %sp 2>/dev/null", dev, dev);
	if (geteuid() != 0 || system(cmd) != 0) {
		printf("\n    skipped: needs root and iproute2 for a veth "
		       "pair ");
		return;
	}
	snprintf(g_netdev, sizeof(g_netdev), "%s", dev);
	atexit(netdev_cleanup);
	setenv("QPS_IBV_EMU_NETDEV", dev, 1);
	ctx = open_dev();
	T_EQ(ibv_query_gid(ctx, 1, 1, &g), 0);
	inet_ntop(AF_INET, &g.raw[12], ip, sizeof(ip));
	T_EQ(ibv_query_gid(ctx, 1, 0, &g), 0);
	id = &g.raw[8];
	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x",
		 id[0] ^ 2, id[1], id[2], id[5], id[6], id[7]);
	CU_ASSERT(neigh_listed(dev, ip, mac));
	T_EQ(ibv_query_gid_ex(ctx, 1, 1, &ge, 0), 0);
	T_EQ(ge.ndev_ifindex, if_nametoindex(dev));
	T_EQ(ibv_close_device(ctx), 0);
	CU_ASSERT(!neigh_listed(dev, ip, mac));

	/* A netdev that does not exist fails the open. */
	setenv("QPS_IBV_EMU_NETDEV", "qpsibv-none", 1);
	{
		struct ibv_device **list = ibv_get_device_list(NULL);

		errno = 0;
		CU_ASSERT_PTR_NULL(ibv_open_device(list[0]));
		T_EQ(errno, ENODEV);
		ibv_free_device_list(list);
	}
	unsetenv("QPS_IBV_EMU_NETDEV");
	netdev_cleanup();
	T_EQ(g_netdev[0], '\0');
}

static void t_bad_input(void)
{
	struct side a;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC };
	struct ibv_recv_wr rwr = { .num_sge = 0 };
	struct ibv_recv_wr *rbad;

	side_open(&a, IBV_QPT_RAW_PACKET, 64, false);
	ia.send_cq = a.cq;
	ia.recv_cq = a.cq;
	errno = 0;
	CU_ASSERT_PTR_NULL(ibv_create_qp(a.pd, &ia));	/* RC: not here */
	T_EQ(errno, EOPNOTSUPP);
	errno = 0;
	CU_ASSERT_PTR_NULL(ibv_create_cq(a.ctx, 0, NULL, NULL, 0));
	T_EQ(errno, EINVAL);
	errno = 0;
	CU_ASSERT_PTR_NULL(ibv_create_cq(a.ctx, 16, NULL, NULL, 1));
	T_EQ(errno, EINVAL);
	errno = 0;
	CU_ASSERT_PTR_NULL(ibv_reg_mr_iova(a.pd, a.buf, 64, 4096,
					   IBV_ACCESS_LOCAL_WRITE));
	T_EQ(errno, EOPNOTSUPP);
	T_EQ(qp_up(a.qp), 0);
	T_EQ(ibv_post_recv(a.qp, &rwr, &rbad), EINVAL);
	CU_ASSERT(rbad == &rwr);
	T_EQ(ibv_destroy_cq(a.cq), EBUSY);	/* the QP uses it */
	side_close(&a);
}

/* A test that stopped half-way leaves no wire in /dev/shm. */
static void wire_cleanup(void)
{
	char path[128];

	snprintf(path, sizeof(path), "/dev/shm/qpsock-emu-%s", g_wire);
	unlink(path);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "runs on the emulated library", t_runs_on_shim },
		{ "symbol versions and stubs", t_symbol_versions },
		{ "device, port, GIDs, P_Key", t_device },
		{ "strings, rates, fork", t_strings_rates_fork },
		{ "raw packet send/recv with a rule", t_raw_send_recv },
		{ "raw packet QP states", t_raw_states },
		{ "libmlx4 direct verbs refused", t_mlx4dv_refused },
		{ "completion channel", t_completion_channel },
		{ "extended CQ: completion timestamps", t_cq_ex_timestamps },
		{ "raw multicast rule", t_raw_multicast_rule },
		{ "QP to ERR flushes, RESET recovers", t_qp_err_flush },
		{ "injected QP error: async QP_FATAL", t_injected_qp_error },
		{ "flow creation failures", t_flow_errors },
		{ "CQ overrun: async CQ_ERR", t_cq_overrun },
		{ "UD send/recv, AH from WC", t_ud },
		{ "UD multicast attach/detach", t_ud_multicast },
		{ "neighbour publishing", t_neighbour },
		{ "bad input", t_bad_input },
		CU_TEST_INFO_NULL,
	};
	struct ibv_device **list = ibv_get_device_list(NULL);
	bool shim = list && list[0] &&
		    !strcmp(ibv_get_device_name(list[0]), "qpsemu0");
	int ret;

	if (list)
		ibv_free_device_list(list);
	if (!shim) {
		printf("test_ibverbs_emu: not running on the emulated "
		       "libibverbs (run with LD_LIBRARY_PATH=<build>/tests/"
		       "ibverbs_emu), skipped\n");
		return T_EXIT_SKIP;
	}
	t_wire_name(g_wire, sizeof(g_wire), "ibvemu");
	setenv("QPS_EMU_WIRE", g_wire, 1);
	atexit(wire_cleanup);
	unsetenv("QPS_IBV_EMU_NETDEV");
	unsetenv("QPS_IBV_EMU_FLOW_ERR");
	unsetenv("QPS_IBV_EMU_ADDR");
	ret = t_run("ibverbs_emu", tests);
	return ret;
}
