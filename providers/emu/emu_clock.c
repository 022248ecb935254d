// SPDX-License-Identifier: MIT
/*
 * The device's free-running clock, as a NIC's: a counter at
 * QPS_EMU_CLOCK_HZ that stamps every CQE (48 bits, where mlx4 keeps them:
 * ts_47_16, ts_15_8, ts_7_0). It is CLOCK_MONOTONIC_RAW scaled, which
 * every process of the host reads alike: a receive CQE is written by the
 * sending process, and its stamp must be on the receiver's clock. Like a
 * NIC's clock it is not steered by NTP; the core places it against
 * CLOCK_REALTIME at each poll (read_clock).
 */
#include "emu.h"

#include <errno.h>
#include <time.h>

uint64_t qps_emu_clock_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	/* tv_nsec < 1e9: the product stays below 2^59. */
	return (uint64_t)ts.tv_sec * QPS_EMU_CLOCK_HZ +
	       (uint64_t)ts.tv_nsec * QPS_EMU_CLOCK_HZ / 1000000000u;
}

int qps_emu_read_clock(struct qps_dev *dev, uint64_t *cycles)
{
	(void)dev;
	if (!cycles)
		return -EINVAL;
	*cycles = qps_emu_clock_now() & QPS_EMU_CLOCK_MASK;
	return 0;
}
