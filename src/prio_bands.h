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
 * sure no producer enqueued behind its back (the "missed" flag). No thread
 * ever waits for another.
 */
#ifndef QPS_PRIO_BANDS_H
#define QPS_PRIO_BANDS_H

#include <stdbool.h>
#include <stdint.h>

#define QPS_PRIO_BANDS 3
#define QPS_PRIO_MAX 15			/* priorities are masked with this */
#define QPS_PRIO_DEFAULT_DEPTH 256
#define QPS_PRIO_DEFAULT_BURST 32
#define QPS_PRIO_BURST_MAX 64

/* Linux's prio2band (sch_generic.c): band 0 is served first. */
extern const uint8_t qps_prio2band[QPS_PRIO_MAX + 1];

/*
 * Post callback: hand @n (>= 1) items, in order, to the device. Returns
 * how many it took from the front (0..n) or -errno. Taking fewer than @n
 * (QP full, error) ends the drain and leaves the rest queued at the head
 * of their band, in order. @more (the doorbell hint): another published
 * item is waiting, so another post follows at once unless this one takes
 * fewer than @n or the transmitter is paused. Called only by the current
 * owner, so never concurrently.
 */
typedef int (*qps_prio_post_fn)(void *arg, void **items, unsigned int n,
				bool more);

struct qps_prio_cfg {
	qps_prio_post_fn post;
	void *arg;			/* for post and idle */
	/* Ring capacity per band: a power of two, 0 = default. */
	uint32_t depth[QPS_PRIO_BANDS];
	uint32_t burst;			/* items per post, 0 = default */
	/* qps_prio_enqueue_wait() calls it between attempts (reap send
	 * completions here); a negative return ends the wait with it.
	 * NULL = sched_yield(). */
	int (*idle)(void *arg);
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
	int last_err;		/* last -errno a post returned, 0 if none */
};

struct qps_prio;

/* Allocates everything the bands will ever use. 0, -EINVAL, -ENOMEM. */
int qps_prio_create(const struct qps_prio_cfg *cfg, struct qps_prio **out);
/* Items still queued are dropped (the caller owns what they point to). */
void qps_prio_destroy(struct qps_prio *b);

/* The band of priority @prio (masked with QPS_PRIO_MAX). */
static inline unsigned int qps_prio_band(unsigned int prio)
{
	return qps_prio2band[prio & QPS_PRIO_MAX];
}

/*
 * qps_prio_enqueue - send @item (any pointer value) of @bytes at priority
 * @prio: posted now or queued for the owner; 0 either way. -EAGAIN when
 * its band is full (nothing queued, counted in drops).
 */
int qps_prio_enqueue(struct qps_prio *b, void *item, unsigned int prio,
		     uint32_t bytes);

/*
 * qps_prio_enqueue_wait - as qps_prio_enqueue(), but while the band is
 * full keep trying (helping the owner with qps_prio_kick() and calling the
 * idle callback between attempts) for up to @timeout_ns; a negative
 * timeout waits without limit. -EAGAIN on timeout, or the idle callback's
 * error.
 */
int qps_prio_enqueue_wait(struct qps_prio *b, void *item, unsigned int prio,
			  uint32_t bytes, int64_t timeout_ns);

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

#endif /* QPS_PRIO_BANDS_H */
