// SPDX-License-Identifier: MIT
/*
 * The emu provider through its ops table: mlx4 send ring and registers,
 * CQs, RQs, steering, the shared-memory wire, validation of what peers
 * write, stepping mode and events.
 */
#include "t_emu.h"
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu/emu.h"

#define BUF_SZ 2048u
#define FRAME_LEN 58u	/* 42 bytes of headers + 16 of payload */
#define PAYLOAD_OFF 42u

static const struct qps_provider_ops *E = &qps_emu_ops;
static char g_wire[64];

struct port {
	struct qps_dev *dev;
	struct qps_dev_info info;
	struct qps_cq *scq, *rcq;
	struct qps_qp *qp;
	struct qps_flow *flow;
	uint8_t *bufs;
	uint32_t nbufs;
};

/* --- helpers ---------------------------------------------------------- */

static int dev_open(const char *ip, struct qps_dev **dev)
{
	struct qps_dev_attr attr = { .dev = g_wire };

	if (ip) {
		attr.addr_set = true;
		attr.addr.s_addr = t_ip4(ip);
	}
	return E->open(&attr, dev);
}

static uint16_t ip_csum(const uint8_t *h)
{
	uint32_t s = 0;
	int i;

	for (i = 0; i < 20; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Ethernet + IPv4 + UDP with 16 bytes of payload starting with @seq. */
static uint32_t mkframe(uint8_t *f, const uint8_t dmac[6],
			const uint8_t smac[6], uint32_t sip, uint32_t dip,
			uint16_t sport, uint16_t dport, uint32_t seq)
{
	uint16_t v;
	unsigned int i;

	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	memset(f + 14, 0, 20);
	f[14] = 0x45;
	v = htons(FRAME_LEN - 14);
	memcpy(f + 16, &v, 2);
	f[22] = 64;
	f[23] = 17;
	memcpy(f + 26, &sip, 4);
	memcpy(f + 30, &dip, 4);
	v = htons(ip_csum(f + 14));
	memcpy(f + 24, &v, 2);
	v = htons(sport);
	memcpy(f + 34, &v, 2);
	v = htons(dport);
	memcpy(f + 36, &v, 2);
	v = htons(FRAME_LEN - 34);
	memcpy(f + 38, &v, 2);
	memset(f + 40, 0, 2);
	memcpy(f + PAYLOAD_OFF, &seq, 4);
	for (i = 4; i < 16; i++)
		f[PAYLOAD_OFF + i] = (uint8_t)(seq * 7 + i);
	return FRAME_LEN;
}

static void post_bufs(struct port *p, uint32_t first, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		uint32_t idx = first + i;
		struct ibv_sge sge = {
			.addr = (uintptr_t)(p->bufs + (size_t)idx * BUF_SZ),
			.length = BUF_SZ,
		};
		struct ibv_recv_wr wr = { .wr_id = idx, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		CU_ASSERT_EQUAL_FATAL(E->post_recv(p->qp, &wr, &bad), 0);
	}
}

static struct ibv_flow_attr *flow_build(uint8_t *buf, uint32_t type,
					uint16_t prio, const uint8_t *mac,
					uint32_t dip, uint16_t dport)
{
	struct ibv_flow_attr *a = (void *)buf;
	uint8_t *p = buf + sizeof(*a);

	memset(buf, 0, 256);
	a->type = type;
	a->priority = prio;
	a->port = 1;
	if (mac) {
		struct ibv_flow_spec_eth e = { .type = IBV_FLOW_SPEC_ETH,
					       .size = sizeof(e) };

		memcpy(e.val.dst_mac, mac, 6);
		memset(e.mask.dst_mac, 0xff, 6);
		memcpy(p, &e, sizeof(e));
		p += sizeof(e);
		a->num_of_specs++;
	}
	if (dip) {
		struct ibv_flow_spec_ipv4 s = { .type = IBV_FLOW_SPEC_IPV4,
						.size = sizeof(s) };

		s.val.dst_ip = dip;
		s.mask.dst_ip = 0xffffffffu;
		memcpy(p, &s, sizeof(s));
		p += sizeof(s);
		a->num_of_specs++;
	}
	if (dport) {
		struct ibv_flow_spec_tcp_udp s = { .type = IBV_FLOW_SPEC_UDP,
						   .size = sizeof(s) };

		s.val.dst_port = htons(dport);
		s.mask.dst_port = 0xffff;
		memcpy(p, &s, sizeof(s));
		p += sizeof(s);
		a->num_of_specs++;
	}
	a->size = (uint16_t)(p - buf);
	return a;
}

static struct qps_qp *mkqp(struct qps_dev *dev, struct qps_cq *scq,
			   struct qps_cq *rcq, uint32_t sq_wr, uint32_t rq_wr)
{
	struct qps_qp_init_attr qa = {
		.qp_type = IBV_QPT_RAW_PACKET,
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = { .max_send_wr = sq_wr, .max_recv_wr = rq_wr,
			 .max_send_sge = 2, .max_recv_sge = 1,
			 .max_inline_data = 200 },
	};
	struct qps_qp *qp = NULL;

	CU_ASSERT_EQUAL_FATAL(E->create_qp(dev, &qa, &qp), 0);
	return qp;
}

/* A port with one QP; @all_default steers everything to it. */
static void port_open(struct port *p, const char *ip, uint32_t sq_wr,
		      uint32_t rq_wr, int scqe, int rcqe, bool all_default)
{
	memset(p, 0, sizeof(*p));
	CU_ASSERT_EQUAL_FATAL(dev_open(ip, &p->dev), 0);
	CU_ASSERT_EQUAL_FATAL(E->query(p->dev, &p->info), 0);
	CU_ASSERT_EQUAL_FATAL(E->create_cq(p->dev, scqe, &p->scq), 0);
	CU_ASSERT_EQUAL_FATAL(E->create_cq(p->dev, rcqe, &p->rcq), 0);
	p->qp = mkqp(p->dev, p->scq, p->rcq, sq_wr, rq_wr);
	p->nbufs = rq_wr;
	if (rq_wr) {
		void *b;

		CU_ASSERT_EQUAL_FATAL(E->alloc_buf(p->dev, (size_t)rq_wr * BUF_SZ,
						   &b), 0);
		p->bufs = b;
		post_bufs(p, 0, rq_wr);
	}
	if (all_default) {
		uint8_t buf[256];

		CU_ASSERT_EQUAL_FATAL(E->create_flow(p->qp,
			flow_build(buf, IBV_FLOW_ATTR_ALL_DEFAULT, 0, NULL, 0, 0),
			&p->flow), 0);
	}
}

static void port_close(struct port *p)
{
	if (!p->dev)
		return;
	if (p->flow)
		CU_ASSERT_EQUAL(E->destroy_flow(p->flow), 0);
	CU_ASSERT_EQUAL(E->destroy_qp(p->qp), 0);
	CU_ASSERT_EQUAL(E->destroy_cq(p->scq), 0);
	CU_ASSERT_EQUAL(E->destroy_cq(p->rcq), 0);
	if (p->bufs)
		CU_ASSERT_EQUAL(E->free_buf(p->dev, p->bufs,
					    (size_t)p->nbufs * BUF_SZ), 0);
	CU_ASSERT_EQUAL(E->close(p->dev), 0);
	memset(p, 0, sizeof(*p));
}

/* A chain of @n inline frames to @dmac/@dip:@dport, seq @seq.., the last
 * signalled when @sig_last. */
static int send_seq(struct port *p, struct qps_qp *qp, const uint8_t dmac[6],
		    uint32_t dip, uint16_t dport, uint32_t seq, int n,
		    bool sig_last)
{
	uint8_t fr[32][FRAME_LEN];
	struct ibv_sge sge[32];
	struct ibv_send_wr wr[32], *bad = NULL;
	int i;

	CU_ASSERT_FATAL(n > 0 && n <= 32);
	for (i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)fr[i];
		sge[i].length = mkframe(fr[i], dmac, p->info.mac,
					p->info.addr.s_addr, dip, 4000, dport,
					seq + (uint32_t)i);
		sge[i].lkey = 0;
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = seq + (uint32_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_INLINE |
			((sig_last && i == n - 1) ? IBV_SEND_SIGNALED : 0);
		wr[i].next = i < n - 1 ? &wr[i + 1] : NULL;
	}
	return E->post_send(qp ? qp : p->qp, wr, &bad);
}

static int send_to(struct port *from, const struct port *to, uint32_t seq,
		   int n)
{
	return send_seq(from, NULL, to->info.mac, to->info.addr.s_addr, 5000,
			seq, n, true);
}

/* Receive up to @max frames on @p, record their seqs, repost buffers. */
static int recv_seqs(struct port *p, uint32_t *seqs, int max, int ms)
{
	struct ibv_wc wc[64];
	int i, n;

	CU_ASSERT_FATAL(max <= 64);
	n = t_emu_poll_wait(p->rcq, wc, max, ms);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_SUCCESS);
		CU_ASSERT_EQUAL(wc[i].opcode, IBV_WC_RECV);
		CU_ASSERT_EQUAL(wc[i].byte_len, FRAME_LEN);
		CU_ASSERT_FATAL(wc[i].wr_id < p->nbufs);
		if (seqs)
			memcpy(&seqs[i], p->bufs + wc[i].wr_id * BUF_SZ +
			       PAYLOAD_OFF, 4);
		post_bufs(p, (uint32_t)wc[i].wr_id, 1);
	}
	return n;
}

static int drain(struct qps_cq *cq)
{
	struct ibv_wc wc[64];
	int r, n = 0;

	while ((r = E->poll_cq(cq, 64, wc)) > 0)
		n += r;
	return n;
}

/* A libmlx4-style inline SEND WQE at @ind, written through the direct
 * path; returns its size in 16-byte units. */
static uint32_t direct_wqe(const struct qps_mlx4_sq *sq, uint32_t ind,
			   const uint8_t *data, uint32_t len, bool signaled)
{
	uint8_t *wqe = (uint8_t *)sq->buf +
		       ((size_t)(ind & (sq->wqe_cnt - 1)) << sq->wqe_shift);
	struct mlx4_wqe_ctrl_seg *ctrl = (void *)wqe;
	uint32_t off = 20, seg = 16, seg_len = 0, nseg = 0, done = 0, size;

	while (done < len) {
		uint32_t room = 64 - off % 64;
		uint32_t n = len - done < room ? len - done : room;

		memcpy(wqe + off, data + done, n);
		off += n;
		done += n;
		seg_len += n;
		if (off % 64 == 0) {
			uint32_t bc = htobe32(MLX4_INLINE_SEG | seg_len);

			memcpy(wqe + seg, &bc, 4);
			nseg++;
			seg = off;
			seg_len = 0;
			off += 4;
		}
	}
	if (seg_len) {
		uint32_t bc = htobe32(MLX4_INLINE_SEG | seg_len);

		memcpy(wqe + seg, &bc, 4);
		nseg++;
	}
	size = 1 + (len + nseg * 4 + 15) / 16;
	ctrl->bf_qpn = 0;
	ctrl->fence_size = (uint8_t)size;
	ctrl->srcrb_flags = htobe32(MLX4_WQE_CTRL_SOLICIT |
				    (signaled ? MLX4_WQE_CTRL_CQ_UPDATE : 0));
	ctrl->imm = 0;
	__atomic_store_n(&ctrl->owner_opcode,
			 htobe32(MLX4_OPCODE_SEND |
				 ((ind & sq->wqe_cnt) ? (1u << 31) : 0)),
			 __ATOMIC_RELEASE);
	return size;
}

static bool readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

static bool shm_exists(void)
{
	char name[128];
	int fd;

	snprintf(name, sizeof(name), "%s%s", QPS_EMU_SHM_PREFIX, g_wire);
	fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* --- tests ------------------------------------------------------------ */

static void test_open_query_resolve(void)
{
	struct qps_dev *a, *b, *c;
	struct qps_dev_info ia, ib;
	uint8_t mac[6];
	uint64_t gen;
	struct in_addr d;
	static const uint8_t mc[6] = { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 };

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, &a), 0);
	CU_ASSERT_EQUAL_FATAL(dev_open("198.18.0.77", &b), 0);
	CU_ASSERT_EQUAL(dev_open("198.18.0.77", &c), -EADDRINUSE);
	CU_ASSERT_EQUAL(dev_open("224.0.0.1", &c), -EINVAL);
	CU_ASSERT_EQUAL(E->query(a, &ia), 0);
	CU_ASSERT_EQUAL(E->query(b, &ib), 0);
	CU_ASSERT_STRING_EQUAL(ia.name, g_wire);
	CU_ASSERT_EQUAL(ia.addr.s_addr, t_ip4("198.18.0.1"));
	CU_ASSERT_EQUAL(ib.addr.s_addr, t_ip4("198.18.0.77"));
	CU_ASSERT_NOT_EQUAL(memcmp(ia.mac, ib.mac, 6), 0);
	CU_ASSERT_EQUAL(ia.mtu, QPS_EMU_MTU_DEFAULT);
	CU_ASSERT_EQUAL(ia.max_inline, 224);
	CU_ASSERT_EQUAL(ia.caps, QPS_DEV_CAP_MLX4_SQ | QPS_DEV_CAP_FLOW |
				 QPS_DEV_CAP_UD | QPS_DEV_CAP_QP_ERR |
				 QPS_DEV_CAP_MC_LOOP | QPS_DEV_CAP_CSUM |
				 QPS_DEV_CAP_MC_GROUP_RULE);

	CU_ASSERT_EQUAL(E->resolve(a, ib.addr, mac), 0);
	CU_ASSERT_EQUAL(memcmp(mac, ib.mac, 6), 0);
	CU_ASSERT_EQUAL(E->resolve(b, ib.addr, mac), 0);	/* own address */
	CU_ASSERT_EQUAL(memcmp(mac, ib.mac, 6), 0);
	d.s_addr = t_ip4("239.129.2.3");	/* low 23 bits only */
	CU_ASSERT_EQUAL(E->resolve(a, d, mac), 0);
	CU_ASSERT_EQUAL(memcmp(mac, mc, 6), 0);
	d.s_addr = INADDR_BROADCAST;
	CU_ASSERT_EQUAL(E->resolve(a, d, mac), 0);
	CU_ASSERT_EQUAL(mac[0] & mac[5], 0xff);
	d.s_addr = t_ip4("198.18.0.200");
	CU_ASSERT_EQUAL(E->resolve(a, d, mac), -EHOSTUNREACH);

	gen = E->route_gen(a);
	CU_ASSERT_EQUAL(E->close(b), 0);
	CU_ASSERT_NOT_EQUAL(E->route_gen(a), gen);
	CU_ASSERT_EQUAL(E->resolve(a, ib.addr, mac), -EHOSTUNREACH);
	/* The freed address is allocated again. */
	CU_ASSERT_EQUAL_FATAL(dev_open("198.18.0.77", &b), 0);
	CU_ASSERT_EQUAL(E->close(b), 0);
	CU_ASSERT_TRUE(shm_exists());
	CU_ASSERT_EQUAL(E->close(a), 0);
	CU_ASSERT_FALSE(shm_exists());	/* the last port unlinks */
}

/* More than 3 * wqe_cnt WQEs in chains: every owner word flips per
 * wrap, stamps run ahead, everything arrives in order. */
static void test_sq_owner_wrap(void)
{
	struct port a, b;
	struct qps_mlx4_sq sq;
	uint32_t seqs[64], next = 0, sent = 0, i;
	int batches = 0;

	port_open(&a, NULL, 16, 0, 64, 8, false);
	port_open(&b, NULL, 8, 64, 8, 64, true);
	CU_ASSERT_EQUAL(E->mlx4_sq(a.qp, &sq), 0);
	CU_ASSERT_EQUAL(sq.wqe_shift, 8);
	CU_ASSERT_EQUAL(sq.spare_wqes, 9);
	CU_ASSERT_EQUAL(sq.wqe_cnt, 32);
	CU_ASSERT_EQUAL(sq.max_post, 23);
	CU_ASSERT_EQUAL(a.qp->cap.max_send_wr, 23);
	CU_ASSERT_EQUAL(a.qp->cap.max_inline_data, 224);
	while (sent < 4 * sq.wqe_cnt + 5) {
		struct ibv_wc wc;
		uint32_t h;
		int n;

		CU_ASSERT_EQUAL_FATAL(send_to(&a, &b, sent, 7), 0);
		sent += 7;
		batches++;
		CU_ASSERT_EQUAL(*sq.head, sent);
		CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 1, &wc), 1);
		CU_ASSERT_EQUAL(wc.status, IBV_WC_SUCCESS);
		CU_ASSERT_EQUAL(wc.wr_id, sent - 1);
		CU_ASSERT_EQUAL(*sq.tail, sent);	/* covers all 7 */
		for (h = sent - 7; h < sent; h++) {
			const struct mlx4_wqe_ctrl_seg *c = (const void *)
				((uint8_t *)sq.buf +
				 ((h & (sq.wqe_cnt - 1)) << sq.wqe_shift));
			uint32_t own = be32toh(c->owner_opcode);

			CU_ASSERT_EQUAL(own & 0x1f, MLX4_OPCODE_SEND);
			CU_ASSERT_EQUAL(!!(own & (1u << 31)),
					!!(h & sq.wqe_cnt));
		}
		/* The slot spare_wqes ahead of the last WQE is stamped. */
		{
			const uint8_t *s = (uint8_t *)sq.buf +
				(((sent - 1 + sq.spare_wqes) &
				  (sq.wqe_cnt - 1)) << sq.wqe_shift);
			const struct mlx4_wqe_ctrl_seg *c = (const void *)s;
			uint32_t v;

			if ((c->fence_size & 0x3f) * 16 > 64) {
				memcpy(&v, s + 64, 4);
				CU_ASSERT_EQUAL(v, 0xffffffffu);
			}
		}
		n = recv_seqs(&b, seqs, 7, 0);
		CU_ASSERT_EQUAL(n, 7);
		for (i = 0; i < (uint32_t)n; i++)
			CU_ASSERT_EQUAL(seqs[i], next++);
	}
	CU_ASSERT_EQUAL(next, sent);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.wqes, sent);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.doorbells, (uint64_t)batches);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.tx_cqes, (uint64_t)batches);
	CU_ASSERT_EQUAL(t_emu_ctrs(b.dev).dev.rx_cqes, sent);
	port_close(&a);
	port_close(&b);
}

static void test_direct_needs_doorbell(void)
{
	struct port a, b;
	struct qps_mlx4_sq sq;
	uint8_t fr[FRAME_LEN];
	uint32_t seq = 0;
	struct ibv_wc wc;
	int i;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 64, 8, 64, true);
	CU_ASSERT_EQUAL_FATAL(E->mlx4_sq(a.qp, &sq), 0);
	CU_ASSERT_EQUAL(sq.doorbell_qpn, htobe32(a.qp->qp_num << 8));
	for (i = 0; i < 3; i++) {
		mkframe(fr, b.info.mac, a.info.mac, a.info.addr.s_addr,
			b.info.addr.s_addr, 1, 5000, (uint32_t)i);
		sq.wrid[*sq.head & (sq.wqe_cnt - 1)] = 100 + (uint64_t)i;
		direct_wqe(&sq, *sq.head, fr, FRAME_LEN, i == 2);
		(*sq.head)++;
	}
	/* Written and owned by the device, but no doorbell yet. */
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.wqes, 0);
	CU_ASSERT_EQUAL(recv_seqs(&b, NULL, 8, 0), 0);
	CU_ASSERT_EQUAL(E->poll_cq(a.scq, 1, &wc), 0);
	/* A doorbell carrying another QP's number is ignored. */
	sq.db_write(a.qp, htobe32((a.qp->qp_num + 1) << 8));
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).db_bad, 1);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.doorbells, 0);
	CU_ASSERT_EQUAL(recv_seqs(&b, NULL, 8, 0), 0);

	sq.db_write(a.qp, sq.doorbell_qpn);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.wqes, 3);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.doorbells, 1);
	{
		uint32_t s[8];

		CU_ASSERT_EQUAL_FATAL(recv_seqs(&b, s, 8, 0), 3);
		for (i = 0; i < 3; i++)
			CU_ASSERT_EQUAL(s[i], seq++);
	}
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 1, &wc), 1);
	CU_ASSERT_EQUAL(wc.wr_id, 102);
	CU_ASSERT_EQUAL(*sq.tail, 3);
	port_close(&a);
	port_close(&b);
}

/* Prepare the BlueFlame image of the WQE at @ind as libmlx4 does. */
static uint32_t bf_image(const struct qps_mlx4_sq *sq, uint32_t ind,
			 uint32_t size16, uint8_t *img)
{
	const uint8_t *wqe = (uint8_t *)sq->buf +
			     ((size_t)(ind & (sq->wqe_cnt - 1)) << sq->wqe_shift);
	struct mlx4_wqe_ctrl_seg *c = (void *)img;
	uint32_t len = (size16 * 16 + 63) & ~63u;

	memcpy(img, wqe, len);
	c->owner_opcode |= htobe32((ind & 0xffff) << 8);
	c->bf_qpn |= sq->doorbell_qpn;
	return len;
}

static void test_blueflame(void)
{
	struct port a, b;
	struct qps_mlx4_sq sq;
	uint8_t fr[200], ring_copy[BUF_SZ], img[256];
	uint8_t *bf;
	struct ibv_wc wc[8];
	uint32_t ind, size16, len, i;
	struct qps_emu_counters c0;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 64, 8, 64, true);
	CU_ASSERT_EQUAL_FATAL(E->mlx4_sq(a.qp, &sq), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sq.bf_reg);
	CU_ASSERT_EQUAL(sq.bf_buf_size, 256);
	bf = sq.bf_reg;
	/* A 150-byte frame: a WQE of three 64-byte chunks. */
	memset(fr, 0, sizeof(fr));
	mkframe(fr, b.info.mac, a.info.mac, a.info.addr.s_addr,
		b.info.addr.s_addr, 1, 5000, 7);
	for (i = FRAME_LEN; i < 150; i++)
		fr[i] = (uint8_t)i;

	/* Ring path. */
	ind = *sq.head;
	direct_wqe(&sq, ind, fr, 150, true);
	(*sq.head)++;
	sq.db_write(a.qp, sq.doorbell_qpn);
	CU_ASSERT_EQUAL_FATAL(t_emu_poll_wait(b.rcq, wc, 1, 0), 1);
	CU_ASSERT_EQUAL(wc[0].byte_len, 150);
	memcpy(ring_copy, b.bufs + wc[0].wr_id * BUF_SZ, 150);
	CU_ASSERT_EQUAL(memcmp(ring_copy, fr, 150), 0);
	post_bufs(&b, (uint32_t)wc[0].wr_id, 1);
	CU_ASSERT_EQUAL(drain(a.scq), 1);

	/* BlueFlame path; the ring copy is scribbled on after the image was
	 * taken: the device must use the register. */
	c0 = t_emu_ctrs(a.dev);
	ind = *sq.head;
	size16 = direct_wqe(&sq, ind, fr, 150, true);
	CU_ASSERT_TRUE(size16 * 16 <= 256);
	len = bf_image(&sq, ind, size16, img);
	(*sq.head)++;
	memset((uint8_t *)sq.buf + ((ind & (sq.wqe_cnt - 1)) << sq.wqe_shift) +
	       24, 0xaa, 100);
	sq.bf_copy(a.qp, bf, img, len);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.bf_writes, c0.dev.bf_writes + 1);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.doorbells, c0.dev.doorbells);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.wqes, c0.dev.wqes + 1);
	CU_ASSERT_EQUAL_FATAL(t_emu_poll_wait(b.rcq, wc, 1, 0), 1);
	CU_ASSERT_EQUAL(wc[0].byte_len, 150);
	CU_ASSERT_EQUAL(memcmp(b.bufs + wc[0].wr_id * BUF_SZ, ring_copy, 150),
			0);
	post_bufs(&b, (uint32_t)wc[0].wr_id, 1);
	CU_ASSERT_EQUAL(drain(a.scq), 1);

	/* Stepping: the register copy is latched at the write; rewriting the
	 * ring before the device runs changes nothing. Other half. */
	qps_emu_set_stepping(a.dev, true);
	ind = *sq.head;
	size16 = direct_wqe(&sq, ind, fr, 150, true);
	len = bf_image(&sq, ind, size16, img);
	(*sq.head)++;
	sq.bf_copy(a.qp, bf + sq.bf_buf_size, img, len);
	memset(img, 0x55, sizeof(img));	/* and the caller's source */
	memset((uint8_t *)sq.buf + ((ind & (sq.wqe_cnt - 1)) << sq.wqe_shift) +
	       24, 0xbb, 100);
	CU_ASSERT_EQUAL(t_emu_poll_wait(b.rcq, wc, 1, 0), 0);
	CU_ASSERT_EQUAL(qps_emu_step(a.dev, 0), 1);
	CU_ASSERT_EQUAL_FATAL(t_emu_poll_wait(b.rcq, wc, 1, 0), 1);
	CU_ASSERT_EQUAL(memcmp(b.bufs + wc[0].wr_id * BUF_SZ, ring_copy, 150),
			0);
	post_bufs(&b, (uint32_t)wc[0].wr_id, 1);
	qps_emu_set_stepping(a.dev, false);
	CU_ASSERT_EQUAL(drain(a.scq), 1);

	/* BF of the 4th WQE while 3 were written without a doorbell: the
	 * device catches up from the ring, then takes the register copy. */
	for (i = 0; i < 4; i++) {
		uint8_t f2[FRAME_LEN];

		mkframe(f2, b.info.mac, a.info.mac, a.info.addr.s_addr,
			b.info.addr.s_addr, 1, 5000, 40 + i);
		ind = *sq.head;
		size16 = direct_wqe(&sq, ind, f2, FRAME_LEN, i == 3);
		(*sq.head)++;
	}
	len = bf_image(&sq, ind, size16, img);
	sq.bf_copy(a.qp, bf, img, len);
	{
		uint32_t s[8];

		CU_ASSERT_EQUAL_FATAL(recv_seqs(&b, s, 8, 0), 4);
		for (i = 0; i < 4; i++)
			CU_ASSERT_EQUAL(s[i], 40 + i);
	}
	CU_ASSERT_EQUAL(drain(a.scq), 1);
	CU_ASSERT_EQUAL(*sq.tail, *sq.head);

	/* Bad register writes are counted and ignored. */
	c0 = t_emu_ctrs(a.dev);
	sq.bf_copy(a.qp, bf + 64, img, 64);		/* not a half */
	sq.bf_copy(a.qp, bf, img, 100);			/* not 64-granular */
	sq.bf_copy(a.qp, bf, img, 512);			/* too long */
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).bf_bad, c0.bf_bad + 3);
	/* Another QP's number in bf_qpn: ignored, the WQE stays in the
	 * ring until a real doorbell. */
	ind = *sq.head;
	size16 = direct_wqe(&sq, ind, fr, FRAME_LEN, true);
	(*sq.head)++;
	len = bf_image(&sq, ind, size16, img);
	((struct mlx4_wqe_ctrl_seg *)(void *)img)->bf_qpn ^= htobe32(1u << 8);
	sq.bf_copy(a.qp, bf, img, len);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).db_bad, c0.db_bad + 1);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.wqes, c0.dev.wqes);
	CU_ASSERT_EQUAL(t_emu_poll_wait(b.rcq, wc, 1, 0), 0);
	sq.db_write(a.qp, sq.doorbell_qpn);
	CU_ASSERT_EQUAL(recv_seqs(&b, NULL, 8, 0), 1);
	CU_ASSERT_EQUAL(drain(a.scq), 1);
	/* A stale BF (index already executed) is reduced to a doorbell. */
	sq.bf_copy(a.qp, bf, img, len);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).db_bad, c0.db_bad + 2);
	((struct mlx4_wqe_ctrl_seg *)(void *)img)->bf_qpn ^= htobe32(1u << 8);
	sq.bf_copy(a.qp, bf, img, len);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).bf_bad, c0.bf_bad + 4);
	CU_ASSERT_EQUAL(t_emu_poll_wait(b.rcq, wc, 1, 0), 0);
	port_close(&a);
	port_close(&b);
}

/* Receive CQ of 8 entries through 25 wraps; send CQ of 4. */
static void test_cq_owner_wrap(void)
{
	struct port a, b;
	struct qps_emu_cq *rcq;
	uint32_t seqs[8], next = 0, sent = 0, i;

	port_open(&a, NULL, 64, 0, 4, 8, false);
	port_open(&b, NULL, 8, 64, 8, 8, true);
	rcq = qps_emu_cq(b.rcq);
	CU_ASSERT_EQUAL(rcq->cqe_cnt, 8);
	CU_ASSERT_EQUAL(b.rcq->cqe, 8);
	/* Before the first pass every entry is invalid for software. */
	for (i = 0; i < rcq->cqe_cnt; i++)
		CU_ASSERT_EQUAL(rcq->ring[i].owner_sr_opcode & 0x80, 0x80);
	while (sent < 200) {
		struct ibv_wc wc[4];
		uint32_t n;

		CU_ASSERT_EQUAL_FATAL(send_seq(&a, NULL, b.info.mac,
					       b.info.addr.s_addr, 5000, sent,
					       5, false), 0);
		sent += 5;
		CU_ASSERT_EQUAL_FATAL(recv_seqs(&b, seqs, 5, 0), 5);
		for (i = 0; i < 5; i++)
			CU_ASSERT_EQUAL(seqs[i], next++);
		/* The entries just consumed carry this pass's owner bit. */
		for (n = rcq->cons - 5; n != rcq->cons; n++)
			CU_ASSERT_EQUAL(!!(rcq->ring[n & 7].owner_sr_opcode &
					   0x80), !!(n & 8));
		/* Four signalled sends to nobody: the first CQE also covers
		 * the five unsignalled ones. */
		for (i = 0; i < 4; i++) {
			struct ibv_send_wr wr = { .wr_id = 1000 + i,
						  .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED |
								IBV_SEND_INLINE };
			struct ibv_send_wr *bad;
			uint8_t fr[FRAME_LEN];
			struct ibv_sge sge = { .addr = (uintptr_t)fr,
					       .length = FRAME_LEN };

			mkframe(fr, (const uint8_t[6]){ 2, 0, 0, 0, 0, 1 },
				a.info.mac, 0, 0, 1, 1, 0);
			wr.sg_list = &sge;
			wr.num_sge = 1;
			CU_ASSERT_EQUAL_FATAL(E->post_send(a.qp, &wr, &bad), 0);
		}
		CU_ASSERT_EQUAL(E->poll_cq(a.scq, 4, wc), 4);
		for (i = 0; i < 4; i++)
			CU_ASSERT_EQUAL(wc[i].wr_id, 1000 + i);
	}
	CU_ASSERT_TRUE(rcq->cons > 3 * rcq->cqe_cnt);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).tx_cq_overrun, 0);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).tx_no_dest, 40 * 4);
	port_close(&a);
	port_close(&b);
}

static void test_cq_overrun(void)
{
	struct port a, b;
	struct qps_emu_counters c;
	struct ibv_wc wc[8];
	uint32_t s[8];
	int i;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 16, 8, 4, true);
	CU_ASSERT_EQUAL(send_to(&a, &b, 0, 10), 0);
	c = t_emu_ctrs(b.dev);
	CU_ASSERT_EQUAL(c.dev.rx_cqes, 4);
	CU_ASSERT_EQUAL(c.dev.rx_cq_overrun, 6);
	CU_ASSERT_EQUAL(c.dev.rx_drops, 6);
	/* Nothing was overwritten: the first four, in order. */
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 8, wc), 4);
	for (i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(wc[i].wr_id, (uint64_t)i);
		memcpy(&s[i], b.bufs + wc[i].wr_id * BUF_SZ + PAYLOAD_OFF, 4);
		CU_ASSERT_EQUAL(s[i], (uint32_t)i);
	}
	/* The dropped frames did not eat receive buffers. */
	CU_ASSERT_EQUAL(send_to(&a, &b, 10, 1), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 8, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 4);
	/* Drained: the loss is reported once, then the CQ goes on. */
	T_EQ(E->poll_cq(b.rcq, 8, wc), -EIO);
	T_EQ(E->poll_cq(b.rcq, 8, wc), 0);
	T_EQ(E->poll_cq(a.scq, 0, wc), 0);
	CU_ASSERT_EQUAL(drain(a.scq), 2);
	/* The injection hook raises the same report. */
	qps_emu_inject_cq_overrun(b.rcq);
	T_EQ(E->poll_cq(b.rcq, 8, wc), -EIO);
	T_EQ(E->poll_cq(b.rcq, 8, wc), 0);
	port_close(&a);
	port_close(&b);
}

static void test_steering(void)
{
	struct port a, b;
	struct qps_qp *q2;
	struct qps_flow *r1, *r2, *r3, *rmc, *rg, *many[QPS_EMU_MAX_FLOWS];
	uint8_t buf[256], buf2[256];
	struct ibv_flow_attr *fa;
	struct ibv_wc wc[4];
	struct in_addr g = { t_ip4("239.1.1.1") }, g2 = { t_ip4("239.1.1.2") },
		       any = { 0 };
	const uint8_t gmac[6] = { 1, 0, 0x5e, 1, 1, 1 };
	const uint8_t g2mac[6] = { 1, 0, 0x5e, 1, 1, 2 };
	uint64_t frames;
	unsigned int i, n;
	int r;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 32, 8, 64, false);
	q2 = mkqp(b.dev, b.scq, b.rcq, 8, 8);
	{	/* q2's buffers: b.bufs was sized for the first QP only. */
		void *mem;

		CU_ASSERT_EQUAL_FATAL(E->alloc_buf(b.dev, 8 * BUF_SZ, &mem), 0);
		for (i = 0; i < 8; i++) {
			struct ibv_sge sge = { .addr = (uintptr_t)mem +
						       i * BUF_SZ,
					       .length = BUF_SZ };
			struct ibv_recv_wr wr = { .wr_id = 500 + i,
						  .sg_list = &sge,
						  .num_sge = 1 }, *bad;

			CU_ASSERT_EQUAL(E->post_recv(q2, &wr, &bad), 0);
		}
	}
	/* Overlapping rules: priority 0 beats priority 1. */
	CU_ASSERT_EQUAL_FATAL(E->create_flow(b.qp, flow_build(buf,
		IBV_FLOW_ATTR_NORMAL, 1, NULL, 0, 5000), &r1), 0);
	CU_ASSERT_EQUAL_FATAL(E->create_flow(q2, flow_build(buf,
		IBV_FLOW_ATTR_NORMAL, 0, b.info.mac, b.info.addr.s_addr, 5000),
		&r2), 0);
	CU_ASSERT_EQUAL(send_to(&a, &b, 0, 1), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].qp_num, q2->qp_num);
	CU_ASSERT_EQUAL(wc[0].wr_id, 500);
	CU_ASSERT_EQUAL(E->destroy_flow(r2), 0);
	CU_ASSERT_EQUAL(send_to(&a, &b, 1, 1), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].qp_num, b.qp->qp_num);
	/* Equal priority: the older rule keeps winning. */
	CU_ASSERT_EQUAL_FATAL(E->create_flow(q2, flow_build(buf,
		IBV_FLOW_ATTR_NORMAL, 1, NULL, 0, 5000), &r3), 0);
	CU_ASSERT_EQUAL(send_to(&a, &b, 2, 1), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].qp_num, b.qp->qp_num);
	CU_ASSERT_EQUAL(E->destroy_flow(r1), 0);
	CU_ASSERT_EQUAL(send_to(&a, &b, 3, 1), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].qp_num, q2->qp_num);
	CU_ASSERT_EQUAL(E->destroy_flow(r3), 0);
	/* No rule: dropped and counted. */
	CU_ASSERT_EQUAL(send_to(&a, &b, 4, 1), 0);
	CU_ASSERT_EQUAL(E->poll_cq(b.rcq, 4, wc), 0);
	CU_ASSERT_EQUAL(t_emu_ctrs(b.dev).dev.rx_no_rule, 1);

	/* Multicast: joined groups only; MC_DEFAULT takes what no NORMAL
	 * rule steers. */
	CU_ASSERT_EQUAL(E->mcast_attach(b.dev, g, any), 0);
	CU_ASSERT_EQUAL_FATAL(E->create_flow(b.qp, flow_build(buf,
		IBV_FLOW_ATTR_MC_DEFAULT, 0, NULL, 0, 0), &rmc), 0);
	CU_ASSERT_EQUAL(send_seq(&a, NULL, gmac, g.s_addr, 6000, 10, 1, true),
			0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].qp_num, b.qp->qp_num);
	post_bufs(&b, (uint32_t)wc[0].wr_id, 1);
	frames = t_emu_ctrs(b.dev).rx_frames;
	CU_ASSERT_EQUAL(send_seq(&a, NULL, g2mac, g2.s_addr, 6000, 11, 1,
				 true), 0);
	CU_ASSERT_EQUAL(E->poll_cq(b.rcq, 4, wc), 0);
	/* filtered at L2 */
	CU_ASSERT_EQUAL(t_emu_ctrs(b.dev).rx_frames, frames);
	CU_ASSERT_EQUAL_FATAL(E->create_flow(q2, flow_build(buf,
		IBV_FLOW_ATTR_NORMAL, 7, gmac, g.s_addr, 6000), &rg), 0);
	CU_ASSERT_EQUAL(send_seq(&a, NULL, gmac, g.s_addr, 6000, 12, 1, true),
			0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].qp_num, q2->qp_num);
	/* Unicast is not for MC_DEFAULT. */
	CU_ASSERT_EQUAL(send_to(&a, &b, 13, 1), 0);
	CU_ASSERT_EQUAL(E->poll_cq(b.rcq, 4, wc), 0);
	CU_ASSERT_EQUAL(t_emu_ctrs(b.dev).dev.rx_no_rule, 2);
	CU_ASSERT_EQUAL(E->destroy_qp(q2), -EBUSY);	/* rg targets it */
	CU_ASSERT_EQUAL(E->destroy_flow(rg), 0);
	CU_ASSERT_EQUAL(E->destroy_flow(rmc), 0);
	CU_ASSERT_EQUAL(E->mcast_detach(b.dev, g, any), 0);
	CU_ASSERT_EQUAL(E->mcast_detach(b.dev, g, any), -ENOENT);

	/* Malformed or unsupported rules. */
	fa = flow_build(buf, IBV_FLOW_ATTR_NORMAL, 0, b.info.mac, 0, 5000);
	memcpy(buf2, buf, sizeof(buf2));
	((struct ibv_flow_spec_eth *)(void *)(buf2 + sizeof(*fa)))->type =
		IBV_FLOW_SPEC_IPV6;
	CU_ASSERT_EQUAL(E->create_flow(b.qp, (void *)buf2, &r1), -EOPNOTSUPP);
	memcpy(buf2, buf, sizeof(buf2));
	((struct ibv_flow_spec_eth *)(void *)(buf2 + sizeof(*fa)))->size = 12;
	CU_ASSERT_EQUAL(E->create_flow(b.qp, (void *)buf2, &r1), -EINVAL);
	memcpy(buf2, buf, sizeof(buf2));
	((struct ibv_flow_attr *)(void *)buf2)->size = sizeof(*fa) + 20;
	CU_ASSERT_EQUAL(E->create_flow(b.qp, (void *)buf2, &r1), -EINVAL);
	memcpy(buf2, buf, sizeof(buf2));
	((struct ibv_flow_attr *)(void *)buf2)->flags =
		IBV_FLOW_ATTR_FLAGS_DONT_TRAP;
	CU_ASSERT_EQUAL(E->create_flow(b.qp, (void *)buf2, &r1), -EOPNOTSUPP);
	memcpy(buf2, buf, sizeof(buf2));
	((struct ibv_flow_attr *)(void *)buf2)->type = IBV_FLOW_ATTR_SNIFFER;
	CU_ASSERT_EQUAL(E->create_flow(b.qp, (void *)buf2, &r1), -EOPNOTSUPP);
	memcpy(buf2, buf, sizeof(buf2));
	((struct ibv_flow_attr *)(void *)buf2)->priority = 0x1000;
	CU_ASSERT_EQUAL(E->create_flow(b.qp, (void *)buf2, &r1), -EINVAL);
	/* Table full. */
	for (n = 0; n < QPS_EMU_MAX_FLOWS; n++) {
		r = E->create_flow(b.qp, fa, &many[n]);
		if (r)
			break;
	}
	CU_ASSERT_EQUAL(n, QPS_EMU_MAX_FLOWS);
	CU_ASSERT_EQUAL(E->create_flow(b.qp, fa, &r1), -ENOSPC);
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(E->destroy_flow(many[i]), 0);
	{
		struct qps_emu_qp_counters q;

		CU_ASSERT_EQUAL(qps_emu_qp_counters(q2, &q), 0);
		CU_ASSERT_EQUAL(q.rx_cqes, 3);
		CU_ASSERT_EQUAL(qps_emu_qp_counters(b.qp, &q), 0);
		CU_ASSERT_EQUAL(q.rx_cqes, 3);
		CU_ASSERT_EQUAL(qps_emu_qp_counters(a.qp, &q), 0);
		CU_ASSERT_EQUAL(q.tx.wqes, 9);
		CU_ASSERT_EQUAL(q.tx.tx_cqes, 9);
	}
	CU_ASSERT_EQUAL(drain(a.scq), 9);
	CU_ASSERT_EQUAL(E->destroy_qp(q2), 0);
	port_close(&a);
	port_close(&b);
}

/* What a hostile or broken peer writes into shared memory is checked,
 * never followed. */
static void test_corrupt_shared_state(void)
{
	struct port a, b;
	struct qps_emu_shm_rq *srq;
	struct qps_emu_shm_cq *scq;
	struct qps_emu_counters c;
	struct qps_emu_cq *rcq;
	struct ibv_wc wc[4];
	uint32_t *head, saved, u;
	uint64_t off;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 4, 8, 8, true);
	head = qps_emu_test_rq_head(b.qp);
	srq = qps_emu_test_shm_rq(b.qp);
	scq = qps_emu_test_shm_cq(b.rcq);
	CU_ASSERT_PTR_NOT_NULL_FATAL(head);

	/* Producer index far beyond the ring. */
	saved = *head;
	*head = srq->tail + 100000;
	CU_ASSERT_EQUAL(send_to(&a, &b, 0, 1), 0);
	c = t_emu_ctrs(b.dev);
	CU_ASSERT_EQUAL(c.rx_corrupt, 1);
	CU_ASSERT_EQUAL(c.dev.rx_drops, 1);
	CU_ASSERT_EQUAL(E->poll_cq(b.rcq, 4, wc), 0);
	*head = saved;
	CU_ASSERT_EQUAL(send_to(&a, &b, 1, 1), 0);
	CU_ASSERT_EQUAL(recv_seqs(&b, NULL, 4, 0), 1);

	/* Ring outside the queue area; ring size not a power of two. */
	off = srq->ring_off;
	srq->ring_off = QPS_EMU_QAREA_SIZE - 16;
	CU_ASSERT_EQUAL(send_to(&a, &b, 2, 1), 0);
	srq->ring_off = off;
	u = srq->wqe_cnt;
	srq->wqe_cnt = 3;
	CU_ASSERT_EQUAL(send_to(&a, &b, 3, 1), 0);
	srq->wqe_cnt = u;
	/* A CQ with a bogus geometry or consumer index. */
	u = scq->cqe_cnt;
	scq->cqe_cnt = 1u << 30;
	CU_ASSERT_EQUAL(send_to(&a, &b, 4, 1), 0);
	scq->cqe_cnt = u;
	u = scq->cons;
	scq->cons = scq->prod + 1000;
	CU_ASSERT_EQUAL(send_to(&a, &b, 5, 1), 0);
	scq->cons = u;
	/* A steering rule pointing at no RQ. */
	qps_emu_dev(b.dev)->sp->flow[0].rq = 99;
	CU_ASSERT_EQUAL(send_to(&a, &b, 6, 1), 0);
	qps_emu_dev(b.dev)->sp->flow[0].rq = srq - qps_emu_dev(b.dev)->sp->rq;
	c = t_emu_ctrs(b.dev);
	CU_ASSERT_EQUAL(c.rx_corrupt, 6);
	CU_ASSERT_EQUAL(E->poll_cq(b.rcq, 4, wc), 0);

	/* A posted WQE whose buffer lies outside the pool: consumed with a
	 * protection error, nothing written. */
	{
		struct mlx4_wqe_data_seg *ds =
			&qps_emu_qp(b.qp)->rq_ring[srq->tail &
						   (srq->wqe_cnt - 1)];

		ds->addr = htobe64(QPS_EMU_POOL_SIZE - 8);
	}
	CU_ASSERT_EQUAL(send_to(&a, &b, 7, 1), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_LOC_PROT_ERR);
	post_bufs(&b, (uint32_t)wc[0].wr_id, 1);
	CU_ASSERT_EQUAL(t_emu_ctrs(b.dev).rx_corrupt, 7);

	/* Bogus CQEs in our CQ: unknown QP, an index that is not the next,
	 * another port's QP. */
	rcq = qps_emu_cq(b.rcq);
	{
		struct qps_emu_shm_port *sp = qps_emu_dev(b.dev)->sp;
		struct qps_emu_cqe_info ci = { .qpn = 0x123456,
					       .opcode = QPS_EMU_RECV_OPCODE_SEND };

		CU_ASSERT_EQUAL(qps_emu_cq_write(sp, qps_emu_dev(b.dev)->qarea,
						 rcq->slot, &ci),
				QPS_EMU_CQE_OK);
		ci.qpn = b.qp->qp_num;
		ci.wqe_index = 999;
		CU_ASSERT_EQUAL(qps_emu_cq_write(sp, qps_emu_dev(b.dev)->qarea,
						 rcq->slot, &ci),
				QPS_EMU_CQE_OK);
		ci.qpn = a.qp->qp_num;
		ci.wqe_index = (uint16_t)qps_emu_qp(b.qp)->rq_done;
		CU_ASSERT_EQUAL(qps_emu_cq_write(sp, qps_emu_dev(b.dev)->qarea,
						 rcq->slot, &ci),
				QPS_EMU_CQE_OK);
	}
	CU_ASSERT_EQUAL(E->poll_cq(b.rcq, 4, wc), 0);
	CU_ASSERT_EQUAL(t_emu_ctrs(b.dev).cqe_corrupt, 3);
	/* A real CQE whose length was tampered with beyond the posted
	 * buffer: reported as an error, never as a long read. */
	CU_ASSERT_EQUAL(send_to(&a, &b, 8, 1), 0);
	rcq->ring[rcq->cons & (rcq->cqe_cnt - 1)].byte_cnt = htobe32(BUF_SZ + 1);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(b.rcq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_GENERAL_ERR);
	CU_ASSERT_EQUAL(wc[0].byte_len, 0);
	post_bufs(&b, (uint32_t)wc[0].wr_id, 1);
	CU_ASSERT_EQUAL(t_emu_ctrs(b.dev).cqe_corrupt, 4);
	/* Still working. */
	CU_ASSERT_EQUAL(send_to(&a, &b, 9, 1), 0);
	CU_ASSERT_EQUAL(recv_seqs(&b, NULL, 4, 0), 1);
	CU_ASSERT_EQUAL(drain(a.scq), 10);
	port_close(&a);
	port_close(&b);
}

/* Random damage to a peer's shared state, restored after each frame:
 * never a crash or a write out of bounds (run under ASan), always
 * counted. */
static void test_fuzz_shared_state(void)
{
	struct port a, b;
	struct qps_emu_shm_port *sp, saved;
	struct qps_emu_qp *bq;
	struct qps_emu_cq *bc;
	struct in_addr g = { t_ip4("239.9.9.9") }, any = { 0 };
	const uint8_t gmac[6] = { 1, 0, 0x5e, 9, 9, 9 };
	uint8_t ring_rq[256], ring_cq[256];
	unsigned int seed = 12345, it;
	int r;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 16, 8, 16, true);
	CU_ASSERT_EQUAL(E->mcast_attach(b.dev, g, any), 0);
	sp = qps_emu_dev(b.dev)->sp;
	bq = qps_emu_qp(b.qp);
	bc = qps_emu_cq(b.rcq);
	for (it = 0; it < 3000; it++) {
		struct {
			void *p;
			size_t len;
		} t[] = {
			{ &sp->flow[0], sizeof(sp->flow[0]) },
			{ &sp->rq[bq->rq_slot], sizeof(sp->rq[0]) },
			{ &sp->cq[bc->slot], sizeof(sp->cq[0]) },
			{ &sp->mc[0], sizeof(sp->mc[0]) },
			{ &sp->flow_seq, 8 },
			{ bq->rq_ring, sizeof(ring_rq) },
			{ bc->ring, sizeof(ring_cq) },
		};
		unsigned int k, n = 1 + rand_r(&seed) % 4;
		struct ibv_wc wc[16];

		memcpy(&saved, sp, sizeof(saved));
		memcpy(ring_rq, bq->rq_ring, sizeof(ring_rq));
		memcpy(ring_cq, bc->ring, sizeof(ring_cq));
		for (k = 0; k < n; k++) {
			unsigned int w = rand_r(&seed) % 7;
			uint8_t *p = t[w].p;

			p[rand_r(&seed) % t[w].len] ^=
				(uint8_t)(1u << (rand_r(&seed) % 8));
			if (rand_r(&seed) % 4 == 0)
				p[rand_r(&seed) % t[w].len] =
					(uint8_t)rand_r(&seed);
		}
		if (it % 3 == 0)
			send_to(&a, &b, it, 1);
		else if (it % 3 == 1)
			send_seq(&a, NULL, gmac, g.s_addr, 5000, it, 1, true);
		else
			send_seq(&a, NULL, (const uint8_t[6]){ 0xff, 0xff, 0xff,
					0xff, 0xff, 0xff }, INADDR_BROADCAST,
				 5000, it, 1, true);
		/* -EIO: the overrun flag, which a peer may set too. */
		r = E->poll_cq(b.rcq, 16, wc);
		CU_ASSERT(r >= 0 || r == -EIO);
		drain(a.scq);
		/* Put the valid state back; not the lock, not the counters. */
		{
			size_t s0 = offsetof(struct qps_emu_shm_port, state);
			size_t s1 = offsetof(struct qps_emu_shm_port, st);
			size_t s2 = s1 + sizeof(saved.st);

			memcpy((uint8_t *)sp + s0, (uint8_t *)&saved + s0,
			       s1 - s0);
			memcpy((uint8_t *)sp + s2, (uint8_t *)&saved + s2,
			       sizeof(saved) - s2);
		}
		memcpy(bq->rq_ring, ring_rq, sizeof(ring_rq));
		memcpy(bc->ring, ring_cq, sizeof(ring_cq));
	}
	CU_ASSERT_TRUE(t_emu_ctrs(b.dev).rx_corrupt > 0);
	port_close(&a);
	port_close(&b);
}

static int count_rx(struct port *p)
{
	uint32_t s[16];

	return recv_seqs(p, s, 16, 0);
}

static void test_unicast_multicast_broadcast(void)
{
	struct port a, b, c;
	struct in_addr g = { t_ip4("239.2.3.4") }, any = { 0 };
	uint8_t gmac[6] = { 1, 0, 0x5e, 2, 3, 4 };
	const uint8_t bc[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	const uint8_t nobody[6] = { 2, 0x51, 0x50, 0, 0, 15 };
	const uint8_t foreign[6] = { 0, 0x11, 0x22, 0x33, 0x44, 0x55 };
	struct ibv_wc wc[4];

	port_open(&a, NULL, 64, 16, 64, 64, true);
	port_open(&b, NULL, 64, 16, 64, 64, true);
	port_open(&c, NULL, 64, 16, 64, 64, true);
	CU_ASSERT_EQUAL(send_to(&a, &b, 0, 1), 0);
	CU_ASSERT_EQUAL(count_rx(&a), 0);
	CU_ASSERT_EQUAL(count_rx(&b), 1);
	CU_ASSERT_EQUAL(count_rx(&c), 0);
	/* To itself. */
	CU_ASSERT_EQUAL(send_to(&a, &a, 0, 2), 0);
	CU_ASSERT_EQUAL(count_rx(&a), 2);
	/* Multicast: members only, the sender included. */
	CU_ASSERT_EQUAL(E->mcast_attach(b.dev, g, any), 0);
	CU_ASSERT_EQUAL(E->mcast_attach(b.dev, g, any), 0);
	CU_ASSERT_EQUAL(E->mcast_attach(a.dev, g, any), 0);
	CU_ASSERT_EQUAL(send_seq(&a, NULL, gmac, g.s_addr, 5000, 0, 1, true),
			0);
	CU_ASSERT_EQUAL(count_rx(&a), 1);
	CU_ASSERT_EQUAL(count_rx(&b), 1);
	CU_ASSERT_EQUAL(count_rx(&c), 0);
	/* Refcounted: one leave of two keeps the filter. */
	CU_ASSERT_EQUAL(E->mcast_detach(b.dev, g, any), 0);
	CU_ASSERT_EQUAL(send_seq(&a, NULL, gmac, g.s_addr, 5000, 0, 1, true),
			0);
	CU_ASSERT_EQUAL(count_rx(&b), 1);
	CU_ASSERT_EQUAL(E->mcast_detach(b.dev, g, any), 0);
	CU_ASSERT_EQUAL(send_seq(&a, NULL, gmac, g.s_addr, 5000, 0, 1, true),
			0);
	CU_ASSERT_EQUAL(count_rx(&b), 0);
	CU_ASSERT_EQUAL(count_rx(&a), 2);
	/* Broadcast: every port. */
	CU_ASSERT_EQUAL(send_seq(&c, NULL, bc, INADDR_BROADCAST, 5000, 0, 1,
				 true), 0);
	CU_ASSERT_EQUAL(count_rx(&a), 1);
	CU_ASSERT_EQUAL(count_rx(&b), 1);
	CU_ASSERT_EQUAL(count_rx(&c), 1);
	/* Unicast to a MAC nobody has: a successful send, counted. */
	CU_ASSERT_EQUAL(send_seq(&a, NULL, nobody, 0, 5000, 0, 1, true), 0);
	CU_ASSERT_EQUAL(send_seq(&a, NULL, foreign, 0, 5000, 0, 1, true), 0);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).tx_no_dest, 2);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.tx_drops, 2);
	CU_ASSERT_EQUAL(count_rx(&a) + count_rx(&b) + count_rx(&c), 0);
	CU_ASSERT_EQUAL(drain(a.scq), 7);
	CU_ASSERT_EQUAL(E->poll_cq(c.scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	port_close(&a);
	port_close(&b);
	port_close(&c);
}

/* Two processes on one wire. */
static void test_fork_two_processes(void)
{
	struct port p;
	int go[2], i, status;
	char ch;
	pid_t pid;
	uint8_t mac[6];
	struct in_addr peer = { t_ip4("198.18.0.11") };
	struct port peer_port;
	uint32_t s[64], got = 0;
	bool ok = true;

	CU_ASSERT_EQUAL_FATAL(pipe(go), 0);
	port_open(&p, "198.18.0.10", 64, 16, 64, 64, true);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		struct port c;
		struct qps_dev_attr attr = { .dev = g_wire, .addr_set = true };
		struct qps_mr *mr = NULL;
		uint32_t want = 0;
		uint64_t end;
		int rc = 0;

		/* No CUnit in here: plain checks and an exit code. */
		memset(&c, 0, sizeof(c));
		attr.addr.s_addr = t_ip4("198.18.0.11");
		if (E->open(&attr, &c.dev) || E->query(c.dev, &c.info) ||
		    E->create_cq(c.dev, 64, &c.scq) ||
		    E->create_cq(c.dev, 64, &c.rcq))
			_exit(10);
		{
			struct qps_qp_init_attr qa = {
				.qp_type = IBV_QPT_RAW_PACKET,
				.send_cq = c.scq, .recv_cq = c.rcq,
				.cap = { .max_send_wr = 8, .max_recv_wr = 64,
					 .max_send_sge = 1, .max_recv_sge = 1 },
			};
			uint8_t fb[256];
			void *b;

			if (E->create_qp(c.dev, &qa, &c.qp) ||
			    E->alloc_buf(c.dev, 64 * BUF_SZ, &b) ||
			    E->create_flow(c.qp, flow_build(fb,
				IBV_FLOW_ATTR_ALL_DEFAULT, 0, NULL, 0, 0),
				&c.flow))
				_exit(11);
			c.bufs = b;
		}
		for (i = 0; i < 64; i++) {
			struct ibv_sge sge = { .addr = (uintptr_t)c.bufs +
						       (size_t)i * BUF_SZ,
					       .length = BUF_SZ };
			struct ibv_recv_wr wr = { .wr_id = (uint64_t)i,
						  .sg_list = &sge,
						  .num_sge = 1 }, *bad;

			if (E->post_recv(c.qp, &wr, &bad))
				_exit(12);
		}
		if (write(go[1], "r", 1) != 1)
			_exit(13);
		end = t_now_ms() + 5000;
		while (want < 50 && t_now_ms() < end) {
			struct ibv_wc wc[16];
			int n = E->poll_cq(c.rcq, 16, wc), k;

			for (k = 0; k < n; k++) {
				uint32_t seq;

				memcpy(&seq, c.bufs + wc[k].wr_id * BUF_SZ +
				       PAYLOAD_OFF, 4);
				if (wc[k].status || seq != want++)
					rc = 14;
			}
			if (n <= 0)
				usleep(500);
		}
		if (want != 50)
			rc = 15;
		/* Reply with a data-segment send from registered memory. */
		{
			uint8_t fr[FRAME_LEN], pmac[6];
			struct in_addr pa = { t_ip4("198.18.0.10") };
			struct ibv_sge sge;
			struct ibv_send_wr wr = { .opcode = IBV_WR_SEND,
						  .send_flags =
							IBV_SEND_SIGNALED,
						  .num_sge = 1 }, *bad;
			struct ibv_wc wc;

			if (E->resolve(c.dev, pa, pmac) ||
			    E->reg_mr(c.dev, fr, sizeof(fr), &mr))
				_exit(16);
			mkframe(fr, pmac, c.info.mac, c.info.addr.s_addr,
				pa.s_addr, 1, 5000, 4242);
			sge.addr = (uintptr_t)fr;
			sge.length = FRAME_LEN;
			sge.lkey = mr->lkey;
			wr.sg_list = &sge;
			if (E->post_send(c.qp, &wr, &bad) ||
			    E->poll_cq(c.scq, 1, &wc) != 1 || wc.status)
				rc = 17;
		}
		E->close(c.dev);
		_exit(rc);
	}
	close(go[1]);
	CU_ASSERT_EQUAL(read(go[0], &ch, 1), 1);
	close(go[0]);
	CU_ASSERT_EQUAL(E->resolve(p.dev, peer, mac), 0);
	memset(&peer_port, 0, sizeof(peer_port));
	memcpy(peer_port.info.mac, mac, 6);
	peer_port.info.addr = peer;
	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(send_to(&p, &peer_port, (uint32_t)i * 10, 10),
				0);
	CU_ASSERT_EQUAL(drain(p.scq), 5);
	got = (uint32_t)recv_seqs(&p, s, 1, 5000);
	CU_ASSERT_EQUAL(got, 1);
	if (got == 1)
		ok = s[0] == 4242;
	CU_ASSERT_TRUE(ok);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_TRUE(WIFEXITED(status));
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
	port_close(&p);
	CU_ASSERT_FALSE(shm_exists());
}

static void test_data_segments_and_errors(void)
{
	struct port a, b;
	struct qps_mr *mr;
	uint8_t *mem = calloc(1, 8192);
	struct ibv_sge sge[2];
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND, .sg_list = sge },
			   *bad;
	struct ibv_wc wc[4];
	uint32_t lkey;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 16, 8, 64, true);
	mkframe(mem, b.info.mac, a.info.mac, a.info.addr.s_addr,
		b.info.addr.s_addr, 1, 5000, 77);
	CU_ASSERT_EQUAL_FATAL(E->reg_mr(a.dev, mem, 4096, &mr), 0);
	lkey = mr->lkey;
	/* Two segments gathered into one frame. */
	sge[0] = (struct ibv_sge){ (uintptr_t)mem, 20, lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)mem + 20, FRAME_LEN - 20, lkey };
	wr.num_sge = 2;
	wr.wr_id = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	CU_ASSERT_EQUAL(E->post_send(a.qp, &wr, &bad), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[0].opcode, IBV_WC_SEND);
	CU_ASSERT_EQUAL(wc[0].qp_num, a.qp->qp_num);
	CU_ASSERT_EQUAL(wc[0].src_qp, 0);
	{
		uint32_t s;

		CU_ASSERT_EQUAL_FATAL(recv_seqs(&b, &s, 1, 0), 1);
		CU_ASSERT_EQUAL(s, 77);
	}
	/* Bad lkey: a protection error, even unsignalled. */
	wr.num_sge = 1;
	wr.wr_id = 2;
	wr.send_flags = 0;
	sge[0] = (struct ibv_sge){ (uintptr_t)mem, FRAME_LEN, lkey ^ 0x1000 };
	CU_ASSERT_EQUAL(E->post_send(a.qp, &wr, &bad), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_LOC_PROT_ERR);
	CU_ASSERT_EQUAL(wc[0].wr_id, 2);
	/* Outside the registered range. */
	sge[0] = (struct ibv_sge){ (uintptr_t)mem + 4096 - 20, FRAME_LEN, lkey };
	wr.wr_id = 3;
	CU_ASSERT_EQUAL(E->post_send(a.qp, &wr, &bad), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_LOC_PROT_ERR);
	/* Longer than MTU + Ethernet header; shorter than the header. */
	sge[0] = (struct ibv_sge){ (uintptr_t)mem, 1515, lkey };
	wr.wr_id = 4;
	CU_ASSERT_EQUAL(E->post_send(a.qp, &wr, &bad), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_LOC_LEN_ERR);
	sge[0] = (struct ibv_sge){ (uintptr_t)mem, 13, lkey };
	wr.wr_id = 5;
	CU_ASSERT_EQUAL(E->post_send(a.qp, &wr, &bad), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_LOC_LEN_ERR);
	/* The largest frame passes. */
	sge[0] = (struct ibv_sge){ (uintptr_t)mem, 1514, lkey };
	wr.wr_id = 6;
	wr.send_flags = IBV_SEND_SIGNALED;
	CU_ASSERT_EQUAL(E->post_send(a.qp, &wr, &bad), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[0].byte_len, 1514);
	CU_ASSERT_EQUAL_FATAL(t_emu_poll_wait(b.rcq, wc, 1, 0), 1);
	CU_ASSERT_EQUAL(wc[0].byte_len, 1514);
	post_bufs(&b, (uint32_t)wc[0].wr_id, 1);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.tx_drops, 4);
	/* A deregistered key is stale. */
	CU_ASSERT_EQUAL(E->dereg_mr(mr), 0);
	sge[0] = (struct ibv_sge){ (uintptr_t)mem, FRAME_LEN, lkey };
	wr.wr_id = 7;
	CU_ASSERT_EQUAL(E->post_send(a.qp, &wr, &bad), 0);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_LOC_PROT_ERR);
	/* A receive buffer smaller than the frame. */
	{
		struct port c;
		struct ibv_sge rs;
		struct ibv_recv_wr rw = { .wr_id = 9, .sg_list = &rs,
					  .num_sge = 1 }, *rbad;

		uint8_t fb[256];
		void *mem1;

		port_open(&c, NULL, 8, 0, 8, 8, false);
		CU_ASSERT_EQUAL(E->destroy_qp(c.qp), 0);
		c.qp = mkqp(c.dev, c.scq, c.rcq, 8, 1);
		CU_ASSERT_EQUAL_FATAL(E->alloc_buf(c.dev, BUF_SZ, &mem1), 0);
		c.bufs = mem1;
		c.nbufs = 1;
		CU_ASSERT_EQUAL(E->create_flow(c.qp, flow_build(fb,
			IBV_FLOW_ATTR_ALL_DEFAULT, 0, NULL, 0, 0), &c.flow), 0);
		rs = (struct ibv_sge){ (uintptr_t)c.bufs, 20, 0 };
		CU_ASSERT_EQUAL(E->post_recv(c.qp, &rw, &rbad), 0);
		CU_ASSERT_EQUAL(send_to(&a, &c, 0, 1), 0);
		CU_ASSERT_EQUAL_FATAL(E->poll_cq(c.rcq, 4, wc), 1);
		CU_ASSERT_EQUAL(wc[0].status, IBV_WC_LOC_LEN_ERR);
		CU_ASSERT_EQUAL(wc[0].wr_id, 9);
		CU_ASSERT_EQUAL(t_emu_ctrs(c.dev).rx_len_err, 1);
		port_close(&c);
	}
	CU_ASSERT_EQUAL(drain(a.scq), 1);
	port_close(&a);
	port_close(&b);
	free(mem);
}

static void test_stepping(void)
{
	struct port a, b;
	uint32_t s[8];
	int i;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 16, 8, 64, true);
	qps_emu_set_stepping(a.dev, true);
	CU_ASSERT_EQUAL(send_to(&a, &b, 0, 5), 0);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.doorbells, 1);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.wqes, 0);
	CU_ASSERT_EQUAL(recv_seqs(&b, s, 8, 0), 0);
	CU_ASSERT_EQUAL(qps_emu_step(a.dev, 2), 2);
	CU_ASSERT_EQUAL_FATAL(recv_seqs(&b, s, 8, 0), 2);
	CU_ASSERT_EQUAL(s[0], 0);
	CU_ASSERT_EQUAL(s[1], 1);
	CU_ASSERT_EQUAL(qps_emu_step(a.dev, 0), 3);
	CU_ASSERT_EQUAL_FATAL(recv_seqs(&b, s, 8, 0), 3);
	for (i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(s[i], 2 + (uint32_t)i);
	CU_ASSERT_EQUAL(qps_emu_step(a.dev, 0), 0);
	CU_ASSERT_EQUAL(drain(a.scq), 1);
	/* Switching stepping off runs what is latched. */
	CU_ASSERT_EQUAL(send_to(&a, &b, 5, 2), 0);
	CU_ASSERT_EQUAL(recv_seqs(&b, s, 8, 0), 0);
	qps_emu_set_stepping(a.dev, false);
	CU_ASSERT_EQUAL(recv_seqs(&b, s, 8, 0), 2);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.wqes, 7);
	CU_ASSERT_EQUAL(drain(a.scq), 1);
	port_close(&a);
	port_close(&b);
}

static void test_event_fd(void)
{
	struct port a, b;
	int fd;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 16, 8, 64, true);
	fd = E->get_event_fd(b.dev);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FALSE(readable(fd));
	/* Not armed: no event. */
	CU_ASSERT_EQUAL(send_to(&a, &b, 0, 1), 0);
	CU_ASSERT_FALSE(readable(fd));
	CU_ASSERT_EQUAL(recv_seqs(&b, NULL, 4, 0), 1);
	/* Armed: one event for the next CQE, then disarmed. */
	CU_ASSERT_EQUAL(E->req_notify_cq(b.rcq), 0);
	CU_ASSERT_FALSE(readable(fd));
	CU_ASSERT_EQUAL(send_to(&a, &b, 1, 1), 0);
	CU_ASSERT_TRUE(readable(fd));
	CU_ASSERT_EQUAL(send_to(&a, &b, 2, 1), 0);
	CU_ASSERT_EQUAL(E->ack_events(b.dev), 1);
	CU_ASSERT_FALSE(readable(fd));
	/* Arming with CQEs already waiting fires at once. */
	CU_ASSERT_EQUAL(E->req_notify_cq(b.rcq), 0);
	CU_ASSERT_TRUE(readable(fd));
	CU_ASSERT_EQUAL(E->ack_events(b.dev), 1);
	CU_ASSERT_EQUAL(recv_seqs(&b, NULL, 4, 0), 2);
	/* The sender's own send CQ events on its own fd. */
	CU_ASSERT_EQUAL(drain(a.scq), 3);
	CU_ASSERT_EQUAL(E->req_notify_cq(a.scq), 0);
	CU_ASSERT_EQUAL(send_to(&a, &b, 3, 1), 0);
	CU_ASSERT_TRUE(readable(E->get_event_fd(a.dev)));
	CU_ASSERT_EQUAL(E->ack_events(a.dev), 1);
	CU_ASSERT_EQUAL(E->ack_events(a.dev), 0);
	CU_ASSERT_EQUAL(drain(a.scq), 1);
	port_close(&a);
	port_close(&b);
}

static void test_post_errors(void)
{
	struct port a, b;
	struct qps_dev *d;
	struct qps_cq *cq;
	struct qps_qp *qp;
	struct qps_mlx4_sq sq;
	uint8_t fr[300];
	struct ibv_sge sge[20];
	struct ibv_send_wr wr[40], *bad = NULL;
	struct ibv_recv_wr rw, *rbad = NULL;
	struct qps_emu_counters c0;
	struct ibv_wc wc[64];
	int i;

	port_open(&a, NULL, 16, 0, 64, 8, false);
	port_open(&b, NULL, 8, 64, 8, 64, true);
	CU_ASSERT_EQUAL(E->mlx4_sq(a.qp, &sq), 0);
	mkframe(fr, b.info.mac, a.info.mac, a.info.addr.s_addr,
		b.info.addr.s_addr, 1, 5000, 0);
	for (i = 0; i < 20; i++)
		sge[i] = (struct ibv_sge){ (uintptr_t)fr, FRAME_LEN, 0 };
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 40; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_INLINE;
		wr[i].next = &wr[i + 1];
	}
	/* Too many SGEs in the second WR: the first goes out. */
	wr[1].num_sge = 16;
	wr[1].next = NULL;
	c0 = t_emu_ctrs(a.dev);
	CU_ASSERT_EQUAL(E->post_send(a.qp, wr, &bad), -EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.doorbells, c0.dev.doorbells + 1);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.wqes, c0.dev.wqes + 1);
	wr[1].num_sge = 1;
	/* Inline data beyond max_inline. */
	sge[0].length = 225;
	wr[0].next = NULL;
	CU_ASSERT_EQUAL(E->post_send(a.qp, wr, &bad), -ENOMEM);
	CU_ASSERT_PTR_EQUAL(bad, &wr[0]);
	sge[0].length = FRAME_LEN;
	/* Not a SEND. */
	wr[0].opcode = IBV_WR_RDMA_WRITE;
	CU_ASSERT_EQUAL(E->post_send(a.qp, wr, &bad), -EINVAL);
	wr[0].opcode = IBV_WR_SEND;
	/* Ring full: max_post go, the rest are refused in one call. */
	for (i = 0; i < 39; i++)
		wr[i].next = &wr[i + 1];
	wr[39].next = NULL;
	wr[sq.max_post - 2].send_flags |= IBV_SEND_SIGNALED;
	c0 = t_emu_ctrs(a.dev);
	CU_ASSERT_EQUAL(E->post_send(a.qp, wr, &bad), -ENOMEM);
	/* One WQE of the first call is still outstanding (unsignalled). */
	CU_ASSERT_PTR_EQUAL(bad, &wr[sq.max_post - 1]);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.doorbells, c0.dev.doorbells + 1);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.wqes,
			c0.dev.wqes + sq.max_post - 1);
	CU_ASSERT_EQUAL(E->poll_cq(a.scq, 8, wc), 1);
	CU_ASSERT_EQUAL(*sq.tail, *sq.head);
	CU_ASSERT_EQUAL(recv_seqs(&b, NULL, 64, 0), (int)sq.max_post);

	/* Receive side. */
	rw = (struct ibv_recv_wr){ .wr_id = 1, .sg_list = sge, .num_sge = 1 };
	sge[0] = (struct ibv_sge){ (uintptr_t)fr, 64, 0 };	/* not pool */
	CU_ASSERT_EQUAL(E->post_recv(b.qp, &rw, &rbad), -EINVAL);
	CU_ASSERT_PTR_EQUAL(rbad, &rw);
	sge[0] = (struct ibv_sge){ (uintptr_t)b.bufs, 64, 0 };
	rw.num_sge = 2;
	CU_ASSERT_EQUAL(E->post_recv(b.qp, &rw, &rbad), -EINVAL);
	rw.num_sge = 1;
	CU_ASSERT_EQUAL(E->post_recv(b.qp, &rw, &rbad), -ENOMEM); /* full */
	CU_ASSERT_EQUAL(E->post_recv(a.qp, &rw, &rbad), -EINVAL); /* no RQ */

	/* Object limits. */
	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, &d), 0);
	CU_ASSERT_EQUAL(E->create_cq(d, 0, &cq), -EINVAL);
	CU_ASSERT_EQUAL(E->create_cq(d, QPS_EMU_MAX_CQE + 1, &cq), -EINVAL);
	CU_ASSERT_EQUAL_FATAL(E->create_cq(d, 100, &cq), 0);
	CU_ASSERT_EQUAL(cq->cqe, 128);
	{
		struct qps_qp_init_attr qa = {
			.qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq,
			.cap = { .max_send_wr = 8 },
		};

		CU_ASSERT_EQUAL(E->create_qp(d, &qa, &qp), -EOPNOTSUPP);
		qa.qp_type = IBV_QPT_RAW_PACKET;
		qa.cap.max_send_wr = QPS_EMU_MAX_WR + 1;
		CU_ASSERT_EQUAL(E->create_qp(d, &qa, &qp), -EINVAL);
		qa.cap.max_send_wr = 8;
		qa.cap.max_inline_data = 1000;
		CU_ASSERT_EQUAL(E->create_qp(d, &qa, &qp), -EINVAL);
		qa.cap.max_inline_data = 400;	/* needs 512-byte strides */
		CU_ASSERT_EQUAL_FATAL(E->create_qp(d, &qa, &qp), 0);
		CU_ASSERT_EQUAL(qp->cap.max_inline_data, 464);
		CU_ASSERT_EQUAL(E->destroy_cq(cq), -EBUSY);
		CU_ASSERT_EQUAL(E->destroy_qp(qp), 0);
	}
	CU_ASSERT_EQUAL(E->destroy_cq(cq), 0);
	CU_ASSERT_EQUAL(E->close(d), 0);
	port_close(&a);
	port_close(&b);
}

/* WQEs that are not what they claim: error CQEs, nothing sent. */
static void test_malformed_wqe(void)
{
	struct port a, b;
	struct qps_mlx4_sq sq;
	struct mlx4_wqe_ctrl_seg *c;
	uint8_t fr[FRAME_LEN];
	struct ibv_wc wc[4];
	uint32_t ind;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 16, 8, 64, true);
	CU_ASSERT_EQUAL_FATAL(E->mlx4_sq(a.qp, &sq), 0);
	mkframe(fr, b.info.mac, a.info.mac, a.info.addr.s_addr,
		b.info.addr.s_addr, 1, 5000, 0);

	/* Claims 8 x 16 bytes, but only the first chunk was written: the
	 * second still carries its stamp. Unsignalled, still completes. */
	ind = *sq.head;
	direct_wqe(&sq, ind, fr, 40, false);
	c = (void *)((uint8_t *)sq.buf + ((ind & (sq.wqe_cnt - 1)) <<
					  sq.wqe_shift));
	c->fence_size = 8;
	sq.wrid[ind & (sq.wqe_cnt - 1)] = 55;
	(*sq.head)++;
	sq.db_write(a.qp, sq.doorbell_qpn);
	CU_ASSERT_EQUAL_FATAL(E->poll_cq(a.scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_LOC_QP_OP_ERR);
	CU_ASSERT_EQUAL(wc[0].wr_id, 55);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).malformed, 1);
	/* An opcode emu does not execute. */
	ind = *sq.head;
	direct_wqe(&sq, ind, fr, FRAME_LEN, false);
	c = (void *)((uint8_t *)sq.buf + ((ind & (sq.wqe_cnt - 1)) <<
					  sq.wqe_shift));
	c->owner_opcode = htobe32(MLX4_OPCODE_RDMA_WRITE |
				  ((ind & sq.wqe_cnt) ? 1u << 31 : 0));
	(*sq.head)++;
	/* Size 0; and an inline segment crossing a 64-byte boundary. */
	ind = *sq.head;
	direct_wqe(&sq, ind, fr, FRAME_LEN, false);
	c = (void *)((uint8_t *)sq.buf + ((ind & (sq.wqe_cnt - 1)) <<
					  sq.wqe_shift));
	c->fence_size = 0;
	(*sq.head)++;
	ind = *sq.head;
	direct_wqe(&sq, ind, fr, FRAME_LEN, false);
	c = (void *)((uint8_t *)sq.buf + ((ind & (sq.wqe_cnt - 1)) <<
					  sq.wqe_shift));
	*(uint32_t *)(void *)(c + 1) = htobe32(MLX4_INLINE_SEG | 50);
	(*sq.head)++;
	sq.db_write(a.qp, sq.doorbell_qpn);
	CU_ASSERT_EQUAL(E->poll_cq(a.scq, 4, wc), 3);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_LOC_QP_OP_ERR);
	CU_ASSERT_EQUAL(wc[1].status, IBV_WC_LOC_QP_OP_ERR);
	CU_ASSERT_EQUAL(wc[2].status, IBV_WC_LOC_QP_OP_ERR);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).malformed, 4);
	CU_ASSERT_EQUAL(t_emu_ctrs(a.dev).dev.tx_drops, 4);
	CU_ASSERT_EQUAL(recv_seqs(&b, NULL, 4, 0), 0);
	CU_ASSERT_EQUAL(*sq.tail, *sq.head);
	port_close(&a);
	port_close(&b);
}

/* A port whose owner died is reclaimed on the next attach. */
static void test_dead_port_reclaim(void)
{
	struct qps_dev *a, *d;
	uint64_t gen;
	int status;
	pid_t pid;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, &a), 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		struct qps_dev *c;

		_exit(dev_open("198.18.0.99", &c) ? 1 : 0);
	}
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
	gen = E->route_gen(a);
	CU_ASSERT_EQUAL_FATAL(dev_open("198.18.0.99", &d), 0);
	CU_ASSERT_NOT_EQUAL(E->route_gen(a), gen);
	CU_ASSERT_EQUAL(E->close(d), 0);
	CU_ASSERT_EQUAL(E->close(a), 0);
	CU_ASSERT_FALSE(shm_exists());
}

/* A forked child that closes its copy of a handle leaves the port alone. */
static void test_fork_close_copy(void)
{
	struct port a;
	int status;
	pid_t pid;

	port_open(&a, NULL, 64, 16, 64, 64, true);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		_exit(E->close(a.dev) ? 1 : 0);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
	CU_ASSERT_EQUAL(send_to(&a, &a, 0, 3), 0);
	CU_ASSERT_EQUAL(count_rx(&a), 3);
	CU_ASSERT_EQUAL(drain(a.scq), 1);
	CU_ASSERT_TRUE(shm_exists());
	port_close(&a);
	CU_ASSERT_FALSE(shm_exists());
}

static void test_alloc_buf(void)
{
	const size_t q4 = QPS_EMU_POOL_SIZE / 4;
	struct qps_dev *d;
	void *p, *q, *r, *s;

	CU_ASSERT_EQUAL_FATAL(dev_open(NULL, &d), 0);
	CU_ASSERT_EQUAL(E->alloc_buf(d, 0, &p), -EINVAL);
	CU_ASSERT_EQUAL_FATAL(E->alloc_buf(d, QPS_EMU_POOL_SIZE, &p), 0);
	CU_ASSERT_EQUAL(E->alloc_buf(d, 64, &q), -ENOMEM);
	CU_ASSERT_EQUAL(E->free_buf(d, p, QPS_EMU_POOL_SIZE), 0);
	CU_ASSERT_EQUAL(E->free_buf(d, p, QPS_EMU_POOL_SIZE), -EINVAL);
	CU_ASSERT_EQUAL_FATAL(E->alloc_buf(d, q4, &p), 0);
	CU_ASSERT_EQUAL_FATAL(E->alloc_buf(d, q4, &q), 0);
	CU_ASSERT_EQUAL_FATAL(E->alloc_buf(d, q4, &r), 0);
	CU_ASSERT_EQUAL(E->free_buf(d, q, q4), 0);
	CU_ASSERT_EQUAL_FATAL(E->alloc_buf(d, q4, &s), 0);
	CU_ASSERT_PTR_EQUAL(s, q);
	CU_ASSERT_EQUAL(E->alloc_buf(d, 2 * q4, &q), -ENOMEM);
	CU_ASSERT_EQUAL(E->free_buf(d, (uint8_t *)p - 64, 64), -EINVAL);
	CU_ASSERT_EQUAL(E->free_buf(d, p, q4), 0);
	CU_ASSERT_EQUAL(E->free_buf(d, r, q4), 0);
	CU_ASSERT_EQUAL(E->free_buf(d, s, q4), 0);
	CU_ASSERT_EQUAL_FATAL(E->alloc_buf(d, QPS_EMU_POOL_SIZE, &p), 0);
	CU_ASSERT_EQUAL(E->close(d), 0);
}

/* Two threads posting on one QP while a third polls its CQ. */
struct mt_arg {
	struct port *a, *b;
	uint32_t base;
	int err;
};

static void *mt_sender(void *p)
{
	struct mt_arg *m = p;
	int i;

	for (i = 0; i < 200; i++) {
		int r;

		do {
			r = send_seq(m->a, NULL, m->b->info.mac,
				     m->b->info.addr.s_addr, 5000,
				     m->base + (uint32_t)i, 1, true);
			if (r == -ENOMEM)
				sched_yield();
		} while (r == -ENOMEM);
		if (r)
			m->err = r;
	}
	return NULL;
}

static void test_threads(void)
{
	struct port a, b;
	struct mt_arg m1, m2;
	pthread_t t1, t2;
	uint32_t last1 = 0, last2 = 1000, got = 0;
	uint64_t end = t_now_ms() + 10000;

	port_open(&a, NULL, 16, 0, 64, 8, false);	/* max_post 23 */
	port_open(&b, NULL, 8, 64, 8, 64, true);
	m1 = (struct mt_arg){ &a, &b, 1, 0 };
	m2 = (struct mt_arg){ &a, &b, 1001, 0 };
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t1, NULL, mt_sender, &m1), 0);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t2, NULL, mt_sender, &m2), 0);
	/* Receive first, then free send credits: at most two SQs' worth of
	 * frames (2 x 23) wait at the receiver, which has 64 buffers. */
	while (got < 400 && t_now_ms() < end) {
		uint32_t s[64];
		int i, n;

		n = recv_seqs(&b, s, 64, 0);
		for (i = 0; i < n; i++) {
			/* Each thread's frames stay in order. */
			if (s[i] < 1000) {
				CU_ASSERT_EQUAL(s[i], last1 + 1);
				last1 = s[i];
			} else {
				CU_ASSERT_EQUAL(s[i], last2 + 1);
				last2 = s[i];
			}
		}
		got += (uint32_t)n;
		drain(a.scq);
		if (!n)
			sched_yield();
	}
	CU_ASSERT_EQUAL(pthread_join(t1, NULL), 0);
	CU_ASSERT_EQUAL(pthread_join(t2, NULL), 0);
	CU_ASSERT_EQUAL(m1.err, 0);
	CU_ASSERT_EQUAL(m2.err, 0);
	CU_ASSERT_EQUAL(got, 400);
	drain(a.scq);
	port_close(&a);
	port_close(&b);
}

/* A flow creation failure injected through the hook, taken once. */
static void test_inject_flow_err(void)
{
	struct port a;
	struct qps_flow *fl;
	uint8_t buf[256];

	port_open(&a, NULL, 8, 8, 8, 8, false);
	T_EQ(qps_emu_inject_flow_err(a.dev, 5), -EINVAL);
	T_EQ(qps_emu_inject_flow_err(a.dev, -ENOSPC), 0);
	T_EQ(E->create_flow(a.qp, flow_build(buf, IBV_FLOW_ATTR_NORMAL, 0,
					      a.info.mac, 0, 0), &fl),
	     -ENOSPC);
	T_EQ(E->create_flow(a.qp, flow_build(buf, IBV_FLOW_ATTR_NORMAL, 0,
					      a.info.mac, 0, 0), &fl), 0);
	T_EQ(E->destroy_flow(fl), 0);
	port_close(&a);
}

/* Raw-packet QPs: created in RTS, ERR flushes both queues (the error
 * injection other suites use), RESET and back to RTS. */
/* --- checksum offload (emu_csum.c) ------------------------------------- */

/* One's complement sum of big-endian words, folded. */
static uint16_t sum_fold(uint32_t s, const uint8_t *p, uint32_t len)
{
	uint32_t i;

	for (i = 0; i + 1 < len; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		s += (uint32_t)p[len - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

static bool ip_ok(const uint8_t *f)
{
	return sum_fold(0, f + 14, 20) == 0xffff;
}

/* The UDP checksum of the frame's datagram is there and right. */
static bool udp_ok(const uint8_t *f)
{
	uint32_t ulen = (uint32_t)(f[16] << 8 | f[17]) - 20;

	return (f[40] || f[41]) &&
	       sum_fold(sum_fold(0, f + 26, 8) + 17 + ulen, f + 34, ulen) ==
	       0xffff;
}

/* The status word of CQE @n of @cq, not yet polled. */
static uint32_t cqe_status(struct qps_cq *cq, uint32_t n, uint16_t *csum)
{
	struct qps_emu_cq *c = qps_emu_cq(cq);
	const struct mlx4_cqe *cqe = &c->ring[n & (c->cqe_cnt - 1)];

	*csum = be16toh(cqe->checksum);
	return be32toh(cqe->status);
}

static int send_frame(struct port *p, uint8_t *f, uint32_t len, int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)f, .length = len };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE | flags },
		*bad = NULL;

	return E->post_send(p->qp, &wr, &bad);
}

#define ST_IPV4 MLX4_CQE_STATUS_IPV4_PKT
#define ST_IPOK MLX4_CQE_STATUS_IP_HDR_CSUM_OK
#define ST_L4OK MLX4_CQE_STATUS_TCP_UDP_CSUM_OK

/*
 * Send: IBV_SEND_IP_CSUM makes the device compute both sums over the
 * frame whatever the fields held; without it the frame goes as written.
 * Receive: the CQE's status bits and checksum field say what the device
 * found, and poll_cq gives IBV_WC_IP_CSUM_OK only for IPv4 with both sums
 * right. A fragment gets its header sum but no UDP sum.
 */
static void test_csum_offload(void)
{
	static const struct {
		int flags;		/* post_send */
		uint16_t ip_sum;	/* written into the IPv4 header */
		uint16_t udp_sum;	/* and the UDP header */
		uint16_t frag;		/* the IPv4 flags and offset */
		uint32_t status;	/* the CQE's, of these bits */
		bool wc_ok;
	} c[] = {
		{ IBV_SEND_IP_CSUM, 0, 0, 0, ST_IPV4 | ST_IPOK | ST_L4OK |
		  QPS_EMU_CQE_STATUS_UDP, true },
		/* Garbage in the fields: overwritten, not added to. */
		{ IBV_SEND_IP_CSUM, 0xbeef, 0x1234, 0, ST_IPV4 | ST_IPOK |
		  ST_L4OK | QPS_EMU_CQE_STATUS_UDP, true },
		{ 0, 0xbeef, 0x1234, 0, ST_IPV4 | QPS_EMU_CQE_STATUS_UDP,
		  false },
		/* No UDP checksum sent: nothing to call right. */
		{ 0, 0, 0, 0x4000, ST_IPV4 | ST_IPOK | QPS_EMU_CQE_STATUS_UDP,
		  false },
		{ IBV_SEND_IP_CSUM, 0, 0x1234, 0x2000, ST_IPV4 | ST_IPOK |
		  QPS_EMU_CQE_STATUS_IPV4F, false },
	};
	const uint32_t mask = ST_IPV4 | ST_IPOK | ST_L4OK |
			      QPS_EMU_CQE_STATUS_UDP |
			      QPS_EMU_CQE_STATUS_IPV4F |
			      QPS_EMU_CQE_STATUS_IPV4OPT;
	struct port a, b;
	struct ibv_wc wc;
	unsigned int i;

	port_open(&a, "198.18.0.1", 16, 0, 16, 16, false);
	port_open(&b, "198.18.0.2", 16, 16, 16, 16, true);
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint8_t f[FRAME_LEN];
		const uint8_t *r = b.bufs + (size_t)i * BUF_SZ;
		uint16_t v, csum;
		uint32_t st;

		mkframe(f, b.info.mac, a.info.mac, a.info.addr.s_addr,
			b.info.addr.s_addr, 4000, 5000, i);
		v = htons(c[i].frag);
		memcpy(f + 20, &v, 2);
		v = htons(c[i].ip_sum);
		memcpy(f + 24, &v, 2);
		v = htons(c[i].udp_sum);
		memcpy(f + 40, &v, 2);
		if (!c[i].flags && !c[i].ip_sum) {
			/* A right header, as a sender without offload. */
			memset(f + 24, 0, 2);
			v = htons(ip_csum(f + 14));
			memcpy(f + 24, &v, 2);
		}
		CU_ASSERT_EQUAL_FATAL(send_frame(&a, f, FRAME_LEN,
						 c[i].flags), 0);
		st = cqe_status(b.rcq, i, &csum);
		CU_ASSERT_EQUAL_FATAL(t_emu_poll_wait(b.rcq, &wc, 1, 1000), 1);
		CU_ASSERT_EQUAL(wc.status, IBV_WC_SUCCESS);
		CU_ASSERT_EQUAL(wc.wr_id, i);
		CU_ASSERT_EQUAL(st & mask, c[i].status);
		CU_ASSERT_EQUAL(!!(wc.wc_flags & IBV_WC_IP_CSUM_OK),
				c[i].wc_ok);
		/* On the wire: what the device computed, or as written. */
		CU_ASSERT_EQUAL(ip_ok(r), !!(st & ST_IPOK));
		if (c[i].flags && !c[i].frag) {
			CU_ASSERT(udp_ok(r));
			CU_ASSERT_EQUAL(csum, 0xffff);
		} else {
			CU_ASSERT_EQUAL(memcmp(r + 40, f + 40, 2), 0);
		}
		if (c[i].status & QPS_EMU_CQE_STATUS_UDP)
			CU_ASSERT_EQUAL(csum == 0xffff, udp_ok(r));
	}
	port_close(&a);
	port_close(&b);
}

/* Each ctrl flag alone computes its own sum only. */
static void test_csum_tx_flags(void)
{
	static const uint8_t m[6] = { 2, 0, 0, 0, 0, 1 };
	uint8_t f[FRAME_LEN + 4], g[FRAME_LEN + 4];
	uint32_t ip = t_ip4("198.18.0.1");
	uint16_t w;

	mkframe(f, m, m, ip, ip, 1, 2, 7);
	memset(f + 24, 0, 2);
	memcpy(g, f, FRAME_LEN);
	qps_emu_csum_tx(g, FRAME_LEN, MLX4_WQE_CTRL_IP_HDR_CSUM);
	CU_ASSERT(ip_ok(g));
	CU_ASSERT(!udp_ok(g));
	memcpy(g, f, FRAME_LEN);
	qps_emu_csum_tx(g, FRAME_LEN, MLX4_WQE_CTRL_TCP_UDP_CSUM);
	CU_ASSERT(!ip_ok(g));
	CU_ASSERT(udp_ok(g));
	memcpy(g, f, FRAME_LEN);
	qps_emu_csum_tx(g, FRAME_LEN, 0);
	CU_ASSERT_EQUAL(memcmp(g, f, FRAME_LEN), 0);
	/* Lengths that do not fit the frame: it goes as written. */
	memcpy(g, f, FRAME_LEN);
	g[17] += 4;
	memcpy(f, g, FRAME_LEN);
	qps_emu_csum_tx(g, FRAME_LEN, MLX4_WQE_CTRL_TCP_UDP_CSUM);
	CU_ASSERT_EQUAL(memcmp(g, f, FRAME_LEN), 0);
	/* A datagram whose sum complements to 0 goes with 0xffff. */
	mkframe(f, m, m, ip, ip, 1, 2, 7);
	f[46] = f[47] = 0;
	w = (uint16_t)(0xffff - sum_fold(sum_fold(0, f + 26, 8) + 17 +
					 FRAME_LEN - 34, f + 34,
					 FRAME_LEN - 34));
	f[46] = (uint8_t)(w >> 8);
	f[47] = (uint8_t)w;
	qps_emu_csum_tx(f, FRAME_LEN, MLX4_WQE_CTRL_TCP_UDP_CSUM);
	CU_ASSERT_EQUAL(f[40], 0xff);
	CU_ASSERT_EQUAL(f[41], 0xff);
	CU_ASSERT(udp_ok(f));
	/* Ethernet padding after the datagram is not summed. */
	mkframe(f, m, m, ip, ip, 1, 2, 7);
	memset(f + FRAME_LEN, 0xaa, 4);
	qps_emu_csum_tx(f, FRAME_LEN + 4, MLX4_WQE_CTRL_TCP_UDP_CSUM);
	CU_ASSERT(udp_ok(f));
}

static void test_raw_err_reset(void)
{
	struct port a, b;
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR, .port_num = 1,
				  .qkey = 1 };
	struct ibv_wc wc[16];
	struct qps_emu_counters c0;
	uint32_t seqs[4];
	int i, n;

	port_open(&a, NULL, 64, 0, 64, 8, false);
	port_open(&b, NULL, 8, 8, 8, 16, true);
	CU_ASSERT_EQUAL(qps_emu_qp(a.qp)->state, IBV_QPS_RTS);
	/* Raw QPs take no Q_Key; INIT from RTS is no transition. */
	at.qp_state = IBV_QPS_INIT;
	T_EQ(E->modify_qp(a.qp, &at, IBV_QP_STATE), -EINVAL);
	at.qp_state = IBV_QPS_ERR;
	T_EQ(E->modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_QKEY), -EINVAL);
	T_EQ(send_to(&a, &b, 0, 2), 0);
	T_EQ(recv_seqs(&b, seqs, 2, 1000), 2);
	T_EQ(drain(a.scq), 1);

	/* Sender to ERR: what is latched and what is posted next flush. */
	qps_emu_set_stepping(a.dev, true);
	T_EQ(send_seq(&a, NULL, b.info.mac, b.info.addr.s_addr, 5000, 10, 3,
		      false), 0);
	T_EQ(E->modify_qp(a.qp, &at, IBV_QP_STATE), 0);
	qps_emu_set_stepping(a.dev, false);
	T_EQ(send_to(&a, &b, 20, 1), 0);
	n = t_emu_poll_wait(a.scq, wc, 4, 1000);
	T_EQ_FATAL(n, 4);
	for (i = 0; i < 4; i++) {
		T_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		T_EQ(wc[i].wr_id, i < 3 ? 10 + i : 20);
	}
	T_EQ(t_emu_poll_wait(b.rcq, wc, 1, 0), 0);
	T_EQ(t_emu_ctrs(a.dev).flushed, 4);

	/* Receiver to ERR: its 8 posted buffers flush. */
	T_EQ(E->modify_qp(b.qp, &at, IBV_QP_STATE), 0);
	n = t_emu_poll_wait(b.rcq, wc, 8, 1000);
	T_EQ_FATAL(n, 8);
	for (i = 0; i < 8; i++) {
		T_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		T_EQ(wc[i].opcode, IBV_WC_RECV);
	}

	/* RESET: nothing may be posted; INIT needs the port. */
	at.qp_state = IBV_QPS_RESET;
	T_EQ(E->modify_qp(a.qp, &at, IBV_QP_STATE), 0);
	T_EQ(E->modify_qp(b.qp, &at, IBV_QP_STATE), 0);
	T_EQ(send_to(&a, &b, 30, 1), -EINVAL);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)b.bufs,
				       .length = BUF_SZ };
		struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 },
				   *rbad;

		T_EQ(E->post_recv(b.qp, &rw, &rbad), -EINVAL);
	}
	at.qp_state = IBV_QPS_INIT;
	T_EQ(E->modify_qp(b.qp, &at, IBV_QP_STATE), -EINVAL);
	T_EQ(E->modify_qp(b.qp, &at, IBV_QP_STATE | IBV_QP_PORT), 0);
	post_bufs(&b, 0, 8);
	c0 = t_emu_ctrs(b.dev);
	T_EQ(E->modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_PORT), 0);
	at.qp_state = IBV_QPS_RTR;
	T_EQ(E->modify_qp(a.qp, &at, IBV_QP_STATE), 0);
	at.qp_state = IBV_QPS_RTS;
	T_EQ(E->modify_qp(a.qp, &at, IBV_QP_STATE), 0);
	T_EQ(send_to(&a, &b, 40, 1), 0);	/* b in INIT: dropped */
	T_EQ(t_emu_ctrs(b.dev).rx_qp_state - c0.rx_qp_state, 1);
	at.qp_state = IBV_QPS_RTR;
	T_EQ(E->modify_qp(b.qp, &at, IBV_QP_STATE), 0);
	T_EQ(send_to(&a, &b, 50, 2), 0);
	T_EQ_FATAL(recv_seqs(&b, seqs, 2, 1000), 2);
	T_EQ(seqs[0], 50);
	T_EQ(seqs[1], 51);
	T_EQ(drain(a.scq), 2);
	port_close(&a);
	port_close(&b);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "open, query, resolve, route_gen", test_open_query_resolve },
		{ "SQ owner bit over ring wraps", test_sq_owner_wrap },
		{ "direct path needs a doorbell", test_direct_needs_doorbell },
		{ "BlueFlame takes the register copy", test_blueflame },
		{ "CQ owner bit over ring wraps", test_cq_owner_wrap },
		{ "CQ overrun drops, never overwrites", test_cq_overrun },
		{ "steering priorities and defaults", test_steering },
		{ "corrupt shared state is rejected", test_corrupt_shared_state },
		{ "fuzzed shared state", test_fuzz_shared_state },
		{ "unicast, multicast, broadcast",
		  test_unicast_multicast_broadcast },
		{ "two processes over the wire", test_fork_two_processes },
		{ "data segments and error CQEs",
		  test_data_segments_and_errors },
		{ "stepping mode", test_stepping },
		{ "event fd", test_event_fd },
		{ "post errors and limits", test_post_errors },
		{ "malformed WQEs", test_malformed_wqe },
		{ "dead port reclaimed", test_dead_port_reclaim },
		{ "forked child closes a copy", test_fork_close_copy },
		{ "alloc_buf pool", test_alloc_buf },
		{ "threads posting on one QP", test_threads },
		{ "flow creation failure injected", test_inject_flow_err },
		{ "raw-packet QP to ERR and RESET", test_raw_err_reset },
		{ "checksum offload: send flags, CQE status", test_csum_offload },
		{ "checksum offload: each ctrl flag", test_csum_tx_flags },
		CU_TEST_INFO_NULL,
	};

	return t_emu_run("emu", tests, "emu", g_wire, sizeof(g_wire));
}
