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

/* "5000,6000-6010": ports and ranges. A bad item is said and skipped,
 * the rest still apply (the program runs, offloaded as near as we can). */
static void ports_load(const char *v)
{
	char *end;

	while (v && *v) {
		unsigned long lo = strtoul(v, &end, 10), hi = lo;

		if (end != v && *end == '-')
			hi = strtoul(end + 1, &end, 10);
		if (end == v || (*end && *end != ',') || lo == 0 ||
		    hi > 65535 || lo > hi) {
			pl_log("QPS_PRELOAD_PORTS: '%.*s' is not a port or "
			       "range: skipped", (int)strcspn(v, ","), v);
		} else {
			unsigned long p;

			for (p = lo; p <= hi; p++)
				pl_conf.ports[p >> 3] |= (uint8_t)(1u << (p & 7));
			pl_conf.nports += (int)(hi - lo + 1);
		}
		v += strcspn(v, ",");
		if (*v)
			v++;
	}
}

/* "239.1.0.0/16,224.1.2.3": groups and prefixes of groups. */
static void groups_load(const char *v)
{
	while (v && *v) {
		size_t n = strcspn(v, ",");
		char item[32], *slash, *end;
		unsigned long bits = 32;
		struct in_addr a;
		uint32_t mask;

		(void)snprintf(item, sizeof(item), "%.*s", (int)n, v);
		slash = strchr(item, '/');
		if (slash) {
			*slash = '\0';
			bits = strtoul(slash + 1, &end, 10);
			if (end == slash + 1 || *end)
				bits = 33;
		}
		mask = bits == 0 ? 0 : bits > 32 ? 0 : ~0u << (32 - bits);
		if (n >= sizeof(item) || bits < 4 || bits > 32 ||
		    inet_pton(AF_INET, item, &a) != 1 ||
		    !IN_MULTICAST(ntohl(a.s_addr))) {
			pl_log("QPS_PRELOAD_GROUPS: '%.*s' is not a group or "
			       "a prefix in 224.0.0.0/4: skipped", (int)n, v);
		} else if (pl_conf.ngroups == PL_GROUPS_MAX) {
			pl_log("QPS_PRELOAD_GROUPS: more than %d: '%.*s' "
			       "skipped", PL_GROUPS_MAX, (int)n, v);
		} else {
			pl_conf.groups[pl_conf.ngroups].net =
				ntohl(a.s_addr) & mask;
			pl_conf.groups[pl_conf.ngroups++].mask = mask;
		}
		v += n;
		if (*v)
			v++;
	}
}

void pl_conf_load(void)
{
	const char *v = getenv("QPS_PRELOAD_OFFLOAD");

	pl_conf.stats = env_on("QPS_PRELOAD_STATS");
	pl_conf.debug = env_on("QPS_PRELOAD_DEBUG");
	if (v && strcmp(v, "none") == 0)
		pl_conf.mode = PL_OFFLOAD_NONE;
	else if (v && strcmp(v, "multicast") == 0)
		pl_conf.mode = PL_OFFLOAD_MULTICAST;
	else if (v && *v && strcmp(v, "all") != 0)
		pl_log("QPS_PRELOAD_OFFLOAD=%s is not all, multicast or "
		       "none: all", v);
	pl_conf.offload = pl_conf.mode != PL_OFFLOAD_NONE;
	ports_load(getenv("QPS_PRELOAD_PORTS"));
	groups_load(getenv("QPS_PRELOAD_GROUPS"));
	v = getenv("QPS_ADDR");
	if (v && *v && inet_pton(AF_INET, v, &pl_conf.addr) != 1) {
		pl_log("QPS_ADDR=%s is not an IPv4 address: ignored", v);
		pl_conf.addr.s_addr = INADDR_ANY;
	}
	pl_conf.rmem_max = read_int_file("/proc/sys/net/core/rmem_max",
					 pl_conf.rmem_max);
}

/* One line to stderr, written whole with one call (no stdio buffer, so
 * it is safe from the exit teardown and interleaves per line). */
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
