// SPDX-License-Identifier: MIT
/*
 * Send queue lifetime: each of a context's send queues gets its CQ, a
 * raw-packet QP (UD transport: a UD QP brought up to RTS, and a
 * destination per slot), its slice of the registered slot buffer, a
 * free-slot stack and WRs, and the send path's own state (sq_path.h). Send
 * queue 0's QP also receives into ctx->rx.cq; the others have no receive
 * queue (max_recv_wr 0), and name their own send CQ as receive CQ because
 * some providers (packet, libibverbs) refuse a QP without one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sq.h"
#include "ud.h"

/*
 * The priority bands of @sq, all their ring memory allocated now: the send
 * path never allocates. Each band holds at most QPS_PRIO_DEFAULT_DEPTH
 * slots, fewer when the queue has fewer slots (a parked item holds one).
 */
static int qps_sq_prio_open(struct qps_ctx *ctx, struct qps_sq *sq)
{
	struct qps_prio_cfg cfg = {
		.post = qps_tx_prio_post,
		.arg = sq,
	};
	uint32_t depth = QPS_PRIO_DEFAULT_DEPTH;
	unsigned int b;

	while (depth > 2 && depth > ctx->tx_depth)
		depth >>= 1;
	for (b = 0; b < QPS_PRIO_BANDS; b++)
		cfg.depth[b] = depth;
	return qps_prio_create(&cfg, &sq->prio);
}

static int qps_sq_open(struct qps_ctx *ctx, struct qps_sq *sq, uint32_t idx)
{
	struct qps_qp_init_attr qa;
	uint32_t i;
	int ret;

	sq->ctx = ctx;
	sq->idx = idx;
	sq->path = ctx->tx_ops;
	sq->st = &ctx->stat.sq[idx];
	qps_alock_init(&sq->lock, ctx->lock_mode);
	ret = ctx->ops->create_cq(ctx->dev, (int)ctx->tx_depth, &sq->cq);
	if (ret < 0)
		return ret;

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = ctx->ud ? IBV_QPT_UD : IBV_QPT_RAW_PACKET;
	qa.send_cq = sq->cq;
	qa.cap.max_send_wr = ctx->tx_depth;
	qa.cap.max_send_sge = 1;
	qa.cap.max_inline_data = ctx->info.max_inline;
	if (idx == 0) {
		qa.recv_cq = ctx->rx.cq;
		qa.cap.max_recv_wr = ctx->rx.depth;
		qa.cap.max_recv_sge = 1;
	} else {
		qa.recv_cq = sq->cq;
	}
	ret = ctx->ops->create_qp(ctx->dev, &qa, &sq->qp);
	/* A UD WQE spends room on its address vector, so a UD QP may hold
	 * less inline data than the raw-packet probe found: ask for less
	 * until the device agrees, and send inline only up to that. */
	while (ret == -EINVAL && ctx->ud && qa.cap.max_inline_data) {
		qa.cap.max_inline_data = qa.cap.max_inline_data > 64 ?
					 qa.cap.max_inline_data / 2 : 0;
		ret = ctx->ops->create_qp(ctx->dev, &qa, &sq->qp);
	}
	if (ret < 0)
		return ret;
	if (ctx->ud && ctx->info.max_inline > qa.cap.max_inline_data)
		ctx->info.max_inline = qa.cap.max_inline_data;
	if (ctx->ud) {
		/* Created in RESET; QP 0 gets its receive buffers in RTS. */
		ret = qps_qp_up(ctx, sq->qp);
		if (ret < 0)
			return ret;
		sq->ud_dest = calloc(ctx->tx_depth, sizeof(*sq->ud_dest));
		if (!sq->ud_dest)
			return -ENOMEM;
	}

	sq->buf = ctx->tx_buf +
		  (size_t)idx * ctx->tx_depth * ctx->tx_slot_size;
	sq->free = calloc(ctx->tx_depth, sizeof(*sq->free));
	sq->wr = calloc(ctx->tx_depth, sizeof(*sq->wr));
	sq->sge = calloc(ctx->tx_depth, sizeof(*sq->sge));
	sq->meta = calloc(ctx->tx_depth, sizeof(*sq->meta));
	/* The posted order (tx.c): a power of two of at least tx_depth. */
	sq->post_mask = 1;
	while (sq->post_mask < ctx->tx_depth)
		sq->post_mask <<= 1;
	sq->posted = calloc(sq->post_mask, sizeof(*sq->posted));
	sq->post_mask--;
	sq->post_pos = calloc(ctx->tx_depth, sizeof(*sq->post_pos));
	if (!sq->free || !sq->wr || !sq->sge || !sq->meta || !sq->posted ||
	    !sq->post_pos)
		return -ENOMEM;
	ret = qps_sq_prio_open(ctx, sq);
	if (ret < 0)
		return ret;
	for (i = 0; i < ctx->tx_depth; i++)
		sq->free[i] = ctx->tx_depth - 1 - i;
	sq->nfree = ctx->tx_depth;
	/* IP IDs only have to differ between recent datagrams of one
	 * (source, destination) pair; spreading the queues' starting points
	 * keeps a flow that moves from repeating its recent IDs. */
	sq->ip_id = (uint16_t)(idx * (65536u / ctx->nsq));
	sq->room_seen = 0;
	return sq->path->init(sq);
}

int qps_sqs_create(struct qps_ctx *ctx)
{
	size_t len;
	uint32_t i;
	int ret;

	/* A whole frame on the raw path; on UD the device adds the headers
	 * and a slot holds qpsock's header and the payload. */
	if (ctx->ud)
		ctx->tx_slot_size = (QPS_UD_HDR_LEN + ctx->max_payload_cap + 63) &
				    ~63u;
	else
		ctx->tx_slot_size = (ctx->info.mtu + QPS_ETH_HLEN + 63) & ~63u;
	len = (size_t)ctx->nsq * ctx->tx_depth * ctx->tx_slot_size;
	len = (len + 4095) & ~(size_t)4095;
	ctx->tx_buf = aligned_alloc(4096, len);
	ctx->sq = aligned_alloc(QPS_CACHELINE, ctx->nsq * sizeof(*ctx->sq));
	/* Zeroed before any return: teardown walks ctx->sq. */
	if (ctx->sq)
		memset(ctx->sq, 0, ctx->nsq * sizeof(*ctx->sq));
	if (!ctx->tx_buf || !ctx->sq)
		return -ENOMEM;
	ret = ctx->ops->reg_mr(ctx->dev, ctx->tx_buf, len, &ctx->tx_mr);
	if (ret < 0)
		return ret;
	for (i = 0; i < ctx->nsq; i++) {
		ret = qps_sq_open(ctx, &ctx->sq[i], i);
		if (ret < 0)
			return ret;
	}
	ctx->qp = ctx->sq[0].qp;
	return 0;
}

void qps_sqs_destroy(struct qps_ctx *ctx)
{
	const struct qps_provider_ops *ops = ctx->ops;
	uint32_t i;

	for (i = 0; ctx->sq && i < ctx->nsq; i++) {
		struct qps_sq *sq = &ctx->sq[i];

		/* Parked slots die with the slot buffer below. */
		if (sq->prio)
			qps_prio_destroy(sq->prio);
		if (sq->qp)
			ops->destroy_qp(sq->qp);
		if (sq->cq)
			ops->destroy_cq(sq->cq);
		free(sq->free);
		free(sq->wr);
		free(sq->sge);
		free(sq->meta);
		free(sq->posted);
		free(sq->post_pos);
		free(sq->ud_dest);
	}
	free(ctx->sq);
	ctx->sq = NULL;
	ctx->qp = NULL;
	if (ctx->tx_mr)
		ops->dereg_mr(ctx->tx_mr);
	ctx->tx_mr = NULL;
	free(ctx->tx_buf);
	ctx->tx_buf = NULL;
}

void qps_sq_lock_all(struct qps_ctx *ctx)
{
	uint32_t i;

	for (i = 0; i < ctx->nsq; i++)
		qps_alock_lock(&ctx->sq[i].lock);
}

/* What was done under every lock may have changed what a queue's header
 * template was built from. */
void qps_sq_unlock_all(struct qps_ctx *ctx)
{
	uint32_t i = ctx->nsq;

	while (i--) {
		ctx->sq[i].tmpl.ep = NULL;
		qps_alock_unlock(&ctx->sq[i].lock);
	}
}
