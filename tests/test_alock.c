// SPDX-License-Identifier: MIT
/*
 * Suite "alock": the send queues' two-sided lock (src/alock.h), its
 * biased form (multi-threaded contexts) and the single-threaded context. Worker threads report through
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
#include <unistd.h>

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

	EQ(qps_alock_init(&l, QPS_ALOCK_MUTEX), QPS_ALOCK_MUTEX);
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
	T_EQ_FATAL(qps_alock_init(&l, QPS_ALOCK_SINGLE), QPS_ALOCK_SINGLE);
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
	uint64_t rounds;	/* the other thread's sections */
	bool as_app;		/* it takes the application side */
	unsigned int gap_us;	/* and sleeps this long between them */
	uint64_t fast;		/* main thread's sections on the fast side */
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

	for (n = 1; n <= x->rounds; n++) {
		if (x->as_app)
			qps_alock_lock(&x->l);
		else
			qps_alock_lock_lib(&x->l);
		excl_section(x);
		if (x->as_app)
			qps_alock_unlock(&x->l);
		else
			qps_alock_unlock_lib(&x->l);
		__atomic_store_n(&x->lib_rounds, n, __ATOMIC_RELAXED);
		if (x->gap_us)
			usleep(x->gap_us);
	}
	return NULL;
}

/* The main thread's sections against the other thread's, for as long as
 * that one runs, so that every one of its sections meets the main's. */
static struct excl *excl_run(enum qps_alock_mode mode, uint64_t rounds,
			     bool as_app, unsigned int gap_us)
{
	struct excl *x = calloc(1, sizeof(*x));
	pthread_t t;
	uint64_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(x);
	T_EQ_FATAL(qps_alock_init(&x->l, mode), mode);
	x->rounds = rounds;
	x->as_app = as_app;
	x->gap_us = gap_us;
	T_EQ_FATAL(pthread_create(&t, NULL, excl_lib, x), 0);
	for (i = 0; i < T_APP_ROUNDS ||
		    __atomic_load_n(&x->lib_rounds, __ATOMIC_RELAXED) <
			    rounds; i++) {
		qps_alock_lock(&x->l);
		x->fast += !x->l.app_mutex;
		excl_section(x);
		qps_alock_unlock(&x->l);
	}
	pthread_join(t, NULL);
	EQ(x->count, i + rounds);
	EQ(x->torn, 0);
	EQ(x->a, x->count);
	EQ(__atomic_load_n(&x->l.m.word, __ATOMIC_RELAXED), 0);
	return x;
}

static void test_exclusion(void)
{
	struct excl *x;

	if (!asym_or_skip("exclusion"))
		return;
	x = excl_run(QPS_ALOCK_SINGLE, T_LIB_ROUNDS, false, 0);
	GE(__atomic_load_n(&x->l.lib_entries, __ATOMIC_RELAXED), T_LIB_ROUNDS);
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
	T_EQ_FATAL(qps_alock_init(&l, QPS_ALOCK_SINGLE), QPS_ALOCK_SINGLE);
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

/* --- biased (multi-threaded contexts) ------------------------------------ */

/* One entry; returns whether it took the fast side (the mutex free). */
static bool biased_entry(struct qps_alock *l)
{
	bool fast;

	qps_alock_lock(l);
	fast = __atomic_load_n(&l->m.word, __ATOMIC_RELAXED) == 0;
	qps_alock_unlock(l);
	return fast;
}

/* Entries until the first fast one, at most @max. */
static uint32_t biased_until_fast(struct qps_alock *l, uint32_t max)
{
	uint32_t n = 1;

	while (!biased_entry(l) && n < max)
		n++;
	return n;
}

/*
 * A biased lock is a mutex for its first run, then leans to the thread of
 * that run: no atomic instruction, no barrier. Another thread closes it
 * (one barrier) and takes the mutex; the owner gets it back after a run
 * twice as long. The flusher's entry closes it too, but does not make the
 * next run longer.
 */
static void test_biased_runs(void)
{
	struct qps_alock l;
	struct queued q = { .l = &l };
	pthread_t t;

	if (!asym_or_skip("biased"))
		return;
	T_EQ_FATAL(qps_alock_init(&l, QPS_ALOCK_BIASED), QPS_ALOCK_BIASED);
	CU_ASSERT(!qps_alock_biased(&l));
	/* The run's last entry opens the fast side for the next one. */
	EQ(biased_until_fast(&l, 10 * QPS_ALOCK_BIAS_RUN),
	   QPS_ALOCK_BIAS_RUN + 1);
	EQ(__atomic_load_n(&l.owner, __ATOMIC_RELAXED), qps_thread_id());
	CU_ASSERT(qps_alock_biased(&l));
	qps_alock_lock(&l);
	EQ(__atomic_load_n(&l.app_in, __ATOMIC_RELAXED), 1);
	CU_ASSERT(!l.app_mutex);
	qps_alock_unlock(&l);
	EQ(__atomic_load_n(&l.app_in, __ATOMIC_RELAXED), 0);
	EQ(__atomic_load_n(&l.lib_entries, __ATOMIC_RELAXED), 0);

	/* Another application thread: on the mutex, after one barrier. */
	T_EQ_FATAL(pthread_create(&t, NULL, queued_app, &q), 0);
	pthread_join(t, NULL);
	EQ(__atomic_load_n(&q.in, __ATOMIC_ACQUIRE), 1);
	CU_ASSERT(q.via_mutex);
	EQ(__atomic_load_n(&l.lib_entries, __ATOMIC_RELAXED), 1);
	CU_ASSERT(!qps_alock_biased(&l));
	EQ(__atomic_load_n(&l.owner, __ATOMIC_RELAXED), qps_thread_id());
	EQ(biased_until_fast(&l, 10 * QPS_ALOCK_BIAS_RUN),
	   2 * QPS_ALOCK_BIAS_RUN + 1);

	/* The flusher's side closes it too, and leaves it closed. */
	qps_alock_lock_lib(&l);
	qps_alock_unlock_lib(&l);
	EQ(__atomic_load_n(&l.lib_entries, __ATOMIC_RELAXED), 2);
	CU_ASSERT(!qps_alock_biased(&l));
	EQ(biased_until_fast(&l, 10 * QPS_ALOCK_BIAS_RUN),
	   2 * QPS_ALOCK_BIAS_RUN + 1);
	/* Once closed, the flusher pays no barrier. */
	qps_alock_lock_lib(&l);
	qps_alock_unlock_lib(&l);
	qps_alock_lock_lib(&l);
	qps_alock_unlock_lib(&l);
	EQ(__atomic_load_n(&l.lib_entries, __ATOMIC_RELAXED), 3);
	EQ(__atomic_load_n(&l.m.word, __ATOMIC_RELAXED), 0);
}

/* The run grows to QPS_ALOCK_BIAS_RUN_MAX and no further. */
static void test_biased_run_cap(void)
{
	struct qps_alock l;
	struct queued q = { .l = &l };
	uint32_t want = QPS_ALOCK_BIAS_RUN, k;
	pthread_t t;

	if (!asym_or_skip("biased cap"))
		return;
	T_EQ_FATAL(qps_alock_init(&l, QPS_ALOCK_BIASED), QPS_ALOCK_BIASED);
	for (k = 0; k < 10; k++) {
		EQ(biased_until_fast(&l, 2 * QPS_ALOCK_BIAS_RUN_MAX), want + 1);
		T_EQ_FATAL(pthread_create(&t, NULL, queued_app, &q), 0);
		pthread_join(t, NULL);
		if (want < QPS_ALOCK_BIAS_RUN_MAX)
			want *= 2;
	}
	EQ(want, QPS_ALOCK_BIAS_RUN_MAX);
	EQ(__atomic_load_n(&l.lib_entries, __ATOMIC_RELAXED), 10);
}

/*
 * The owner's sections against another application thread's, which come
 * every millisecond: between them the owner wins the lock back (a run of
 * 2048 takes well under that, sanitizers included), so both the closing
 * and the fast side are exercised many times, on one plain counter.
 */
static void test_biased_exclusion(void)
{
	struct excl *x;

	if (!asym_or_skip("biased exclusion"))
		return;
	x = excl_run(QPS_ALOCK_BIASED, 600, true, 1000);
	GE(x->fast, 1);
	GE(__atomic_load_n(&x->l.lib_entries, __ATOMIC_RELAXED), 2);
	printf("\n    %llu fast sections, %llu barriers ",
	       (unsigned long long)x->fast,
	       (unsigned long long)__atomic_load_n(&x->l.lib_entries,
						   __ATOMIC_RELAXED));
	free(x);
	/* Two threads that never pause: whoever owns it, nothing is lost. */
	x = excl_run(QPS_ALOCK_BIASED, T_LIB_ROUNDS, true, 0);
	free(x);
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
	at.thread_mode = QPS_THREAD_MODE_MUTEX + 1;
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

/* Sends from one thread, then one from another, on a context's one send
 * queue; returns the stats after each. */
struct biased_ctx {
	struct qps_ep *tx;
	int ret;
};

static void *biased_ctx_other(void *arg)
{
	struct biased_ctx *o = arg;
	uint8_t p[64] = { 0 };

	o->ret = qps_send(o->tx, p, sizeof(p), 0);
	return NULL;
}

static void biased_ctx_run(const char *mode, struct qps_stats *one,
			   struct qps_stats *two)
{
	struct qps_ctx_attr at = t_emu_attr(g_wire, "198.18.0.1");
	struct qps_ctx_attr br = t_emu_attr(g_wire, "198.18.0.2");
	struct qps_ctx *a = NULL, *b = NULL;
	struct sockaddr_in to = t_sin("198.18.0.2", 7000);
	struct biased_ctx o = { .ret = -1 };
	struct qps_ep *rx;
	uint8_t p[64], got[64];
	pthread_t t;
	int k, i;

	if (mode)
		setenv("QPS_THREAD_MODE", mode, 1);
	at.comp_mask |= QPS_CTX_ATTR_NUM_TXQ;
	at.num_txq = 1;
	T_EQ_FATAL(qps_ctx_create(&at, &a), 0);
	unsetenv("QPS_THREAD_MODE");
	T_EQ_FATAL(qps_ctx_create(&br, &b), 0);
	o.tx = t_ep_bound(a, "198.18.0.1", 7001, 2000);
	rx = t_ep_bound(b, "198.18.0.2", 7000, 2000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o.tx);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rx);
	T_EQ_FATAL(qps_connect(o.tx, (struct sockaddr *)&to, sizeof(to)), 0);
	/* Past the first run, received as sent. */
	for (k = 0; k < 2 * (int)QPS_ALOCK_BIAS_RUN / 64; k++) {
		for (i = 0; i < 64; i++) {
			memset(p, k + i, sizeof(p));
			EQ(qps_send(o.tx, p, sizeof(p), 0), 64);
		}
		for (i = 0; i < 64; i++) {
			EQ(qps_recv(rx, got, sizeof(got), 0), 64);
			EQ(got[0], (uint8_t)(k + i));
		}
	}
	*one = t_ctx_stats(a);
	T_EQ_FATAL(pthread_create(&t, NULL, biased_ctx_other, &o), 0);
	pthread_join(t, NULL);
	EQ(o.ret, 64);
	EQ(qps_recv(rx, got, sizeof(got), 0), 64);
	*two = t_ctx_stats(a);
	EQ(qps_ctx_destroy(a), 0);
	EQ(qps_ctx_destroy(b), 0);
}

/*
 * A multi-threaded context's send queue leans to the thread that sends
 * alone on it, and stops leaning at another thread's send, which pays
 * one barrier; QPS_THREAD_MODE=mutex never leans.
 */
static void test_ctx_biased(void)
{
	bool asym = qps_alock_asym_available();
	struct qps_stats one, two;

	t_wire_name(g_wire, sizeof(g_wire), "alock-bias");
	biased_ctx_run(NULL, &one, &two);
	EQ(one.thread_single, 0);
	EQ(one.tx_lock_biased, asym);
	EQ(two.tx_lock_biased, 0);
	/* The flusher may have closed it first: a sender preempted with a
	 * burst open. */
	if (asym)
		GE(two.tx_lock_barriers, one.tx_lock_barriers + 1);
	EQ(two.tx_packets, one.tx_packets + 1);

	biased_ctx_run("mutex", &one, &two);
	EQ(one.tx_lock_biased, 0);
	EQ(two.tx_lock_barriers, 0);
}

static CU_TestInfo tests[] = {
	{ "without membarrier: one mutex", test_fallback_is_mutex },
	{ "app side: no read-modify-write", test_app_side_plain },
	{ "app and library threads, one counter", test_exclusion },
	{ "app queues behind a library thread", test_app_queues_behind_lib },
	{ "biased: runs, closing, reopening", test_biased_runs },
	{ "biased: the run's cap", test_biased_run_cap },
	{ "biased: owner and another thread, one counter",
	  test_biased_exclusion },
	{ "single-threaded context: flusher rings, barriers counted",
	  test_ctx_flusher },
	{ "thread_mode: attribute and environment", test_ctx_attr },
	{ "multi-threaded context: a queue leans to its one sender",
	  test_ctx_biased },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("alock", tests);
}
