// SPDX-License-Identifier: MIT
/*
 * The XSKs (one per receive queue) on the device's event fd (an epoll
 * set) only while a thread may sleep on it.
 *
 * A socket on an epoll set has a waiter, and the kernel wakes it in the
 * path of every frame: the RX ring's (sock_def_readable) and, as each
 * sent frame's skb is freed, the TX side's write space (sock_wfree). Both
 * run in the peer's or our own send system call, on a round trip's path.
 * A busy poller sleeps on nothing and should cost nobody a wake-up, so
 * the XSKs leave the set once the arm that put them there was drained
 * (ack_events) and polls went on without a new arm; req_notify_cq puts
 * them all back (a sleeper must wake for a frame on any queue), and as
 * the set is level triggered, the ADD reports at once frames already on
 * a ring. They are only ever removed between a drain and the next arm,
 * which keeps provider.h's contract: an armed CQ's next completion makes
 * the fd readable. dev->evfd stays on the set.
 *
 * The same polls without an arm say that a thread spins on the receive
 * CQ: only then are the fill rings kept shallow (xdp_umem.c); an arm
 * makes them deep again, as a sleeper's burst must find room.
 *
 * All under dev->lock.
 */
#include "xdp.h"

#include <errno.h>
#include <sys/epoll.h>

/* Polls after a drain with no arm before the XSKs leave the set: a
 * sleeping receiver re-arms within a few polls, a busy poller never. */
#define XDP_EV_IDLE_POLLS 64u

int qps_xdp_ev_arm(struct qps_xdp_dev *dev)
{
	uint32_t i;

	dev->xsk_armed = true;
	dev->unarmed_polls = 0;
	if (dev->rx_spinning) {
		dev->rx_spinning = false;
		/* Lock order: dev->lock, then rx_lock. */
		pthread_mutex_lock(&dev->rx_lock);
		qps_xdp_fill_deep(dev);
		pthread_mutex_unlock(&dev->rx_lock);
	}
	for (i = 0; i < dev->nrxq; i++) {
		struct qps_xdp_rxq *q = &dev->rxq[i];
		struct epoll_event ev = { .events = EPOLLIN };

		if (q->in_ep)
			continue;
		ev.data.fd = q->fd;
		/* A failure leaves the others on the set, flagged: the
		 * next arm retries this one. */
		if (epoll_ctl(dev->epfd, EPOLL_CTL_ADD, q->fd, &ev) < 0)
			return -errno;
		q->in_ep = true;
	}
	return 0;
}

void qps_xdp_ev_drained(struct qps_xdp_dev *dev)
{
	dev->xsk_armed = false;
	dev->unarmed_polls = 0;
}

void qps_xdp_ev_polled(struct qps_xdp_dev *dev)
{
	uint32_t i;

	if (dev->xsk_armed || dev->rx_spinning ||
	    ++dev->unarmed_polls < XDP_EV_IDLE_POLLS)
		return;
	dev->rx_spinning = true;
	/* A failure leaves one on the set: a wake-up too many, no harm. */
	for (i = 0; i < dev->nrxq; i++) {
		struct qps_xdp_rxq *q = &dev->rxq[i];

		if (q->in_ep &&
		    epoll_ctl(dev->epfd, EPOLL_CTL_DEL, q->fd, NULL) == 0)
			q->in_ep = false;
	}
}
