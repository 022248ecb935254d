// SPDX-License-Identifier: MIT
/*
 * Send side: every QP's software SQ feeds the device's one TX ring.
 *
 * post_send copies each WR's frame into a free frame of the UMEM's send
 * half and puts its descriptor on the TX ring; the chain is published at
 * once and ends with at most one kick, sendto(MSG_DONTWAIT), when the
 * ring says it needs a wakeup (always in copy mode): this provider's
 * doorbell, counted in doorbells. In copy mode the kernel sends at most
 * a small batch per kick and answers EAGAIN for the rest: those kicks
 * continue the same doorbell (counted in rekicks, not doorbells), and
 * what is still left when the kernel makes no progress is kicked again
 * by the next poll of a send CQ.
 *
 * A frame comes back through the completion ring once the kernel is done
 * with it: that is the send completion, reaped by polling the send CQ;
 * WRs complete in their SQ's order. A WR the ring must not see (frame
 * above MTU + 14 bytes, shorter than an Ethernet header, or outside its
 * memory region) takes no frame and completes with an error in its place
 * in the order, counted in tx_drops.
 *
 * One lock, dev->tx_lock, for the rings and every SQ: the TX ring has one
 * producer.
 */
#include "xdp.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#define XDP_MAX_REKICKS 256

/* Take back the frames the kernel is done with. tx_lock held. */
static void tx_reap(struct qps_xdp_dev *dev)
{
	uint32_t idx = 0, n, i;

	n = xsk_ring_cons__peek(&dev->cq, QPS_XDP_RING, &idx);
	for (i = 0; i < n; i++) {
		uint64_t addr = *xsk_ring_cons__comp_addr(&dev->cq, idx + i);
		uint64_t fi = addr / QPS_XDP_FRAME_SIZE;
		struct qps_xdp_tx_owner *o;

		if (fi < QPS_XDP_RING || fi >= QPS_XDP_NFRAMES)
			continue;	/* never ours to send: ignore */
		o = &dev->tx_owner[fi - QPS_XDP_RING];
		if (o->qp)
			o->qp->sq[o->sq_idx & (o->qp->sq_cnt - 1)].done = true;
		o->qp = NULL;
		dev->tx_free[dev->tx_nfree++] = fi * QPS_XDP_FRAME_SIZE;
	}
	if (n)
		xsk_ring_cons__release(&dev->cq, n);
}

/* Frames on the TX ring the kernel has not taken yet. */
static uint32_t tx_queued(const struct qps_xdp_dev *dev)
{
	/* Acquire: pairs with the kernel's release of the consumer index
	 * once it has read the descriptors. */
	return dev->tx.cached_prod -
	       __atomic_load_n(dev->tx.consumer, __ATOMIC_ACQUIRE);
}

/* The doorbell and its continuations. tx_lock held; @qp is charged. */
static void tx_kick(struct qps_xdp_dev *dev, struct qps_xdp_qp *qp,
		    bool count)
{
	unsigned int i;

	for (i = 0; i < XDP_MAX_REKICKS; i++) {
		uint32_t before = tx_queued(dev);
		ssize_t r = sendto(dev->xsk_fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
		int err = r < 0 ? errno : 0;

		if (count && i == 0)
			qps_xdp_count(&qp->doorbells, 1);
		else
			qps_xdp_count(&dev->rekicks, 1);
		tx_reap(dev);
		if (!tx_queued(dev)) {
			dev->kick_pending = false;
			return;
		}
		if (err != EAGAIN && err != EBUSY && err != ENOBUFS &&
		    err != EINTR && err != 0)
			break;
		if (tx_queued(dev) == before && err != EINTR)
			break;
	}
	/* Left on the ring: the interface is down or its queue full; the
	 * next poll of a send CQ kicks again. */
	dev->kick_pending = true;
}

static int check_wr(const struct qps_xdp_qp *qp, const struct ibv_send_wr *wr)
{
	if (wr->opcode != IBV_WR_SEND)
		return -EINVAL;
	if (wr->num_sge < 0 ||
	    (uint32_t)wr->num_sge > qp->base.cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	return 0;
}

static enum ibv_wc_status wr_check_len(struct qps_xdp_dev *dev,
				       const struct ibv_send_wr *wr,
				       uint32_t *len_out)
{
	uint64_t total = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	*len_out = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
	if (total < QPS_XDP_ETH_HLEN ||
	    total > qps_xdp_mtu(dev) + QPS_XDP_ETH_HLEN)
		return IBV_WC_LOC_LEN_ERR;
	for (i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];

		if (!(wr->send_flags & IBV_SEND_INLINE) &&
		    qps_xdp_mr_check(dev, s->lkey, (uintptr_t)s->addr,
				     s->length))
			return IBV_WC_LOC_PROT_ERR;
	}
	return IBV_WC_SUCCESS;
}

static void wr_copy(uint8_t *dst, const struct ibv_send_wr *wr)
{
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		memcpy(dst, (const void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		dst += wr->sg_list[i].length;
	}
}

/* Room for one more frame: a free frame and a TX ring slot. */
static bool tx_room(struct qps_xdp_dev *dev, uint32_t *idx)
{
	if (!dev->tx_nfree)
		tx_reap(dev);
	if (!dev->tx_nfree)
		return false;
	return xsk_ring_prod__reserve(&dev->tx, 1, idx) == 1;
}

int qps_xdp_post_send(struct qps_qp *q, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	struct qps_xdp_qp *qp = qps_xdp_qp(q);
	struct qps_xdp_dev *dev = qps_xdp_dev(q->dev);
	uint32_t in_ring = 0;
	int ret = 0;

	pthread_mutex_lock(&dev->tx_lock);
	for (; wr; wr = wr->next) {
		struct qps_xdp_swqe *e;
		enum ibv_wc_status st;
		uint32_t len, idx = 0;

		if (qp->sq_head - qp->sq_tail >= qp->sq_cnt) {
			ret = -ENOMEM;	/* full, as verbs says it */
			break;
		}
		ret = check_wr(qp, wr);
		if (ret)
			break;
		st = wr_check_len(dev, wr, &len);
		if (st == IBV_WC_SUCCESS && !tx_room(dev, &idx)) {
			ret = -ENOMEM;
			break;
		}
		e = &qp->sq[qp->sq_head & (qp->sq_cnt - 1)];
		e->wr_id = wr->wr_id;
		e->byte_len = len;
		e->signaled = qp->sq_sig_all ||
			      (wr->send_flags & IBV_SEND_SIGNALED);
		e->status = (uint8_t)st;
		e->in_ring = st == IBV_WC_SUCCESS;
		e->done = false;
		if (e->in_ring) {
			uint64_t addr = dev->tx_free[--dev->tx_nfree];
			struct xdp_desc *d = xsk_ring_prod__tx_desc(&dev->tx,
								    idx);
			struct qps_xdp_tx_owner *o = &dev->tx_owner[
				addr / QPS_XDP_FRAME_SIZE - QPS_XDP_RING];

			wr_copy(xsk_umem__get_data(dev->area, addr), wr);
			d->addr = addr;
			d->len = len;
			d->options = 0;
			o->qp = qp;
			o->sq_idx = qp->sq_head;
			in_ring++;
			qps_xdp_count(&qp->wqes, 1);
		} else {
			if (st == IBV_WC_LOC_LEN_ERR)
				qps_xdp_count(&qp->tx_len_err, 1);
			qps_xdp_count(&qp->tx_drops, 1);
		}
		qp->sq_head++;
	}
	/* One doorbell for the chain, even when it stopped early: what was
	 * posted must go (verbs semantics). submit's release pairs with the
	 * kernel's acquire of the producer index. */
	if (in_ring)
		xsk_ring_prod__submit(&dev->tx, in_ring);
	if ((in_ring || dev->kick_pending) &&
	    xsk_ring_prod__needs_wakeup(&dev->tx))
		tx_kick(dev, qp, in_ring != 0);
	else if (in_ring)
		tx_reap(dev);
	pthread_mutex_unlock(&dev->tx_lock);
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}

int qps_xdp_tx_poll(struct qps_xdp_dev *dev, struct qps_xdp_qp *qp, int num,
		    struct ibv_wc *wc)
{
	int n = 0;

	pthread_mutex_lock(&dev->tx_lock);
	if (dev->kick_pending)
		tx_kick(dev, qp, false);
	tx_reap(dev);
	while (n < num && qp->sq_tail != qp->sq_head) {
		struct qps_xdp_swqe *e = &qp->sq[qp->sq_tail &
						 (qp->sq_cnt - 1)];
		enum ibv_wc_status st = (enum ibv_wc_status)e->status;

		if (e->in_ring && !e->done)
			break;
		qp->sq_tail++;
		if (!e->signaled && st == IBV_WC_SUCCESS)
			continue;
		memset(&wc[n], 0, sizeof(wc[n]));
		wc[n].wr_id = e->wr_id;
		wc[n].status = st;
		wc[n].opcode = IBV_WC_SEND;
		wc[n].byte_len = st == IBV_WC_SUCCESS ? e->byte_len : 0;
		wc[n].qp_num = qp->base.qp_num;
		n++;
	}
	qps_xdp_count(&qp->tx_cqes, (uint64_t)n);
	pthread_mutex_unlock(&dev->tx_lock);
	return n;
}

void qps_xdp_tx_forget(struct qps_xdp_dev *dev, struct qps_xdp_qp *qp)
{
	uint32_t i;

	for (i = 0; i < QPS_XDP_RING; i++)
		if (dev->tx_owner[i].qp == qp)
			dev->tx_owner[i].qp = NULL;
}
