// SPDX-License-Identifier: MIT
/*
 * Receive path: poll the receive CQ, validate each frame, hand it to the
 * demultiplexer (demux.c) and repost its buffer once the last endpoint
 * holding it has copied it out; the endpoint receive queues and the
 * receive calls. Everything here runs under ctx->rx.lock; the demux
 * tables are read inside an epoch section instead (demux.h).
 *
 * On the UD transport a buffer holds the 40-byte GRH the device writes,
 * qpsock's UD header and the payload; qps_ud_parse (ud_frame.c) fills the
 * same struct qps_frame_info as the frame parser, so everything after the
 * parse (demultiplexing, queues, PKTINFO, source filters) is shared.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "demux.h"
#include "dump.h"
#include "endpoint.h"
#include "qps_int.h"
#include "rx.h"
#include "tx_wait.h"
#include "ud.h"

#define QPS_RX_FLAGS (QPS_MSG_PEEK | QPS_MSG_TRUNC | QPS_MSG_DONTWAIT)

static uint8_t *qps_rx_buf_addr(struct qps_ctx *ctx, uint32_t buf)
{
	if (buf >= ctx->rx.depth)
		return ctx->rx.big[buf - ctx->rx.depth].data;
	return ctx->rx.buf + (size_t)buf * ctx->rx.buf_size;
}

/* At most this many reassembled datagrams queued at once; the memory
 * they take is bounded by the endpoints' QPS_OPT_RCVBUF. */
#define QPS_RX_BIG_MAX 65536u

/* Hand a reassembled frame (malloc'd) to a slot, holding one reference
 * for the poller; returns its buffer index, or UINT32_MAX (freed). */
static uint32_t qps_rx_big_add(struct qps_ctx *ctx, uint8_t *frame)
{
	struct qps_rx *rx = &ctx->rx;
	uint32_t i;

	if (rx->big_free == UINT32_MAX) {
		uint32_t n = rx->nbig ? rx->nbig * 2 : 16;
		struct qps_rx_big *b;

		if (rx->nbig >= QPS_RX_BIG_MAX ||
		    !(b = realloc(rx->big, n * sizeof(*b)))) {
			free(frame);
			return UINT32_MAX;
		}
		for (i = rx->nbig; i < n; i++)
			b[i] = (struct qps_rx_big){
				.next_free = i + 1 < n ? i + 1 : UINT32_MAX };
		rx->big = b;
		rx->big_free = rx->nbig;
		rx->nbig = n;
	}
	i = rx->big_free;
	rx->big_free = rx->big[i].next_free;
	rx->big[i].data = frame;
	rx->big[i].ref = 1;
	return rx->depth + i;
}

static void qps_rx_big_put(struct qps_ctx *ctx, uint32_t i)
{
	struct qps_rx_big *b = &ctx->rx.big[i];

	if (--b->ref)
		return;
	free(b->data);
	b->data = NULL;
	b->next_free = ctx->rx.big_free;
	ctx->rx.big_free = i;
}

static void qps_rx_buf_get_locked(struct qps_ctx *ctx, uint32_t buf)
{
	if (buf >= ctx->rx.depth)
		ctx->rx.big[buf - ctx->rx.depth].ref++;
	else
		ctx->rx.ref[buf]++;
}

/*
 * Buffers freed and not yet posted again, kept as one ready WR chain so
 * that they go back to the device in one post_recv instead of one each.
 * They are posted before every poll of the CQ, when the chain is full,
 * and when a receive empties an endpoint's queue (the application has
 * caught up with the device): a buffer is never held back across a poll,
 * and at most @max of them while the application is still behind.
 */
struct qps_rx_repost {
	uint32_t n, max;
	struct ibv_recv_wr wr[QPS_RX_POLL_BATCH];
	struct ibv_sge sge[QPS_RX_POLL_BATCH];
};

static int qps_rx_repost_init(struct qps_ctx *ctx)
{
	struct qps_rx_repost *rp = calloc(1, sizeof(*rp));
	uint32_t i;

	if (!rp)
		return -ENOMEM;
	/* A quarter of the ring at most: a device that fills buffers while
	 * the poller is away keeps most of them. */
	rp->max = ctx->rx.depth / 4;
	if (rp->max > QPS_RX_POLL_BATCH)
		rp->max = QPS_RX_POLL_BATCH;
	if (!rp->max)
		rp->max = 1;
	for (i = 0; i < QPS_RX_POLL_BATCH; i++) {
		rp->sge[i].length = ctx->rx.buf_size;
		rp->sge[i].lkey = ctx->rx.mr->lkey;
		rp->wr[i].sg_list = &rp->sge[i];
		rp->wr[i].num_sge = 1;
		rp->wr[i].next = i + 1 < QPS_RX_POLL_BATCH ? &rp->wr[i + 1] :
			NULL;
	}
	ctx->rx.repost = rp;
	return 0;
}

/* Post what the chain holds; a buffer the device refused is counted and
 * lost until the next refill, as a single post would have lost it. */
static void qps_rx_repost_flush(struct qps_ctx *ctx)
{
	struct qps_rx_repost *rp = ctx->rx.repost;
	struct ibv_recv_wr *bad = NULL, *last;
	uint32_t n = rp->n;

	if (!n)
		return;
	rp->n = 0;
	/* The QP is failed: qp_recover.c reposts every free buffer. */
	if (ctx->rx.qp_err)
		return;
	last = &rp->wr[n - 1];
	last->next = NULL;
	if (ctx->ops->post_recv(ctx->qp, rp->wr, &bad) < 0)
		ctx->st->rx_errors += bad ? (uint64_t)(last - bad) + 1 : n;
	last->next = n < QPS_RX_POLL_BATCH ? last + 1 : NULL;
}

static void qps_rx_repost_add(struct qps_ctx *ctx, uint32_t buf)
{
	struct qps_rx_repost *rp = ctx->rx.repost;

	rp->wr[rp->n].wr_id = buf;
	rp->sge[rp->n].addr = (uintptr_t)qps_rx_buf_addr(ctx, buf);
	if (++rp->n >= rp->max)
		qps_rx_repost_flush(ctx);
}

static int qps_rx_post(struct qps_ctx *ctx, uint32_t buf)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)qps_rx_buf_addr(ctx, buf),
		.length = ctx->rx.buf_size,
		.lkey = ctx->rx.mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = buf,
		.sg_list = &sge,
		.num_sge = 1,
	};
	struct ibv_recv_wr *bad;

	return ctx->ops->post_recv(ctx->qp, &wr, &bad);
}

/* The endpoint and demux tables, before anything can reach them. */
static int qps_rx_tables_init(struct qps_ctx *ctx)
{
	int ret;

	pthread_mutex_init(&ctx->ctl_lock, NULL);
	ctx->ctl_init = true;
	ret = qps_demux_init(ctx);
	return ret < 0 ? ret : qps_mcast_init(ctx);
}

int qps_rx_init(struct qps_ctx *ctx)
{
	size_t len;
	uint32_t i;
	int ret;

	ret = qps_rx_tables_init(ctx);
	if (ret < 0)
		return ret;
	qps_ipfrag_init(&ctx->rx.frag, ctx->ipfrag_mem,
			(uint64_t)ctx->ipfrag_time_ms * 1000000u);
	ctx->rx.big_free = UINT32_MAX;
	if (ctx->ud)
		ctx->rx.buf_size = (QPS_UD_GRH_LEN + QPS_UD_HDR_LEN +
				    ctx->max_payload_cap + 63) & ~63u;
	else
		ctx->rx.buf_size = (ctx->info.mtu + QPS_ETH_HLEN + 63) & ~63u;
	len = (size_t)ctx->rx.depth * ctx->rx.buf_size;
	ret = ctx->ops->alloc_buf(ctx->dev, len, (void **)&ctx->rx.buf);
	if (ret == 0) {
		ctx->rx.buf_dev = true;
	} else if (ret == -EOPNOTSUPP) {
		ctx->rx.buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
		if (!ctx->rx.buf)
			return -ENOMEM;
	} else {
		return ret;
	}
	ctx->rx.ref = calloc(ctx->rx.depth, sizeof(*ctx->rx.ref));
	if (!ctx->rx.ref)
		return -ENOMEM;
	ret = ctx->ops->reg_mr(ctx->dev, ctx->rx.buf, len, &ctx->rx.mr);
	if (ret < 0)
		return ret;
	ret = qps_rx_repost_init(ctx);
	if (ret < 0)
		return ret;
	for (i = 0; i < ctx->rx.depth; i++) {
		ret = qps_rx_post(ctx, i);
		if (ret < 0)
			return ret;
	}
	return 0;
}

void qps_rx_fini(struct qps_ctx *ctx)
{
	size_t len = (size_t)ctx->rx.depth * ctx->rx.buf_size;

	if (ctx->rx.mr)
		ctx->ops->dereg_mr(ctx->rx.mr);
	if (ctx->rx.buf_dev)
		ctx->ops->free_buf(ctx->dev, ctx->rx.buf, len);
	else
		free(ctx->rx.buf);
	free(ctx->rx.ref);
	free(ctx->rx.repost);
	ctx->rx.repost = NULL;
	qps_ipfrag_fini(&ctx->rx.frag);
	/* Every endpoint queue was drained: no slot is referenced. */
	free(ctx->rx.big);
	ctx->rx.big = NULL;
	if (!ctx->ctl_init)
		return;
	qps_mcast_fini(ctx);
	qps_demux_fini(ctx);
	free(ctx->dmx.retired);	/* every writer flushed before returning */
	pthread_mutex_destroy(&ctx->ctl_lock);
	ctx->ctl_init = false;
}

/* A buffer is held by the poller and by up to every endpoint at once. */
_Static_assert((uint64_t)QPS_MAX_EP + 1 <
		       1ull << (8 * sizeof(((struct qps_rx *)0)->ref[0])),
	       "rx.ref cannot count every endpoint holding one buffer");

/* A receive buffer nobody holds any more goes back to the device. */
static void qps_rx_buf_free_locked(struct qps_ctx *ctx, uint32_t buf)
{
	/* The QP is failed: a buffer posted now would be flushed at once,
	 * and progress would chase it forever. qp_recover.c reposts it. */
	if (ctx->rx.qp_err)
		return;
	qps_rx_repost_add(ctx, buf);
}

void qps_rx_buf_put_locked(struct qps_ctx *ctx, uint32_t buf)
{
	if (buf >= ctx->rx.depth) {
		qps_rx_big_put(ctx, buf - ctx->rx.depth);
		return;
	}
	if (!--ctx->rx.ref[buf])
		qps_rx_buf_free_locked(ctx, buf);
}

int qps_rx_refill_locked(struct qps_ctx *ctx)
{
	uint32_t i;
	int ret = 0;

	/* The chain's buffers are free: the loop below posts them. */
	ctx->rx.repost->n = 0;
	for (i = 0; i < ctx->rx.depth; i++) {
		if (ctx->rx.ref[i])
			continue;
		if (qps_rx_post(ctx, i) < 0) {
			ctx->st->rx_errors++;
			ret = -EIO;
		}
	}
	__atomic_store_n(&ctx->rx.qp_err, false, __ATOMIC_RELAXED);
	return ret;
}

/*
 * Arming. Two things wake a thread asleep on an endpoint's descriptors:
 * its eventfd, written by a push while the endpoint has a reason to be
 * followed (efd_out, efd_refs), and the device's event fd, which fires
 * on the next completion after req_notify_cq while the context has one
 * (rx.arm_sticky, rx.arm_refs). Reasons are counted while a thread is
 * about to sleep (a blocking receive, a caller between qps_ctx_arm and
 * qps_ctx_disarm), and are sticky only for a descriptor handed out to an
 * application that never says when it sleeps. So a busy-polling thread
 * makes no system call per datagram and costs its peers no wake-up
 * message, as the kernel skips the wake-up of a socket nobody sleeps on.
 */
static void qps_ep_signal(struct qps_ep *ep)
{
	uint64_t one = 1;

	if ((!ep->efd_out && !ep->efd_refs) || ep->efd_on)
		return;
	ep->efd_on = true;
	if (write(ep->efd, &one, sizeof(one)) < 0) {
		/* Counter saturated: the fd is readable anyway. */
	}
}

static void qps_ep_unsignal(struct qps_ep *ep)
{
	uint64_t v;

	if (!ep->efd_on)
		return;
	ep->efd_on = false;
	if (read(ep->efd, &v, sizeof(v)) < 0) {
		/* Already zero: nothing was pending. */
	}
}

/* Wake every thread asleep on @ep (close, shutdown): efd stays readable
 * until a pop empties the queue, and they do not pop. */
void qps_ep_wake_locked(struct qps_ep *ep)
{
	uint64_t one = 1;

	if (ep->efd < 0 || ep->efd_on)
		return;
	ep->efd_on = true;
	if (write(ep->efd, &one, sizeof(one)) < 0) {
		/* Counter saturated: the fd is readable anyway. */
	}
}

static bool qps_rx_arm_wanted(const struct qps_rx *rx)
{
	return rx->arm_refs || (rx->arm_sticky && !rx->arm_explicit);
}

void qps_ep_arm_locked(struct qps_ep *ep)
{
	ep->efd_refs++;
	ep->ctx->rx.arm_refs++;
	/* Arming polls once more: a completion may have beaten the arm. */
	qps_rx_arm_locked(ep->ctx);
	if (ep->rxq_count)
		qps_ep_signal(ep);
}

void qps_ep_disarm_locked(struct qps_ep *ep)
{
	ep->efd_refs--;
	ep->ctx->rx.arm_refs--;
}

void qps_ep_fd_out_locked(struct qps_ep *ep)
{
	ep->efd_out = true;
	ep->ctx->rx.arm_sticky = true;
	if (qps_rx_arm_wanted(&ep->ctx->rx))
		qps_rx_arm_locked(ep->ctx);
	if (ep->rxq_count)
		qps_ep_signal(ep);
}

/*
 * The time kept for the datagram at @pos: the device's stamp if @ep asked
 * for it and the completion had one, else the host's (the kernel's stamp
 * where the provider has one, else the clock now), else with PKTINFO
 * alone the clock now, as before timestamps existed.
 */
static void qps_rxq_stamp_locked(struct qps_ep *ep, uint32_t pos,
				 struct qps_rxd *d, uint64_t *ts)
{
	struct qps_ctx *ctx = ep->ctx;
	uint16_t meta = 0;
	uint64_t v;

	if (ep->pktinfo) {
		meta = QPS_RXD_PKTINFO;
		ctx->st->rx_pktinfo++;
	}
	if ((ep->ts_flags & QPS_TS_RX_DEVICE) && ctx->rx.cur_dev_ns) {
		v = ctx->rx.cur_dev_ns;
		meta |= QPS_RXD_TS_DEV;
	} else if ((ep->ts_flags & QPS_TS_RX_SOFTWARE) && ctx->rx.cur_sw_ns) {
		v = ctx->rx.cur_sw_ns;
		meta |= QPS_RXD_TS_SW;
	} else {
		if (!*ts)
			*ts = qps_realtime_ns();
		v = *ts;
		if (ep->ts_flags & QPS_TS_RX_SOFTWARE)
			meta |= QPS_RXD_TS_SW;
	}
	ep->rxts[pos] = v;
	d->meta = meta;
}

/*
 * Queue a reference on @buf for @ep. The metadata is taken only for an
 * endpoint with QPS_OPT_PKTINFO, and the clock read at most once per
 * datagram (*@ts, 0 until then). Returns whether it was queued.
 */
/* Double @ep's queue (and its stamps), oldest first from 0. */
static int qps_rxq_grow_locked(struct qps_ep *ep)
{
	uint32_t cap = ep->rxq_cap * 2, i, at;
	struct qps_rxd *q;
	uint64_t *ts = NULL;

	if (cap > QPS_RCVBUF_MAX)
		cap = QPS_RCVBUF_MAX;
	q = malloc((size_t)cap * sizeof(*q));
	if (!q)
		return -ENOMEM;
	if (ep->rxts) {
		ts = calloc(cap, sizeof(*ts));
		if (!ts) {
			free(q);
			return -ENOMEM;
		}
	}
	for (i = 0, at = ep->rxq_head; i < ep->rxq_count; i++) {
		q[i] = ep->rxq[at];
		if (ts)
			ts[i] = ep->rxts[at];
		if (++at == ep->rxq_cap)
			at = 0;
	}
	free(ep->rxq);
	ep->rxq = q;
	if (ts) {
		free(ep->rxts);
		ep->rxts = ts;
	}
	ep->rxq_cap = cap;
	ep->rxq_head = 0;
	return 0;
}

/*
 * A queue deeper than half the device's receive buffers would take them
 * from the device (and the context's other endpoints): past that, the
 * datagram is copied out, as a kernel socket's queue holds copies, and
 * its buffer goes back at once. UINT32_MAX when there is no memory.
 */
static uint32_t qps_rxq_copy_locked(struct qps_ctx *ctx,
				    const struct qps_frame_info *fi)
{
	uint8_t *data = malloc(fi->payload_len ? fi->payload_len : 1);

	if (!data)
		return UINT32_MAX;
	memcpy(data, fi->payload, fi->payload_len);
	/* qps_rx_big_add frees @data when it finds no slot. */
	return qps_rx_big_add(ctx, data);
}

bool qps_rxq_push_locked(struct qps_ep *ep, uint32_t buf,
			 const struct qps_frame_info *fi, uint64_t *ts)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_stats *st = ctx->st;
	struct qps_stat_ep *sb = ep->sb;
	uint32_t n = ep->rxq_count, pos;
	const uint8_t *at = fi->payload;
	struct qps_rxd *d;

	/* As the kernel: a datagram is refused once the queue is over its
	 * byte budget, so the last one in may overshoot it. */
	if (n >= ep->rcvbuf ||
	    (ep->rcvbuf_bytes && ep->rxq_bytes > ep->rcvbuf_bytes) ||
	    (n == ep->rxq_cap && qps_rxq_grow_locked(ep) < 0))
		goto full;
	if (buf < ctx->rx.depth && ep->rxq_ring >= ctx->rx.depth / 2) {
		buf = qps_rxq_copy_locked(ctx, fi);
		if (buf == UINT32_MAX)
			goto full;
		at = qps_rx_buf_addr(ctx, buf);
	} else {
		qps_rx_buf_get_locked(ctx, buf);
	}
	/* rxq_head < rxq_cap and n < rxq_cap: one wrap at most. */
	pos = ep->rxq_head + n;
	if (pos >= ep->rxq_cap)
		pos -= ep->rxq_cap;
	d = &ep->rxq[pos];
	*d = (struct qps_rxd){
		.buf = buf,
		.off = (uint16_t)(at - qps_rx_buf_addr(ctx, buf)),
		.len = (uint16_t)fi->payload_len,
		.saddr = fi->hdr.saddr,
		.sport = fi->hdr.sport,
	};
	if (ep->rxts && (ep->pktinfo || (ep->ts_flags & QPS_TS_RX_MASK)))
		qps_rxq_stamp_locked(ep, pos, d, ts);
	ep->rxq_ring += buf < ctx->rx.depth;
	ep->rxq_bytes += QPS_RX_TRUESIZE(fi->payload_len);
	st->rx_packets++;
	st->rx_bytes += fi->payload_len;
	sb->rx_packets++;
	sb->rx_bytes += fi->payload_len;
	ep->rxq_count = ++n;
	if (n == 1)
		qps_ep_signal(ep);
	sb->rxq_depth = n;
	if (n > sb->rxq_hwm)
		sb->rxq_hwm = n;
	return true;
full:
	st->rx_queue_full++;
	sb->rx_queue_full++;
	return false;
}

/* Take the datagram at the head off @ep's queue; its buffer reference
 * is the caller's. */
static void qps_rxq_unlink_locked(struct qps_ep *ep, const struct qps_rxd *d)
{
	if (++ep->rxq_head == ep->rxq_cap)
		ep->rxq_head = 0;
	ep->rxq_count--;
	ep->rxq_ring -= d->buf < ep->ctx->rx.depth;
	ep->rxq_bytes -= QPS_RX_TRUESIZE(d->len);
}

/* A completion of the batch being handled. */
struct qps_rx_item {
	uint32_t buf;		/* UINT32_MAX: not one of our buffers */
	uint32_t dg;		/* the datagram's: @buf, or reassembled */
	bool ok;		/* a valid datagram in @fi */
	uint32_t key;		/* qps_demux_key(&fi), when ok */
	struct qps_frame_info fi;
};

/*
 * A UD completion: the device says whether it wrote a GRH (IBV_WC_GRH);
 * without one the buffer does not say who sent it. A valid datagram
 * counts in rx_bad[QPS_RX_OK] as on the raw path, so "valid datagrams"
 * means the same on both; the rejects have their own counters.
 *
 * Every valid datagram teaches the peer table where its sender receives,
 * the context's own group datagrams included: the device hands them back
 * to the receiving QP when it is attached (emu does; mlx4 does unless
 * the QP blocks self-multicast loopback, which qpsock does not ask for),
 * and they are delivered to the context's members exactly as the raw
 * path delivers its own looped-back group frames; what they teach (this
 * context's address -> its own QPN) is true.
 */
static bool qps_rx_check_ud(struct qps_ctx *ctx, const struct ibv_wc *wc,
			    struct qps_rx_item *it)
{
	uint32_t qpn;
	int ret;

	if (!(wc->wc_flags & IBV_WC_GRH)) {
		ctx->st->rx_ud_bad_grh++;
		return false;
	}
	ret = qps_ud_parse(qps_rx_buf_addr(ctx, it->buf), wc->byte_len,
			   &it->fi, &qpn);
	if (ret == -EPROTO) {
		ctx->st->rx_ud_bad_grh++;
		return false;
	}
	if (ret < 0) {
		ctx->st->rx_ud_bad_hdr++;
		return false;
	}
	ctx->st->rx_bad[QPS_RX_OK]++;
	qps_ud_learn(ctx, it->fi.hdr.saddr, qpn);
	return true;
}

/* A fragment: when it completes its datagram, that datagram is the
 * item's, parsed whole, in a slot of its own. */
static void qps_rx_reasm(struct qps_ctx *ctx, struct qps_rx_item *it)
{
	enum qps_rx_reason why;
	uint8_t *frame;
	uint32_t dg;
	int len;

	len = qps_ipfrag_input(&ctx->rx.frag, ctx->st,
			       qps_rx_buf_addr(ctx, it->buf), qps_now_ns(),
			       &frame);
	if (len <= 0)
		return;
	dg = qps_rx_big_add(ctx, frame);
	if (dg == UINT32_MAX) {
		ctx->st->rx_reasm_mem++;
		return;
	}
	why = qps_frame_parse(frame, (size_t)len, &it->fi);
	ctx->st->rx_bad[why]++;
	if (why != QPS_RX_OK) {
		qps_rx_buf_put_locked(ctx, dg);
		return;
	}
	it->dg = dg;
	it->ok = true;
}

void qps_rx_inject(struct qps_ctx *ctx, uint8_t *frame, size_t len)
{
	qps_mutex_lock(&ctx->rx.lock);
	qps_rx_inject_locked(ctx, frame, len);
	qps_mutex_unlock(&ctx->rx.lock);
}

void qps_rx_inject_locked(struct qps_ctx *ctx, uint8_t *frame, size_t len)
{
	struct qps_frame_info fi;
	uint32_t dg;

	dg = qps_rx_big_add(ctx, frame);
	if (dg != UINT32_MAX) {
		enum qps_rx_reason why = qps_frame_parse(frame, len, &fi);

		ctx->st->rx_bad[why]++;
		if (why == QPS_RX_OK) {
			qps_epoch_enter(&ctx->rx.epoch);
			qps_demux(ctx, dg, &fi, qps_demux_key(&fi));
			qps_epoch_exit(&ctx->rx.epoch);
		}
		qps_rx_buf_put_locked(ctx, dg);
	} else {
		ctx->st->rx_errors++;
	}
}

static void qps_rx_check(struct qps_ctx *ctx, const struct ibv_wc *wc,
			 struct qps_rx_item *it)
{
	enum qps_rx_reason why;

	it->ok = false;
	it->buf = UINT32_MAX;
	it->dg = UINT32_MAX;
	if (wc->wr_id >= ctx->rx.depth) {
		ctx->st->rx_errors++;
		return;
	}
	it->buf = (uint32_t)wc->wr_id;
	it->dg = it->buf;
	/* Progress holds no reference of its own: under rx.lock nothing
	 * drops one before the batch ends, and then a buffer that no
	 * endpoint took goes back (qps_rx_batch). */
	ctx->rx.ref[it->buf] = 0;
	if (wc->status != IBV_WC_SUCCESS || wc->byte_len > ctx->rx.buf_size) {
		ctx->st->rx_errors++;
		/* An error completion: the QP is in the error state. Written
		 * under rx.lock; qp_recover.c reads it as a hint without. */
		if (wc->status != IBV_WC_SUCCESS &&
		    (ctx->info.caps & QPS_DEV_CAP_QP_ERR))
			__atomic_store_n(&ctx->rx.qp_err, true,
					 __ATOMIC_RELAXED);
		return;
	}
	if (ctx->ud) {
		it->ok = qps_rx_check_ud(ctx, wc, it);
		return;
	}
	/* Sums the device checked (QPS_DEV_CAP_CSUM) are not taken again;
	 * anything it did not mark, qpsock checks. */
	if (ctx->csum_offload && (wc->wc_flags & IBV_WC_IP_CSUM_OK))
		why = qps_frame_parse_dev_ok(qps_rx_buf_addr(ctx, it->buf),
					     wc->byte_len, &it->fi);
	else
		why = qps_frame_parse(qps_rx_buf_addr(ctx, it->buf),
				      wc->byte_len, &it->fi);
	ctx->st->rx_bad[why]++;
	it->ok = why == QPS_RX_OK;
	if (why == QPS_RX_FRAGMENT)
		qps_rx_reasm(ctx, it);
}

/* Datagrams parsed between prefetching a table slot and following it. */
#define QPS_RX_PF_LAG 8

/*
 * A batch in passes, so that the cache misses of different datagrams
 * overlap instead of each datagram waiting for its own (uniform traffic
 * over thousands of groups misses on every rule): prefetch the frames;
 * parse them and prefetch their table slots, following the slot of the
 * datagram QPS_RX_PF_LAG back (by now in cache) to prefetch its rule;
 * demultiplex. The table passes are skipped while the tables are small
 * enough to stay in cache, and the 4-tuple keys while nothing is
 * connected (qps_demux_keyed, qps_demux_prefetching).
 */
static void qps_rx_batch(struct qps_ctx *ctx, const struct ibv_wc *wc,
			 const struct qps_wc_ts *wts, int n)
{
	struct qps_rx_item it[QPS_RX_POLL_BATCH];
	bool keyed = qps_demux_keyed(ctx);
	bool pf = qps_demux_prefetching(ctx);
	int i;

	if (qps_dump_on(ctx))
		qps_dump_rx(ctx, wc, n);
	for (i = 0; i < n; i++)
		if (wc[i].wr_id < ctx->rx.depth)
			__builtin_prefetch(qps_rx_buf_addr(ctx,
							   (uint32_t)wc[i].wr_id));
	for (i = 0; i < n; i++) {
		qps_rx_check(ctx, &wc[i], &it[i]);
		it[i].key = keyed && it[i].ok ? qps_demux_key(&it[i].fi) : 0;
		if (!pf)
			continue;
		if (it[i].ok)
			qps_demux_prefetch(ctx, &it[i].fi, it[i].key, 0);
		if (i >= QPS_RX_PF_LAG && it[i - QPS_RX_PF_LAG].ok)
			qps_demux_prefetch(ctx, &it[i - QPS_RX_PF_LAG].fi,
					   it[i - QPS_RX_PF_LAG].key, 1);
	}
	for (i = n > QPS_RX_PF_LAG ? n - QPS_RX_PF_LAG : 0; pf && i < n; i++)
		if (it[i].ok)
			qps_demux_prefetch(ctx, &it[i].fi, it[i].key, 1);
	for (i = 0; i < n; i++) {
		if (it[i].ok && wts)
			qps_rx_ts_cur_locked(ctx, &wts[i]);
		if (it[i].ok)
			qps_demux(ctx, it[i].dg, &it[i].fi, it[i].key);
		if (it[i].dg != it[i].buf)
			qps_rx_buf_put_locked(ctx, it[i].dg);
		if (it[i].buf != UINT32_MAX && !ctx->rx.ref[it[i].buf])
			qps_rx_buf_free_locked(ctx, it[i].buf);
	}
}

/* A batch with its stamps, for endpoints that asked (QPS_OPT_TIMESTAMP);
 * without poll_cq_ts the stamps are the host's (rx_ts.c). */
static int qps_rx_poll_ts(struct qps_ctx *ctx, struct ibv_wc *wc,
			  struct qps_wc_ts *wts)
{
	int n;

	if (!ctx->rx.ts_unsupported) {
		n = ctx->ops->poll_cq_ts(ctx->rx.cq, QPS_RX_POLL_BATCH, wc,
					 wts);
		if (n != -EOPNOTSUPP) {
			if (n > 0)
				qps_rx_ts_convert(ctx, wts, n);
			return n;
		}
		ctx->rx.ts_unsupported = true;
	}
	n = ctx->ops->poll_cq(ctx->rx.cq, QPS_RX_POLL_BATCH, wc);
	if (n > 0)
		memset(wts, 0, (size_t)n * sizeof(*wts));
	return n;
}

static int qps_rx_poll_all(struct qps_ctx *ctx)
{
	struct ibv_wc wc[QPS_RX_POLL_BATCH];
	struct qps_wc_ts wts[QPS_RX_POLL_BATCH];
	int total = 0;
	int n;

	do {
		bool ts = ctx->rx.ts_users != 0;

		/* One read-side section per batch: writers wait at most for
		 * one batch, and the poller pays two stores per batch. */
		/* What the last batch and the receive calls freed goes back
		 * before the device is asked for more. */
		qps_rx_repost_flush(ctx);
		qps_epoch_enter(&ctx->rx.epoch);
		n = ts ? qps_rx_poll_ts(ctx, wc, wts) :
			 ctx->ops->poll_cq(ctx->rx.cq, QPS_RX_POLL_BATCH, wc);
		if (n > 0)
			qps_rx_batch(ctx, wc, ts ? wts : NULL, n);
		qps_rx_ts_cur_locked(ctx, NULL);
		qps_epoch_exit(&ctx->rx.epoch);
		if (n == -EIO && (ctx->info.caps & QPS_DEV_CAP_QP_ERR))
			/* Completions were lost to an overrun, and with them
			 * their buffers: a RESET of the QP gives every buffer
			 * back (qp_recover.c). */
			__atomic_store_n(&ctx->rx.qp_err, true,
					 __ATOMIC_RELAXED);
		if (n < 0)
			return n;
		total += n;
	} while (n);
	return total;
}

/*
 * Arm the receive CQ and poll once more: a CQE that landed between the
 * last empty poll and the arm raised no event, so only this poll sees it.
 */
int qps_rx_arm_locked(struct qps_ctx *ctx)
{
	if (ctx->event_fd < 0)
		return 0;
	if (!ctx->rx.cq_armed) {
		ctx->ops->req_notify_cq(ctx->rx.cq);
		ctx->rx.cq_armed = true;
	}
	return qps_rx_poll_all(ctx);
}

/* The CQ is re-armed only while someone may sleep on the event fd
 * ("Arming" above). */
int qps_rx_progress_locked(struct qps_ctx *ctx)
{
	int total, n;

	if (ctx->rx.cq_armed) {
		/* The events may have been a sleeping sender's (tx_wait.c). */
		if (ctx->ops->ack_events(ctx->dev) > 0)
			qps_txw_wake(ctx);
		ctx->rx.cq_armed = false;
	}
	total = qps_rx_poll_all(ctx);
	/* The clock is read only while fragments wait. */
	if (ctx->rx.frag.nq)
		qps_ipfrag_expire(&ctx->rx.frag, ctx->st, qps_now_ns());
	if (total < 0 || !qps_rx_arm_wanted(&ctx->rx))
		return total;
	n = qps_rx_arm_locked(ctx);
	return n < 0 ? n : total + n;
}

/*
 * A sleeping sender woke on the device's event fd (tx_wait.c) and must
 * drain it, or sleep on it never again. The events may have been the
 * receive CQ's: then the receive side progresses as its own drain would
 * make it, so that no receiver misses its wake-up.
 */
void qps_rx_events_locked(struct qps_ctx *ctx)
{
	if (ctx->rx.cq_armed) {
		qps_rx_progress_locked(ctx);
		return;
	}
	if (ctx->ops->ack_events(ctx->dev) > 0)
		qps_txw_wake(ctx);
}

void qps_rxq_drain_locked(struct qps_ep *ep)
{
	struct qps_ctx *ctx = ep->ctx;

	while (ep->rxq_count) {
		struct qps_rxd d = ep->rxq[ep->rxq_head];

		qps_rxq_unlink_locked(ep, &d);
		qps_rx_buf_put_locked(ctx, d.buf);
	}
	qps_rx_repost_flush(ctx);
	qps_ep_unsignal(ep);
}

/* Where a receive call puts what it takes off the queue. */
struct qps_rx_out {
	void *buf;
	size_t len;
	struct sockaddr *src;
	socklen_t *src_len;
	struct qps_rxmsg *msg;
};

/* UD: the IPv4 destination lies at byte 36 of either GRH the parser
 * accepts: 20 + 16 in the IPv4 header of RoCE v2, the low four bytes of
 * the IPv4-mapped destination GID (24 + 12) otherwise. */
#define QPS_UD_GRH_DADDR 36
/* The destination port in qpsock's UD header (ud.h). */
#define QPS_UD_HDR_DPORT 6

/* The destination of the datagram in @d, read back from its frame, which
 * the parser validated: only recvmsg with metadata pays for it. */
static void qps_rxd_dst(struct qps_ctx *ctx, const struct qps_rxd *d,
			struct sockaddr_in *dst)
{
	const uint8_t *f = qps_rx_buf_addr(ctx, d->buf);

	memset(dst, 0, sizeof(*dst));
	dst->sin_family = AF_INET;
	if (ctx->ud) {
		memcpy(&dst->sin_addr, f + QPS_UD_GRH_DADDR, 4);
		memcpy(&dst->sin_port,
		       f + d->off - QPS_UD_HDR_LEN + QPS_UD_HDR_DPORT, 2);
		return;
	}
	memcpy(&dst->sin_addr, f + QPS_ETH_HLEN + 16, 4);
	memcpy(&dst->sin_port, f + d->off - QPS_UDP_HLEN + 2, 2);
}

static struct sockaddr_in qps_rxd_src(const struct qps_rxd *d)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = d->saddr;
	sin.sin_port = d->sport;
	return sin;
}

/* What recvmsg reports besides the data, of the datagram @d at @pos. */
static void qps_rxd_msg(struct qps_ep *ep, uint32_t pos,
			const struct qps_rxd *d, bool trunc,
			struct qps_rxmsg *m)
{
	m->src = qps_rxd_src(d);
	m->flags = trunc ? QPS_RXMSG_TRUNC : 0;
	memset(&m->dst, 0, sizeof(m->dst));
	m->ifindex = 0;
	m->ts_ns = 0;
	if (d->meta & QPS_RXD_PKTINFO) {
		m->flags |= QPS_RXMSG_PKTINFO;
		qps_rxd_dst(ep->ctx, d, &m->dst);
		m->ifindex = QPS_IFINDEX;
	}
	if (d->meta)
		m->ts_ns = ep->rxts[pos];
	if (d->meta & QPS_RXD_TS_SW)
		m->flags |= QPS_RXMSG_TS_SOFTWARE;
	if (d->meta & QPS_RXD_TS_DEV)
		m->flags |= QPS_RXMSG_TS_DEVICE;
}

static ssize_t qps_rxq_pop_locked(struct qps_ep *ep, int flags,
				  const struct qps_rx_out *o)
{
	struct qps_ctx *ctx = ep->ctx;
	uint32_t pos = ep->rxq_head;
	struct qps_rxd d = ep->rxq[pos];
	bool trunc = o->len < d.len;
	size_t n = trunc ? o->len : d.len;

	if (n)
		memcpy(o->buf, qps_rx_buf_addr(ctx, d.buf) + d.off, n);
	if (o->src) {
		struct sockaddr_in sin = qps_rxd_src(&d);

		memcpy(o->src, &sin, *o->src_len < sizeof(sin) ?
		       *o->src_len : sizeof(sin));
		*o->src_len = sizeof(sin);
	}
	if (o->msg)
		qps_rxd_msg(ep, pos, &d, trunc, o->msg);
	if (!(flags & QPS_MSG_PEEK)) {
		if (trunc) {
			ctx->st->rx_truncated++;
			ep->sb->rx_truncated++;
		}
		qps_rxq_unlink_locked(ep, &d);
		ep->sb->rxq_depth = ep->rxq_count;
		qps_rx_buf_put_locked(ctx, d.buf);
		if (!ep->rxq_count) {
			qps_ep_unsignal(ep);
			qps_rx_repost_flush(ctx);
		}
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

/* Still within the busy-poll budget (0: none)? */
static bool qps_rx_spinning(uint64_t spin_end)
{
	return spin_end && qps_now_ns() < spin_end;
}

/*
 * Sleep until @ep's descriptors say something may have changed, for at
 * most @timeout ms (-1: no limit). Counted in ep->waiters meanwhile, so
 * close keeps the descriptors until we are out, and then we only take
 * rx.lock to leave: close holds the send queues' locks while it waits.
 * -EBADF: closed meanwhile; -EINTR: a signal handler ran.
 */
int qps_ep_waiter_enter(struct qps_ep *ep)
{
	struct qps_ctx *ctx = ep->ctx;
	int ret;

	qps_mutex_lock(&ctx->rx.lock);
	ret = qps_ep_check(ep);
	if (!ret)
		ep->waiters++;
	qps_mutex_unlock(&ctx->rx.lock);
	return ret < 0 ? -EBADF : 0;
}

/* A sleeper's way out, under rx.lock only: uncounted, and disarmed
 * unless a close took its reason with it. False: closed meanwhile. */
static bool qps_rx_sleep_leave(struct qps_ep *ep)
{
	struct qps_ctx *ctx = ep->ctx;
	bool open;

	qps_mutex_lock(&ctx->rx.lock);
	ep->waiters--;
	open = qps_ep_check(ep) >= 0;
	if (open)
		qps_ep_disarm_locked(ep);
	qps_mutex_unlock(&ctx->rx.lock);
	return open;
}

/* What a sleeper is counted in: its endpoint's waiters, and the
 * context's rx.inside when @inside (qps_rx_wait). */
struct qps_rx_sleeper {
	struct qps_ep *ep;
	const bool *inside;
};

static void qps_rx_sleep_cancelled(void *arg)
{
	const struct qps_rx_sleeper *z = arg;
	struct qps_ctx *ctx = z->ep->ctx;

	qps_rx_sleep_leave(z->ep);
	if (!*z->inside)
		return;
	qps_mutex_lock(&ctx->rx.lock);
	ctx->rx.inside--;
	qps_mutex_unlock(&ctx->rx.lock);
}

static int qps_rx_sleep(struct qps_ep *ep, int timeout, const bool *inside)
{
	struct qps_rx_sleeper z = { .ep = ep, .inside = inside };
	struct pollfd pfd = { .events = POLLIN };
	int pr, ret;

	/* Closed since we armed: the close took our reason with it. */
	ret = qps_ep_waiter_enter(ep);
	if (ret < 0)
		return ret;
	/* Counted: a close waits for us before it closes the descriptor. */
	pfd.fd = ep->epfd;

	/* The cancellation point of a blocking receive, as recv(2) is one:
	 * a thread cancelled here leaves uncounted, or a close and the
	 * context's destruction would wait for it forever. Nothing else
	 * of ours is held here. */
	pthread_cleanup_push(qps_rx_sleep_cancelled, &z);
	pr = poll(&pfd, 1, timeout);
	pthread_cleanup_pop(0);
	if (pr < 0 && errno == EINTR)
		ret = -EINTR;
	if (!qps_rx_sleep_leave(ep))
		ret = -EBADF;
	return ret;
}

/*
 * What a round takes, under rx.lock: into @o (with @o NULL only report
 * that one is queued: 1) the first datagram queued, progressing first if
 * there is none; -EAGAIN: still none. -EBADF: closed; 0: the end, as
 * recv(2) after shutdown(SHUT_RD).
 */
static inline __attribute__((always_inline)) ssize_t
qps_rx_take_locked(struct qps_ep *ep, int flags, const struct qps_rx_out *o)
{
	/* A close marks @ep closed holding rx.lock, which we hold: the
	 * state is read as it stands (the fork check was the call's). */
	if (__atomic_load_n(&ep->state, __ATOMIC_RELAXED) != QPS_EP_OPEN)
		return -EBADF;
	if (ep->rd_shut && !ep->rxq_count)
		return 0;
	if (!ep->rxq_count)
		qps_rx_progress_locked(ep->ctx);
	/* The host's other interfaces, every so many rounds whatever is
	 * queued (a system call each: never per datagram); a receive about
	 * to sleep and qps_ep_wait always look (rx_host.c). */
	if (__atomic_load_n(&ep->hrx_fd, __ATOMIC_RELAXED) >= 0 &&
	    !(++ep->hrx_tick & QPS_RX_HOST_EVERY))
		qps_rx_host_poll_locked(ep);
	if (!ep->rxq_count)
		return -EAGAIN;
	return o ? qps_rxq_pop_locked(ep, flags, o) : 1;
}

/*
 * The receive loop, after a first round (qps_rx_try) found nothing and
 * the caller may wait: take a datagram, spin for the busy-poll budget,
 * sleep. @tmo: ms to wait at most, 0 = no limit.
 */
static ssize_t qps_rx_rounds(struct qps_ep *ep, int flags,
			     const struct qps_rx_out *o, int tmo,
			     bool *inside)
{
	struct qps_ctx *ctx = ep->ctx;
	struct timespec deadline;
	/* The busy-poll budget: spin (progressing) until then, then sleep;
	 * counted from the first time the queue was found empty. */
	int busy_us = __atomic_load_n(&ep->busy_poll_us, __ATOMIC_RELAXED);
	uint64_t spin_end = 0;

	if (tmo) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += tmo / 1000;
		deadline.tv_nsec += (long)(tmo % 1000) * 1000000;
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000;
		}
	}

	for (;;) {
		int timeout = -1;
		/* Decided once per round: a sleep must follow an arm. */
		bool spin = false, sleep = false;
		ssize_t ret;

		/* A postponed doorbell must not wait for our sleep. */
		if (!qps_tx_idle_all(ctx))
			qps_tx_poll_rx(ctx);

		qps_mutex_lock(&ctx->rx.lock);
		ret = qps_rx_take_locked(ep, flags, o);
		if (ret == -EAGAIN) {
			/* From now on this call may linger: the context's
			 * destruction waits for it. */
			if (!*inside) {
				ctx->rx.inside++;
				*inside = true;
			}
			if (busy_us && !spin_end)
				spin_end = qps_now_ns() +
					   (uint64_t)busy_us * 1000u;
			spin = qps_rx_spinning(spin_end);
			if (!spin && tmo) {
				int64_t left = qps_ms_left(&deadline);

				timeout = left > 0 ? (int)left : 0;
			}
			/* We sleep on efd: make pushes signal it and the
			 * device wake us until we are up again; arming polls
			 * once more, which may have found our datagram. */
			if (!spin && timeout) {
				qps_rx_host_poll_locked(ep);
				qps_ep_arm_locked(ep);
				if (ep->rxq_count) {
					qps_ep_disarm_locked(ep);
					ret = o ? qps_rxq_pop_locked(ep, flags,
								     o) : 1;
				} else {
					sleep = true;
				}
			}
		}
		qps_mutex_unlock(&ctx->rx.lock);
		if (ret != -EAGAIN)
			return ret;
		if (spin) {
			if (tmo && qps_ms_left(&deadline) <= 0)
				return -ETIMEDOUT;
			qps_cpu_relax();
			continue;
		}
		if (!sleep)
			return -ETIMEDOUT;
		/* Without a completion channel nothing wakes us: poll. */
		if (ctx->event_fd < 0 && (timeout < 0 || timeout > 1))
			timeout = 1;
		ret = qps_rx_sleep(ep, timeout, inside);
		if (ret < 0)
			return ret;
	}
}

/*
 * The first round of every receive, which cannot linger: -EAGAIN when
 * it takes nothing. Most calls end here, without the busy-poll budget,
 * the deadline or the arming being looked at.
 */
static ssize_t qps_rx_try(struct qps_ep *ep, int flags,
			  const struct qps_rx_out *o)
{
	struct qps_ctx *ctx = ep->ctx;
	ssize_t ret;

	/* A postponed doorbell must not wait for our sleep. */
	if (!qps_tx_idle_all(ctx))
		qps_tx_poll_rx(ctx);

	qps_mutex_lock(&ctx->rx.lock);
	ret = qps_rx_take_locked(ep, flags, o);
	qps_mutex_unlock(&ctx->rx.lock);
	return ret;
}

/* The rounds, counted in rx.inside once they may linger (spinning or
 * asleep): qps_ctx_destroy waits for such calls to leave before it frees
 * what they touch. A call that finds its datagram at once is not counted. */
static ssize_t qps_rx_wait(struct qps_ep *ep, int flags,
			   const struct qps_rx_out *o, int tmo)
{
	struct qps_ctx *ctx = ep->ctx;
	bool inside = false;
	ssize_t ret = qps_rx_rounds(ep, flags, o, tmo, &inside);

	if (inside) {
		qps_mutex_lock(&ctx->rx.lock);
		ctx->rx.inside--;
		qps_mutex_unlock(&ctx->rx.lock);
	}
	return ret;
}

/* The receive loop: a first round, then the waiting ones if it found
 * nothing and the caller may wait. */
static inline __attribute__((always_inline)) ssize_t
qps_rx_loop(struct qps_ep *ep, int flags, const struct qps_rx_out *o,
	    int tmo, bool dontwait)
{
	ssize_t ret = qps_rx_try(ep, flags, o);

	if (ret != -EAGAIN || dontwait)
		return ret;
	return qps_rx_wait(ep, flags, o, tmo);
}

/* qps_recvfrom's body, for it and qps_recv: one errno guard a call. */
static inline __attribute__((always_inline)) ssize_t
qps_rx_from(struct qps_ep *ep, void *buf, size_t len, int flags,
	    struct sockaddr *src, socklen_t *src_len)
{
	struct qps_rx_out o = {
		.buf = buf, .len = len, .src = src, .src_len = src_len,
	};
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (flags & ~QPS_RX_FLAGS)
		return -EINVAL;
	if (!buf && len)
		return -EFAULT;
	if (src && !src_len)
		return -EFAULT;
	return qps_rx_loop(ep, flags, &o, ep->rcvtimeo_ms,
			   ep->nonblock || (flags & QPS_MSG_DONTWAIT));
}

ssize_t qps_recvfrom(struct qps_ep *ep, void *buf, size_t len, int flags,
		     struct sockaddr *src, socklen_t *src_len)
{
	QPS_ERRNO_GUARD;
	return qps_rx_from(ep, buf, len, flags, src, src_len);
}

ssize_t qps_recv(struct qps_ep *ep, void *buf, size_t len, int flags)
{
	QPS_ERRNO_GUARD;
	return qps_rx_from(ep, buf, len, flags, NULL, NULL);
}

ssize_t qps_recvmsg(struct qps_ep *ep, struct qps_rxmsg *msg, int flags)
{
	QPS_ERRNO_GUARD;
	struct qps_rx_out o = { .msg = msg };
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (flags & ~QPS_RX_FLAGS)
		return -EINVAL;
	if (!msg || (!msg->buf && msg->len))
		return -EFAULT;
	o.buf = msg->buf;
	o.len = msg->len;
	return qps_rx_loop(ep, flags, &o, ep->rcvtimeo_ms,
			   ep->nonblock || (flags & QPS_MSG_DONTWAIT));
}

int qps_ep_wait(struct qps_ep *ep, int timeout_ms)
{
	QPS_ERRNO_GUARD;
	ssize_t ret = qps_ep_check(ep);

	if (ret < 0)
		return (int)ret;
	/* The readiness descriptor may have woken for the second source. */
	if (__atomic_load_n(&ep->hrx_fd, __ATOMIC_RELAXED) >= 0) {
		qps_mutex_lock(&ep->ctx->rx.lock);
		qps_rx_host_poll_locked(ep);
		qps_mutex_unlock(&ep->ctx->rx.lock);
	}
	/* Busy-polls like a receive, then sleeps: what a qps_ep_fd() user
	 * would otherwise have to write around poll(2). */
	ret = qps_rx_loop(ep, 0, NULL, timeout_ms < 0 ? 0 : timeout_ms,
			  timeout_ms == 0);
	if (ret == -EAGAIN || ret == -ETIMEDOUT)
		return 0;
	/* Readable: a datagram, or the end after qps_shutdown(SHUT_RD). */
	return ret < 0 ? (int)ret : 1;
}
