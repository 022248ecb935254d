// SPDX-License-Identifier: MIT
/*
 * Software completion queues (common/sw_cq.c). There is no device writing
 * CQEs: polling a CQ does the device's work for the QPs that report to it
 * (reap TX ring frames the kernel is done with, move RX ring frames into
 * posted buffers) and returns those completions directly, so a CQ never
 * overflows and holds nothing between polls.
 *
 * Events: the device's event fd is an epoll set holding every RX ring
 * socket; a ring socket is readable while it has a frame user space has
 * not released, so the set is readable exactly while a receive CQ has
 * completions to give. That is level-triggered, hence always "armed":
 * req_notify_cq has nothing to do, and a frame that lands between the
 * core's last poll and its arm still wakes it. ack_events only clears
 * socket errors (see there).
 */
#define _GNU_SOURCE	/* strerrordesc_np: strerror is not thread safe */
#include "packet.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

int qps_packet_create_cq(struct qps_dev *d, int cqe, struct qps_cq **cq_out)
{
	return qps_sw_cq_create(d, cqe, QPS_PACKET_MAX_CQE, cq_out);
}

int qps_packet_destroy_cq(struct qps_cq *c)
{
	return qps_sw_cq_destroy(c, &qps_packet_dev(c->dev)->lock);
}

static int packet_poll(struct qps_cq *c, int num, struct ibv_wc *wc,
		       struct qps_wc_ts *ts)
{
	struct qps_packet_dev *dev = qps_packet_dev(c->dev);
	struct qps_sw_cq *cq = qps_sw_cq(c);
	struct qps_packet_qp *qp;
	int n = 0, rx = 0;
	bool has_rx = false;

	if (num < 0 || (num && !wc))
		return -EINVAL;
	pthread_mutex_lock(&cq->lock);
	/* dev->lock keeps the QP and flow lists still while we walk them;
	 * lock order is dev->lock, then a QP's sq_lock or rq.lock. */
	pthread_mutex_lock(&dev->lock);
	for (qp = dev->qps; qp && n < num; qp = qp->next) {
		if (qp->base.send_cq == c) {
			int t = qps_packet_tx_poll(qp, num - n, wc + n);

			/* The kernel frees TX frames without a time. */
			if (ts && t > 0)
				memset(ts + n, 0, (size_t)t * sizeof(*ts));
			n += t;
		}
		if (qp->base.recv_cq == c && n < num) {
			int r = qps_packet_rx_poll(dev, qp, num - n, wc + n,
						   ts ? ts + n : NULL);

			has_rx = true;
			rx += r;
			n += r;
		}
	}
	pthread_mutex_unlock(&dev->lock);
	pthread_mutex_unlock(&cq->lock);
	/* A hint for ack_events only; relaxed is enough. */
	if (has_rx)
		__atomic_store_n(&dev->rx_empty, rx == 0, __ATOMIC_RELAXED);
	return n;
}

int qps_packet_poll_cq(struct qps_cq *c, int num, struct ibv_wc *wc)
{
	return packet_poll(c, num, wc, NULL);
}

int qps_packet_poll_cq_ts(struct qps_cq *c, int num, struct ibv_wc *wc,
			  struct qps_wc_ts *ts)
{
	if (num > 0 && !ts)
		return -EINVAL;
	return packet_poll(c, num, wc, ts);
}

int qps_packet_get_event_fd(struct qps_dev *d)
{
	return qps_packet_dev(d)->epfd;
}

/*
 * When the interface goes down, the kernel leaves ENETDOWN pending on every
 * ring socket bound to it (packet_notifier sets sk_err). A pending error
 * keeps EPOLLERR up in the event set until somebody reads it, so from then
 * on every sleep on the event fd would return at once, during the outage
 * and after it: a blocking receive would spin. The core acknowledges
 * events before it polls while someone may sleep on the fd; when the last
 * receive poll found nothing (the wake-up was not for a frame), read the
 * errors of the sockets that report one, which clears them. At most once
 * per millisecond, so that an idle busy poller holding the fd does not pay
 * a system call per poll. The frames resume on their own once the
 * interface is up: the kernel hooks a bound socket up again on NETDEV_UP.
 */
#define PKT_ERR_CHECK_NS 1000000u

int qps_packet_ack_events(struct qps_dev *d)
{
	struct qps_packet_dev *dev = qps_packet_dev(d);
	struct epoll_event ev[16];
	int n, i, cleared = 0, last = 0;
	struct timespec ts;
	uint64_t now;

	if (!__atomic_load_n(&dev->rx_empty, __ATOMIC_RELAXED))
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (now - __atomic_load_n(&dev->err_check_ns, __ATOMIC_RELAXED) <
	    PKT_ERR_CHECK_NS)
		return 0;
	__atomic_store_n(&dev->err_check_ns, now, __ATOMIC_RELAXED);
	/* dev->lock: a flow in the set is not closed while we use its fd. */
	pthread_mutex_lock(&dev->lock);
	n = epoll_wait(dev->epfd, ev, 16, 0);
	for (i = 0; i < n; i++) {
		struct qps_packet_flow *fl = ev[i].data.ptr;
		socklen_t len = sizeof(int);
		int err = 0;

		if (!(ev[i].events & EPOLLERR))
			continue;
		if (getsockopt(fl->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
		    err) {
			cleared++;
			last = err;
		}
	}
	pthread_mutex_unlock(&dev->lock);
	if (cleared) {
		if (!qps_sw_read(&dev->link_errors))
			qps_packet_log("%s: receive sockets report %s; frames "
				       "resume when the interface is up",
				       dev->info.name, strerrordesc_np(last));
		qps_sw_count(&dev->link_errors, (uint64_t)cleared);
	}
	return 0;
}
