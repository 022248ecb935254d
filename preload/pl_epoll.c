// SPDX-License-Identifier: MIT
/*
 * epoll over kernel and offloaded fds mixed. An offloaded fd is entered
 * in the application's epoll set twice, both with a record of ours as the
 * data: the kernel socket itself for everything but input (EPOLLOUT,
 * errors), and its endpoint's readiness descriptor (qps_ep_fd) for the
 * input events. epoll_wait hands out one event per fd with the
 * application's data, both halves' events merged as the kernel reports
 * a socket once; an EPOLLONESHOT entry that reported disarms its other
 * half too, until EPOLL_CTL_MOD.
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
 * A dropped record is retired, not freed, while a wait is in the set: an
 * event that wait already took may still carry its address. A socket that
 * falls back to the kernel gets its kernel entry back with the
 * application's events and data (pl_epoll_fell); its retired record still
 * translates what was taken before.
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
	uint32_t uevents;	/* as the application asked */
	uint32_t events;	/* as registered on the readiness fd */
	/* Our own duplicate of the socket's readiness fd: epoll keys an
	 * entry by file and number, so two fds of one socket (dup) can be
	 * in one set, as on the kernel. */
	int rfd;
	bool koff;		/* kernel half taken out: one-shot reported */
	bool fell;		/* retired: the socket fell back */
	unsigned int out_gen;	/* filter() call that output it ... */
	int out_at;		/* ... at this index */
	/* The kernel half's data is this member's address. */
	char kside;
	struct pl_eprec *next;	/* retired list */
};

struct pl_epset {
	pthread_mutex_t lock;
	int epfd;
	int waiters;		/* atomic: waits that may hold our events */
	unsigned int gen;	/* filter() calls */
	size_t n, cap;
	struct pl_eprec **recs;
	struct pl_eprec *retired;
};

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_epset **sets;
static int sets_n;
static int sets_hi;	/* above every epoll fd with a set */

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
				if (epfd >= sets_hi)
					sets_hi = epfd + 1;
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
	while (s->retired) {
		struct pl_eprec *r = s->retired;

		s->retired = r->next;
		free(r);
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

/* The record whose readiness half (@*kside false) or kernel half (true)
 * carries @p, live (@*at set) or retired (@*at = SIZE_MAX). */
static struct pl_eprec *rec_find_ptr(struct pl_epset *set, const void *p,
				     size_t *at, bool *kside)
{
	struct pl_eprec *r;
	size_t i;

	for (i = 0; i < set->n; i++) {
		r = set->recs[i];
		if (r == p || &r->kside == p) {
			*at = i;
			*kside = &r->kside == p;
			return r;
		}
	}
	for (r = set->retired; r; r = r->next)
		if (r == p || &r->kside == p) {
			*at = SIZE_MAX;
			*kside = &r->kside == p;
			return r;
		}
	return NULL;
}

/* A wait that may take events carrying our records' addresses: retired
 * records stay until it has translated them (filter). */
static void waiter_in(struct pl_epset *set)
{
	__atomic_fetch_add(&set->waiters, 1, __ATOMIC_ACQ_REL);
}

static void waiter_out(struct pl_epset *set)
{
	/* Pairs with the acquire in retired_free(). */
	__atomic_fetch_sub(&set->waiters, 1, __ATOMIC_RELEASE);
}

static void waiter_out_cleanup(void *set)
{
	waiter_out(set);
}

/* Retired records are freed once no wait can hold their address. Set's
 * lock held. */
static void retired_free(struct pl_epset *set)
{
	/* Pairs with the increment in wait_filtered: a wait that starts
	 * later takes no event that carries a retired address. */
	if (__atomic_load_n(&set->waiters, __ATOMIC_ACQUIRE))
		return;
	while (set->retired) {
		struct pl_eprec *r = set->retired;

		set->retired = r->next;
		free(r);
	}
}

/* Out of the live records, both halves out of the set. */
static void rec_del(struct pl_epset *set, size_t at)
{
	struct pl_eprec *r = set->recs[at];

	/* Out of the set first: our number may be reused at once. */
	(void)pl_real.epoll_ctl(set->epfd, EPOLL_CTL_DEL, r->rfd, NULL);
	pl_real.close(r->rfd);
	set->recs[at] = set->recs[--set->n];
	r->next = set->retired;
	set->retired = r;
	retired_free(set);
}

/* Records whose socket is gone (closed without EPOLL_CTL_DEL): its
 * kernel half went with the file, or belongs to a dup we leave alone. */
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

/* Undo rec_add before either half was entered: nothing holds it. */
static void rec_undo(struct pl_epset *set, struct pl_eprec *r)
{
	size_t i;

	for (i = 0; i < set->n; i++)
		if (set->recs[i] == r) {
			set->recs[i] = set->recs[--set->n];
			break;
		}
	pl_real.close(r->rfd);
	free(r);
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
	epoll_data_t data = { 0 }, mine, kmine;
	struct pl_eprec *rec;
	size_t at = 0;
	int r;

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
		if (rec)
			return -EEXIST;
		rec = rec_add(set, s, fd, rfd, data);
		if (!rec)
			return -ENOMEM;
		kmine.ptr = &rec->kside;
		/* The kernel socket first: its answer (EEXIST, EINVAL,
		 * ELOOP...) is the one the application expects. */
		r = ctl(epfd, op, fd, rest, kmine);
		if (r < 0) {
			rec_undo(set, rec);
			return r;
		}
		mine.ptr = rec;
		r = ctl(epfd, op, rec->rfd, in, mine);
		if (r < 0) {
			pl_real.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
			if (rec_find_fd(set, fd, s->id, &at))
				rec_del(set, at);
			return r;
		}
		rec->events = in;
		rec->uevents = ev->events;
		return 0;
	case EPOLL_CTL_MOD:
		if (!rec)
			return ctl(epfd, op, fd, ev->events, data);
		kmine.ptr = &rec->kside;
		/* A one-shot that reported took the kernel half out. */
		r = ctl(epfd, rec->koff ? EPOLL_CTL_ADD : op, fd, rest, kmine);
		if (r < 0)
			return r;
		rec->koff = false;
		mine.ptr = rec;
		r = ctl(epfd, op, rec->rfd, in, mine);
		if (!r) {
			rec->app = data;
			rec->events = in;
			rec->uevents = ev->events;
		}
		return r;
	case EPOLL_CTL_DEL:
		if (!rec)
			return ctl(epfd, op, fd, 0, data);
		if (!rec->koff)
			(void)ctl(epfd, op, fd, 0, data);
		rec_del(set, at);
		return 0;
	default:
		return ctl(epfd, op, fd, rest, data);
	}
}

/* @fd's socket (@id) fell back to the kernel: in every set that holds
 * it, its kernel entry takes the application's events and data back and
 * its readiness entry goes. Records are retired, not freed: a wait may
 * have taken an event of theirs already, which then still reports. */
void pl_epoll_fell(int fd, uint64_t id)
{
	int e;

	if (!__atomic_load_n(&sets, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&sets_lock);
	for (e = 0; e < sets_hi; e++) {
		struct pl_epset *set = sets[e];
		size_t i = 0;

		if (!set)
			continue;
		pthread_mutex_lock(&set->lock);
		while (i < set->n) {
			struct pl_eprec *r = set->recs[i];

			if (r->fd != fd || r->id != id) {
				i++;
				continue;
			}
			/* A one-shot that reported stays disarmed: only
			 * errors, as an entry MOD'ed to no events. */
			ctl(set->epfd, r->koff ? EPOLL_CTL_ADD : EPOLL_CTL_MOD,
			    fd, r->koff ? 0 : r->uevents, r->app);
			r->fell = true;
			rec_del(set, i);
		}
		pthread_mutex_unlock(&set->lock);
	}
	pthread_mutex_unlock(&sets_lock);
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

/* A one-shot entry reported through one half: the kernel disarmed that
 * one; take the other out too, as the kernel's single entry would be. */
static void oneshot_done(struct pl_epset *set, struct pl_eprec *rec,
			 bool kside)
{
	epoll_data_t mine = { .ptr = rec };

	if (kside) {
		ctl(set->epfd, EPOLL_CTL_MOD, rec->rfd, EPOLLONESHOT, mine);
	} else if (!rec->koff) {
		(void)pl_real.epoll_ctl(set->epfd, EPOLL_CTL_DEL, rec->fd,
					NULL);
		rec->koff = true;
	}
}

/* Keeps the events that are the application's or confirmed, one per
 * record with both halves' events merged; returns how many are left in
 * @ev. */
static int filter(struct pl_epset *set, struct epoll_event *ev, int n)
{
	unsigned int gen;
	int i, k = 0;

	pthread_mutex_lock(&set->lock);
	gen = ++set->gen;
	for (i = 0; i < n; i++) {
		size_t at = 0;
		bool kside = false;
		struct pl_eprec *rec = rec_find_ptr(set, ev[i].data.ptr, &at,
						    &kside);
		uint32_t events = ev[i].events;
		struct pl_sock *s;

		if (!rec) {
			ev[k++] = ev[i];
			continue;
		}
		if (at == SIZE_MAX) {
			/* Taken before the record went: a socket that fell
			 * back still reports; a deleted entry does not. */
			if (!rec->fell || !kside)
				continue;
		} else if (!kside) {
			s = pl_get_id(rec->fd, rec->id);
			if (!s) {
				/* Gone without EPOLL_CTL_DEL: the kernel
				 * drops a file closed everywhere from its
				 * sets; our duplicate would keep its
				 * readiness fd there. */
				rec_del(set, at);
				continue;
			}
			if (qps_ep_wait(s->ep, 0) != 1) {
				pl_put(s);
				/* Not the application's wake-up: a one-shot
				 * stays armed. */
				if (rec->events & EPOLLONESHOT) {
					epoll_data_t mine = { .ptr = rec };

					ctl(set->epfd, EPOLL_CTL_MOD, rec->rfd,
					    rec->events, mine);
				}
				continue;
			}
			pl_put(s);
		}
		if (at != SIZE_MAX && (rec->uevents & EPOLLONESHOT))
			oneshot_done(set, rec, kside);
		if (rec->out_gen == gen) {
			ev[rec->out_at].events |= events;
			continue;
		}
		rec->out_gen = gen;
		rec->out_at = k;
		ev[k].events = events;
		ev[k++].data = rec->app;
	}
	/* Translated: this wait holds none of our addresses any more. */
	waiter_out(set);
	retired_free(set);
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
			waiter_in(set);
			r = pl_real.epoll_pwait(epfd, ev, max, 0, mask);
		} else {
			bool armed = left && pl_sleep_arm();

			waiter_in(set);
			pthread_cleanup_push(waiter_out_cleanup, set);
			/* The core leaves errno alone. */
			pthread_cleanup_push(pl_sleep_disarm_cleanup, &armed);
			r = pl_real.epoll_pwait(epfd, ev, max, left, mask);
			pthread_cleanup_pop(1);
			pthread_cleanup_pop(0);
		}
		if (r <= 0)
			waiter_out(set);
		if (r < 0 || (r == 0 && !spinning))
			return r;
		if (r > 0) {
			r = filter(set, ev, r);
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
