// SPDX-License-Identifier: MIT
/*
 * epoll over kernel and offloaded fds mixed. An offloaded fd is entered
 * in the application's epoll set twice: the kernel socket itself with
 * the application's event data, for everything but input (EPOLLOUT,
 * errors), and its endpoint's readiness descriptor (qps_ep_fd) for the
 * input events, with a record of ours as the data.
 *
 * That descriptor also wakes for device completions meant for other
 * endpoints of the context, and a program that receives in blocking
 * mode after EPOLLIN (sockperf does) would then sleep on a socket with
 * nothing queued. So epoll_wait on a set that holds records looks at
 * each event: one carrying a record is confirmed with qps_ep_wait(ep, 0)
 * (progress once, look) and handed out with the application's data, or
 * dropped; a wait that brought nothing waits again for the time left.
 * Before the kernel sleeps, the call spins for the largest busy-poll
 * budget among the set's offloaded fds (pl_wait.c). A set without
 * records costs epoll_wait one lookup.
 *
 * Records are found by address among the set's own (the application's
 * data cannot be one of our allocations). A record names its socket by
 * fd and id, never by reference, so an offloaded fd closed while still
 * in a set is freed as on the kernel, and its record is dropped later.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "preload.h"

#define PL_EP_IN (EPOLLIN | EPOLLRDNORM)
#define PL_EP_FLAGS (EPOLLET | EPOLLONESHOT | EPOLLWAKEUP | EPOLLEXCLUSIVE)
#define PL_EPSETS_MAX (1 << 20)

struct pl_eprec {
	epoll_data_t app;
	int fd;
	uint64_t id;
	uint32_t events;	/* as registered on the readiness fd */
	/* Our own duplicate of the socket's readiness fd: epoll keys an
	 * entry by file and number, so two fds of one socket (dup) can be
	 * in one set, as on the kernel. */
	int rfd;
};

struct pl_epset {
	pthread_mutex_t lock;
	int epfd;
	size_t n, cap;
	struct pl_eprec **recs;
};

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_epset **sets;
static int sets_n;

static struct pl_epset *set_get(int epfd, bool create)
{
	struct pl_epset **t = __atomic_load_n(&sets, __ATOMIC_ACQUIRE), *s;

	if (t && epfd >= 0 && epfd < sets_n) {
		s = __atomic_load_n(&t[epfd], __ATOMIC_ACQUIRE);
		if (s || !create)
			return s;
	}
	if (!create || epfd < 0)
		return NULL;
	pthread_mutex_lock(&sets_lock);
	if (!sets) {
		struct rlimit rl;
		size_t n = 65536;
		void *p;

		/* Any epoll fd the process can have, as the fd table. */
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max > n)
			n = rl.rlim_max > PL_EPSETS_MAX ? PL_EPSETS_MAX :
			    rl.rlim_max;
		p = mmap(NULL, n * sizeof(void *), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p != MAP_FAILED) {
			sets_n = (int)n;
			__atomic_store_n(&sets, (struct pl_epset **)p,
					 __ATOMIC_RELEASE);
		}
	}
	s = NULL;
	if (sets && epfd < sets_n) {
		s = sets[epfd];
		if (!s) {
			s = calloc(1, sizeof(*s));
			if (s) {
				s->epfd = epfd;
				pthread_mutex_init(&s->lock, NULL);
				__atomic_store_n(&sets[epfd], s,
						 __ATOMIC_RELEASE);
			}
		}
	}
	pthread_mutex_unlock(&sets_lock);
	return s;
}

void pl_epoll_atfork_child(void)
{
	int i;

	/* Parent threads may have held any of them at the fork. */
	pthread_mutex_init(&sets_lock, NULL);
	for (i = 0; sets && i < sets_n; i++)
		if (sets[i])
			pthread_mutex_init(&sets[i]->lock, NULL);
}

void pl_epset_close(int epfd)
{
	struct pl_epset *s;
	size_t i;

	if (!__atomic_load_n(&sets, __ATOMIC_ACQUIRE) || epfd < 0 ||
	    epfd >= sets_n || !__atomic_load_n(&sets[epfd], __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&sets_lock);
	s = sets[epfd];
	sets[epfd] = NULL;
	pthread_mutex_unlock(&sets_lock);
	if (!s)
		return;
	/* A thread still in epoll_wait on it holds no pointer past the
	 * set's lock: take it once before freeing. */
	pthread_mutex_lock(&s->lock);
	for (i = 0; i < s->n; i++) {
		pl_real.close(s->recs[i]->rfd);
		free(s->recs[i]);
	}
	free(s->recs);
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void pl_epset_close_range(unsigned int first, unsigned int last)
{
	unsigned int fd;

	if (!__atomic_load_n(&sets, __ATOMIC_ACQUIRE))
		return;
	for (fd = first; fd <= last && fd < (unsigned int)sets_n; fd++)
		pl_epset_close((int)fd);
}

static struct pl_eprec *rec_find_fd(struct pl_epset *set, int fd,
				    uint64_t id, size_t *at)
{
	size_t i;

	for (i = 0; i < set->n; i++)
		if (set->recs[i]->fd == fd && set->recs[i]->id == id) {
			*at = i;
			return set->recs[i];
		}
	return NULL;
}

static struct pl_eprec *rec_find_ptr(struct pl_epset *set, const void *p,
				     size_t *at)
{
	size_t i;

	for (i = 0; i < set->n; i++)
		if (set->recs[i] == p) {
			*at = i;
			return set->recs[i];
		}
	return NULL;
}

static void rec_del(struct pl_epset *set, size_t at)
{
	/* Out of the set first: our number may be reused at once. */
	(void)pl_real.epoll_ctl(set->epfd, EPOLL_CTL_DEL, set->recs[at]->rfd,
				NULL);
	pl_real.close(set->recs[at]->rfd);
	free(set->recs[at]);
	set->recs[at] = set->recs[--set->n];
}

/* Records whose socket is gone (closed without EPOLL_CTL_DEL). */
static void recs_prune(struct pl_epset *set)
{
	size_t i = 0;

	while (i < set->n) {
		struct pl_sock *s = pl_get(set->recs[i]->fd);
		bool gone = !s || s->id != set->recs[i]->id;

		pl_put(s);
		if (gone)
			rec_del(set, i);
		else
			i++;
	}
}

static struct pl_eprec *rec_add(struct pl_epset *set, struct pl_sock *s,
				int fd, int rfd, epoll_data_t app)
{
	struct pl_eprec *r;

	recs_prune(set);
	if (set->n == set->cap) {
		size_t cap = set->cap ? 2 * set->cap : 8;
		struct pl_eprec **v = realloc(set->recs, cap * sizeof(void *));

		if (!v)
			return NULL;
		set->recs = v;
		set->cap = cap;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->rfd = pl_real.fcntl(rfd, F_DUPFD_CLOEXEC, 0);
	if (r->rfd < 0) {
		free(r);
		return NULL;
	}
	r->app = app;
	r->fd = fd;
	r->id = s->id;
	set->recs[set->n++] = r;
	return r;
}

static int ctl(int epfd, int op, int fd, uint32_t events, epoll_data_t data)
{
	struct epoll_event ev = { .events = events, .data = data };

	return pl_real.epoll_ctl(epfd, op, fd, &ev) < 0 ? -errno : 0;
}

static int ctl_sock(struct pl_epset *set, int epfd, int op, int fd,
		    struct pl_sock *s, int rfd, const struct epoll_event *ev)
{
	uint32_t in = 0, rest = 0;
	epoll_data_t data = { 0 }, mine;
	struct pl_eprec *rec;
	size_t at = 0;
	int r, r2;

	if (ev) {
		/* EPOLLEXCLUSIVE is the kernel socket's alone: the kernel
		 * refuses it on an epoll fd, which the readiness fd is. */
		in = (ev->events & PL_EP_IN) |
		     (ev->events & PL_EP_FLAGS & ~(uint32_t)EPOLLEXCLUSIVE);
		rest = ev->events & ~PL_EP_IN;
		data = ev->data;
	}
	rec = rec_find_fd(set, fd, s->id, &at);
	switch (op) {
	case EPOLL_CTL_ADD:
		/* The kernel socket first: its answer (EEXIST, EINVAL,
		 * ELOOP...) is the one the application expects. */
		r = ctl(epfd, op, fd, rest, data);
		if (r < 0)
			return r;
		rec = rec_add(set, s, fd, rfd, data);
		mine.ptr = rec;
		r = rec ? ctl(epfd, op, rec->rfd, in, mine) : -ENOMEM;
		if (r < 0) {
			pl_real.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
			if (rec && rec_find_fd(set, fd, s->id, &at))
				rec_del(set, at);
			return r;
		}
		rec->events = in;
		return 0;
	case EPOLL_CTL_MOD:
		r = ctl(epfd, op, fd, rest, data);
		if (r < 0 || !rec)
			return r;
		mine.ptr = rec;
		r = ctl(epfd, op, rec->rfd, in, mine);
		if (!r) {
			rec->app = data;
			rec->events = in;
		}
		return r;
	case EPOLL_CTL_DEL:
		r = ctl(epfd, op, fd, 0, data);
		r2 = rec ? 0 : -ENOENT;
		if (rec)
			rec_del(set, at);
		return r == 0 || r2 == 0 ? 0 : r;
	default:
		return ctl(epfd, op, fd, rest, data);
	}
}

PL_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct pl_epset *set;
	struct pl_sock *s;
	int rfd;
	long r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_epoll_ctl, epfd, op, fd, ev);
	s = pl_get(fd);
	if (!s)
		return pl_real.epoll_ctl(epfd, op, fd, ev);
	rfd = qps_ep_fd(s->ep);
	set = rfd >= 0 ? set_get(epfd, true) : NULL;
	if (!set || (op != EPOLL_CTL_DEL && !ev)) {
		/* Inherited across fork, or no memory: the kernel's view. */
		pl_put(s);
		return pl_real.epoll_ctl(epfd, op, fd, ev);
	}
	pthread_mutex_lock(&set->lock);
	r = ctl_sock(set, epfd, op, fd, s, rfd, ev);
	pthread_mutex_unlock(&set->lock);
	pl_put(s);
	return (int)pl_ret(r);
}

/* Keeps the events that are the application's or confirmed; returns how
 * many are left in @ev. */
static int filter(struct pl_epset *set, int epfd, struct epoll_event *ev,
		  int n)
{
	int i, k = 0;

	pthread_mutex_lock(&set->lock);
	for (i = 0; i < n; i++) {
		size_t at = 0;
		struct pl_eprec *rec = rec_find_ptr(set, ev[i].data.ptr, &at);
		struct pl_sock *s;
		bool ready;

		if (!rec) {
			ev[k++] = ev[i];
			continue;
		}
		s = pl_get_id(rec->fd, rec->id);
		if (!s) {
			/* Gone without EPOLL_CTL_DEL: the kernel drops a
			 * file closed everywhere from its sets; our
			 * duplicate would keep its readiness fd there. */
			rec_del(set, at);
			continue;
		}
		ready = qps_ep_wait(s->ep, 0) == 1;
		if (ready) {
			ev[k].events = ev[i].events;
			ev[k++].data = rec->app;
		} else if (rec->events & EPOLLONESHOT) {
			/* Not the application's wake-up: it stays armed. */
			epoll_data_t mine = { .ptr = rec };

			ctl(epfd, EPOLL_CTL_MOD, rec->rfd, rec->events, mine);
		}
		pl_put(s);
	}
	pthread_mutex_unlock(&set->lock);
	return k;
}

/* The largest busy-poll budget among the set's offloaded fds. */
static int set_busy_us(struct pl_epset *set)
{
	int busy = 0;
	size_t i;

	pthread_mutex_lock(&set->lock);
	for (i = 0; i < set->n; i++) {
		struct pl_sock *s = pl_get(set->recs[i]->fd);

		if (s && s->id == set->recs[i]->id) {
			int b = pl_busy_us(s);

			busy = b > busy ? b : busy;
		}
		pl_put(s);
	}
	pthread_mutex_unlock(&set->lock);
	return busy;
}

/* While spinning, the kernel is asked only when the device brought
 * something, and every so many rounds for the kernel's own fds. */
#define PL_SPIN_LOOK_MASK 15u

static int wait_filtered(int epfd, struct epoll_event *ev, int max,
			 int timeout, const sigset_t *mask)
{
	struct pl_epset *set = set_get(epfd, false);
	int64_t deadline = timeout < 0 ? -1 :
			   pl_now_ns() + (int64_t)timeout * 1000000;
	int64_t spin_end;
	unsigned int spins = 0;
	int left = timeout;

	if (!set)
		return pl_real.epoll_pwait(epfd, ev, max, timeout, mask);
	spin_end = timeout ? pl_spin_end(set_busy_us(set), deadline) : 0;
	for (;;) {
		bool spinning = spin_end && pl_now_ns() < spin_end;
		int r;

		if (spinning) {
			if (pl_spin_progress() <= 0 &&
			    (spins++ & PL_SPIN_LOOK_MASK)) {
				pl_cpu_relax();
				continue;
			}
			r = pl_real.epoll_pwait(epfd, ev, max, 0, mask);
		} else {
			bool armed = left && pl_sleep_arm();

			/* The core leaves errno alone. */
			pthread_cleanup_push(pl_sleep_disarm_cleanup, &armed);
			r = pl_real.epoll_pwait(epfd, ev, max, left, mask);
			pthread_cleanup_pop(1);
		}
		if (r < 0 || (r == 0 && !spinning))
			return r;
		if (r > 0) {
			r = filter(set, epfd, ev, r);
			if (r > 0)
				return r;
		}
		if (deadline >= 0) {
			int64_t l = deadline - pl_now_ns();

			if (l <= 0)
				return 0;
			/* Whole milliseconds, rounded up. */
			left = (int)((l + 999999) / 1000000);
		}
	}
}

PL_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max,
			 int timeout)
{
	if (!pl_sym_ready())
		return (int)syscall(SYS_epoll_pwait, epfd, ev, max, timeout,
				    NULL, 8);
	return wait_filtered(epfd, ev, max, timeout, NULL);
}

PL_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max,
			  int timeout, const sigset_t *mask)
{
	if (!pl_sym_ready())
		return (int)syscall(SYS_epoll_pwait, epfd, ev, max, timeout,
				    mask, 8);
	return wait_filtered(epfd, ev, max, timeout, mask);
}

/* Our wait has millisecond steps: the timeout is rounded up to one. */
PL_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max,
			   const struct timespec *ts, const sigset_t *mask)
{
	long long ms;

	if (!pl_sym_ready() || !pl_real.epoll_pwait2) {
		errno = ENOSYS;
		return -1;
	}
	if (!set_get(epfd, false))
		return pl_real.epoll_pwait2(epfd, ev, max, ts, mask);
	if (!ts)
		return wait_filtered(epfd, ev, max, -1, mask);
	if (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000) {
		errno = EINVAL;
		return -1;
	}
	ms = (long long)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return wait_filtered(epfd, ev, max, ms > 0x7fffffff ? 0x7fffffff :
			     (int)ms, mask);
}
