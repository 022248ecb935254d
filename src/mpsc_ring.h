/* SPDX-License-Identifier: MIT */
/*
 * mpsc_ring.h - bounded multi-producer / single-consumer ring of
 * descriptors (a pointer plus a 32-bit tag).
 *
 * Why this design rather than one of the rings it borrows from:
 *  - Producers claim slots with one CAS on a shared head, n slots at a
 *    time, as DPDK's MP enqueue does: bulk enqueue amortises the locked
 *    instruction.
 *  - Readiness is per cell, as in Vyukov's bounded queue: a cell carries
 *    the position of the item it holds, stored last. No producer ever waits
 *    for an earlier one to commit. DPDK's and ck_ring's MP enqueue spin
 *    until the shared tail reaches their claim, so a producer descheduled
 *    between claim and commit stalls every later producer: the common case
 *    on our 2-core machines, which run more threads than cores. Here such
 *    a producer only hides its own cell: the consumer stops there until it
 *    commits.
 *  - The consumer never writes a cell. A ring that marks cells empty
 *    (ptr_ring's NULL) makes the consumer write the very cache lines the
 *    producers are filling, so each such line changes hands twice per lap
 *    instead of once (ptr_ring batches its zeroing to soften that). The
 *    cell's position word tells a fresh cell from the previous lap's, so
 *    nothing needs clearing; the price is a 16-byte cell instead of 8, and
 *    the 32-bit tag rides in the padding.
 *  - Free space is head - cons against the capacity. Producers read the
 *    consumer's index through a copy on their own cache line (cons_cache)
 *    and touch the consumer's line only when that copy says "full", so in
 *    steady state neither side reads the other's index line.
 *  - The single consumer peeks a burst, hands it on, then consumes only as
 *    many as were used (one index store per burst): what could not be used
 *    stays at the head, in order (no requeue, nothing lost).
 * Indices are free-running 64-bit counters that never wrap in practice, so
 * head and cons double as the enqueued and dequeued totals.
 *
 * Threads: any number of producers; one consumer at a time (a caller that
 * moves the consumer role between threads must order the hand-over, as
 * prio_bands.c does with its owner flag).
 */
#ifndef QPS_MPSC_RING_H
#define QPS_MPSC_RING_H

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Producer and consumer lines are 128 bytes apart: x86's adjacent-line
 * prefetcher pulls cache lines in pairs. */
#define QPS_MPSC_GUARD 128
#define QPS_MPSC_MAX_CAP (1u << 24)

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");

struct qps_mpsc_cell {
	_Atomic(void *) item;
	_Atomic uint32_t aux;		/* the producer's 32-bit tag */
	_Atomic uint32_t seq;		/* low 32 bits of the position held */
};

struct qps_mpsc {
	/* Read-only after init: shared clean by every cache. */
	struct qps_mpsc_cell *cells;
	uint64_t mask;
	uint32_t cap;

	/* Producers' line: the claim head and their copy of cons. */
	alignas(QPS_MPSC_GUARD) _Atomic uint64_t head;
	_Atomic uint64_t cons_cache;

	/* Consumer's line: written once per consumed burst. */
	alignas(QPS_MPSC_GUARD) _Atomic uint64_t cons;
};

/* cap: a power of two in [2, QPS_MPSC_MAX_CAP]. 0, -EINVAL or -ENOMEM. */
int qps_mpsc_init(struct qps_mpsc *r, uint32_t cap);
void qps_mpsc_fini(struct qps_mpsc *r);

static inline uint64_t qps_mpsc_used(uint64_t head, uint64_t cons)
{
	/* A head read before a newer cons can trail it: nothing is used. */
	return (int64_t)(head - cons) > 0 ? head - cons : 0;
}

/*
 * qps_mpsc_claim - reserve @n consecutive cells for the calling producer;
 * *pos receives the first position. All or nothing: 0, -EAGAIN when fewer
 * than @n cells are free, -EINVAL for n == 0 or n > capacity. Every claim
 * must be followed by qps_mpsc_publish() of the same cells.
 */
static inline int qps_mpsc_claim_mo(struct qps_mpsc *r, uint32_t n,
				    uint64_t *pos, memory_order mo)
{
	uint64_t h;

	if (n == 0 || n > r->cap)
		return -EINVAL;
	h = atomic_load_explicit(&r->head, memory_order_relaxed);
	for (;;) {
		/*
		 * Acquire: pairs with the release store of the value read:
		 * qps_mpsc_consume() for cons, or another producer's refresh
		 * below for cons_cache (which itself acquired it from cons).
		 * Either way the consumer's reads of the cells we are about to
		 * reuse happen before our stores to them.
		 */
		uint64_t c = atomic_load_explicit(&r->cons_cache,
						  memory_order_acquire);

		if (qps_mpsc_used(h, c) + n > r->cap) {
			c = atomic_load_explicit(&r->cons, memory_order_acquire);
			/* A stale h only under-counts: "full" here is real. */
			if (qps_mpsc_used(h, c) + n > r->cap)
				return -EAGAIN;
			/* Release: pairs with the acquire load of cons_cache
			 * above, in other producers. An older value written
			 * over a newer one only makes them refresh sooner. */
			atomic_store_explicit(&r->cons_cache, c,
					      memory_order_release);
		}
		/* Relaxed unless the caller orders it (@mo): readiness is
		 * per cell. */
		if (atomic_compare_exchange_weak_explicit(&r->head, &h, h + n,
							  mo,
							  memory_order_relaxed))
			break;
	}
	*pos = h;
	return 0;
}

static inline int qps_mpsc_claim(struct qps_mpsc *r, uint32_t n, uint64_t *pos)
{
	return qps_mpsc_claim_mo(r, n, pos, memory_order_relaxed);
}

/*
 * qps_mpsc_publish_mo - store @n @items (and @aux tags, NULL = 0) into the
 * cells claimed at @pos; the position word is stored last with order @mo,
 * at least release: it pairs with the acquire in qps_mpsc_peek(), so what
 * an item points to is written before the consumer can see the item.
 * prio_bands.c passes seq_cst when it must order the publish against a
 * later load of its owner word. Returns @n.
 */
static inline uint32_t qps_mpsc_publish_mo(struct qps_mpsc *r, uint64_t pos,
					   void *const *items,
					   const uint32_t *aux, uint32_t n,
					   memory_order mo)
{
	struct qps_mpsc_cell *cell;
	uint32_t i;

	for (i = 0; i < n; i++) {
		cell = &r->cells[(pos + i) & r->mask];
		atomic_store_explicit(&cell->item, items[i],
				      memory_order_relaxed);
		atomic_store_explicit(&cell->aux, aux ? aux[i] : 0,
				      memory_order_relaxed);
		atomic_store_explicit(&cell->seq, (uint32_t)(pos + i), mo);
	}
	return n;
}

static inline uint32_t qps_mpsc_publish(struct qps_mpsc *r, uint64_t pos,
					void *const *items, const uint32_t *aux,
					uint32_t n)
{
	return qps_mpsc_publish_mo(r, pos, items, aux, n, memory_order_release);
}

/*
 * qps_mpsc_enqueue_bulk - all of @items (with @aux, NULL = 0) or none;
 * returns @n, -EAGAIN when they do not all fit, -EINVAL for n == 0 or
 * n > capacity. Any pointer value, NULL included, is an item.
 */
static inline int qps_mpsc_enqueue_bulk(struct qps_mpsc *r, void *const *items,
					const uint32_t *aux, uint32_t n)
{
	uint64_t pos;
	int ret;

	ret = qps_mpsc_claim(r, n, &pos);
	if (ret < 0)
		return ret;
	return (int)qps_mpsc_publish(r, pos, items, aux, n);
}

/* qps_mpsc_enqueue - one item with tag @aux: 0 or -EAGAIN (full). */
static inline int qps_mpsc_enqueue(struct qps_mpsc *r, void *item, uint32_t aux)
{
	int ret = qps_mpsc_enqueue_bulk(r, &item, &aux, 1);

	return ret < 0 ? ret : 0;
}

/*
 * qps_mpsc_peek - consumer: copy up to @n items (and their tags into @aux
 * unless NULL) from the head without removing them; returns how many.
 * Stops early at a cell that is claimed but not yet published, which
 * keeps FIFO order.
 */
static inline uint32_t qps_mpsc_peek(struct qps_mpsc *r, void **items,
				     uint32_t *aux, uint32_t n)
{
	/* Relaxed: cons is written only by the consumer, which we are. */
	uint64_t c = atomic_load_explicit(&r->cons, memory_order_relaxed);
	struct qps_mpsc_cell *cell;
	uint32_t i;

	if (n > r->cap)
		n = r->cap;
	for (i = 0; i < n; i++) {
		cell = &r->cells[(c + i) & r->mask];
		/* seq_cst (an acquire on its own): pairs with the publish;
		 * seq_cst as the other half of prio_bands.c's ordering. */
		if (atomic_load_explicit(&cell->seq, memory_order_seq_cst) !=
		    (uint32_t)(c + i))
			break;
		items[i] = atomic_load_explicit(&cell->item,
						memory_order_relaxed);
		if (aux)
			aux[i] = atomic_load_explicit(&cell->aux,
						      memory_order_relaxed);
	}
	return i;
}

/* qps_mpsc_ready - consumer: whether the item @k places after the head
 * is published, i.e. a peek would return it now (k < capacity). */
static inline bool qps_mpsc_ready_mo(struct qps_mpsc *r, uint32_t k,
				     memory_order mo)
{
	uint64_t c = atomic_load_explicit(&r->cons, memory_order_relaxed) + k;

	/* Acquire (at least): pairs with the publish, as in
	 * qps_mpsc_peek(). */
	return k < r->cap &&
	       atomic_load_explicit(&r->cells[c & r->mask].seq, mo) ==
	       (uint32_t)c;
}

static inline bool qps_mpsc_ready(struct qps_mpsc *r, uint32_t k)
{
	return qps_mpsc_ready_mo(r, k, memory_order_acquire);
}

/* qps_mpsc_consume - consumer: remove @n items that qps_mpsc_peek() just
 * returned; returns @n. */
static inline uint32_t qps_mpsc_consume(struct qps_mpsc *r, uint32_t n)
{
	uint64_t c = atomic_load_explicit(&r->cons, memory_order_relaxed);

	/* Release: pairs with the acquire loads of cons / cons_cache in
	 * qps_mpsc_claim(); our reads of these cells precede their reuse. */
	atomic_store_explicit(&r->cons, c + n, memory_order_release);
	return n;
}

/* qps_mpsc_dequeue_burst - consumer: remove up to @n items into @items
 * (tags into @aux unless NULL); returns how many. */
static inline uint32_t qps_mpsc_dequeue_burst(struct qps_mpsc *r, void **items,
					      uint32_t *aux, uint32_t n)
{
	uint32_t k = qps_mpsc_peek(r, items, aux, n);

	if (k)
		qps_mpsc_consume(r, k);
	return k;
}

/*
 * qps_mpsc_count - items claimed and not yet consumed (published or not).
 * Exact when no thread is running on the ring, a snapshot otherwise.
 */
static inline uint32_t qps_mpsc_count_mo(const struct qps_mpsc *r,
					 memory_order mo)
{
	uint64_t h = atomic_load_explicit(&r->head, mo);
	uint64_t c = atomic_load_explicit(&r->cons, memory_order_relaxed);
	uint64_t used = qps_mpsc_used(h, c);

	return used > r->cap ? r->cap : (uint32_t)used;
}

static inline uint32_t qps_mpsc_count(const struct qps_mpsc *r)
{
	return qps_mpsc_count_mo(r, memory_order_relaxed);
}

static inline bool qps_mpsc_empty(const struct qps_mpsc *r)
{
	return qps_mpsc_count(r) == 0;
}

#endif /* QPS_MPSC_RING_H */
