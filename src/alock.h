/* SPDX-License-Identifier: MIT */
/*
 * The send queues' lock (sq->lock) with two sides: the application's
 * threads take it on every send, qpsock's own threads (the doorbell
 * flusher) only now and then.
 *
 * By default both sides are one qps_mutex. In a single-threaded context
 * (QPS_THREAD_MODE_SINGLE: the application promises that no two of its
 * threads call into the context at once) the lock is asymmetric, as in
 * liburcu's membarrier flavour: the application side marks itself inside
 * with plain stores and a compiler barrier, no locked instruction; a
 * library thread takes the mutex, says it wants in, and runs membarrier(2)
 * (MEMBARRIER_CMD_PRIVATE_EXPEDITED), which puts a full barrier into every
 * running thread of the process. That barrier orders the application's
 * "inside" store before its look at "wants in" (the store-buffering pair:
 * at least one side sees the other), so the library thread then waits
 * until the application is out, and the application, on its next entry,
 * sees the library thread and queues on the mutex behind it.
 *
 * The application side never waits in the common case; a library thread
 * pays a system call with inter-processor interrupts. Where membarrier is
 * missing (old kernel, seccomp, ThreadSanitizer builds: TSan cannot see
 * its barrier) the lock stays a plain mutex (qps_alock_init returns
 * false). tests/model/alock.pml checks the protocol under TSO.
 */
#ifndef QPS_ALOCK_H
#define QPS_ALOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "mutex.h"

struct qps_alock {
	struct qps_mutex m;	/* library threads; the app when it must wait */
	bool asym;		/* fixed at init: single-threaded context */
	bool app_mutex;		/* app side: this entry holds m (app only) */
	uint32_t app_in;	/* atomic: the app side is inside */
	uint32_t lib_want;	/* atomic: a library thread holds m, wants in */
	uint64_t lib_entries;	/* atomic: library entries that paid a barrier */
};

/* Registers the process for expedited membarrier once; false when the
 * kernel (or a sandbox) refuses, and in ThreadSanitizer builds. */
bool qps_alock_asym_available(void);
/* @asym: the context is single-threaded. Returns whether the lock is
 * asymmetric (false when asked for but membarrier is unavailable). */
bool qps_alock_init(struct qps_alock *l, bool asym);
void qps_alock_lock_lib(struct qps_alock *l);
void qps_alock_unlock_lib(struct qps_alock *l);
void qps_alock_lock_app_slow(struct qps_alock *l);

/*
 * The application side: any thread of the application, provided no two
 * of them are in calls on the context at once (their own synchronisation
 * orders one's section before the next's).
 */
static inline void qps_alock_lock(struct qps_alock *l)
{
	if (!l->asym) {
		qps_mutex_lock(&l->m);
		return;
	}
	__atomic_store_n(&l->app_in, 1, __ATOMIC_RELAXED);
	/* Compiler barrier only: membarrier in qps_alock_lock_lib makes it
	 * a full barrier whenever a library thread needs it to be one,
	 * ordering the store above before the load below. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* Acquire: pairs with the release in qps_alock_unlock_lib, so a
	 * library thread that was in and left is seen whole. */
	if (__builtin_expect(!__atomic_load_n(&l->lib_want, __ATOMIC_ACQUIRE),
			     1))
		return;
	qps_alock_lock_app_slow(l);
}

static inline void qps_alock_unlock(struct qps_alock *l)
{
	if (!l->asym) {
		qps_mutex_unlock(&l->m);
		return;
	}
	if (__builtin_expect(!l->app_mutex, 1)) {
		/* Release: pairs with the acquire in qps_alock_lock_lib's
		 * wait, which then sees this section whole. */
		__atomic_store_n(&l->app_in, 0, __ATOMIC_RELEASE);
		return;
	}
	l->app_mutex = false;
	qps_mutex_unlock(&l->m);
}

#endif
