// SPDX-License-Identifier: MIT
/*
 * Suite "alock": the send queues' two-sided lock (src/alock.h) and the
 * single-threaded context built on it. Worker threads report through
 * atomics that the main thread asserts on (CUnit is not thread-safe);
 * every cross-thread wait is bounded.
 *
 * Where membarrier(2) is refused (old kernel, sandbox, TSan build) the
 * asymmetric cases print SKIP and the fallback is checked instead.
 */
#define _GNU_SOURCE
#include "t_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alock.h"

#define EQ T_EQ
#define GE T_GE

#define T_APP_ROUNDS 1000000u
#define T_LIB_ROUNDS 100000u

static bool asym_or_skip(const char *what)
{
	if (qps_alock_asym_available())
		return true;
	printf("\n    SKIP %s: membarrier(PRIVATE_EXPEDITED) unavailable ",
	       what);
	return false;
}

static void test_fallback_is_mutex(void)
{
	struct qps_alock l;

	CU_ASSERT(!qps_alock_init(&l, false));
	qps_alock_lock(&l);
	EQ(__atomic_load_n(&l.m.word, __ATOMIC_RELAXED), 1);
	EQ(__atomic_load_n(&l.app_in, __ATOMIC_RELAXED), 0);
	qps_alock_unlock(&l);
	EQ(__atomic_load_n(&l.m.word, __ATOMIC_RELAXED), 0);
	qps_alock_lock_lib(&l);
	EQ(__atomic_load_n(&l.m.word, __ATOMIC_RELAXED), 1);
	qps_alock_unlock_lib(&l);
	EQ(__atomic_load_n(&l.lib_entries, __ATOMIC_RELAXED), 0);
}

/* The application side touches no atomic read-modify-write: the mutex
 * word stays 0 while it is in. */
static void test_app_side_plain(void)
{
	struct qps_alock l;

	if (!asym_or_skip("app side"))
		return;
	CU_ASSERT_FATAL(qps_alock_init(&l, true));
	qps_alock_lock(&l);
	EQ(__atomic_load_n(&l.app_in, __ATOMIC_RELAXED), 1);
	EQ(__atomic_load_n(&l.m.word, __ATOMIC_RELAXED), 0);
	qps_alock_unlock(&l);
	EQ(__atomic_load_n(&l.app_in, __ATOMIC_RELAXED), 0);
	qps_alock_lock_lib(&l);
	EQ(__atomic_load_n(&l.lib_want, __ATOMIC_RELAXED), 1);
	qps_alock_unlock_lib(&l);
	EQ(__atomic_load_n(&l.lib_want, __ATOMIC_RELAXED), 0);
	EQ(__atomic_load_n(&l.lib_entries, __ATOMIC_RELAXED), 1);
}

/*
 * One application thread and one library thread on one counter that only
 * the lock guards, with two plain fields that each section sets equal: a
 * section that ran beside another loses an update or sees them apart.
 * The application side does nothing atomic of its own here, as in the
 * send path, so a missing barrier shows as a lost update.
 */
struct excl {
	struct qps_alock l;
	uint64_t count;		/* plain */
	uint64_t a, b;		/* plain, equal outside sections */
	int torn;		/* atomic */
	uint64_t lib_rounds;	/* atomic: library sections done */
};

static void excl_section(struct excl *x)
{
	uint64_t v = x->a;

	if (x->b != v)
		__atomic_fetch_add(&x->torn, 1, __ATOMIC_RELAXED);
	x->a = v + 1;
	x->count++;
	x->b = v + 1;
}

static void *excl_lib(void *arg)
{
	struct excl *x = arg;
	uint64_t n;

	for (n = 1; n <= T_LIB_ROUNDS; n++) {
		qps_alock_lock_lib(&x->l);
		excl_section(x);
		qps_alock_unlock_lib(&x->l);
		__atomic_store_n(&x->lib_rounds, n, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void test_exclusion(void)
{
	struct excl *x = calloc(1, sizeof(*x));
	pthread_t t;
	uint64_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(x);
	if (!asym_or_skip("exclusion")) {
		free(x);
		return;
	}
	CU_ASSERT_FATAL(qps_alock_init(&x->l, true));
	T_EQ_FATAL(pthread_create(&t, NULL, excl_lib, x), 0);
	/* As long as the library thread runs, so that every one of its
	 * sections meets the application's. */
	for (i = 0; i < T_APP_ROUNDS ||
		    __atomic_load_n(&x->lib_rounds, __ATOMIC_RELAXED) <
			    T_LIB_ROUNDS; i++) {
		qps_alock_lock(&x->l);
		excl_section(x);
		qps_alock_unlock(&x->l);
	}
	pthread_join(t, NULL);
	EQ(x->count, i + T_LIB_ROUNDS);
	EQ(x->torn, 0);
	EQ(x->a, x->count);
	GE(__atomic_load_n(&x->l.lib_entries, __ATOMIC_RELAXED), T_LIB_ROUNDS);
	EQ(__atomic_load_n(&x->l.m.word, __ATOMIC_RELAXED), 0);
	free(x);
}

/* The application finds a library thread in: it waits on the mutex and
 * its section runs after the library's, on the mutex. */
struct queued {
	struct qps_alock *l;
	int in;			/* atomic: the app section ran */
	bool via_mutex;		/* written inside the section */
};

static void *queued_app(void *arg)
{
	struct queued *q = arg;

	qps_alock_lock(q->l);
	q->via_mutex = q->l->app_mutex;
	__atomic_store_n(&q->in, 1, __ATOMIC_RELEASE);
	qps_alock_unlock(q->l);
	return NULL;
}

static void test_app_queues_behind_lib(void)
{
	struct qps_alock l;
	struct queued q = { .l = &l };
	pthread_t t;
	int w;

	if (!asym_or_skip("app behind lib"))
		return;
	CU_ASSERT_FATAL(qps_alock_init(&l, true));
	qps_alock_lock_lib(&l);
	T_EQ_FATAL(pthread_create(&t, NULL, queued_app, &q), 0);
	for (w = 0; w < 200 && __atomic_load_n(&l.m.word, __ATOMIC_RELAXED)
				    != 2; w++)
		t_sleep_ms(5);
	EQ(__atomic_load_n(&l.m.word, __ATOMIC_RELAXED), 2);
	EQ(__atomic_load_n(&q.in, __ATOMIC_ACQUIRE), 0);
	qps_alock_unlock_lib(&l);
	pthread_join(t, NULL);
	EQ(__atomic_load_n(&q.in, __ATOMIC_ACQUIRE), 1);
	CU_ASSERT(q.via_mutex);
	CU_ASSERT(!l.app_mutex);
	EQ(__atomic_load_n(&l.m.word, __ATOMIC_RELAXED), 0);
	EQ(__atomic_load_n(&l.app_in, __ATOMIC_RELAXED), 0);
}

/* --- the single-threaded context on emu --------------------------------- */

static char g_wire[64];

static int mkctx(const char *ip, bool single, uint32_t db_us,
		 struct qps_ctx **ctx)
{
	struct qps_ctx_attr a = t_emu_attr(g_wire, ip);

	a.comp_mask |= QPS_CTX_ATTR_THREAD_MODE | QPS_CTX_ATTR_DB_DELAY;
	a.thread_mode = single ? QPS_THREAD_MODE_SINGLE : QPS_THREAD_MODE_MULTI;
	a.db_delay_us = db_us;
	return qps_ctx_create(&a, ctx);
}

/*
 * Bursts left unrung (QPS_MSG_MORE) on a single-threaded context: the
 * flusher rings each one through the library side, paying a barrier
 * (counted), and everything arrives, in order.
 */
static void test_ctx_flusher(void)
{
	struct qps_ctx *a = NULL, *b = NULL;
	struct qps_ep *tx, *rx;
	struct sockaddr_in to = t_sin("198.18.0.2", 7000);
	struct qps_stats st;
	uint8_t p[64], got[64];
	bool asym = qps_alock_asym_available();
	int k, i;

	t_wire_name(g_wire, sizeof(g_wire), "alock-flush");
	T_EQ_FATAL(mkctx("198.18.0.1", true, 200, &a), 0);
	T_EQ_FATAL(mkctx("198.18.0.2", false, 200, &b), 0);
	EQ(t_ctx_stats(a).thread_single, asym);
	EQ(t_ctx_stats(b).thread_single, 0);
	tx = t_ep_bound(a, "198.18.0.1", 7001, 2000);
	rx = t_ep_bound(b, "198.18.0.2", 7000, 2000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(tx);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rx);
	for (k = 0; k < 3; k++) {
		for (i = 0; i < 4; i++) {
			memset(p, k * 4 + i, sizeof(p));
			EQ(qps_sendto(tx, p, sizeof(p), QPS_MSG_MORE,
				      (struct sockaddr *)&to, sizeof(to)),
			   64);
		}
		for (i = 0; i < 4; i++) {
			EQ(qps_recv(rx, got, sizeof(got), 0), 64);
			EQ(got[0], k * 4 + i);
		}
	}
	st = t_ctx_stats(a);
	EQ(st.tx_flush_timer, 3);
	EQ(st.tx_doorbells, 3);
	if (asym)
		EQ(st.tx_lock_barriers, 3);
	else
		EQ(st.tx_lock_barriers, 0);
	EQ(t_ctx_stats(b).tx_lock_barriers, 0);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}

static void test_ctx_attr(void)
{
	struct qps_ctx_attr at = t_emu_attr("alock-attr", "198.18.0.1");
	struct qps_ctx *c = NULL;

	at.comp_mask |= QPS_CTX_ATTR_THREAD_MODE;
	at.thread_mode = 2;
	EQ(qps_ctx_create(&at, &c), -EINVAL);
	CU_ASSERT_PTR_NULL(c);

	/* The environment applies when the attribute is not given. */
	at.comp_mask &= ~(uint64_t)QPS_CTX_ATTR_THREAD_MODE;
	setenv("QPS_THREAD_MODE", "singel", 1);
	EQ(qps_ctx_create(&at, &c), -EINVAL);
	setenv("QPS_THREAD_MODE", "single", 1);
	T_EQ_FATAL(qps_ctx_create(&at, &c), 0);
	EQ(t_ctx_stats(c).thread_single, qps_alock_asym_available());
	EQ(qps_ctx_destroy(c), 0);
	/* ...and the attribute over the environment. */
	at.comp_mask |= QPS_CTX_ATTR_THREAD_MODE;
	at.thread_mode = QPS_THREAD_MODE_MULTI;
	T_EQ_FATAL(qps_ctx_create(&at, &c), 0);
	EQ(t_ctx_stats(c).thread_single, 0);
	EQ(qps_ctx_destroy(c), 0);
	unsetenv("QPS_THREAD_MODE");
}

static CU_TestInfo tests[] = {
	{ "without membarrier: one mutex", test_fallback_is_mutex },
	{ "app side: no read-modify-write", test_app_side_plain },
	{ "app and library threads, one counter", test_exclusion },
	{ "app queues behind a library thread", test_app_queues_behind_lib },
	{ "single-threaded context: flusher rings, barriers counted",
	  test_ctx_flusher },
	{ "thread_mode: attribute and environment", test_ctx_attr },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("alock", tests);
}
