// SPDX-License-Identifier: MIT
/*
 * The two clocks the core reads: CLOCK_MONOTONIC for deadlines, budgets
 * and lifetimes, CLOCK_REALTIME for the stamps handed to the application
 * (SO_TIMESTAMP's clock).
 */
#include <time.h>

#include "qps_int.h"

static uint64_t qps_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t qps_now_ns(void)
{
	return qps_clock_ns(CLOCK_MONOTONIC);
}

uint64_t qps_realtime_ns(void)
{
	return qps_clock_ns(CLOCK_REALTIME);
}
