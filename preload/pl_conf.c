// SPDX-License-Identifier: MIT
/*
 * Configuration, read once from the environment by the constructor
 * (docs/preload.md has the table). QPS_PROVIDER and QPS_DEV are the
 * core's own and are read by qps_ctx_create().
 */
#include <arpa/inet.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

struct pl_conf pl_conf = { .offload = true, .rmem_max = 212992 };

static bool env_on(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") != 0;
}

static int read_int_file(const char *path, int dflt)
{
	FILE *f = fopen(path, "re");
	char line[32], *end;
	long v = 0;

	if (!f)
		return dflt;
	if (fgets(line, sizeof(line), f))
		v = strtol(line, &end, 10);
	(void)fclose(f);
	return v > 0 && v <= INT_MAX ? (int)v : dflt;
}

void pl_conf_load(void)
{
	const char *v = getenv("QPS_PRELOAD_OFFLOAD");

	pl_conf.stats = env_on("QPS_PRELOAD_STATS");
	pl_conf.debug = env_on("QPS_PRELOAD_DEBUG");
	if (v && strcmp(v, "none") == 0)
		pl_conf.offload = false;
	else if (v && *v && strcmp(v, "all") != 0)
		pl_log("QPS_PRELOAD_OFFLOAD=%s is not all or none: all", v);
	v = getenv("QPS_ADDR");
	if (v && *v && inet_pton(AF_INET, v, &pl_conf.addr) != 1) {
		pl_log("QPS_ADDR=%s is not an IPv4 address: ignored", v);
		pl_conf.addr.s_addr = INADDR_ANY;
	}
	pl_conf.rmem_max = read_int_file("/proc/sys/net/core/rmem_max",
					 pl_conf.rmem_max);
}

/* One line to stderr, written whole with one call (no stdio buffer, so
 * it is safe from the destructor and interleaves per line). */
void pl_log(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n = snprintf(line, sizeof(line), "qpsock-preload[%d]: ",
			 (int)getpid());

	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* Our own write() would look the fd up; stderr is never ours,
	 * but the syscall keeps this usable before symbols resolve. */
	(void)!syscall(SYS_write, 2, line, (size_t)n);
}
