// SPDX-License-Identifier: MIT
/*
 * prio_bands.c - three priority bands of MPSC rings and the transmitter
 * owner protocol (docs/prio_queues.md).
 *
 * The owner word is 0 (free), OWNER, or OWNER|MISSED; MISSED never stands
 * alone. A producer that has published its item either takes the word or
 * sets MISSED with a read-modify-write, so it is ordered against the
 * owner's release: before it, the owner sees MISSED and drains again;
 * after it, the producer finds the word free and becomes the owner itself.
 * Either way its item is posted (the STATE_MISSED fix of the lockless
 * qdisc, without its spinlock). When MISSED is already set the producer
 * skips the write, so with a busy owner the word's cache line is written
 * once per drain round rather than once per item; that needs its publish
 * and its look at the word to be seq_cst, like the owner's exchange that
 * clears MISSED and its loads of the cells (see qps_prio_flag()). Every
 * other access to the word is a seq_cst RMW too: on x86 that costs
 * nothing over acq_rel, and it keeps a single total order to reason in.
 *
 * An owner that has seen another producer lingers before it releases
 * (qps_prio_linger()): it keeps posting what arrives, so the word stays
 * OWNER|MISSED and stops moving between cores. That only adds drains in
 * front of the drain-and-release step, which alone decides when it may
 * leave.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpsc_ring.h"
#include "udma.h"
#include "prio_bands.h"

const uint8_t qps_prio2band[QPS_PRIO_MAX + 1] = {
	1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
};

int qps_prio_create(const struct qps_prio_cfg *cfg, struct qps_prio **out)
{
	struct qps_prio *b;
	uint32_t depth;
	int i, ret;

	if (!cfg || !cfg->post || !out || cfg->burst > QPS_PRIO_BURST_MAX ||
	    cfg->linger_ns > QPS_PRIO_LINGER_MAX_NS)
		return -EINVAL;
	b = aligned_alloc(QPS_MPSC_GUARD, sizeof(*b));
	if (!b)
		return -ENOMEM;
	memset(b, 0, sizeof(*b));
	b->post = cfg->post;
	b->arg = cfg->arg;
	b->burst = cfg->burst ? cfg->burst : QPS_PRIO_DEFAULT_BURST;
	b->linger_ns = cfg->linger_ns < 0 ? 0 : cfg->linger_ns ?
		       cfg->linger_ns : QPS_PRIO_DEFAULT_LINGER_NS;
	for (i = 0; i < QPS_PRIO_BANDS; i++) {
		depth = cfg->depth[i] ? cfg->depth[i] : QPS_PRIO_DEFAULT_DEPTH;
		ret = qps_mpsc_init(&b->ring[i], depth);
		if (ret < 0)
			goto err;
	}
	*out = b;
	return 0;
err:
	qps_prio_destroy(b);
	return ret;
}

void qps_prio_destroy(struct qps_prio *b)
{
	int i;

	if (!b)
		return;
	for (i = 0; i < QPS_PRIO_BANDS; i++)
		qps_mpsc_fini(&b->ring[i]);
	free(b);
}

/*
 * After publishing an item: take the transmitter, or make sure its owner
 * drains again (MISSED). Returns true if we took it.
 *
 * Taking it (acquire side) pairs with the release in qps_prio_release(),
 * so the previous owner's consumer state is ours. Setting MISSED (release
 * side) pairs with the exchange in qps_prio_release(), so our item is
 * visible to the owner's next drain. With @sc the item was published
 * seq_cst and MISSED found set needs no write: our publish precedes our
 * load of the word, which precedes the exchange that will clear MISSED
 * (the load read an older value), which precedes the owner's seq_cst loads
 * of the cells, all in the single seq_cst order; so the drain after that
 * exchange sees the item. A plain acquire/release pair could not promise
 * it: the load could be satisfied while our store is still buffered.
 */
static bool qps_prio_flag(struct qps_prio *b, bool sc)
{
	uint32_t s = atomic_load_explicit(&b->state, memory_order_seq_cst);

	for (;;) {
		uint32_t n;

		if (sc && s == (QPS_PRIO_OWNER | QPS_PRIO_MISSED))
			return false;
		n = s ? (s | QPS_PRIO_MISSED) : QPS_PRIO_OWNER;
		if (atomic_compare_exchange_weak_explicit(&b->state, &s, n,
							  memory_order_seq_cst,
							  memory_order_seq_cst))
			return s == 0;
	}
}

/*
 * Owner, before releasing: could a later send overtake an item whose send
 * has returned? A band holding exactly one claimed but unpublished cell
 * holds a send still in progress (its producer has not published, so has
 * not returned): that does not count, so a producer descheduled inside
 * its push does not stop the others' bypass. Anything more counts, even if
 * unpublished at the head (items behind it may be finished sends).
 */
static bool qps_prio_backlog(struct qps_prio *b)
{
	int i;

	/*
	 * Seq_cst, both loads: a producer that found MISSED set wrote no
	 * word, only claimed (seq_cst) and published (seq_cst) before its
	 * look at the word, which precedes our exchange that cleared MISSED
	 * and so these loads in the single total order; they see its item,
	 * which its own next send must not bypass. A relaxed head could be
	 * older than that claim (tests/model/prio_owner.pml,
	 * MUT_RELAXED_BACKLOG).
	 */
	for (i = 0; i < QPS_PRIO_BANDS; i++) {
		uint32_t n = qps_mpsc_count_mo(&b->ring[i],
					       memory_order_seq_cst);

		if (n > 1 || (n == 1 && qps_mpsc_ready_mo(&b->ring[i], 0,
							  memory_order_seq_cst)))
			return true;
	}
	return false;
}

int qps_prio_pending(const struct qps_prio *b)
{
	int i, n = 0;

	for (i = 0; i < QPS_PRIO_BANDS; i++)
		n += (int)qps_mpsc_count(&b->ring[i]);
	return n;
}

static void qps_prio_stall(struct qps_prio *b, int ret)
{
	qps_prio_add(&b->stalls, 1);
	if (ret < 0)
		atomic_store_explicit(&b->last_err, ret, memory_order_relaxed);
}

/*
 * The doorbell hint: after these @n items of @band, is another published
 * item waiting? Published, not merely claimed: a "more" that no post
 * follows would leave the doorbell code waiting for one. Reads the cells
 * the next peek reads anyway, not the producers' head lines.
 */
static bool qps_prio_more(struct qps_prio *b, int band, uint32_t n)
{
	int i;

	if (qps_mpsc_ready(&b->ring[band], n))
		return true;
	for (i = 0; i < QPS_PRIO_BANDS; i++)
		if (i != band && qps_mpsc_ready(&b->ring[i], 0))
			return true;
	return false;
}

/*
 * Owner: post bursts, highest band first, re-choosing the band after every
 * burst (strict priority), until the bands are empty, the transmitter is
 * paused, or a post takes fewer items than offered (then *@stopped). A
 * cell claimed but not yet published ends its band's burst early; its
 * producer will flag us. Returns the number of items posted.
 */
static uint32_t qps_prio_drain(struct qps_prio *b, bool *stopped)
{
	void *items[QPS_PRIO_BURST_MAX];
	uint32_t total = 0, n = 0;
	bool more = false;
	int band;

	*stopped = true;
	for (;;) {
		uint32_t k;
		int ret;

		if (atomic_load_explicit(&b->paused, memory_order_relaxed)) {
			/* The last post promised another: take it back. */
			if (more)
				b->post(b->arg, items, 0, false);
			return total;
		}
		for (band = 0; band < QPS_PRIO_BANDS; band++) {
			n = qps_mpsc_peek(&b->ring[band], items, NULL,
					  b->burst);
			if (n)
				break;
		}
		if (band == QPS_PRIO_BANDS) {
			*stopped = false;
			return total;
		}
		more = qps_prio_more(b, band, n);
		ret = b->post(b->arg, items, n, more);
		qps_prio_add(&b->bursts, 1);
		k = ret < 0 ? 0 : (uint32_t)ret > n ? n : (uint32_t)ret;
		if (k) {
			qps_mpsc_consume(&b->ring[band], k);
			total += k;
		}
		if (k < n) {
			qps_prio_stall(b, ret);
			return total;
		}
	}
}

/*
 * Owner: give the transmitter up, unless a producer flagged MISSED since
 * we took it or last cleared the flag: then stay owner, clear MISSED and
 * return false so the caller drains again.
 */
static bool qps_prio_release(struct qps_prio *b)
{
	uint32_t s = QPS_PRIO_OWNER;

	if (b->release_hook)
		b->release_hook(b->release_hook_arg);
	/* Release side: pairs with the acquire side of the RMW that takes
	 * the word next (qps_prio_flag() or qps_prio_send()): our consumes
	 * and counters happen before the next owner's drain. */
	if (atomic_compare_exchange_strong_explicit(&b->state, &s, 0,
						    memory_order_seq_cst,
						    memory_order_seq_cst))
		return true;
	/* Acquire side: pairs with the RMWs in qps_prio_flag() that set
	 * MISSED, so their items are visible to our next drain; seq_cst for
	 * the producers that found MISSED set and did not write. */
	atomic_exchange_explicit(&b->state, QPS_PRIO_OWNER,
				 memory_order_seq_cst);
	qps_prio_add(&b->redrains, 1);
	return false;
}

static int64_t qps_prio_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Owner, bands found empty while other producers are active: rather than
 * release at once, poll the head cell of every band, every
 * QPS_PRIO_LINGER_POLL_NS, for up to linger_ns without a new item (and
 * QPS_PRIO_LINGER_BUDGET times that in all per run, @until), and return
 * true as soon as one holds a published item; the caller drains it at
 * once. An item published meanwhile waits at most one poll period, which
 * is less than handing the owner word over would take; the cost is the
 * owner's own call, which returns up to linger_ns later.
 *
 * Why: on two cores, an owner that leaves as soon as the bands are empty
 * is taken back by the next send a few hundred ns later, so the owner
 * word, and with it the consumer's state, moves between the cores for
 * almost every message. A lingering owner keeps the word still: the
 * other producers find OWNER|MISSED and only publish (qps_prio_flag()'s
 * skip), and the owner reads their cells a burst at a time.
 *
 * The protocol is unchanged: lingering only inserts drains before
 * qps_prio_release(), which still decides whether the owner may leave.
 * Only the head cells' position words are read (acquire, as in
 * qps_mpsc_ready()); the drain that follows re-reads them with seq_cst.
 */
static bool qps_prio_linger(struct qps_prio *b, int64_t until)
{
	int64_t now = qps_prio_now_ns(), idle_end;
	int band;

	if (!b->linger_ns || now >= until)
		return false;
	qps_prio_add(&b->lingers, 1);
	idle_end = now + b->linger_ns;
	if (idle_end > until)
		idle_end = until;
	for (;;) {
		/*
		 * Not continuously: a look at the cell a producer is
		 * filling pulls its line over, and the producer's next
		 * locked instruction waits for it to come back. The clock
		 * (vDSO, TSC) touches no shared line.
		 */
		int64_t look = now + QPS_PRIO_LINGER_POLL_NS;

		do {
			qps_cpu_relax();
			now = qps_prio_now_ns();
		} while (now < look);
		if (atomic_load_explicit(&b->paused, memory_order_relaxed))
			return false;
		for (band = 0; band < QPS_PRIO_BANDS; band++)
			if (qps_mpsc_ready(&b->ring[band], 0)) {
				qps_prio_add(&b->linger_hits, 1);
				return true;
			}
		if (now >= idle_end)
			return false;
	}
}

/*
 * Owner: drain until the transmitter can be given up. Returns the items
 * posted. The loop is bounded: each extra round needs an item enqueued
 * during the previous one, and a band that is not drained (paused, QP
 * full) fills up.
 *
 * Before each release it records whether items of finished sends may
 * still be queued (qps_prio_backlog()): the drain stopped early, or it met
 * an unpublished cell with more behind it. The next owner must not bypass
 * such items. Items queued after this look belong to sends still in
 * progress, which no later send has to follow; their producers flag the
 * word and get them drained.
 */
static uint32_t qps_prio_run(struct qps_prio *b, bool contended)
{
	int64_t until = 0;
	uint32_t total = 0;
	bool stopped;

	do {
		if (contended && !until && b->linger_ns)
			until = qps_prio_now_ns() +
				QPS_PRIO_LINGER_BUDGET * b->linger_ns;
		do {
			total += qps_prio_drain(b, &stopped);
		} while (until && !stopped && qps_prio_linger(b, until));
		atomic_store_explicit(&b->backlog, qps_prio_backlog(b),
				      memory_order_relaxed);
		/* Releasing failed: a producer flagged us meanwhile. */
		contended = true;
	} while (!qps_prio_release(b));
	return total;
}

/* Queue @item in @band; seq_cst publish when @sc (see qps_prio_flag()). */
static int qps_prio_push(struct qps_prio *b, int band, void *item,
			 uint32_t bytes, bool sc)
{
	struct qps_mpsc *r = &b->ring[band];
	uint64_t pos;
	int ret;

	/* With @sc the claim too is seq_cst: qps_prio_backlog() must see
	 * it (an RMW: a locked instruction on x86 either way). */
	ret = qps_mpsc_claim_mo(r, 1, &pos, sc ? memory_order_seq_cst :
						 memory_order_relaxed);
	if (ret < 0)
		return ret;
	qps_mpsc_publish_mo(r, pos, &item, &bytes, 1,
			    sc ? memory_order_seq_cst : memory_order_release);
	return 0;
}

/* qps_prio_enqueue(): the owner cannot bypass; queue @item behind what
 * is queued, then drain. */
int qps_prio_slow_owner(struct qps_prio *b, unsigned int band, void *item,
			uint32_t bytes)
{
	int ret = qps_prio_push(b, (int)band, item, bytes, false);
	bool stopped;

	/* Full: we are the transmitter, make room first. */
	if (ret == -EAGAIN && qps_prio_drain(b, &stopped))
		ret = qps_prio_push(b, (int)band, item, bytes, false);
	qps_prio_run(b, false);
	return ret;
}

/* qps_prio_enqueue(): the owner word read @s (busy); queue @item and flag
 * the owner. When it was already flagged try to get by without writing
 * the word. */
int qps_prio_slow_queue(struct qps_prio *b, unsigned int band, void *item,
			uint32_t bytes, uint32_t s)
{
	bool sc = s == (QPS_PRIO_OWNER | QPS_PRIO_MISSED);
	int ret = qps_prio_push(b, (int)band, item, bytes, sc);

	/* We found the word busy, then took it: the previous owner had just
	 * left, another sender is active. */
	if (ret == 0 && qps_prio_flag(b, sc))
		qps_prio_run(b, true);
	return ret;
}

/* qps_prio_enqueue(): after a bypass, give the transmitter up (draining
 * whatever producers queued meanwhile: they flagged MISSED). */
int qps_prio_slow_finish(struct qps_prio *b)
{
	if (!qps_prio_release(b))
		qps_prio_run(b, true);
	return 0;
}

/* qps_prio_enqueue(): the bypass post took nothing (@ret). */
int qps_prio_slow_refused(struct qps_prio *b, int ret)
{
	qps_prio_stall(b, ret);
	return 0;
}

int qps_prio_slow_drop(struct qps_prio *b, unsigned int band)
{
	atomic_fetch_add_explicit(&b->drops[band], 1, memory_order_relaxed);
	return -EAGAIN;
}

int qps_prio_enqueue_wait(struct qps_prio *b, void *item, unsigned int prio,
			  uint32_t bytes, qps_prio_wait_fn wait, void *arg)
{
	for (;;) {
		int ret = qps_prio_send(b, item, prio, bytes, false);

		if (ret != -EAGAIN)
			return ret;
		qps_prio_kick(b);
		ret = wait(arg);
		if (ret == -EAGAIN)
			break;
		if (ret < 0)
			return ret;
	}
	return qps_prio_slow_drop(b, qps_prio_band(prio));
}

int qps_prio_kick(struct qps_prio *b)
{
	if (!qps_prio_flag(b, false))
		return 0;
	return (int)qps_prio_run(b, false);
}

int qps_prio_pause(struct qps_prio *b)
{
	atomic_store_explicit(&b->paused, true, memory_order_relaxed);
	return 0;
}

int qps_prio_resume(struct qps_prio *b)
{
	atomic_store_explicit(&b->paused, false, memory_order_relaxed);
	return qps_prio_kick(b);
}

int qps_prio_set_release_hook(struct qps_prio *b, void (*fn)(void *arg),
			      void *arg)
{
	b->release_hook = fn;
	b->release_hook_arg = arg;
	return 0;
}

struct qps_mpsc *qps_prio_test_ring(struct qps_prio *b, unsigned int band)
{
	return band < QPS_PRIO_BANDS ? &b->ring[band] : NULL;
}

int qps_prio_stats(const struct qps_prio *b, struct qps_prio_stats *st)
{
	int band;

	memset(st, 0, sizeof(*st));
	for (band = 0; band < QPS_PRIO_BANDS; band++) {
		const struct qps_mpsc *r = &b->ring[band];
		struct qps_prio_band_stats *bs = &st->band[band];
		uint64_t c = atomic_load_explicit(&r->cons,
						  memory_order_relaxed);
		uint64_t h = atomic_load_explicit(&r->head,
						  memory_order_relaxed);
		uint64_t i;

		bs->enqueued = h;
		bs->dequeued = c;
		bs->depth = qps_mpsc_used(h, c);
		if (bs->depth > r->cap)
			bs->depth = r->cap;
		/* Cells still being written count with a stale length. */
		for (i = 0; i < bs->depth; i++)
			bs->bytes += atomic_load_explicit(
				&r->cells[(c + i) & r->mask].aux,
				memory_order_relaxed);
		bs->bypassed = atomic_load_explicit(&b->bypassed[band],
						    memory_order_relaxed) +
			       atomic_load_explicit(&b->bypassed_locked[band],
						    memory_order_relaxed);
		bs->drops = atomic_load_explicit(&b->drops[band],
						 memory_order_relaxed);
	}
	st->bursts = atomic_load_explicit(&b->bursts, memory_order_relaxed);
	st->redrains = atomic_load_explicit(&b->redrains, memory_order_relaxed);
	st->stalls = atomic_load_explicit(&b->stalls, memory_order_relaxed);
	st->lingers = atomic_load_explicit(&b->lingers, memory_order_relaxed);
	st->linger_hits = atomic_load_explicit(&b->linger_hits,
					       memory_order_relaxed);
	st->last_err = atomic_load_explicit(&b->last_err, memory_order_relaxed);
	return 0;
}
