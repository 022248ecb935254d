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
#include <signal.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

/* --- forked children: nested sends, membarrier refused ------------------- */

/*
 * Two application threads send on one context's one send queue (A, which
 * the lock leans to, and B), a third receives. In the nested run a fourth
 * thread signals A without pause, and A's handler sends too, on the same
 * endpoint, whatever A is doing. Every datagram is checked: sent or
 * refused-and-counted, and the receiver gets exactly the sent ones, once,
 * whole. The child reports by exit code; a hang (a nested entry that
 * deadlocks) is its parent's timeout.
 */
#define NS_A		60000u
#define NS_B		20000u
#define NS_H_MAX	200000u
#define NS_WINDOW	48u
#define NS_MAGIC	0x51707371u

struct ns_dgram {
	uint32_t magic;
	uint32_t src;		/* 0 A, 1 B, 2 A's handler */
	uint32_t seq;
	uint32_t check;
	uint8_t fill[48];
};

struct ns_run {
	struct qps_ep *tx, *rx;
	pthread_t a;
	uint32_t attempted[3], sent[3], refused[3], herr;
	uint32_t sent_total, got_total;	/* atomic */
	uint32_t bad, dup;		/* receiver's */
	int phase, done, kill_stop;	/* atomic */
	int err[2];
	uint8_t seen[3][NS_H_MAX];
	uint8_t hsent[NS_H_MAX];
};

static struct ns_run *g_ns;

static void ns_fill(struct ns_dgram *d, uint32_t src, uint32_t seq)
{
	size_t i;

	d->magic = NS_MAGIC;
	d->src = src;
	d->seq = seq;
	d->check = NS_MAGIC ^ (src << 24) ^ seq;
	for (i = 0; i < sizeof(d->fill); i++)
		d->fill[i] = (uint8_t)(src * 31 + seq + i);
}

static bool ns_whole(const struct ns_dgram *d)
{
	size_t i;

	if (d->magic != NS_MAGIC || d->src > 2 || d->seq >= NS_H_MAX ||
	    d->check != (NS_MAGIC ^ (d->src << 24) ^ d->seq))
		return false;
	for (i = 0; i < sizeof(d->fill); i++)
		if (d->fill[i] != (uint8_t)(d->src * 31 + d->seq + i))
			return false;
	return true;
}

/* Runs on A only (the signal is sent to A): its counters are its own. */
static void ns_handler(int sig)
{
	struct ns_run *r = g_ns;
	struct ns_dgram d;
	uint32_t seq = r->attempted[2];
	ssize_t ret;

	(void)sig;
	/* Paced as the threads are (it cannot wait: it skips). */
	if (seq >= NS_H_MAX ||
	    __atomic_load_n(&r->sent_total, __ATOMIC_RELAXED) -
	    __atomic_load_n(&r->got_total, __ATOMIC_ACQUIRE) > NS_WINDOW)
		return;
	r->attempted[2]++;
	ns_fill(&d, 2, seq);
	ret = qps_send(r->tx, &d, sizeof(d), QPS_MSG_DONTWAIT);
	if (ret == (ssize_t)sizeof(d)) {
		r->hsent[seq] = 1;
		r->sent[2]++;
		__atomic_add_fetch(&r->sent_total, 1, __ATOMIC_RELEASE);
	} else if (ret == -EWOULDBLOCK) {
		r->refused[2]++;
	} else {
		r->herr++;
	}
}

static int ns_send_all(struct ns_run *r, uint32_t src, uint32_t from,
		       uint32_t to)
{
	struct ns_dgram d;
	uint32_t seq = from;
	ssize_t ret;

	uint64_t end;

	while (seq < to) {
		/* Paced to the receiver, which a lost datagram stalls: the
		 * end's count then says what was lost. Acquire: pairs with
		 * the receiver's release. */
		end = t_now_ms() + 2000;
		while (__atomic_load_n(&r->sent_total, __ATOMIC_RELAXED) -
		       __atomic_load_n(&r->got_total, __ATOMIC_ACQUIRE) >
		       NS_WINDOW)
			if (t_now_ms() > end)
				return -ETIMEDOUT;
			else
				sched_yield();
		ns_fill(&d, src, seq);
		ret = qps_send(r->tx, &d, sizeof(d), 0);
		if (ret == -EINTR)
			continue;
		r->attempted[src]++;
		if (ret != (ssize_t)sizeof(d))
			return (int)ret;
		r->sent[src]++;
		__atomic_add_fetch(&r->sent_total, 1, __ATOMIC_RELEASE);
		seq++;
	}
	return 0;
}

static void *ns_a(void *arg)
{
	struct ns_run *r = arg;

	/* Alone first: the lock leans to A. */
	r->err[0] = ns_send_all(r, 0, 0, 2 * QPS_ALOCK_BIAS_RUN);
	__atomic_store_n(&r->phase, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&r->phase, __ATOMIC_ACQUIRE) < 2)
		sched_yield();
	if (!r->err[0])
		r->err[0] = ns_send_all(r, 0, 2 * QPS_ALOCK_BIAS_RUN, NS_A);
	return NULL;
}

static void *ns_b(void *arg)
{
	struct ns_run *r = arg;

	r->err[1] = ns_send_all(r, 1, 0, NS_B);
	return NULL;
}

static void *ns_kill(void *arg)
{
	struct ns_run *r = arg;
	volatile unsigned int i;

	while (!__atomic_load_n(&r->kill_stop, __ATOMIC_ACQUIRE)) {
		pthread_kill(r->a, SIGUSR1);
		for (i = 0; i < 200; i++)
			;
	}
	return NULL;
}

static void *ns_recv(void *arg)
{
	struct ns_run *r = arg;
	struct ns_dgram d;
	ssize_t ret;

	for (;;) {
		ret = qps_recv(r->rx, &d, sizeof(d), 0);
		if (ret == -EAGAIN || ret == -ETIMEDOUT || ret == -EINTR) {
			if (__atomic_load_n(&r->done, __ATOMIC_ACQUIRE))
				break;
			continue;
		}
		if (ret != (ssize_t)sizeof(d) || !ns_whole(&d)) {
			r->bad++;
			continue;
		}
		if (r->seen[d.src][d.seq]++)
			r->dup++;
		/* Release: pairs with the senders' acquire. */
		__atomic_add_fetch(&r->got_total, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* membarrier answers EPERM, in every thread of the process. */
static int ns_seccomp(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(f) / sizeof(f[0]),
		.filter = f,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		    SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
		return -1;
	return syscall(SYS_membarrier, 0, 0, 0) < 0 && errno == EPERM ? 0 : -1;
}

enum { NS_NO_FILTER, NS_FILTER_BEFORE, NS_FILTER_AFTER };

/* The child's run; its exit code. */
static int ns_child(bool nested, int filter)
{
	struct qps_ctx_attr at, br;
	struct qps_ctx *a = NULL, *b = NULL;
	struct sockaddr_in to = t_sin("198.18.0.2", 7000);
	struct sockaddr_in fr = t_sin("198.18.0.1", 7001);
	struct sigaction sa;
	struct qps_stats st;
	struct ns_run *r;
	pthread_t tb, tk, tr;
	int tmo = 300, code = 0;
	uint32_t s, q, lost = 0, extra = 0;

	t_wire_name(g_wire, sizeof(g_wire), "alock-ns");
	at = t_emu_attr(g_wire, "198.18.0.1");
	br = t_emu_attr(g_wire, "198.18.0.2");
	r = calloc(1, sizeof(*r));
	if (!r)
		return 10;
	g_ns = r;
	if (filter == NS_FILTER_BEFORE && ns_seccomp() < 0)
		return 11;
	at.comp_mask |= QPS_CTX_ATTR_NUM_TXQ | QPS_CTX_ATTR_THREAD_MODE;
	at.num_txq = 1;
	at.thread_mode = QPS_THREAD_MODE_MULTI;
	if (qps_ctx_create(&at, &a) || qps_ctx_create(&br, &b))
		return 12;
	if (qps_ep_create(a, QPS_EP_DGRAM, &r->tx) ||
	    qps_ep_create(b, QPS_EP_DGRAM, &r->rx) ||
	    qps_bind(r->tx, (struct sockaddr *)&fr, sizeof(fr)) ||
	    qps_bind(r->rx, (struct sockaddr *)&to, sizeof(to)) ||
	    qps_setopt(r->rx, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)) ||
	    qps_connect(r->tx, (struct sockaddr *)&to, sizeof(to)))
		return 13;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ns_handler;
	sigemptyset(&sa.sa_mask);
	if (nested && sigaction(SIGUSR1, &sa, NULL) < 0)
		return 14;
	if (pthread_create(&tr, NULL, ns_recv, r) ||
	    pthread_create(&r->a, NULL, ns_a, r))
		return 15;
	while (__atomic_load_n(&r->phase, __ATOMIC_ACQUIRE) < 1)
		sched_yield();
	if (filter == NS_FILTER_AFTER && ns_seccomp() < 0)
		return 16;
	if (pthread_create(&tb, NULL, ns_b, r) ||
	    (nested && pthread_create(&tk, NULL, ns_kill, r)))
		return 17;
	__atomic_store_n(&r->phase, 2, __ATOMIC_RELEASE);
	pthread_join(tb, NULL);
	pthread_join(r->a, NULL);
	if (nested) {
		__atomic_store_n(&r->kill_stop, 1, __ATOMIC_RELEASE);
		pthread_join(tk, NULL);
	}
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	pthread_join(tr, NULL);
	for (s = 0; s < 3; s++)
		for (q = 0; q < NS_H_MAX; q++) {
			bool sent = s == 0 ? q < r->sent[0] :
				    s == 1 ? q < r->sent[1] : r->hsent[q];

			if (sent && !r->seen[s][q])
				lost++;
			else if (!sent && r->seen[s][q])
				extra++;
		}
	st = t_ctx_stats(b);
	fprintf(stderr, "ns: rx_packets %llu queue_full %llu dev_rx_drops "
		"%llu\n", (unsigned long long)st.rx_packets,
		(unsigned long long)st.rx_queue_full,
		(unsigned long long)st.dev_rx_drops);
	st = t_ctx_stats(a);
	fprintf(stderr, "ns: tx_packets %llu tx_errors %llu dev_tx_drops "
		"%llu\n", (unsigned long long)st.tx_packets,
		(unsigned long long)st.tx_errors,
		(unsigned long long)st.dev_tx_drops);
	fprintf(stderr, "ns: A %u/%u B %u/%u handler: %u sent %u refused "
		"%u failed of %u; tx_nested %llu; lost %u extra %u dup %u "
		"bad %u\n", r->sent[0], NS_A, r->sent[1], NS_B, r->sent[2],
		r->refused[2], r->herr, r->attempted[2],
		(unsigned long long)st.tx_nested, lost, extra, r->dup, r->bad);
	if (r->err[0] || r->err[1] || r->herr)
		code = 20;
	else if (r->sent[0] != NS_A || r->sent[1] != NS_B ||
		 r->sent[2] + r->refused[2] != r->attempted[2])
		code = 21;
	else if (lost || extra || r->dup || r->bad)
		code = 22;
	else if (nested && (!r->attempted[2] || !st.tx_nested))
		code = 23;
	else if (st.tx_nested > r->refused[2])
		code = 24;
	qps_ctx_destroy(a);
	qps_ctx_destroy(b);
	return code;
}

/* Runs ns_child in a child, its stderr in @log (or inherited: NULL). */
static int ns_fork(bool nested, int filter, char *log, size_t loglen)
{
	char path[] = "/tmp/qps-alock-XXXXXX";
	int fd = -1, pid, st;
	ssize_t n;

	if (log) {
		fd = mkstemp(path);
		CU_ASSERT_FATAL(fd >= 0);
		unlink(path);
	}
	fflush(NULL);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (!pid) {
		if (fd >= 0)
			dup2(fd, 2);
		_exit(ns_child(nested, filter));
	}
	st = t_wait_child(pid, 120000);
	if (st < 0 || st >= 128)
		t_stat_reap(pid);
	if (log) {
		n = pread(fd, log, loglen - 1, 0);
		log[n > 0 ? n : 0] = '\0';
		fputs(log, stderr);
		close(fd);
	}
	return st;
}

/*
 * A signal handler sends while its thread is inside a send, beside a
 * second sending thread: no section runs beside another (no datagram
 * lost, doubled or torn, no deadlock), and the nested sends are refused
 * with -EWOULDBLOCK and counted in tx_nested.
 */
static void test_nested_send(void)
{
	EQ(ns_fork(true, NS_NO_FILTER, NULL, 0), 0);
}

/*
 * membarrier refused by a seccomp filter, installed before the context's
 * creation (its locks are plain mutexes, said once) and after it, once A
 * owns the lock (the first closing goes over to fenced entries, said
 * once): both threads' datagrams all arrive, once, whole.
 */
static void test_membarrier_refused(void)
{
	char log[4096];

	if (!asym_or_skip("membarrier refused"))
		return;
	if (t_under_valgrind()) {
		printf("skipped under valgrind: it does not model membarrier "
		       "under a seccomp filter ");
		return;
	}
	EQ(ns_fork(false, NS_FILTER_BEFORE, log, sizeof(log)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "membarrier refused"));
	EQ(ns_fork(false, NS_FILTER_AFTER, log, sizeof(log)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "membarrier failed after start"));
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
	{ "a handler sends inside its thread's send", test_nested_send },
	{ "membarrier refused before and after start",
	  test_membarrier_refused },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("alock", tests);
}
