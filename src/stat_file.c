// SPDX-License-Identifier: MIT
/*
 * The file behind a published stats segment: a name of its own in
 * /dev/shm, created exclusively with the mode asked for, its space
 * reserved, then mapped. Every failure is returned for the caller to log
 * and fall back to private memory: nothing here may end the process.
 *
 * Why each step:
 * - Exclusive, not following links: /dev/shm is writable by every user;
 *   whatever someone else put under our name is theirs, never opened.
 * - A taken name is left alone and another one tried, with a random tag:
 *   it may be another PID namespace's live segment (every container's
 *   pid 1 has the same name), or a squatter's file, which a predictable
 *   next name would not escape.
 * - Space reserved with posix_fallocate: on tmpfs ftruncate reserves
 *   nothing, and the first store to a page the file system cannot supply
 *   raises SIGBUS in the data path.
 * - RLIMIT_FSIZE checked first: extending a file past it raises SIGXFSZ,
 *   whose default action ends the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stat.h"

/* The plain name, then this many tagged ones. */
#define QPS_STAT_NAME_TRIES 4

static uint32_t qps_stat_tag(uint32_t k)
{
	struct timespec ts;
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	/* No entropy yet (early boot): unpredictable enough to a squatter
	 * who would have to guess the nanosecond. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint32_t)ts.tv_nsec * 2654435761u ^ k;
}

static int qps_stat_name(struct qps_stat *s, uint32_t id, uint32_t k)
{
	int n;

	if (k == 0)
		n = snprintf(s->name, sizeof(s->name), "/%s%d.%u",
			     QPS_STAT_PREFIX, (int)getpid(), id);
	else
		n = snprintf(s->name, sizeof(s->name), "/%s%d.%u.%08x",
			     QPS_STAT_PREFIX, (int)getpid(), id,
			     qps_stat_tag(k));
	return n > 0 && (size_t)n < sizeof(s->name) ? 0 : -ENAMETOOLONG;
}

/* A new file under one of our names; its descriptor or -errno. */
static int qps_stat_open_new(struct qps_stat *s, uint32_t id, mode_t mode)
{
	uint32_t k;

	for (k = 0; k <= QPS_STAT_NAME_TRIES; k++) {
		int fd, ret = qps_stat_name(s, id, k);

		if (ret < 0)
			return ret;
		fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
				       O_CLOEXEC, mode);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static int qps_stat_fsize_ok(size_t size)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_FSIZE, &rl) != 0)
		return -errno;
	if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)size > rl.rlim_cur)
		return -EFBIG;
	return 0;
}

static int qps_stat_reserve(int fd, size_t size)
{
	int ret;

	/* posix_fallocate returns the error rather than setting errno. */
	do {
		ret = posix_fallocate(fd, 0, (off_t)size);
	} while (ret == EINTR);
	return -ret;
}

int qps_stat_file_create(struct qps_stat *s, uint32_t id, size_t size,
			 mode_t mode)
{
	void *p;
	int fd, ret;

	/* Named first: a failure before the file is made names it too. */
	ret = qps_stat_name(s, id, 0);
	if (!ret)
		ret = qps_stat_fsize_ok(size);
	if (ret < 0)
		return ret;
	fd = qps_stat_open_new(s, id, mode);
	if (fd < 0)
		return fd;
	/* The umask may have taken bits QPS_STATS_ALL_USERS asked for. */
	ret = fchmod(fd, mode) < 0 ? -errno : 0;
	if (!ret)
		ret = qps_stat_reserve(fd, size);
	if (!ret) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			ret = -errno;
		else
			s->base = p;
	}
	close(fd);
	if (ret < 0)
		shm_unlink(s->name);
	return ret;
}
