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
 * The interface down, a kick fails (ENETDOWN) and the kernel leaves the
 * descriptors on the ring, to send whenever it is up again. The frames
 * then complete with an error instead, as packet's do: each descriptor
 * the kernel has not taken is rewritten to point outside the UMEM, which
 * the kernel skips as invalid and never completes, and its frame is ours
 * again at once. Should the kernel have read one just before (it drives
 * the ring from poll() on the socket too), that frame may still leave;
 * a frame that is no longer busy is never freed twice.
 *
 * The carrier gone, the kernel takes a frame from the ring, the device
 * drops it and the kick fails with EBUSY; the frame still comes back
 * through the completion ring. It is put on the ring again (it was the
 * last one there, so the order holds; otherwise it completes with an
 * error), and kicks stop until the driver says the carrier is back
 * (ETHTOOL_GLINK, asked once a millisecond at most): meanwhile the
 * frames wait on the ring and a full ring pushes back on senders, as on
 * packet.
 *
 * One lock, dev->tx_lock, for the rings and every SQ: the TX ring has one
 * producer.
 */
#include "xdp.h"

#include <errno.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define XDP_MAX_REKICKS 256

/* A frame the device dropped, on the ring again; false when there is no
 * room. tx_lock held. */
static bool tx_requeue(struct qps_xdp_dev *dev, uint64_t addr,
		       struct qps_xdp_tx_owner *o)
{
	uint32_t idx = 0;
	struct xdp_desc *d;

	if (xsk_ring_prod__reserve(&dev->tx, 1, &idx) != 1)
		return false;
	d = xsk_ring_prod__tx_desc(&dev->tx, idx);
	d->addr = addr;
	d->len = o->len;
	d->options = 0;
	o->requeue = false;
	/* Release: pairs with the kernel's acquire of the producer. */
	xsk_ring_prod__submit(&dev->tx, 1);
	return true;
}

/* Take back the frames the kernel is done with. tx_lock held. */
static void tx_reap(struct qps_xdp_dev *dev)
{
	uint32_t idx = 0, n, i;

	n = xsk_ring_cons__peek(&dev->cq, QPS_XDP_RING, &idx);
	for (i = 0; i < n; i++) {
		uint64_t addr = *xsk_ring_cons__comp_addr(&dev->cq, idx + i);
		uint64_t fi = addr / QPS_XDP_FRAME_SIZE;
		struct qps_xdp_tx_owner *o;

		if (fi < dev->rx_frames || fi >= dev->rx_frames + QPS_XDP_RING)
			continue;	/* never ours to send: ignore */
		o = &dev->tx_owner[fi - dev->rx_frames];
		if (!o->busy)
			continue;	/* voided: freed already */
		if (o->requeue && tx_requeue(dev, addr, o))
			continue;
		if (o->qp) {
			struct qps_xdp_swqe *e =
				&o->qp->sq[o->sq_idx & (o->qp->sq_cnt - 1)];

			e->done = true;
			if (o->failed) {
				e->status = IBV_WC_GENERAL_ERR;
				qps_sw_count(&o->qp->sq_stats.tx_drops, 1);
			}
		}
		o->requeue = false;
		o->failed = false;
		o->qp = NULL;
		o->busy = false;
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

/* The interface is down: what the kernel has not taken completes with an
 * error (see top). tx_lock held. */
static void tx_void(struct qps_xdp_dev *dev)
{
	uint32_t i = __atomic_load_n(dev->tx.consumer, __ATOMIC_ACQUIRE);

	for (; i != dev->tx.cached_prod; i++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&dev->tx, i);
		uint64_t fi = d->addr / QPS_XDP_FRAME_SIZE;
		struct qps_xdp_tx_owner *o;

		if (fi < dev->rx_frames || fi >= dev->rx_frames + QPS_XDP_RING)
			continue;	/* voided already */
		o = &dev->tx_owner[fi - dev->rx_frames];
		d->addr = dev->area_len;
		d->len = 0;
		if (!o->busy)
			continue;
		if (o->qp) {
			struct qps_xdp_swqe *e =
				&o->qp->sq[o->sq_idx & (o->qp->sq_cnt - 1)];

			e->status = IBV_WC_GENERAL_ERR;
			e->done = true;
			qps_sw_count(&o->qp->sq_stats.tx_drops, 1);
		}
		o->qp = NULL;
		o->busy = false;
		dev->tx_free[dev->tx_nfree++] = fi * QPS_XDP_FRAME_SIZE;
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The driver says the carrier is gone (netif_carrier_ok, at once; the
 * flags' IFF_RUNNING follows only later). */
static bool link_down(const struct qps_xdp_dev *dev)
{
	struct ethtool_value ev = { .cmd = ETHTOOL_GLINK };
	struct ifreq ifr;

	if (dev->carrier_fd < 0)
		return false;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, dev->info.name, IF_NAMESIZE - 1);
	ifr.ifr_data = (void *)&ev;
	return ioctl(dev->carrier_fd, SIOCETHTOOL, &ifr) == 0 && !ev.data;
}

/* Whether kicks may go: not while the carrier is known gone. */
static bool tx_carrier(struct qps_xdp_dev *dev)
{
	uint64_t now;

	if (!dev->carrier_wait)
		return true;
	now = now_ns();
	if (now - dev->carrier_ns < 1000000u)
		return false;
	dev->carrier_ns = now;
	if (link_down(dev))
		return false;
	dev->carrier_wait = false;
	return true;
}

/* The kick failed with EBUSY: the device dropped the frame the kernel
 * took last (see top). tx_lock held. */
static void tx_dropped(struct qps_xdp_dev *dev)
{
	uint32_t cons = __atomic_load_n(dev->tx.consumer, __ATOMIC_ACQUIRE);
	const struct xdp_desc *d = xsk_ring_prod__tx_desc(&dev->tx, cons - 1);
	uint64_t fi = d->addr / QPS_XDP_FRAME_SIZE;
	struct qps_xdp_tx_owner *o;

	if (fi < dev->rx_frames || fi >= dev->rx_frames + QPS_XDP_RING)
		return;
	o = &dev->tx_owner[fi - dev->rx_frames];
	if (!o->busy)
		return;
	if (cons == dev->tx.cached_prod)
		o->requeue = true;
	else
		o->failed = true;
	dev->carrier_wait = true;
	dev->carrier_ns = now_ns();
}

/* The doorbell and its continuations. tx_lock held; @qp is charged. */
static void tx_kick(struct qps_xdp_dev *dev, struct qps_xdp_qp *qp,
		    bool count)
{
	unsigned int i;

	for (i = 0; i < XDP_MAX_REKICKS && tx_carrier(dev); i++) {
		uint32_t before = tx_queued(dev);
		/* Length 0: the kernel reads no buffer. */
		static const uint8_t none;
		ssize_t r = sendto(dev->xsk_fd, &none, 0, MSG_DONTWAIT, NULL,
				   0);
		int err = r < 0 ? errno : 0;

		if (err == EBUSY)
			tx_dropped(dev);
		if (count && i == 0)
			qps_sw_count(&qp->sq_stats.doorbells, 1);
		else
			qps_sw_count(&dev->rekicks, 1);
		tx_reap(dev);
		if (!tx_queued(dev)) {
			dev->kick_pending = false;
			return;
		}
		if (err == ENETDOWN || err == ENXIO) {
			if (!dev->down_said)
				qps_xdp_log("%s is down: %u frame(s) completed "
					    "with an error", dev->info.name,
					    tx_queued(dev));
			dev->down_said = true;
			tx_void(dev);
			break;
		}
		dev->down_said = false;
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
		ret = qps_sw_send_wr_check(q, wr);
		if (ret)
			break;
		st = qps_sw_send_wr_len(&dev->mrs, wr,
					qps_xdp_mtu(dev) + QPS_XDP_ETH_HLEN,
					&len);
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
				addr / QPS_XDP_FRAME_SIZE - dev->rx_frames];

			qps_sw_send_wr_copy(xsk_umem__get_data(dev->area, addr),
					    wr);
			d->addr = addr;
			d->len = len;
			d->options = 0;
			o->qp = qp;
			o->sq_idx = qp->sq_head;
			o->len = len;
			o->busy = true;
			o->requeue = false;
			o->failed = false;
			in_ring++;
		}
		qps_sw_sq_count(&qp->sq_stats, st);
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
		n += qps_sw_send_wc(&wc[n], &qp->base, e->wr_id, e->byte_len,
				    st, e->signaled);
	}
	qps_sw_count(&qp->sq_stats.tx_cqes, (uint64_t)n);
	pthread_mutex_unlock(&dev->tx_lock);
	return n;
}

void qps_xdp_tx_forget(struct qps_xdp_dev *dev, const struct qps_xdp_qp *qp)
{
	uint32_t i;

	for (i = 0; i < QPS_XDP_RING; i++)
		if (dev->tx_owner[i].qp == qp)
			dev->tx_owner[i].qp = NULL;
}
