// SPDX-License-Identifier: MIT
/*
 * Transmit timestamps: the error queue of SO_TIMESTAMPING with OPT_ID.
 *
 * A datagram of an endpoint with QPS_TS_TX_* takes the endpoint's next
 * number when its frame is built (a datagram refused after that, by a
 * band that stayed full, leaves a gap). Its WQE always asks for a
 * completion, so that the device's stamp is its own and not that of a
 * later WQE; the software time is read as the WQE is written. Every
 * such datagram the send calls accepted is reported once, when its
 * completion is reaped, or as failed when the device did not send it
 * (error completion, QP reset, refused write). A report is dropped only
 * when the endpoint's queue is full (it holds as many as the context has
 * send slots) or the endpoint was closed.
 */
#include <stdlib.h>
#include <string.h>

#include "sq.h"
#include "txts.h"

/* The queue holds every datagram the endpoint can have in flight. */
#define QPS_TXTS_MAX 65536u

int qps_txts_enable_locked(struct qps_ep *ep, uint32_t tx_flags)
{
	struct qps_ctx *ctx = ep->ctx;
	uint64_t cap;

	if (!tx_flags || ep->txts)
		goto on;
	cap = (uint64_t)ctx->tx_depth * ctx->nsq;
	if (cap > QPS_TXTS_MAX)
		cap = QPS_TXTS_MAX;
	ep->txts = calloc(cap, sizeof(*ep->txts));
	if (!ep->txts)
		return -ENOMEM;
	ep->txts_cap = (uint32_t)cap;
on:
	if (tx_flags)
		__atomic_store_n(&ctx->txts_on, true, __ATOMIC_RELAXED);
	return 0;
}

void qps_txts_fini_locked(struct qps_ep *ep)
{
	free(ep->txts);
	ep->txts = NULL;
	ep->txts_cap = ep->txts_head = ep->txts_count = 0;
}

void qps_txts_meta(struct qps_ep *ep, struct qps_tx_meta *m)
{
	/* Acquire: pairs with the release in qps_ep_set_ts; the report
	 * queue exists before a sender sees the flag. */
	uint32_t f = __atomic_load_n(&ep->ts_flags, __ATOMIC_ACQUIRE) &
		     QPS_TS_TX_MASK;

	if (!f)
		return;
	m->flags |= QPS_TXM_TS;
	m->ts_ep = ep;
	m->ts_gen = ep->gen;
	m->ts_flags = f;
	m->ts_id = __atomic_fetch_add(&ep->txts_next_id, 1, __ATOMIC_RELAXED);
	m->ts_sw_ns = 0;
}

void qps_txts_posted(struct qps_tx_meta *m)
{
	if (m->ts_flags & QPS_TS_TX_SOFTWARE)
		m->ts_sw_ns = qps_realtime_ns();
}

void qps_txts_done(struct qps_sq *sq, const struct qps_tx_meta *m,
		   const struct qps_wc_ts *ts, bool failed)
{
	struct qps_ctx *ctx = sq->ctx;
	struct qps_ep *ep = m->ts_ep;
	struct qps_txts r = { .id = m->ts_id };

	if (!(m->flags & QPS_TXM_TS))
		return;
	if (failed)
		r.flags |= QPS_TXTS_FAILED;
	if (m->ts_flags & QPS_TS_TX_SOFTWARE) {
		r.flags |= QPS_TXTS_SOFTWARE;
		r.sw_ns = m->ts_sw_ns;
	}
	if (!failed && (m->ts_flags & QPS_TS_TX_DEVICE) && ts &&
	    (ts->clock == QPS_WC_TS_DEV || ts->clock == QPS_WC_TS_HW)) {
		r.flags |= QPS_TXTS_DEVICE;
		r.dev_ns = ts->val;
	}
	/* Lock order: sq->lock, then rx.lock (qps_int.h). */
	qps_mutex_lock(&ctx->rx.lock);
	if (qps_ep_check(ep) == 0 && ep->gen == m->ts_gen && ep->txts &&
	    ep->txts_count < ep->txts_cap) {
		ep->txts[(ep->txts_head + ep->txts_count) % ep->txts_cap] = r;
		ep->txts_count++;
	}
	qps_mutex_unlock(&ctx->rx.lock);
}

int qps_recv_txts(struct qps_ep *ep, struct qps_txts *ts, unsigned int n,
		  int flags)
{
	QPS_ERRNO_GUARD;
	struct qps_ctx *ctx;
	unsigned int i = 0;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (flags & ~QPS_MSG_DONTWAIT)
		return -EINVAL;
	if (!ts && n)
		return -EFAULT;
	ctx = ep->ctx;
	/* What the device has completed becomes reports. */
	qps_tx_poll(ctx, QPS_TXF_POLL);
	qps_mutex_lock(&ctx->rx.lock);
	ret = qps_ep_check(ep);
	while (!ret && i < n && ep->txts_count) {
		ts[i++] = ep->txts[ep->txts_head];
		ep->txts_head = (ep->txts_head + 1) % ep->txts_cap;
		ep->txts_count--;
	}
	qps_mutex_unlock(&ctx->rx.lock);
	if (ret < 0)
		return ret;
	if (!i && n)
		return -EAGAIN;
	return (int)i;
}
