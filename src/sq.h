/* SPDX-License-Identifier: MIT */
/*
 * A send queue of a context: one send QP with its own CQ, its own
 * registered send slots, its WR chain (generic path) or mlx4 ring (direct
 * path), its doorbell state and its counters. A context has ctx->nsq of
 * them; txq_select.c picks the one each datagram goes out on. Send queue
 * 0's QP is also the context's receive QP (the steering rules target it);
 * the others only send.
 *
 * Locking, for now: sq->lock guards every field below it, the posting side
 * (slots, WQEs, doorbell) and the completion side (reaping) alike, so the
 * txq_select counters of this QP (enqueued: posting side; completed:
 * completion side) each have one writer at a time. Operations on the whole
 * context (connect, close, destroy, stats) take the locks one by one, or
 * all of them in index order (qps_sq_lock_all), before ctl_lock and
 * rx_lock. A sender holds one send queue's lock at a time.
 */
#ifndef QPS_SQ_H
#define QPS_SQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "qps_int.h"

/* Send-path counters of one send queue (struct qps_stats tx_*). */
struct qps_sq_stats {
	uint64_t packets;
	uint64_t bytes;
	uint64_t errors;
	uint64_t wqes;
	uint64_t doorbells;
	uint64_t bf;
	uint64_t flush[QPS_TXF_MAX];	/* why the doorbell was rung */
};

struct qps_sq {
	/* Fixed after creation. */
	struct qps_ctx *ctx;
	uint32_t idx;			/* QP index for txq_select */
	struct qps_qp *qp;
	struct qps_cq *cq;		/* send completions of qp only */
	uint8_t *buf;			/* ctx->tx_depth slots in ctx->tx_mr */
	bool lock_init;

	pthread_mutex_t lock;
	uint32_t *free;			/* stack of free slot indexes */
	uint32_t nfree;
	uint32_t inflight;		/* posted, not completed */
	uint32_t unrung;		/* WQEs written since the last doorbell */
	struct ibv_send_wr *wr;		/* generic: one WR + SGE per slot */
	struct ibv_sge *sge;
	struct ibv_send_wr *pend_head;	/* generic: the unrung chain */
	struct ibv_send_wr *pend_tail;
	struct qps_sq_mlx4 mlx4;	/* direct */
	/* The flusher (doorbell.c) reads these two without the lock. */
	bool db_armed;			/* atomic: unrung WQEs left by a call */
	uint64_t db_since;		/* atomic: monotonic ns it was armed */
	uint16_t ip_id;
	struct qps_route_slot route[QPS_ROUTE_SLOTS];
	struct qps_sq_stats st;
} __attribute__((aligned(QPS_CACHELINE)));

/* sq.c: lifetime */
/* ctx->nsq send queues: QPs, CQs, slots; on failure ctx->sq may be left
 * partly built for qps_sqs_destroy. Needs ctx->rx_cq (QP 0 receives). */
int qps_sqs_create(struct qps_ctx *ctx);
void qps_sqs_destroy(struct qps_ctx *ctx);

/* tx.c: under sq->lock */
int qps_tx_reap_locked(struct qps_sq *sq);
void qps_tx_slot_put(struct qps_sq *sq, uint32_t slot);
/*
 * Count the frame in @slot (@len bytes) on the QP (qps_txq_enqueue; its
 * head in *@head) and write it to the send queue. @more: another frame
 * follows at once (MSG_MORE, a batch), so the doorbell may wait; otherwise
 * it is rung now. A full send queue rings it regardless. Returns 0 or
 * -errno; a frame that could not be written is uncounted and its slot
 * given back.
 */
int qps_tx_xmit_locked(struct qps_sq *sq, uint32_t slot, uint32_t len,
		       bool more, uint32_t *head);
/* The end of a send call on @sq: ring now, or (@more) leave the doorbell
 * to the next call, a flush or the bounded delay. */
int qps_tx_end_locked(struct qps_sq *sq, bool more);

/* sq_generic.c: the WR chain path */
void qps_sq_generic_put(struct qps_sq *sq, uint32_t slot, uint32_t len);
int qps_sq_generic_ring(struct qps_sq *sq);

/* doorbell.c: under sq->lock */
int qps_db_ring_locked(struct qps_sq *sq, enum qps_txf cause);
int qps_db_defer_locked(struct qps_sq *sq);

#endif /* QPS_SQ_H */
