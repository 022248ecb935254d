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

struct qps_cq;
struct qps_ctx;
struct qps_ep;
struct qps_frame_info;
struct qps_mr;

/* A datagram waiting in an endpoint's receive queue: a reference on one
 * receive buffer plus what recvfrom needs (16 bytes). */
struct qps_rxd {
	uint32_t buf;
	uint16_t off;
	uint16_t len;
	uint32_t saddr;
	uint16_t sport;
	uint16_t meta;		/* 1: ep->rxts holds its timestamp */
};

/* Under lock: the poller, buffers, endpoint queues (struct qps_ep rxq). */
struct qps_rx {
	pthread_mutex_t lock;
	struct qps_cq *cq;		/* receive completions of QP 0 */
	uint32_t depth;
	uint32_t buf_size;
	uint8_t *buf;
	bool buf_dev;			/* from ops->alloc_buf */
	struct qps_mr *mr;
	uint32_t *ref;			/* endpoints holding each buffer */
	struct qps_epoch epoch;		/* the poller's reader slot */
	bool cq_armed;			/* req_notify_cq since the last drain */
	bool cq_arm_always;		/* an fd was handed out: keep armed */
	bool qp_err;			/* receive QP failed: see qp_recover.c */
	uint32_t inside;		/* receive calls that may linger (rx.c) */
};

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
void qps_ep_arm_locked(struct qps_ep *ep);
void qps_ep_wake_locked(struct qps_ep *ep);

#endif /* QPS_RX_H */
