/* SPDX-License-Identifier: MIT */
/*
 * Which thread is calling, for the send path's own bookkeeping: the owner
 * of a biased send queue lock (alock.h) and the producer of a queued frame
 * (struct qps_tx_meta). The thread pointer is one load of a segment
 * register; a thread's is never 0 and no two live threads share one (a
 * thread that has exited may leave its value to a new one, which is then
 * the same thread as far as anything still queued can tell: nothing of
 * the dead one can still be running).
 */
#ifndef QPS_THREAD_ID_H
#define QPS_THREAD_ID_H

#include <pthread.h>
#include <stdint.h>

static inline uintptr_t qps_thread_id(void)
{
#if defined(__has_builtin) && __has_builtin(__builtin_thread_pointer)
	return (uintptr_t)__builtin_thread_pointer();
#else
	return (uintptr_t)pthread_self();
#endif
}

#endif
