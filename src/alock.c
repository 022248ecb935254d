// SPDX-License-Identifier: MIT
/*
 * The slow halves of qps_alock (alock.h): every entry through the mutex,
 * the closing of the fast side (which pays the membarrier), and a biased
 * lock's runs.
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

enum qps_alock_mode qps_alock_init(struct qps_alock *l,
				   enum qps_alock_mode mode)
{
	qps_mutex_init(&l->m);
	if (mode != QPS_ALOCK_MUTEX && !qps_alock_asym_available())
		mode = QPS_ALOCK_MUTEX;
	l->mode = (uint8_t)mode;
	l->app_mutex = false;
	__atomic_store_n(&l->app_in, 0, __ATOMIC_RELAXED);
	/* A biased lock starts closed: a mutex until a thread's first run. */
	__atomic_store_n(&l->lib_want, mode == QPS_ALOCK_BIASED,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&l->owner, 0, __ATOMIC_RELAXED);
	l->last = 0;
	l->run = 0;
	l->bias_run = QPS_ALOCK_BIAS_RUN;
	__atomic_store_n(&l->lib_entries, 0, __ATOMIC_RELAXED);
	return mode;
}

/* Under m: closes the fast side and waits for whoever is on it. @grow:
 * an application thread closed a biased lock, so its owner's next run is
 * made longer; the flusher's closings are bounded by the bursts it rings
 * and leave it as it is. */
static void qps_alock_close(struct qps_alock *l, bool grow)
{
	unsigned int spins = 0;

	/* Relaxed: only holders of m write lib_want. */
	if (__atomic_load_n(&l->lib_want, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&l->lib_want, 1, __ATOMIC_RELAXED);
	/*
	 * A full barrier here and in every running thread of the process
	 * (a thread not running gets one from its context switch): pairs
	 * with the compiler barrier in qps_alock_lock. Either the fast
	 * side's app_in store is seen below, or its load of lib_want after
	 * the barrier sees ours. The process registered in
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
	if (grow && l->bias_run < QPS_ALOCK_BIAS_RUN_MAX)
		l->bias_run *= 2;
}

/* Under m, biased: counts @self's run and, at its end, makes @self the
 * owner if there is none, and opens the fast side to the owner. */
static void qps_alock_count(struct qps_alock *l, uintptr_t self)
{
	uintptr_t owner;

	if (l->last != self) {
		l->last = self;
		l->run = 0;
	}
	if (++l->run < l->bias_run)
		return;
	l->run = 0;
	owner = __atomic_load_n(&l->owner, __ATOMIC_RELAXED);
	if (!owner) {
		owner = self;
		__atomic_store_n(&l->owner, self, __ATOMIC_RELAXED);
	}
	/* Release: pairs with the acquire in the owner's qps_alock_lock,
	 * which then sees every section made under m. */
	if (owner == self)
		__atomic_store_n(&l->lib_want, 0, __ATOMIC_RELEASE);
}

void qps_alock_lock_lib(struct qps_alock *l)
{
	qps_mutex_lock(&l->m);
	if (l->mode == QPS_ALOCK_MUTEX)
		return;
	qps_alock_close(l, false);
	l->last = 0;
}

void qps_alock_unlock_lib(struct qps_alock *l)
{
	/* Release: pairs with the acquire in qps_alock_lock, so the next
	 * fast-side section sees ours. A biased lock stays closed until
	 * its owner's next run. */
	if (l->mode == QPS_ALOCK_SINGLE)
		__atomic_store_n(&l->lib_want, 0, __ATOMIC_RELEASE);
	qps_mutex_unlock(&l->m);
}

/* The fast side's thread found it closed: step out and queue on the
 * mutex, which every other thread holds while it is in. */
void qps_alock_lock_app_slow(struct qps_alock *l)
{
	/* Release: pairs with the acquire in qps_alock_close's wait. */
	__atomic_store_n(&l->app_in, 0, __ATOMIC_RELEASE);
	qps_mutex_lock(&l->m);
	l->app_mutex = true;
	if (l->mode == QPS_ALOCK_BIASED)
		qps_alock_count(l, qps_thread_id());
}

/* Biased, a thread other than the owner (or any, before there is one). */
void qps_alock_lock_other(struct qps_alock *l)
{
	uintptr_t self = qps_thread_id();

	qps_mutex_lock(&l->m);
	qps_alock_close(l, true);
	/* Only now: the owner, until it is out, reads app_mutex as its own
	 * (qps_alock_unlock). */
	l->app_mutex = true;
	qps_alock_count(l, self);
}

bool qps_alock_biased(const struct qps_alock *l)
{
	return l->mode == QPS_ALOCK_BIASED &&
	       !__atomic_load_n(&l->lib_want, __ATOMIC_RELAXED);
}
