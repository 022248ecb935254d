// SPDX-License-Identifier: MIT
/*
 * Suite "null": the measurement device must not lie. What it counts
 * (WQEs taken, doorbells, BlueFlame writes, completions) is checked
 * against what the core says it posted, on both send paths and with
 * completion moderation; on the ring itself, the device takes nothing
 * before it is rung and stops at a WQE the core still holds; its
 * generated receives are valid datagrams (the core's parser checks every
 * checksum), numbered, delivered to a bound port or to the members of a
 * joined group only, and never without a steering rule.
 */
#include "t_util.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qps_int.h"
#include "sq.h"
#include "null/null.h"

#define EQ T_EQ
#define EQ_FATAL T_EQ_FATAL
#define GE T_GE
#define LE T_LE

#define PEER "198.18.0.2"
#define PEER_PORT 4242
#define PORT 7000
#define GROUP "239.3.2.1"
#define PAYLOAD 64

static struct qps_ctx *mkctx(const char *dev, uint32_t path,
			     uint32_t tx_signal)
{
	struct qps_ctx_attr a;
	struct qps_ctx *ctx = NULL;

	memset(&a, 0, sizeof(a));
	a.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_TX_PATH |
		      QPS_CTX_ATTR_NUM_TXQ | QPS_CTX_ATTR_DB_DELAY;
	a.provider = "null";
	a.tx_path = path;
	a.num_txq = 1;
	/* Long: only the send calls ring, and what they ring is known. */
	a.db_delay_us = 1000000;
	if (dev) {
		a.comp_mask |= QPS_CTX_ATTR_DEV;
		a.dev = dev;
	}
	if (tx_signal) {
		a.comp_mask |= QPS_CTX_ATTR_TX_SIGNAL;
		a.tx_signal = tx_signal;
	}
	EQ_FATAL(qps_ctx_create(&a, &ctx), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	return ctx;
}

static struct qps_null_counters dev_counters(struct qps_ctx *ctx)
{
	struct qps_null_counters c;

	EQ_FATAL(qps_null_counters_all(ctx->dev, &c), 0);
	return c;
}

static void test_parse(void)
{
	struct qps_null_cfg c;

	EQ(qps_null_parse_cfg(NULL, &c), 0);
	EQ(c.rx, QPS_NULL_RX_OFF);
	EQ(c.len, QPS_NULL_LEN_DEFAULT);
	EQ(c.burst, QPS_NULL_BURST_DEFAULT);
	EQ(qps_null_parse_cfg("null", &c), 0);
	EQ(qps_null_parse_cfg("rx=unicast:port=9000:len=100:burst=8", &c), 0);
	EQ(c.rx, QPS_NULL_RX_UNICAST);
	EQ(c.port, 9000);
	EQ(c.len, 100);
	EQ(c.burst, 8);
	EQ(qps_null_parse_cfg("rx=mcast:group=239.1.1.1:port=1", &c), 0);
	EQ(c.rx, QPS_NULL_RX_MCAST);
	EQ(c.group, inet_addr("239.1.1.1"));
	EQ(qps_null_parse_cfg("rx=unicast", &c), -EINVAL);	/* no port */
	EQ(qps_null_parse_cfg("rx=mcast:port=5", &c), -EINVAL); /* no group */
	EQ(qps_null_parse_cfg("rx=mcast:group=10.0.0.1:port=5", &c), -EINVAL);
	EQ(qps_null_parse_cfg("rx=bogus:port=5", &c), -EINVAL);
	EQ(qps_null_parse_cfg("port=70000", &c), -EINVAL);
	EQ(qps_null_parse_cfg("port=0", &c), -EINVAL);
	EQ(qps_null_parse_cfg("len=3", &c), -EINVAL);
	EQ(qps_null_parse_cfg("burst=0", &c), -EINVAL);
	EQ(qps_null_parse_cfg("port", &c), -EINVAL);
	EQ(qps_null_parse_cfg("colour=red", &c), -EINVAL);
	EQ(c.csum_off, false);
	EQ(qps_null_parse_cfg("csum=off", &c), 0);
	EQ(c.csum_off, true);
	EQ(qps_null_parse_cfg("csum=on", &c), 0);
	EQ(c.csum_off, false);
	EQ(qps_null_parse_cfg("csum=maybe", &c), -EINVAL);
}

/* Never a default: only a context that names it gets it. */
static void test_not_default(void)
{
	struct qps_ctx_attr a;
	struct qps_ctx *ctx = NULL;
	struct qps_ctx_info info;

	memset(&a, 0, sizeof(a));
	a.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV;
	a.provider = "null";
	a.dev = "rx=sideways";
	EQ(qps_ctx_create(&a, &ctx), -EINVAL);
	CU_ASSERT_PTR_NULL(ctx);
	ctx = mkctx(NULL, QPS_TX_PATH_AUTO, 0);
	EQ(qps_ctx_query(ctx, &info), 0);
	CU_ASSERT_STRING_EQUAL(info.provider, "null");
	/* Auto picks the direct path: the device exposes an mlx4 ring. */
	EQ(ctx->tx_path, QPS_TX_PATH_DIRECT);
	/* No completion events: nothing to sleep on, nothing to arm. */
	EQ(qps_ctx_fd(ctx), -EOPNOTSUPP);
	EQ(qps_ctx_arm(ctx), -EOPNOTSUPP);
	EQ(qps_ctx_disarm(ctx), -EINVAL);
	EQ(qps_ctx_destroy(ctx), 0);
}

/*
 * A mix of single sends, MORE bursts and sendmmsg batches on a connected
 * and an unconnected endpoint; afterwards the device's counts must equal
 * the core's: every WQE written taken once, every ring one doorbell or
 * one BlueFlame write, one completion per signalled WQE, all reaped.
 */
static void send_counts(uint32_t path, uint32_t tx_signal)
{
	struct qps_ctx *ctx = mkctx(NULL, path, tx_signal);
	struct sockaddr_in to = t_sin(PEER, 9999);
	struct qps_ep *a = t_ep_bound(ctx, "0.0.0.0", 5000, 1000);
	struct qps_ep *b = t_ep_bound(ctx, "0.0.0.0", 5001, 1000);
	uint8_t buf[PAYLOAD] = { 0 };
	struct qps_msg m[32];
	struct qps_null_counters c;
	struct qps_stats st;
	uint64_t sent = 0;
	int i, k;

	EQ_FATAL(qps_connect(a, (struct sockaddr *)&to, sizeof(to)), 0);
	for (i = 0; i < 100; i++, sent++)
		EQ(qps_send(a, buf, sizeof(buf), 0), sizeof(buf));
	for (k = 0; k < 20; k++)
		for (i = 0; i < 7; i++, sent++)
			EQ(qps_send(a, buf, sizeof(buf),
				    i < 6 ? QPS_MSG_MORE : 0), sizeof(buf));
	for (i = 0; i < 32; i++) {
		m[i] = (struct qps_msg){ .buf = buf, .len = sizeof(buf),
					 .dest = (struct sockaddr *)&to,
					 .dest_len = sizeof(to),
					 .priority = -1 };
	}
	for (k = 0; k < 50; k++, sent += 32)
		EQ(qps_sendmmsg(b, m, 32, 0), 32);
	for (i = 0; i < 77; i++, sent++)
		EQ(qps_sendto(b, buf, sizeof(buf), 0, (struct sockaddr *)&to,
			      sizeof(to)), sizeof(buf));
	EQ(qps_ctx_flush(ctx), 0);	/* nothing was left unrung */
	GE(qps_ctx_progress(ctx), 0);

	st = t_ctx_stats(ctx);
	c = dev_counters(ctx);
	EQ(st.tx_packets, sent);
	EQ(st.tx_wqes, sent);
	EQ(st.tx_errors, 0);
	EQ(c.dev.wqes, sent);
	EQ(c.dev.tx_drops, 0);
	EQ(c.bad_writes, 0);
	EQ(c.tx_cq_overrun, 0);
	/* Every ring reached the device, and as what the core says. */
	EQ(c.dev.doorbells + c.dev.bf_writes, st.tx_doorbells);
	EQ(c.dev.bf_writes, st.tx_bf);
	if (path == QPS_TX_PATH_GENERIC)
		EQ(c.dev.bf_writes, 0);
	else
		GE(c.dev.bf_writes, 1);	/* 106-byte frames fit BlueFlame */
	/* A batch or a MORE burst rings once, a single send once each. */
	EQ(st.tx_doorbells, 100 + 20 + 50 + 77 + st.tx_flush_full);
	/* One completion per signalled WQE, and all of them reaped. */
	EQ(c.dev.tx_cqes, st.tx_signaled);
	EQ(st.tx_reaped, sent);
	if (tx_signal == 1)
		EQ(c.dev.tx_cqes, sent);
	else
		LE(c.dev.tx_cqes * 4, sent);
	EQ(c.dev.rx_cqes, 0);	/* rx is off: nothing arrives */
	EQ(qps_ctx_destroy(ctx), 0);
}

static void test_send_generic(void)
{
	send_counts(QPS_TX_PATH_GENERIC, 0);
}

static void test_send_direct(void)
{
	send_counts(QPS_TX_PATH_DIRECT, 0);
}

static void test_send_direct_sig1(void)
{
	send_counts(QPS_TX_PATH_DIRECT, 1);
}

static void test_send_generic_sig1(void)
{
	send_counts(QPS_TX_PATH_GENERIC, 1);
}

/* The ring alone (sq_mlx4.c on the device): nothing is taken before the
 * ring, the ring takes exactly what was written, a completion per WQE
 * that asked plus the last, and a doorbell for another QP is refused. */
static void test_ring(void)
{
	const struct qps_provider_ops *ops;
	struct qps_dev_attr da;
	struct qps_dev *dev;
	struct qps_cq *cq;
	struct qps_qp *qp;
	struct qps_qp_init_attr qa;
	struct qps_sq_mlx4 sq;
	struct qps_null_counters c;
	struct ibv_wc wc[8];
	uint8_t frame[200];
	int i, n;

	memset(frame, 0xab, sizeof(frame));
	EQ_FATAL(qps_provider_find("null", &ops), 0);
	memset(&da, 0, sizeof(da));
	EQ_FATAL(ops->open(&da, &dev), 0);
	dev->ops = ops;
	EQ_FATAL(ops->create_cq(dev, 64, &cq), 0);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RAW_PACKET;
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qa.cap.max_send_wr = 32;
	qa.cap.max_send_sge = 1;
	EQ_FATAL(ops->create_qp(dev, &qa, &qp), 0);
	EQ_FATAL(qps_sq_mlx4_init(&sq, qp), 0);
	CU_ASSERT(sq.bf);
	/* WQE 0 and 3 ask; 5 (the last) is made to at ring time. */
	for (i = 0; i < 6; i++)
		EQ(qps_sq_mlx4_write(&sq, frame, 106, 0, 100 + (uint64_t)i,
				     i == 0 || i == 3, 0), 0);
	EQ(qps_null_counters_all(dev, &c), 0);
	EQ(c.dev.wqes, 0);	/* not told yet */
	EQ(ops->poll_cq(cq, 8, wc), 0);
	/* A doorbell naming another QP changes nothing. */
	qps_null_db_write(qp, htobe32((qp->qp_num + 1) << 8));
	EQ(qps_null_counters_all(dev, &c), 0);
	EQ(c.dev.wqes, 0);
	EQ(c.bad_writes, 1);
	EQ(qps_sq_mlx4_ring(&sq), QPS_SQ_RANG_BF);
	EQ(qps_null_counters_all(dev, &c), 0);
	EQ(c.dev.wqes, 6);
	EQ(c.dev.bf_writes, 1);
	EQ(c.dev.doorbells, 0);
	EQ(c.dev.tx_cqes, 3);
	EQ(c.bad_writes, 1);
	n = ops->poll_cq(cq, 8, wc);
	EQ_FATAL(n, 3);
	EQ(wc[0].wr_id, 100);
	EQ(wc[1].wr_id, 103);
	EQ(wc[2].wr_id, 105);
	for (i = 0; i < n; i++) {
		EQ(wc[i].status, IBV_WC_SUCCESS);
		EQ(wc[i].opcode, IBV_WC_SEND);
		EQ(wc[i].qp_num, qp->qp_num);
	}
	EQ(qps_sq_mlx4_room(&sq), sq.m.max_post);
	/* A doorbell before the ring (the device may be told early): it
	 * takes the WQEs handed over and stops at the newest, which the
	 * core still holds back. */
	EQ(qps_sq_mlx4_write(&sq, frame, 106, 0, 6, false, 0), 0);
	EQ(qps_sq_mlx4_write(&sq, frame, 106, 0, 7, false, 0), 0);
	qps_null_db_write(qp, sq.m.doorbell_qpn);
	EQ(qps_null_counters_all(dev, &c), 0);
	EQ(c.dev.wqes, 7);
	EQ(c.dev.doorbells, 1);
	EQ(ops->poll_cq(cq, 8, wc), 0);	/* WQE 6 did not ask */
	/* Without BlueFlame the ring is a doorbell; it takes WQE 7. */
	sq.bf = false;
	EQ(qps_sq_mlx4_ring(&sq), QPS_SQ_RANG_DB);
	EQ(qps_null_counters_all(dev, &c), 0);
	EQ(c.dev.wqes, 8);
	EQ(c.dev.doorbells, 2);
	EQ(c.dev.bf_writes, 1);
	EQ(ops->poll_cq(cq, 8, wc), 1);
	EQ(wc[0].wr_id, 7);
	/* Around the ring many times: the owner bit flips per lap. */
	for (i = 0; i < 3 * (int)sq.m.wqe_cnt; i++) {
		EQ_FATAL(qps_sq_mlx4_write(&sq, frame, 106, 0, (uint64_t)i,
					   false, 0), 0);
		EQ_FATAL(qps_sq_mlx4_ring(&sq), QPS_SQ_RANG_DB);
		EQ_FATAL(ops->poll_cq(cq, 8, wc), 1);
		EQ(wc[0].wr_id, (uint64_t)i);
	}
	EQ(qps_null_counters_all(dev, &c), 0);
	EQ(c.dev.wqes, 8 + 3 * sq.m.wqe_cnt);
	EQ(c.bad_writes, 1);
	EQ(ops->destroy_cq(cq), -EBUSY);	/* its QP still lives */
	EQ(ops->destroy_qp(qp), 0);
	EQ(ops->destroy_cq(cq), 0);
	EQ(ops->close(dev), 0);
}

/* The generic path on the ops alone: a full send queue refuses the rest
 * of a chain, which still rang once. */
static void test_post_send_full(void)
{
	const struct qps_provider_ops *ops;
	struct qps_dev_attr da;
	struct qps_dev *dev;
	struct qps_cq *cq;
	struct qps_qp *qp;
	struct qps_qp_init_attr qa;
	struct qps_null_counters c;
	struct ibv_send_wr wr[64], *bad = NULL;
	struct ibv_sge sge = { .addr = 1, .length = 60, .lkey = 0 };
	struct ibv_wc wc[64];
	uint32_t i, max;

	EQ_FATAL(qps_provider_find("null", &ops), 0);
	memset(&da, 0, sizeof(da));
	EQ_FATAL(ops->open(&da, &dev), 0);
	dev->ops = ops;
	EQ_FATAL(ops->create_cq(dev, 64, &cq), 0);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RAW_PACKET;
	qa.send_cq = cq;
	qa.cap.max_send_wr = 16;
	EQ_FATAL(ops->create_qp(dev, &qa, &qp), 0);
	max = qp->cap.max_send_wr;
	LE(max + 1, 64);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i <= max; i++) {
		wr[i].wr_id = i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < max ? &wr[i + 1] : NULL;
	}
	EQ(ops->post_send(qp, wr, &bad), -ENOMEM);
	CU_ASSERT_PTR_EQUAL(bad, &wr[max]);
	EQ(qps_null_counters_all(dev, &c), 0);
	EQ(c.dev.wqes, max);
	EQ(c.dev.doorbells, 1);
	EQ(c.dev.tx_cqes, max);
	EQ(ops->poll_cq(cq, 64, wc), max);
	EQ(wc[max - 1].wr_id, max - 1);
	/* Room again once polled. */
	wr[max].send_flags = 0;
	EQ(ops->post_send(qp, &wr[max], &bad), 0);
	EQ(qps_null_counters_all(dev, &c), 0);
	EQ(c.dev.wqes, max + 1);
	EQ(c.dev.doorbells, 2);
	EQ(c.dev.tx_cqes, max);	/* unsignalled: no completion */
	EQ(ops->destroy_qp(qp), 0);
	EQ(ops->destroy_cq(cq), 0);
	EQ(ops->close(dev), 0);
}

/* Receive @n datagrams on @ep and check each: 64 bytes from the peer,
 * the payload pattern, and sequence numbers counting up from *@seq. */
static void recv_check(struct qps_ep *ep, int n, uint32_t *seq)
{
	uint8_t buf[256];
	struct sockaddr_in src;
	int i, j;

	for (i = 0; i < n; i++) {
		socklen_t sl = sizeof(src);
		uint32_t got;
		ssize_t r = qps_recvfrom(ep, buf, sizeof(buf), 0,
					 (struct sockaddr *)&src, &sl);

		EQ_FATAL(r, PAYLOAD);
		EQ(src.sin_addr.s_addr, inet_addr(PEER));
		EQ(ntohs(src.sin_port), PEER_PORT);
		got = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 |
		      (uint32_t)buf[2] << 8 | buf[3];
		EQ(got, *seq);
		(*seq)++;
		for (j = 4; j < PAYLOAD; j++)
			if (buf[j] != (uint8_t)j) {
				EQ(buf[j], (uint8_t)j);
				break;
			}
	}
}

/* No bad frame of any kind was seen, and every valid one was counted. */
static void rx_clean(struct qps_ctx *ctx, uint64_t min_ok)
{
	struct qps_stats st = t_ctx_stats(ctx);
	int i;

	GE(st.rx_bad[0], min_ok);
	for (i = 1; i < QPS_RX_REASON_MAX; i++)
		EQ(st.rx_bad[i], 0);
	EQ(st.rx_errors, 0);
}

static void test_rx_unicast(void)
{
	char dev[64];
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	struct qps_null_counters c;
	struct qps_stats st;
	uint32_t seq = 0;

	snprintf(dev, sizeof(dev), "rx=unicast:port=%d", PORT);
	ctx = mkctx(dev, QPS_TX_PATH_AUTO, 0);
	ep = t_ep_bound(ctx, "0.0.0.0", PORT, 1000);
	recv_check(ep, 1000, &seq);
	rx_clean(ctx, 1000);
	st = t_ctx_stats(ctx);
	c = dev_counters(ctx);
	/* Everything the device made reached the core, and was delivered
	 * or is queued on the endpoint. */
	EQ(c.dev.rx_cqes, st.rx_bad[0]);
	EQ(st.rx_demux_bound, st.rx_bad[0]);
	GE(st.rx_packets, 1000);
	EQ(c.dev.rx_no_rule, 0);
	EQ(qps_ep_close(ep), 0);
	/* Nobody on the port now: frames still come, nobody takes them. */
	GE(qps_ctx_progress(ctx), 0);
	GE(qps_ctx_progress(ctx), 0);
	st = t_ctx_stats(ctx);
	GE(st.rx_no_endpoint, 1);
	EQ(qps_ctx_destroy(ctx), 0);
}

/*
 * A connected endpoint is found by its 4-tuple, with few connections (the
 * receive path follows the table without prefetching it) and with many
 * (it prefetches the table entries of a batch); every datagram is
 * delivered either way, counted as connected.
 */
#define NCONN 80

static void test_rx_connected(void)
{
	char dev[64];
	struct qps_ctx *ctx;
	struct qps_ep *ep, *other[NCONN], *bound;
	struct sockaddr_in peer = t_sin(PEER, PEER_PORT);
	struct qps_stats st;
	uint32_t seq = 0;
	uint8_t buf[PAYLOAD];
	int i;

	snprintf(dev, sizeof(dev), "rx=unicast:port=%d", PORT);
	ctx = mkctx(dev, QPS_TX_PATH_AUTO, 0);
	ep = t_ep_bound(ctx, "0.0.0.0", PORT, 1000);
	EQ_FATAL(qps_connect(ep, (struct sockaddr *)&peer, sizeof(peer)), 0);
	recv_check(ep, 100, &seq);
	st = t_ctx_stats(ctx);
	EQ(st.rx_demux_connected, st.rx_bad[0]);
	EQ(st.rx_demux_bound, 0);
	for (i = 0; i < NCONN; i++) {
		struct sockaddr_in to = t_sin("198.18.1.1", 5000 + i);

		EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &other[i]), 0);
		EQ_FATAL(qps_connect(other[i], (struct sockaddr *)&to,
				     sizeof(to)), 0);
	}
	/* Connected again, so that its entry is the newest, first in its
	 * bucket whichever the others share: the fast path looks at no
	 * other (a datagram behind another connection in its bucket is
	 * delivered by the bound lookup, and counted there). */
	EQ_FATAL(qps_connect(ep, (struct sockaddr *)&peer, sizeof(peer)), 0);
	recv_check(ep, 1000, &seq);
	rx_clean(ctx, 1100);
	st = t_ctx_stats(ctx);
	EQ(st.rx_demux_connected, st.rx_bad[0]);
	EQ(st.rx_demux_bound, 0);
	EQ(st.rx_no_endpoint, 0);
	for (i = 0; i < NCONN; i++)
		EQ(qps_recv(other[i], buf, sizeof(buf), QPS_MSG_DONTWAIT),
		   -EAGAIN);
	/* With the connected endpoint gone, one bound to the port takes
	 * the datagrams, the many connections still in the table. */
	EQ(qps_ep_close(ep), 0);
	bound = t_ep_bound(ctx, "0.0.0.0", PORT, 1000);
	EQ_FATAL(qps_recv(bound, buf, sizeof(buf), 0), PAYLOAD);
	st = t_ctx_stats(ctx);
	GE(st.rx_demux_bound, 1);
	for (i = 0; i < NCONN; i++)
		EQ(qps_ep_close(other[i]), 0);
	EQ(qps_ep_close(bound), 0);
	EQ(qps_ctx_destroy(ctx), 0);
}

/*
 * Checksum offload: the device marks what it generates as checked
 * (IBV_WC_IP_CSUM_OK) unless csum=off. The core takes a marked frame's
 * sums as checked and checks an unmarked one itself: with the template's
 * UDP checksum made wrong (a device that lies, which null otherwise
 * never does), the marked frames are delivered and the unmarked ones
 * dropped as QPS_RX_BAD_UDP_CSUM. Right sums are delivered either way.
 */
static void rx_csum(bool off, bool corrupt)
{
	char dev[64];
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	struct qps_stats st;
	uint8_t buf[PAYLOAD];
	uint32_t seq = 0;
	int i;

	snprintf(dev, sizeof(dev), "rx=unicast:port=%d%s", PORT,
		 off ? ":csum=off" : "");
	ctx = mkctx(dev, QPS_TX_PATH_AUTO, 0);
	EQ(t_ctx_stats(ctx).csum_offload, !off);
	ep = t_ep_bound(ctx, "0.0.0.0", PORT, 1000);
	if (corrupt)
		qps_null_dev(ctx->dev)->udp_csum0 ^= 0x0101;
	if (!off || !corrupt) {
		recv_check(ep, 100, &seq);
		rx_clean(ctx, 100);
	} else {
		for (i = 0; i < 10; i++)
			GE(qps_ctx_progress(ctx), 0);
		EQ(qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT), -EAGAIN);
		st = t_ctx_stats(ctx);
		GE(st.rx_bad[QPS_RX_BAD_UDP_CSUM], 10);
		EQ(st.rx_bad[QPS_RX_OK], 0);
		EQ(st.rx_packets, 0);
	}
	EQ(qps_ep_close(ep), 0);
	EQ(qps_ctx_destroy(ctx), 0);
}

static void test_rx_csum(void)
{
	rx_csum(false, false);
	rx_csum(true, false);
	rx_csum(false, true);
	rx_csum(true, true);
}

/* Four members of a group each get every datagram (fan-out), nothing
 * arrives before the join, and a lone member takes the early path. */
static void test_rx_mcast(void)
{
	char dev[64];
	struct qps_ctx *ctx;
	struct qps_ep *ep[4];
	struct qps_mreq mr;
	struct qps_null_counters c;
	struct qps_stats st;
	uint32_t seq[4] = { 0 }, base;
	uint8_t buf[256];
	int i, k, r;

	snprintf(dev, sizeof(dev), "rx=mcast:group=%s:port=%d", GROUP, PORT);
	ctx = mkctx(dev, QPS_TX_PATH_AUTO, 0);
	for (i = 0; i < 4; i++) {
		int one = 1;

		int tmo = 1000;

		EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep[i]), 0);
		EQ(qps_setopt(ep[i], QPS_OPT_REUSEADDR, &one, sizeof(one)), 0);
		EQ(qps_setopt(ep[i], QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)), 0);
	}
	for (i = 0; i < 4; i++) {
		struct sockaddr_in sin = t_sin("0.0.0.0", PORT);

		EQ_FATAL(qps_bind(ep[i], (struct sockaddr *)&sin, sizeof(sin)),
			 0);
	}
	/* Not joined: the frame does not pass the port's filter. */
	for (i = 0; i < 4; i++)
		GE(qps_ctx_progress(ctx), 0);
	c = dev_counters(ctx);
	EQ(c.dev.rx_cqes, 0);
	GE(c.dev.rx_drops, 1);
	EQ(qps_recv(ep[0], &r, sizeof(r), QPS_MSG_DONTWAIT), -EAGAIN);

	memset(&mr, 0, sizeof(mr));
	mr.group.s_addr = inet_addr(GROUP);
	EQ_FATAL(qps_join(ep[0], &mr, sizeof(mr)), 0);
	recv_check(ep[0], 100, &seq[0]);
	st = t_ctx_stats(ctx);
	GE(st.rx_demux_early, 100);
	EQ(st.rx_demux_fanout, 0);
	for (i = 1; i < 4; i++)
		EQ_FATAL(qps_join(ep[i], &mr, sizeof(mr)), 0);
	/* Empty every queue without progressing the device (a receive
	 * progresses only when its queue is empty): from the next burst on,
	 * all four get the same datagrams. */
	for (i = 0; i < 4; i++) {
		int q = 0;
		socklen_t ql = sizeof(q);

		EQ(qps_getopt(ep[i], QPS_OPT_RXQ_LEN, &q, &ql), 0);
		for (k = 0; k < q; k++)
			EQ(qps_recv(ep[i], &r, sizeof(r), QPS_MSG_DONTWAIT),
			   sizeof(r));
	}
	EQ_FATAL(qps_recv(ep[0], buf, sizeof(buf), 0), PAYLOAD);
	base = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 |
	       (uint32_t)buf[2] << 8 | buf[3];
	seq[0] = base + 1;
	for (i = 1; i < 4; i++)
		seq[i] = base;
	for (k = 0; k < 200; k++)
		for (i = 0; i < 4; i++)
			recv_check(ep[i], 1, &seq[i]);
	rx_clean(ctx, 300);
	st = t_ctx_stats(ctx);
	GE(st.rx_demux_fanout, 200);
	GE(st.rx_fanout_deliveries, 4 * 200);
	EQ(qps_ctx_destroy(ctx), 0);
}

/* Without a rule for the template nothing is delivered, and that is
 * counted as the device's, not invented as traffic. */
static void test_rx_no_rule(void)
{
	struct qps_ctx *ctx = mkctx("rx=mcast:group=239.9.9.9:port=7001",
				    QPS_TX_PATH_AUTO, 0);
	struct qps_null_counters c;
	int i;

	/* Membership without a rule: as a kernel join would leave it. */
	EQ(qps_null_mcast_attach(ctx->dev,
				 (struct in_addr){ inet_addr("239.9.9.9") },
				 (struct in_addr){ 0 }), 0);
	for (i = 0; i < 4; i++)
		GE(qps_ctx_progress(ctx), 0);
	c = dev_counters(ctx);
	EQ(c.dev.rx_cqes, 0);
	GE(c.dev.rx_no_rule, 1);
	EQ(qps_null_mcast_detach(ctx->dev,
				 (struct in_addr){ inet_addr("239.9.9.9") },
				 (struct in_addr){ 0 }), 0);
	EQ(qps_ctx_destroy(ctx), 0);
}

static CU_TestInfo tests[] = {
	{ "device string", test_parse },
	{ "named only, direct path by default", test_not_default },
	{ "send counts, generic", test_send_generic },
	{ "send counts, direct", test_send_direct },
	{ "send counts, generic, every WQE signalled",
	  test_send_generic_sig1 },
	{ "send counts, direct, every WQE signalled", test_send_direct_sig1 },
	{ "mlx4 ring: taken when rung, up to the held WQE", test_ring },
	{ "post_send: full queue, one doorbell", test_post_send_full },
	{ "receive: unicast to a bound port", test_rx_unicast },
	{ "receive: connected, few and many connections", test_rx_connected },
	{ "receive: group, early and fan-out", test_rx_mcast },
	{ "receive: no rule, no datagram", test_rx_no_rule },
	{ "receive: checksums the device checked", test_rx_csum },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	unsetenv("QPS_TX_PATH");
	unsetenv("QPS_PROVIDER");
	return t_run("null", tests);
}
