// SPDX-License-Identifier: MIT
/*
 * fd -> offloaded socket. The table is an array indexed by fd, sized by
 * the hard RLIMIT_NOFILE at start (an fd above it is never offloaded).
 * Most fds a program passes are not ours, so the fast path is one
 * lock-free load of a NULL slot. Taking a reference on a slot that holds
 * a socket is done under a lock striped by fd: close() unmaps under the
 * same lock, so a socket cannot be freed between the load and the
 * reference. A call holds its reference until it returns; the socket
 * (its endpoint and its duplicate of the kernel socket) goes with the
 * last reference, as a kernel socket lives until its last user leaves:
 * a thread blocked in recv() while another closes the fd keeps waiting,
 * as on Linux, and never touches freed memory.
 */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "preload.h"

#define PL_STRIPES 64
#define PL_FDS_MAX (1 << 20)

static struct pl_sock **tab;
static int tab_n;
static int tab_hi;	/* above every fd ever mapped */
static pthread_mutex_t stripe[PL_STRIPES];

int pl_fdtab_init(void)
{
	struct rlimit rl;
	size_t n = 65536;
	void *p;
	int i;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max > n)
		n = rl.rlim_max > PL_FDS_MAX ? PL_FDS_MAX : rl.rlim_max;
	/* Anonymous pages: zero, and touched only where fds are. */
	p = mmap(NULL, n * sizeof(*tab), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	for (i = 0; i < PL_STRIPES; i++)
		pthread_mutex_init(&stripe[i], NULL);
	tab_n = (int)n;
	/* Release: the locks are set up before a caller sees the table. */
	__atomic_store_n(&tab, (struct pl_sock **)p, __ATOMIC_RELEASE);
	return 0;
}

void pl_fdtab_atfork_child(void)
{
	int i;

	/* A parent thread may have held one at the fork. */
	for (i = 0; i < PL_STRIPES; i++)
		pthread_mutex_init(&stripe[i], NULL);
}

static struct pl_sock **slot(int fd)
{
	struct pl_sock **t = __atomic_load_n(&tab, __ATOMIC_ACQUIRE);

	if (!t || fd < 0 || fd >= tab_n)
		return NULL;
	return &t[fd];
}

struct pl_sock *pl_get(int fd)
{
	struct pl_sock **sl = slot(fd), *s;

	if (!sl || !__atomic_load_n(sl, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&stripe[fd % PL_STRIPES]);
	s = *sl;
	if (s)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&stripe[fd % PL_STRIPES]);
	return s;
}

void pl_put(struct pl_sock *s)
{
	if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
		pl_sock_free(s);
}

int pl_install(int fd, struct pl_sock *s)
{
	struct pl_sock **sl = slot(fd);
	int ret = 0;

	if (!sl)
		return -EMFILE;
	pthread_mutex_lock(&stripe[fd % PL_STRIPES]);
	if (*sl) {
		ret = -EEXIST;
	} else {
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
		__atomic_store_n(sl, s, __ATOMIC_RELEASE);
		if (fd >= __atomic_load_n(&tab_hi, __ATOMIC_RELAXED))
			__atomic_store_n(&tab_hi, fd + 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&stripe[fd % PL_STRIPES]);
	return ret;
}

struct pl_sock *pl_remove(int fd)
{
	struct pl_sock **sl = slot(fd), *s;

	if (!sl || !__atomic_load_n(sl, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&stripe[fd % PL_STRIPES]);
	s = *sl;
	__atomic_store_n(sl, NULL, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&stripe[fd % PL_STRIPES]);
	return s;
}

void pl_dup_map(int oldfd, int newfd)
{
	struct pl_sock *s = pl_get(oldfd), *old;

	/* dup2/dup3 closed whatever @newfd was; forget it first. */
	old = pl_remove(newfd);
	if (s && pl_install(newfd, s) < 0)
		pl_log("fd %d: duplicate of offloaded fd %d beyond the fd "
		       "table: left on the kernel", newfd, oldfd);
	pl_put(old);
	pl_put(s);
}

void pl_fdtab_clear(void)
{
	int fd;

	if (!__atomic_load_n(&tab, __ATOMIC_ACQUIRE))
		return;
	for (fd = 0; fd < __atomic_load_n(&tab_hi, __ATOMIC_RELAXED); fd++)
		if (__atomic_load_n(&tab[fd], __ATOMIC_RELAXED))
			pl_put(pl_remove(fd));
}
