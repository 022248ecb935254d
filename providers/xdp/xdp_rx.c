// SPDX-License-Identifier: MIT
/*
 * Receive side: posted buffers per QP, filled from the device's RX ring.
 *
 * The XDP program only decides that a frame is the context's; which of
 * the context's rules (hence which QP) takes it is decided here, with the
 * steering semantics of every provider: the strongest rule that matches
 * (NORMAL, then MC_DEFAULT, then ALL_DEFAULT; lower priority value first;
 * the older rule on a tie). dev->flows is kept in that order. A frame no
 * rule matches (the program's lookups are coarser than the rules: source
 * address and port are not in its maps) is counted in rx_no_rule.
 *
 * Polling a receive CQ copies ring frames into posted buffers, in post
 * order, and hands the frames back to their queue's share of the UMEM at
 * once (xdp_umem.c keeps the queue's fill ring topped up from it). Every
 * receive queue's RX ring is drained, a batch at a time in turn, from a
 * queue one further each poll, so a busy queue cannot starve the others
 * and none is always last. A frame for
 * a QP of another CQ is completed into that QP's own list, given out by
 * the next poll of its CQ (dev->evfd is readable meanwhile). A frame that
 * finds no posted buffer is dropped and counted (rx_no_buf).
 *
 * Checksums: a frame the host itself built (veth peer, checksum offload)
 * reaches XDP with a partial UDP checksum: the folded pseudo-header sum,
 * which the core's parser would reject. Such a frame, and only when its
 * checksum does not verify as it is, is completed in the copy handed over
 * (rx_csum_fixed), so the buffer holds the frame as a wire would carry it.
 */
#include "xdp.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define XDP_IP_MIN (QPS_XDP_ETH_HLEN + 20)
#define XDP_RX_BATCH 64

int qps_xdp_post_recv(struct qps_qp *q, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(q->dev);

	return qps_sw_rq_post(&qps_xdp_qp(q)->rq, &dev->mrs, wr, bad_wr);
}

static uint16_t be16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32_at(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static bool mac_match(const struct qps_flow_rule *r, const uint8_t *f)
{
	unsigned int i;

	for (i = 0; i < 6; i++)
		if ((f[i] & r->mac_mask[i]) != r->mac[i])
			return false;
	return r->tier != QPS_FLOW_TIER_MC_DEFAULT || (f[0] & 1);
}

/* The rule's test on a frame, as packet's filters make it (packet_bpf.c):
 * a frame too broken to read a field matches at the layer where it broke,
 * so that the core's parser counts it; fragments after the first carry
 * no ports and never match a port rule. */
bool qps_xdp_rule_match(const struct qps_flow_rule *r, const uint8_t *f,
			uint32_t len)
{
	const uint32_t e = QPS_XDP_ETH_HLEN;
	uint32_t ihl;

	if (len < 6 || !mac_match(r, f))
		return false;
	if (len < XDP_IP_MIN || (f[e] >> 4) != 4 || (f[e] & 0xfu) < 5)
		return true;
	if (f[e + 9] != 17)
		return false;
	if ((be32_at(f + e + 12) & ntohl(r->sip_mask)) != ntohl(r->sip) ||
	    (be32_at(f + e + 16) & ntohl(r->dip_mask)) != ntohl(r->dip))
		return false;
	if (!r->sport_mask && !r->dport_mask)
		return true;
	if (be16_at(f + e + 6) & 0x1fff)
		return false;
	ihl = (f[e] & 0xfu) * 4;
	if (e + ihl + 4 > len)
		return true;
	return (be16_at(f + e + ihl) & ntohs(r->sport_mask)) ==
		       ntohs(r->sport) &&
	       (be16_at(f + e + ihl + 2) & ntohs(r->dport_mask)) ==
		       ntohs(r->dport);
}

/* Complete a partial UDP checksum (see top); true when it was one. */
static bool csum_fix(uint8_t *f, uint32_t len)
{
	const uint32_t e = QPS_XDP_ETH_HLEN;
	uint32_t ihl, tot, ulen, pseudo, sum;
	uint16_t c;
	uint8_t *udp;

	if (len < XDP_IP_MIN || be16_at(f + 12) != 0x0800 ||
	    (f[e] >> 4) != 4 || f[e + 9] != 17)
		return false;
	ihl = (f[e] & 0xfu) * 4;
	tot = be16_at(f + e + 2);
	if (ihl < 20 || (be16_at(f + e + 6) & 0x3fff) || tot < ihl + 8 ||
	    e + tot > len)
		return false;
	udp = f + e + ihl;
	ulen = be16_at(udp + 4);
	if (ulen < 8 || ulen > tot - ihl || !be16_at(udp + 6))
		return false;
	pseudo = qps_sw_csum_add(17 + ulen, f + e + 12, 8);
	if (qps_sw_csum_fold(qps_sw_csum_add(pseudo, udp, ulen)) == 0xffff)
		return false;		/* verifies as it is */
	if (be16_at(udp + 6) != qps_sw_csum_fold(pseudo))
		return false;		/* bad, not partial: the parser's */
	udp[6] = udp[7] = 0;
	sum = qps_sw_csum_fold(qps_sw_csum_add(pseudo, udp, ulen));
	/* A sum of 0xffff complements to 0, which would mean "no
	 * checksum": sent as 0xffff, its other form (RFC 768). */
	c = sum == 0xffff ? 0xffff : (uint16_t)~sum;
	udp[6] = (uint8_t)(c >> 8);
	udp[7] = (uint8_t)c;
	return true;
}

/* The strongest rule taking the frame. dev->lock held. */
static struct qps_xdp_flow *rule_find(struct qps_xdp_dev *dev,
				      const uint8_t *f, uint32_t len)
{
	struct qps_xdp_flow *fl;

	for (fl = dev->flows; fl; fl = fl->next)
		if (qps_xdp_rule_match(&fl->rule, f, len))
			return fl;
	return NULL;
}

/* One frame into @qp's next posted buffer; 1 when @wc was filled.
 * rq.lock held. */
static int rx_one(struct qps_xdp_dev *dev, struct qps_xdp_qp *qp,
		  const uint8_t *f, uint32_t len, struct ibv_wc *wc)
{
	struct qps_sw_rwqe *rw;

	if (qp->rq.tail == qp->rq.head) {
		qps_sw_count(&qp->rx_no_buf, 1);
		return 0;
	}
	rw = &qp->rq.wqe[qp->rq.tail++ & (qp->rq.cnt - 1)];
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = rw->wr_id;
	wc->opcode = IBV_WC_RECV;
	wc->qp_num = qp->base.qp_num;
	qps_sw_count(&qp->rx_cqes, 1);
	if (len > rw->len) {
		qps_sw_count(&qp->rx_len_err, 1);
		wc->status = IBV_WC_LOC_LEN_ERR;
		return 1;
	}
	memcpy((void *)rw->addr, f, len);
	if (csum_fix((uint8_t *)rw->addr, len))
		qps_sw_count(&dev->rx_csum_fixed, 1);
	wc->status = IBV_WC_SUCCESS;
	wc->byte_len = len;
	return 1;
}

/* Completions made for @cq's QPs by polls of other CQs. dev->lock held. */
static int rx_stashed(struct qps_xdp_dev *dev, const struct qps_cq *cq,
		      int num,
		      struct ibv_wc *wc)
{
	struct qps_xdp_qp *qp;
	int n = 0;

	for (qp = dev->qps; qp && n < num; qp = qp->next) {
		if (qp->base.recv_cq != cq)
			continue;
		pthread_mutex_lock(&qp->rq.lock);
		while (n < num && qp->wc_tail != qp->wc_head)
			wc[n++] = qp->wcs[qp->wc_tail++ & (qp->rq.cnt - 1)];
		pthread_mutex_unlock(&qp->rq.lock);
	}
	return n;
}

/* Move up to @max frames of @q's RX ring, @wc taking those of @cq's QPs
 * (*@n of them); returns the frames moved. rx_lock and dev->lock held. */
static uint32_t rx_ring(struct qps_xdp_dev *dev, struct qps_xdp_rxq *q,
			const struct qps_cq *cq, uint32_t max,
			struct ibv_wc *wc, int *n, bool *stashed)
{
	uint64_t back[XDP_RX_BATCH];
	uint32_t idx = 0, got, i;

	got = xsk_ring_cons__peek(&q->rx, max, &idx);
	if (!got) {
		/* Nothing: let the kernel fill the ring when it must be
		 * woken, or busy-poll the device's queue. */
		if (xsk_ring_prod__needs_wakeup(&q->fq) || dev->busy_poll) {
			/* Length 0: the kernel reads no buffer. */
			static uint8_t none;

			(void)recvfrom(q->fd, &none, 0, MSG_DONTWAIT, NULL,
				       NULL);
		}
		return 0;
	}
	q->frames += got;
	for (i = 0; i < got; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&q->rx,
								  idx + i);
		const uint8_t *f = xsk_umem__get_data(dev->area, d->addr);
		struct qps_xdp_flow *fl = rule_find(dev, f, d->len);
		struct qps_xdp_qp *qp;

		back[i] = d->addr & ~(uint64_t)(QPS_XDP_FRAME_SIZE - 1);
		if (!fl) {
			qps_sw_count(&dev->rx_no_rule, 1);
			continue;
		}
		qp = qps_xdp_qp(fl->base.qp);
		pthread_mutex_lock(&qp->rq.lock);
		if (qp->base.recv_cq == cq) {
			*n += rx_one(dev, qp, f, d->len, &wc[*n]);
		} else if (qp->wc_head - qp->wc_tail >= qp->rq.cnt) {
			qps_sw_count(&qp->rx_no_buf, 1);
		} else if (rx_one(dev, qp, f, d->len,
				  &qp->wcs[qp->wc_head & (qp->rq.cnt - 1)])) {
			qp->wc_head++;
			*stashed = true;
		}
		pthread_mutex_unlock(&qp->rq.lock);
	}
	/* Release: the kernel may reuse the RX slots (pairs with its
	 * acquire of the consumer index); the frames go back to the fill
	 * ring, done reading, with the fill ring's own release. */
	xsk_ring_cons__release(&q->rx, got);
	qps_xdp_fill_return(dev, q, back, got);
	return got;
}

int qps_xdp_rx_poll(struct qps_xdp_dev *dev, struct qps_cq *cq, int num,
		    struct ibv_wc *wc)
{
	bool stashed = false;
	int n = rx_stashed(dev, cq, num, wc);
	uint32_t q, idle = 0;

	pthread_mutex_lock(&dev->rx_lock);
	q = dev->rx_next;
	dev->rx_next = q + 1 < dev->nrxq ? q + 1 : 0;
	/* Until @num or a whole round of queues gave nothing. */
	while (n < num && idle < dev->nrxq) {
		uint32_t max = (uint32_t)(num - n);

		if (rx_ring(dev, &dev->rxq[q], cq,
			    max < XDP_RX_BATCH ? max : XDP_RX_BATCH, wc, &n,
			    &stashed))
			idle = 0;
		else
			idle++;
		q = q + 1 < dev->nrxq ? q + 1 : 0;
	}
	pthread_mutex_unlock(&dev->rx_lock);
	if (stashed) {
		uint64_t one = 1;

		/* The counter is far from full: this cannot fail. */
		(void)!write(dev->evfd, &one, sizeof(one));
	}
	return n;
}
