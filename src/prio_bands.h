/* SPDX-License-Identifier: MIT */
/*
 * prio_bands.h - lockless priority send queues for one send QP: Linux's
 * pfifo_fast (three bands chosen by prio2band) on MPSC rings, drained by
 * exactly one transmitter at a time. Design: docs/prio_queues.md.
 *
 * A producer calls qps_prio_enqueue(). If the transmitter role (the owner
 * flag) is free it takes it and, when nothing is queued, posts its item
 * directly (bypass); otherwise the item goes to its band's ring and
 * whichever thread owns the flag posts it. The owner drains band 0 first,
 * in bursts, through the post callback, and before giving the flag up makes
 * sure no producer enqueued behind its back (the "missed" flag). An owner
 * that has met another producer lingers a little for more before leaving.
 * No thread ever waits for another.
 */
#ifndef QPS_PRIO_BANDS_H
#define QPS_PRIO_BANDS_H

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mpsc_ring.h"

#define QPS_PRIO_BANDS 3
#define QPS_PRIO_MAX 15			/* priorities are masked with this */
#define QPS_PRIO_DEFAULT_DEPTH 256
#define QPS_PRIO_DEFAULT_BURST 32
#define QPS_PRIO_BURST_MAX 64
/* How long a contended owner keeps polling the bands for another item
 * before it gives the transmitter up (qps_prio_cfg.linger_ns); the
 * maximum is for tests on loaded machines, not for use. */
#define QPS_PRIO_DEFAULT_LINGER_NS 2000
#define QPS_PRIO_LINGER_MAX_NS 20000000
/* A lingering owner looks at the bands this often, and lingers at most
 * this many times linger_ns in all per run (then it only drains until it
 * can leave): 50 us by default. */
#define QPS_PRIO_LINGER_POLL_NS 500
#define QPS_PRIO_LINGER_BUDGET 25

/* Linux's prio2band (sch_generic.c): band 0 is served first. */
extern const uint8_t qps_prio2band[QPS_PRIO_MAX + 1];

/*
 * Post callback: hand @n items, in order, to the device. Returns how many
 * it took from the front (0..n) or -errno. Taking fewer than @n (QP full,
 * error) ends the drain and leaves the rest queued at the head of their
 * band, in order: the callback rings what it took. @more (the doorbell
 * hint): another published item is waiting and another post follows at
 * once. If the transmitter is paused before that post, the owner calls
 * the callback once more with @n 0 and @more false (no items, only "none
 * follows"), so a doorbell is never left waiting. Called only by the
 * current owner, so never concurrently.
 */
typedef int (*qps_prio_post_fn)(void *arg, void **items, unsigned int n,
				bool more);

struct qps_prio_cfg {
	qps_prio_post_fn post;
	void *arg;			/* for post */
	/* Ring capacity per band: a power of two, 0 = default. */
	uint32_t depth[QPS_PRIO_BANDS];
	uint32_t burst;			/* items per post, 0 = default */
	/* Once other producers are seen (a redrain), the owner polls the
	 * bands for up to this many ns without a new item before leaving,
	 * posting what arrives within a poll period: 0 = default, < 0 =
	 * never linger, at most QPS_PRIO_LINGER_MAX_NS. */
	int32_t linger_ns;
};

struct qps_prio_band_stats {
	uint64_t enqueued;	/* items accepted into the ring */
	uint64_t dequeued;	/* items posted from the ring */
	uint64_t bypassed;	/* items posted directly, ring untouched */
	uint64_t drops;		/* -EAGAIN returned: band full, not queued */
	uint64_t depth;		/* items queued now */
	uint64_t bytes;		/* bytes queued now */
};

/* Snapshots: exact when no thread is sending, approximate otherwise. */
struct qps_prio_stats {
	struct qps_prio_band_stats band[QPS_PRIO_BANDS];
	uint64_t bursts;	/* post calls made from the rings */
	uint64_t redrains;	/* owner re-drained for a missed producer */
	uint64_t stalls;	/* posts that took fewer items than offered */
	uint64_t lingers;	/* times a contended owner polled for more */
	uint64_t linger_hits;	/* ... and found an item it then posted */
	int last_err;		/* last -errno a post returned, 0 if none */
};

/*
 * The bands of one QP. Opaque to users; defined here only so that
 * qps_prio_enqueue()'s fast path (a lone sender's bypass) inlines into the
 * send path. Its protocol is in prio_bands.c.
 */
#define QPS_PRIO_OWNER 1u	/* owner word: a transmitter is running */
#define QPS_PRIO_MISSED 2u	/* ... and must look again before leaving */

struct qps_prio {
	/* Owner word: its own line; producers RMW it when the owner is busy. */
	alignas(QPS_MPSC_GUARD) _Atomic uint32_t state;

	/* Read-mostly. */
	alignas(QPS_MPSC_GUARD) qps_prio_post_fn post;
	void *arg;
	uint32_t burst;
	int64_t linger_ns;		/* 0: never linger */
	_Atomic bool paused;
	void (*release_hook)(void *arg);
	void *release_hook_arg;

	/* The cell tag of each ring holds the item's bytes. */
	struct qps_mpsc ring[QPS_PRIO_BANDS];

	/* Owner-written: the last owner may have left items of finished sends
	 * queued; read by the next owner before a bypass. */
	alignas(QPS_MPSC_GUARD) _Atomic bool backlog;
	/* Owner-written counters (one writer at a time, handed over with the
	 * owner word). */
	_Atomic uint64_t bypassed[QPS_PRIO_BANDS];
	_Atomic uint64_t bursts;
	_Atomic uint64_t redrains;
	_Atomic uint64_t stalls;
	_Atomic uint64_t lingers;
	_Atomic uint64_t linger_hits;
	_Atomic int last_err;

	/* Written by the holder of the post callback's lock, one at a time
	 * (qps_prio_bypass_locked()); not on the owner's line, since the
	 * two are often different threads. */
	alignas(QPS_MPSC_GUARD) _Atomic uint64_t bypassed_locked[QPS_PRIO_BANDS];

	/* Producers, only when a band is full (cold: atomic add). */
	alignas(QPS_MPSC_GUARD) _Atomic uint64_t drops[QPS_PRIO_BANDS];
};

/* Allocates everything the bands will ever use. 0, -EINVAL, -ENOMEM. */
int qps_prio_create(const struct qps_prio_cfg *cfg, struct qps_prio **out);
/* Items still queued are dropped (the caller owns what they point to). */
void qps_prio_destroy(struct qps_prio *b);

/* The band of priority @prio (masked with QPS_PRIO_MAX). */
static inline unsigned int qps_prio_band(unsigned int prio)
{
	return qps_prio2band[prio & QPS_PRIO_MAX];
}

/* Out-of-line halves of qps_prio_enqueue(); not for direct use. */
int qps_prio_slow_owner(struct qps_prio *b, unsigned int band, void *item,
			uint32_t bytes);
int qps_prio_slow_queue(struct qps_prio *b, unsigned int band, void *item,
			uint32_t bytes, uint32_t s);
int qps_prio_slow_finish(struct qps_prio *b);
int qps_prio_slow_refused(struct qps_prio *b, int ret);
int qps_prio_slow_drop(struct qps_prio *b, unsigned int band);

/* Single-writer counter: a plain load and store, no locked instruction. */
static inline void qps_prio_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* Gives back the transmitter taken for qps_prio_send()'s bypass of an
 * item in @band, draining what producers queued meanwhile (they flagged
 * MISSED). */
static inline void qps_prio_bypass_end(struct qps_prio *b, unsigned int band)
{
	uint32_t s = QPS_PRIO_OWNER;

	qps_prio_add(&b->bypassed[band], 1);
	/* Release side: pairs with the next owner's take; fails if a
	 * producer queued meanwhile (MISSED), which is then drained. */
	if (!b->release_hook &&
	    atomic_compare_exchange_strong_explicit(&b->state, &s, 0,
						    memory_order_seq_cst,
						    memory_order_seq_cst))
		return;
	qps_prio_slow_finish(b);
}

static inline int qps_prio_send(struct qps_prio *b, void *item,
				unsigned int prio, uint32_t bytes,
				bool count_drop)
{
	unsigned int band = qps_prio_band(prio);
	uint32_t s = atomic_load_explicit(&b->state, memory_order_relaxed);
	int ret;

	/* Take the free word. Acquire side: pairs with the release in
	 * qps_prio_release() (prio_bands.c) of the previous owner. */
	if (s == 0 &&
	    atomic_compare_exchange_strong_explicit(&b->state, &s,
						    QPS_PRIO_OWNER,
						    memory_order_seq_cst,
						    memory_order_relaxed)) {
		/*
		 * Bypass: post without touching the rings, unless the last
		 * owner may have left items of finished sends queued (the
		 * kernel's TCQ_F_CAN_BYPASS rule: only an empty qdisc is
		 * bypassed) or the transmitter is paused. Relaxed: written
		 * under the owner word, which ordered them for us.
		 */
		if (!atomic_load_explicit(&b->paused, memory_order_relaxed) &&
		    !atomic_load_explicit(&b->backlog, memory_order_relaxed)) {
			ret = b->post(b->arg, &item, 1, false);
			if (ret >= 1) {
				qps_prio_bypass_end(b, band);
				return 0;
			}
			qps_prio_slow_refused(b, ret);
		}
		ret = qps_prio_slow_owner(b, band, item, bytes);
	} else {
		ret = qps_prio_slow_queue(b, band, item, bytes, s);
	}
	if (ret == -EAGAIN && count_drop)
		return qps_prio_slow_drop(b, band);
	return ret;
}

/*
 * The bypass of a producer that holds the lock every post is made under
 * (tx.c: sq->lock, which the post callback takes, and under which it
 * built its item): whether it may post its item itself, now, without the
 * owner word. Yes when no owner runs, the last one left nothing of
 * finished sends queued (backlog) and nothing paused the bands. An owner
 * that takes the word after this look posts under that lock, so after
 * the caller; a producer that queued behind an owner keeps the word
 * nonzero until a drain went past its item, whose owner recorded backlog
 * if it stopped short. So no finished send is overtaken, as with the
 * word taken (docs/prio_queues.md, "Bypass under the producer's own
 * lock"). Count each item so posted with qps_prio_bypass_locked_count().
 */
static inline bool qps_prio_bypass_locked(struct qps_prio *b)
{
	/* Acquire: pairs with the release in qps_prio_release() of the last
	 * owner, so its backlog store below is seen. */
	if (atomic_load_explicit(&b->state, memory_order_acquire))
		return false;
	/* Relaxed: backlog is ordered by the acquire above; paused is a
	 * test hook, set by the thread that then sends. */
	return !atomic_load_explicit(&b->backlog, memory_order_relaxed) &&
	       !atomic_load_explicit(&b->paused, memory_order_relaxed);
}

/* One item posted by qps_prio_bypass_locked()'s caller, in @band. Under
 * that lock: its holders are this counter's writers, one at a time. */
static inline void qps_prio_bypass_locked_count(struct qps_prio *b,
						unsigned int band)
{
	qps_prio_add(&b->bypassed_locked[band], 1);
}

/*
 * qps_prio_enqueue - send @item (any pointer value) of @bytes at priority
 * @prio: posted now or queued for the owner; 0 either way. -EAGAIN when
 * its band is full (nothing queued, counted in drops).
 */
static inline int qps_prio_enqueue(struct qps_prio *b, void *item,
				   unsigned int prio, uint32_t bytes)
{
	return qps_prio_send(b, item, prio, bytes, true);
}

/*
 * Between two attempts of a producer waiting for room in a band: make
 * room (reap send completions) or sleep until there may be some. 0: try
 * again; a negative errno ends the wait with it, -EAGAIN meaning the wait
 * timed out.
 */
typedef int (*qps_prio_wait_fn)(void *arg);

/*
 * qps_prio_enqueue_wait - as qps_prio_enqueue(), but while the band is
 * full keep trying, helping the owner with qps_prio_kick() and calling
 * @wait(@arg) between attempts. Returns 0, or @wait's error: -EAGAIN is
 * counted as a drop, as qps_prio_enqueue() counts a full band.
 */
int qps_prio_enqueue_wait(struct qps_prio *b, void *item, unsigned int prio,
			  uint32_t bytes, qps_prio_wait_fn wait, void *arg);

/*
 * qps_prio_kick - drain what is queued if no one is draining: call it when
 * room appears on the QP after a post took fewer items than offered (send
 * completions reaped). Returns the number of items this call posted; 0
 * when another thread owns the transmitter (it will re-check the bands).
 */
int qps_prio_kick(struct qps_prio *b);

/* Items queued in all bands (claimed and not yet posted). */
int qps_prio_pending(const struct qps_prio *b);

int qps_prio_stats(const struct qps_prio *b, struct qps_prio_stats *st);

/*
 * Pause and resume the transmitter: while paused the owner posts nothing
 * and producers only queue (tests; also a QP being re-created). Resume
 * kicks and returns what that kick posted.
 */
int qps_prio_pause(struct qps_prio *b);
int qps_prio_resume(struct qps_prio *b);

/*
 * Test hook: @fn(@arg) runs in the owner after its last drain found the
 * bands empty and before it releases the flag, i.e. inside the window
 * where a producer's item could be stranded. Set it while no thread sends.
 */
int qps_prio_set_release_hook(struct qps_prio *b, void (*fn)(void *arg),
			      void *arg);

/* Test hook: the ring of @band, so a test can claim a cell and leave it
 * unpublished, as a producer descheduled inside its push would. */
struct qps_mpsc *qps_prio_test_ring(struct qps_prio *b, unsigned int band);

#endif /* QPS_PRIO_BANDS_H */
