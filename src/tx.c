// SPDX-License-Identifier: MIT
/*
 * Send path: build each frame in a registered slot and hand it to the
 * send queue, direct (sq_mlx4.c) or as a WR chain (sq_generic.c). "More
 * follows" (QPS_MSG_MORE, the rest of a qps_sendmmsg batch) lets the
 * doorbell wait; doorbell.c decides when it is rung. A slot returns to the
 * free stack when its send completes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "qps_int.h"

#define QPS_TX_FLAGS (QPS_MSG_DONTWAIT | QPS_MSG_MORE)
#define QPS_PRIO_MAX 15

int qps_tx_init(struct qps_ctx *ctx)
{
	size_t len;
	uint32_t i;
	int ret;

	ret = qps_db_init(ctx);
	if (ret < 0)
		return ret;
	ctx->tx_slot_size = (ctx->info.mtu + QPS_ETH_HLEN + 63) & ~63u;
	len = (size_t)ctx->tx_depth * ctx->tx_slot_size;
	ctx->tx_buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	ctx->tx_free = calloc(ctx->tx_depth, sizeof(*ctx->tx_free));
	ctx->tx_wr = calloc(ctx->tx_depth, sizeof(*ctx->tx_wr));
	ctx->tx_sge = calloc(ctx->tx_depth, sizeof(*ctx->tx_sge));
	if (!ctx->tx_buf || !ctx->tx_free || !ctx->tx_wr || !ctx->tx_sge)
		return -ENOMEM;
	ret = ctx->ops->reg_mr(ctx->dev, ctx->tx_buf, len, &ctx->tx_mr);
	if (ret < 0)
		return ret;
	for (i = 0; i < ctx->tx_depth; i++)
		ctx->tx_free[i] = ctx->tx_depth - 1 - i;
	ctx->tx_nfree = ctx->tx_depth;
	if (ctx->tx_path == QPS_TX_PATH_DIRECT)
		return qps_sq_mlx4_init(&ctx->sq, ctx->qp);
	return 0;
}

void qps_tx_fini(struct qps_ctx *ctx)
{
	qps_db_fini(ctx);
	if (ctx->tx_mr)
		ctx->ops->dereg_mr(ctx->tx_mr);
	free(ctx->tx_buf);
	free(ctx->tx_free);
	free(ctx->tx_wr);
	free(ctx->tx_sge);
}

void qps_tx_slot_put(struct qps_ctx *ctx, uint32_t slot)
{
	ctx->tx_free[ctx->tx_nfree++] = slot;
	ctx->tx_inflight--;
}

int qps_tx_reap_locked(struct qps_ctx *ctx)
{
	struct ibv_wc wc[QPS_RX_POLL_BATCH];
	int total = 0;
	int n, i;

	do {
		n = ctx->ops->poll_cq(ctx->tx_cq, QPS_RX_POLL_BATCH, wc);
		if (n < 0)
			return n;
		for (i = 0; i < n; i++) {
			if (wc[i].wr_id >= ctx->tx_depth) {
				ctx->st.tx_errors++;
				continue;
			}
			if (wc[i].status != IBV_WC_SUCCESS)
				ctx->st.tx_errors++;
			qps_tx_slot_put(ctx, (uint32_t)wc[i].wr_id);
		}
		total += n;
	} while (n == QPS_RX_POLL_BATCH);
	return total;
}

int qps_tx_flush_locked(struct qps_ctx *ctx)
{
	return qps_db_ring_locked(ctx, QPS_TXF_POLL);
}

/* Room for one more WQE: a free slot and, direct, a free ring entry. */
static bool qps_tx_room_locked(const struct qps_ctx *ctx)
{
	if (!ctx->tx_nfree)
		return false;
	return ctx->tx_path != QPS_TX_PATH_DIRECT ||
	       qps_sq_mlx4_room(&ctx->sq) > 0;
}

int qps_tx_xmit_locked(struct qps_ctx *ctx, uint32_t slot, uint32_t len,
		       bool more)
{
	int ret;

	if (ctx->tx_path == QPS_TX_PATH_DIRECT) {
		ret = qps_sq_mlx4_write(&ctx->sq, ctx->tx_buf +
					(size_t)slot * ctx->tx_slot_size, len,
					ctx->tx_mr->lkey, slot, true);
		if (ret < 0) {
			qps_tx_slot_put(ctx, slot);
			return ret;
		}
	} else {
		qps_sq_generic_put(ctx, slot, len);
	}
	ctx->tx_unrung++;
	ctx->st.tx_wqes++;
	if (!more)
		ret = qps_db_ring_locked(ctx, QPS_TXF_SEND);
	else if (!qps_tx_room_locked(ctx))
		ret = qps_db_ring_locked(ctx, QPS_TXF_FULL);
	else
		ret = 0;
	return ret < 0 ? ret : 0;
}

int qps_tx_end_locked(struct qps_ctx *ctx, bool more)
{
	if (!ctx->tx_unrung)
		return 0;
	if (more)
		return qps_db_defer_locked(ctx);
	return qps_db_ring_locked(ctx, QPS_TXF_SEND);
}

static uint64_t qps_now_ms(void)
{
	return qps_now_ns() / 1000000u;
}

/*
 * A free slot, waiting (bounded by SNDTIMEO) when the endpoint may. A
 * postponed doorbell is rung first: the queue drains only once rung.
 */
static int qps_tx_slot_get_locked(struct qps_ep *ep, bool dontwait,
				  uint32_t *slot)
{
	struct qps_ctx *ctx = ep->ctx;
	uint64_t deadline = 0;
	int ret;

	while (!qps_tx_room_locked(ctx)) {
		ret = qps_db_ring_locked(ctx, QPS_TXF_FULL);
		if (ret < 0)
			return ret;
		ret = qps_tx_reap_locked(ctx);
		if (ret < 0)
			return ret;
		if (qps_tx_room_locked(ctx))
			break;
		if (dontwait)
			return -EAGAIN;
		if (ep->sndtimeo_ms) {
			if (!deadline)
				deadline = qps_now_ms() + ep->sndtimeo_ms;
			else if (qps_now_ms() >= deadline)
				return -EAGAIN;
		}
		pthread_mutex_unlock(&ctx->tx_lock);
		sched_yield();
		pthread_mutex_lock(&ctx->tx_lock);
	}
	*slot = ctx->tx_free[--ctx->tx_nfree];
	ctx->tx_inflight++;
	return 0;
}

/* The connected peer's MAC, re-resolved once the route generation moved. */
static int qps_tx_peer_mac_locked(struct qps_ep *ep, uint8_t mac[6])
{
	uint64_t gen = qps_route_gen(ep->ctx);
	int ret;

	if (ep->peer_route_gen != gen) {
		ret = qps_route_resolve(ep->ctx, ep->peer.sin_addr.s_addr,
					ep->peer_mac);
		if (ret < 0)
			return ret;
		ep->peer_route_gen = gen;
	}
	memcpy(mac, ep->peer_mac, 6);
	return 0;
}

/* What can be said of a datagram before taking any lock. */
static int qps_tx_check(const struct qps_ep *ep, const void *buf, size_t len,
			const struct sockaddr_in *dst)
{
	if (len > ep->ctx->max_payload)
		return -EMSGSIZE;
	if (!buf && len)
		return -EFAULT;
	if (dst->sin_port == 0)
		return -EINVAL;
	return 0;
}

/* Build one checked datagram into a slot and hand it to the send queue. */
static int qps_tx_one_locked(struct qps_ep *ep, const void *buf, size_t len,
			     const struct sockaddr_in *dst, bool dontwait,
			     bool more)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_frame_hdr h;
	uint8_t *frame;
	uint32_t slot;
	int ret;

	memset(&h, 0, sizeof(h));
	if (dst == &ep->peer)
		ret = qps_tx_peer_mac_locked(ep, h.dst_mac);
	else
		ret = qps_route_resolve(ctx, dst->sin_addr.s_addr, h.dst_mac);
	if (ret < 0)
		return ret;
	ret = qps_tx_slot_get_locked(ep, dontwait, &slot);
	if (ret < 0)
		return ret;

	memcpy(h.src_mac, ctx->info.mac, 6);
	h.saddr = ctx->info.addr.s_addr;
	h.daddr = dst->sin_addr.s_addr;
	h.sport = ep->local.sin_port;
	h.dport = dst->sin_port;
	h.ip_id = htons(ctx->ip_id++);
	frame = ctx->tx_buf + (size_t)slot * ctx->tx_slot_size;
	if (len)
		memcpy(frame + QPS_HDRS_LEN, buf, len);
	ret = qps_frame_build(frame, &h, len);
	if (ret >= 0)
		ret = qps_tx_xmit_locked(ctx, slot, (uint32_t)ret, more);
	else
		qps_tx_slot_put(ctx, slot);
	if (ret < 0)
		return ret;
	ctx->st.tx_packets++;
	ctx->st.tx_bytes += len;
	return 0;
}

static ssize_t qps_tx_datagram(struct qps_ep *ep, const void *buf, size_t len,
			       int flags, const struct sockaddr_in *dst)
{
	struct qps_ctx *ctx = ep->ctx;
	bool more = flags & QPS_MSG_MORE;
	int ret, end;

	if (flags & ~QPS_TX_FLAGS)
		return -EINVAL;
	ret = qps_tx_check(ep, buf, len, dst);
	if (ret < 0)
		return ret;
	ret = qps_ep_autobind(ep);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&ctx->tx_lock);
	ret = qps_tx_one_locked(ep, buf, len, dst,
				ep->nonblock || (flags & QPS_MSG_DONTWAIT),
				more);
	end = qps_tx_end_locked(ctx, more);
	pthread_mutex_unlock(&ctx->tx_lock);
	if (ret == 0 && end < 0)
		ret = end;
	return ret < 0 ? ret : (ssize_t)len;
}

ssize_t qps_send(struct qps_ep *ep, const void *buf, size_t len, int flags)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (!ep->connected)
		return -EDESTADDRREQ;
	return qps_tx_datagram(ep, buf, len, flags, &ep->peer);
}

/* The destination of a datagram: @dest, or the connected peer. */
static int qps_tx_dest(struct qps_ep *ep, const struct sockaddr *dest,
		       socklen_t dest_len, const struct sockaddr_in **dst)
{
	if (!dest) {
		if (!ep->connected)
			return -EDESTADDRREQ;
		*dst = &ep->peer;
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
	return qps_tx_datagram(ep, buf, len, flags, sin);
}

/* One message of a batch; @more: the doorbell may wait after it. */
static int qps_tx_msg_locked(struct qps_ep *ep, const struct qps_msg *m,
			     bool dontwait, bool more)
{
	const struct sockaddr_in *dst;
	int ret;

	ret = qps_tx_dest(ep, m->dest, m->dest_len, &dst);
	if (ret < 0)
		return ret;
	if (m->priority < -1 || m->priority > QPS_PRIO_MAX)
		return -EINVAL;
	ret = qps_tx_check(ep, m->buf, m->len, dst);
	if (ret < 0)
		return ret;
	/* Lock order tx_lock -> rx_lock: binding takes rx_lock. */
	ret = qps_ep_autobind(ep);
	if (ret < 0)
		return ret;
	return qps_tx_one_locked(ep, m->buf, m->len, dst, dontwait, more);
}

int qps_sendmmsg(struct qps_ep *ep, struct qps_msg *msgs, unsigned int n,
		 int flags)
{
	QPS_ERRNO_GUARD;
	struct qps_ctx *ctx;
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
	ctx = ep->ctx;
	dontwait = ep->nonblock || (flags & QPS_MSG_DONTWAIT);
	pthread_mutex_lock(&ctx->tx_lock);
	for (i = 0; i < n; i++) {
		ret = qps_tx_msg_locked(ep, &msgs[i], dontwait,
					more || i + 1 < n);
		msgs[i].result = ret < 0 ? ret : (ssize_t)msgs[i].len;
		if (ret < 0)
			break;
	}
	for (j = i + 1; j < n; j++)
		msgs[j].result = -ECANCELED;
	ret = qps_tx_end_locked(ctx, more);
	pthread_mutex_unlock(&ctx->tx_lock);
	if (ret < 0 && i == n) {
		/* The last doorbell failed: its chain is in tx_errors. */
		msgs[n - 1].result = ret;
		i = n - 1;
	}
	return i ? (int)i : (int)msgs[0].result;
}
