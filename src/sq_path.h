/* SPDX-License-Identifier: MIT */
/*
 * The send-path table: how a send queue turns written slots into WQEs and
 * wakes the device. One implementation per path: generic (WR chains
 * through the provider's post_send, sq_generic.c) and mlx4 (WQEs written
 * into the provider's ring, sq_mlx4.c). context.c chooses the table once
 * (ctx->tx_ops); tx.c, doorbell.c, qp_recover.c and sq.c call through it
 * and never ask which path they are on, so a third path (mlx5, AF_XDP)
 * is a new table and a line in context.c.
 *
 * Every op but init runs under the send queue's lock (sq.h); every one
 * returns 0, a count, or -errno.
 */
#ifndef QPS_SQ_PATH_H
#define QPS_SQ_PATH_H

#include <stdbool.h>
#include <stdint.h>

struct qps_sq;

/*
 * A frame in pieces, for a path that copies frames into its WQEs (mlx4
 * inline), on a device that sums it: its headers as the send queue's
 * template (QPS_HDRS_LEN bytes: the headers but for the lengths and the
 * IP ID, given apart in network order), and the payload where the sender
 * has it. Written so, the frame is never copied into its slot first (the
 * slot still names its completion), and the headers are built where they
 * are written (qps_tx_frame_hdrs, sq.h), not read back just after.
 */
struct qps_tx_frame {
	const uint8_t *tmpl;
	const uint8_t *payload;
	uint32_t plen;
	uint16_t ip_id;
};

struct qps_sq_path {
	const char *name;
	/* After the QP is created (and brought up): take over its send
	 * queue. Nothing is posted yet. */
	int (*init)(struct qps_sq *sq);
	/* The QP went through RESET and is back in RTS: the device starts
	 * again at WQE 0, with nothing posted (qp_recover.c). */
	int (*reset)(struct qps_sq *sq);
	/* WQEs that can be written now before a ring must make room; the
	 * slots bound the rest (UINT32_MAX: only they do). */
	uint32_t (*room)(const struct qps_sq *sq);
	/* Write the frame in @slot (@len bytes) as the newest WQE, not yet
	 * rung; @signaled: it asks for a completion. @f: the frame is in
	 * these pieces instead, never in the slot; only for @len up to
	 * sq->pieces_max, which init and reset set (0: never). -ENOSPC: no
	 * room. */
	int (*write)(struct qps_sq *sq, uint32_t slot,
		     const struct qps_tx_frame *f, uint32_t len,
		     bool signaled);
	/* Wake the device for every WQE written since the last ring; the
	 * newest asks for a completion. Returns the doorbells rung (post
	 * calls or register writes, 0 when nothing waited), *@bf those of
	 * them that were BlueFlame writes; or -errno, the unrung WQEs then
	 * counted in tx_errors and their slots given back. */
	int (*ring)(struct qps_sq *sq, uint32_t *bf);
};

extern const struct qps_sq_path qps_sq_path_generic;
extern const struct qps_sq_path qps_sq_path_mlx4;

#endif /* QPS_SQ_PATH_H */
