/* SPDX-License-Identifier: MIT */
/*
 * A process's start time, field 22 of /proc/<pid>/stat, in clock ticks:
 * with the pid it names one process even after the pid is reused. The
 * stats segment records its writer's (stat_seg.c) and qps_stat compares it
 * with the pid's now (tools/stat_read.c), so both read it here.
 */
#ifndef QPS_PROC_START_H
#define QPS_PROC_START_H

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* @path: a /proc/<pid>/stat file. 0 when unreadable. */
static inline uint64_t qps_proc_start_ticks(const char *path)
{
	char buf[1024];
	unsigned long long v = 0;
	const char *p;
	char *end;
	ssize_t n;
	int fd, i;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command may hold spaces and parentheses: skip past the last
	 * ')', then fields 3..21. */
	p = strrchr(buf, ')');
	for (i = 0; p && i < 20; i++)
		p = strchr(p + 1, ' ');
	if (p) {
		v = strtoull(p + 1, &end, 10);
		if (end == p + 1 || *end != ' ')
			v = 0;
	}
	return v;
}

#endif /* QPS_PROC_START_H */
