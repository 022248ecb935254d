/* SPDX-License-Identifier: MIT */
/*
 * Capture for qps_dump (dump.c; ring layout in dump_shm.h). A dumper
 * names a ring in the context's stats segment (dump_req); the stats tick
 * takes it (qps_dump_tick), after which the receive side and every send
 * queue copy each frame they handle into their own sub-ring.
 *
 * The data path pays one relaxed load of ctx->dump per receive batch and
 * per send burst while nobody captures (qps_dump_on); the copying is out
 * of line. A writer reads ctx->dump under its own lock (rx.lock, its send
 * queue's) and uses it only inside that section: the tick unpublishes a
 * ring, then takes and releases each of those locks once before it unmaps
 * it, so no writer can still hold it.
 */
#ifndef QPS_DUMP_H
#define QPS_DUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "qps_int.h"

struct qps_sq;
struct qps_tx_frame;
struct ibv_wc;

/* Whether a dumper has attached. Relaxed: the one load the data path
 * pays; the writer functions load ctx->dump again with acquire before
 * they follow it. */
static inline bool qps_dump_on(struct qps_ctx *ctx)
{
	return __builtin_expect(__atomic_load_n(&ctx->dump, __ATOMIC_RELAXED)
				!= NULL, 0);
}

/* Under rx.lock: the frames of @n receive completions. Cold: the
 * compiler keeps the call and its argument set-up off the hot path. */
__attribute__((cold))
void qps_dump_rx(struct qps_ctx *ctx, const struct ibv_wc *wc, int n);
/* Under @sq's lock: the frames of @n slots about to be posted, the
 * first of them in the pieces @f if not NULL (sq_path.h). */
__attribute__((cold))
void qps_dump_tx(struct qps_sq *sq, void *const *items, unsigned int n,
		 const struct qps_tx_frame *f);

/* The stats tick (stat_seg.c), no lock held: take a newly asked ring,
 * drop one whose dumper left or died. */
void qps_dump_tick(struct qps_ctx *ctx);
/* After the stats segment is published: with $QPS_DUMP_WAIT_MS set,
 * wait up to that long for a dumper, so that it sees the first frames. */
void qps_dump_start_wait(struct qps_ctx *ctx);
/* Context destroy, nothing else running: drop the ring. */
void qps_dump_close(struct qps_ctx *ctx);

#endif /* QPS_DUMP_H */
