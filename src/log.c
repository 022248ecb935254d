// SPDX-License-Identifier: MIT
/*
 * Diagnostics go to stderr. Errors a caller cannot see in a return code
 * alone (why a device failed to open) are printed once where detected;
 * debug lines only with QPS_LOG=debug.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qps_int.h"

__attribute__((format(printf, 1, 0)))
static void qps_vlog(const char *fmt, va_list ap)
{
	char line[512];

	/* Formatted first so that the line reaches stderr in one write,
	 * whole among other threads' lines; a longer one is cut. */
	(void)vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(stderr, "qpsock: %s\n", line);
}

void qps_log_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	qps_vlog(fmt, ap);
	va_end(ap);
}

void qps_log_dbg(const char *fmt, ...)
{
	const char *lvl = getenv("QPS_LOG");
	va_list ap;

	if (!lvl || strcmp(lvl, "debug") != 0)
		return;
	va_start(ap, fmt);
	qps_vlog(fmt, ap);
	va_end(ap);
}
