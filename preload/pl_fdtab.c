// SPDX-License-Identifier: MIT
/*
 * fd -> offloaded socket. The table is an array indexed by fd, sized by
 * the hard RLIMIT_NOFILE at start (an fd above it is never offloaded).
 * Most fds a program passes are not ours, so the fast path is one load
 * of a NULL slot.
 *
 * Lookups take no lock, so an interposed call made from a signal handler
 * that interrupted another lookup cannot deadlock. That needs socket
 * memory that is never given back to the allocator: a freed socket goes
 * to a free list and is only ever reused as a socket (type-stable, as
 * the kernel's SLAB_TYPESAFE_BY_RCU). A lookup loads the slot, takes a
 * reference only if the count is not zero (a socket being freed has
 * left its slot already), then checks the slot still names it: if the
 * memory was freed and reused meanwhile, either the count was zero or
 * the slot moved on, and the lookup drops what it took and looks again.
 *
 * A call holds its reference until it returns; the socket (its endpoint
 * and its duplicate of the kernel socket) goes with the last reference,
 * as a kernel socket lives until its last user leaves: a thread blocked
 * in recv() while another closes the fd keeps waiting, as on Linux, and
 * never touches freed memory.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "preload.h"

#define PL_FDS_MAX (1 << 20)

static struct pl_sock **tab;
static int tab_n;
static int tab_hi;	/* above every fd ever mapped */

/* Freed sockets, reused only as sockets (above). */
__thread int pl_inside __attribute__((tls_model("initial-exec")));

static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_sock *free_list;

int pl_fdtab_init(void)
{
	struct rlimit rl;
	size_t n = 65536;
	void *p;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max > n)
		n = rl.rlim_max > PL_FDS_MAX ? PL_FDS_MAX : rl.rlim_max;
	/* Anonymous pages: zero, and touched only where fds are. */
	p = mmap(NULL, n * sizeof(void *), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	tab_n = (int)n;
	__atomic_store_n(&tab, (struct pl_sock **)p, __ATOMIC_RELEASE);
	return 0;
}

void pl_fdtab_atfork_child(void)
{
	/* A parent thread may have held it at the fork. */
	pthread_mutex_init(&free_lock, NULL);
}

static void tab_refs_zero(struct pl_sock *s, void *arg)
{
	(void)arg;
	s->tab_refs = 0;
}

static void tab_refs_set(struct pl_sock *s, void *arg)
{
	(void)arg;
	/* A socket closed while a call was inside is no longer in the
	 * table: nothing in this process will ever free it, nor should the
	 * teardown wait for it. */
	if (!s->tab_refs)
		pl_live_forget(s);
	else
		__atomic_store_n(&s->refs, s->tab_refs, __ATOMIC_RELAXED);
}

/*
 * In a child, at the fork: references of calls inside a socket belong to
 * the parent's other threads, which the child does not have; they would
 * never be dropped, and an exec or exit would wait for them. Each socket
 * keeps its table entries' references only. Not when the forking thread
 * is inside a call itself (a fork from a signal handler): whose reference
 * is whose is unknown then, and the exit teardown does not wait there.
 */
void pl_fdtab_fork_refs(void)
{
	int fd, hi = __atomic_load_n(&tab_hi, __ATOMIC_RELAXED);

	if (pl_inside || !__atomic_load_n(&tab, __ATOMIC_ACQUIRE))
		return;
	pl_live_each(tab_refs_zero, NULL);
	for (fd = 0; fd < hi; fd++)
		if (tab[fd])
			tab[fd]->tab_refs++;
	pl_live_each(tab_refs_set, NULL);
}

/* A socket with one reference (the caller's), every other field zero. */
struct pl_sock *pl_sock_alloc(void)
{
	struct pl_sock *s;

	pthread_mutex_lock(&free_lock);
	s = free_list;
	if (s)
		free_list = s->next;
	pthread_mutex_unlock(&free_lock);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (s)
			s->refs = 1;
		return s;
	}
	/* refs stays untouched (zero) until the end: a stale lookup may
	 * be looking at it right now and must keep seeing zero. */
	memset((char *)s + sizeof(s->refs), 0, sizeof(*s) - sizeof(s->refs));
	__atomic_store_n(&s->refs, 1, __ATOMIC_RELEASE);
	return s;
}

void pl_sock_release(struct pl_sock *s)
{
	/* Zero for a stale lookup, whatever path freed it. */
	__atomic_store_n(&s->refs, 0, __ATOMIC_RELEASE);
	pthread_mutex_lock(&free_lock);
	s->next = free_list;
	free_list = s;
	pthread_mutex_unlock(&free_lock);
}

static struct pl_sock **slot(int fd)
{
	struct pl_sock **t = __atomic_load_n(&tab, __ATOMIC_ACQUIRE);

	if (!t || fd < 0 || fd >= tab_n)
		return NULL;
	return &t[fd];
}

static bool ref_not_zero(struct pl_sock *s)
{
	int r = __atomic_load_n(&s->refs, __ATOMIC_RELAXED);

	do {
		if (r == 0)
			return false;
	} while (!__atomic_compare_exchange_n(&s->refs, &r, r + 1, true,
					      __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return true;
}

bool pl_mapped(int fd)
{
	struct pl_sock **sl = slot(fd);

	return sl && __atomic_load_n(sl, __ATOMIC_RELAXED);
}

struct pl_sock *pl_ref(int fd)
{
	struct pl_sock **sl = slot(fd);

	if (!sl)
		return NULL;
	for (;;) {
		struct pl_sock *s = __atomic_load_n(sl, __ATOMIC_ACQUIRE);

		if (!s)
			return NULL;
		if (!ref_not_zero(s))
			continue;
		if (__atomic_load_n(sl, __ATOMIC_ACQUIRE) == s) {
			pl_inside++;
			return s;
		}
		pl_unref(s);
	}
}

struct pl_sock *pl_get(int fd)
{
	struct pl_sock *s = pl_ref(fd);

	if (__builtin_expect(!s || !s->share, 1) || pl_fork_served(s) ||
	    pl_fork_claim(s))
		return s;
	/* Another process serves it. emu has no kernel path to its wire:
	 * the calls fail there (EBADFD) rather than leave through a
	 * kernel route. */
	if (pl_ctx_info.emu)
		return s;
	pl_put(s);
	return NULL;
}

void pl_unref(struct pl_sock *s)
{
	if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
		pl_sock_free(s);
}

void pl_put(struct pl_sock *s)
{
	if (!s)
		return;
	pl_inside--;
	pl_unref(s);
}

void pl_put_cleanup(void *s)
{
	pl_put(s);
}

int pl_install(int fd, struct pl_sock *s)
{
	struct pl_sock **sl = slot(fd), *none = NULL;

	if (!sl)
		return -EMFILE;
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	if (!__atomic_compare_exchange_n(sl, &none, s, false,
					 __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
		/* The caller holds a reference: this is never the last. */
		__atomic_sub_fetch(&s->refs, 1, __ATOMIC_RELAXED);
		return -EEXIST;
	}
	if (fd >= __atomic_load_n(&tab_hi, __ATOMIC_RELAXED))
		__atomic_store_n(&tab_hi, fd + 1, __ATOMIC_RELAXED);
	return 0;
}

struct pl_sock *pl_remove(int fd)
{
	struct pl_sock **sl = slot(fd);

	if (!sl || !__atomic_load_n(sl, __ATOMIC_RELAXED))
		return NULL;
	return __atomic_exchange_n(sl, NULL, __ATOMIC_ACQ_REL);
}

void pl_dup_map(int oldfd, int newfd)
{
	struct pl_sock *s, *old;

	if ((!pl_mapped(oldfd) && !pl_mapped(newfd)) || pl_vforked())
		return;
	s = pl_ref(oldfd);
	/* dup2/dup3 closed whatever @newfd was; forget it first. */
	old = pl_remove(newfd);
	if (s && pl_install(newfd, s) < 0)
		pl_log("fd %d: duplicate of offloaded fd %d beyond the fd "
		       "table: left on the kernel", newfd, oldfd);
	pl_unref(old);
	pl_put(s);
}

int pl_fdtab_next(int fd)
{
	int hi = __atomic_load_n(&tab_hi, __ATOMIC_RELAXED);

	if (!__atomic_load_n(&tab, __ATOMIC_ACQUIRE) || fd < 0)
		return -1;
	for (; fd < hi; fd++)
		if (__atomic_load_n(&tab[fd], __ATOMIC_RELAXED))
			return fd;
	return -1;
}

struct pl_sock *pl_get_id(int fd, uint64_t id)
{
	struct pl_sock *s = pl_get(fd);

	if (s && s->id == id)
		return s;
	pl_put(s);
	for (fd = pl_fdtab_next(0); fd >= 0; fd = pl_fdtab_next(fd + 1)) {
		s = pl_get(fd);
		if (s && s->id == id)
			return s;
		pl_put(s);
	}
	return NULL;
}

int pl_fdtab_count(const struct pl_sock *s)
{
	int fd, n = 0;

	for (fd = pl_fdtab_next(0); fd >= 0; fd = pl_fdtab_next(fd + 1))
		n += __atomic_load_n(&tab[fd], __ATOMIC_RELAXED) == s;
	return n;
}

void pl_fdtab_clear(void)
{
	int fd;

	if (!__atomic_load_n(&tab, __ATOMIC_ACQUIRE))
		return;
	for (fd = 0; fd < __atomic_load_n(&tab_hi, __ATOMIC_RELAXED); fd++)
		if (__atomic_load_n(&tab[fd], __ATOMIC_RELAXED))
			pl_unref(pl_remove(fd));
}
