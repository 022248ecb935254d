/* SPDX-License-Identifier: MIT */
/*
 * stat_proc - the process a stats segment names, as /proc tells it: is it
 * the one that wrote the segment, is it gone, which user is it. A segment
 * is removed as stale only on a "gone" from here, so every doubt answers
 * "unknown".
 */
#ifndef QPS_STAT_PROC_H
#define QPS_STAT_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum sr_proc {
	SR_PROC_ALIVE,		/* that pid runs, started at that time */
	SR_PROC_GONE,		/* no such pid, or another process has it */
	SR_PROC_UNKNOWN,	/* cannot tell */
};

/* Our PID namespace as a segment records it (st_dev, st_ino of
 * /proc/self/ns/pid); false when /proc cannot say, or is another
 * namespace's mount, whose pids are not ours. */
bool sr_pidns_self(uint64_t *dev, uint64_t *ino);

/* Whether @pid, a pid of our namespace, is the process that started at
 * @start_ticks (/proc/<pid>/stat field 22; 0: not recorded). */
enum sr_proc sr_proc_state(int pid, uint64_t start_ticks);

/* The effective uid of @pid: 0 or -errno. */
int sr_proc_euid(int pid, uid_t *uid);

#endif /* QPS_STAT_PROC_H */
