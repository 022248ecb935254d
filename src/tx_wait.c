// SPDX-License-Identifier: MIT
/*
 * A blocking send waiting for room on its send queue (a free slot, or a
 * band the owner cannot drain because the QP is full). Room comes back
 * only with send completions, so the sender spins for its busy-poll
 * budget ringing and reaping (cpu_relax between looks, as a receive
 * does), then arms the send CQ and sleeps on its completion event.
 *
 * The event descriptor may be the device's, shared by every CQ (emu,
 * verbs), and whoever drains it takes the events of the others too: a
 * receive's progress may eat the event of our send CQ, and we may eat the
 * receive CQ's. So a drain passes it on: a sender that drained progresses
 * the receive side as a receive would (qps_rx_events_locked), and a
 * receive that drained wakes the sleeping senders through the context's
 * eventfd (qps_txw_wake), in semaphore mode so that each sleeper takes
 * its own unit and none swallows another's. A sleeper is counted in
 * ctx->txw_sleepers before it arms; a drainer reads the count after the
 * event it drained was raised, which was after the arm.
 *
 * A sleeper is counted in its endpoint's waiters, as a sleeping receive
 * is, so that a close, which holds every send queue's lock, waits for it
 * to see the endpoint closed; the whole wait is counted in rx.inside, so
 * that qps_ctx_destroy waits for the call to leave.
 */
#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sq.h"
#include "tx_wait.h"

int qps_txw_open(struct qps_ctx *ctx)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);

	if (fd < 0)
		return -errno;
	ctx->txw_fd = fd;
	return 0;
}

void qps_txw_close(struct qps_ctx *ctx)
{
	if (ctx->txw_fd >= 0)
		close(ctx->txw_fd);
	ctx->txw_fd = -1;
}

void qps_txw_wake(struct qps_ctx *ctx)
{
	/* Seq-cst: pairs with the sleeper's increment before its arm
	 * (qps_tx_sleep); a sleeper we miss armed after the event we
	 * drained, so its own event is still to come. */
	uint64_t n = __atomic_load_n(&ctx->txw_sleepers, __ATOMIC_SEQ_CST);

	if (!n || ctx->txw_fd < 0)
		return;
	if (write(ctx->txw_fd, &n, sizeof(n)) < 0) {
		/* Counter saturated: the fd is readable anyway. */
	}
}

void qps_tx_wait_init(struct qps_tx_wait *w, struct qps_ep *ep)
{
	w->ep = ep;
	w->deadline = 0;
	w->spin_end = 0;
	w->started = false;
	w->inside = false;
}

void qps_tx_wait_end(struct qps_tx_wait *w)
{
	struct qps_ctx *ctx;

	if (!w->inside)
		return;
	ctx = w->ep->ctx;
	qps_mutex_lock(&ctx->rx.lock);
	ctx->rx.inside--;
	qps_mutex_unlock(&ctx->rx.lock);
	w->inside = false;
}

static int qps_tx_wait_start(struct qps_tx_wait *w, uint64_t now)
{
	struct qps_ep *ep = w->ep;
	struct qps_ctx *ctx = ep->ctx;
	int tmo = __atomic_load_n(&ep->sndtimeo_ms, __ATOMIC_RELAXED);
	int busy = __atomic_load_n(&ep->busy_poll_us, __ATOMIC_RELAXED);

	w->started = true;
	if (tmo > 0)
		w->deadline = now + (uint64_t)tmo * 1000000u;
	if (busy > 0)
		w->spin_end = now + (uint64_t)busy * 1000u;
	qps_mutex_lock(&ctx->rx.lock);
	if (qps_ep_check(ep) < 0) {
		qps_mutex_unlock(&ctx->rx.lock);
		return -EBADF;
	}
	ctx->rx.inside++;
	w->inside = true;
	qps_mutex_unlock(&ctx->rx.lock);
	return 0;
}

/* The endpoint still sends? */
static int qps_tx_wait_check(const struct qps_tx_wait *w)
{
	if (qps_ep_check(w->ep) < 0)
		return -EBADF;
	if (__atomic_load_n(&w->ep->wr_shut, __ATOMIC_RELAXED))
		return -EPIPE;
	return 0;
}

/* Ring what is postponed and reap: the queue drains only once rung.
 * Returns the WQEs reaped, or -errno. */
static int qps_tx_wait_reap_locked(struct qps_sq *sq)
{
	int ret = qps_db_ring_locked(sq, QPS_TXF_FULL);

	return ret < 0 ? ret : qps_tx_reap_locked(sq);
}

static int qps_tx_wait_spin(struct qps_sq *sq)
{
	int ret;

	qps_alock_lock(&sq->lock);
	ret = qps_tx_wait_reap_locked(sq);
	qps_alock_unlock(&sq->lock);
	if (ret >= 0)
		qps_cpu_relax();
	return ret < 0 ? ret : 0;
}

/* A sender cancelled asleep leaves uncounted everywhere it was counted,
 * or a close and the context's destruction would wait for it forever. */
static void qps_tx_sleep_cancelled(void *arg)
{
	struct qps_tx_wait *w = arg;
	struct qps_ctx *ctx = w->ep->ctx;

	__atomic_sub_fetch(&ctx->txw_sleepers, 1, __ATOMIC_SEQ_CST);
	qps_mutex_lock(&ctx->rx.lock);
	w->ep->waiters--;
	qps_mutex_unlock(&ctx->rx.lock);
	qps_tx_wait_end(w);
}

/*
 * Sleep on @sq's completion event, for at most @timeout ms (-1: no
 * limit). Counted in the endpoint's waiters meanwhile; on the way out we
 * take only rx.lock, which a close waiting for us does not hold.
 */
static int qps_tx_sleep_poll(struct qps_tx_wait *w, int evfd, int timeout)
{
	struct qps_ep *ep = w->ep;
	struct qps_ctx *ctx = ep->ctx;
	struct pollfd pfd[2] = {
		{ .fd = evfd, .events = POLLIN },
		{ .fd = ctx->txw_fd, .events = POLLIN },
	};
	uint64_t v;
	int pr, ret;

	ret = qps_ep_waiter_enter(ep);
	if (ret < 0)
		return ret;

	/* A cancellation point, as a blocking send(2) is one. */
	pthread_cleanup_push(qps_tx_sleep_cancelled, w);
	pr = poll(pfd, 2, timeout);
	pthread_cleanup_pop(0);
	if (pr < 0 && errno == EINTR)
		ret = -EINTR;
	/* Seq-cst: see qps_txw_wake; out before we drain, so that our own
	 * drain wakes only the others. */
	__atomic_sub_fetch(&ctx->txw_sleepers, 1, __ATOMIC_SEQ_CST);

	qps_mutex_lock(&ctx->rx.lock);
	ep->waiters--;
	if (qps_ep_check(ep) < 0)
		ret = -EBADF;
	if (pr > 0 && (pfd[0].revents & POLLIN))
		qps_rx_events_locked(ctx);
	if (pr > 0 && (pfd[1].revents & POLLIN) &&
	    read(ctx->txw_fd, &v, sizeof(v)) < 0) {
		/* Another sleeper took the unit: nothing to take. */
	}
	qps_mutex_unlock(&ctx->rx.lock);
	return ret;
}

static int qps_tx_sleep(struct qps_tx_wait *w, struct qps_sq *sq,
			uint64_t now)
{
	struct qps_ctx *ctx = sq->ctx;
	int evfd = ctx->ops->get_cq_event_fd(sq->cq);
	int timeout = -1;
	bool quiet, room;
	int ret;

	if (w->deadline)
		timeout = (int)((w->deadline - now + 999999u) / 1000000u);
	/* Seq-cst: counted before the arm (see qps_txw_wake). */
	__atomic_add_fetch(&ctx->txw_sleepers, 1, __ATOMIC_SEQ_CST);
	qps_alock_lock(&sq->lock);
	if (evfd >= 0)
		ctx->ops->req_notify_cq(sq->cq);
	/* After the arm: a completion that came before it raised no event,
	 * so only this reap sees it. */
	ret = qps_tx_wait_reap_locked(sq);
	room = qps_tx_room_locked(sq);
	/* Nothing on the QP: no completion will come to wake us (every slot
	 * is parked: the band owner is about to post them, or the bands are
	 * paused). */
	quiet = sq->post_head == sq->post_tail;
	qps_alock_unlock(&sq->lock);
	if (ret != 0 || room) {
		__atomic_sub_fetch(&ctx->txw_sleepers, 1, __ATOMIC_SEQ_CST);
		return ret < 0 ? ret : 0;
	}
	/* No event to wait for: sleep in short steps. */
	if ((evfd < 0 || quiet) && (timeout < 0 || timeout > 1))
		timeout = 1;
	return qps_tx_sleep_poll(w, evfd, timeout);
}

int qps_tx_wait_room(struct qps_tx_wait *w, struct qps_sq *sq)
{
	uint64_t now = qps_now_ns();
	int ret;

	if (!w->started) {
		ret = qps_tx_wait_start(w, now);
		if (ret < 0)
			return ret;
	} else if (w->deadline && now >= w->deadline) {
		return -EAGAIN;
	}
	ret = qps_tx_wait_check(w);
	if (ret < 0)
		return ret;
	/* Parked frames hold slots: drain them if no one is. The owner's
	 * post takes sq->lock, so not under it. */
	qps_prio_kick(sq->prio);
	if (now < w->spin_end)
		return qps_tx_wait_spin(sq);
	return qps_tx_sleep(w, sq, now);
}
