// SPDX-License-Identifier: MIT
/*
 * Send path: build the frame in a registered slot, chain its WR, and post
 * the chain in one call (one doorbell) once nothing more is known to
 * follow. Every WR is signalled so a completion returns exactly its slot.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qps_int.h"

#define QPS_TX_FLAGS (QPS_MSG_DONTWAIT | QPS_MSG_MORE)

int qps_tx_init(struct qps_ctx *ctx)
{
	size_t len;
	uint32_t i;
	int ret;

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
	return 0;
}

void qps_tx_fini(struct qps_ctx *ctx)
{
	if (ctx->tx_mr)
		ctx->ops->dereg_mr(ctx->tx_mr);
	free(ctx->tx_buf);
	free(ctx->tx_free);
	free(ctx->tx_wr);
	free(ctx->tx_sge);
}

static void qps_tx_slot_put(struct qps_ctx *ctx, uint32_t slot)
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

static void qps_tx_drop_pending(struct qps_ctx *ctx)
{
	struct ibv_send_wr *wr;

	for (wr = ctx->pend_head; wr; wr = wr->next) {
		ctx->st.tx_errors++;
		qps_tx_slot_put(ctx, (uint32_t)wr->wr_id);
	}
	ctx->pend_head = ctx->pend_tail = NULL;
	ctx->pend_n = 0;
}

/*
 * Post the pending chain. A full send queue (-ENOMEM, the verbs answer)
 * leaves the unposted tail pending; completions are reaped and the post
 * retried, since on every provider a queue drains once rung. Any other
 * error drops the chain into tx_errors so nothing vanishes uncounted.
 */
int qps_tx_flush_locked(struct qps_ctx *ctx)
{
	struct ibv_send_wr *bad, *wr;
	int tries = 0;
	int ret;

	while (ctx->pend_head) {
		bad = NULL;
		ret = ctx->ops->post_send(ctx->qp, ctx->pend_head, &bad);
		if (ret == 0) {
			ctx->pend_head = ctx->pend_tail = NULL;
			ctx->pend_n = 0;
			return 0;
		}
		if (ret != -ENOMEM || !bad || ++tries > 1000) {
			qps_tx_drop_pending(ctx);
			return ret;
		}
		ctx->pend_head = bad;
		ctx->pend_n = 0;
		for (wr = bad; wr; wr = wr->next)
			ctx->pend_n++;
		ret = qps_tx_reap_locked(ctx);
		if (ret < 0) {
			qps_tx_drop_pending(ctx);
			return ret;
		}
		if (ret == 0)
			sched_yield();
	}
	return 0;
}

static uint64_t qps_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A free slot, waiting (bounded by SNDTIMEO) when the endpoint may. */
static int qps_tx_slot_get_locked(struct qps_ep *ep, bool dontwait,
				  uint32_t *slot)
{
	struct qps_ctx *ctx = ep->ctx;
	uint64_t deadline = 0;
	int ret;

	while (!ctx->tx_nfree) {
		ret = qps_tx_flush_locked(ctx);
		if (ret < 0)
			return ret;
		ret = qps_tx_reap_locked(ctx);
		if (ret < 0)
			return ret;
		if (ctx->tx_nfree)
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

static ssize_t qps_tx_datagram(struct qps_ep *ep, const void *buf, size_t len,
			       int flags, const struct sockaddr_in *dst)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_frame_hdr h;
	struct ibv_send_wr *wr;
	struct ibv_sge *sge;
	uint8_t *frame;
	uint32_t slot;
	int ret;

	if (flags & ~QPS_TX_FLAGS)
		return -EINVAL;
	if (len > ctx->max_payload)
		return -EMSGSIZE;
	if (!buf && len)
		return -EFAULT;
	if (dst->sin_port == 0)
		return -EINVAL;
	ret = qps_ep_autobind(ep);
	if (ret < 0)
		return ret;

	memset(&h, 0, sizeof(h));
	pthread_mutex_lock(&ctx->tx_lock);
	if (dst == &ep->peer)
		ret = qps_tx_peer_mac_locked(ep, h.dst_mac);
	else
		ret = qps_route_resolve(ctx, dst->sin_addr.s_addr, h.dst_mac);
	if (ret < 0)
		goto out;
	ret = qps_tx_slot_get_locked(ep, ep->nonblock ||
				     (flags & QPS_MSG_DONTWAIT), &slot);
	if (ret < 0)
		goto out;

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
	if (ret < 0) {
		qps_tx_slot_put(ctx, slot);
		goto out;
	}

	sge = &ctx->tx_sge[slot];
	sge->addr = (uintptr_t)frame;
	sge->length = (uint32_t)ret;
	sge->lkey = ctx->tx_mr->lkey;
	wr = &ctx->tx_wr[slot];
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = slot;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	wr->send_flags = IBV_SEND_SIGNALED;
	if ((uint32_t)ret <= ctx->info.max_inline)
		wr->send_flags |= IBV_SEND_INLINE;
	if (ctx->pend_tail)
		ctx->pend_tail->next = wr;
	else
		ctx->pend_head = wr;
	ctx->pend_tail = wr;
	ctx->pend_n++;
	ctx->st.tx_packets++;
	ctx->st.tx_bytes += len;

	ret = 0;
	if (!(flags & QPS_MSG_MORE) || ctx->pend_n >= QPS_TX_BATCH_MAX ||
	    !ctx->tx_nfree)
		ret = qps_tx_flush_locked(ctx);
out:
	pthread_mutex_unlock(&ctx->tx_lock);
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

ssize_t qps_sendto(struct qps_ep *ep, const void *buf, size_t len, int flags,
		   const struct sockaddr *dest, socklen_t dest_len)
{
	QPS_ERRNO_GUARD;
	const struct sockaddr_in *sin;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (!dest) {
		if (!ep->connected)
			return -EDESTADDRREQ;
		return qps_tx_datagram(ep, buf, len, flags, &ep->peer);
	}
	ret = qps_sin_check(dest, dest_len, &sin);
	if (ret < 0)
		return ret;
	return qps_tx_datagram(ep, buf, len, flags, sin);
}
