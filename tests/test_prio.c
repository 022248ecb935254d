// SPDX-License-Identifier: MIT
/*
 * Suite "prio": the MPSC ring (src/mpsc_ring.h) and the priority bands
 * with their single-transmitter protocol (src/prio_bands.c).
 *
 * Items are tags, not pointers: tag + 1 cast to void *, the tag packing
 * priority, producer and sequence number. The post callback ("sink")
 * records what the owner posts; only the owner calls it, so its records
 * need no lock, and worker threads report failures through counters that
 * the main thread asserts on (CUnit is not thread-safe).
 *
 * QPS_TEST_PRIO_MSGS sets the messages per producer of the concurrency
 * tests (default below).
 */
#define _GNU_SOURCE
#include "t_util.h"

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

#include "mpsc_ring.h"
#include "prio_bands.h"

/* The 1M per producer; 250k under ThreadSanitizer, where the
 * Debug build of the whole suite then takes 5-10 s on 2 busy cores (1M:
 * 15-40 s). */
#if defined(__SANITIZE_THREAD__)
#define T_MSGS_DEFAULT 250000u
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define T_MSGS_DEFAULT 250000u
#endif
#endif
#ifndef T_MSGS_DEFAULT
#define T_MSGS_DEFAULT 1000000u
#endif
#define T_STRAND_ITERS 2000u
#define T_WAIT_NS 2000000000ll	/* bound on every cross-thread handshake */

#define EQ T_EQ

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* tag: prio (4 bits) << 56 | producer (16 bits) << 40 | seq (40 bits) */
static void *mk(unsigned int prio, unsigned int prod, uint64_t seq)
{
	uint64_t t = (uint64_t)prio << 56 | (uint64_t)prod << 40 | seq;

	return (void *)(uintptr_t)(t + 1);
}

static uint64_t tag(void *item)
{
	return (uint64_t)(uintptr_t)item - 1;
}

static unsigned int tag_prio(uint64_t t)
{
	return (unsigned int)(t >> 56);
}

static unsigned int tag_prod(uint64_t t)
{
	return (unsigned int)(t >> 40) & 0xffff;
}

static uint64_t tag_seq(uint64_t t)
{
	return t & ((1ull << 40) - 1);
}

static unsigned int msgs_per_producer(void)
{
	const char *s = getenv("QPS_TEST_PRIO_MSGS");
	unsigned long v;

	if (!s || !*s)
		return T_MSGS_DEFAULT;
	v = strtoul(s, NULL, 0);
	return v ? (unsigned int)v : T_MSGS_DEFAULT;
}

/* ------------------------------------------------------------------ */
/* The sink: a post callback that records, refuses or fails on demand.  */

#define SINK_LOG 4096
#define SINK_PRODS 8

struct sink {
	uint64_t log[SINK_LOG];		/* tags in post order (first ones) */
	size_t nlog;
	_Atomic uint64_t posted;
	unsigned int calls;
	unsigned int more_calls;	/* calls with more == true */
	bool last_more;
	unsigned int max_n;
	unsigned int mixed_bands;	/* calls mixing bands */
	long budget;			/* items still accepted, < 0 = all */
	int err;			/* returned instead when != 0 */
	unsigned int flushes;		/* calls with no items ("none follows") */
	struct qps_prio *pause_b;	/* paused by the pause_at-th call */
	unsigned int pause_at;
	/* concurrency checks: per producer and band, next sequence seen */
	uint8_t *seen;			/* one byte per (producer, seq) */
	uint64_t per;			/* messages per producer */
	uint64_t last[SINK_PRODS][QPS_PRIO_BANDS];
	uint64_t order_err;
	uint64_t dup_err;
	uint64_t bad_err;
};

static void sink_reset(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	s->budget = -1;
}

static int sink_post(void *arg, void **items, unsigned int n, bool more)
{
	struct sink *s = arg;
	unsigned int i, k = n, band;
	uint64_t t, seq;

	if (n == 0) {
		s->flushes++;
		s->last_more = more;
		return 0;
	}
	s->calls++;
	if (s->pause_b && s->calls == s->pause_at)
		qps_prio_pause(s->pause_b);
	if (s->err)
		return s->err;
	if (s->budget >= 0 && (long)k > s->budget)
		k = (unsigned int)s->budget;
	if (s->budget >= 0)
		s->budget -= k;
	s->more_calls += more;
	s->last_more = more;
	if (n > s->max_n)
		s->max_n = n;
	band = qps_prio_band(tag_prio(tag(items[0])));
	for (i = 0; i < k; i++) {
		t = tag(items[i]);
		if (qps_prio_band(tag_prio(t)) != band)
			s->mixed_bands++;
		if (s->nlog < SINK_LOG)
			s->log[s->nlog++] = t;
		if (!s->seen)
			continue;
		seq = tag_seq(t);
		if (tag_prod(t) >= SINK_PRODS || seq >= s->per) {
			s->bad_err++;
			continue;
		}
		if (s->seen[tag_prod(t) * s->per + seq]++)
			s->dup_err++;
		/* Per producer and band, sequence numbers only grow. */
		if (seq + 1 <= s->last[tag_prod(t)][band])
			s->order_err++;
		s->last[tag_prod(t)][band] = seq + 1;
	}
	atomic_fetch_add_explicit(&s->posted, k, memory_order_relaxed);
	return (int)k;
}

static struct qps_prio *mk_bands(struct sink *s, uint32_t depth, uint32_t burst)
{
	struct qps_prio_cfg cfg = {
		.post = sink_post,
		.arg = s,
		.depth = { depth, depth, depth },
		.burst = burst,
	};
	struct qps_prio *b = NULL;

	EQ(qps_prio_create(&cfg, &b), 0);
	return b;
}

/* A pause that lands between two posts of one drain: the first said
 * "more", so the owner must say "none follows" before it stops. */
static void test_pause_after_more(void)
{
	enum { BURST = 4, N = 3 * BURST };
	static struct sink s;
	struct qps_prio *b;
	unsigned int i;

	sink_reset(&s);
	b = mk_bands(&s, 64, BURST);
	CU_ASSERT_FATAL(b != NULL);
	EQ(qps_prio_pause(b), 0);
	for (i = 0; i < N; i++)
		EQ(qps_prio_enqueue(b, mk(0, 0, i), 0, 10), 0);
	s.pause_b = b;
	s.pause_at = 1;
	EQ(qps_prio_resume(b), BURST);	/* one burst, then paused */
	EQ(s.calls, 1);
	EQ(s.more_calls, 1);
	EQ(s.flushes, 1);
	EQ(s.last_more, false);
	s.pause_b = NULL;
	EQ(qps_prio_resume(b), N - BURST);
	EQ(s.last_more, false);
	EQ(s.flushes, 1);		/* a drain that ends empty needs none */
	qps_prio_destroy(b);
}

/* ------------------------------------------------------------------ */
/* MPSC ring.                                                           */

static struct qps_mpsc *ring_new(uint32_t cap)
{
	struct qps_mpsc *r = aligned_alloc(QPS_MPSC_GUARD, sizeof(*r));

	CU_ASSERT_FATAL(r != NULL);
	EQ(qps_mpsc_init(r, cap), 0);
	return r;
}

static void ring_free(struct qps_mpsc *r)
{
	qps_mpsc_fini(r);
	free(r);
}

static void test_ring_init(void)
{
	struct qps_mpsc *r = aligned_alloc(QPS_MPSC_GUARD, sizeof(*r));

	CU_ASSERT_FATAL(r != NULL);
	EQ(qps_mpsc_init(r, 0), -EINVAL);
	EQ(qps_mpsc_init(r, 1), -EINVAL);
	EQ(qps_mpsc_init(r, 12), -EINVAL);
	EQ(qps_mpsc_init(r, QPS_MPSC_MAX_CAP * 2), -EINVAL);
	EQ(qps_mpsc_init(r, 2), 0);
	EQ(r->cap, 2);
	qps_mpsc_fini(r);
	free(r);
}

static void test_ring_full_empty(void)
{
	struct qps_mpsc *r = ring_new(8);
	void *out[16];
	uint32_t i, n;

	uint32_t aux[16];

	CU_ASSERT(qps_mpsc_empty(r));
	EQ(qps_mpsc_peek(r, out, aux, 16), 0);
	for (i = 0; i < 8; i++)
		EQ(qps_mpsc_enqueue(r, mk(0, 0, i), 1000 + i), 0);
	EQ(qps_mpsc_enqueue(r, mk(0, 0, 8), 0), -EAGAIN);
	EQ(qps_mpsc_count(r), 8);
	/* A burst larger than the ring returns the ring, not a lap more. */
	n = qps_mpsc_dequeue_burst(r, out, aux, 16);
	EQ(n, 8);
	for (i = 0; i < n; i++) {
		EQ(tag_seq(tag(out[i])), i);
		EQ(aux[i], 1000 + i);
	}
	CU_ASSERT(qps_mpsc_empty(r));
	/* NULL is an item like any other: readiness is the cell's word. */
	EQ(qps_mpsc_enqueue(r, NULL, 7), 0);
	EQ(qps_mpsc_enqueue(r, mk(0, 0, 9), 0), 0);
	EQ(qps_mpsc_dequeue_burst(r, out, aux, 2), 2);
	CU_ASSERT(out[0] == NULL);
	EQ(aux[0], 7);
	EQ(tag_seq(tag(out[1])), 9);
	ring_free(r);
}

/* Many laps with varying enqueue and burst sizes: FIFO across the wrap,
 * and head/cons count every item. */
static void test_ring_wrap(void)
{
	struct qps_mpsc *r = ring_new(8);
	uint64_t in = 0, out_seq = 0, errs = 0;
	void *buf[8], *got[8];
	uint32_t round, k, i, n;

	for (round = 0; round < 5000; round++) {
		k = 1 + round % 7;
		for (i = 0; i < k; i++)
			buf[i] = mk(0, 0, in + i);
		if (qps_mpsc_enqueue_bulk(r, buf, NULL, k) == (int)k)
			in += k;
		n = qps_mpsc_dequeue_burst(r, got, NULL, 1 + (round * 5) % 8);
		for (i = 0; i < n; i++)
			errs += tag_seq(tag(got[i])) != out_seq++;
	}
	while ((n = qps_mpsc_dequeue_burst(r, got, NULL, 8)) > 0)
		for (i = 0; i < n; i++)
			errs += tag_seq(tag(got[i])) != out_seq++;
	EQ(errs, 0);
	EQ(out_seq, in);
	CU_ASSERT(in > 8 * 1000);
	EQ(atomic_load(&r->head), in);
	EQ(atomic_load(&r->cons), in);
	ring_free(r);
}

static void test_ring_bulk(void)
{
	struct qps_mpsc *r = ring_new(8);
	void *v[9], *out[8];
	uint32_t i;

	for (i = 0; i < 9; i++)
		v[i] = mk(0, 0, i);
	EQ(qps_mpsc_enqueue_bulk(r, v, NULL, 0), -EINVAL);
	EQ(qps_mpsc_enqueue_bulk(r, v, NULL, 9), -EINVAL);
	EQ(qps_mpsc_enqueue_bulk(r, v, NULL, 5), 5);
	/* All or nothing. */
	EQ(qps_mpsc_enqueue_bulk(r, v + 5, NULL, 4), -EAGAIN);
	EQ(qps_mpsc_count(r), 5);
	EQ(qps_mpsc_enqueue_bulk(r, v + 5, NULL, 3), 3);
	EQ(qps_mpsc_enqueue(r, v[8], 0), -EAGAIN);
	/* Peek leaves items in place; consume takes only what was used. */
	EQ(qps_mpsc_peek(r, out, NULL, 3), 3);
	EQ(qps_mpsc_count(r), 8);
	EQ(qps_mpsc_consume(r, 2), 2);
	EQ(qps_mpsc_peek(r, out, NULL, 8), 6);
	for (i = 0; i < 6; i++)
		EQ(tag_seq(tag(out[i])), i + 2);
	EQ(qps_mpsc_dequeue_burst(r, out, NULL, 8), 6);
	CU_ASSERT(qps_mpsc_empty(r));
	ring_free(r);
}

/* Per-slot readiness: a later claim published first is not visible until
 * the earlier one is; nobody waits for it. */
static void test_ring_claim_order(void)
{
	struct qps_mpsc *r = ring_new(4);
	void *a = mk(0, 0, 1), *b = mk(0, 0, 2), *out[4];
	uint64_t pa = 0, pb = 0;

	EQ(qps_mpsc_claim(r, 1, &pa), 0);
	EQ(qps_mpsc_claim(r, 1, &pb), 0);
	EQ(pb, pa + 1);
	qps_mpsc_publish(r, pb, &b, NULL, 1);
	EQ(qps_mpsc_peek(r, out, NULL, 4), 0);
	EQ(qps_mpsc_count(r), 2);
	qps_mpsc_publish(r, pa, &a, NULL, 1);
	EQ(qps_mpsc_dequeue_burst(r, out, NULL, 4), 2);
	CU_ASSERT(out[0] == a && out[1] == b);
	ring_free(r);
}

struct ring_prod {
	struct qps_mpsc *r;
	unsigned int id;
	uint64_t n;
};

static void *ring_producer(void *arg)
{
	struct ring_prod *p = arg;
	void *v[4];
	uint64_t seq = 0;
	uint32_t k, i;

	while (seq < p->n) {
		k = (uint32_t)(seq % 4) + 1;
		if (k > p->n - seq)
			k = (uint32_t)(p->n - seq);
		for (i = 0; i < k; i++)
			v[i] = mk(0, p->id, seq + i);
		if (qps_mpsc_enqueue_bulk(p->r, v, NULL, k) == (int)k)
			seq += k;
		else
			sched_yield();
	}
	return NULL;
}

/* Three producers, bulk and single, one consumer: all items, each
 * producer's in order. */
static void test_ring_threads(void)
{
	enum { P = 3 };
	struct qps_mpsc *r = ring_new(64);
	struct ring_prod prod[P];
	pthread_t th[P];
	uint64_t next[P] = { 0 }, total = 0, errs = 0, n_each;
	int64_t deadline;
	void *out[32];
	uint32_t i, n;
	uint64_t t;

	n_each = msgs_per_producer() / 2;
	for (i = 0; i < P; i++) {
		prod[i] = (struct ring_prod){ .r = r, .id = i, .n = n_each };
		CU_ASSERT_FATAL(pthread_create(&th[i], NULL, ring_producer,
					       &prod[i]) == 0);
	}
	deadline = now_ns() + 60 * T_WAIT_NS;
	while (total < P * n_each && now_ns() < deadline) {
		n = qps_mpsc_dequeue_burst(r, out, NULL, 32);
		if (!n)
			sched_yield();
		for (i = 0; i < n; i++) {
			t = tag(out[i]);
			if (tag_prod(t) >= P || tag_seq(t) != next[tag_prod(t)])
				errs++;
			else
				next[tag_prod(t)]++;
		}
		total += n;
	}
	for (i = 0; i < P; i++)
		pthread_join(th[i], NULL);
	EQ(errs, 0);
	EQ(total, P * n_each);
	CU_ASSERT(qps_mpsc_empty(r));
	ring_free(r);
}

/* ------------------------------------------------------------------ */
/* Bands: mapping, creation, bypass, strict priority, failures, full.   */

static void test_prio2band(void)
{
	static const uint8_t linux_prio2band[16] = {
		1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
	};
	unsigned int p;

	for (p = 0; p < 16; p++) {
		EQ(qps_prio_band(p), linux_prio2band[p]);
		/* Masked with TC_PRIO_MAX, as the kernel does. */
		EQ(qps_prio_band(p + 16), linux_prio2band[p]);
	}
}

static void test_create(void)
{
	struct qps_prio_cfg cfg = { .post = sink_post };
	struct qps_prio *b = NULL;

	EQ(qps_prio_create(NULL, &b), -EINVAL);
	cfg.post = NULL;
	EQ(qps_prio_create(&cfg, &b), -EINVAL);
	cfg.post = sink_post;
	cfg.burst = QPS_PRIO_BURST_MAX + 1;
	EQ(qps_prio_create(&cfg, &b), -EINVAL);
	cfg.burst = 0;
	cfg.depth[1] = 100;
	EQ(qps_prio_create(&cfg, &b), -EINVAL);
	cfg.depth[1] = 0;
	cfg.linger_ns = QPS_PRIO_LINGER_MAX_NS + 1;
	EQ(qps_prio_create(&cfg, &b), -EINVAL);
	cfg.linger_ns = -1;		/* never linger */
	EQ(qps_prio_create(&cfg, &b), 0);
	qps_prio_destroy(b);
	cfg.linger_ns = 0;
	EQ(qps_prio_create(&cfg, &b), 0);
	CU_ASSERT(b != NULL);
	qps_prio_destroy(b);
}

static void test_bypass(void)
{
	static struct sink s;
	struct qps_prio_stats st;
	struct qps_prio *b;

	sink_reset(&s);
	b = mk_bands(&s, 16, 0);
	CU_ASSERT_FATAL(b != NULL);
	EQ(qps_prio_enqueue(b, mk(7, 0, 0), 7, 100), 0);
	EQ(qps_prio_enqueue(b, mk(1, 0, 1), 1, 50), 0);
	/* Lone sender: each went straight out, alone, no "more". */
	EQ(s.calls, 2);
	EQ(s.nlog, 2);
	EQ(s.max_n, 1);
	EQ(s.more_calls, 0);
	qps_prio_stats(b, &st);
	EQ(st.band[0].bypassed, 1);
	EQ(st.band[2].bypassed, 1);
	EQ(st.band[0].enqueued + st.band[2].enqueued, 0);
	EQ(st.band[0].bytes + st.band[2].bytes, 0);
	EQ(st.bursts, 0);
	/* Nobody else sending: the owner never lingers. */
	EQ(st.lingers, 0);
	qps_prio_destroy(b);
}

/* Paused transmitter, mixed priorities; on resume band 0 drains entirely
 * before band 1, band 1 before band 2, FIFO inside each, in bursts that
 * never mix bands and say "more" until the very last. */
static void test_strict_priority(void)
{
	enum { N = 3 * 16 + 5, BURST = 4 };
	static struct sink s;
	unsigned int count[QPS_PRIO_BANDS] = { 0 }, calls = 0;
	struct qps_prio_stats st;
	struct qps_prio *b;
	unsigned int i, band, prio, prev_band = 0;
	uint64_t prev_seq = 0;
	size_t j;

	sink_reset(&s);
	b = mk_bands(&s, 64, BURST);
	CU_ASSERT_FATAL(b != NULL);
	EQ(qps_prio_pause(b), 0);
	for (i = 0; i < N; i++) {
		prio = (i * 7) % 16;
		count[qps_prio_band(prio)]++;
		EQ(qps_prio_enqueue(b, mk(prio, 0, i), prio, 10 + prio), 0);
	}
	EQ(s.calls, 0);
	EQ(qps_prio_pending(b), N);
	qps_prio_stats(b, &st);
	for (band = 0; band < QPS_PRIO_BANDS; band++) {
		EQ(st.band[band].depth, count[band]);
		EQ(st.band[band].enqueued, count[band]);
		calls += (count[band] + BURST - 1) / BURST;
	}
	EQ(qps_prio_resume(b), N);
	EQ(s.nlog, N);
	for (j = 0; j < s.nlog; j++) {
		band = qps_prio_band(tag_prio(s.log[j]));
		CU_ASSERT(band >= prev_band);
		if (j > 0 && band == prev_band)
			CU_ASSERT(tag_seq(s.log[j]) > prev_seq);
		prev_band = band;
		prev_seq = tag_seq(s.log[j]);
	}
	EQ(s.mixed_bands, 0);
	EQ(s.max_n, BURST);
	EQ(s.calls, calls);
	EQ(s.more_calls, calls - 1);
	CU_ASSERT(!s.last_more);
	qps_prio_stats(b, &st);
	for (band = 0; band < QPS_PRIO_BANDS; band++) {
		EQ(st.band[band].dequeued, count[band]);
		EQ(st.band[band].depth, 0);
		EQ(st.band[band].bytes, 0);
		EQ(st.band[band].bypassed, 0);
	}
	EQ(st.bursts, calls);
	qps_prio_destroy(b);
}

/* A post that fails leaves its items queued; a later send must not
 * overtake them (bypass only when every band is empty). */
static void test_no_bypass_past_queued(void)
{
	static struct sink s;
	struct qps_prio_stats st;
	struct qps_prio *b;

	sink_reset(&s);
	b = mk_bands(&s, 16, 0);
	CU_ASSERT_FATAL(b != NULL);
	s.budget = 0;			/* "QP full" */
	EQ(qps_prio_enqueue(b, mk(0, 0, 1), 0, 1), 0);
	EQ(s.nlog, 0);
	EQ(qps_prio_pending(b), 1);
	s.budget = -1;			/* room again, nobody kicked */
	EQ(qps_prio_enqueue(b, mk(0, 0, 2), 0, 1), 0);
	EQ(s.nlog, 2);
	EQ(tag_seq(s.log[0]), 1);
	EQ(tag_seq(s.log[1]), 2);
	qps_prio_stats(b, &st);
	EQ(st.band[1].bypassed, 0);
	EQ(st.band[1].dequeued, 2);
	CU_ASSERT(st.stalls >= 1);
	EQ(qps_prio_pending(b), 0);
	qps_prio_destroy(b);
}

/* The look of a producer holding the post callback's lock: yes only
 * while no owner runs, nothing of finished sends is left queued and the
 * bands are not paused; what it posts counts as bypassed. */
static bool locked_look;

static void look_hook(void *arg)
{
	locked_look = qps_prio_bypass_locked(arg);
}

static void test_bypass_locked(void)
{
	static struct sink s;
	struct qps_prio_stats st;
	struct qps_prio *b;

	sink_reset(&s);
	b = mk_bands(&s, 16, 0);
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT(qps_prio_bypass_locked(b));
	qps_prio_bypass_locked_count(b, 2);
	qps_prio_bypass_locked_count(b, 2);
	qps_prio_stats(b, &st);
	EQ(st.band[2].bypassed, 2);
	EQ(st.band[0].bypassed + st.band[1].bypassed, 0);

	/* An item of a finished send left queued (QP full): backlog. */
	s.budget = 0;
	EQ(qps_prio_enqueue(b, mk(0, 0, 1), 0, 1), 0);
	EQ(qps_prio_pending(b), 1);
	CU_ASSERT(!qps_prio_bypass_locked(b));
	s.budget = -1;
	EQ(qps_prio_kick(b), 1);
	CU_ASSERT(qps_prio_bypass_locked(b));

	EQ(qps_prio_pause(b), 0);
	CU_ASSERT(!qps_prio_bypass_locked(b));
	EQ(qps_prio_resume(b), 0);
	CU_ASSERT(qps_prio_bypass_locked(b));

	/* The word held: the hook runs in an owner before it releases. */
	locked_look = true;
	qps_prio_set_release_hook(b, look_hook, b);
	EQ(qps_prio_enqueue(b, mk(0, 0, 2), 0, 1), 0);
	CU_ASSERT(!locked_look);
	qps_prio_set_release_hook(b, NULL, NULL);
	CU_ASSERT(qps_prio_bypass_locked(b));
	EQ(s.nlog, 2);
	qps_prio_destroy(b);
}

/* A producer descheduled between claim and publish: alone in its band it
 * is a send in progress and does not stop others' bypass; with items
 * queued behind it, those may be finished sends, so no bypass until they
 * are out. Its band waits for it, the other bands do not. */
static void test_unpublished_claim(void)
{
	static struct sink s;
	struct qps_prio_stats st;
	struct qps_mpsc *r1;
	struct qps_prio *b;
	void *x = mk(0, 9, 100);
	uint64_t pos = 0;

	sink_reset(&s);
	b = mk_bands(&s, 16, 0);
	CU_ASSERT_FATAL(b != NULL);
	r1 = qps_prio_test_ring(b, 1);
	CU_ASSERT_FATAL(r1 != NULL);
	CU_ASSERT(qps_prio_test_ring(b, QPS_PRIO_BANDS) == NULL);
	EQ(qps_mpsc_claim(r1, 1, &pos), 0);	/* X: prio 0, band 1 */
	EQ(qps_prio_kick(b), 0);
	EQ(qps_prio_enqueue(b, mk(1, 0, 1), 1, 1), 0);	/* band 2 */
	EQ(qps_prio_enqueue(b, mk(0, 0, 2), 0, 1), 0);	/* band 1 */
	EQ(s.nlog, 2);
	qps_prio_stats(b, &st);
	EQ(st.band[2].bypassed, 1);
	EQ(st.band[1].bypassed, 1);

	qps_prio_pause(b);
	EQ(qps_prio_enqueue(b, mk(0, 0, 3), 0, 1), 0);	/* behind X */
	EQ(qps_prio_resume(b), 0);
	EQ(qps_prio_enqueue(b, mk(1, 0, 4), 1, 1), 0);	/* no bypass */
	EQ(s.nlog, 3);
	EQ(tag_seq(s.log[2]), 4);
	qps_prio_stats(b, &st);
	EQ(st.band[2].bypassed, 1);
	EQ(st.band[2].dequeued, 1);

	qps_mpsc_publish(r1, pos, &x, NULL, 1);		/* X resumes */
	EQ(qps_prio_kick(b), 2);
	EQ(s.nlog, 5);
	EQ(tag_seq(s.log[3]), 100);
	EQ(tag_seq(s.log[4]), 3);
	EQ(qps_prio_pending(b), 0);
	qps_prio_destroy(b);
}

/* Partial posts and errors: the rest stays at the head, in order, and a
 * kick sends it; nothing lost, nothing twice. */
static void test_post_failure(void)
{
	static struct sink s;
	struct qps_prio_stats st;
	struct qps_prio *b;
	unsigned int i;

	sink_reset(&s);
	b = mk_bands(&s, 16, 8);
	CU_ASSERT_FATAL(b != NULL);
	qps_prio_pause(b);
	for (i = 0; i < 10; i++)
		EQ(qps_prio_enqueue(b, mk(2, 0, i), 2, 100), 0);
	s.budget = 3;
	EQ(qps_prio_resume(b), 3);
	EQ(qps_prio_pending(b), 7);
	s.err = -EIO;
	EQ(qps_prio_kick(b), 0);
	EQ(qps_prio_pending(b), 7);
	qps_prio_stats(b, &st);
	EQ(st.last_err, -EIO);
	EQ(st.band[2].bytes, 700);
	EQ(st.band[2].dequeued, 3);
	s.err = 0;
	s.budget = -1;
	EQ(qps_prio_kick(b), 7);
	EQ(s.nlog, 10);
	for (i = 0; i < s.nlog; i++)
		EQ(tag_seq(s.log[i]), i);
	qps_prio_stats(b, &st);
	EQ(st.band[2].dequeued, 10);
	EQ(st.band[2].bytes, 0);
	CU_ASSERT(st.stalls >= 2);
	qps_prio_destroy(b);
}

static void test_full_band(void)
{
	static struct sink s;
	struct qps_prio_stats st;
	struct qps_prio *b;
	unsigned int i;

	sink_reset(&s);
	b = mk_bands(&s, 4, 0);
	CU_ASSERT_FATAL(b != NULL);
	qps_prio_pause(b);
	for (i = 0; i < 4; i++)
		EQ(qps_prio_enqueue(b, mk(1, 0, i), 1, 100 + i), 0);
	EQ(qps_prio_enqueue(b, mk(1, 0, 4), 1, 1000), -EAGAIN);
	EQ(qps_prio_enqueue(b, mk(3, 0, 5), 3, 1000), -EAGAIN);
	/* Other bands are unaffected. */
	EQ(qps_prio_enqueue(b, mk(6, 0, 6), 6, 7), 0);
	qps_prio_stats(b, &st);
	EQ(st.band[2].drops, 2);
	EQ(st.band[2].depth, 4);
	EQ(st.band[2].enqueued, 4);
	EQ(st.band[2].bytes, 100 + 101 + 102 + 103);
	EQ(st.band[0].depth, 1);
	EQ(st.band[0].bytes, 7);
	EQ(st.band[0].drops + st.band[1].drops, 0);
	EQ(qps_prio_resume(b), 5);
	EQ(tag_seq(s.log[0]), 6);
	qps_prio_stats(b, &st);
	EQ(st.band[2].depth, 0);
	EQ(st.band[2].bytes, 0);
	EQ(st.band[2].dequeued, 4);
	EQ(st.band[2].drops, 2);
	qps_prio_destroy(b);
}

struct resumer {
	struct qps_prio *b;
	int64_t delay_ns;
};

static void *resume_later(void *arg)
{
	struct resumer *r = arg;
	int64_t until = now_ns() + r->delay_ns;

	while (now_ns() < until)
		sched_yield();
	qps_prio_resume(r->b);
	return NULL;
}

static int wait_fail(void *arg)
{
	(void)arg;
	return -EIO;
}

/* A wait callback as the send path's: yield until a deadline (0: none;
 * -1: give up at once). */
static int wait_until(void *arg)
{
	const int64_t *deadline = arg;

	if (*deadline < 0 || (*deadline && now_ns() >= *deadline))
		return -EAGAIN;
	sched_yield();
	return 0;
}

/* Bounded wait: times out while the band stays full, succeeds as soon as
 * the transmitter drains it, and stops on the wait callback's error. */
static void test_enqueue_wait(void)
{
	static struct sink s;
	struct qps_prio_stats st;
	struct resumer rs;
	struct qps_prio *b;
	pthread_t th;
	int64_t t0, dt, deadline;

	sink_reset(&s);
	b = mk_bands(&s, 2, 0);
	CU_ASSERT_FATAL(b != NULL);
	qps_prio_pause(b);
	EQ(qps_prio_enqueue(b, mk(0, 0, 0), 0, 1), 0);
	EQ(qps_prio_enqueue(b, mk(0, 0, 1), 0, 1), 0);
	t0 = now_ns();
	deadline = t0 + 20000000;
	EQ(qps_prio_enqueue_wait(b, mk(0, 0, 2), 0, 1, wait_until, &deadline),
	   -EAGAIN);
	dt = now_ns() - t0;
	CU_ASSERT(dt >= 20000000);
	deadline = -1;
	EQ(qps_prio_enqueue_wait(b, mk(0, 0, 2), 0, 1, wait_until, &deadline),
	   -EAGAIN);
	qps_prio_stats(b, &st);
	EQ(st.band[1].drops, 2);

	rs = (struct resumer){ .b = b, .delay_ns = 20000000 };
	CU_ASSERT_FATAL(pthread_create(&th, NULL, resume_later, &rs) == 0);
	t0 = now_ns();
	deadline = t0 + 5 * T_WAIT_NS;
	EQ(qps_prio_enqueue_wait(b, mk(0, 0, 2), 0, 1, wait_until, &deadline),
	   0);
	dt = now_ns() - t0;
	pthread_join(th, NULL);
	CU_ASSERT(dt < 5 * T_WAIT_NS);
	/* No kick: both threads are done, so all three are out. */
	EQ(atomic_load(&s.posted), 3);
	qps_prio_destroy(b);

	sink_reset(&s);
	b = mk_bands(&s, 2, 0);
	CU_ASSERT_FATAL(b != NULL);
	qps_prio_pause(b);
	EQ(qps_prio_enqueue(b, mk(0, 0, 0), 0, 1), 0);
	EQ(qps_prio_enqueue(b, mk(0, 0, 1), 0, 1), 0);
	EQ(qps_prio_enqueue_wait(b, mk(0, 0, 2), 0, 1, wait_fail, NULL), -EIO);
	/* Not a timeout: not counted as a drop. */
	qps_prio_stats(b, &st);
	EQ(st.band[1].drops, 0);
	qps_prio_destroy(b);
}

/* ------------------------------------------------------------------ */
/* Concurrency: no loss, no duplicate, order per producer and band.     */

struct producer {
	struct qps_prio *b;
	unsigned int id;
	uint64_t n;
	bool mixed;		/* vary the priority, else one fixed priority */
	pthread_barrier_t *start;
	uint64_t errors;
};

static int64_t no_deadline;

static void *producer_run(void *arg)
{
	struct producer *p = arg;
	unsigned int prio;
	uint64_t seq;
	int ret;

	pthread_barrier_wait(p->start);
	for (seq = 0; seq < p->n; seq++) {
		prio = p->mixed ? (unsigned int)(seq * 5 + p->id) % 16 : p->id;
		if (seq & 1)
			ret = qps_prio_enqueue_wait(p->b, mk(prio, p->id, seq),
						    prio, 64, wait_until,
						    &no_deadline);
		else
			while ((ret = qps_prio_enqueue(p->b,
						       mk(prio, p->id, seq),
						       prio, 64)) == -EAGAIN)
				sched_yield();
		if (ret)
			p->errors++;
	}
	return NULL;
}

static void run_producers(unsigned int np, uint32_t depth)
{
	static struct sink s;
	struct producer prod[SINK_PRODS];
	pthread_t th[SINK_PRODS];
	struct qps_prio_stats st;
	uint64_t per = msgs_per_producer(), enq = 0, out = 0, errs = 0;
	pthread_barrier_t start;
	struct qps_prio *b;
	unsigned int i, band;
	int64_t t0;

	sink_reset(&s);
	s.per = per;
	s.seen = calloc(np * per, 1);
	CU_ASSERT_FATAL(s.seen != NULL);
	b = mk_bands(&s, depth, 0);
	CU_ASSERT_FATAL(b != NULL);
	pthread_barrier_init(&start, NULL, np);
	t0 = now_ns();
	for (i = 0; i < np; i++) {
		prod[i] = (struct producer){ .b = b, .id = i, .n = per,
					     .mixed = !(i & 1),
					     .start = &start };
		CU_ASSERT_FATAL(pthread_create(&th[i], NULL, producer_run,
					       &prod[i]) == 0);
	}
	for (i = 0; i < np; i++) {
		pthread_join(th[i], NULL);
		errs += prod[i].errors;
	}
	pthread_barrier_destroy(&start);
	/* No kick: whatever was enqueued must already be out. */
	EQ(errs, 0);
	EQ(atomic_load(&s.posted), np * per);
	EQ(qps_prio_pending(b), 0);
	EQ(s.dup_err, 0);
	EQ(s.order_err, 0);
	EQ(s.bad_err, 0);
	qps_prio_stats(b, &st);
	for (band = 0; band < QPS_PRIO_BANDS; band++) {
		enq += st.band[band].enqueued + st.band[band].bypassed;
		out += st.band[band].dequeued + st.band[band].bypassed;
		EQ(st.band[band].depth, 0);
		EQ(st.band[band].bytes, 0);
	}
	EQ(enq, np * per);
	EQ(out, np * per);
	printf("\n    %u producers x %llu: %.0f ms, redrains %llu, bursts %llu ",
	       np, (unsigned long long)per, (now_ns() - t0) / 1e6,
	       (unsigned long long)st.redrains, (unsigned long long)st.bursts);
	qps_prio_destroy(b);
	free(s.seen);
}

static void test_concurrent_2(void)
{
	run_producers(2, 64);
}

static void test_concurrent_4(void)
{
	run_producers(4, 256);
}

/* ------------------------------------------------------------------ */
/* The stranding race: a producer enqueues exactly while the owner is    */
/* between its last empty drain and its release.                        */

struct strand {
	struct qps_prio *b;
	pthread_t owner;
	bool armed;			/* owner thread only */
	_Atomic uint32_t window;	/* iteration whose window is open */
	_Atomic uint32_t done;		/* iteration the producer finished */
	_Atomic uint64_t hook_timeouts;
	uint64_t errors;
};

static void strand_hook(void *arg)
{
	struct strand *st = arg;
	uint32_t it;
	int64_t deadline;

	if (!pthread_equal(pthread_self(), st->owner) || !st->armed)
		return;
	st->armed = false;
	it = atomic_load(&st->window) + 1;
	/* Open the window and hold it until the producer has enqueued. */
	atomic_store(&st->window, it);
	deadline = now_ns() + T_WAIT_NS;
	while (atomic_load(&st->done) != it) {
		if (now_ns() > deadline) {
			atomic_fetch_add(&st->hook_timeouts, 1);
			return;
		}
		sched_yield();
	}
}

static void *strand_producer(void *arg)
{
	struct strand *st = arg;
	uint32_t it;
	int64_t deadline;

	for (it = 1; it <= T_STRAND_ITERS; it++) {
		deadline = now_ns() + T_WAIT_NS;
		while (atomic_load(&st->window) != it) {
			if (now_ns() > deadline)
				return NULL;
			sched_yield();
		}
		if (qps_prio_enqueue(st->b, mk(6, 1, it), 6, 1))
			st->errors++;
		atomic_store(&st->done, it);
	}
	return NULL;
}

static void test_stranding_window(void)
{
	static struct sink s;
	static struct strand st;
	struct qps_prio_stats ps;
	uint64_t late = 0;
	int64_t deadline;
	pthread_t th;
	uint32_t it;

	sink_reset(&s);
	memset(&st, 0, sizeof(st));
	st.b = mk_bands(&s, 16, 0);
	CU_ASSERT_FATAL(st.b != NULL);
	st.owner = pthread_self();
	qps_prio_set_release_hook(st.b, strand_hook, &st);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, strand_producer, &st) == 0);
	for (it = 1; it <= T_STRAND_ITERS; it++) {
		st.armed = true;
		EQ(qps_prio_enqueue(st.b, mk(1, 0, it), 1, 1), 0);
		/* Our item and the one enqueued inside our window: both out
		 * when our send returns, or at worst within the bound. */
		if (atomic_load(&s.posted) != 2 * it) {
			late++;
			deadline = now_ns() + T_WAIT_NS;
			while (atomic_load(&s.posted) != 2 * it &&
			       now_ns() < deadline)
				sched_yield();
			if (atomic_load(&s.posted) != 2 * it)
				break;
		}
	}
	pthread_join(th, NULL);
	EQ(atomic_load(&st.hook_timeouts), 0);
	EQ(st.errors, 0);
	EQ(late, 0);
	EQ(atomic_load(&s.posted), 2 * T_STRAND_ITERS);
	qps_prio_stats(st.b, &ps);
	CU_ASSERT(ps.redrains >= T_STRAND_ITERS);
	qps_prio_destroy(st.b);
}

/* Random delays in the release window while producers hammer. */
static _Thread_local unsigned int t_seed;

static void jitter_hook(void *arg)
{
	unsigned int r;

	(void)arg;
	if (!t_seed)
		t_seed = (unsigned int)(uintptr_t)&r;
	r = rand_r(&t_seed);
	if ((r & 3) == 0)
		sched_yield();
	else
		for (r &= 0xff; r; r--)
			atomic_signal_fence(memory_order_seq_cst);
}

static void test_stranding_jitter(void)
{
	enum { NP = 2 };
	static struct sink s;
	struct producer prod[NP];
	pthread_t th[NP];
	uint64_t per = msgs_per_producer() / 4;
	pthread_barrier_t start;
	struct qps_prio *b;
	unsigned int i;

	sink_reset(&s);
	s.per = per;
	s.seen = calloc(NP * per, 1);
	CU_ASSERT_FATAL(s.seen != NULL);
	b = mk_bands(&s, 32, 4);
	CU_ASSERT_FATAL(b != NULL);
	qps_prio_set_release_hook(b, jitter_hook, NULL);
	pthread_barrier_init(&start, NULL, NP);
	for (i = 0; i < NP; i++) {
		prod[i] = (struct producer){ .b = b, .id = i, .n = per,
					     .mixed = true, .start = &start };
		CU_ASSERT_FATAL(pthread_create(&th[i], NULL, producer_run,
					       &prod[i]) == 0);
	}
	for (i = 0; i < NP; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
	EQ(atomic_load(&s.posted), NP * per);
	EQ(qps_prio_pending(b), 0);
	EQ(s.dup_err, 0);
	EQ(s.order_err, 0);
	qps_prio_destroy(b);
	free(s.seen);
}

/* ------------------------------------------------------------------ */
/* The lingering owner: once another producer is seen, the owner keeps   */
/* polling and posts what arrives before it returns, without delaying.   */

struct lingering {
	struct qps_prio *b;
	struct sink *s;
	pthread_t owner;
	bool armed;			/* owner thread only */
	_Atomic uint32_t window;	/* iteration whose window is open */
	_Atomic uint32_t done;		/* iteration: first item in */
	_Atomic uint32_t done2;		/* ... second send returned */
	_Atomic bool stop;
	_Atomic uint64_t lingers0;	/* the owner's lingers at the window */
	bool lingering;			/* the bands linger */
	uint64_t errors;
};

/* Each handshake of these tests passes through sched_yield() loops of
 * two pinned threads; on 2 cores with a load average of 20 that alone
 * took over 2 s now and then. */
#define T_LINGER_WAIT_NS (5 * T_WAIT_NS)
#define T_LINGER_ITERS 200u	/* at most, with lingering */
#define T_LINGER_HITS 5u	/* ... stopping after this many caught */

/* Run on CPU @cpu (of 2 or more), so the two threads of a test can run
 * side by side; best effort. */
static void pin_self(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* In the owner's release window: have the other thread queue one item,
 * so that the release fails and the owner runs contended. */
static void linger_hook(void *arg)
{
	struct lingering *l = arg;
	struct qps_prio_stats st;
	uint32_t it;
	int64_t deadline;

	if (!pthread_equal(pthread_self(), l->owner) || !l->armed)
		return;
	l->armed = false;
	qps_prio_stats(l->b, &st);
	atomic_store(&l->lingers0, st.lingers);
	it = atomic_load(&l->window) + 1;
	atomic_store(&l->window, it);
	deadline = now_ns() + T_LINGER_WAIT_NS;
	while (atomic_load(&l->done) != it && now_ns() < deadline)
		sched_yield();
}

static uint64_t linger_count(struct qps_prio *b)
{
	struct qps_prio_stats st;

	qps_prio_stats(b, &st);
	return st.lingers;
}

/* Per iteration: one item inside the owner's window, then a second one
 * as soon as the owner has posted the first (it is lingering by then). */
static void *linger_producer(void *arg)
{
	struct lingering *l = arg;
	uint32_t it;
	int64_t deadline;

	pin_self(1);

	for (it = 1;; it++) {
		deadline = now_ns() + T_LINGER_WAIT_NS;
		while (atomic_load(&l->window) != it) {
			if (atomic_load(&l->stop) || now_ns() > deadline)
				return NULL;
			sched_yield();
		}
		if (qps_prio_enqueue(l->b, mk(6, 1, 2 * it), 6, 1))
			l->errors++;
		atomic_store(&l->done, it);
		/*
		 * Spin, no yield: the owner lingers for a bounded time. Wait
		 * until it lingers, not only until it posted the first item:
		 * an item queued while its drain still runs is drained there,
		 * which is no linger hit (slow code, as under TSan, does that
		 * in most rounds).
		 */
		while ((atomic_load(&l->s->posted) < 3 * it - 1 ||
			(l->lingering && linger_count(l->b) ==
					 atomic_load(&l->lingers0))) &&
		       now_ns() < deadline)
			;
		if (qps_prio_enqueue(l->b, mk(6, 1, 2 * it + 1), 6, 1))
			l->errors++;
		atomic_store(&l->done2, it);
	}
	return NULL;
}

static void linger_case(int32_t linger_ns)
{
	static struct sink s;
	static struct lingering l;
	struct qps_prio_cfg cfg = { .post = sink_post, .arg = &s,
				    .depth = { 16, 16, 16 },
				    .linger_ns = linger_ns };
	struct qps_prio_stats st;
	uint32_t iters = linger_ns < 0 ? 20 : T_LINGER_ITERS, it;
	uint64_t hits = 0, in_call = 0, prev;
	int64_t deadline;
	cpu_set_t cpus;
	pthread_t th;

	sink_reset(&s);
	memset(&l, 0, sizeof(l));
	l.s = &s;
	l.lingering = linger_ns >= 0;
	EQ(qps_prio_create(&cfg, &l.b), 0);
	CU_ASSERT_FATAL(l.b != NULL);
	l.owner = pthread_self();
	CU_ASSERT_FATAL(pthread_getaffinity_np(l.owner, sizeof(cpus),
					       &cpus) == 0);
	pin_self(0);
	qps_prio_set_release_hook(l.b, linger_hook, &l);
	CU_ASSERT_FATAL(pthread_create(&th, NULL, linger_producer, &l) == 0);
	for (it = 1; it <= iters && hits < T_LINGER_HITS; it++) {
		qps_prio_stats(l.b, &st);
		prev = st.linger_hits;
		l.armed = true;
		EQ(qps_prio_enqueue(l.b, mk(1, 0, it), 1, 1), 0);
		/* Posted inside our call: by our lingering, not a new owner. */
		if (atomic_load(&s.posted) == 3 * it)
			in_call++;
		qps_prio_stats(l.b, &st);
		hits += st.linger_hits > prev;
		/*
		 * Once both calls have returned, every item is out, lingering
		 * or not: whoever owned the bands last drained them. Waiting
		 * for the other call also keeps it from still owning the
		 * bands when our next send starts (ours would then queue and
		 * never reach the hook).
		 */
		deadline = now_ns() + T_LINGER_WAIT_NS;
		while (atomic_load(&l.done2) != it && now_ns() < deadline)
			sched_yield();
		EQ(atomic_load(&l.done2), it);
		EQ(atomic_load(&s.posted), 3 * it);
		if (atomic_load(&l.done2) != it)
			break;
	}
	atomic_store(&l.stop, true);
	pthread_join(th, NULL);
	pthread_setaffinity_np(l.owner, sizeof(cpus), &cpus);
	EQ(l.errors, 0);
	qps_prio_stats(l.b, &st);
	EQ(qps_prio_pending(l.b), 0);
	if (linger_ns < 0) {
		EQ(st.lingers, 0);
		EQ(st.linger_hits, 0);
	} else {
		/* A loaded machine may keep the other thread off a core for
		 * the whole linger now and then; not every time. */
		EQ(hits, T_LINGER_HITS);
		CU_ASSERT(in_call >= hits);
		CU_ASSERT(st.lingers >= st.linger_hits);
		printf("\n    linger %d ns: %llu of %u rounds caught "
		       "lingering ", linger_ns, (unsigned long long)hits,
		       it - 1);
	}
	qps_prio_destroy(l.b);
}

/* The longest linger: long enough to outlast a time slice of the other
 * thread's CPU given to other work on a loaded machine. */
static void test_linger(void)
{
	linger_case(QPS_PRIO_LINGER_MAX_NS);
}

static void test_linger_off(void)
{
	linger_case(-1);
}

static CU_TestInfo tests[] = {
	{ "ring: init arguments", test_ring_init },
	{ "ring: full and empty", test_ring_full_empty },
	{ "ring: wrap-around, FIFO over many laps", test_ring_wrap },
	{ "ring: bulk all-or-nothing, peek and consume", test_ring_bulk },
	{ "ring: per-slot readiness", test_ring_claim_order },
	{ "ring: 3 producers, 1 consumer", test_ring_threads },
	{ "bands: prio2band", test_prio2band },
	{ "bands: create arguments", test_create },
	{ "bands: bypass for a lone sender", test_bypass },
	{ "bands: strict priority, bursts, more hint", test_strict_priority },
	{ "bands: a pause between posts takes the more hint back",
	  test_pause_after_more },
	{ "bands: no bypass past queued items", test_no_bypass_past_queued },
	{ "bands: unpublished claim and bypass", test_unpublished_claim },
	{ "bands: bypass under the post's lock", test_bypass_locked },
	{ "bands: partial post and errors keep items", test_post_failure },
	{ "bands: full band and counters", test_full_band },
	{ "bands: bounded wait", test_enqueue_wait },
	{ "bands: 2 producers, no loss, order", test_concurrent_2 },
	{ "bands: 4 producers, no loss, order", test_concurrent_4 },
	{ "bands: stranding race, held window", test_stranding_window },
	{ "bands: stranding race, jitter", test_stranding_jitter },
	{ "bands: contended owner lingers, posts at once", test_linger },
	{ "bands: lingering off", test_linger_off },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("prio", tests);
}
