// SPDX-License-Identifier: MIT
/*
 * Completion timestamps on CLOCK_REALTIME. A device stamps completions
 * with its own free-running clock (cycles at info.clock_hz, wrapping at
 * info.clock_mask + 1). As an application does with libibverbs
 * (ibv_query_rt_values_ex for the clock now, the completion's
 * IBV_WC_EX_WITH_COMPLETION_TIMESTAMP), the core reads the device clock
 * and CLOCK_REALTIME together once per polled batch and places each stamp
 * that far behind: real = real_now - (cycles_now - stamp) / hz. The
 * device clock is read between two reads of CLOCK_REALTIME and set
 * against their midpoint, which halves the error the reads' gap adds.
 * Kernel stamps (packet) are CLOCK_REALTIME or the NIC's ns already.
 */

#include "qps_int.h"

/* The device clock now, and CLOCK_REALTIME at that moment. */
static int qps_ts_ref(struct qps_ctx *ctx, uint64_t *cycles, uint64_t *real)
{
	uint64_t r0 = qps_realtime_ns(), r1;
	int ret = ctx->ops->read_clock(ctx->dev, cycles);

	r1 = qps_realtime_ns();
	*real = r0 + (r1 - r0) / 2;
	return ret;
}

/* @cycles of the device clock in ns, without overflow for any count. */
static uint64_t qps_ts_cycles_ns(uint64_t cycles, uint64_t hz)
{
	return cycles / hz * 1000000000u +
	       (cycles % hz) * 1000000000u / hz;
}

void qps_rx_ts_convert(struct qps_ctx *ctx, struct qps_wc_ts *ts, int n)
{
	uint64_t hz = ctx->info.clock_hz, mask = ctx->info.clock_mask;
	uint64_t now_c = 0, now_r = 0;
	bool ref = false;
	int i;

	for (i = 0; i < n; i++) {
		uint64_t d;

		if (ts[i].clock != QPS_WC_TS_DEV)
			continue;
		if (!hz || !mask) {
			ts[i].clock = QPS_WC_TS_NONE;
			continue;
		}
		if (!ref) {
			if (qps_ts_ref(ctx, &now_c, &now_r) < 0) {
				ts[i].clock = QPS_WC_TS_NONE;
				continue;
			}
			ref = true;
		}
		d = (now_c - ts[i].val) & mask;
		/* A stamp ahead of the clock read after it was polled is
		 * not one (a peer scribbled on the CQE): none. */
		if (d > mask / 2) {
			ts[i].clock = QPS_WC_TS_NONE;
			continue;
		}
		ts[i].val = now_r - qps_ts_cycles_ns(d, hz);
	}
}

void qps_rx_ts_cur_locked(struct qps_ctx *ctx, const struct qps_wc_ts *ts)
{
	ctx->rx.cur_dev_ns = 0;
	ctx->rx.cur_sw_ns = 0;
	if (!ts)
		return;
	if (ts->clock == QPS_WC_TS_DEV || ts->clock == QPS_WC_TS_HW)
		ctx->rx.cur_dev_ns = ts->val;
	else if (ts->clock == QPS_WC_TS_SW)
		ctx->rx.cur_sw_ns = ts->val;
}
