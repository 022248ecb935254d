// SPDX-License-Identifier: MIT
/*
 * stat_proc - who a segment's pid is now (stat_proc.h). Only a pid of our
 * own PID namespace can be looked up; the caller checks that first.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc_start.h"
#include "stat_proc.h"

bool sr_pidns_self(uint64_t *dev, uint64_t *ino)
{
	char link[32];
	struct stat st;
	ssize_t n;
	char *end;
	long pid;

	/* /proc of an outer namespace (a container without its own /proc
	 * mount) numbers processes differently: /proc/self names us by
	 * that number, not by getpid(). */
	n = readlink("/proc/self", link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	pid = strtol(link, &end, 10);
	if (*end || pid != (long)getpid())
		return false;
	if (stat("/proc/self/ns/pid", &st) != 0)
		return false;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return st.st_ino != 0;
}

enum sr_proc sr_proc_state(int pid, uint64_t start_ticks)
{
	char path[64];
	uint64_t now;

	if (pid <= 0)
		return SR_PROC_UNKNOWN;
	/* Only ESRCH says gone: EPERM is another user's live process. */
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return SR_PROC_GONE;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	now = qps_proc_start_ticks(path);
	/* Unreadable: hidden (hidepid), or it ended between the two looks;
	 * a later run decides. */
	if (!now || !start_ticks)
		return SR_PROC_UNKNOWN;
	/* A zombie still has its start time: alive until reaped. */
	return now == start_ticks ? SR_PROC_ALIVE : SR_PROC_GONE;
}

int sr_proc_euid(int pid, uid_t *uid)
{
	char path[64], buf[4096];
	unsigned long e;
	char *p, *end;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	/* "Uid:\treal\teffective\tsaved\tfs" */
	p = strstr(buf, "\nUid:");
	if (!p)
		return -EIO;
	(void)strtoul(p + 5, &end, 10);
	if (end == p + 5)
		return -EIO;
	p = end;
	e = strtoul(p, &end, 10);
	if (end == p || e > UINT_MAX)
		return -EIO;
	*uid = (uid_t)e;
	return 0;
}
