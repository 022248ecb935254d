/* SPDX-License-Identifier: MIT */
/*
 * The lock of each send queue and of the receive side (rx.lock): a futex
 * mutex whose uncontended lock and unlock are one atomic each, inlined
 * into the datagram paths. A pthread mutex costs the same two atomics
 * plus two calls and its owner and type bookkeeping on every datagram;
 * nothing here needs what those buy (error checking, robustness,
 * condition variables).
 *
 * The word is 0 (free), 1 (held) or 2 (held, and a waiter may sleep on
 * it): only an unlock that finds 2 makes the wake system call.
 */
#ifndef QPS_MUTEX_H
#define QPS_MUTEX_H

#include <stdbool.h>
#include <stdint.h>

struct qps_mutex {
	uint32_t word;
};

#define QPS_MUTEX_INIT { 0 }

void qps_mutex_lock_slow(struct qps_mutex *m);
void qps_mutex_wake(struct qps_mutex *m);

static inline void qps_mutex_init(struct qps_mutex *m)
{
	__atomic_store_n(&m->word, 0, __ATOMIC_RELAXED);
}

static inline bool qps_mutex_trylock(struct qps_mutex *m)
{
	uint32_t free_word = 0;

	/* Acquire: pairs with the release in qps_mutex_unlock, so what the
	 * last holder wrote is seen. */
	return __atomic_compare_exchange_n(&m->word, &free_word, 1, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void qps_mutex_lock(struct qps_mutex *m)
{
	if (!qps_mutex_trylock(m))
		qps_mutex_lock_slow(m);
}

static inline void qps_mutex_unlock(struct qps_mutex *m)
{
	/* Release: pairs with the acquire of the next lock (trylock, or
	 * the slow path's exchange). */
	if (__atomic_exchange_n(&m->word, 0, __ATOMIC_RELEASE) == 2)
		qps_mutex_wake(m);
}

#endif
