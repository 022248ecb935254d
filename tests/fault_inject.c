// SPDX-License-Identifier: MIT
/*
 * fault_inject.c - the wrappers behind fault_inject.h. The linker sends
 * each wrapped call here (__wrap_x) and __real_x reaches the real one, so
 * sanitizers' and valgrind's own interception still sees every block.
 */
#include "fault_inject.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/types.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
int __real_posix_memalign(void **p, size_t align, size_t size);
void __real_free(void *p);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off);
int __real_munmap(void *addr, size_t len);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
void __wrap_free(void *p);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off);
int __wrap_munmap(void *addr, size_t len);

/* Per thread: the armed failure only hits the thread under test, not a
 * helper thread (the doorbell flusher) that happens to allocate. */
static _Thread_local unsigned long fi_nth;
static _Thread_local unsigned long fi_calls;
static _Thread_local bool fi_fired;
/* Relaxed: a tally read after the threads that change it are joined. */
static atomic_long fi_live;

void t_fi_arm(unsigned long nth)
{
	fi_nth = nth;
	fi_calls = 0;
	fi_fired = false;
}

bool t_fi_disarm(void)
{
	fi_nth = 0;
	return fi_fired;
}

unsigned long t_fi_calls(void)
{
	return fi_calls;
}

long t_fi_live(void)
{
	return atomic_load_explicit(&fi_live, memory_order_relaxed);
}

/* Count the call; true if it is the one to fail. */
static bool fi_fail(void)
{
	if (!fi_nth)
		return false;
	if (++fi_calls != fi_nth)
		return false;
	fi_fired = true;
	return true;
}

static void *fi_track(void *p)
{
	if (p)
		atomic_fetch_add_explicit(&fi_live, 1, memory_order_relaxed);
	return p;
}

void *__wrap_malloc(size_t size)
{
	if (fi_fail()) {
		errno = ENOMEM;
		return NULL;
	}
	return fi_track(__real_malloc(size));
}

void *__wrap_calloc(size_t n, size_t size)
{
	if (fi_fail()) {
		errno = ENOMEM;
		return NULL;
	}
	return fi_track(__real_calloc(n, size));
}

void *__wrap_realloc(void *p, size_t size)
{
	void *q;

	if (fi_fail()) {
		errno = ENOMEM;
		return NULL;
	}
	q = __real_realloc(p, size);
	/* A move or a resize is still one block; NULL in, a new one. */
	if (!p)
		return fi_track(q);
	return q;
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
	if (fi_fail()) {
		errno = ENOMEM;
		return NULL;
	}
	return fi_track(__real_aligned_alloc(align, size));
}

int __wrap_posix_memalign(void **p, size_t align, size_t size)
{
	int ret;

	if (fi_fail())
		return ENOMEM;
	ret = __real_posix_memalign(p, align, size);
	if (!ret)
		fi_track(*p);
	return ret;
}

void __wrap_free(void *p)
{
	if (p)
		atomic_fetch_sub_explicit(&fi_live, 1, memory_order_relaxed);
	__real_free(p);
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off)
{
	void *p;

	if (fi_fail()) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	p = __real_mmap(addr, len, prot, flags, fd, off);
	return fi_track(p == MAP_FAILED ? NULL : p) ? p : MAP_FAILED;
}

int __wrap_munmap(void *addr, size_t len)
{
	int ret = __real_munmap(addr, len);

	if (!ret)
		atomic_fetch_sub_explicit(&fi_live, 1, memory_order_relaxed);
	return ret;
}
