// SPDX-License-Identifier: MIT
/*
 * Generic send path, for any provider: each frame becomes an
 * ibv_send_wr chained behind the unrung ones, and a burst is posted in one
 * call, which is one doorbell on every provider (verbs semantics). A WR
 * asks for a completion every tx_signal WRs (tx.c decides), and the tail
 * of every chain does, set here at ring time: until post_send the chain
 * is ours, so its tail's flag can still change. A completion returns its
 * slot and every slot posted before it (tx.c, qps_tx_reap_locked).
 *
 * Called under the send queue's lock (sq.h).
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "sq.h"
#include "txts.h"
#include "ud.h"

#define QPS_SQ_GENERIC_TRIES 1000

/* Chain @slot's WR; @signaled: it asks for a completion (the chain's
 * tail is made to at ring time regardless). */
static int qps_sq_generic_write(struct qps_sq *sq, uint32_t slot,
				const struct qps_tx_frame *f, uint32_t len,
				bool signaled)
{
	struct qps_ctx *ctx = sq->ctx;
	struct ibv_send_wr *wr = &sq->wr[slot];
	struct ibv_sge *sge = &sq->sge[slot];

	/* The device gathers from registered memory: frames are in slots
	 * (pieces_max 0). */
	if (f)
		return -EINVAL;
	sge->addr = (uintptr_t)(sq->buf + (size_t)slot * ctx->tx_slot_size);
	sge->length = len;
	sge->lkey = ctx->tx_mr->lkey;
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = slot;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	if (sq->ud_dest) {
		const struct qps_ud_dest *d = &sq->ud_dest[slot];

		wr->wr.ud.ah = d->ah;
		wr->wr.ud.remote_qpn = d->qpn;
		wr->wr.ud.remote_qkey = d->qkey;
	}
	wr->send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	if (len <= ctx->info.max_inline)
		wr->send_flags |= IBV_SEND_INLINE;
	if (sq->meta[slot].flags & QPS_TXM_CSUM)
		wr->send_flags |= IBV_SEND_IP_CSUM;
	if (sq->pend_tail)
		sq->pend_tail->next = wr;
	else
		sq->pend_head = wr;
	sq->pend_tail = wr;
	return 0;
}

/*
 * Nothing of the chain can be sent: count it, give the slots back, and
 * take the WRs back from the QP's enqueued count and the posted order.
 * They are its newest counted and pushed WRs (everything older was
 * posted), which is what qps_txq_enqueue_cancel and qps_tx_posted_unpush
 * require. A signalled WR among them asked the device for nothing.
 */
static void qps_sq_generic_drop(struct qps_sq *sq)
{
	struct ibv_send_wr *wr;
	uint32_t n = 0;

	for (wr = sq->pend_head; wr; wr = wr->next) {
		sq->st->errors++;
		if (wr->send_flags & IBV_SEND_SIGNALED)
			sq->st->signaled--;
		n++;
	}
	qps_tx_posted_unpush(sq, n);
	for (wr = sq->pend_head; wr; wr = wr->next) {
		qps_txts_done(sq, &sq->meta[wr->wr_id], NULL, true);
		qps_tx_slot_put(sq, (uint32_t)wr->wr_id);
	}
	sq->pend_head = sq->pend_tail = NULL;
	qps_txq_enqueue_cancel(sq->ctx->txq, (int)sq->idx, n);
}

/*
 * Post the chain. A full send queue (-ENOMEM, the verbs answer) rang the
 * doorbell for the part it took; completions are reaped and the rest is
 * posted again, since a rung queue drains on every provider. Any other
 * error drops the chain into tx_errors, so nothing vanishes uncounted.
 * Returns the number of post calls that reached the device (doorbells),
 * or -errno.
 *
 * The tail asks for a completion (doorbell.c counts it). A post that
 * stopped part way leaves the part taken without a signalled tail; its
 * slots are reaped with the rest's tail, posted next. Only if the rest is
 * then dropped do they wait for the QP's next signalled WR (or its flush
 * on an error): a provider refused a chain it had room for.
 */
static int qps_sq_generic_ring(struct qps_sq *sq, uint32_t *bf)
{
	const struct qps_provider_ops *ops = sq->ctx->ops;
	int rung = 0, tries = 0;

	*bf = 0;
	if (sq->pend_tail)
		sq->pend_tail->send_flags |= IBV_SEND_SIGNALED;
	while (sq->pend_head) {
		struct ibv_send_wr *bad = NULL;
		int ret = ops->post_send(sq->qp, sq->pend_head, &bad);

		if (ret == 0) {
			sq->pend_head = sq->pend_tail = NULL;
			return rung + 1;
		}
		if (bad && bad != sq->pend_head)
			rung++;
		if (ret != -ENOMEM || !bad || ++tries > QPS_SQ_GENERIC_TRIES) {
			if (bad && bad != sq->pend_head)
				sq->pend_head = bad;
			qps_sq_generic_drop(sq);
			return ret;
		}
		sq->pend_head = bad;
		ret = qps_tx_reap_locked(sq);
		if (ret < 0) {
			qps_sq_generic_drop(sq);
			return ret;
		}
		if (ret == 0)
			sched_yield();
	}
	return rung;
}

/* Nothing to take over: the WRs and SGEs are the send queue's (sq.c). */
static int qps_sq_generic_init(struct qps_sq *sq)
{
	sq->pend_head = sq->pend_tail = NULL;
	sq->pieces_max = 0;
	return 0;
}

/* The provider restarted its own ring; the chain was posted or dropped
 * before the QP left RTS (qp_recover.c rings what is pending first). */
static int qps_sq_generic_reset(struct qps_sq *sq)
{
	return sq->pend_head ? -EPROTO : 0;
}

/* post_send answers a full queue itself (-ENOMEM, handled at ring time):
 * only the slots bound what can be written. */
static uint32_t qps_sq_generic_room(const struct qps_sq *sq)
{
	(void)sq;
	return UINT32_MAX;
}

const struct qps_sq_path qps_sq_path_generic = {
	.name = "generic",
	.init = qps_sq_generic_init,
	.reset = qps_sq_generic_reset,
	.room = qps_sq_generic_room,
	.write = qps_sq_generic_write,
	.ring = qps_sq_generic_ring,
};
