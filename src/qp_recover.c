// SPDX-License-Identifier: MIT
/*
 * Bringing a failed QP back. A QP that took an error completion is in the
 * error state: the device completes everything it held, and every WQE
 * posted later, with IBV_WC_WR_FLUSH_ERR. Left there, every datagram sent
 * through it would be flushed and, for the receiving QP, every buffer
 * reposted would come straight back: the context would be dead while
 * looking alive.
 *
 * So the send path marks the send queue (qp_err) when it reaps an error,
 * the receive path marks the context (rx.qp_err) when it sees one or its
 * CQ overran (the lost completions took their buffers), and stops
 * reposting; the next progress call (qps_tx_poll) brings the QP back
 * through RESET, the way a driver recovers a ring: ring what is pending,
 * ERR (the device completes all it holds), drain both CQs, RESET (which
 * empties both queues and takes the QP's CQEs back), count what never
 * completed as failed, up again to RTS, and for the receiving QP repost
 * every buffer no endpoint holds. Steering
 * rules and group attachments belong to the QP number and survive RESET
 * (verbs, emu), so memberships stay. If bringing it up fails, the queue
 * is given up (qp_dead): its sends fail with -ENETDOWN from then on.
 * Only providers whose QPs fail as a whole do this (QPS_DEV_CAP_QP_ERR);
 * on packet an error completion fails its own WQE and nothing else.
 *
 * Locks: sq->lock of the failed queue, then rx.lock (the context's order).
 * The flag is written under rx.lock and read here as a hint without it;
 * nothing else is published through it, hence relaxed.
 */
#include <string.h>

#include "sq.h"

static bool qps_qp_failed(const struct qps_sq *sq)
{
	/* A hint read without rx.lock (written under it); the decision is
	 * taken again under the lock. */
	return sq->qp_err ||
	       (sq->idx == 0 &&
		__atomic_load_n(&sq->ctx->rx.qp_err, __ATOMIC_RELAXED));
}

int qps_qp_recover_locked(struct qps_sq *sq)
{
	struct qps_ctx *ctx = sq->ctx;
	struct ibv_qp_attr a;
	int ret;

	if (sq->qp_dead || !qps_qp_failed(sq))
		return 0;
	/* The send path counted it when it saw the error; the receive
	 * path leaves it to us. */
	if (!sq->qp_err) {
		/* Relaxed: a hint for qps_tx_poll (tx.c). */
		__atomic_store_n(&sq->qp_err, true, __ATOMIC_RELAXED);
		sq->st->qp_errors++;
	}
	if (sq->unrung)
		qps_db_ring_locked(sq, QPS_TXF_POLL);
	/* ERR first (already there after an error completion): the device
	 * stops and completes all it holds, sent or flushed, so each WQE is
	 * counted as what it was. -EIO (completions lost to an overrun) is
	 * what the RESET below repairs. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ctx->ops->modify_qp(sq->qp, &a, IBV_QP_STATE);
	ret = qps_tx_reap_locked(sq);
	if (ret < 0 && ret != -EIO)
		return ret;
	if (sq->idx == 0) {
		/* Nobody reposts a receive buffer from here until the refill:
		 * one posted around the RESET would be posted twice. */
		qps_mutex_lock(&ctx->rx.lock);
		__atomic_store_n(&ctx->rx.qp_err, true, __ATOMIC_RELAXED);
		/* Take what arrived, and the receive queue's flush, now: a
		 * CQ smaller than the ring would otherwise overrun on the
		 * flush and report it after the RESET, failing the QP again.
		 * Its -EIO is the one being repaired. */
		qps_rx_progress_locked(ctx);
		qps_mutex_unlock(&ctx->rx.lock);
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	ret = ctx->ops->modify_qp(sq->qp, &a, IBV_QP_STATE);
	/* The device holds nothing of the QP now, and its CQEs are gone
	 * from the CQ: what was posted and not reaped lost its completion
	 * (an overrun) and is counted as failed. */
	if (ret == 0) {
		qps_tx_reclaim_locked(sq);
		ret = qps_qp_up(ctx, sq->qp);
	}
	/* The device starts again at WQE 0: so must the send path. */
	if (ret == 0) {
		sq->room_seen = 0;
		ret = sq->path->reset(sq);
	}
	if (ret < 0) {
		qps_log_err("send queue %u: QP %u could not be brought back "
			    "from the error state (%d); its sends fail from "
			    "now on", sq->idx, sq->qp->qp_num, ret);
		sq->qp_dead = true;
		return ret;
	}
	__atomic_store_n(&sq->qp_err, false, __ATOMIC_RELAXED);
	sq->st->qp_recoveries++;
	if (sq->idx == 0) {
		qps_mutex_lock(&ctx->rx.lock);
		ret = qps_rx_refill_locked(ctx);
		qps_mutex_unlock(&ctx->rx.lock);
	}
	/* Connected endpoints that dropped this QP may take it again. */
	qps_txq_qp_reset(ctx->txq, (int)sq->idx);
	return ret;
}
