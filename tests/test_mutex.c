// SPDX-License-Identifier: MIT
/*
 * Suite "mutex": the send queues' futex mutex (src/mutex.h). Worker
 * threads report through atomics that the main thread asserts on (CUnit
 * is not thread-safe); every cross-thread wait is bounded.
 */
#define _GNU_SOURCE
#include "t_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mutex.h"

#define EQ T_EQ

#if defined(__SANITIZE_THREAD__)
#define T_ROUNDS 200000u
#else
#define T_ROUNDS 2000000u
#endif
#define T_WAIT_NS 2000000000ll

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint32_t word(struct qps_mutex *m)
{
	return __atomic_load_n(&m->word, __ATOMIC_RELAXED);
}

static void test_uncontended(void)
{
	struct qps_mutex m = QPS_MUTEX_INIT;

	CU_ASSERT(qps_mutex_trylock(&m));
	EQ(word(&m), 1);
	CU_ASSERT(!qps_mutex_trylock(&m));
	qps_mutex_unlock(&m);
	EQ(word(&m), 0);
	qps_mutex_lock(&m);
	EQ(word(&m), 1);
	qps_mutex_unlock(&m);
	EQ(word(&m), 0);
}

/* Two threads, one counter that only the lock protects: a lost update
 * or two holders at once shows in the count or in @inside. */
struct excl {
	struct qps_mutex m;
	uint64_t count;		/* plain: the lock is its only guard */
	int inside;
	int overlaps;
};

static void *excl_worker(void *arg)
{
	struct excl *x = arg;
	uint32_t i;

	for (i = 0; i < T_ROUNDS; i++) {
		qps_mutex_lock(&x->m);
		if (__atomic_exchange_n(&x->inside, 1, __ATOMIC_RELAXED))
			__atomic_fetch_add(&x->overlaps, 1, __ATOMIC_RELAXED);
		x->count++;
		__atomic_store_n(&x->inside, 0, __ATOMIC_RELAXED);
		qps_mutex_unlock(&x->m);
	}
	return NULL;
}

static void test_exclusion(void)
{
	struct excl x = { .m = QPS_MUTEX_INIT };
	pthread_t t[2];
	int i;

	for (i = 0; i < 2; i++)
		EQ(pthread_create(&t[i], NULL, excl_worker, &x), 0);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	EQ(x.count, 2ull * T_ROUNDS);
	EQ(x.overlaps, 0);
	EQ(word(&x.m), 0);
}

/* A waiter that finds the lock held sleeps, marking the word 2; the
 * unlock wakes it, and errno is as it left it. */
struct sleeper {
	struct qps_mutex *m;
	int got;
	int errno_after;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;

	errno = 4242;
	qps_mutex_lock(s->m);
	s->errno_after = errno;
	__atomic_store_n(&s->got, 1, __ATOMIC_RELEASE);
	qps_mutex_unlock(s->m);
	return NULL;
}

static void test_sleeper_woken(void)
{
	struct qps_mutex m = QPS_MUTEX_INIT;
	struct sleeper s = { .m = &m };
	int64_t until;
	pthread_t t;

	qps_mutex_lock(&m);
	T_EQ_FATAL(pthread_create(&t, NULL, sleeper_main, &s), 0);
	until = now_ns() + T_WAIT_NS;
	while (word(&m) != 2 && now_ns() < until)
		usleep(100);
	EQ(word(&m), 2);
	/* Asleep or about to be: still not the holder. */
	usleep(10000);
	EQ(__atomic_load_n(&s.got, __ATOMIC_ACQUIRE), 0);
	qps_mutex_unlock(&m);
	until = now_ns() + T_WAIT_NS;
	while (!__atomic_load_n(&s.got, __ATOMIC_ACQUIRE) && now_ns() < until)
		usleep(100);
	EQ(__atomic_load_n(&s.got, __ATOMIC_ACQUIRE), 1);
	pthread_join(t, NULL);
	EQ(s.errno_after, 4242);
	EQ(word(&m), 0);
}

static CU_TestInfo tests[] = {
	{ "uncontended: lock, trylock, unlock", test_uncontended },
	{ "two threads, one counter", test_exclusion },
	{ "a sleeper is woken, errno kept", test_sleeper_woken },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("mutex", tests);
}
