// SPDX-License-Identifier: MIT
/*
 * UD QPs on the emulated ConnectX-3: RoCE v2 frames on the emu wire.
 *
 * Frames are captured as the send engine puts them on the wire (a test
 * tap) and decoded here by code of the test's own: byte offsets, the
 * IPv4 checksum and the ICRC (a bitwise CRC-32, not the provider's
 * table). The ICRC rule itself is checked against a packet captured on
 * real hardware. Bad frames are injected through a raw-packet QP.
 */
#include "t_emu.h"
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu/emu.h"

#define BUF_SZ 2048u
#define NBUF 16u
#define QKEY 0x11111111u
#define PSN0 0x123456u
#define SBUF_SZ 8192u
#define CAP_MAX 8

static const struct qps_provider_ops *E = &qps_emu_ops;
static char g_wire[64];

struct udq {
	struct qps_cq *scq, *rcq;
	struct qps_qp *qp;
	uint8_t *bufs;
	uint32_t nbufs;
};

struct node {
	struct qps_dev *dev;
	struct qps_dev_info info;
	struct qps_mr *mr;
	uint8_t *sbuf;
};

/* Frames the tap saw. */
static struct {
	uint8_t f[CAP_MAX][QPS_EMU_FRAME_MAX];
	uint32_t len[CAP_MAX];
	int n;
} g_cap;

static void tap(void *arg, const uint8_t *f, uint32_t len)
{
	(void)arg;
	if (g_cap.n < CAP_MAX) {
		memcpy(g_cap.f[g_cap.n], f, len);
		g_cap.len[g_cap.n] = len;
	}
	g_cap.n++;
}

/* --- the test's own RoCE v2 decoder ----------------------------------- */

static uint32_t t_crc32(uint32_t c, const uint8_t *p, size_t n)
{
	int k;

	while (n--) {
		c ^= *p++;
		for (k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return c;
}

/* ICRC of the IPv4 packet at @ip of @len bytes (ICRC included, last 4):
 * mask a copy of the whole packet, CRC it behind 8 bytes of 0xff. */
static uint32_t t_icrc(const uint8_t *ip, size_t len)
{
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff,
					 0xff, 0xff, 0xff, 0xff };
	uint8_t m[QPS_EMU_FRAME_MAX];
	size_t ihl = (size_t)(ip[0] & 0xf) * 4;

	memcpy(m, ip, len - 4);
	m[1] = 0xff;
	m[8] = 0xff;
	m[10] = m[11] = 0xff;
	m[ihl + 6] = m[ihl + 7] = 0xff;
	m[ihl + 8 + 4] = 0xff;
	return ~t_crc32(t_crc32(0xffffffffu, ones, 8), m, len - 4);
}

static uint32_t be16_at(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t be32_at(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint32_t le32_at(const uint8_t *p)
{
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[1] << 8 | p[0];
}

static uint16_t t_ip_sum(const uint8_t *h, size_t n)
{
	uint32_t s = 0;
	size_t i;

	for (i = 0; i < n; i += 2)
		s += be16_at(h + i);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Rewrite the ICRC of a captured frame after editing it. */
static void t_fix_icrc(uint8_t *f, uint32_t len)
{
	uint32_t c = t_icrc(f + 14, len - 14);

	f[len - 4] = (uint8_t)c;
	f[len - 3] = (uint8_t)(c >> 8);
	f[len - 2] = (uint8_t)(c >> 16);
	f[len - 1] = (uint8_t)(c >> 24);
}

/* --- helpers ---------------------------------------------------------- */

static void node_open(struct node *n, const char *ip)
{
	struct qps_dev_attr attr = { .dev = g_wire };
	void *b = NULL;

	memset(n, 0, sizeof(*n));
	if (ip) {
		attr.addr_set = true;
		attr.addr.s_addr = t_ip4(ip);
	}
	CU_ASSERT_EQUAL_FATAL(E->open(&attr, &n->dev), 0);
	CU_ASSERT_EQUAL_FATAL(E->query(n->dev, &n->info), 0);
	CU_ASSERT_FATAL(posix_memalign(&b, 64, SBUF_SZ) == 0);
	n->sbuf = b;
	CU_ASSERT_EQUAL_FATAL(E->reg_mr(n->dev, n->sbuf, SBUF_SZ, &n->mr), 0);
}

static void node_close(struct node *n)
{
	if (!n->dev)
		return;
	qps_emu_test_set_tap(n->dev, NULL, NULL);
	CU_ASSERT_EQUAL(E->dereg_mr(n->mr), 0);
	CU_ASSERT_EQUAL(E->close(n->dev), 0);
	free(n->sbuf);
	memset(n, 0, sizeof(*n));
}

static void post_recv_len(struct udq *q, uint32_t idx, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(q->bufs + (size_t)idx * BUF_SZ),
		.length = len,
	};
	struct ibv_recv_wr wr = { .wr_id = idx, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	T_EQ_FATAL(E->post_recv(q->qp, &wr, &bad), 0);
}

static void udq_create(struct node *n, struct udq *q, enum ibv_qp_type type,
		       uint32_t rq_wr)
{
	struct qps_qp_init_attr qa = {
		.qp_type = type,
		.cap = { .max_send_wr = 32, .max_recv_wr = rq_wr,
			 .max_send_sge = 2, .max_recv_sge = 1,
			 .max_inline_data = 128 },
	};
	void *b;

	memset(q, 0, sizeof(*q));
	T_EQ_FATAL(E->create_cq(n->dev, 64, &q->scq), 0);
	T_EQ_FATAL(E->create_cq(n->dev, 64, &q->rcq), 0);
	qa.send_cq = q->scq;
	qa.recv_cq = q->rcq;
	T_EQ_FATAL(E->create_qp(n->dev, &qa, &q->qp), 0);
	q->nbufs = rq_wr;
	if (rq_wr) {
		T_EQ_FATAL(E->alloc_buf(n->dev, (size_t)rq_wr * BUF_SZ, &b),
			   0);
		q->bufs = b;
	}
}

static void udq_destroy(struct node *n, struct udq *q)
{
	if (!q->qp)
		return;
	T_EQ(E->destroy_qp(q->qp), 0);
	T_EQ(E->destroy_cq(q->scq), 0);
	T_EQ(E->destroy_cq(q->rcq), 0);
	if (q->bufs)
		T_EQ(E->free_buf(n->dev, q->bufs, (size_t)q->nbufs * BUF_SZ),
		     0);
	memset(q, 0, sizeof(*q));
}

static int to_state(struct udq *q, enum ibv_qp_state s, int extra,
		    const struct ibv_qp_attr *base)
{
	struct ibv_qp_attr a;

	if (base)
		a = *base;
	else
		memset(&a, 0, sizeof(a));
	a.qp_state = s;
	return E->modify_qp(q->qp, &a, IBV_QP_STATE | extra);
}

/* RESET -> INIT -> RTR -> RTS, receive buffers posted in INIT. */
static void udq_up(struct udq *q, uint32_t qkey, uint32_t psn)
{
	struct ibv_qp_attr a = { .pkey_index = 0, .port_num = 1,
				 .qkey = qkey, .sq_psn = psn };
	uint32_t i;

	T_EQ_FATAL(to_state(q, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_QKEY, &a), 0);
	for (i = 0; i < q->nbufs; i++)
		post_recv_len(q, i, BUF_SZ);
	T_EQ_FATAL(to_state(q, IBV_QPS_RTR, 0, NULL), 0);
	T_EQ_FATAL(to_state(q, IBV_QPS_RTS, IBV_QP_SQ_PSN, &a), 0);
}

static int ah_make(struct node *n, uint32_t dip, uint8_t tclass,
		   uint8_t hop, uint32_t flow, struct qps_ah **ah)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1 };

	a.grh.sgid_index = QPS_GID_ROCE_V2_IPV4;
	a.grh.dgid.raw[10] = 0xff;
	a.grh.dgid.raw[11] = 0xff;
	memcpy(a.grh.dgid.raw + 12, &dip, 4);
	a.grh.traffic_class = tclass;
	a.grh.hop_limit = hop;
	a.grh.flow_label = flow;
	return E->create_ah(n->dev, &a, ah);
}

/* One UD send of @len bytes of n->sbuf (pattern @seed); inline below 128
 * bytes, else through the MR. */
static int ud_send(struct node *n, struct udq *q, struct qps_ah *ah,
		   uint32_t dqpn, uint32_t qkey, uint32_t len, uint8_t seed,
		   bool imm, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)n->sbuf, .length = len,
			       .lkey = n->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1 }, *bad = NULL;
	uint32_t i;

	for (i = 0; i < len && i < SBUF_SZ; i++)
		n->sbuf[i] = (uint8_t)(seed + i * 3);
	wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htobe32(0xdeadbe00u | seed);
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED |
			(len <= 128 ? IBV_SEND_INLINE : 0);
	wr.wr.ud.ah = ah->ibv;
	wr.wr.ud.remote_qpn = dqpn;
	wr.wr.ud.remote_qkey = qkey;
	return E->post_send(q->qp, &wr, &bad);
}

/* Put @f on the wire as is through raw QP @raw of @n. */
static void raw_send(struct node *n, struct udq *raw, const uint8_t *f,
		     uint32_t len)
{
	struct ibv_wc wc;

	memcpy(n->sbuf, f, len);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)n->sbuf,
				       .length = len, .lkey = n->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 77, .sg_list = &sge,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		T_EQ_FATAL(E->post_send(raw->qp, &wr, &bad), 0);
	}
	T_EQ(t_emu_poll_wait(raw->scq, &wc, 1, 1000), 1);
	T_EQ(wc.status, IBV_WC_SUCCESS);
}

/* --- tests ------------------------------------------------------------ */

/*
 * The ICRC rule against hardware: a RoCE v2 CNP captured on a ConnectX-4
 * Lx (published with scapy's RoCE tests). TOS 0xc2, TTL 64 and BECN set:
 * all masked, so only the right masking gives the captured ICRC.
 */
static const uint8_t cx4_cnp[] = {
	0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32,
	0x08, 0x00, 0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11,
	0x91, 0x61, 0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01, 0x00, 0x00,
	0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, 0x81, 0x00, 0xff, 0xff, 0x40, 0x00,
	0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0xfd,
	0x00, 0x2a,
};

static void test_icrc_vector(void)
{
	uint8_t f[sizeof(cx4_cnp)];
	struct qps_emu_roce r;
	uint32_t len = sizeof(cx4_cnp), l3 = len - 14;
	uint16_t sum;

	memcpy(f, cx4_cnp, len);
	T_EQ(t_ip_sum(f + 14, 20), 0);
	T_EQ(t_icrc(f + 14, l3), le32_at(f + len - 4));
	T_EQ(qps_emu_roce_icrc(f + 14, l3 - 4), le32_at(f + len - 4));
	/* The parser accepts its ICRC and then refuses the opcode (a CNP
	 * is not a UD SEND): 10.0.18.1 is "local" here. */
	T_EQ(qps_emu_roce_parse(f, len, t_ip4("10.0.18.1"), &r),
	     QPS_EMU_ROCE_BTH);
	/* Masked fields change nothing; any other bit does. */
	f[15] = 0x00;
	f[22] = 0x01;
	f[46] = 0x80;
	T_EQ(t_icrc(f + 14, l3), le32_at(f + len - 4));
	T_EQ(qps_emu_roce_icrc(f + 14, l3 - 4), le32_at(f + len - 4));
	/* With a valid IPv4 checksum again, the parser still finds the
	 * ICRC right; one payload bit more and it is wrong. */
	f[24] = f[25] = 0;
	sum = t_ip_sum(f + 14, 20);
	f[24] = (uint8_t)(sum >> 8);
	f[25] = (uint8_t)sum;
	T_EQ(qps_emu_roce_parse(f, len, t_ip4("10.0.18.1"), &r),
	     QPS_EMU_ROCE_BTH);
	f[60] ^= 0x01;
	T_EQ(qps_emu_roce_parse(f, len, t_ip4("10.0.18.1"), &r),
	     QPS_EMU_ROCE_ICRC);
	/* Another destination: not for this port, left to steering. */
	T_EQ(qps_emu_roce_parse(cx4_cnp, len, t_ip4("10.0.18.2"), &r),
	     QPS_EMU_ROCE_NOT);
	/* The IB MTU of a port: 1500 -> 1024, 9000 -> 4096. */
	T_EQ(qps_emu_ib_mtu(1500), 1024);
	T_EQ(qps_emu_ib_mtu(1400), 1024);
	T_EQ(qps_emu_ib_mtu(1100), 512);
	T_EQ(qps_emu_ib_mtu(9000), 4096);
	T_EQ(qps_emu_ib_mtu(300), 0);
}

static void test_gid_caps(void)
{
	struct node a;
	union ibv_gid g;
	const uint8_t *m;

	node_open(&a, "198.18.0.21");
	T_EQ(a.info.caps & QPS_DEV_CAP_UD, QPS_DEV_CAP_UD);
	m = a.info.mac;
	T_EQ(E->query_gid(a.dev, QPS_GID_ROCE_V1_LL, &g), 0);
	T_EQ(g.raw[0], 0xfe);
	T_EQ(g.raw[1], 0x80);
	T_EQ(g.raw[8], m[0] ^ 2);
	T_EQ(g.raw[9], m[1]);
	T_EQ(g.raw[10], m[2]);
	T_EQ(g.raw[11], 0xff);
	T_EQ(g.raw[12], 0xfe);
	T_EQ(memcmp(g.raw + 13, m + 3, 3), 0);
	T_EQ(E->query_gid(a.dev, QPS_GID_ROCE_V2_IPV4, &g), 0);
	T_EQ(be32_at(g.raw), 0);
	T_EQ(be32_at(g.raw + 4), 0);
	T_EQ(be32_at(g.raw + 8), 0xffff);
	T_EQ(memcmp(g.raw + 12, &a.info.addr.s_addr, 4), 0);
	T_EQ(E->query_gid(a.dev, 2, &g), -EINVAL);
	T_EQ(E->query_gid(a.dev, -1, &g), -EINVAL);
	T_EQ(E->query_gid(a.dev, 0, NULL), -EINVAL);
	node_close(&a);
}

/* Everything about one captured UD frame, decoded here. */
static void check_frame(const uint8_t *f, uint32_t len, const struct node *src,
			const struct node *dst, const struct udq *sq,
			uint32_t dqpn, uint32_t qkey, uint32_t psn,
			uint32_t plen, uint8_t seed, bool imm)
{
	const uint8_t *ip = f + 14, *udp = ip + 20, *bth = udp + 8;
	const uint8_t *deth = bth + 12, *pl = deth + 8 + (imm ? 4 : 0);
	uint32_t pad = (4 - plen % 4) % 4, i;

	T_EQ_FATAL(len, 14 + 20 + 8 + 12 + 8 + (imm ? 4 : 0) + plen + pad + 4);
	T_EQ(memcmp(f, dst->info.mac, 6), 0);
	T_EQ(memcmp(f + 6, src->info.mac, 6), 0);
	T_EQ(be16_at(f + 12), 0x0800);
	/* IPv4: version 4, IHL 5, DSCP/ECN from traffic_class, DF, TTL from
	 * hop_limit, UDP, valid checksum, our addresses. */
	T_EQ(ip[0], 0x45);
	T_EQ(ip[1], 0x68);
	T_EQ(be16_at(ip + 2), len - 14);
	T_EQ(be16_at(ip + 6), 0x4000);
	T_EQ(ip[8], 17);
	T_EQ(ip[9], 17);
	T_EQ(t_ip_sum(ip, 20), 0);
	T_EQ(memcmp(ip + 12, &src->info.addr.s_addr, 4), 0);
	T_EQ(memcmp(ip + 16, &dst->info.addr.s_addr, 4), 0);
	/* UDP: RoCE v2 port, source port in the entropy range, length,
	 * checksum 0. */
	T_GE(be16_at(udp), 0xc000);
	T_EQ(be16_at(udp + 2), 4791);
	T_EQ(be16_at(udp + 4), len - 14 - 20);
	T_EQ(be16_at(udp + 6), 0);
	/* BTH */
	T_EQ(bth[0], imm ? 0x65 : 0x64);
	T_EQ(bth[1], 0x80 | pad << 4);	/* SE, M 0, pad, TVer 0 */
	T_EQ(be16_at(bth + 2), 0xffff);
	T_EQ(bth[4], 0);
	T_EQ(be32_at(bth + 4) & 0xffffff, dqpn);
	T_EQ(bth[8], 0);
	T_EQ(be32_at(bth + 8) & 0xffffff, psn);
	/* DETH */
	T_EQ(be32_at(deth), qkey);
	T_EQ(deth[4], 0);
	T_EQ(be32_at(deth + 4), sq->qp->qp_num);
	if (imm)
		T_EQ(be32_at(deth + 8), 0xdeadbe00u | seed);
	for (i = 0; i < plen; i++)
		if (pl[i] != (uint8_t)(seed + i * 3))
			break;
	T_EQ(i, plen);
	for (i = 0; i < pad; i++)
		T_EQ(pl[plen + i], 0);
	T_EQ(t_icrc(ip, len - 14), le32_at(f + len - 4));
}

static void test_unicast(void)
{
	struct node a, b;
	struct udq qa, qb;
	struct qps_ah *ah, *ah_fl;
	struct ibv_wc wc[4];
	const uint8_t *buf;
	uint32_t i;

	node_open(&a, NULL);
	node_open(&b, NULL);
	udq_create(&a, &qa, IBV_QPT_UD, 4);
	udq_create(&b, &qb, IBV_QPT_UD, 8);
	udq_up(&qa, QKEY, PSN0);
	udq_up(&qb, QKEY, 7);
	T_EQ_FATAL(ah_make(&a, b.info.addr.s_addr, 0x68, 17, 0, &ah), 0);
	g_cap.n = 0;
	qps_emu_test_set_tap(a.dev, tap, NULL);

	/* 37 bytes with immediate data (3 bytes of pad), inline. */
	T_EQ_FATAL(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 37, 5, true, 1),
		   0);
	T_EQ_FATAL(g_cap.n, 1);
	check_frame(g_cap.f[0], g_cap.len[0], &a, &b, &qa, qb.qp->qp_num,
		    QKEY, PSN0, 37, 5, true);
	T_EQ_FATAL(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].opcode, IBV_WC_RECV);
	T_EQ(wc[0].byte_len, 40 + 37);
	T_EQ(wc[0].wc_flags, IBV_WC_GRH | IBV_WC_WITH_IMM);
	T_EQ(wc[0].imm_data, htobe32(0xdeadbe05u));
	T_EQ(wc[0].src_qp, qa.qp->qp_num);
	T_EQ(wc[0].qp_num, qb.qp->qp_num);
	T_EQ(wc[0].pkey_index, 0);
	T_EQ(wc[0].sl, 0);
	T_EQ(wc[0].slid, 0);
	T_EQ_FATAL(wc[0].wr_id, 0);
	/* GRH: 20 zero bytes, then the IPv4 header as it was on the wire. */
	buf = qb.bufs;
	for (i = 0; i < 20; i++)
		T_EQ(buf[i], 0);
	T_EQ(memcmp(buf + 20, g_cap.f[0] + 14, 20), 0);
	for (i = 0; i < 37; i++)
		if (buf[40 + i] != (uint8_t)(5 + i * 3))
			break;
	T_EQ(i, 37);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].opcode, IBV_WC_SEND);
	T_EQ(wc[0].wr_id, 1);

	/* 600 bytes through the MR, no immediate, the QP's own Q_Key (high
	 * bit), next PSN; the same QP pair keeps its UDP source port. */
	T_EQ_FATAL(ud_send(&a, &qa, ah, qb.qp->qp_num, 0x80000000u, 600, 9,
			   false, 2), 0);
	T_EQ_FATAL(g_cap.n, 2);
	check_frame(g_cap.f[1], g_cap.len[1], &a, &b, &qa, qb.qp->qp_num,
		    QKEY, PSN0 + 1, 600, 9, false);
	T_EQ(memcmp(g_cap.f[0] + 34, g_cap.f[1] + 34, 2), 0);
	T_EQ_FATAL(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].byte_len, 640);
	T_EQ(wc[0].wc_flags, IBV_WC_GRH);
	T_EQ(wc[0].wr_id, 1);
	T_EQ(memcmp(qb.bufs + BUF_SZ + 20, g_cap.f[1] + 14, 20), 0);
	T_EQ(memcmp(qb.bufs + BUF_SZ + 40, a.sbuf, 600), 0);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 1, 1000), 1);

	/* A flow label sets the UDP source port: 0xc000 | the label's low
	 * 14 bits xor its top 6. */
	T_EQ_FATAL(ah_make(&a, b.info.addr.s_addr, 0x68, 17, 0x12345,
			   &ah_fl), 0);
	T_EQ_FATAL(ud_send(&a, &qa, ah_fl, qb.qp->qp_num, QKEY, 8, 1, false,
			   3), 0);
	T_EQ_FATAL(g_cap.n, 3);
	T_EQ(be16_at(g_cap.f[2] + 34), 0xc000 | (0x2345 ^ 0x4));
	T_EQ(be32_at(g_cap.f[2] + 42 + 8) & 0xffffff, PSN0 + 2);
	T_EQ(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 1, 1000), 1);
	T_EQ(t_emu_ctrs(b.dev).rx_roce, 3);
	T_EQ(t_emu_ctrs(b.dev).dev.rx_drops, 0);

	T_EQ(E->destroy_ah(ah_fl), 0);
	T_EQ(E->destroy_ah(ah), 0);
	udq_destroy(&a, &qa);
	udq_destroy(&b, &qb);
	node_close(&a);
	node_close(&b);
}

/* Drops at the receiver, each counted under its reason. */
static void test_rx_drops(void)
{
	struct node a, b;
	struct udq qa, qb, raw;
	struct qps_ah *ah;
	struct ibv_wc wc[4];
	struct qps_emu_counters c0, c;
	uint8_t f[256];
	uint32_t len;

	node_open(&a, NULL);
	node_open(&b, NULL);
	udq_create(&a, &qa, IBV_QPT_UD, 0);
	udq_create(&a, &raw, IBV_QPT_RAW_PACKET, 0);
	udq_create(&b, &qb, IBV_QPT_UD, 8);
	udq_up(&qa, QKEY, PSN0);
	udq_up(&qb, QKEY, 0);
	T_EQ_FATAL(ah_make(&a, b.info.addr.s_addr, 0x68, 17, 0, &ah), 0);
	g_cap.n = 0;
	qps_emu_test_set_tap(a.dev, tap, NULL);
	c0 = t_emu_ctrs(b.dev);

	/* Q_Key mismatch, unknown QPN, the group QPN to a unicast address. */
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY + 1, 10, 0, false, 1),
	     0);
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num ^ 0x20, QKEY, 10, 0, false,
		     2), 0);
	T_EQ(ud_send(&a, &qa, ah, 0xffffff, QKEY, 10, 0, false, 3), 0);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 3, 1000), 3);
	c = t_emu_ctrs(b.dev);
	T_EQ(c.rx_qkey_bad - c0.rx_qkey_bad, 1);
	T_EQ(c.rx_qpn_bad - c0.rx_qpn_bad, 2);
	T_EQ(c.dev.rx_drops - c0.dev.rx_drops, 3);
	T_EQ(t_emu_poll_wait(qb.rcq, wc, 1, 0), 0);

	/* Frames built from a good one, put on the wire by a raw QP. */
	T_EQ_FATAL(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 40, 3, false, 4),
		   0);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 1, 1000), 1);
	T_EQ_FATAL(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ_FATAL(g_cap.n, 4);
	len = g_cap.len[3];
	T_EQ_FATAL(len <= sizeof(f), 1);
	c0 = t_emu_ctrs(b.dev);
	memcpy(f, g_cap.f[3], len);
	raw_send(&a, &raw, f, len);		/* the good one, again */
	T_EQ_FATAL(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].src_qp, qa.qp->qp_num);
	f[70] ^= 0x40;				/* payload bit: ICRC */
	raw_send(&a, &raw, f, len);
	memcpy(f, g_cap.f[3], len);
	f[42] = 0x04;				/* RC SEND Only */
	t_fix_icrc(f, len);
	raw_send(&a, &raw, f, len);
	memcpy(f, g_cap.f[3], len);
	f[42 + 1] |= 0x01;			/* transport version 1 */
	t_fix_icrc(f, len);
	raw_send(&a, &raw, f, len);
	memcpy(f, g_cap.f[3], len);
	f[24] ^= 0xff;				/* IPv4 checksum */
	raw_send(&a, &raw, f, len);
	memcpy(f, g_cap.f[3], len);
	raw_send(&a, &raw, f, len - 10);	/* truncated */
	c = t_emu_ctrs(b.dev);
	T_EQ(c.rx_icrc_bad - c0.rx_icrc_bad, 1);
	T_EQ(c.rx_bth_bad - c0.rx_bth_bad, 2);
	T_EQ(c.rx_roce_bad - c0.rx_roce_bad, 2);
	T_EQ(c.rx_roce - c0.rx_roce, 6);
	T_EQ(c.dev.rx_drops - c0.dev.rx_drops, 5);
	/* None of them went to steering (there is no rule at all). */
	T_EQ(c.dev.rx_no_rule, c0.dev.rx_no_rule);
	T_EQ(t_emu_poll_wait(qb.rcq, wc, 1, 0), 0);

	T_EQ(E->destroy_ah(ah), 0);
	udq_destroy(&a, &qa);
	udq_destroy(&a, &raw);
	udq_destroy(&b, &qb);
	node_close(&a);
	node_close(&b);
}

static union ibv_gid mgid(const char *group)
{
	union ibv_gid g;
	uint32_t a = t_ip4(group);

	memset(&g, 0, sizeof(g));
	g.raw[10] = 0xff;
	g.raw[11] = 0xff;
	memcpy(g.raw + 12, &a, 4);
	return g;
}

static void test_multicast(void)
{
	struct node a, b, c;
	struct udq qa, q1, q2, q3, q4, raw;
	struct qps_ah *g1, *g2, *g3;
	union ibv_gid m1 = mgid("239.1.1.1"), m2 = mgid("239.1.1.2");
	union ibv_gid uni = mgid("198.18.0.9"), v1ll;
	struct in_addr grp3 = { t_ip4("239.1.1.3") };
	struct in_addr grp1 = { t_ip4("239.1.1.1") };
	struct in_addr any = { 0 };
	struct qps_emu_shm_port *sp;
	struct ibv_wc wc[4];
	struct qps_emu_counters c0, cn;
	unsigned int i;
	int found;

	node_open(&a, NULL);
	node_open(&b, NULL);
	node_open(&c, NULL);
	udq_create(&a, &qa, IBV_QPT_UD, 0);
	udq_create(&b, &q1, IBV_QPT_UD, 4);
	udq_create(&b, &q2, IBV_QPT_UD, 4);
	udq_create(&b, &q3, IBV_QPT_UD, 4);
	udq_create(&b, &raw, IBV_QPT_RAW_PACKET, 4);
	udq_create(&c, &q4, IBV_QPT_UD, 4);
	udq_up(&qa, QKEY, 0);
	udq_up(&q1, QKEY, 0);
	udq_up(&q2, QKEY, 0);
	udq_up(&q3, QKEY, 0);
	udq_up(&q4, QKEY, 0);

	T_EQ(E->attach_mcast(q1.qp, &m1, 0), 0);
	T_EQ(E->attach_mcast(q2.qp, &m1, 0), 0);
	T_EQ(E->attach_mcast(q2.qp, &m1, 0), 0);	/* idempotent */
	T_EQ(E->attach_mcast(q4.qp, &m2, 0), 0);
	/* Bad attachments. */
	T_EQ(E->attach_mcast(q1.qp, &uni, 0), -EINVAL);
	T_EQ(E->query_gid(b.dev, 0, &v1ll), 0);
	T_EQ(E->attach_mcast(q1.qp, &v1ll, 0), -EINVAL);
	T_EQ(E->attach_mcast(raw.qp, &m1, 0), -EINVAL);
	T_EQ(E->attach_mcast(qa.qp, &m1, 0), -EINVAL);	/* no RQ */
	T_EQ(E->detach_mcast(q3.qp, &m1, 0), -EINVAL);	/* not attached */
	T_EQ(E->detach_mcast(q1.qp, &m2, 0), -EINVAL);

	/* One L2 filter reference per attached QP on the port. */
	sp = qps_emu_dev(b.dev)->sp;
	found = 0;
	for (i = 0; i < QPS_EMU_MAX_MC; i++)
		if (sp->mc[i].refcnt && sp->mc[i].mac[5] == 1 &&
		    sp->mc[i].mac[0] == 1) {
			T_EQ(sp->mc[i].refcnt, 2);
			found++;
		}
	T_EQ(found, 1);

	T_EQ_FATAL(ah_make(&a, t_ip4("239.1.1.1"), 0x68, 1, 0, &g1), 0);
	T_EQ_FATAL(ah_make(&a, t_ip4("239.1.1.2"), 0x68, 1, 0, &g2), 0);
	T_EQ_FATAL(ah_make(&a, t_ip4("239.1.1.3"), 0x68, 1, 0, &g3), 0);
	g_cap.n = 0;
	qps_emu_test_set_tap(a.dev, tap, NULL);
	T_EQ(ud_send(&a, &qa, g1, 0xffffff, QKEY, 20, 1, true, 1), 0);
	T_EQ_FATAL(g_cap.n, 1);
	T_EQ(g_cap.f[0][0], 0x01);
	T_EQ(g_cap.f[0][1], 0x00);
	T_EQ(g_cap.f[0][2], 0x5e);
	T_EQ(g_cap.f[0][5], 0x01);
	T_EQ(t_icrc(g_cap.f[0] + 14, g_cap.len[0] - 14),
	     le32_at(g_cap.f[0] + g_cap.len[0] - 4));
	T_EQ_FATAL(t_emu_poll_wait(q1.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].byte_len, 60);
	T_EQ(wc[0].src_qp, qa.qp->qp_num);
	T_EQ(wc[0].wc_flags, IBV_WC_GRH | IBV_WC_WITH_IMM);
	T_EQ(memcmp(q1.bufs + 36, &m1.raw[12], 4), 0);	/* GRH: dst IP */
	T_EQ_FATAL(t_emu_poll_wait(q2.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(memcmp(q2.bufs + 40, q1.bufs + 40, 20), 0);
	T_EQ(t_emu_poll_wait(q3.rcq, wc, 1, 0), 0);
	T_EQ(t_emu_poll_wait(q4.rcq, wc, 1, 0), 0);
	T_EQ(t_emu_poll_wait(raw.rcq, wc, 1, 0), 0);

	/* The other group: C's QP only. */
	T_EQ(ud_send(&a, &qa, g2, 0xffffff, QKEY, 20, 2, false, 2), 0);
	T_EQ(t_emu_poll_wait(q4.rcq, wc, 1, 1000), 1);
	T_EQ(t_emu_poll_wait(q1.rcq, wc, 1, 0), 0);
	T_EQ(t_emu_poll_wait(q2.rcq, wc, 1, 0), 0);

	/* A group that B's port joined at L2 but no QP attached; a group
	 * datagram to a QPN other than 0xffffff. */
	c0 = t_emu_ctrs(b.dev);
	T_EQ(E->mcast_attach(b.dev, grp3, any), 0);
	T_EQ(ud_send(&a, &qa, g3, 0xffffff, QKEY, 20, 3, false, 3), 0);
	T_EQ(ud_send(&a, &qa, g1, q1.qp->qp_num, QKEY, 20, 3, false, 4), 0);
	cn = t_emu_ctrs(b.dev);
	T_EQ(cn.rx_mcg_none - c0.rx_mcg_none, 1);
	T_EQ(cn.rx_qpn_bad - c0.rx_qpn_bad, 1);
	T_EQ(E->mcast_detach(b.dev, grp3, any), 0);

	/* Detach q2: q1 alone. The device-level join of the same group
	 * shares the L2 entry's reference count. */
	T_EQ(E->mcast_attach(b.dev, grp1, any), 0);
	T_EQ(E->detach_mcast(q2.qp, &m1, 0), 0);
	T_EQ(E->detach_mcast(q2.qp, &m1, 0), -EINVAL);
	T_EQ(E->detach_mcast(q1.qp, &m1, 0), 0);
	T_EQ(E->attach_mcast(q1.qp, &m1, 0), 0);
	T_EQ(ud_send(&a, &qa, g1, 0xffffff, QKEY, 20, 4, false, 5), 0);
	T_EQ(t_emu_poll_wait(q1.rcq, wc, 1, 1000), 1);
	T_EQ(t_emu_poll_wait(q2.rcq, wc, 1, 0), 0);
	found = 0;
	for (i = 0; i < QPS_EMU_MAX_MC; i++)
		if (sp->mc[i].refcnt && sp->mc[i].mac[5] == 1 &&
		    sp->mc[i].mac[0] == 1) {
			T_EQ(sp->mc[i].refcnt, 2);	/* q1 + device */
			found++;
		}
	T_EQ(found, 1);
	T_EQ(E->mcast_detach(b.dev, grp1, any), 0);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 4, 1000), 4);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 1, 100), 1);

	T_EQ(E->destroy_ah(g1), 0);
	T_EQ(E->destroy_ah(g2), 0);
	T_EQ(E->destroy_ah(g3), 0);
	udq_destroy(&a, &qa);
	udq_destroy(&b, &q1);	/* still attached: destroy detaches */
	udq_destroy(&b, &q2);
	udq_destroy(&b, &q3);
	udq_destroy(&b, &raw);
	udq_destroy(&c, &q4);
	for (i = 0; i < QPS_EMU_MAX_MC; i++)
		T_EQ(sp->mc[i].refcnt, 0);
	for (i = 0; i < QPS_EMU_MAX_MCG; i++)
		T_EQ(sp->mcg[i].rqs, 0);
	node_close(&a);
	node_close(&b);
	node_close(&c);
}

static void test_state_machine(void)
{
	struct node a, b;
	struct udq qa, qb;
	struct qps_ah *ah;
	struct ibv_qp_attr at = { .pkey_index = 0, .port_num = 1,
				  .qkey = QKEY, .sq_psn = 1 };
	const int init_mask = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	struct ibv_sge sge;
	struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct ibv_wc wc[2];
	struct qps_emu_counters c0;

	node_open(&a, NULL);
	node_open(&b, NULL);
	udq_create(&a, &qa, IBV_QPT_UD, 4);
	udq_create(&b, &qb, IBV_QPT_UD, 4);
	udq_up(&qb, QKEY, 0);
	T_EQ_FATAL(ah_make(&a, b.info.addr.s_addr, 0, 64, 0, &ah), 0);
	sge.addr = (uintptr_t)qa.bufs;
	sge.length = BUF_SZ;

	/* RESET: no sends, no receives. */
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 8, 0, false, 1),
	     -EINVAL);
	T_EQ(E->post_recv(qa.qp, &rw, &rbad), -EINVAL);
	/* RESET -> INIT needs pkey_index, port and qkey, nothing else. */
	T_EQ(to_state(&qa, IBV_QPS_INIT, IBV_QP_PORT | IBV_QP_QKEY, &at),
	     -EINVAL);
	T_EQ(to_state(&qa, IBV_QPS_INIT, init_mask | IBV_QP_SQ_PSN, &at),
	     -EINVAL);
	T_EQ(to_state(&qa, IBV_QPS_INIT, init_mask | IBV_QP_AV, &at),
	     -EINVAL);
	at.port_num = 2;
	T_EQ(to_state(&qa, IBV_QPS_INIT, init_mask, &at), -EINVAL);
	at.port_num = 1;
	at.pkey_index = 1;
	T_EQ(to_state(&qa, IBV_QPS_INIT, init_mask, &at), -EINVAL);
	at.pkey_index = 0;
	T_EQ(to_state(&qa, IBV_QPS_RTR, 0, NULL), -EINVAL);
	T_EQ(to_state(&qa, IBV_QPS_RTS, IBV_QP_SQ_PSN, &at), -EINVAL);
	T_EQ(to_state(&qa, IBV_QPS_INIT, init_mask, &at), 0);
	/* INIT: receives yes, sends no. */
	T_EQ(E->post_recv(qa.qp, &rw, &rbad), 0);
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 8, 0, false, 1),
	     -EINVAL);
	T_EQ(to_state(&qa, IBV_QPS_INIT, IBV_QP_QKEY, &at), 0);
	T_EQ(to_state(&qa, IBV_QPS_RTR, IBV_QP_SQ_PSN, &at), -EINVAL);
	T_EQ(to_state(&qa, IBV_QPS_RTS, IBV_QP_SQ_PSN, &at), -EINVAL);
	T_EQ(to_state(&qa, IBV_QPS_RTR, 0, NULL), 0);
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 8, 0, false, 1),
	     -EINVAL);
	/* RTR -> RTS needs sq_psn; SQD is not modelled; cur_qp_state must
	 * be the current state. */
	T_EQ(to_state(&qa, IBV_QPS_RTS, 0, NULL), -EINVAL);
	at.cur_qp_state = IBV_QPS_INIT;
	T_EQ(to_state(&qa, IBV_QPS_RTS, IBV_QP_SQ_PSN | IBV_QP_CUR_STATE,
		      &at), -EINVAL);
	at.cur_qp_state = IBV_QPS_RTR;
	T_EQ(to_state(&qa, IBV_QPS_RTS, IBV_QP_SQ_PSN | IBV_QP_CUR_STATE,
		      &at), 0);
	T_EQ(to_state(&qa, IBV_QPS_SQD, 0, NULL), -EOPNOTSUPP);
	T_EQ(to_state(&qa, IBV_QPS_INIT, 0, NULL), -EINVAL);
	T_EQ(to_state(&qa, IBV_QPS_RTS, IBV_QP_SQ_PSN, &at), -EINVAL);
	T_EQ(to_state(&qa, (enum ibv_qp_state)42, 0, NULL), -EINVAL);
	at.qkey = QKEY + 5;
	T_EQ(to_state(&qa, IBV_QPS_RTS, IBV_QP_QKEY, &at), 0);
	/* The new Q_Key is what "use the QP's Q_Key" sends. */
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, 0x80000000u, 8, 0, false,
		     1), 0);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 1, 1000), 1);
	T_EQ(t_emu_ctrs(b.dev).rx_qkey_bad, 1);
	T_EQ(E->modify_qp(qa.qp, NULL, IBV_QP_STATE), -EINVAL);

	/* A receiver not yet in RTR drops, counted. */
	T_EQ(to_state(&qb, IBV_QPS_RESET, 0, NULL), 0);
	at.qkey = QKEY;
	T_EQ(to_state(&qb, IBV_QPS_INIT, init_mask, &at), 0);
	post_recv_len(&qb, 0, BUF_SZ);
	c0 = t_emu_ctrs(b.dev);
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 8, 0, false, 2), 0);
	T_EQ(t_emu_ctrs(b.dev).rx_qp_state - c0.rx_qp_state, 1);
	T_EQ(to_state(&qb, IBV_QPS_RTR, 0, NULL), 0);
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 8, 0, false, 3), 0);
	T_EQ(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 2, 1000), 2);

	T_EQ(E->destroy_ah(ah), 0);
	udq_destroy(&a, &qa);
	udq_destroy(&b, &qb);
	node_close(&a);
	node_close(&b);
}

static void test_err_flush(void)
{
	struct node a, b;
	struct udq qa, qb;
	struct qps_ah *ah;
	struct ibv_wc wc[8];
	int i, n;

	node_open(&a, NULL);
	node_open(&b, NULL);
	udq_create(&a, &qa, IBV_QPT_UD, 0);
	udq_create(&b, &qb, IBV_QPT_UD, 4);
	udq_up(&qa, QKEY, 0);
	udq_up(&qb, QKEY, 0);
	T_EQ_FATAL(ah_make(&a, b.info.addr.s_addr, 0, 64, 0, &ah), 0);
	g_cap.n = 0;
	qps_emu_test_set_tap(a.dev, tap, NULL);

	/* Three sends latched (stepping), then ERR: flushed in order,
	 * nothing on the wire. */
	qps_emu_set_stepping(a.dev, true);
	for (i = 0; i < 3; i++)
		T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 8, 0, false,
			     10 + (uint64_t)i), 0);
	T_EQ(to_state(&qa, IBV_QPS_ERR, 0, NULL), 0);
	qps_emu_set_stepping(a.dev, false);
	n = t_emu_poll_wait(qa.scq, wc, 3, 1000);
	T_EQ_FATAL(n, 3);
	for (i = 0; i < 3; i++) {
		T_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		T_EQ(wc[i].wr_id, 10 + i);
		T_EQ(wc[i].qp_num, qa.qp->qp_num);
	}
	T_EQ(g_cap.n, 0);
	/* Posted in ERR: accepted and flushed. */
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 8, 0, false, 20), 0);
	T_EQ_FATAL(t_emu_poll_wait(qa.scq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	T_EQ(wc[0].wr_id, 20);
	T_EQ(t_emu_ctrs(a.dev).flushed, 4);
	T_EQ(g_cap.n, 0);

	/* The receiver's four posted buffers flush, then one posted later. */
	T_EQ(to_state(&qb, IBV_QPS_ERR, 0, NULL), 0);
	T_EQ_FATAL(t_emu_poll_wait(qb.rcq, wc, 4, 1000), 4);
	for (i = 0; i < 4; i++) {
		T_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		T_EQ(wc[i].opcode, IBV_WC_RECV);
		T_EQ(wc[i].wr_id, i);
	}
	post_recv_len(&qb, 2, BUF_SZ);
	T_EQ_FATAL(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	T_EQ(wc[0].wr_id, 2);
	{
		struct qps_emu_qp_counters qc;

		T_EQ(qps_emu_qp_counters(qb.qp, &qc), 0);
		T_EQ(qc.rx_flushed, 5);
	}

	/* RESET and up again: traffic flows, PSNs restart. */
	T_EQ(to_state(&qa, IBV_QPS_RESET, 0, NULL), 0);
	T_EQ(to_state(&qb, IBV_QPS_RESET, 0, NULL), 0);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 1, 0), 0);
	T_EQ(t_emu_poll_wait(qb.rcq, wc, 1, 0), 0);
	udq_up(&qa, QKEY, 99);
	udq_up(&qb, QKEY, 0);
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 8, 0, false, 30), 0);
	T_EQ_FATAL(g_cap.n, 1);
	T_EQ(be32_at(g_cap.f[0] + 42 + 8) & 0xffffff, 99);
	T_EQ_FATAL(t_emu_poll_wait(qa.scq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].wr_id, 30);
	T_EQ_FATAL(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].wr_id, 0);

	T_EQ(E->destroy_ah(ah), 0);
	udq_destroy(&a, &qa);
	udq_destroy(&b, &qb);
	node_close(&a);
	node_close(&b);
}

static void test_loc_len(void)
{
	struct node a, b;
	struct udq qa, qb;
	struct qps_ah *ah;
	struct ibv_wc wc[2];
	struct qps_emu_counters c0;
	uint32_t mtu = qps_emu_ib_mtu(QPS_EMU_MTU_DEFAULT);

	node_open(&a, NULL);
	node_open(&b, NULL);
	T_EQ_FATAL(a.info.mtu, QPS_EMU_MTU_DEFAULT);
	T_EQ_FATAL(mtu, 1024);
	udq_create(&a, &qa, IBV_QPT_UD, 0);
	udq_create(&b, &qb, IBV_QPT_UD, 4);
	udq_up(&qa, QKEY, 0);
	T_EQ(to_state(&qb, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		      IBV_QP_QKEY, &(struct ibv_qp_attr){ .port_num = 1,
							   .qkey = QKEY }),
	     0);
	post_recv_len(&qb, 0, 40 + 99);		/* one byte short */
	post_recv_len(&qb, 1, BUF_SZ);
	T_EQ(to_state(&qb, IBV_QPS_RTR, 0, NULL), 0);
	T_EQ_FATAL(ah_make(&a, b.info.addr.s_addr, 0, 64, 0, &ah), 0);
	g_cap.n = 0;
	qps_emu_test_set_tap(a.dev, tap, NULL);

	/* Beyond the path MTU: a send completion error, no frame. */
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, mtu + 1, 0, false, 1),
	     0);
	T_EQ_FATAL(t_emu_poll_wait(qa.scq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR);
	T_EQ(wc[0].wr_id, 1);
	T_EQ(g_cap.n, 0);
	/* The receive buffer one byte short of GRH + payload. */
	c0 = t_emu_ctrs(b.dev);
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, 100, 0, false, 2), 0);
	T_EQ_FATAL(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR);
	T_EQ(wc[0].wr_id, 0);
	T_EQ(t_emu_ctrs(b.dev).rx_len_err - c0.rx_len_err, 1);
	/* Exactly the path MTU fits. */
	T_EQ(ud_send(&a, &qa, ah, qb.qp->qp_num, QKEY, mtu, 7, false, 3), 0);
	T_EQ_FATAL(t_emu_poll_wait(qb.rcq, wc, 1, 1000), 1);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[0].byte_len, 40 + mtu);
	T_EQ(memcmp(qb.bufs + BUF_SZ + 40, a.sbuf, mtu), 0);
	T_EQ(t_emu_poll_wait(qa.scq, wc, 2, 1000), 2);
	T_EQ(wc[0].status, IBV_WC_SUCCESS);
	T_EQ(wc[1].status, IBV_WC_SUCCESS);
	T_EQ(g_cap.n, 2);

	T_EQ(E->destroy_ah(ah), 0);
	udq_destroy(&a, &qa);
	udq_destroy(&b, &qb);
	node_close(&a);
	node_close(&b);
}

static void test_ah(void)
{
	struct node a, b, o;
	struct udq qa;
	struct qps_ah *ah, *mah, *oah;
	struct qps_emu_ah *e, fake;
	struct ibv_ah_attr at = { .is_global = 1, .port_num = 1 };
	uint32_t absent = t_ip4("198.18.0.250"), dip;

	node_open(&a, NULL);
	node_open(&b, NULL);
	node_open(&o, NULL);
	dip = b.info.addr.s_addr;
	at.grh.sgid_index = QPS_GID_ROCE_V2_IPV4;
	at.grh.dgid.raw[10] = 0xff;
	at.grh.dgid.raw[11] = 0xff;
	memcpy(at.grh.dgid.raw + 12, &dip, 4);
	T_EQ(E->create_ah(a.dev, &at, &ah), 0);
	e = qps_emu_container_of(ah, struct qps_emu_ah, base);
	T_EQ(ah->ibv, &e->ibv);
	T_EQ(memcmp(e->mac, b.info.mac, 6), 0);
	T_EQ(E->destroy_ah(ah), 0);

	at.is_global = 0;
	T_EQ(E->create_ah(a.dev, &at, &ah), -EINVAL);
	at.is_global = 1;
	at.grh.sgid_index = QPS_GID_ROCE_V1_LL;
	T_EQ(E->create_ah(a.dev, &at, &ah), -EINVAL);
	at.grh.sgid_index = QPS_GID_ROCE_V2_IPV4;
	at.port_num = 2;
	T_EQ(E->create_ah(a.dev, &at, &ah), -EINVAL);
	at.port_num = 1;
	at.grh.dgid.raw[0] = 0xfe;		/* not IPv4-mapped */
	T_EQ(E->create_ah(a.dev, &at, &ah), -EINVAL);
	at.grh.dgid.raw[0] = 0;
	memcpy(at.grh.dgid.raw + 12, &absent, 4);
	T_EQ(E->create_ah(a.dev, &at, &ah), -EHOSTUNREACH);
	T_EQ(E->create_ah(a.dev, NULL, &ah), -EINVAL);
	T_EQ(ah_make(&a, t_ip4("224.0.0.251"), 0, 1, 0, &mah), 0);
	e = qps_emu_container_of(mah, struct qps_emu_ah, base);
	T_EQ(e->mac[0], 0x01);
	T_EQ(e->mac[2], 0x5e);
	T_EQ(e->mac[3], 0x00);
	T_EQ(e->mac[5], 0xfb);

	/* A WR must carry one of this device's AHs. */
	udq_create(&a, &qa, IBV_QPT_UD, 0);
	udq_up(&qa, QKEY, 0);
	T_EQ_FATAL(ah_make(&o, dip, 0, 1, 0, &oah), 0);
	T_EQ(ud_send(&a, &qa, oah, 1, QKEY, 8, 0, false, 1), -EINVAL);
	memset(&fake, 0, sizeof(fake));
	fake.base.ibv = &fake.ibv;
	T_EQ(ud_send(&a, &qa, &fake.base, 1, QKEY, 8, 0, false, 1), -EINVAL);
	{
		struct ibv_send_wr wr = { .opcode = IBV_WR_SEND }, *bad;

		/* No AH */
		T_EQ(E->post_send(qa.qp, &wr, &bad), -EINVAL);
		T_EQ(bad, &wr);
		wr.wr.ud.ah = mah->ibv;
		wr.opcode = IBV_WR_RDMA_WRITE;
		T_EQ(E->post_send(qa.qp, &wr, &bad), -EINVAL);
	}
	/* The peer leaves: the AH keeps its MAC, sends reach no one. */
	node_close(&b);
	T_EQ(ah_make(&a, dip, 0, 1, 0, &ah), -EHOSTUNREACH);
	T_EQ(E->destroy_ah(oah), 0);
	T_EQ(E->destroy_ah(mah), 0);
	udq_destroy(&a, &qa);
	node_close(&a);
	node_close(&o);
}

/* The receiving child of test_two_processes: plain checks, an exit code
 * (no CUnit in a forked child). Reports its QPN on @wfd once ready. */
static int child_rx(int wfd, uint32_t parent_ip)
{
	struct node c;
	struct qps_dev_attr attr = { .dev = g_wire, .addr_set = true };
	struct qps_qp_init_attr qa = { .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_recv_sge = 1 } };
	struct ibv_qp_attr at = { .port_num = 1, .qkey = QKEY };
	union ibv_gid g = mgid("239.3.3.3");
	struct ibv_wc wc[2];
	struct qps_cq *cq;
	struct qps_qp *qp;
	uint8_t *bufs;
	void *b;
	uint64_t end;
	int i, n = 0, rc = 0;
	uint32_t qpn;

	memset(&c, 0, sizeof(c));
	attr.addr.s_addr = t_ip4("198.18.0.31");
	if (E->open(&attr, &c.dev) || E->create_cq(c.dev, 16, &cq))
		return 10;
	qa.send_cq = cq;
	qa.recv_cq = cq;
	if (E->create_qp(c.dev, &qa, &qp) ||
	    E->alloc_buf(c.dev, 4 * BUF_SZ, &b))
		return 11;
	bufs = b;
	at.qp_state = IBV_QPS_INIT;
	if (E->modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			 IBV_QP_PORT | IBV_QP_QKEY))
		return 12;
	for (i = 0; i < 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(bufs + i * BUF_SZ),
				       .length = BUF_SZ };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i,
					  .sg_list = &sge, .num_sge = 1 },
				   *bad;

		if (E->post_recv(qp, &wr, &bad))
			return 13;
	}
	at.qp_state = IBV_QPS_RTR;
	if (E->modify_qp(qp, &at, IBV_QP_STATE) ||
	    E->attach_mcast(qp, &g, 0))
		return 14;
	qpn = qp->qp_num;
	if (write(wfd, &qpn, sizeof(qpn)) != (ssize_t)sizeof(qpn))
		return 15;
	end = t_now_ms() + 5000;
	while (n < 2 && t_now_ms() < end) {
		int r = E->poll_cq(cq, 2 - n, wc + n);

		if (r < 0)
			return 16;
		n += r;
		if (!r)
			usleep(1000);
	}
	if (n != 2)
		return 17;
	for (i = 0; i < 2; i++) {
		const uint8_t *p = bufs + wc[i].wr_id * BUF_SZ;
		unsigned int k;

		if (wc[i].status != IBV_WC_SUCCESS ||
		    wc[i].byte_len != 40 + 24 ||
		    !(wc[i].wc_flags & IBV_WC_GRH) ||
		    memcmp(p + 20 + 12, &parent_ip, 4))
			rc = 18;
		for (k = 0; k < 20; k++)
			if (p[k])
				rc = 19;
		for (k = 0; k < 24; k++)
			if (p[40 + k] != (uint8_t)(i + k * 3))
				rc = 20;
	}
	if (!(wc[0].wc_flags & IBV_WC_WITH_IMM) ||
	    wc[0].imm_data != htobe32(0xdeadbe00u))
		rc = 21;
	if (memcmp(bufs + wc[1].wr_id * BUF_SZ + 36, &g.raw[12], 4))
		rc = 22;
	if (E->destroy_qp(qp) || E->destroy_cq(cq) || E->close(c.dev))
		rc = rc ? rc : 23;
	return rc;
}

/* The receiver in another process: everything a sender needs of it is
 * in the wire's shared memory (state, Q_Key, group table, buffers). */
static void test_two_processes(void)
{
	struct node a;
	struct udq qa;
	struct qps_ah *uah, *gah;
	struct ibv_wc wc[2];
	int fds[2], status = -1;
	uint32_t qpn = 0;
	pid_t pid;

	node_open(&a, "198.18.0.30");
	udq_create(&a, &qa, IBV_QPT_UD, 0);
	udq_up(&qa, QKEY, 0);
	T_EQ_FATAL(pipe(fds), 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		_exit(child_rx(fds[1], a.info.addr.s_addr));
	}
	close(fds[1]);
	T_EQ(read(fds[0], &qpn, sizeof(qpn)), sizeof(qpn));
	close(fds[0]);
	if (qpn) {
		T_EQ(ah_make(&a, t_ip4("198.18.0.31"), 0, 64, 0, &uah), 0);
		T_EQ(ah_make(&a, t_ip4("239.3.3.3"), 0, 64, 0, &gah), 0);
		T_EQ(ud_send(&a, &qa, uah, qpn, QKEY, 24, 0, true, 1), 0);
		T_EQ(ud_send(&a, &qa, gah, 0xffffff, QKEY, 24, 1, false, 2),
		     0);
		T_EQ(t_emu_poll_wait(qa.scq, wc, 2, 1000), 2);
		T_EQ(E->destroy_ah(uah), 0);
		T_EQ(E->destroy_ah(gah), 0);
	}
	T_EQ(waitpid(pid, &status, 0), pid);
	T_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
	udq_destroy(&a, &qa);
	node_close(&a);
}

/* Poll @q's receive CQ and post again what completed; returns the good
 * completions. */
static int repost(struct udq *q, struct ibv_wc *wc)
{
	int r = E->poll_cq(q->rcq, 16, wc), i, ok = 0;

	CU_ASSERT(r >= 0 || r == -EIO);
	for (i = 0; i < r; i++) {
		ok += wc[i].status == IBV_WC_SUCCESS;
		if (wc[i].wr_id < q->nbufs)
			post_recv_len(q, (uint32_t)wc[i].wr_id, BUF_SZ);
	}
	return ok;
}

/* UD delivery against scribbled shared state: the group table and the
 * UD fields of the RQs. Drops and -EIO are fine, crashes and writes
 * outside the pool (ASan) are not. */
static void test_fuzz_ud_state(void)
{
	struct node a, b;
	struct udq qa, q1, q2;
	struct qps_ah *uah, *gah;
	union ibv_gid m1 = mgid("239.7.7.7");
	struct qps_emu_shm_port *sp, saved;
	unsigned int seed = 777, it, k;
	struct ibv_wc wc[16];
	int r, got = 0;

	node_open(&a, NULL);
	node_open(&b, NULL);
	udq_create(&a, &qa, IBV_QPT_UD, 0);
	udq_create(&b, &q1, IBV_QPT_UD, 8);
	udq_create(&b, &q2, IBV_QPT_UD, 8);
	udq_up(&qa, QKEY, 0);
	udq_up(&q1, QKEY, 0);
	udq_up(&q2, QKEY, 0);
	T_EQ_FATAL(E->attach_mcast(q1.qp, &m1, 0), 0);
	T_EQ_FATAL(E->attach_mcast(q2.qp, &m1, 0), 0);
	T_EQ_FATAL(ah_make(&a, b.info.addr.s_addr, 0, 64, 0, &uah), 0);
	T_EQ_FATAL(ah_make(&a, t_ip4("239.7.7.7"), 0, 64, 0, &gah), 0);
	sp = qps_emu_dev(b.dev)->sp;
	for (it = 0; it < 2000; it++) {
		uint8_t *t[] = { (uint8_t *)sp->mcg, (uint8_t *)sp->rq };
		size_t tl[] = { sizeof(sp->mcg), sizeof(sp->rq) };

		memcpy(&saved, sp, sizeof(saved));
		for (k = 0; k < 1 + it % 3; k++) {
			unsigned int w = (unsigned int)rand_r(&seed) % 2;

			t[w][(size_t)rand_r(&seed) % tl[w]] ^=
				(uint8_t)(1u << (rand_r(&seed) % 8));
		}
		/* Not the consumer index: the restore below keeps it. */
		for (k = 0; k < QPS_EMU_MAX_RQ; k++)
			sp->rq[k].tail = saved.rq[k].tail;
		if (it & 1)
			r = ud_send(&a, &qa, gah, 0xffffff, QKEY, 16, 1,
				    false, it);
		else
			r = ud_send(&a, &qa, uah, q1.qp->qp_num, QKEY, 16, 1,
				    true, it);
		T_EQ(r, 0);
		/* Put the state back (not the lock, not the counters);
		 * keep the consumer indices the delivery moved. */
		memcpy(sp->mcg, saved.mcg, sizeof(sp->mcg));
		for (k = 0; k < QPS_EMU_MAX_RQ; k++) {
			uint32_t tail = sp->rq[k].tail;

			sp->rq[k] = saved.rq[k];
			sp->rq[k].tail = tail;
		}
		got += repost(&q1, wc);
		got += repost(&q2, wc);
		while (E->poll_cq(qa.scq, 16, wc) > 0)
			;
	}
	/* Datagrams kept arriving between the scribbles, until one sent a
	 * CQE to the other QP's CQ: the owner refuses it (cqe_corrupt) and
	 * that RQ's in-order completion stops there, which is what a
	 * scribbling peer can do. */
	T_GE(got, 100);
	T_GE(t_emu_ctrs(b.dev).rx_corrupt, 1);
	T_EQ(E->destroy_ah(uah), 0);
	T_EQ(E->destroy_ah(gah), 0);
	udq_destroy(&a, &qa);
	udq_destroy(&b, &q1);
	udq_destroy(&b, &q2);
	node_close(&a);
	node_close(&b);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "ICRC against a captured ConnectX packet", test_icrc_vector },
		{ "GID table and UD capability", test_gid_caps },
		{ "UD unicast, frame byte by byte", test_unicast },
		{ "receive drops counted by reason", test_rx_drops },
		{ "multicast to attached QPs", test_multicast },
		{ "QP state machine", test_state_machine },
		{ "ERR flushes, RESET restarts", test_err_flush },
		{ "LOC_LEN_ERR both ways", test_loc_len },
		{ "address handles", test_ah },
		{ "scribbled UD shared state", test_fuzz_ud_state },
		{ "receiver in another process", test_two_processes },
		CU_TEST_INFO_NULL,
	};

	return t_emu_run("emu_ud", tests, "emu-ud", g_wire, sizeof(g_wire));
}
