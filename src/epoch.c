// SPDX-License-Identifier: MIT
/*
 * Grace periods for the receive tables (demux.h). Each receive queue has a
 * reader slot whose sequence is odd while its poller is inside a read-side
 * section. A writer that has unlinked an object waits, for every slot,
 * until the slot is even or has moved past the odd value it saw: no reader
 * can hold the object any more, and it is freed. This is quiescent-state
 * reclamation with the poll batch as the quiescent boundary; the readers
 * pay two stores per batch and nothing per packet, and never a reference
 * count on an endpoint.
 *
 * Writers are rare (join, leave, connect, close) and run under
 * ctx->ctl_lock, so they free synchronously: queue with qps_retire(),
 * then one qps_retire_flush() per operation.
 */
#include <sched.h>
#include <stdlib.h>

#include "demux.h"
#include "qps_int.h"
#include "rx.h"

void qps_epoch_enter(struct qps_epoch *e)
{
	/* Only this slot's poller (under its queue lock) stores seq. */
	uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

	/* Seq-cst: ordered before this section's QPS_RCU_LOADs; pairs with
	 * the seq-cst load in qps_epoch_sync() (see QPS_RCU_LOAD). */
	__atomic_store_n(&e->seq, s + 1, __ATOMIC_SEQ_CST);
}

void qps_epoch_exit(struct qps_epoch *e)
{
	uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

	/* Release: every read of this section happens before a writer that
	 * loads the new value (acquire in qps_epoch_sync) frees anything. */
	__atomic_store_n(&e->seq, s + 1, __ATOMIC_RELEASE);
}

void qps_epoch_sync(struct qps_epoch *e, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		/* Seq-cst: after the writer's seq-cst unlink stores; pairs
		 * with the store in qps_epoch_enter(). An even value was
		 * stored by qps_epoch_exit() (release), so it also acquires
		 * that section's reads. */
		uint32_t s = __atomic_load_n(&e[i].seq, __ATOMIC_SEQ_CST);
		unsigned int spins = 0;

		if (!(s & 1))
			continue;
		/* Acquire: pairs with the release in qps_epoch_exit(). */
		while (__atomic_load_n(&e[i].seq, __ATOMIC_ACQUIRE) == s) {
			if (++spins < 128)
				qps_cpu_relax();
			else
				sched_yield();	/* the poller may be descheduled */
		}
	}
}

void qps_retire(struct qps_ctx *ctx, void *p)
{
	if (!p)
		return;
	if (ctx->dmx.retired_n == ctx->dmx.retired_cap) {
		uint32_t cap = ctx->dmx.retired_cap ?
			       ctx->dmx.retired_cap * 2 : 16;
		void **np = realloc(ctx->dmx.retired, cap * sizeof(*np));

		if (!np) {
			/* No room to defer: wait here. @p was unlinked before
			 * this call, so this grace period covers it too. */
			qps_retire_flush(ctx);
			qps_epoch_sync(&ctx->rx.epoch, 1);
			free(p);
			return;
		}
		ctx->dmx.retired = np;
		ctx->dmx.retired_cap = cap;
	}
	ctx->dmx.retired[ctx->dmx.retired_n++] = p;
}

void qps_retire_flush(struct qps_ctx *ctx)
{
	uint32_t i;

	if (!ctx->dmx.retired_n)
		return;
	qps_epoch_sync(&ctx->rx.epoch, 1);
	for (i = 0; i < ctx->dmx.retired_n; i++)
		free(ctx->dmx.retired[i]);
	ctx->dmx.retired_n = 0;
}
