// SPDX-License-Identifier: MIT
/*
 * qps_bench prio [--json] [--ms N] [--rounds N] [--depth N] [--burst N]
 * [--linger NS] [--pin] [--each] [--latency]:
 * messages per second through one "QP" (a transmitter posting to a null
 * sink, so the queues are what is measured) for 1 and 2 producer threads,
 * side by side in one run:
 *   qpsock   the priority bands (src/prio_bands.c)
 *   mutex    the same three bands (arrays) and bypass under one mutex
 *   ck_ring  the same owner protocol, bypass and lingering over three
 *            Concurrency Kit MPMC rings (ck_ring_enqueue_mpmc /
 *            ck_ring_dequeue_mpmc)
 * All three reach the sink through one function pointer. Every producer
 * cycles through the 16 priorities. Rounds are interleaved and the median
 * of each case is reported, with the producers' share of a CPU; the last
 * line gives the median of the per-round ratios. Under a real-time policy
 * with --pin (chrt -f 1) the 2 producers really run side by side.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef QPS_HAVE_CK
#include <ck_ring.h>
#endif

#include "prio_bands.h"
#include "qps_bench.h"

#define BP_MAX_PRODUCERS 2
#define BP_SEND_BATCH 64	/* sends between looks at the stop flag */

/* The null sink: counts what the transmitter posts. Only the transmitter
 * (the owner, or the mutex holder) writes it. */
#define BP_LAT_MAX (1u << 20)	/* latency samples kept per measurement */
#define BP_LAT_EVERY 64		/* --latency: one item in this many */

struct bp_sink {
	uint64_t posted;
	uint64_t *lat;		/* --latency: ns from send to post */
	uint32_t nlat;
};

static int64_t bp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* An odd item carries its send time (ns << 1 | 1), an even one nothing. */
static int bp_post(void *arg, void **items, unsigned int n, bool more)
{
	struct bp_sink *s = arg;
	int64_t now = 0;
	uintptr_t v;
	unsigned int i;

	(void)more;
	s->posted += n;
	if (!s->lat)
		return (int)n;
	for (i = 0; i < n; i++) {
		v = (uintptr_t)items[i];
		if (!(v & 1) || s->nlat == BP_LAT_MAX)
			continue;
		if (!now)
			now = bp_now_ns();
		s->lat[s->nlat++] = (uint64_t)(now - (int64_t)(v >> 1));
	}
	return (int)n;
}

/*
 * Every implementation reaches the sink through this pointer, as the
 * bands reach the device through their post callback: a send path's post
 * is a real function, so the peers must not get it inlined for free.
 */
static int (*volatile bp_post_fn)(void *arg, void **items, unsigned int n,
				  bool more) = bp_post;

struct bp_impl {
	const char *name;
	int (*create)(uint32_t depth, uint32_t burst, struct bp_sink *s,
		      void **q);
	int (*send)(void *q, void *item, unsigned int prio);
	int (*flush)(void *q);
	void (*destroy)(void *q);
};

/* ---- qpsock ------------------------------------------------------- */

/* --linger N: qps_prio_cfg.linger_ns (0 = the library's default). */
static int32_t bp_linger_ns;

static int bp_qps_create(uint32_t depth, uint32_t burst, struct bp_sink *s,
			 void **q)
{
	struct qps_prio_cfg cfg = {
		.post = bp_post,
		.arg = s,
		.depth = { depth, depth, depth },
		.burst = burst,
		.linger_ns = bp_linger_ns,
	};

	return qps_prio_create(&cfg, (struct qps_prio **)q);
}

static int bp_qps_send(void *q, void *item, unsigned int prio)
{
	return qps_prio_enqueue(q, item, prio, 64);
}

static int bp_qps_flush(void *q)
{
	return qps_prio_kick(q);
}

static void bp_qps_destroy(void *q)
{
	qps_prio_destroy(q);
}

/* ---- one mutex around three array bands ---------------------------- */

struct bp_fifo {
	void **slot;
	uint32_t head, tail, mask;
};

struct bp_mtx {
	pthread_mutex_t lock;
	struct bp_fifo band[QPS_PRIO_BANDS];
	struct bp_sink *sink;
	uint32_t burst;
};

static int bp_mtx_create(uint32_t depth, uint32_t burst, struct bp_sink *s,
			 void **q)
{
	struct bp_mtx *m = calloc(1, sizeof(*m));
	int i;

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->sink = s;
	m->burst = burst;
	for (i = 0; i < QPS_PRIO_BANDS; i++) {
		m->band[i].slot = calloc(depth, sizeof(void *));
		m->band[i].mask = depth - 1;
		if (!m->band[i].slot)
			return -ENOMEM;
	}
	*q = m;
	return 0;
}

/* Under the lock: post everything queued, band 0 first, in bursts. */
static void bp_mtx_drain(struct bp_mtx *m)
{
	void *items[QPS_PRIO_BURST_MAX];
	struct bp_fifo *f;
	uint32_t n;
	int i;

	for (i = 0; i < QPS_PRIO_BANDS; i++) {
		f = &m->band[i];
		while (f->head != f->tail) {
			for (n = 0; n < m->burst && f->head != f->tail; n++)
				items[n] = f->slot[f->head++ & f->mask];
			bp_post_fn(m->sink, items, n, f->head != f->tail);
		}
	}
}

static int bp_mtx_send(void *q, void *item, unsigned int prio)
{
	struct bp_mtx *m = q;
	struct bp_fifo *f = &m->band[qps_prio_band(prio)];
	int i, ret = 0;

	pthread_mutex_lock(&m->lock);
	for (i = 0; i < QPS_PRIO_BANDS; i++)
		if (m->band[i].head != m->band[i].tail)
			break;
	if (i == QPS_PRIO_BANDS) {
		bp_post_fn(m->sink, &item, 1, false);	/* bypass */
	} else if (f->tail - f->head > f->mask) {
		ret = -EAGAIN;
	} else {
		f->slot[f->tail++ & f->mask] = item;
		bp_mtx_drain(m);
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

static int bp_mtx_flush(void *q)
{
	struct bp_mtx *m = q;

	pthread_mutex_lock(&m->lock);
	bp_mtx_drain(m);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static void bp_mtx_destroy(void *q)
{
	struct bp_mtx *m = q;
	int i;

	for (i = 0; i < QPS_PRIO_BANDS; i++)
		free(m->band[i].slot);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* ---- ck_ring bands, same owner protocol as prio_bands.c ------------ */

#ifdef QPS_HAVE_CK
#define BP_OWNER 1u
#define BP_MISSED 2u

struct bp_ck {
	_Alignas(128) _Atomic uint32_t state;
	_Alignas(128) struct ck_ring ring[QPS_PRIO_BANDS];
	ck_ring_buffer_t *buf[QPS_PRIO_BANDS];
	struct bp_sink *sink;
	uint32_t burst;
};

/* The rings the lingering owner looks at (one bands object at a time). */
static struct bp_ck *bp_ck_cur;

static int bp_ck_create(uint32_t depth, uint32_t burst, struct bp_sink *s,
			void **q)
{
	struct bp_ck *c = aligned_alloc(128, sizeof(*c));
	int i;

	if (!c)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	c->sink = s;
	c->burst = burst;
	for (i = 0; i < QPS_PRIO_BANDS; i++) {
		ck_ring_init(&c->ring[i], depth);
		c->buf[i] = calloc(depth, sizeof(ck_ring_buffer_t));
		if (!c->buf[i])
			return -ENOMEM;
	}
	*q = c;
	return 0;
}

static bool bp_ck_empty(struct bp_ck *c)
{
	int i;

	for (i = 0; i < QPS_PRIO_BANDS; i++)
		if (ck_ring_size(&c->ring[i]))
			return false;
	return true;
}

static void bp_ck_drain(struct bp_ck *c)
{
	void *items[QPS_PRIO_BURST_MAX];
	uint32_t n;
	int i;

	for (i = 0; i < QPS_PRIO_BANDS; i++) {
		n = 0;
		while (n < c->burst &&
		       ck_ring_dequeue_mpmc(&c->ring[i], c->buf[i], &items[n]))
			n++;
		if (n) {
			bp_post_fn(c->sink, items, n, !bp_ck_empty(c));
			i = -1;		/* strict priority: rescan from band 0 */
		}
	}
}

/* The owner word as in prio_bands.c: acq_rel RMWs only. */
static bool bp_ck_try_own(struct bp_ck *c)
{
	uint32_t s = atomic_load_explicit(&c->state, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(&c->state, &s,
				s ? (s | BP_MISSED) : BP_OWNER,
				memory_order_acq_rel, memory_order_relaxed))
		;
	return s == 0;
}

static bool bp_ck_release(struct bp_ck *c)
{
	uint32_t s = BP_OWNER;

	if (atomic_compare_exchange_strong_explicit(&c->state, &s, 0,
						    memory_order_release,
						    memory_order_relaxed))
		return true;
	atomic_exchange_explicit(&c->state, BP_OWNER, memory_order_acquire);
	return false;
}

static double bp_clock(clockid_t id);

static inline void bp_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static double bp_ck_linger_ns(void)
{
	return bp_linger_ns ? bp_linger_ns : QPS_PRIO_DEFAULT_LINGER_NS;
}

/* prio_bands.c's lingering owner, over the ck rings: once contended,
 * look for more every QPS_PRIO_LINGER_POLL_NS for up to linger ns without
 * an item, QPS_PRIO_LINGER_BUDGET times that in all per run. */
static bool bp_ck_linger(double until)
{
	double now = bp_clock(CLOCK_MONOTONIC), look, idle_end;

	if (bp_linger_ns < 0 || now >= until)
		return false;
	idle_end = now + bp_ck_linger_ns() / 1e9;
	if (idle_end > until)
		idle_end = until;
	for (;;) {
		look = now + QPS_PRIO_LINGER_POLL_NS / 1e9;
		do {
			bp_relax();
			now = bp_clock(CLOCK_MONOTONIC);
		} while (now < look);
		if (!bp_ck_empty(bp_ck_cur))
			return true;
		if (now >= idle_end)
			return false;
	}
}

static void bp_ck_run(struct bp_ck *c, bool contended)
{
	double until = 0;

	bp_ck_cur = c;
	do {
		if (contended && !until)
			until = bp_clock(CLOCK_MONOTONIC) +
				QPS_PRIO_LINGER_BUDGET * bp_ck_linger_ns() /
				1e9;
		do
			bp_ck_drain(c);
		while (contended && bp_ck_linger(until));
		contended = true;
	} while (!bp_ck_release(c));
}

static int bp_ck_send(void *q, void *item, unsigned int prio)
{
	struct bp_ck *c = q;
	unsigned int band = qps_prio_band(prio);
	uint32_t idle = 0;

	if (atomic_load_explicit(&c->state, memory_order_relaxed) == 0 &&
	    atomic_compare_exchange_strong_explicit(&c->state, &idle, BP_OWNER,
						    memory_order_acquire,
						    memory_order_relaxed)) {
		if (bp_ck_empty(c)) {
			bp_post_fn(c->sink, &item, 1, false);
			if (bp_ck_release(c))
				return 0;
			bp_ck_run(c, true);
			return 0;
		}
		if (!ck_ring_enqueue_mpmc(&c->ring[band], c->buf[band], item)) {
			bp_ck_run(c, false);
			return -EAGAIN;
		}
		bp_ck_run(c, false);
		return 0;
	}
	if (!ck_ring_enqueue_mpmc(&c->ring[band], c->buf[band], item))
		return -EAGAIN;
	if (bp_ck_try_own(c))
		bp_ck_run(c, true);
	return 0;
}

static int bp_ck_flush(void *q)
{
	struct bp_ck *c = q;

	if (bp_ck_try_own(c))
		bp_ck_run(c, false);
	return 0;
}

static void bp_ck_destroy(void *q)
{
	struct bp_ck *c = q;
	int i;

	for (i = 0; i < QPS_PRIO_BANDS; i++)
		free(c->buf[i]);
	free(c);
}
#endif /* QPS_HAVE_CK */

static const struct bp_impl bp_impls[] = {
	{ "qpsock", bp_qps_create, bp_qps_send, bp_qps_flush, bp_qps_destroy },
	{ "mutex", bp_mtx_create, bp_mtx_send, bp_mtx_flush, bp_mtx_destroy },
#ifdef QPS_HAVE_CK
	{ "ck_ring", bp_ck_create, bp_ck_send, bp_ck_flush, bp_ck_destroy },
#endif
};
#define BP_NIMPL (sizeof(bp_impls) / sizeof(bp_impls[0]))

/* ---- driver ---------------------------------------------------------- */

struct bp_run {
	const struct bp_impl *impl;
	void *q;
	pthread_barrier_t start;
	_Atomic bool stop;
};

struct bp_thread {
	struct bp_run *run;
	unsigned int id;
	uint64_t sent;
	uint64_t full;
	double cpu;		/* seconds on a CPU while sending */
};

/* --latency: time sampled items from send to post. */
static bool bp_latency;

/* --pin: producer i on CPU i. Off by default: on a machine shared with
 * other work the scheduler places the threads better than a fixed pin. */
static bool bp_pin;

static double bp_clock(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *bp_producer(void *arg)
{
	struct bp_thread *t = arg;
	struct bp_run *r = t->run;
	int (*send)(void *, void *, unsigned int) = r->impl->send;
	uint64_t seq = 0;
	cpu_set_t set;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int i;

	if (bp_pin && ncpu > 1) {
		CPU_ZERO(&set);
		CPU_SET(t->id % (unsigned int)ncpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	pthread_barrier_wait(&r->start);
	t->cpu = bp_clock(CLOCK_THREAD_CPUTIME_ID);
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		for (i = 0; i < BP_SEND_BATCH; i++, seq++) {
			/* Any non-NULL pointer will do: the sink never
			 * dereferences it. */
			void *item = (void *)(uintptr_t)(seq * 2 + 2);

			if (bp_latency && seq % BP_LAT_EVERY == t->id)
				item = (void *)(uintptr_t)
				       ((uint64_t)bp_now_ns() << 1 | 1);

			/* Band full: the transmitter is behind (or was
			 * descheduled); give it the CPU. */
			while (send(r->q, item, (unsigned int)(seq & 15)) ==
			       -EAGAIN) {
				t->full++;
				sched_yield();
			}
		}
	}
	t->sent = seq;
	t->cpu = bp_clock(CLOCK_THREAD_CPUTIME_ID) - t->cpu;
	return NULL;
}

/*
 * Under a real-time policy (chrt -f 1 qps_bench prio --pin: the way to
 * see two producers really side by side on a machine shared with other
 * work) the driver runs one priority above the producers, or its wake-up
 * to stop them would wait for a core they never yield.
 */
static void bp_driver_prio(void)
{
	struct sched_param sp;
	int pol;

	if (pthread_getschedparam(pthread_self(), &pol, &sp) ||
	    (pol != SCHED_FIFO && pol != SCHED_RR) ||
	    sp.sched_priority >= sched_get_priority_max(pol))
		return;
	sp.sched_priority++;
	pthread_setschedparam(pthread_self(), pol, &sp);
}

/*
 * One measurement: messages per second, or -errno; *cpu receives the
 * producers' average share of a CPU. Below about 0.9 with 2 producers
 * they did not run side by side (other load), so the case measured time
 * slicing rather than contention.
 */
static int bp_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double bp_measure(const struct bp_impl *impl, unsigned int producers,
			 unsigned int ms, uint32_t depth, uint32_t burst,
			 double *cpu, double lat[2])
{
	struct bp_thread th[BP_MAX_PRODUCERS];
	pthread_t tid[BP_MAX_PRODUCERS];
	struct bp_sink sink = { 0 };
	struct timespec d = { ms / 1000, (long)(ms % 1000) * 1000000 };
	struct bp_run r = { .impl = impl };
	uint64_t sent = 0;
	double t0, t1, busy = 0;
	unsigned int i;
	int ret;

	lat[0] = lat[1] = 0;
	if (bp_latency) {
		sink.lat = malloc(BP_LAT_MAX * sizeof(*sink.lat));
		if (!sink.lat)
			return -ENOMEM;
	}
	ret = impl->create(depth, burst, &sink, &r.q);
	if (ret < 0) {
		free(sink.lat);
		return ret;
	}
	pthread_barrier_init(&r.start, NULL, producers + 1);
	for (i = 0; i < producers; i++) {
		th[i] = (struct bp_thread){ .run = &r, .id = i };
		pthread_create(&tid[i], NULL, bp_producer, &th[i]);
	}
	bp_driver_prio();
	pthread_barrier_wait(&r.start);
	t0 = bp_clock(CLOCK_MONOTONIC);
	nanosleep(&d, NULL);
	atomic_store(&r.stop, true);
	for (i = 0; i < producers; i++) {
		pthread_join(tid[i], NULL);
		sent += th[i].sent;
		busy += th[i].cpu;
	}
	t1 = bp_clock(CLOCK_MONOTONIC);
	*cpu = busy / producers / (t1 - t0);
	impl->flush(r.q);
	pthread_barrier_destroy(&r.start);
	impl->destroy(r.q);
	if (sink.nlat) {
		qsort(sink.lat, sink.nlat, sizeof(*sink.lat), bp_cmp_u64);
		lat[0] = (double)sink.lat[sink.nlat / 2];
		lat[1] = (double)sink.lat[(uint64_t)sink.nlat * 99 / 100];
	}
	free(sink.lat);
	if (sink.posted != sent) {
		fprintf(stderr, "prio: %s lost messages: sent %llu posted %llu\n",
			impl->name, (unsigned long long)sent,
			(unsigned long long)sink.posted);
		return -EIO;
	}
	return (double)sink.posted / (t1 - t0);
}

static int bp_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double bp_median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), bp_cmp);
	return v[n / 2];
}

static void bp_usage(FILE *f)
{
	fprintf(f, "usage: qps_bench prio [--json] [--ms N] [--rounds N] "
		   "[--depth N] [--burst N] [--linger NS] [--pin] [--each] "
		   "[--latency]\n");
}

#define BP_ROUNDS_MAX 16

/* --each: one JSON line per round and case. */
static void bp_print_round(unsigned int k, unsigned int i, unsigned int p,
			   double rate, double cpu)
{
	printf("{\"round\": %u, \"impl\": \"%s\", \"producers\": %u, "
	       "\"msgs_per_sec\": %.0f, \"cpu_per_producer\": %.2f}\n",
	       k, bp_impls[i].name, p + 1, rate, cpu);
}

/* Median over the rounds of qpsock / impl @i with @p producers, each
 * ratio taken within one round. */
static double bp_ratio(double res[][BP_MAX_PRODUCERS][BP_ROUNDS_MAX],
		       unsigned int i, unsigned int p, unsigned int rounds)
{
	double r[BP_ROUNDS_MAX];
	unsigned int k;

	for (k = 0; k < rounds; k++)
		r[k] = res[0][p][k] / res[i][p][k];
	return bp_median(r, rounds);
}

int qps_bench_prio(int argc, char **argv)
{
	double res[3][BP_MAX_PRODUCERS][BP_ROUNDS_MAX];
	double cpu[3][BP_MAX_PRODUCERS][BP_ROUNDS_MAX], tmp[BP_ROUNDS_MAX];
	double lat[3][BP_MAX_PRODUCERS][2][BP_ROUNDS_MAX], l2[2];
	unsigned int ms = 400, rounds = 3, p, k, i, ck = BP_NIMPL - 1;
	uint32_t depth = 1024, burst = QPS_PRIO_DEFAULT_BURST;
	bool json = false, each = false;
	double rate, share;
	int a;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--json")) {
			json = true;
		} else if (!strcmp(argv[a], "--pin")) {
			bp_pin = true;
		} else if (!strcmp(argv[a], "--each")) {
			each = true;
		} else if (!strcmp(argv[a], "--latency")) {
			bp_latency = true;
		} else if (a + 1 < argc && !strcmp(argv[a], "--ms")) {
			ms = (unsigned int)strtoul(argv[++a], NULL, 0);
		} else if (a + 1 < argc && !strcmp(argv[a], "--rounds")) {
			rounds = (unsigned int)strtoul(argv[++a], NULL, 0);
		} else if (a + 1 < argc && !strcmp(argv[a], "--depth")) {
			depth = (uint32_t)strtoul(argv[++a], NULL, 0);
		} else if (a + 1 < argc && !strcmp(argv[a], "--linger")) {
			bp_linger_ns = (int32_t)strtol(argv[++a], NULL, 0);
		} else if (a + 1 < argc && !strcmp(argv[a], "--burst")) {
			burst = (uint32_t)strtoul(argv[++a], NULL, 0);
		} else {
			bp_usage(stderr);
			return 2;
		}
	}
	if (!ms || ms > 5000 || !rounds || rounds > BP_ROUNDS_MAX ||
	    depth < 2 || (depth & (depth - 1)) || !burst ||
	    burst > QPS_PRIO_BURST_MAX) {
		bp_usage(stderr);
		return 2;
	}
#ifndef QPS_HAVE_CK
	fprintf(json ? stderr : stdout,
		"prio: built without libck-dev: no ck_ring peer\n");
#endif
	/* Interleaved rounds, so drift on a shared machine hits all cases. */
	for (k = 0; k < rounds; k++)
		for (p = 0; p < BP_MAX_PRODUCERS; p++)
			for (i = 0; i < BP_NIMPL; i++) {
				res[i][p][k] = bp_measure(&bp_impls[i], p + 1,
							  ms, depth, burst,
							  &cpu[i][p][k], l2);
				lat[i][p][0][k] = l2[0];
				lat[i][p][1][k] = l2[1];
				if (res[i][p][k] < 0)
					return 1;
				if (each)
					bp_print_round(k, i, p, res[i][p][k],
						       cpu[i][p][k]);
			}
	for (i = 0; i < BP_NIMPL; i++)
		for (p = 0; p < BP_MAX_PRODUCERS; p++) {
			memcpy(tmp, res[i][p], sizeof(tmp));
			rate = bp_median(tmp, rounds);
			memcpy(tmp, cpu[i][p], sizeof(tmp));
			share = bp_median(tmp, rounds);
			for (k = 0; k < 2; k++) {
				memcpy(tmp, lat[i][p][k], sizeof(tmp));
				l2[k] = bp_median(tmp, rounds);
			}
			if (json)
				printf("{\"impl\": \"%s\", \"producers\": %u, "
				       "\"msgs_per_sec\": %.0f, "
				       "\"cpu_per_producer\": %.2f",
				       bp_impls[i].name, p + 1, rate, share);
			else
				printf("%-8s producers %u  %12.0f msgs/s  "
				       "cpu/producer %.2f", bp_impls[i].name,
				       p + 1, rate, share);
			/* Median over the rounds of each round's p50, p99. */
			if (bp_latency)
				printf(json ? ", \"lat_p50_ns\": %.0f, "
					      "\"lat_p99_ns\": %.0f" :
					      "  send to post p50 %.0f ns, "
					      "p99 %.0f ns",
				       l2[0], l2[1]);
			printf(json ? "}\n" : "\n");
		}
	if (json) {
		printf("{\"ratios\": {\"qpsock_vs_mutex_1p\": %.2f, "
		       "\"qpsock_vs_mutex_2p\": %.2f",
		       bp_ratio(res, 1, 0, rounds), bp_ratio(res, 1, 1, rounds));
		if (BP_NIMPL > 2)
			printf(", \"qpsock_vs_ck_ring_1p\": %.2f, "
			       "\"qpsock_vs_ck_ring_2p\": %.2f",
			       bp_ratio(res, ck, 0, rounds),
			       bp_ratio(res, ck, 1, rounds));
		printf("}, \"ck_ring\": %s, \"ms\": %u, \"rounds\": %u, "
		       "\"depth\": %u, \"burst\": %u}\n",
		       BP_NIMPL > 2 ? "true" : "false", ms, rounds, depth,
		       burst);
	} else {
		printf("qpsock/mutex: 1p %.2fx, 2p %.2fx",
		       bp_ratio(res, 1, 0, rounds), bp_ratio(res, 1, 1, rounds));
		if (BP_NIMPL > 2)
			printf("; qpsock/ck_ring: 1p %.2fx, 2p %.2fx",
			       bp_ratio(res, ck, 0, rounds),
			       bp_ratio(res, ck, 1, rounds));
		printf(" (median of per-round ratios)\n");
	}
	return 0;
}
