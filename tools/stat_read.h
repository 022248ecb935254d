/* SPDX-License-Identifier: MIT */
/*
 * stat_read - find, check and read the stats segments that contexts
 * publish (layout: src/stat_shm.h). Shared by qps_stat, its tests and
 * its fuzzer.
 *
 * A file under a segment's name is made by whoever could create it in
 * /dev/shm, so nothing in it is trusted: it is opened without following
 * a link or waiting, taken only when regular and laid out exactly as this
 * build writes, copied into private memory with pread (a file truncated
 * meanwhile reads short, it cannot fault), and its strings are escaped
 * before anyone prints them.
 */
#ifndef QPS_STAT_READ_H
#define QPS_STAT_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stat_esc.h"
#include "stat_shm.h"

/* What sr_open made of a file. */
enum sr_status {
	SR_OK = 0,
	SR_GONE,	/* removed meanwhile */
	SR_PERM,	/* no permission to read it */
	SR_BUSY,	/* still being created: magic not set yet */
	SR_MISMATCH,	/* another layout or library version */
	SR_BAD,		/* not the layout this build writes */
	SR_LINK,	/* a symbolic link */
	SR_NOTREG,	/* not a regular file */
	SR_OWNER,	/* not owned by the user of the process it names */
	SR_SHORT,	/* shorter than its header says: truncated */
	SR_IO,		/* cannot be opened or read (err says why) */
	SR_STALE,	/* its process is verifiably gone */
};

struct sr_seg {
	char name[64];			/* file name in QPS_STAT_DIR */
	int pid;			/* from the name */
	unsigned int ctx_id;		/* from the name */
	/* Set by sr_open: */
	int fd;				/* open for sr_read while SR_OK */
	int err;			/* SR_IO: the errno */
	uint64_t dev, ino;		/* the file that was read */
	uid_t uid;			/* its owner */
	size_t size;
	bool other_ns;			/* another PID namespace wrote it */
	struct qps_stat_hdr h;		/* a checked copy of its header */
	/* The header's strings, escaped for printing. */
	char comm[SR_ESC_LEN(16)];
	char provider[SR_ESC_LEN(16)];
	char devname[SR_ESC_LEN(QPS_NAME_MAX)];
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

/* The segment names now in QPS_STAT_DIR (sr_parse_name), sorted by pid
 * then context; *out is malloc'd. -errno or the count. */
int sr_list(struct sr_seg **out);
/* QPS_STAT_PREFIX<pid>.<ctx>, or QPS_STAT_PREFIX<pid>.<ctx>.<tag> (a
 * writer whose name was taken: 1-8 lowercase hex digits): decimal without
 * sign or leading zero, pid 1..INT32_MAX. 0, or -EINVAL for any other
 * name. */
int sr_parse_name(const char *name, int *pid, unsigned int *ctx);
/* Open @s (name, pid, ctx_id set by sr_list) and check it: the file,
 * its header and the process it names. SR_OK leaves it open for
 * sr_read; sr_close in every case. */
enum sr_status sr_open(struct sr_seg *s);
/* The file part of sr_open on @fd, which @s takes: regular, its size
 * and header exactly what this build writes. No process is looked at. */
enum sr_status sr_open_fd(struct sr_seg *s, int fd);
void sr_close(struct sr_seg *s);
/* Remove a segment sr_open found SR_STALE, unless another file took its
 * name meanwhile (-ESTALE). 0 or -errno. */
int sr_remove(const struct sr_seg *s);
/* Copy the counters and the open endpoints of an open segment. 0,
 * -ENOMEM, -ENODATA when it is shorter than it was (truncated), or
 * -errno of a failed read. */
int sr_read(const struct sr_seg *s, struct sr_snap *snap);
void sr_snap_free(struct sr_snap *snap);
const char *sr_strstatus(enum sr_status st);

#endif /* QPS_STAT_READ_H */
