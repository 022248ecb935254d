// SPDX-License-Identifier: MIT
/*
 * The XSK on the device's event fd (an epoll set) only while a thread may
 * sleep on it.
 *
 * A socket on an epoll set has a waiter, and the kernel wakes it in the
 * path of every frame: the RX ring's (sock_def_readable) and, as each
 * sent frame's skb is freed, the TX side's write space (sock_wfree). Both
 * run in the peer's or our own send system call, on a round trip's path.
 * A busy poller sleeps on nothing and should cost nobody a wake-up, so
 * the XSK leaves the set once the arm that put it there was drained
 * (ack_events) and polls went on without a new arm; req_notify_cq puts
 * it back, and as the set is level triggered, the ADD reports at once
 * frames already on the ring. It is only ever removed between a drain
 * and the next arm, which keeps provider.h's contract: an armed CQ's
 * next completion makes the fd readable. dev->evfd stays on the set.
 *
 * The same polls without an arm say that a thread spins on the receive
 * CQ: only then is the fill ring kept shallow (xdp_umem.c); an arm makes
 * it deep again, as a sleeper's burst must find room.
 *
 * All under dev->lock.
 */
#include "xdp.h"

#include <errno.h>
#include <sys/epoll.h>

/* Polls after a drain with no arm before the XSK leaves the set: a
 * sleeping receiver re-arms within a few polls, a busy poller never. */
#define XDP_EV_IDLE_POLLS 64u

int qps_xdp_ev_arm(struct qps_xdp_dev *dev)
{
	struct epoll_event ev = { .events = EPOLLIN };

	dev->xsk_armed = true;
	dev->unarmed_polls = 0;
	if (dev->rx_spinning) {
		dev->rx_spinning = false;
		/* Lock order: dev->lock, then rx_lock. */
		pthread_mutex_lock(&dev->rx_lock);
		qps_xdp_fill_deep(dev);
		pthread_mutex_unlock(&dev->rx_lock);
	}
	if (dev->xsk_in_ep)
		return 0;
	ev.data.fd = dev->xsk_fd;
	if (epoll_ctl(dev->epfd, EPOLL_CTL_ADD, dev->xsk_fd, &ev) < 0)
		return -errno;
	dev->xsk_in_ep = true;
	return 0;
}

void qps_xdp_ev_drained(struct qps_xdp_dev *dev)
{
	dev->xsk_armed = false;
	dev->unarmed_polls = 0;
}

void qps_xdp_ev_polled(struct qps_xdp_dev *dev)
{
	if (dev->xsk_armed || dev->rx_spinning ||
	    ++dev->unarmed_polls < XDP_EV_IDLE_POLLS)
		return;
	dev->rx_spinning = true;
	/* A failure leaves it on the set: a wake-up too many, no harm. */
	if (dev->xsk_in_ep &&
	    epoll_ctl(dev->epfd, EPOLL_CTL_DEL, dev->xsk_fd, NULL) == 0)
		dev->xsk_in_ep = false;
}
