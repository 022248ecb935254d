/* SPDX-License-Identifier: MIT */
/*
 * The wait of a blocking send that found no free send slot, or its band
 * full (tx_wait.c): spin for the endpoint's busy-poll budget, ringing and
 * reaping, then arm the send CQ and sleep on its completion event. Ends on
 * room, QPS_OPT_SNDTIMEO (-EAGAIN), a signal handler (-EINTR), a close of
 * the endpoint by another thread (-EBADF) or a shutdown for writing
 * (-EPIPE).
 */
#ifndef QPS_TX_WAIT_H
#define QPS_TX_WAIT_H

#include <stdbool.h>
#include <stdint.h>

struct qps_ctx;
struct qps_ep;
struct qps_sq;

/* One send call's wait: set up by qps_tx_wait_init, started on the first
 * qps_tx_wait_room, ended by qps_tx_wait_end once the call holds no lock. */
struct qps_tx_wait {
	struct qps_ep *ep;
	uint64_t deadline;	/* monotonic ns: SNDTIMEO; 0 = none */
	uint64_t spin_end;	/* monotonic ns: the busy-poll budget */
	bool started;
	bool inside;		/* counted in ctx->rx.inside */
};

/* The context's wake-up descriptor for sleeping senders; -errno. */
int qps_txw_open(struct qps_ctx *ctx);
void qps_txw_close(struct qps_ctx *ctx);
/* Wake every sender asleep in the context: the device's events were
 * drained by someone else (they may have been theirs), or an endpoint
 * was closed or shut down. */
void qps_txw_wake(struct qps_ctx *ctx);

void qps_tx_wait_init(struct qps_tx_wait *w, struct qps_ep *ep);
/* One round of waiting for room on @sq (its lock not held): 0 means look
 * again; -errno ends the send. */
int qps_tx_wait_room(struct qps_tx_wait *w, struct qps_sq *sq);
/* The send call is over (no lock held): stop counting it as lingering. */
void qps_tx_wait_end(struct qps_tx_wait *w);

#endif /* QPS_TX_WAIT_H */
