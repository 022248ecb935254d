// SPDX-License-Identifier: MIT
/*
 * Generic send path, for any provider: each frame becomes an
 * ibv_send_wr chained behind the unrung ones, and a burst is posted in one
 * call, which is one doorbell on every provider (verbs semantics). Every
 * WR is signalled so that a completion returns exactly its slot.
 *
 * Called under ctx->tx_lock.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "qps_int.h"

#define QPS_SQ_GENERIC_TRIES 1000

void qps_sq_generic_put(struct qps_ctx *ctx, uint32_t slot, uint32_t len)
{
	struct ibv_send_wr *wr = &ctx->tx_wr[slot];
	struct ibv_sge *sge = &ctx->tx_sge[slot];

	sge->addr = (uintptr_t)(ctx->tx_buf + (size_t)slot * ctx->tx_slot_size);
	sge->length = len;
	sge->lkey = ctx->tx_mr->lkey;
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = slot;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	wr->send_flags = IBV_SEND_SIGNALED;
	if (len <= ctx->info.max_inline)
		wr->send_flags |= IBV_SEND_INLINE;
	if (ctx->pend_tail)
		ctx->pend_tail->next = wr;
	else
		ctx->pend_head = wr;
	ctx->pend_tail = wr;
}

/* Nothing of the chain can be sent: count it and give the slots back. */
static void qps_sq_generic_drop(struct qps_ctx *ctx)
{
	struct ibv_send_wr *wr;

	for (wr = ctx->pend_head; wr; wr = wr->next) {
		ctx->st.tx_errors++;
		qps_tx_slot_put(ctx, (uint32_t)wr->wr_id);
	}
	ctx->pend_head = ctx->pend_tail = NULL;
}

/*
 * Post the chain. A full send queue (-ENOMEM, the verbs answer) rang the
 * doorbell for the part it took; completions are reaped and the rest is
 * posted again, since a rung queue drains on every provider. Any other
 * error drops the chain into tx_errors, so nothing vanishes uncounted.
 * Returns the number of post calls that reached the device (doorbells),
 * or -errno.
 */
int qps_sq_generic_ring(struct qps_ctx *ctx)
{
	struct ibv_send_wr *bad;
	int rung = 0, tries = 0;
	int ret;

	while (ctx->pend_head) {
		bad = NULL;
		ret = ctx->ops->post_send(ctx->qp, ctx->pend_head, &bad);
		if (ret == 0) {
			ctx->pend_head = ctx->pend_tail = NULL;
			return rung + 1;
		}
		if (bad && bad != ctx->pend_head)
			rung++;
		if (ret != -ENOMEM || !bad || ++tries > QPS_SQ_GENERIC_TRIES) {
			if (bad && bad != ctx->pend_head)
				ctx->pend_head = bad;
			qps_sq_generic_drop(ctx);
			return ret;
		}
		ctx->pend_head = bad;
		ret = qps_tx_reap_locked(ctx);
		if (ret < 0) {
			qps_sq_generic_drop(ctx);
			return ret;
		}
		if (ret == 0)
			sched_yield();
	}
	return rung;
}
