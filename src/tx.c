// SPDX-License-Identifier: MIT
/*
 * Send path: pick the send queue of each datagram (txq_select.c: the
 * cached pick of a connected endpoint, the flow table for the others),
 * build the frame in one of that queue's registered slots (under sq->lock)
 * and hand the slot, without the lock, to the queue's priority band
 * (prio_bands.c); the band owner posts it through the queue's send path
 * (sq_path.h), taking sq->lock in the post callback. Lock-free:
 * the hand-over and the choice of the one transmitter; under sq->lock:
 * slots, frame build, WQEs, doorbell, reaping (docs/prio_queues.md,
 * "Integration"). "More follows" (QPS_MSG_MORE, the rest of a
 * qps_sendmmsg batch) lets the doorbell wait; doorbell.c decides when it
 * is rung. A slot returns to its queue's free stack when its send
 * completes, and the completion is counted for the flow table's in-flight
 * rule. Completion moderation: a WQE asks for a completion every
 * ctx->tx_signal WQEs and the last one before each doorbell always does
 * (doorbell.c and the send path); a completion returns every slot
 * posted up to its own, in the order they were posted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "sq.h"
#include "thread_id.h"
#include "tx_wait.h"
#include "txts.h"
#include "ud.h"

#define QPS_TX_FLAGS (QPS_MSG_DONTWAIT | QPS_MSG_MORE)

/* The datagram path is a chain of calls; a call between the functions
 * marked hot costs more (the callee-saved registers of a large function
 * each way) than their bodies do on a small datagram, so they are inlined
 * into their callers whatever LTO decides. The branches a bypassed
 * datagram under its queue's template does not take are kept out of line
 * instead, so that the hot path has the registers to itself: cold when
 * rare, else only apart, since for some senders they are every datagram
 * (a template rebuilt by a sender that changes destination, a build
 * without offload). */
#define QPS_TX_HOT static inline __attribute__((always_inline))
#define QPS_TX_APART static __attribute__((noinline))
#define QPS_TX_COLD static __attribute__((noinline, cold))

void qps_tx_slot_put(struct qps_sq *sq, uint32_t slot)
{
	sq->free[sq->nfree++] = slot;
	/* Relaxed: a hint for qps_tx_poll, which decides under the lock. */
	__atomic_store_n(&sq->inflight, sq->inflight - 1, __ATOMIC_RELAXED);
}

void qps_tx_posted_push(struct qps_sq *sq, uint32_t slot)
{
	/* Never full: a slot is in the ring at most once, and the ring has
	 * at least tx_depth entries. */
	sq->post_pos[slot] = sq->post_head;
	sq->posted[sq->post_head & sq->post_mask] = slot;
	sq->post_head++;
}

void qps_tx_posted_unpush(struct qps_sq *sq, uint32_t n)
{
	if (n > sq->post_head - sq->post_tail)
		n = sq->post_head - sq->post_tail;
	sq->post_head -= n;
}

/*
 * A completion for @wr_id: give back its slot and every slot posted
 * before it on this QP, which completed with it (a device completes a
 * send queue's WQEs in order, and moderated ones without a CQE of their
 * own). Returns how many, or 0 when @wr_id is not a posted slot (a stray
 * or repeated completion): then nothing is given back, since its slot may
 * be free or in use already.
 */
static uint32_t qps_tx_reap_upto(struct qps_sq *sq, uint64_t wr_id,
				 const struct qps_wc_ts *ts, uint32_t failed)
{
	uint32_t slot, pos, n, k;
	bool stamps;

	if (wr_id >= sq->ctx->tx_depth)
		return 0;
	slot = (uint32_t)wr_id;
	pos = sq->post_pos[slot];
	/* Free-running positions: inside [tail, head) and holding @slot,
	 * else a stale position of a slot reaped before. */
	if (pos - sq->post_tail >= sq->post_head - sq->post_tail ||
	    sq->posted[pos & sq->post_mask] != slot)
		return 0;
	n = pos - sq->post_tail + 1;
	/* No slot carries QPS_TXM_TS before txts_on is set (txts.c sets it
	 * first, and it stays set; the slot was written under this lock):
	 * until then the loop need not read the slots' metadata. */
	stamps = __atomic_load_n(&sq->ctx->txts_on, __ATOMIC_RELAXED);
	for (k = 0; k < n; k++) {
		uint32_t s = sq->posted[(sq->post_tail + k) & sq->post_mask];

		/* The @failed newest did not go out: an error completion
		 * fails its own WQE, not those before it (see
		 * qps_tx_reap_locked). */
		if (stamps && (sq->meta[s].flags & QPS_TXM_TS))
			qps_txts_done(sq, &sq->meta[s], ts,
				      n - k <= failed);
		sq->free[sq->nfree++] = s;
	}
	sq->post_tail = pos + 1;
	/* Relaxed: as in qps_tx_slot_put, once for them all. */
	__atomic_store_n(&sq->inflight, sq->inflight - n, __ATOMIC_RELAXED);
	return n;
}

uint32_t qps_tx_reclaim_locked(struct qps_sq *sq)
{
	uint32_t n = sq->post_head - sq->post_tail;

	if (!n)
		return 0;
	/* Every one failed, none with a completion. */
	qps_tx_reap_upto(sq, sq->posted[(sq->post_head - 1) & sq->post_mask],
			 NULL, UINT32_MAX);
	sq->st->errors += n;
	sq->st->reaped += n;
	qps_txq_complete(sq->ctx->txq, (int)sq->idx, n);
	return n;
}

/* A batch of @sq's completions, with their stamps (on CLOCK_REALTIME)
 * once an endpoint asked for transmit times; stamped by no clock else. */
static int qps_tx_poll_cq(struct qps_sq *sq, struct ibv_wc *wc,
			  struct qps_wc_ts *wts)
{
	struct qps_ctx *ctx = sq->ctx;
	int n;

	if (__atomic_load_n(&ctx->txts_on, __ATOMIC_RELAXED)) {
		n = ctx->ops->poll_cq_ts(sq->cq, QPS_RX_POLL_BATCH, wc, wts);
		if (n > 0)
			qps_rx_ts_convert(ctx, wts, n);
		if (n != -EOPNOTSUPP)
			return n;
	}
	n = ctx->ops->poll_cq(sq->cq, QPS_RX_POLL_BATCH, wc);
	if (n > 0)
		memset(wts, 0, (size_t)n * sizeof(*wts));
	return n;
}

/*
 * The completion side of @sq's QP: every CQE returns its slot and the
 * unsignalled ones posted before it; the WQEs reaped are counted, per poll
 * batch, for txq_select (errors and flushes too: a failed WR is no longer
 * in flight). An error CQE is one error, its own WQE's: the ones before
 * it completed (a device reports an error whether the WQE was signalled
 * or not, so each flushed WQE after it has its own error CQE). An error
 * means the QP failed: its generation moves, so connected endpoints that
 * cached it pick again. A CQE naming no posted slot is counted as an
 * error and otherwise ignored. Returns the WQEs reaped.
 */
int qps_tx_reap_locked(struct qps_sq *sq)
{
	struct qps_ctx *ctx = sq->ctx;
	struct ibv_wc wc[QPS_RX_POLL_BATCH];
	struct qps_wc_ts wts[QPS_RX_POLL_BATCH];
	bool failed = false;
	int total = 0;
	int n, i;

	do {
		uint32_t done = 0;

		n = qps_tx_poll_cq(sq, wc, wts);
		if (n < 0)
			return n;
		for (i = 0; i < n; i++) {
			uint32_t k = qps_tx_reap_upto(
				sq, wc[i].wr_id, &wts[i],
				wc[i].status != IBV_WC_SUCCESS);

			if (wc[i].status != IBV_WC_SUCCESS || !k)
				sq->st->errors++;
			if (wc[i].status != IBV_WC_SUCCESS)
				failed = true;
			if (!k)
				qps_log_dbg("send queue %u: completion for "
					    "wr_id %llu, not a posted slot",
					    sq->idx,
					    (unsigned long long)wc[i].wr_id);
			done += k;
		}
		if (done && qps_txq_complete(ctx->txq, (int)sq->idx,
					     done) < 0)
			qps_log_dbg("send queue %u: %u completions beyond "
				    "the posted count", sq->idx, done);
		sq->st->reaped += done;
		total += (int)done;
	} while (n == QPS_RX_POLL_BATCH);
	if (failed) {
		qps_txq_qp_reset(ctx->txq, (int)sq->idx);
		/* The QP is in the error state: qp_recover.c brings it back
		 * at the next progress call. */
		if (ctx->info.caps & QPS_DEV_CAP_QP_ERR) {
			if (!sq->qp_err)
				sq->st->qp_errors++;
			/* Relaxed: see qps_tx_poll. */
			__atomic_store_n(&sq->qp_err, true, __ATOMIC_RELAXED);
		}
	}
	return total;
}

/*
 * Nothing for a poll to do on @sq, as far as a thread without its lock
 * can tell: no WQE unrung, no slot in flight, no failed QP. Relaxed
 * loads of fields written under the lock: a send under way on another
 * thread may be missed, and it rings and reaps its own (or the bounded
 * delay rings it); what this thread sent it sees.
 */
static bool qps_tx_idle_hint(const struct qps_sq *sq)
{
	return !__atomic_load_n(&sq->unrung, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&sq->inflight, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&sq->qp_err, __ATOMIC_RELAXED) &&
	       !(sq->idx == 0 &&
		 __atomic_load_n(&sq->ctx->rx.qp_err, __ATOMIC_RELAXED));
}

/* Every send queue idle by qps_tx_idle_hint: what the receive path asks
 * before it calls qps_tx_poll_rx, so that a context that is not sending
 * costs it no more than these loads. */
bool qps_tx_idle_all(const struct qps_ctx *ctx)
{
	const struct qps_sq *sq = ctx->sq, *end = sq + ctx->nsq;

	for (; sq < end; sq++)
		if (!qps_tx_idle_hint(sq))
			return false;
	return true;
}

static int qps_tx_poll_some(struct qps_ctx *ctx, enum qps_txf cause,
			    bool skip_idle)
{
	int total = 0, err = 0;
	uint32_t i;

	for (i = 0; i < ctx->nsq; i++) {
		struct qps_sq *sq = &ctx->sq[i];
		int ret;

		if (skip_idle && qps_tx_idle_hint(sq))
			continue;
		qps_alock_lock(&sq->lock);
		qps_db_ring_locked(sq, cause);
		ret = qps_tx_reap_locked(sq);
		qps_qp_recover_locked(sq);
		qps_alock_unlock(&sq->lock);
		if (ret < 0 && !err)
			err = ret;
		else if (ret > 0)
			total += ret;
	}
	return err ? err : total;
}

int qps_tx_poll(struct qps_ctx *ctx, enum qps_txf cause)
{
	return qps_tx_poll_some(ctx, cause, false);
}

static bool qps_tx_nested(void);

/* A receive-only thread takes no send queue lock. */
int qps_tx_poll_rx(struct qps_ctx *ctx)
{
	if (qps_tx_nested())
		return 0;
	return qps_tx_poll_some(ctx, QPS_TXF_POLL, true);
}

/*
 * Count the frame in @slot (@len bytes; in the pieces @f instead, if not
 * NULL: sq_path.h) on the QP (qps_txq_enqueue; its head in *@head) and
 * write it to the send queue. @more: another frame follows at once
 * (MSG_MORE, a batch), so the doorbell may wait; otherwise it is rung
 * now. A full send queue rings it regardless. Returns 0 or -errno; a
 * frame that could not be written is uncounted and its slot given back.
 */
QPS_TX_HOT int qps_tx_xmit_locked(struct qps_sq *sq, uint32_t slot,
				  const struct qps_tx_frame *f, uint32_t len,
				  bool more, uint32_t *head)
{
	struct qps_ctx *ctx = sq->ctx;
	bool sig;
	int ret;

	/* Counted before the WQE exists: a device that reads ahead may run
	 * it before our doorbell, and a completion must never precede its
	 * count (docs/txq_select.md). */
	qps_txq_enqueue(ctx->txq, (int)sq->idx, 1, head);
	/* Every tx_signal-th WQE asks for a completion; the last one before
	 * a doorbell is made to at ring time (qps_db_ring_locked). */
	sig = sq->since_sig + 1 >= ctx->tx_signal;
	/* Transmit times: its own completion, and the time it was posted. */
	if (sq->meta[slot].flags & QPS_TXM_TS) {
		sig = true;
		qps_txts_posted(&sq->meta[slot]);
	}
	ret = sq->path->write(sq, slot, f, len, sig);
	if (ret < 0) {
		/* Ask the path again: it knows better than the count. */
		sq->room_seen = 0;
		/* Posted by the band owner after its sender returned:
		 * tx_errors is where the loss shows. */
		sq->st->errors++;
		qps_txts_done(sq, &sq->meta[slot], NULL, true);
		qps_txq_enqueue_cancel(ctx->txq, (int)sq->idx, 1);
		qps_tx_slot_put(sq, slot);
		return ret;
	}
	qps_tx_posted_push(sq, slot);
	/* 0 (not asked since) stays so, and so does UINT32_MAX, a path
	 * without a bound of its own. */
	if (sq->room_seen && sq->room_seen != UINT32_MAX)
		sq->room_seen--;
	if (sig) {
		sq->since_sig = 0;
		sq->st->signaled++;
	} else {
		sq->since_sig++;
	}
	/* Relaxed: see qps_db_ring_locked. */
	__atomic_store_n(&sq->unrung, sq->unrung + 1, __ATOMIC_RELAXED);
	sq->st->wqes++;
	if (!more)
		ret = qps_db_ring_locked(sq, QPS_TXF_SEND);
	else if (!qps_tx_room_locked(sq))
		ret = qps_db_ring_locked(sq, QPS_TXF_FULL);
	else
		ret = 0;
	return ret < 0 ? ret : 0;
}

int qps_tx_end_locked(struct qps_sq *sq, bool more)
{
	if (!sq->unrung)
		return 0;
	if (more)
		return qps_db_defer_locked(sq);
	return qps_db_ring_locked(sq, QPS_TXF_SEND);
}

/*
 * Post one parked slot (band owner, under sq->lock): count it on the QP,
 * write its WQE (from @f if not NULL: sq_path.h), then, now that it has a
 * head, commit its flow and take it out of the parked count
 * (qps_txq_park orders the two).
 */
QPS_TX_HOT void qps_tx_post_slot_locked(struct qps_sq *sq, uint32_t slot,
					    const struct qps_tx_frame *f,
					    bool more)
{
	struct qps_ctx *ctx = sq->ctx;
	const struct qps_tx_meta *m = &sq->meta[slot];
	uint32_t head;
	int ret;

	ret = qps_tx_xmit_locked(sq, slot, f, m->len, more, &head);
	if (ret == 0 && (m->flags & QPS_TXM_FLOW))
		qps_txq_flow_commit(ctx->txq, m->hash, (int)sq->idx, head);
	qps_txq_park(ctx->txq, (int)sq->idx, -1);
	if (ret == 0 && !(m->flags & QPS_TXM_FRAG)) {
		sq->st->packets++;
		sq->st->bytes += m->bytes;
	}
}

/*
 * The bands' post callback (qps_tx_prio_post): runs in whichever producer
 * owns the bands (or a kick), never under sq->lock, and takes it for the
 * whole burst; and a bypass's post (qps_tx_one), whose one item may be in
 * the pieces @f (sq_path.h; NULL: in its slot, as every item of the
 * callback's). A frame is written with the `more` hint when another
 * follows in this burst, the module has more queued (@more), or its
 * sender said more follows (QPS_TXM_MORE); the burst is rung at its end
 * (see below). A frame the device refuses is counted in tx_errors and its
 * slot freed by qps_tx_xmit_locked, so every item offered is taken.
 */
QPS_TX_HOT void qps_tx_post_burst_locked(struct qps_sq *sq, void **items,
					 unsigned int n, bool more,
					 const struct qps_tx_frame *f)
{
	uintptr_t last_who = 0;
	bool plain = n == 0;
	unsigned int i;

	if (qps_dump_on(sq->ctx))
		qps_dump_tx(sq, items, n, f);
	for (i = 0; i < n; i++) {
		uint32_t slot = (uint32_t)((uintptr_t)items[i] - 1);
		/* Read before the post: a refused frame's slot is freed. */
		uint32_t flags = sq->meta[slot].flags;

		plain |= !(flags & QPS_TXM_MORE);
		last_who = sq->meta[slot].who;
		qps_tx_post_slot_locked(sq, slot, i ? NULL : f,
					more || i + 1 < n ||
					(flags & QPS_TXM_MORE));
	}
	/* Unless a post follows, what was written with the `more` hint is
	 * rung here as soon as one datagram of the burst did not ask for
	 * MORE: another thread's MORE tail must not hold it back. That
	 * covers a refused last frame (the others were written for the
	 * doorbell it would have rung) and @n 0 (the owner stopped after a
	 * `more`: paused). A burst of MORE datagrams only waits for its
	 * sender's end, or for the bounded delay if that sender may have
	 * returned already. */
	if (!more && sq->unrung) {
		if (plain)
			qps_db_ring_locked(sq, QPS_TXF_SEND);
		else if (last_who != qps_thread_id())
			qps_db_defer_locked(sq);
	}
}

int qps_tx_prio_post(void *arg, void **items, unsigned int n, bool more)
{
	struct qps_sq *sq = arg;

	qps_alock_lock(&sq->lock);
	qps_tx_post_burst_locked(sq, items, n, more, NULL);
	qps_alock_unlock(&sq->lock);
	return (int)n;
}

/* The free slot on top of @sq's stack, which has room
 * (qps_tx_room_locked). */
static inline int qps_tx_slot_take_locked(struct qps_sq *sq, uint32_t *slot)
{
	if (sq->qp_dead)
		return -ENETDOWN;
	*slot = sq->free[--sq->nfree];
	/* Relaxed: see qps_tx_slot_put. */
	__atomic_store_n(&sq->inflight, sq->inflight + 1, __ATOMIC_RELAXED);
	return 0;
}

/*
 * A free slot of @sq, waiting (tx_wait.c) when the endpoint may. A
 * postponed doorbell is rung first: the queue drains only once rung.
 */
static int qps_tx_slot_get_locked(struct qps_tx_wait *w, struct qps_sq *sq,
				  bool dontwait, uint32_t *slot)
{
	if (sq->qp_dead)
		return -ENETDOWN;
	while (!qps_tx_room_locked(sq)) {
		int ret = qps_db_ring_locked(sq, QPS_TXF_FULL);

		if (ret < 0)
			return ret;
		ret = qps_tx_reap_locked(sq);
		if (ret < 0)
			return ret;
		if (qps_tx_room_locked(sq))
			break;
		if (dontwait)
			return -EAGAIN;
		qps_alock_unlock(&sq->lock);
		ret = qps_tx_wait_room(w, sq);
		qps_alock_lock(&sq->lock);
		if (ret < 0)
			return ret;
	}
	return qps_tx_slot_take_locked(sq, slot);
}

/* The connected peer's MAC, re-resolved once the route generation moved
 * (senders on other send queues may do the same at once: endpoint.c). */
static int qps_tx_peer_mac_locked(struct qps_ep *ep, struct qps_sq *sq,
				  uint64_t gen, uint8_t mac[6], bool nowait)
{
	int ret;

	if (qps_ep_peer_mac_load(ep, gen, mac))
		return 0;
	ret = qps_route_resolve(ep->ctx, sq->route, ep->peer.sin_addr.s_addr,
				mac, nowait);
	if (ret < 0)
		return ret;
	qps_ep_peer_mac_store(ep, gen, mac, false);
	return 0;
}

/* What can be said of a datagram before taking any lock; @dst NULL is
 * the connected peer. */
QPS_TX_HOT int qps_tx_check(const struct qps_ep *ep, const void *buf,
			    size_t len, const struct sockaddr_in *dst)
{
	if (__atomic_load_n(&ep->wr_shut, __ATOMIC_RELAXED))
		return -EPIPE;
	if (len > __atomic_load_n(&ep->ctx->max_payload, __ATOMIC_RELAXED)) {
		/* Too long for one frame, or the MTU went up since it was
		 * last read: ask again (route.c follows it). The raw
		 * transport fragments what one frame cannot carry. */
		qps_route_gen(ep->ctx);
		if (len > (ep->ctx->ud ?
			   __atomic_load_n(&ep->ctx->max_payload,
					   __ATOMIC_RELAXED) :
			   QPS_UDP_MAX_PAYLOAD))
			return -EMSGSIZE;
	}
	if (!buf && len)
		return -EFAULT;
	if (dst && dst->sin_port == 0)
		return -EINVAL;
	return 0;
}

/*
 * The send queue a call holds, and every queue it has held: the doorbells
 * a call postponed are dealt with at its end (qps_tx_run_end), so a batch
 * rings each queue it wrote to once.
 */
struct qps_tx_run {
	struct qps_ctx *ctx;
	struct qps_sq *sq;	/* locked, or NULL */
	uint64_t touched;	/* bit q: send queue q was held */
	struct qps_tx_wait wait;	/* the call's wait for room */
};

/* Let go of the queue held. */
static void qps_tx_run_unlock(struct qps_tx_run *r)
{
	if (!r->sq)
		return;
	qps_alock_unlock(&r->sq->lock);
	r->sq = NULL;
}

/* Inlined with the check below: a single send comes here once per call,
 * and a call per send costs more than the switch does. */
QPS_TX_HOT void qps_tx_run_switch(struct qps_tx_run *r, uint32_t q)
{
	struct qps_sq *sq = &r->ctx->sq[q];

	/* One send queue lock at a time: no order between them to keep. */
	if (r->sq)
		qps_tx_run_unlock(r);
	qps_alock_lock(&sq->lock);
	r->sq = sq;
	r->touched |= 1ull << q;
}

/* Hold send queue @q. Inlined for a batch's datagrams after its first,
 * which find it held already. */
static inline void qps_tx_run_lock(struct qps_tx_run *r, uint32_t q)
{
	/* NULL r->sq holds none: compared by index so that it can never
	 * match (ctx->sq has nsq >= 1 entries, never NULL). */
	if (!r->sq || r->sq->idx != q)
		qps_tx_run_switch(r, q);
}

/* The queues in @left that a call held before the one it ends with: each
 * rings now or (@more) arms the bounded delay. Returns the first error,
 * @ret if none. */
QPS_TX_APART int qps_tx_run_end_others(struct qps_tx_run *r, uint64_t left,
				       bool more, int ret)
{
	while (left) {
		uint32_t q = (uint32_t)__builtin_ctzll(left);
		struct qps_sq *sq = &r->ctx->sq[q];
		int err;

		left &= left - 1;
		/* Nothing unrung: nothing to ring or defer. A relaxed hint
		 * (qps_db_ring_locked): this call's own WQEs were written by
		 * this thread, or by the band owner, which rings them itself
		 * or, for a sender that said more follows, defers them. */
		if (!__atomic_load_n(&sq->unrung, __ATOMIC_RELAXED))
			continue;
		/* More follows and the bounded delay is armed already: what
		 * qps_db_defer_locked would do. Any ring that disarmed it
		 * since rang this call's WQEs too (they were written under
		 * the lock before it), and this thread, having held the lock
		 * since, cannot read a disarm older than that. */
		if (more && __atomic_load_n(&sq->db_armed, __ATOMIC_RELAXED))
			continue;
		qps_alock_lock(&sq->lock);
		err = qps_tx_end_locked(sq, more);
		qps_alock_unlock(&sq->lock);
		if (err < 0 && ret >= 0)
			ret = err;
	}
	return ret;
}

/* The end of a send call: every queue it held rings now or (@more) arms
 * the bounded delay. Returns the first error. Inlined: most calls held
 * one queue, which they hold still. */
QPS_TX_HOT int qps_tx_run_end(struct qps_tx_run *r, bool more)
{
	uint64_t left = r->touched;
	int ret = 0;

	if (r->sq) {
		/* Armed already: what qps_db_defer_locked would find. */
		if (!more ||
		    !__atomic_load_n(&r->sq->db_armed, __ATOMIC_RELAXED))
			ret = qps_tx_end_locked(r->sq, more);
		left &= ~(1ull << r->sq->idx);
		qps_tx_run_unlock(r);
	}
	if (left)
		ret = qps_tx_run_end_others(r, left, more, ret);
	qps_tx_wait_end(&r->wait);
	return ret;
}

/*
 * Hold the send queue of a connected endpoint: its cached pick, computed
 * on the first send and after a reset (txq_select.h). The pick is
 * confirmed under the queue's lock, because connect and disconnect change
 * what it is computed from while holding every queue's lock; if it moved
 * meanwhile, follow it.
 */
QPS_TX_HOT int qps_tx_hold_peer(struct qps_ep *ep, struct qps_tx_run *r,
				uint64_t gen)
{
	struct qps_ctx *ctx = ep->ctx;
	/* Relaxed: only which lock to try first; the pick is decided by
	 * qps_txq_pick_cached under that lock. */
	int32_t q = atomic_load_explicit(&ep->txq_cache.qp,
					 memory_order_relaxed);

	if ((uint32_t)q >= ctx->nsq)	/* unset: compute under any lock */
		q = r->sq ? (int32_t)r->sq->idx : 0;
	for (;;) {
		int got;

		qps_tx_run_lock(r, (uint32_t)q);
		if (!ep->connected)
			return -EDESTADDRREQ;
		got = qps_txq_pick_cached(ctx->txq, &ep->txq_cache, gen,
					  &ep->txq_tuple);
		if (got == q)
			return 0;
		q = got;
	}
}

/*
 * Hold the send queue of an unconnected send to @dst: the flow table's
 * pick for the flow (in-flight rule included). A flow that stays on its
 * QP only because packets there have not completed gets that QP reaped
 * and is picked again: completions count only once reaped, and a sender
 * that never polls would otherwise keep the flow on the old QP until the
 * QP fills up.
 */
QPS_TX_HOT void qps_tx_hold_flow(struct qps_ep *ep,
				 const struct sockaddr_in *dst,
				 struct qps_tx_run *r, uint32_t *hash)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_txq_tuple t = {
		.saddr = ctx->info.addr.s_addr,
		.daddr = dst->sin_addr.s_addr,
		.sport = ep->local.sin_port,
		.dport = dst->sin_port,
	};
	bool held;

	*hash = qps_txq_flow_hash(ctx->txq, &t);
	qps_tx_run_lock(r, (uint32_t)qps_txq_pick_flow_held(ctx->txq, *hash,
							    &held));
	if (held && qps_tx_reap_locked(r->sq) > 0)
		qps_tx_run_lock(r, (uint32_t)qps_txq_pick_flow(ctx->txq,
							       *hash));
}

/*
 * Hand a built slot to @sq's priority bands (sq->lock not held): posted
 * now by us as owner, or parked for the owner. A full band fails at once
 * (-EAGAIN, counted in the band's drops) when the sender may not wait,
 * else waits up to SNDTIMEO reaping completions; a refused slot is given
 * back, and with @counted the endpoint's counts of it taken back too.
 */
struct qps_tx_band_wait {
	struct qps_tx_wait *w;
	struct qps_sq *sq;
};

static int qps_tx_band_wait(void *arg)
{
	struct qps_tx_band_wait *bw = arg;

	return qps_tx_wait_room(bw->w, bw->sq);
}

static int qps_tx_band(struct qps_ep *ep, struct qps_tx_wait *w,
		       struct qps_sq *sq, uint32_t slot, uint32_t len,
		       unsigned int prio, bool dontwait, bool counted)
{
	void *item = (void *)((uintptr_t)slot + 1);
	int ret;

	if (dontwait) {
		ret = qps_prio_enqueue(sq->prio, item, prio, len);
	} else {
		struct qps_tx_band_wait bw = { .w = w, .sq = sq };

		ret = qps_prio_enqueue_wait(sq->prio, item, prio, len,
					    qps_tx_band_wait, &bw);
	}
	if (ret < 0) {
		qps_alock_lock(&sq->lock);
		qps_txq_park(sq->ctx->txq, (int)sq->idx, -1);
		qps_tx_slot_put(sq, slot);
		if (counted) {
			ep->sb->tx_packets--;
			ep->sb->tx_bytes -= len;
			ep->sb->tx_drops++;
		}
		qps_alock_unlock(&sq->lock);
	}
	return ret < 0 ? ret : 0;
}

/*
 * UD: qpsock's header and the payload in @slot, and the slot's destination
 * (AH, QPN, Q_Key) that sq_generic.c puts into its WR. The header names
 * QP 0, which has the receive buffers, whichever QP carries the datagram.
 * Returns the message length or -errno (-EHOSTUNREACH: no QPN known).
 */
static int qps_tx_ud_build_locked(struct qps_ep *ep, struct qps_sq *sq,
				  uint32_t slot, const struct sockaddr_in *to,
				  const void *buf, size_t len)
{
	struct qps_ctx *ctx = ep->ctx;
	uint8_t *msg = sq->buf + (size_t)slot * ctx->tx_slot_size;
	const struct qps_ud_hdr_info hi = {
		.sport = ep->local.sin_port,
		.dport = to->sin_port,
		.src_qpn = ctx->qp->qp_num,
	};
	int ret;

	ret = qps_ud_dest_get(sq, to->sin_addr.s_addr, &sq->ud_dest[slot]);
	if (ret < 0)
		return ret;
	if (len)
		memcpy(msg + QPS_UD_HDR_LEN, buf, len);
	return qps_ud_hdr_build(msg, &hi, len);
}

/* The TTL of a datagram of @ep to @daddr. */
static uint8_t qps_tx_ttl(const struct qps_ep *ep, uint32_t daddr)
{
	return IN_MULTICAST(ntohl(daddr)) ?
	       __atomic_load_n(&ep->mc_ttl, __ATOMIC_RELAXED) :
	       __atomic_load_n(&ep->ttl, __ATOMIC_RELAXED);
}

void qps_tx_hdr(const struct qps_ep *ep, const struct sockaddr_in *to,
		struct qps_frame_hdr *h)
{
	const struct qps_ctx *ctx = ep->ctx;

	memcpy(h->src_mac, ctx->info.mac, 6);
	h->saddr = ctx->info.addr.s_addr;
	h->daddr = to->sin_addr.s_addr;
	h->sport = ep->local.sin_port;
	h->dport = to->sin_port;
	h->ttl = qps_tx_ttl(ep, h->daddr);
	h->tos = __atomic_load_n(&ep->tos, __ATOMIC_RELAXED);
}

/* qps_tx_hdr, with the IP ID @sq's lock gives it. */
static void qps_tx_hdr_locked(const struct qps_ep *ep, struct qps_sq *sq,
			      const struct sockaddr_in *to,
			      struct qps_frame_hdr *h)
{
	qps_tx_hdr(ep, to, h);
	h->ip_id = htons(sq->ip_id++);
}

/* The next hop's MAC for @ep's datagram to @to: the connected peer's
 * (@peer, cached in the endpoint), else the route's. */
static int qps_tx_dst_mac_locked(struct qps_ep *ep, struct qps_sq *sq,
				 const struct sockaddr_in *to, bool peer,
				 uint64_t gen, uint8_t mac[6], bool nowait)
{
	if (peer)
		return qps_tx_peer_mac_locked(ep, sq, gen, mac, nowait);
	return qps_route_resolve(ep->ctx, sq->route, to->sin_addr.s_addr, mac,
				 nowait);
}

/* @sq's template holds the headers of @ep's datagrams to @to under route
 * generation @gen. TTL and TOS are relaxed loads, as in qps_tx_hdr: a
 * setsockopt racing a send takes effect at this send or the next. */
static bool qps_tx_tmpl_fits(const struct qps_ep *ep, const struct qps_sq *sq,
			     const struct sockaddr_in *to, uint64_t gen)
{
	return sq->tmpl.ep == ep && sq->tmpl.gen == gen &&
	       sq->tmpl.daddr == to->sin_addr.s_addr &&
	       sq->tmpl.dport == to->sin_port &&
	       sq->tmpl.ttl == qps_tx_ttl(ep, to->sin_addr.s_addr) &&
	       sq->tmpl.tos == __atomic_load_n(&ep->tos, __ATOMIC_RELAXED);
}

QPS_TX_APART int qps_tx_tmpl_build_locked(struct qps_ep *ep, struct qps_sq *sq,
					  const struct sockaddr_in *to,
					  bool peer, uint64_t gen, bool nowait)
{
	struct qps_frame_hdr h;
	int ret;

	sq->tmpl.ep = NULL;
	memset(&h, 0, sizeof(h));
	qps_tx_hdr(ep, to, &h);
	ret = qps_tx_dst_mac_locked(ep, sq, to, peer, gen, h.dst_mac, nowait);
	if (ret < 0)
		return ret;
	ret = qps_frame_build_hw(sq->tmpl.hdr, &h, 0);
	if (ret < 0)
		return ret;
	sq->tmpl.ep = ep;
	sq->tmpl.gen = gen;
	sq->tmpl.daddr = h.daddr;
	sq->tmpl.dport = h.dport;
	sq->tmpl.ttl = h.ttl;
	sq->tmpl.tos = h.tos;
	return 0;
}

/*
 * The headers of @ep's datagrams to @to on @sq (@peer: the connected
 * peer), for a device that computes the checksums: built (the next hop's
 * MAC resolved as qps_tx_dst_mac_locked does) when @sq's template is
 * another endpoint's or destination's, or out of date, else as they
 * were. An unconnected sender gets it too while it keeps sending to one
 * destination, as VMA keeps its last destination.
 */
QPS_TX_HOT int qps_tx_tmpl_locked(struct qps_ep *ep, struct qps_sq *sq,
				  const struct sockaddr_in *to, bool peer,
				  uint64_t gen, bool nowait)
{
	if (qps_tx_tmpl_fits(ep, sq, to, gen))
		return 0;
	return qps_tx_tmpl_build_locked(ep, sq, to, peer, gen, nowait);
}

/* A non-blocking sender of @n fragments: room for all of them now, or
 * none is sent (as the kernel refuses a datagram whose fragments the
 * send buffer cannot take, rather than send part of it). */
static int qps_tx_frag_room_locked(struct qps_sq *sq, size_t n)
{
	int ret;

	if (n > sq->ctx->tx_depth)
		n = sq->ctx->tx_depth;
	if (sq->nfree >= n)
		return 0;
	ret = qps_db_ring_locked(sq, QPS_TXF_FULL);
	if (ret >= 0)
		ret = qps_tx_reap_locked(sq);
	if (ret < 0)
		return ret;
	return sq->nfree >= n ? 0 : -EAGAIN;
}

/* What a fragmented datagram's end does to the endpoint's counters, under
 * the queue's lock: counted once, sent or refused, as qps_tx_one counts a
 * datagram of one frame; cut short after @handed fragments went out. */
static void qps_tx_frags_count(struct qps_ep *ep, struct qps_sq *sq,
			       size_t len, int ret, uint32_t handed,
			       bool band_refused)
{
	qps_alock_lock(&sq->lock);
	if (ret == 0) {
		ep->sb->tx_packets++;
		ep->sb->tx_bytes += len;
		ep->sb->txq = (int32_t)sq->idx;
	} else if (handed || band_refused) {
		ep->sb->tx_drops++;
	}
	if (ret < 0 && handed)
		sq->st->frag_partial++;
	qps_alock_unlock(&sq->lock);
}

/*
 * A datagram above the MTU, sent as the kernel's ip_fragment() sends it:
 * one IP ID, fragments of the largest multiple of 8 bytes the MTU takes,
 * in order and all on the queue @r holds, the UDP checksum (over the
 * whole datagram) in the first. Both checksums are qpsock's whether or
 * not the device offloads them: the UDP sum spans the fragments, and a
 * WQE asking for it would have the device sum one fragment as if it were
 * the datagram. Every fragment but the datagram's last asks for MORE, so
 * its doorbell rings once. A fragment refused after
 * others were handed over (the band full for a sender that may not wait,
 * SNDTIMEO) cuts the datagram short: the call fails as a refused send
 * does, and tx_frag_partial counts what the wire got part of.
 */
static int qps_tx_frags(struct qps_ep *ep, struct qps_tx_run *r,
			const struct qps_frame_hdr *h, const void *buf,
			size_t len, uint32_t hash, bool flow,
			unsigned int prio, bool dontwait, bool more)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_sq *sq = r->sq;
	size_t unit = (__atomic_load_n(&ctx->max_payload, __ATOMIC_RELAXED) +
		       QPS_UDP_HLEN) & ~(size_t)7;
	size_t total = QPS_UDP_HLEN + len, off;
	uint8_t udp[QPS_UDP_HLEN];
	bool band_refused = false;
	uint32_t handed = 0;
	int ret = 0;

	qps_udp_hdr_build(udp, h, len, qps_csum_partial(buf, len, 0));
	if (dontwait)
		ret = qps_tx_frag_room_locked(sq, (total + unit - 1) / unit);
	for (off = 0; ret == 0 && off < total; off += unit) {
		size_t n = total - off < unit ? total - off : unit;
		bool last = off + n == total;
		uint8_t *frame, *p;
		uint32_t slot;

		if (!r->sq)
			qps_tx_run_lock(r, sq->idx);
		ret = qps_tx_slot_get_locked(&r->wait, sq, dontwait, &slot);
		if (ret < 0)
			break;
		frame = sq->buf + (size_t)slot * ctx->tx_slot_size;
		p = frame + QPS_ETH_HLEN + QPS_IP_HLEN;
		if (off == 0) {
			memcpy(p, udp, QPS_UDP_HLEN);
			memcpy(p + QPS_UDP_HLEN, buf, n - QPS_UDP_HLEN);
		} else {
			memcpy(p, (const uint8_t *)buf + off - QPS_UDP_HLEN, n);
		}
		sq->meta[slot] = (struct qps_tx_meta){
			.len = (uint32_t)qps_frame_build_frag(frame, h, n, off,
							      !last),
			.bytes = off ? 0 : (uint32_t)len,
			.hash = hash,
			.flags = (flow ? QPS_TXM_FLOW : 0) |
				 (!last || more ? QPS_TXM_MORE : 0) |
				 (off ? QPS_TXM_FRAG : 0),
			.who = qps_thread_id(),
		};
		/* Its transmit time is its last fragment's: the datagram is
		 * out once that is. */
		if (last)
			qps_txts_meta(ep, &sq->meta[slot]);
		qps_txq_park(ctx->txq, (int)sq->idx, 1);
		sq->st->frags++;
		qps_alock_unlock(&sq->lock);
		r->sq = NULL;
		ret = qps_tx_band(ep, &r->wait, sq, slot, (uint32_t)n, prio,
				  dontwait, false);
		band_refused = ret < 0;
		handed += ret == 0;
	}
	if (r->sq) {
		qps_alock_unlock(&r->sq->lock);
		r->sq = NULL;
	}
	qps_tx_frags_count(ep, sq, len, ret, handed, band_refused);
	return ret;
}

/* The frame @f into @slot of @sq, for a post that reads it from there. */
static void qps_tx_flatten(struct qps_sq *sq, uint32_t slot,
			   const struct qps_tx_frame *f)
{
	uint8_t *frame = sq->buf + (size_t)slot * sq->ctx->tx_slot_size;

	if (f->plen)
		memcpy(frame + QPS_HDRS_LEN, f->payload, f->plen);
	qps_tx_frame_hdrs(frame, f);
}

/* A datagram above the MTU, on the queue @r holds (to @to; @mac: the next
 * hop, unless the template is used): through the bands, in fragments. */
QPS_TX_COLD int
qps_tx_one_frags(struct qps_ep *ep, struct qps_tx_run *r,
		 const struct sockaddr_in *to, bool peer, uint64_t gen,
		 const uint8_t mac[6], const void *buf, size_t len,
		 uint32_t hash, unsigned int prio, bool dontwait, bool more)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_sq *sq = r->sq;
	struct qps_frame_hdr h;

	memset(&h, 0, sizeof(h));
	if (ctx->csum_offload) {
		int ret = qps_tx_dst_mac_locked(ep, sq, to, peer, gen,
						h.dst_mac, dontwait);

		if (ret < 0)
			return ret;
	} else {
		memcpy(h.dst_mac, mac, 6);
	}
	qps_tx_hdr_locked(ep, sq, to, &h);
	/* The ID reassembly keys on: not guessable off the path (RFC 7739),
	 * so no one can plant fragments into the datagram. */
	h.ip_id = htons(qps_ipfrag_id(&ctx->rx.frag, h.daddr, ntohs(h.ip_id)));
	return qps_tx_frags(ep, r, &h, buf, len, hash, !peer, prio, dontwait,
			    more);
}

/* The frame in @slot, for a transport that does not use the template: UD,
 * or a device that does not sum it (@mac: the next hop). Returns its
 * length or -errno. */
QPS_TX_APART int
qps_tx_one_build(struct qps_ep *ep, struct qps_sq *sq, uint32_t slot,
		 const struct sockaddr_in *to, const uint8_t mac[6],
		 const void *buf, size_t len)
{
	uint8_t *frame = sq->buf + (size_t)slot * ep->ctx->tx_slot_size;
	struct qps_frame_hdr h;

	if (ep->ctx->ud)
		return qps_tx_ud_build_locked(ep, sq, slot, to, buf, len);
	memset(&h, 0, sizeof(h));
	memcpy(h.dst_mac, mac, 6);
	qps_tx_hdr_locked(ep, sq, to, &h);
	/* The payload's checksum is taken while it is copied. */
	return qps_frame_build_sum(frame, &h, len,
				   qps_csum_copy(frame + QPS_HDRS_LEN, buf,
						 len, 0));
}

/* A built slot that is not bypassed: to the bands, without sq->lock,
 * which the owner's post takes. Cold although a contended sender comes
 * here for every datagram: the ring and the owner's drain cost it more
 * than this code, and the bypass is laid out first. */
QPS_TX_COLD int
qps_tx_one_band(struct qps_ep *ep, struct qps_tx_run *r, uint32_t slot,
		const struct qps_tx_frame *pieces, size_t len,
		unsigned int prio, bool dontwait)
{
	struct qps_sq *sq = r->sq;

	if (pieces)
		qps_tx_flatten(sq, slot, pieces);
	qps_tx_run_unlock(r);
	return qps_tx_band(ep, &r->wait, sq, slot, (uint32_t)len, prio,
			   dontwait, true);
}

/*
 * Build one checked datagram to @dst (NULL: the connected peer) for the
 * send queue picked for it and hand it to that queue; *@sent_to says
 * where it went. On a device that sums it, a datagram stays in pieces
 * (the queue's header template, the caller's payload) until a bypass
 * writes it straight into the WQE (sq_path.h); posted any other way, it
 * is built in its slot first. Both happen under sq->lock, which keeps
 * the template.
 */
QPS_TX_HOT int qps_tx_one(struct qps_ep *ep, struct qps_tx_run *r,
			  const void *buf, size_t len,
			  const struct sockaddr_in *dst, unsigned int prio,
			  bool dontwait, bool more,
			  struct sockaddr_in *sent_to)
{
	struct qps_ctx *ctx = ep->ctx;
	uint8_t mac[6];
	struct sockaddr_in to;
	struct qps_sq *sq;
	struct qps_tx_meta *m;
	void *item;
	struct qps_tx_frame pieces = {
		.tmpl = NULL,
		.payload = buf,
		.plen = (uint32_t)len,
	};
	bool flat = true;	/* the frame is in its slot */
	uint32_t slot, hash = 0;
	/* The headers from sq->tmpl (UD: the AH is the cached destination,
	 * in the slot), checked once the slot is ours: a wait for one drops
	 * the lock, and another send may build the queue's template
	 * meanwhile. */
	bool tmpl = !ctx->ud && ctx->csum_offload, fits;
	uint64_t gen;
	int ret;

	gen = qps_route_gen(ctx);
	if (!dst) {
		ret = qps_tx_hold_peer(ep, r, gen);
		if (ret < 0)
			return ret;
		to = ep->peer;		/* stable while we hold the queue */
	} else {
		qps_tx_hold_flow(ep, dst, r, &hash);
		to = *dst;
	}
	/* The next hop is resolved before waiting for a slot, as the kernel
	 * routes before it allocates: an unreachable destination fails at
	 * once. A connected peer's was resolved by connect; a template
	 * that fits holds it, and stays good until the lock is dropped. */
	fits = tmpl && dst && qps_tx_tmpl_fits(ep, r->sq, &to, gen);
	ret = ctx->ud || fits || (tmpl && !dst) ? 0 :
	      qps_tx_dst_mac_locked(ep, r->sq, &to, !dst, gen, mac, dontwait);
	if (ret < 0)
		return ret;
	sq = r->sq;
	*sent_to = to;
	if (!ctx->ud &&
	    len > __atomic_load_n(&ctx->max_payload, __ATOMIC_RELAXED))
		return qps_tx_one_frags(ep, r, &to, !dst, gen, mac, buf, len,
					hash, prio, dontwait, more);
	if (qps_tx_room_locked(sq)) {
		ret = qps_tx_slot_take_locked(sq, &slot);
	} else {
		ret = qps_tx_slot_get_locked(&r->wait, sq, dontwait, &slot);
		fits = false;
	}
	if (ret < 0)
		return ret;

	if (tmpl) {
		/* The device sums the frame as it leaves: the payload is
		 * copied as it is, once, behind the queue's template. */
		ret = fits ? 0 : qps_tx_tmpl_locked(ep, sq, &to, !dst, gen,
						    dontwait);
		if (ret == 0) {
			pieces.tmpl = sq->tmpl.hdr;
			pieces.ip_id = htons(sq->ip_id++);
			/* Within max_payload: qps_frame_build_hw's bound
			 * holds. */
			ret = (int)(QPS_HDRS_LEN + len);
			flat = (uint32_t)ret > sq->pieces_max;
			if (flat)
				qps_tx_flatten(sq, slot, &pieces);
		}
	} else {
		ret = qps_tx_one_build(ep, sq, slot, &to, mac, buf, len);
	}
	if (ret < 0) {
		qps_tx_slot_put(sq, slot);
		return ret;
	}
	/* Field by field: the stamp's fields are qps_txts_meta's, read only
	 * with QPS_TXM_TS. */
	m = &sq->meta[slot];
	m->len = (uint32_t)ret;
	m->bytes = (uint32_t)len;
	m->hash = hash;
	m->flags = (dst ? QPS_TXM_FLOW : 0) | (more ? QPS_TXM_MORE : 0) |
		   (ctx->csum_offload ? QPS_TXM_CSUM : 0);
	m->who = qps_thread_id();
	qps_txts_meta(ep, m);
	/* Parked until posted: the flow table holds its flow on this QP. */
	qps_txq_park(ctx->txq, (int)sq->idx, 1);
	/* The endpoint's counters, under this queue's lock (stat_shm.h);
	 * qps_tx_band takes a refused one back. */
	ep->sb->tx_packets++;
	ep->sb->tx_bytes += len;
	ep->sb->txq = (int32_t)sq->idx;
	/* Bands empty and no transmitter: post it as the owner would, under
	 * the lock we hold, which every post takes (prio_bands.h), and keep
	 * the lock for the call's next datagram, which looks again. */
	if (!qps_prio_bypass_locked(sq->prio))
		return qps_tx_one_band(ep, r, slot, flat ? NULL : &pieces, len,
				       prio, dontwait);
	item = (void *)((uintptr_t)slot + 1);
	qps_tx_post_burst_locked(sq, &item, 1, false, flat ? NULL : &pieces);
	qps_prio_bypass_locked_count(sq->prio, qps_prio_band(prio));
	return 0;
}

QPS_TX_HOT ssize_t qps_tx_datagram(struct qps_ep *ep, const void *buf,
				   size_t len, int flags,
				   const struct sockaddr_in *dst)
{
	struct qps_tx_run run = { .ctx = ep->ctx };
	bool more = flags & QPS_MSG_MORE;
	struct sockaddr_in to;
	int ret, end;

	if (flags & ~QPS_TX_FLAGS)
		return -EINVAL;
	qps_tx_wait_init(&run.wait, ep);
	ret = qps_tx_check(ep, buf, len, dst);
	if (ret < 0)
		return ret;
	ret = qps_ep_autobind(ep);
	if (ret < 0)
		return ret;
	ret = qps_tx_one(ep, &run, buf, len, dst, (unsigned int)ep->priority,
			 ep->nonblock || (flags & QPS_MSG_DONTWAIT), more, &to);
	end = qps_tx_run_end(&run, more);
	if (ret == 0 && IN_MULTICAST(ntohl(to.sin_addr.s_addr)))
		qps_mc_loop(ep, &to, buf, len);
	if (ret == 0 && end < 0)
		ret = end;
	return ret < 0 ? ret : (ssize_t)len;
}

/*
 * This thread is inside a send call. No send queue lock is reentrant,
 * and a send from a signal handler (send(2) is async-signal-safe, and
 * the preload makes every program's handler a qpsock caller) may
 * interrupt its own thread's send anywhere: under a lock, or between a
 * lock's steps. Such a send is refused before it takes anything.
 * Initial-exec: the handler must not allocate the variable on first use.
 */
static __thread unsigned int qps_tx_inside
	__attribute__((tls_model("initial-exec")));

static int qps_tx_enter(struct qps_ep *ep)
{
	if (qps_tx_inside) {
		/* Relaxed: a counter only read for stats. */
		__atomic_add_fetch(&ep->ctx->tx_nested, 1, __ATOMIC_RELAXED);
		return -EWOULDBLOCK;
	}
	qps_tx_inside = 1;
	/* Compiler barrier: the mark is set before any lock is touched; a
	 * handler on this thread is all that reads it. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return 0;
}

static void qps_tx_leave(void)
{
	/* Compiler barrier: the mark goes only after every lock is left. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	qps_tx_inside = 0;
}

/* A receive from a handler may reap send completions, which takes the
 * send queues' locks: not while its thread is inside a send. */
static bool qps_tx_nested(void)
{
	return qps_tx_inside != 0;
}

static ssize_t qps_tx_datagram_once(struct qps_ep *ep, const void *buf,
				    size_t len, int flags,
				    const struct sockaddr_in *dst)
{
	ssize_t ret = qps_tx_enter(ep);

	if (ret < 0)
		return ret;
	ret = qps_tx_datagram(ep, buf, len, flags, dst);
	qps_tx_leave();
	return ret;
}

ssize_t qps_send(struct qps_ep *ep, const void *buf, size_t len, int flags)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (!ep->connected)
		return -EDESTADDRREQ;
	return qps_tx_datagram_once(ep, buf, len, flags, NULL);
}

/* The destination of a datagram: @dest, or NULL for the connected peer. */
static int qps_tx_dest(struct qps_ep *ep, const struct sockaddr *dest,
		       socklen_t dest_len, const struct sockaddr_in **dst)
{
	if (!dest) {
		if (!ep->connected)
			return -EDESTADDRREQ;
		*dst = NULL;
		return 0;
	}
	return qps_sin_check(dest, dest_len, dst);
}

ssize_t qps_sendto(struct qps_ep *ep, const void *buf, size_t len, int flags,
		   const struct sockaddr *dest, socklen_t dest_len)
{
	QPS_ERRNO_GUARD;
	const struct sockaddr_in *sin;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	ret = qps_tx_dest(ep, dest, dest_len, &sin);
	if (ret < 0)
		return ret;
	return qps_tx_datagram_once(ep, buf, len, flags, sin);
}

/* One message of a batch; @more: the doorbell may wait after it. */
QPS_TX_HOT int qps_tx_msg(struct qps_ep *ep, struct qps_tx_run *r,
			  const struct qps_msg *m, bool dontwait, bool more)
{
	const struct sockaddr_in *dst;
	struct sockaddr_in to;
	int ret;

	ret = qps_tx_dest(ep, m->dest, m->dest_len, &dst);
	if (ret < 0)
		return ret;
	if (m->priority < -1 || m->priority > QPS_PRIO_MAX)
		return -EINVAL;
	ret = qps_tx_check(ep, m->buf, m->len, dst);
	if (ret < 0)
		return ret;
	/* Lock order: a send queue's lock, then ctl_lock (autobind). */
	ret = qps_ep_autobind(ep);
	if (ret < 0)
		return ret;
	ret = qps_tx_one(ep, r, m->buf, m->len, dst,
			 (unsigned int)(m->priority < 0 ? ep->priority :
					m->priority), dontwait, more, &to);
	/* Before the burst's doorbell: the host's copy may come first, as
	 * it may from a NIC's loopback. */
	if (ret == 0 && IN_MULTICAST(ntohl(to.sin_addr.s_addr)))
		qps_mc_loop(ep, &to, m->buf, m->len);
	return ret;
}

int qps_sendmmsg(struct qps_ep *ep, struct qps_msg *msgs, unsigned int n,
		 int flags)
{
	QPS_ERRNO_GUARD;
	struct qps_tx_run run;
	bool more = flags & QPS_MSG_MORE;
	bool dontwait;
	unsigned int i, j;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if ((flags & ~QPS_TX_FLAGS) || n > INT_MAX)
		return -EINVAL;
	if (!n)
		return 0;
	if (!msgs)
		return -EFAULT;
	ret = qps_tx_enter(ep);
	if (ret < 0)
		return ret;
	run = (struct qps_tx_run){ .ctx = ep->ctx };
	qps_tx_wait_init(&run.wait, ep);
	dontwait = ep->nonblock || (flags & QPS_MSG_DONTWAIT);
	for (i = 0; i < n; i++) {
		ret = qps_tx_msg(ep, &run, &msgs[i], dontwait,
				 more || i + 1 < n);
		msgs[i].result = ret < 0 ? ret : (ssize_t)msgs[i].len;
		if (ret < 0)
			break;
	}
	for (j = i + 1; j < n; j++)
		msgs[j].result = -ECANCELED;
	ret = qps_tx_run_end(&run, more);
	qps_tx_leave();
	if (ret < 0 && i == n) {
		/* The last doorbell failed: its chain is in tx_errors. */
		msgs[n - 1].result = ret;
		i = n - 1;
	}
	return i ? (int)i : (int)msgs[0].result;
}
