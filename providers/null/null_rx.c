// SPDX-License-Identifier: MIT
/*
 * The null device's receive side: a template frame (Ethernet II, IPv4,
 * UDP, valid checksums) from the device string, written into posted
 * buffers when the receive CQ is polled (null_cq.c decides when), and
 * the multicast membership a group frame needs to get past the port's
 * filter. Each frame carries a sequence number in its first four payload
 * bytes, its UDP checksum updated incrementally from the template's (RFC
 * 1624), so every datagram differs and a test can count them.
 */
#include "null.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

/* The peer that sends the frames: 198.18.0.2, port 4242. */
#define NULL_PEER_ADDR 0xc6120002u
#define NULL_PEER_PORT 4242u
static const uint8_t null_peer_mac[6] = { 0x02, 0x4e, 0x55, 0x4c, 0x00, 0x02 };

/* Host-order ones' complement of the folded sum. */
static uint16_t csum_fold(uint32_t sum)
{
	return (uint16_t)~qps_sw_csum_fold(sum);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void qps_null_rx_template(struct qps_null_dev *dev)
{
	const struct qps_null_cfg *c = &dev->cfg;
	uint8_t *f = dev->frame, *ip = f + 14, *udp = f + 34;
	uint32_t dst = c->rx == QPS_NULL_RX_MCAST ? c->group : dev->addr;
	uint32_t src = htonl(NULL_PEER_ADDR), i, sum;
	uint16_t udp_len = (uint16_t)(8 + c->len), csum;

	memset(f, 0, sizeof(dev->frame));
	if (c->rx == QPS_NULL_RX_MCAST) {
		uint32_t g = ntohl(c->group);

		f[0] = 0x01;
		f[1] = 0x00;
		f[2] = 0x5e;
		f[3] = (uint8_t)((g >> 16) & 0x7f);
		f[4] = (uint8_t)(g >> 8);
		f[5] = (uint8_t)g;
	} else {
		memcpy(f, dev->mac, 6);
	}
	memcpy(f + 6, null_peer_mac, 6);
	put16(f + 12, 0x0800);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)(20 + udp_len));
	put16(ip + 6, 0x4000);	/* DF */
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	put16(ip + 10, csum_fold(qps_sw_csum_add(0, ip, 20)));
	put16(udp, NULL_PEER_PORT);
	put16(udp + 2, c->port);
	put16(udp + 4, udp_len);
	for (i = 4; i < c->len; i++)
		udp[8 + i] = (uint8_t)i;
	/* Pseudo header: addresses, protocol, UDP length. */
	sum = qps_sw_csum_add(0, ip + 12, 8) + 17 + udp_len;
	csum = csum_fold(qps_sw_csum_add(sum, udp, udp_len));
	dev->udp_csum0 = csum ? csum : 0xffff;
	put16(udp + 6, dev->udp_csum0);
	dev->frame_len = QPS_NULL_HDRS + c->len;
}

/* The template's UDP checksum with @seq in the payload's first word
 * (RFC 1624: HC' = ~(~HC + m'), the old words being 0). */
static uint16_t seq_csum(uint16_t csum0, uint32_t seq)
{
	uint16_t c = csum_fold((uint16_t)~csum0 + (seq >> 16) + (seq & 0xffff));

	return c ? c : 0xffff;
}

static bool mc_member_locked(const struct qps_null_dev *dev, uint32_t group)
{
	unsigned int i;

	for (i = 0; i < QPS_NULL_MAX_MC; i++)
		if (dev->mc[i].refs && dev->mc[i].group == group)
			return true;
	return false;
}

void qps_null_rx_update_locked(struct qps_null_dev *dev)
{
	struct qps_null_qp *qp = NULL;
	uint32_t why = QPS_NULL_RX_STEERED;

	if (dev->cfg.rx == QPS_NULL_RX_MCAST &&
	    !mc_member_locked(dev, dev->cfg.group))
		why = QPS_NULL_RX_NOT_MEMBER;
	else if (!(qp = qps_null_steer_locked(dev)))
		why = QPS_NULL_RX_NO_RULE;
	__atomic_store_n(&dev->rx_why, why, __ATOMIC_RELAXED);
	/* Release: pairs with rx_target's acquire; the QP was set up
	 * before its rule existed. A QP leaves this pointer (its last rule
	 * goes) before destroy_qp may free it, and destroy_qp waits for a
	 * generator that may still hold it (the receive CQ's lock). */
	__atomic_store_n(&dev->rx_qp, qp, __ATOMIC_RELEASE);
}

/* The QP the next burst goes to, NULL when none takes it; counted. */
static struct qps_null_qp *rx_target(struct qps_null_cq *cq)
{
	struct qps_null_dev *dev = qps_null_dev(cq->base.dev);
	/* Acquire: pairs with the release in qps_null_rx_update_locked. */
	struct qps_null_qp *qp = __atomic_load_n(&dev->rx_qp,
						 __ATOMIC_ACQUIRE);

	if (!qp) {
		/* One writer: the holder of this (the receive) CQ's lock. */
		if (__atomic_load_n(&dev->rx_why, __ATOMIC_RELAXED) ==
		    QPS_NULL_RX_NOT_MEMBER)
			qps_null_count(&dev->rx_drops, 1);
		else
			qps_null_count(&dev->rx_no_rule, 1);
		return NULL;
	}
	return qp->base.recv_cq == &cq->base ? qp : NULL;
}

int qps_null_rx_generate(struct qps_null_cq *cq, int num, struct ibv_wc *wc)
{
	struct qps_null_dev *dev = qps_null_dev(cq->base.dev);
	struct qps_null_qp *qp = rx_target(cq);
	uint32_t want = (uint32_t)num < dev->cfg.burst ? (uint32_t)num :
			dev->cfg.burst;
	uint32_t n, head, tail, len = dev->frame_len, qpn, mask;
	unsigned int flags = dev->cfg.csum_off ? 0 : IBV_WC_IP_CSUM_OK;

	if (!qp)
		return 0;
	qpn = qp->base.qp_num;
	mask = qp->rq_cnt - 1;
	/* Acquire: pairs with post_recv's release of rq_head; the entries
	 * below it are written. */
	head = __atomic_load_n(&qp->rq_head, __ATOMIC_ACQUIRE);
	tail = qp->rq_tail;
	for (n = 0; n < want; n++) {
		const struct qps_null_rq_ent *e;
		uint8_t *f;
		uint32_t seq;

		if (tail == head) {
			qps_null_count(&qp->st.rx_no_buf, 1);
			break;
		}
		e = &qp->rq[tail++ & mask];
		if (e->len < len) {
			wc[n] = (struct ibv_wc){
				.wr_id = e->wr_id,
				.status = IBV_WC_LOC_LEN_ERR,
				.opcode = IBV_WC_RECV,
				.qp_num = qpn,
			};
			continue;
		}
		f = (uint8_t *)e->addr;
		seq = dev->rx_seq++;
		memcpy(f, dev->frame, len);
		f[QPS_NULL_HDRS] = (uint8_t)(seq >> 24);
		f[QPS_NULL_HDRS + 1] = (uint8_t)(seq >> 16);
		f[QPS_NULL_HDRS + 2] = (uint8_t)(seq >> 8);
		f[QPS_NULL_HDRS + 3] = (uint8_t)seq;
		put16(f + 40, seq_csum(dev->udp_csum0, seq));
		wc[n] = (struct ibv_wc){
			.wr_id = e->wr_id,
			.status = IBV_WC_SUCCESS,
			.opcode = IBV_WC_RECV,
			.byte_len = len,
			.qp_num = qpn,
			.wc_flags = flags,
		};
	}
	/* Release: pairs with post_recv's acquire of rq_tail: the entries
	 * taken have been read. */
	__atomic_store_n(&qp->rq_tail, tail, __ATOMIC_RELEASE);
	qps_null_count(&qp->st.rx_cqes, n);
	return (int)n;
}

int qps_null_mcast_attach(struct qps_dev *d, struct in_addr group,
			  struct in_addr source)
{
	struct qps_null_dev *dev = qps_null_dev(d);
	unsigned int i, freei = QPS_NULL_MAX_MC;

	(void)source;	/* the filter is by group MAC, as on a port */
	if (!IN_MULTICAST(ntohl(group.s_addr)))
		return -EINVAL;
	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < QPS_NULL_MAX_MC; i++) {
		if (dev->mc[i].refs && dev->mc[i].group == group.s_addr) {
			dev->mc[i].refs++;
			pthread_mutex_unlock(&dev->lock);
			return 0;
		}
		if (!dev->mc[i].refs && freei == QPS_NULL_MAX_MC)
			freei = i;
	}
	if (freei == QPS_NULL_MAX_MC) {
		pthread_mutex_unlock(&dev->lock);
		return -ENOSPC;
	}
	dev->mc[freei].group = group.s_addr;
	dev->mc[freei].refs = 1;
	qps_null_rx_update_locked(dev);
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

int qps_null_mcast_detach(struct qps_dev *d, struct in_addr group,
			  struct in_addr source)
{
	struct qps_null_dev *dev = qps_null_dev(d);
	unsigned int i;

	(void)source;
	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < QPS_NULL_MAX_MC; i++) {
		if (dev->mc[i].refs && dev->mc[i].group == group.s_addr) {
			dev->mc[i].refs--;
			qps_null_rx_update_locked(dev);
			pthread_mutex_unlock(&dev->lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&dev->lock);
	return -ENOENT;
}
