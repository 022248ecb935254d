// SPDX-License-Identifier: MIT
/*
 * The slow halves of qps_alock (alock.h): a library thread's entry, which
 * pays the membarrier, and the application's entry while a library thread
 * is in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alock.h"
#include "udma.h"

/* Spins on the application's flag before yielding the CPU: its sections
 * are a few hundred instructions, but its thread may be preempted. */
#define QPS_ALOCK_SPIN 256

static pthread_once_t qps_alock_once = PTHREAD_ONCE_INIT;
static bool qps_alock_ok;

static long qps_membarrier(int cmd)
{
	int saved = errno;
	long ret = syscall(SYS_membarrier, cmd, 0, 0);

	errno = saved;
	return ret;
}

static void qps_alock_register(void)
{
#if defined(__SANITIZE_THREAD__)
	qps_alock_ok = false;
#else
	long cmds = qps_membarrier(MEMBARRIER_CMD_QUERY);

	qps_alock_ok = cmds > 0 &&
		       (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
		       qps_membarrier(
			       MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
#endif
}

bool qps_alock_asym_available(void)
{
	pthread_once(&qps_alock_once, qps_alock_register);
	return qps_alock_ok;
}

bool qps_alock_init(struct qps_alock *l, bool asym)
{
	qps_mutex_init(&l->m);
	l->asym = asym && qps_alock_asym_available();
	l->app_mutex = false;
	__atomic_store_n(&l->app_in, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&l->lib_want, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&l->lib_entries, 0, __ATOMIC_RELAXED);
	return l->asym;
}

void qps_alock_lock_lib(struct qps_alock *l)
{
	unsigned int spins = 0;

	qps_mutex_lock(&l->m);
	if (!l->asym)
		return;
	__atomic_store_n(&l->lib_want, 1, __ATOMIC_RELAXED);
	/*
	 * A full barrier here and in every running thread of the process
	 * (a thread not running gets one from its context switch): pairs
	 * with the compiler barrier in qps_alock_lock. Either the
	 * application's app_in store is seen below, or its load of lib_want
	 * after the barrier sees ours. The process registered in
	 * qps_alock_asym_available (a fork keeps it, an exec starts the
	 * library over), so the command cannot fail.
	 */
	qps_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
	/* Acquire: pairs with the release in qps_alock_unlock. */
	while (__atomic_load_n(&l->app_in, __ATOMIC_ACQUIRE)) {
		if (++spins < QPS_ALOCK_SPIN)
			qps_cpu_relax();
		else
			sched_yield();
	}
	/* Relaxed: a counter only read for stats. */
	__atomic_store_n(&l->lib_entries,
			 __atomic_load_n(&l->lib_entries, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
}

void qps_alock_unlock_lib(struct qps_alock *l)
{
	/* Release: pairs with the acquire in qps_alock_lock, so the next
	 * application section sees ours. */
	if (l->asym)
		__atomic_store_n(&l->lib_want, 0, __ATOMIC_RELEASE);
	qps_mutex_unlock(&l->m);
}

/* A library thread is in or about to be: step out and queue behind it on
 * the mutex, which every library thread holds while it is in. */
void qps_alock_lock_app_slow(struct qps_alock *l)
{
	/* Release: pairs with the acquire in qps_alock_lock_lib's wait. */
	__atomic_store_n(&l->app_in, 0, __ATOMIC_RELEASE);
	qps_mutex_lock(&l->m);
	l->app_mutex = true;
}
