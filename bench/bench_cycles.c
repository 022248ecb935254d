// SPDX-License-Identifier: MIT
/*
 * CPU cycles of the calling thread through perf_event_open, where the
 * kernel and the machine allow it (user-space cycles only, which
 * perf_event_paranoid 2 still permits); -1 otherwise, and the benchmark
 * reports null.
 */
#include <linux/perf_event.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "qps_bench.h"

int qps_bench_cycles_open(void)
{
	struct perf_event_attr a;
	long fd;

	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_HARDWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_HW_CPU_CYCLES;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	if (fd < 0)
		return -1;
	if (ioctl((int)fd, PERF_EVENT_IOC_ENABLE, 0) < 0) {
		close((int)fd);
		return -1;
	}
	return (int)fd;
}

/* The count so far; 0 without a counter. */
uint64_t qps_bench_cycles_read(int fd)
{
	uint64_t v = 0;

	if (fd < 0 || read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return 0;
	return v;
}

void qps_bench_cycles_close(int fd)
{
	if (fd >= 0)
		close(fd);
}
