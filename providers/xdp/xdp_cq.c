// SPDX-License-Identifier: MIT
/*
 * Software completion queues (common/sw_cq.c), as packet's: polling a CQ
 * does the device's work for the QPs that report to it (reap the
 * completion ring, move RX ring frames into posted buffers) and returns
 * those completions directly.
 *
 * Events: the device's event fd is an epoll set of the XSKs (each
 * readable while its RX ring holds frames), on it from req_notify_cq
 * until a while after the drain (xdp_event.c), and dev->evfd (written
 * when a poll left completions for another CQ's QP, drained by
 * ack_events): level triggered.
 */
#include "xdp.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int qps_xdp_create_cq(struct qps_dev *d, int cqe, struct qps_cq **cq_out)
{
	return qps_sw_cq_create(d, cqe, QPS_XDP_MAX_CQE, cq_out);
}

int qps_xdp_destroy_cq(struct qps_cq *c)
{
	return qps_sw_cq_destroy(c, &qps_xdp_dev(c->dev)->lock);
}

static int xdp_poll(struct qps_cq *c, int num, struct ibv_wc *wc,
		    struct qps_wc_ts *ts)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(c->dev);
	struct qps_sw_cq *cq = qps_sw_cq(c);
	struct qps_xdp_qp *qp;
	bool has_rx = false;
	int n = 0;

	if (num < 0 || (num && !wc))
		return -EINVAL;
	pthread_mutex_lock(&cq->lock);
	/* dev->lock keeps the QP and flow lists still while we walk them;
	 * lock order is dev->lock, then tx_lock, rx_lock, a QP's rq.lock. */
	pthread_mutex_lock(&dev->lock);
	for (qp = dev->qps; qp && n < num; qp = qp->next) {
		if (qp->base.send_cq == c)
			n += qps_xdp_tx_poll(dev, qp, num - n, wc + n);
		if (qp->base.recv_cq == c)
			has_rx = true;
	}
	if (has_rx && n < num)
		n += qps_xdp_rx_poll(dev, c, num - n, wc + n);
	if (has_rx)
		qps_xdp_ev_polled(dev);
	pthread_mutex_unlock(&dev->lock);
	pthread_mutex_unlock(&cq->lock);
	/* Neither side has a time from the kernel in AF_XDP. */
	if (ts && n > 0)
		memset(ts, 0, (size_t)n * sizeof(*ts));
	return n;
}

int qps_xdp_poll_cq(struct qps_cq *c, int num, struct ibv_wc *wc)
{
	return xdp_poll(c, num, wc, NULL);
}

int qps_xdp_poll_cq_ts(struct qps_cq *c, int num, struct ibv_wc *wc,
		       struct qps_wc_ts *ts)
{
	if (num > 0 && !ts)
		return -EINVAL;
	return xdp_poll(c, num, wc, ts);
}

int qps_xdp_req_notify_cq(struct qps_cq *c)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(c->dev);
	int ret;

	pthread_mutex_lock(&dev->lock);
	ret = qps_xdp_ev_arm(dev);
	pthread_mutex_unlock(&dev->lock);
	return ret;
}

int qps_xdp_get_event_fd(struct qps_dev *d)
{
	return qps_xdp_dev(d)->epfd;
}

/* Drained while completions wait in a QP's list: readable again, so
 * the fd stays level triggered. */
int qps_xdp_ack_events(struct qps_dev *d)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(d);
	struct qps_xdp_qp *qp;
	uint64_t v = 0;
	bool left = false;

	pthread_mutex_lock(&dev->lock);
	qps_xdp_ev_drained(dev);
	pthread_mutex_unlock(&dev->lock);
	if (read(dev->evfd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return 0;
	pthread_mutex_lock(&dev->lock);
	for (qp = dev->qps; qp && !left; qp = qp->next) {
		pthread_mutex_lock(&qp->rq.lock);
		left = qp->wc_head != qp->wc_tail;
		pthread_mutex_unlock(&qp->rq.lock);
	}
	pthread_mutex_unlock(&dev->lock);
	if (left) {
		uint64_t one = 1;

		(void)!write(dev->evfd, &one, sizeof(one));
	}
	return v > INT32_MAX ? INT32_MAX : (int)v;
}
