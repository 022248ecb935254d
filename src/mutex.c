// SPDX-License-Identifier: MIT
/*
 * The contended half of qps_mutex (mutex.h): sleeping on the word with
 * the private futex operations, as glibc's default mutex does. No spin
 * first: with two senders on two cores, a spinning waiter keeps the
 * queue's cache lines bouncing while the holder works, where a sleeping
 * one lets it run alone (docs/performance.md). The system calls go
 * through syscall(), which sets errno on EAGAIN or EINTR; errno is put
 * back, since the library never changes it.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mutex.h"

static void qps_futex(uint32_t *word, int op, uint32_t val)
{
	int saved = errno;

	syscall(SYS_futex, word, op, val, NULL, NULL, 0);
	errno = saved;
}

void qps_mutex_lock_slow(struct qps_mutex *m)
{
	/* Acquire: pairs with the release in qps_mutex_unlock. Taken as 2,
	 * since other sleepers may remain: our unlock must wake one. A
	 * sleep returns at once if the word is no longer 2 (an unlock came
	 * first), so no wake is missed. */
	while (__atomic_exchange_n(&m->word, 2, __ATOMIC_ACQUIRE) != 0)
		qps_futex(&m->word, FUTEX_WAIT_PRIVATE, 2);
}

void qps_mutex_wake(struct qps_mutex *m)
{
	qps_futex(&m->word, FUTEX_WAKE_PRIVATE, 1);
}
