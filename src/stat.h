/* SPDX-License-Identifier: MIT */
/*
 * A context's stats segment (stat_seg.c; layout in stat_shm.h): where the
 * counter blocks live, published in /dev/shm for qps_stat or kept in
 * private memory, and the thread that refreshes its snapshot block.
 */
#ifndef QPS_STAT_H
#define QPS_STAT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stat_shm.h"

struct qps_ctx;
struct qps_ctx_attr;
struct qps_ep;

struct qps_stat {
	void *base;			/* the segment, NULL before open */
	size_t size;
	bool shm;			/* published: name is linked */
	char name[64];			/* for shm_unlink */
	struct qps_stat *live_next;	/* the process's published ones */
	struct qps_stat_hdr *hdr;
	struct qps_stats *snap;
	struct qps_sq_stats *sq;
	struct qps_stat_ep *eps;
	/* The publisher: refreshes the snapshot every QPS_STAT_PERIOD_MS. */
	pthread_t thread;
	pthread_mutex_t lock;		/* guards stop and the sleep */
	pthread_cond_t cond;
	bool lock_init;
	bool running;
	bool stop;
	/* The last capture ring the context would not take (dump.c): not
	 * tried again on every tick. */
	uint64_t dump_refused;
};

/* A new file for context @id's segment of @size bytes, mapped in
 * s->base, its name in s->name; -errno when there is none to be had. */
int qps_stat_file_create(struct qps_stat *s, uint32_t id, size_t size,
			 mode_t mode);

/* After the device is open and nsq, max_ep are known: the segment, and
 * ctx->st, the send queues' and the endpoints' blocks in it. */
int qps_stat_open(struct qps_ctx *ctx, const struct qps_ctx_attr *attr);
/* The publisher thread, once the context is complete (published only). */
void qps_stat_start(struct qps_ctx *ctx);
void qps_stat_stop(struct qps_ctx *ctx);
/* Unlink and unmap (or free); the blocks are gone afterwards. */
void qps_stat_close(struct qps_ctx *ctx);

/* The counters that modules keep in their own atomics (send-QP
 * selection, bands, UD, device) into @m, which starts zeroed. */
void qps_stat_mods(struct qps_ctx *ctx, struct qps_stats *m);

/* Under ctl_lock, @ep just opened: its slot's counters start from 0. */
void qps_stat_ep_open_locked(struct qps_ep *ep);
/* Under ctl_lock: copy @ep's identity (state, addresses, memberships)
 * into its slot. */
void qps_stat_ep_publish_locked(struct qps_ep *ep);

#endif /* QPS_STAT_H */
