/* SPDX-License-Identifier: MIT */
/*
 * stat_read - find, check and read the stats segments that contexts
 * publish (layout: src/stat_shm.h). Shared by qps_stat and its tests.
 */
#ifndef QPS_STAT_READ_H
#define QPS_STAT_READ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stat_shm.h"

/* Why a segment could not be read (sr_open). */
enum sr_status {
	SR_OK = 0,
	SR_GONE,	/* removed meanwhile */
	SR_PERM,	/* no permission to read it */
	SR_BUSY,	/* still being created: magic not set yet */
	SR_MISMATCH,	/* another layout or library version */
	SR_BAD,		/* too short, or inconsistent offsets */
};

struct sr_seg {
	char name[256];			/* file name in QPS_STAT_DIR */
	int pid;
	unsigned int ctx_id;
	const void *map;
	size_t size;
	struct qps_stat_hdr h;		/* a copy, once checked */
};

/* One open endpoint slot. */
struct sr_ep {
	uint32_t slot;
	struct qps_stat_ep b;
};

struct sr_snap {
	struct qps_stats all;		/* as qps_ctx_stats would add them */
	uint64_t snap_age_ns;		/* how old the snapshot block is */
	uint32_t neps;
	struct sr_ep *eps;		/* neps, by slot; sr_snap_free */
};

/* The segment names (QPS_STAT_PREFIX<pid>.<ctx>) now in QPS_STAT_DIR,
 * sorted by pid then context; *out is malloc'd. -errno or the count. */
int sr_list(struct sr_seg **out);
/* Map and check @s (name, pid, ctx_id set by sr_list). */
enum sr_status sr_open(struct sr_seg *s);
void sr_close(struct sr_seg *s);
/* Whether process @pid still runs and is the one that made @h (its start
 * time, when both are known). */
int sr_alive(int pid, uint64_t start_ticks);
/* Remove a segment whose process is gone. 0 or -errno. */
int sr_remove(const struct sr_seg *s);
/* Copy the counters and the open endpoints. 0 or -ENOMEM. */
int sr_read(const struct sr_seg *s, struct sr_snap *snap);
void sr_snap_free(struct sr_snap *snap);
const char *sr_strstatus(enum sr_status st);

#endif /* QPS_STAT_READ_H */
