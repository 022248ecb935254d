// SPDX-License-Identifier: MIT
/*
 * Software completion queues. There is no device writing CQEs: polling a
 * CQ does the device's work for the QPs that report to it (reap TX ring
 * frames the kernel is done with, move RX ring frames into posted
 * buffers) and returns those completions directly, so a CQ never
 * overflows and holds nothing between polls.
 *
 * Events: the device's event fd is an epoll set holding every RX ring
 * socket; a ring socket is readable while it has a frame user space has
 * not released, so the set is readable exactly while a receive CQ has
 * completions to give. That is level-triggered, hence always "armed":
 * req_notify_cq and ack_events have nothing to do, and a frame that
 * lands between the core's last poll and its arm still wakes it.
 */
#include "packet.h"

#include <errno.h>
#include <stdlib.h>

int qps_packet_create_cq(struct qps_dev *d, int cqe, struct qps_cq **cq_out)
{
	struct qps_packet_cq *cq;

	if (cqe < 1 || cqe > QPS_PACKET_MAX_CQE || !cq_out)
		return -EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	pthread_mutex_init(&cq->lock, NULL);
	cq->base.dev = d;
	cq->base.cqe = cqe;
	*cq_out = &cq->base;
	return 0;
}

int qps_packet_destroy_cq(struct qps_cq *c)
{
	struct qps_packet_dev *dev = qps_packet_dev(c->dev);
	struct qps_packet_cq *cq = qps_packet_cq(c);
	unsigned int users;

	pthread_mutex_lock(&dev->lock);
	users = cq->users;
	pthread_mutex_unlock(&dev->lock);
	if (users)
		return -EBUSY;
	pthread_mutex_destroy(&cq->lock);
	free(cq);
	return 0;
}

int qps_packet_poll_cq(struct qps_cq *c, int num, struct ibv_wc *wc)
{
	struct qps_packet_dev *dev = qps_packet_dev(c->dev);
	struct qps_packet_cq *cq = qps_packet_cq(c);
	struct qps_packet_qp *qp;
	int n = 0;

	if (num < 0 || (num && !wc))
		return -EINVAL;
	pthread_mutex_lock(&cq->lock);
	/* dev->lock keeps the QP and flow lists still while we walk them;
	 * lock order is dev->lock, then a QP's sq_lock or rq_lock. */
	pthread_mutex_lock(&dev->lock);
	for (qp = dev->qps; qp && n < num; qp = qp->next) {
		if (qp->base.send_cq == c)
			n += qps_packet_tx_poll(qp, num - n, wc + n);
		if (qp->base.recv_cq == c && n < num)
			n += qps_packet_rx_poll(dev, qp, num - n, wc + n);
	}
	pthread_mutex_unlock(&dev->lock);
	pthread_mutex_unlock(&cq->lock);
	return n;
}

int qps_packet_req_notify_cq(struct qps_cq *c)
{
	(void)c;
	return 0;
}

int qps_packet_get_event_fd(struct qps_dev *d)
{
	return qps_packet_dev(d)->epfd;
}

int qps_packet_ack_events(struct qps_dev *d)
{
	(void)d;
	return 0;
}
