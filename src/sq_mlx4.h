/* SPDX-License-Identifier: MIT */
/*
 * The mlx4 direct send queue (sq_mlx4.c): the provider's ring, written by
 * the core. Its send-path table is qps_sq_path_mlx4 (sq_path.h); the
 * functions below work on the ring alone, which is what tests drive.
 */
#ifndef QPS_SQ_MLX4_H
#define QPS_SQ_MLX4_H

#include <stdbool.h>
#include <stdint.h>

#include "provider.h"
#include "sq_path.h"

/* What qps_sq_mlx4_ring() wrote. */
enum { QPS_SQ_RANG_NONE = 0, QPS_SQ_RANG_DB = 1, QPS_SQ_RANG_BF = 2 };

/* Under the lock of the struct qps_sq that holds it (sq.h). */
struct qps_sq_mlx4 {
	struct qps_qp *qp;
	struct qps_mlx4_sq m;
	uint32_t head;		/* next WQE index */
	uint32_t rung;		/* head when the device was last rung */
	uint32_t tail_seen;	/* the tail as last read: room is at least
				 * what it leaves, since the tail only grows */
	uint32_t max_inline;	/* frames up to this size are inlined */
	bool bf;		/* BlueFlame allowed (bf_reg present) */
	bool bf_alone;		/* no other queue writes the register: its
				 * lock (bf_state) is not taken */
};

/* Take over @qp's send ring; it must be empty and start at WQE 0 (a new
 * QP, or one that went through RESET): -EPROTO otherwise, or when the
 * provider's description does not hold together. */
int qps_sq_mlx4_init(struct qps_sq_mlx4 *sq, struct qps_qp *qp);
uint32_t qps_sq_mlx4_room(const struct qps_sq_mlx4 *sq);
int qps_sq_mlx4_write(struct qps_sq_mlx4 *sq, const void *frame,
		      uint32_t len, uint32_t lkey, uint64_t wr_id,
		      bool signaled, uint32_t csum);
int qps_sq_mlx4_write_pieces(struct qps_sq_mlx4 *sq,
			     const struct qps_tx_frame *f, uint64_t wr_id,
			     bool signaled, uint32_t csum);
int qps_sq_mlx4_ring(struct qps_sq_mlx4 *sq);

#endif /* QPS_SQ_MLX4_H */
