/* SPDX-License-Identifier: MIT */
/*
 * The receive side of a context (rx.c): the receive CQ and its poller, the
 * receive buffers and their endpoint references, and the endpoint receive
 * queues. Everything here is under rx.lock; where it sits in the lock order
 * is said once, at struct qps_ctx (qps_int.h).
 */
#ifndef QPS_RX_H
#define QPS_RX_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "demux.h"
#include "ipfrag.h"
#include "mutex.h"

struct qps_cq;
struct qps_ctx;
struct qps_ep;
struct qps_frame_info;
struct qps_mr;
struct qps_rx_repost;

/* A datagram waiting in an endpoint's receive queue: a reference on one
 * receive buffer plus what recvfrom needs (16 bytes). */
struct qps_rxd {
	uint32_t buf;
	uint16_t off;
	uint16_t len;
	uint32_t saddr;
	uint16_t sport;
	uint16_t meta;		/* QPS_RXD_*: what ep->rxts holds for it */
};

#define QPS_RXD_PKTINFO 1u	/* taken with QPS_OPT_PKTINFO on */
#define QPS_RXD_TS_SW 2u	/* ep->rxts: a software receive stamp */
#define QPS_RXD_TS_DEV 4u	/* ep->rxts: the device's receive stamp */

/* A reassembled datagram, too long for a receive buffer: queued like one,
 * by the index depth + its slot (rx.c qps_rx_big_add). */
struct qps_rx_big {
	uint8_t *data;			/* its whole frame; NULL: slot free */
	uint32_t ref;
	uint32_t next_free;
};

/* Under lock: the poller, buffers, endpoint queues (struct qps_ep rxq). */
struct qps_rx {
	struct qps_mutex lock;
	struct qps_cq *cq;		/* receive completions of QP 0 */
	uint32_t depth;
	uint32_t buf_size;
	uint8_t *buf;
	bool buf_dev;			/* from ops->alloc_buf */
	struct qps_mr *mr;
	uint32_t *ref;			/* endpoints holding each buffer */
	struct qps_rx_repost *repost;	/* freed, to post again (rx.c) */
	struct qps_epoch epoch;		/* the poller's reader slot */
	bool cq_armed;			/* req_notify_cq since the last drain */
	/* Why the CQ is re-armed after each drain (rx.c "Arming"): a
	 * descriptor handed out to an application that never brackets its
	 * sleeps (sticky), or sleepers counted now. */
	bool arm_sticky;
	bool arm_explicit;		/* qps_ctx_arm() was used */
	uint32_t arm_refs;
	uint32_t arm_calls;		/* of them, qps_ctx_arm()'s */
	bool qp_err;			/* receive QP failed: see qp_recover.c */
	uint32_t inside;		/* receive calls that may linger (rx.c) */
	struct qps_ipfrag frag;		/* raw transport: reassembly */
	struct qps_rx_big *big;
	uint32_t nbig;
	uint32_t big_free;		/* first free slot, UINT32_MAX: none */
	/* Receive timestamps (rx_ts.c): endpoints that want them (the CQ
	 * is then polled with poll_cq_ts), and the stamps of the datagram
	 * being demultiplexed, CLOCK_REALTIME ns, 0 where none. */
	uint32_t ts_users;
	bool ts_unsupported;		/* poll_cq_ts said -EOPNOTSUPP */
	uint64_t cur_dev_ns;
	uint64_t cur_sw_ns;
};

struct qps_wc_ts;

/* rx_ts.c: the stamps of a polled batch, each device stamp placed on
 * CLOCK_REALTIME (in place: @ts[i].val becomes ns). */
void qps_rx_ts_convert(struct qps_ctx *ctx, struct qps_wc_ts *ts, int n);
/* The stamps of the datagram about to be demultiplexed (@ts NULL: none). */
void qps_rx_ts_cur_locked(struct qps_ctx *ctx, const struct qps_wc_ts *ts);

int qps_rx_init(struct qps_ctx *ctx);
void qps_rx_fini(struct qps_ctx *ctx);
int qps_rx_progress_locked(struct qps_ctx *ctx);
int qps_rx_arm_locked(struct qps_ctx *ctx);
void qps_rx_events_locked(struct qps_ctx *ctx);
void qps_rx_buf_put_locked(struct qps_ctx *ctx, uint32_t buf);
/* Post every buffer no endpoint holds (the receive QP is back up). */
int qps_rx_refill_locked(struct qps_ctx *ctx);
void qps_rxq_drain_locked(struct qps_ep *ep);
bool qps_rxq_push_locked(struct qps_ep *ep, uint32_t buf,
			 const struct qps_frame_info *fi, uint64_t *ts);
/* One more or one fewer reason for @ep's eventfd to follow its queue and
 * for the device to wake sleepers: a thread about to sleep on it. */
void qps_ep_arm_locked(struct qps_ep *ep);
void qps_ep_disarm_locked(struct qps_ep *ep);
/* qps_ep_fd() handed the descriptor out. */
void qps_ep_fd_out_locked(struct qps_ep *ep);
/* A frame the device never saw (multicast loopback, mc_loop.c): parsed
 * and demultiplexed as if received; takes @frame (malloc'd). */
void qps_rx_inject(struct qps_ctx *ctx, uint8_t *frame, size_t len);
void qps_rx_inject_locked(struct qps_ctx *ctx, uint8_t *frame, size_t len);

/* rx_host.c: QPS_OPT_HOST_RX. bind: the adopted socket bound where the
 * endpoint is, where the core alone holds ports (emu; best effort);
 * start: it receives into the endpoint (hold_port bound it); stop: no
 * more. Under ctl_lock. poll: its queue into the demux, under rx.lock.
 * The receive path polls it every QPS_RX_HOST_EVERY + 1 rounds, before
 * it sleeps and in qps_ep_wait. */
#define QPS_RX_HOST_EVERY 63u
void qps_rx_host_bind(struct qps_ep *ep, uint32_t addr, uint16_t port);
void qps_rx_host_start(struct qps_ep *ep);
void qps_rx_host_stop(struct qps_ep *ep);
void qps_rx_host_poll_locked(struct qps_ep *ep);
void qps_ep_wake_locked(struct qps_ep *ep);
/* A thread about to sleep on @ep: counted in ep->waiters (a close waits
 * for them to leave, each taking rx.lock to uncount itself), or -EBADF
 * when @ep is closed already. */
int qps_ep_waiter_enter(struct qps_ep *ep);

#endif /* QPS_RX_H */
