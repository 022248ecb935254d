// SPDX-License-Identifier: MIT
/*
 * poll, ppoll, select and pselect over kernel and offloaded fds mixed.
 * An offloaded fd's POLLIN comes from its endpoint, not from the kernel
 * socket (which never receives): the kernel is asked to wait on the
 * endpoint's readiness descriptor (qps_ep_fd) in an extra slot, and on
 * the socket itself for everything else (POLLOUT, errors). That
 * descriptor also wakes for device completions meant for other
 * endpoints, so every wake-up is confirmed with qps_ep_wait(ep, 0),
 * which progresses the device once and looks: POLLIN is reported only
 * when a receive will not block, and a wake-up that brought nothing
 * waits again for the time left. Before the kernel sleeps, the call
 * spins for the largest busy-poll budget among the fds (pl_wait.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "preload.h"

#define PL_POLL_STACK 32
#define PL_IN (POLLIN | POLLRDNORM)

struct pl_pslot {
	nfds_t idx;		/* the application's entry */
	struct pl_sock *s;
	bool ready;		/* readable before the kernel was asked */
};

static bool readable(struct pl_sock *s)
{
	return qps_ep_wait(s->ep, 0) == 1;
}

/* The offloaded entries of @fds that ask for input, with references. */
static size_t find_offloaded(const struct pollfd *fds, nfds_t n,
			     struct pl_pslot *out, bool *waiting)
{
	size_t k = 0;
	nfds_t i;

	*waiting = false;
	for (i = 0; i < n; i++) {
		struct pl_sock *s;

		if (!(fds[i].events & PL_IN))
			continue;
		s = pl_get(fds[i].fd);
		if (!s)
			continue;
		if (qps_ep_fd(s->ep) < 0) {
			/* Served by another process (emu, pl_fork.c): the
			 * kernel socket's view until this one takes it. */
			*waiting = *waiting || s->share;
			pl_put(s);
			continue;
		}
		out[k].idx = i;
		out[k].s = s;
		k++;
	}
	return k;
}

static int count_offloaded(const struct pollfd *fds, nfds_t n)
{
	int k = 0;
	nfds_t i;

	for (i = 0; i < n; i++) {
		struct pl_sock *s = (fds[i].events & PL_IN) ?
				    pl_get(fds[i].fd) : NULL;

		if (s)
			k++;
		pl_put(s);
	}
	return k;
}

/* One kernel wait over @all (the application's entries then the
 * readiness slots) and the merge back into @fds; returns the number of
 * entries with events, or -1 with errno. */
static int wait_merge(struct pollfd *fds, nfds_t n, struct pollfd *all,
		      struct pl_pslot *o, size_t k, int64_t deadline,
		      const sigset_t *mask)
{
	struct timespec ts, *tp = NULL;
	bool any_ready = false, armed = false;
	int cnt = 0, r;
	size_t j;
	nfds_t i;

	/* Already readable: the kernel only looks (timeout 0). */
	for (j = 0; j < k; j++) {
		o[j].ready = readable(o[j].s);
		any_ready = any_ready || o[j].ready;
	}
	if (any_ready || deadline >= 0) {
		int64_t left = any_ready ? 0 : deadline - pl_now_ns();

		if (left < 0)
			left = 0;
		ts.tv_sec = left / 1000000000;
		ts.tv_nsec = left % 1000000000;
		tp = &ts;
	}
	if (!tp || tp->tv_sec || tp->tv_nsec)
		armed = pl_sleep_arm();
	/* The core leaves errno alone. */
	pthread_cleanup_push(pl_sleep_disarm_cleanup, &armed);
	r = pl_real.ppoll(all, n + k, tp, mask);
	pthread_cleanup_pop(1);
	if (r < 0)
		return -1;
	for (j = 0; j < k; j++) {
		bool in = o[j].ready ||
			  ((all[n + j].revents & POLLIN) && readable(o[j].s));
		short re = (short)(all[o[j].idx].revents & ~PL_IN);

		if (in)
			re = (short)(re | (fds[o[j].idx].events & PL_IN));
		all[o[j].idx].revents = re;
	}
	for (i = 0; i < n; i++) {
		fds[i].revents = all[i].revents;
		if (fds[i].revents)
			cnt++;
	}
	return cnt;
}

/* What poll_mixed holds while it waits: given back however it ends,
 * a cancellation in the kernel's wait included. */
struct pl_pheld {
	struct pl_pslot *o, *ostack;
	struct pollfd *all;
	size_t k;
};

static void held_release(void *arg)
{
	struct pl_pheld *h = arg;
	size_t j;

	for (j = 0; j < h->k; j++)
		pl_put(h->o[j].s);
	if (h->o != h->ostack) {
		free(h->o);
		free(h->all);
	}
}

/* Gives back the references of one round, keeping the arrays. */
static void held_drop(struct pl_pheld *h)
{
	size_t j;

	for (j = 0; j < h->k; j++)
		pl_put(h->o[j].s);
	h->k = 0;
}

/* One round: the kernel waits, for @deadline (ns, < 0: none) or, when
 * a socket another process serves is among them (emu, pl_fork.c), one
 * step, after which it is looked at again; 0: nothing happened. */
static int poll_round(struct pollfd *fds, nfds_t n, struct pl_pheld *h,
		      int64_t deadline, const sigset_t *mask, bool *waiting)
{
	struct pl_pslot *o = h->o;
	struct pollfd *all = h->all;
	int64_t spin_end, end = deadline;
	int r, busy = 0;
	size_t j;

	h->k = find_offloaded(fds, n, o, waiting);
	memcpy(all, fds, n * sizeof(*fds));
	for (j = 0; j < h->k; j++) {
		int b = pl_busy_us(o[j].s);

		all[o[j].idx].events &= (short)~PL_IN;
		all[n + j].fd = qps_ep_fd(o[j].s->ep);
		all[n + j].events = POLLIN;
		busy = b > busy ? b : busy;
	}
	spin_end = pl_spin_end(busy, deadline);
	if (*waiting) {
		int64_t step = pl_now_ns() + PL_FORK_STEP_MS * 1000000LL;

		end = deadline < 0 || step < deadline ? step : deadline;
	}
	do {
		/* While spinning the kernel only looks (a deadline now). */
		int64_t now = pl_now_ns();

		r = wait_merge(fds, n, all, o, h->k,
			       now < spin_end ? now : end, mask);
	} while (r == 0 && (end < 0 || pl_now_ns() < end));
	return r;
}

/* poll over @fds with offloaded entries; @deadline_ns < 0: no limit. */
static int poll_mixed(struct pollfd *fds, nfds_t n, int64_t deadline,
		      const sigset_t *mask)
{
	struct pl_pslot ostack[PL_POLL_STACK], *o = ostack;
	struct pollfd astack[2 * PL_POLL_STACK], *all = astack;
	struct pl_pheld held;
	bool waiting;
	int r;

	if (n > PL_POLL_STACK) {
		o = malloc(n * sizeof(*o));
		all = malloc(2 * n * sizeof(*all));
		if (!o || !all) {
			free(o);
			free(all);
			errno = ENOMEM;
			return -1;
		}
	}
	held = (struct pl_pheld){ .o = o, .ostack = ostack, .all = all };
	pthread_cleanup_push(held_release, &held);
	for (;;) {
		r = poll_round(fds, n, &held, deadline, mask, &waiting);
		if (r != 0 || !waiting ||
		    (deadline >= 0 && pl_now_ns() >= deadline))
			break;
		held_drop(&held);
	}
	pthread_cleanup_pop(1);
	return r;
}

static int64_t deadline_ms(int ms)
{
	return ms < 0 ? -1 : pl_now_ns() + (int64_t)ms * 1000000;
}

static int64_t deadline_ts(const struct timespec *ts)
{
	return ts ? pl_now_ns() + (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec
		  : -1;
}

PL_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!pl_sym_ready()) {
		struct timespec ts = { timeout / 1000,
				       (timeout % 1000) * 1000000L };

		return (int)syscall(SYS_ppoll, fds, n,
				    timeout < 0 ? NULL : &ts, NULL, 8);
	}
	if (!count_offloaded(fds, n))
		return pl_real.poll(fds, n, timeout);
	return poll_mixed(fds, n, deadline_ms(timeout), NULL);
}

PL_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		    const sigset_t *mask)
{
	if (!pl_sym_ready())
		return (int)syscall(SYS_ppoll, fds, n, ts, mask, 8);
	if (!count_offloaded(fds, n))
		return pl_real.ppoll(fds, n, ts, mask);
	return poll_mixed(fds, n, deadline_ts(ts), mask);
}

static bool sets_offloaded(int nfds, fd_set *r)
{
	int fd;

	for (fd = 0; r && fd < nfds && fd < FD_SETSIZE; fd++) {
		struct pl_sock *s = FD_ISSET(fd, r) ? pl_get(fd) : NULL;

		if (s) {
			pl_put(s);
			return true;
		}
	}
	return false;
}

/* select as poll: readable includes errors and hang-ups, as the
 * kernel's select does. */
static int select_mixed(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			int64_t deadline, const sigset_t *mask)
{
	struct pollfd *p = malloc((size_t)nfds * sizeof(*p));
	int fd, n = 0, i, r, cnt = 0;

	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	for (fd = 0; fd < nfds; fd++) {
		short ev = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) |
				   (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
				   (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));

		if (ev)
			p[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	pthread_cleanup_push(free, p);
	r = poll_mixed(p, (nfds_t)n, deadline, mask);
	pthread_cleanup_pop(0);
	if (r < 0)
		goto out;
	for (i = 0; i < n; i++)
		if (p[i].revents & POLLNVAL) {
			errno = EBADF;
			r = -1;
			goto out;
		}
	if (rd)
		FD_ZERO(rd);
	if (wr)
		FD_ZERO(wr);
	if (ex)
		FD_ZERO(ex);
	for (i = 0; i < n; i++) {
		short re = p[i].revents;

		if (rd && (p[i].events & POLLIN) &&
		    (re & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(p[i].fd, rd);
			cnt++;
		}
		if (wr && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
			FD_SET(p[i].fd, wr);
			cnt++;
		}
		if (ex && (p[i].events & POLLPRI) && (re & POLLPRI)) {
			FD_SET(p[i].fd, ex);
			cnt++;
		}
	}
	r = cnt;
out:
	free(p);
	return r;
}

PL_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
		     struct timeval *tv)
{
	int64_t deadline;
	int r;

	if (!pl_sym_ready()) {
		errno = EAGAIN;
		return -1;
	}
	if (nfds > FD_SETSIZE || !sets_offloaded(nfds, rd))
		return pl_real.select(nfds, rd, wr, ex, tv);
	deadline = tv ? pl_now_ns() + (int64_t)tv->tv_sec * 1000000000 +
			(int64_t)tv->tv_usec * 1000 : -1;
	r = select_mixed(nfds, rd, wr, ex, deadline, NULL);
	/* Linux leaves the time not slept in *tv. */
	if (tv && r >= 0) {
		int64_t left = deadline - pl_now_ns();

		if (left < 0)
			left = 0;
		tv->tv_sec = left / 1000000000;
		tv->tv_usec = left % 1000000000 / 1000;
	}
	return r;
}

PL_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
		      const struct timespec *ts, const sigset_t *mask)
{
	if (!pl_sym_ready()) {
		errno = EAGAIN;
		return -1;
	}
	if (nfds > FD_SETSIZE || !sets_offloaded(nfds, rd))
		return pl_real.pselect(nfds, rd, wr, ex, ts, mask);
	return select_mixed(nfds, rd, wr, ex, deadline_ts(ts), mask);
}

/* The fortified entries: the size check, then the plain call. */
PL_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout,
			 size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return poll(fds, n, timeout);
}

PL_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n,
			  const struct timespec *ts, const sigset_t *mask,
			  size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return ppoll(fds, n, ts, mask);
}
