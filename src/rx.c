// SPDX-License-Identifier: MIT
/*
 * Receive path: poll the receive CQ, validate each frame, demultiplex it to
 * endpoint queues and repost its buffer once the last endpoint holding it
 * has copied it out. Everything here runs under ctx->rx_lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "qps_int.h"

#define QPS_RX_FLAGS (QPS_MSG_PEEK | QPS_MSG_TRUNC | QPS_MSG_DONTWAIT)

static uint8_t *qps_rx_buf_addr(struct qps_ctx *ctx, uint32_t buf)
{
	return ctx->rx_buf + (size_t)buf * ctx->rx_buf_size;
}

static int qps_rx_post(struct qps_ctx *ctx, uint32_t buf)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)qps_rx_buf_addr(ctx, buf),
		.length = ctx->rx_buf_size,
		.lkey = ctx->rx_mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = buf,
		.sg_list = &sge,
		.num_sge = 1,
	};
	struct ibv_recv_wr *bad;

	return ctx->ops->post_recv(ctx->qp, &wr, &bad);
}

int qps_rx_init(struct qps_ctx *ctx)
{
	size_t len;
	uint32_t i;
	int ret;

	ctx->rx_buf_size = (ctx->info.mtu + QPS_ETH_HLEN + 63) & ~63u;
	len = (size_t)ctx->rx_depth * ctx->rx_buf_size;
	ret = ctx->ops->alloc_buf(ctx->dev, len, (void **)&ctx->rx_buf);
	if (ret == 0) {
		ctx->rx_buf_dev = true;
	} else if (ret == -EOPNOTSUPP) {
		ctx->rx_buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
		if (!ctx->rx_buf)
			return -ENOMEM;
	} else {
		return ret;
	}
	ctx->rx_ref = calloc(ctx->rx_depth, sizeof(*ctx->rx_ref));
	if (!ctx->rx_ref)
		return -ENOMEM;
	ret = ctx->ops->reg_mr(ctx->dev, ctx->rx_buf, len, &ctx->rx_mr);
	if (ret < 0)
		return ret;
	for (i = 0; i < ctx->rx_depth; i++) {
		ret = qps_rx_post(ctx, i);
		if (ret < 0)
			return ret;
	}
	return 0;
}

void qps_rx_fini(struct qps_ctx *ctx)
{
	size_t len = (size_t)ctx->rx_depth * ctx->rx_buf_size;

	if (ctx->rx_mr)
		ctx->ops->dereg_mr(ctx->rx_mr);
	if (ctx->rx_buf_dev)
		ctx->ops->free_buf(ctx->dev, ctx->rx_buf, len);
	else
		free(ctx->rx_buf);
	free(ctx->rx_ref);
}

void qps_rx_buf_put_locked(struct qps_ctx *ctx, uint32_t buf)
{
	if (--ctx->rx_ref[buf])
		return;
	if (qps_rx_post(ctx, buf) < 0)
		ctx->st.rx_errors++;
}

static void qps_ep_signal(struct qps_ep *ep)
{
	uint64_t one = 1;

	if (write(ep->efd, &one, sizeof(one)) < 0) {
		/* Counter saturated: the fd is readable anyway. */
	}
}

static void qps_ep_unsignal(struct qps_ep *ep)
{
	uint64_t v;

	if (read(ep->efd, &v, sizeof(v)) < 0) {
		/* Already zero: nothing was pending. */
	}
}

static void qps_rxq_push(struct qps_ctx *ctx, struct qps_ep *ep, uint32_t buf,
			 const struct qps_frame_info *fi)
{
	struct qps_rxd *d;

	if (ep->rxq_count >= ep->rcvbuf) {
		ctx->st.rx_queue_full++;
		return;
	}
	d = &ep->rxq[(ep->rxq_head + ep->rxq_count) % ep->rxq_cap];
	d->buf = buf;
	d->off = (uint16_t)(fi->payload - qps_rx_buf_addr(ctx, buf));
	d->len = (uint16_t)fi->payload_len;
	d->saddr = fi->hdr.saddr;
	d->sport = fi->hdr.sport;
	ctx->rx_ref[buf]++;
	ctx->st.rx_packets++;
	ctx->st.rx_bytes += fi->payload_len;
	if (ep->rxq_count++ == 0)
		qps_ep_signal(ep);
}

/* How well @ep matches: -1 no, else higher is more specific. */
static int qps_rx_score(const struct qps_ep *ep, const struct qps_frame_hdr *h)
{
	int score = 0;

	if (ep->local.sin_port != h->dport)
		return -1;
	if (ep->local.sin_addr.s_addr != INADDR_ANY) {
		if (ep->local.sin_addr.s_addr != h->daddr)
			return -1;
		score++;
	}
	if (ep->connected) {
		if (ep->peer.sin_addr.s_addr != h->saddr ||
		    ep->peer.sin_port != h->sport)
			return -1;
		score += 2;
	}
	return score;
}

/*
 * Unicast goes to the single most specific endpoint; multicast and
 * broadcast go to every match, all holding the same buffer.
 */
static void qps_rx_demux(struct qps_ctx *ctx, uint32_t buf,
			 const struct qps_frame_info *fi)
{
	uint32_t daddr = ntohl(fi->hdr.daddr);
	bool fanout = IN_MULTICAST(daddr) || daddr == INADDR_BROADCAST;
	struct qps_ep *ep, *best = NULL;
	int s, best_s = -1;

	ep = ctx->bind_tab[ntohs(fi->hdr.dport) % QPS_BIND_BUCKETS];
	for (; ep; ep = ep->bind_next) {
		s = qps_rx_score(ep, &fi->hdr);
		if (s < 0)
			continue;
		if (fanout) {
			qps_rxq_push(ctx, ep, buf, fi);
			best = ep;
		} else if (s > best_s) {
			best = ep;
			best_s = s;
		}
	}
	if (!best)
		ctx->st.rx_no_endpoint++;
	else if (!fanout)
		qps_rxq_push(ctx, best, buf, fi);
}

static void qps_rx_one(struct qps_ctx *ctx, const struct ibv_wc *wc)
{
	struct qps_frame_info fi;
	enum qps_rx_reason why;
	uint32_t buf;

	if (wc->wr_id >= ctx->rx_depth) {
		ctx->st.rx_errors++;
		return;
	}
	buf = (uint32_t)wc->wr_id;
	/* Progress holds a reference while it demultiplexes. */
	ctx->rx_ref[buf] = 1;
	if (wc->status != IBV_WC_SUCCESS || wc->byte_len > ctx->rx_buf_size) {
		ctx->st.rx_errors++;
		qps_rx_buf_put_locked(ctx, buf);
		return;
	}
	why = qps_frame_parse(qps_rx_buf_addr(ctx, buf), wc->byte_len, &fi);
	ctx->st.rx_bad[why]++;
	if (why == QPS_RX_OK)
		qps_rx_demux(ctx, buf, &fi);
	qps_rx_buf_put_locked(ctx, buf);
}

/*
 * Drain the CQ, then arm it and poll once more: a CQE that landed between
 * the last empty poll and the arm raised no event, so only this second
 * poll can see it.
 */
int qps_rx_progress_locked(struct qps_ctx *ctx)
{
	struct ibv_wc wc[QPS_RX_POLL_BATCH];
	bool armed = false;
	int total = 0;
	int n, i;

	if (ctx->event_fd >= 0)
		ctx->ops->ack_events(ctx->dev);
	for (;;) {
		n = ctx->ops->poll_cq(ctx->rx_cq, QPS_RX_POLL_BATCH, wc);
		if (n < 0)
			return n;
		for (i = 0; i < n; i++)
			qps_rx_one(ctx, &wc[i]);
		total += n;
		if (n)
			continue;
		if (armed || ctx->event_fd < 0)
			break;
		ctx->ops->req_notify_cq(ctx->rx_cq);
		armed = true;
	}
	return total;
}

void qps_rxq_drain_locked(struct qps_ep *ep)
{
	struct qps_ctx *ctx = ep->ctx;

	while (ep->rxq_count) {
		qps_rx_buf_put_locked(ctx, ep->rxq[ep->rxq_head].buf);
		ep->rxq_head = (ep->rxq_head + 1) % ep->rxq_cap;
		ep->rxq_count--;
	}
	qps_ep_unsignal(ep);
}

static ssize_t qps_rxq_pop_locked(struct qps_ep *ep, void *buf, size_t len,
				  int flags, struct sockaddr *src,
				  socklen_t *src_len)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_rxd d = ep->rxq[ep->rxq_head];
	size_t n = d.len < len ? d.len : len;
	struct sockaddr_in sin;

	if (n)
		memcpy(buf, qps_rx_buf_addr(ctx, d.buf) + d.off, n);
	if (src) {
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = d.saddr;
		sin.sin_port = d.sport;
		memcpy(src, &sin, *src_len < sizeof(sin) ? *src_len : sizeof(sin));
		*src_len = sizeof(sin);
	}
	if (!(flags & QPS_MSG_PEEK)) {
		if (n < d.len)
			ctx->st.rx_truncated++;
		ep->rxq_head = (ep->rxq_head + 1) % ep->rxq_cap;
		if (--ep->rxq_count == 0)
			qps_ep_unsignal(ep);
		qps_rx_buf_put_locked(ctx, d.buf);
	}
	return (flags & QPS_MSG_TRUNC) ? (ssize_t)d.len : (ssize_t)n;
}

static int64_t qps_ms_left(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(deadline->tv_sec - now.tv_sec) * 1000 +
	       (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

ssize_t qps_recvfrom(struct qps_ep *ep, void *buf, size_t len, int flags,
		     struct sockaddr *src, socklen_t *src_len)
{
	QPS_ERRNO_GUARD;
	struct qps_ctx *ctx;
	struct timespec deadline;
	struct pollfd pfd;
	ssize_t ret = qps_ep_check(ep);
	bool dontwait;
	int64_t left;
	int timeout;

	if (ret < 0)
		return ret;
	if (flags & ~QPS_RX_FLAGS)
		return -EINVAL;
	if (!buf && len)
		return -EFAULT;
	if (src && !src_len)
		return -EFAULT;
	ctx = ep->ctx;
	dontwait = ep->nonblock || (flags & QPS_MSG_DONTWAIT);
	if (ep->rcvtimeo_ms) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += ep->rcvtimeo_ms / 1000;
		deadline.tv_nsec += (long)(ep->rcvtimeo_ms % 1000) * 1000000;
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000;
		}
	}

	for (;;) {
		/* A postponed doorbell must not wait for our sleep. */
		pthread_mutex_lock(&ctx->tx_lock);
		qps_tx_flush_locked(ctx);
		qps_tx_reap_locked(ctx);
		pthread_mutex_unlock(&ctx->tx_lock);

		pthread_mutex_lock(&ctx->rx_lock);
		if (ep->state != QPS_EP_OPEN) {
			ret = -EBADF;
		} else {
			if (!ep->rxq_count)
				qps_rx_progress_locked(ctx);
			ret = ep->rxq_count ?
			      qps_rxq_pop_locked(ep, buf, len, flags, src,
						 src_len) : -EAGAIN;
		}
		pthread_mutex_unlock(&ctx->rx_lock);
		if (ret != -EAGAIN || dontwait)
			return ret;

		timeout = -1;
		if (ep->rcvtimeo_ms) {
			left = qps_ms_left(&deadline);
			if (left <= 0)
				return -ETIMEDOUT;
			timeout = (int)left;
		}
		/* Without a completion channel nothing wakes us: poll. */
		if (ctx->event_fd < 0 && (timeout < 0 || timeout > 1))
			timeout = 1;
		pfd.fd = ep->epfd;
		pfd.events = POLLIN;
		poll(&pfd, 1, timeout);
	}
}

ssize_t qps_recv(struct qps_ep *ep, void *buf, size_t len, int flags)
{
	QPS_ERRNO_GUARD;
	return qps_recvfrom(ep, buf, len, flags, NULL, NULL);
}
