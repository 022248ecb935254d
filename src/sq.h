/* SPDX-License-Identifier: MIT */
/*
 * A send queue of a context: one send QP with its own CQ, its own
 * registered send slots, its WR chain (generic path) or mlx4 ring (direct
 * path), its doorbell state and its counters. A context has ctx->nsq of
 * them; txq_select.c picks the one each datagram goes out on. Send queue
 * 0's QP is also the context's receive QP (the steering rules target it);
 * the others only send.
 *
 * Locking: sq->lock guards every field below it, the posting side
 * (slots, WQEs, doorbell) and the completion side (reaping) alike, so the
 * txq_select counters of this QP (enqueued: posting side; completed:
 * completion side) each have one writer at a time. Operations on the whole
 * context (connect, close, destroy, stats) take the locks one by one, or
 * all of them in index order (qps_sq_lock_all; the whole lock order is at
 * struct qps_ctx, qps_int.h). A sender holds one send queue's lock at a
 * time. The application's threads take it with qps_alock_lock, qpsock's
 * own threads (the flusher) with qps_alock_lock_lib: in a single-threaded
 * context only the latter pay an atomic, in a multi-threaded one all but
 * the thread the lock leans to (alock.h).
 *
 * Priority bands: a sender builds its frame under sq->lock, releases it
 * and hands the slot to sq->prio lock-free; the band owner's post callback
 * (qps_tx_prio_post) takes sq->lock to write the WQEs. So the bands are
 * never entered (enqueue, kick, resume) with sq->lock held: the callback
 * would deadlock on it.
 */
#ifndef QPS_SQ_H
#define QPS_SQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "frames.h"
#include "alock.h"
#include "prio_bands.h"
#include "qps_int.h"
#include "sq_mlx4.h"
#include "sq_path.h"

/*
 * What the band owner needs to post a parked slot, written by its producer
 * under sq->lock before the slot enters a band and read by the owner under
 * sq->lock: the lock orders the two.
 */
#define QPS_TXM_FLOW 1u		/* unconnected: commit the flow's head */
#define QPS_TXM_MORE 2u		/* another frame of the same call follows */
#define QPS_TXM_TS 4u		/* its sender wants transmit times (txts.c) */
#define QPS_TXM_FRAG 8u		/* a datagram's fragment after its first */
#define QPS_TXM_CSUM 16u	/* the device computes its IPv4 and UDP sums */

struct qps_tx_meta {
	uint32_t len;			/* frame bytes */
	uint32_t bytes;			/* payload bytes (tx_bytes) */
	uint32_t hash;			/* flow hash, with QPS_TXM_FLOW */
	uint32_t flags;
	uintptr_t who;			/* the producing thread's
					 * qps_thread_id() */
	/* With QPS_TXM_TS: whose datagram (the endpoint and which of its
	 * openings), its number, what it asked for, when it was posted. */
	struct qps_ep *ts_ep;
	uint64_t ts_gen;
	uint32_t ts_id;
	uint32_t ts_flags;
	uint64_t ts_sw_ns;
};

struct qps_sq {
	/* Fixed after creation. */
	struct qps_ctx *ctx;
	uint32_t idx;			/* QP index for txq_select */
	struct qps_qp *qp;
	struct qps_cq *cq;		/* send completions of qp only */
	const struct qps_sq_path *path;	/* ctx->tx_ops (sq_path.h) */
	uint8_t *buf;			/* ctx->tx_depth slots in ctx->tx_mr */
	/* Frames up to this length may be written from their pieces
	 * (sq_path.h); set by the path's init and reset, under the lock. */
	uint32_t pieces_max;
	/* Priority bands: producers enqueue slot indexes (+1) without
	 * sq->lock; the band owner posts them, taking sq->lock in its post
	 * callback (tx.c qps_tx_prio_post). */
	struct qps_prio *prio;

	struct qps_alock lock;
	uint32_t *free;			/* stack of free slot indexes */
	struct qps_tx_meta *meta;	/* per slot: see struct qps_tx_meta */
	struct qps_ud_dest *ud_dest;	/* per slot, UD transport only (ud.h) */
	uint32_t nfree;
	uint32_t inflight;		/* posted, not completed */
	uint32_t unrung;		/* WQEs written since the last doorbell */
	/* What path->room() said last, less the WQEs written since: room
	 * only grows by completions otherwise, so while this is above 0 the
	 * path need not be asked (qps_tx_room_locked). 0 after init and
	 * reset, and after a refused write. */
	uint32_t room_seen;
	/*
	 * Completion moderation (tx_signal): the slots in the order their
	 * WQEs were written, oldest at post_tail. A CQE completes its own
	 * WQE and every older one on the QP, so reaping pops up to its slot.
	 * Positions are free-running counters; post_pos[slot] is where a
	 * slot was pushed, which makes finding it O(1).
	 */
	uint32_t *posted;		/* post_mask + 1 entries */
	uint32_t *post_pos;		/* per slot */
	uint32_t post_mask;
	uint32_t post_head;		/* next position to write */
	uint32_t post_tail;		/* oldest not reaped */
	uint32_t since_sig;		/* WQEs written after a signalled one */
	struct ibv_send_wr *wr;		/* generic: one WR + SGE per slot */
	struct ibv_sge *sge;
	struct ibv_send_wr *pend_head;	/* generic: the unrung chain */
	struct ibv_send_wr *pend_tail;
	struct qps_sq_mlx4 mlx4;	/* direct */
	/* The flusher (doorbell.c) reads these two without the lock. */
	bool db_armed;			/* atomic: unrung WQEs left by a call */
	uint64_t db_since;		/* atomic: monotonic ns it was armed */
	bool qp_err;			/* an error completion: recover */
	bool qp_dead;			/* recovery failed: sends -ENETDOWN */
	uint16_t ip_id;
	/* The headers of the datagram sent here last, for a device that
	 * computes the checksums (tx.c qps_tx_tmpl_locked): good while the
	 * endpoint, destination, TTL, TOS and route generation are those
	 * they were built for. Forgotten by qps_sq_unlock_all(): connect,
	 * disconnect and close change an endpoint under every queue's
	 * lock. */
	struct {
		const struct qps_ep *ep;	/* NULL: none */
		uint64_t gen;
		uint32_t daddr;
		uint16_t dport;
		uint8_t ttl;
		uint8_t tos;
		uint8_t hdr[QPS_HDRS_LEN];
	} tmpl;
	struct qps_route_slot route[QPS_ROUTE_SLOTS];
	struct qps_sq_stats *st;		/* in the stats segment (stat.h) */
} __attribute__((aligned(QPS_CACHELINE)));

/* The priority bands of send queue @q (tests: pause, resume, hooks). */
static inline struct qps_prio *qps_sq_prio(struct qps_ctx *ctx, uint32_t q)
{
	return q < ctx->nsq ? ctx->sq[q].prio : NULL;
}

/* The headers of the frame @f (sq_path.h), QPS_HDRS_LEN bytes at @dst,
 * for a device that sums them. */
static inline void qps_tx_frame_hdrs(void *dst, const struct qps_tx_frame *f)
{
	qps_frame_build_tmpl(dst, f->tmpl, f->ip_id, f->plen);
}

/* Room for one more WQE: a free slot and room on the send path. Under
 * sq->lock. */
static inline bool qps_tx_room_locked(struct qps_sq *sq)
{
	if (!sq->nfree)
		return false;
	if (!sq->room_seen)
		sq->room_seen = sq->path->room(sq);
	return sq->room_seen > 0;
}

/* sq.c: lifetime */
/* ctx->nsq send queues: QPs, CQs, slots; on failure ctx->sq may be left
 * partly built for qps_sqs_destroy. Needs ctx->rx.cq (QP 0 receives). */
int qps_sqs_create(struct qps_ctx *ctx);
void qps_sqs_destroy(struct qps_ctx *ctx);

/* tx.c: the band callback (sq.c creates the bands); takes sq->lock */
int qps_tx_prio_post(void *arg, void **items, unsigned int n, bool more);

/* tx.c: under sq->lock */
/* Reap @sq's send CQ; returns the WQEs completed (slots given back). */
int qps_tx_reap_locked(struct qps_sq *sq);
void qps_tx_slot_put(struct qps_sq *sq, uint32_t slot);
/* @slot's WQE was just written (or chained) on @sq's QP: the newest in
 * the posted order that reaping follows. */
void qps_tx_posted_push(struct qps_sq *sq, uint32_t slot);
/* The @n newest pushed WQEs never reached the device (a dropped chain):
 * forget them; their slots are the caller's to give back. */
void qps_tx_posted_unpush(struct qps_sq *sq, uint32_t n);
/* After a RESET: every slot still posted failed (tx_errors); returns how
 * many. */
uint32_t qps_tx_reclaim_locked(struct qps_sq *sq);
/* The end of a send call on @sq: ring now, or (@more) leave the doorbell
 * to the next call, a flush or the bounded delay. */
int qps_tx_end_locked(struct qps_sq *sq, bool more);

/* qp_recover.c: under sq->lock; bring the QP back if it failed (0 when
 * it had not), -EAGAIN while the device still holds WQEs of it. */
int qps_qp_recover_locked(struct qps_sq *sq);
/* RESET -> INIT -> RTR -> RTS, raw-packet or UD (QPS_UD_QKEY). */
int qps_qp_up(struct qps_ctx *ctx, struct qps_qp *qp);

/* doorbell.c: under sq->lock */
int qps_db_ring_locked(struct qps_sq *sq, enum qps_txf cause);
int qps_db_defer_locked(struct qps_sq *sq);

#endif /* QPS_SQ_H */
