/* SPDX-License-Identifier: MIT */
/*
 * The send queues' lock (sq->lock) with two sides: the application's
 * threads take it on every send, qpsock's own threads (the doorbell
 * flusher) only now and then.
 *
 * Its fast side is asymmetric, as in liburcu's membarrier flavour: the
 * thread on it marks itself inside with plain stores and a compiler
 * barrier, no locked instruction. Every other thread takes the mutex,
 * says it wants in, and runs membarrier(2)
 * (MEMBARRIER_CMD_PRIVATE_EXPEDITED), which puts a full barrier into every
 * running thread of the process. That barrier orders the fast side's
 * "inside" store before its look at "wants in" (the store-buffering pair:
 * at least one side sees the other), so the mutex holder then waits until
 * the fast side is out, and the fast side, on its next entry, sees the
 * flag and queues on the mutex.
 *
 * Who gets the fast side depends on the context's thread mode:
 *  - single (QPS_THREAD_MODE_SINGLE: the application promises that no two
 *    of its threads call into the context at once): any application
 *    thread. Library threads clear the flag when they leave.
 *  - multi (the default): the lock is biased. It starts as a plain mutex;
 *    the first thread to take it a run of bias_run times in a row with
 *    no other thread between becomes its owner for good, and from then on
 *    the owner takes the fast side whenever the bias is on. Any other
 *    thread turns the bias off (one membarrier) and leaves it off; the
 *    owner turns it back on after another such run. Each turning off by
 *    another application thread doubles the run needed (up to
 *    QPS_ALOCK_BIAS_RUN_MAX), so threads that take turns pay a barrier
 *    rarely and one that sends alone pays none; the flusher's, bounded by
 *    the bursts it rings, do not.
 *  - mutex (QPS_THREAD_MODE_MUTEX), and wherever membarrier is missing
 *    at the context's creation (old kernel, seccomp, ThreadSanitizer
 *    builds, gcc's or clang's: TSan cannot see its barrier): a plain
 *    mutex, with one log line when the kernel refused.
 *
 * A membarrier refused after start (a seccomp filter installed later)
 * must not leave a section unexcluded: the closer that met the refusal
 * switches the process to fenced entries for good (qps_alock_fenced: the
 * fast side then pays a full fence, the closer one too, the classic
 * Dekker pair) and flushes every running thread once through a TLB
 * shootdown (alock.c) so that a fast-side entry that read the switch
 * before it was made is seen as well.
 *
 * The lock is not reentrant, and a signal handler that sends while its
 * thread is in a send would enter it twice; tx.c refuses such a send
 * before it takes any lock (docs/reliability.md).
 *
 * The owner never changes once set, so no thread but the owner ever
 * writes app_in in a biased lock: a thread that was never owner cannot
 * read itself as owner, however stale its look. tests/model/alock.pml
 * and tests/model/alock_bias.pml check the two under TSO.
 */
#ifndef QPS_ALOCK_H
#define QPS_ALOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "mutex.h"
#include "thread_id.h"

enum qps_alock_mode {
	QPS_ALOCK_MUTEX,
	QPS_ALOCK_SINGLE,
	QPS_ALOCK_BIASED,
};

/* A biased lock's first run, and the longest it grows to: at most one
 * barrier per that many of the owner's entries, whatever the other
 * application threads do. */
#define QPS_ALOCK_BIAS_RUN	1024u
#define QPS_ALOCK_BIAS_RUN_MAX	(1u << 16)

/* Set once, when a membarrier failed after start: every fast-side entry
 * from then on pays a full fence instead. */
extern uint32_t qps_alock_fenced;

struct qps_alock {
	struct qps_mutex m;	/* every entry but the fast side's */
	uint8_t mode;		/* enum qps_alock_mode, fixed at init */
	bool app_mutex;		/* this entry holds m (written by the holder) */
	uint32_t app_in;	/* atomic: the fast side is inside */
	uint32_t lib_want;	/* atomic: the fast side is closed (a mutex
				 * holder is in; biased: the bias is off) */
	uintptr_t owner;	/* atomic, biased: the thread the lock leans
				 * to, 0 until the first run; set once */
	uintptr_t last;		/* biased, under m: the last holder's thread */
	uint32_t run;		/* biased, under m: last's entries in a row */
	uint32_t bias_run;	/* biased, under m: the run that turns it on */
	uint64_t lib_entries;	/* atomic: entries that paid a barrier */
};

/* Registers the process for expedited membarrier once and checks that
 * a barrier still goes through (a seccomp filter may have come since):
 * 0, -ENOTSUP in ThreadSanitizer builds or after a refusal at run time,
 * or the kernel's -errno. */
int qps_alock_asym_check(void);
static inline bool qps_alock_asym_available(void)
{
	return qps_alock_asym_check() == 0;
}
/* Returns the mode the lock got: @mode, or QPS_ALOCK_MUTEX where
 * membarrier is unavailable. */
enum qps_alock_mode qps_alock_init(struct qps_alock *l,
				   enum qps_alock_mode mode);
/* qpsock's own threads (the flusher), which never own a lock. */
void qps_alock_lock_lib(struct qps_alock *l);
void qps_alock_unlock_lib(struct qps_alock *l);
void qps_alock_lock_app_slow(struct qps_alock *l);
void qps_alock_lock_other(struct qps_alock *l);
/* Whether a biased lock leans to its owner now (for stats). */
bool qps_alock_biased(const struct qps_alock *l);

/*
 * The application side: any thread of the application. In a single-
 * threaded context, no two of them may be in calls on the context at once
 * (their own synchronisation orders one's section before the next's).
 */
static inline void qps_alock_lock(struct qps_alock *l)
{
	if (l->mode == QPS_ALOCK_MUTEX) {
		qps_mutex_lock(&l->m);
		return;
	}
	/* Relaxed: owner is set once, and only a thread that set it can
	 * read itself there; the look at lib_want below decides. */
	if (l->mode == QPS_ALOCK_BIASED &&
	    __atomic_load_n(&l->owner, __ATOMIC_RELAXED) != qps_thread_id()) {
		qps_alock_lock_other(l);
		return;
	}
	__atomic_store_n(&l->app_in, 1, __ATOMIC_RELAXED);
	/* Compiler barrier only: membarrier in qps_alock_close makes it a
	 * full barrier whenever a mutex holder needs it to be one,
	 * ordering the store above before the load below. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* Relaxed: a stale 0 is covered by the flush that follows its
	 * store (qps_alock_degrade). Once set, the fence pairs with the
	 * closer's own in qps_alock_barrier. */
	if (__builtin_expect(__atomic_load_n(&qps_alock_fenced,
					     __ATOMIC_RELAXED), 0))
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* Acquire: pairs with the release that opened the fast side
	 * (qps_alock_unlock_lib, or qps_alock_count's turning the bias
	 * on), so the mutex holder that was in and left is seen whole. */
	if (__builtin_expect(!__atomic_load_n(&l->lib_want, __ATOMIC_ACQUIRE),
			     1))
		return;
	qps_alock_lock_app_slow(l);
}

static inline void qps_alock_unlock(struct qps_alock *l)
{
	if (l->mode == QPS_ALOCK_MUTEX) {
		qps_mutex_unlock(&l->m);
		return;
	}
	if (__builtin_expect(!l->app_mutex, 1)) {
		/* Release: pairs with the acquire in qps_alock_close's
		 * wait, which then sees this section whole. */
		__atomic_store_n(&l->app_in, 0, __ATOMIC_RELEASE);
		return;
	}
	l->app_mutex = false;
	qps_mutex_unlock(&l->m);
}

#endif
