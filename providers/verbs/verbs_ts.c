// SPDX-License-Identifier: MIT
/*
 * Completion timestamps. Where the device has a completion clock
 * (ibv_query_device_ex: completion_timestamp_mask and hca_core_clock),
 * CQs are extended CQs asking for IBV_WC_EX_WITH_COMPLETION_TIMESTAMP:
 * poll_cq_ts reads them with ibv_start_poll/ibv_next_poll, and poll_cq
 * keeps using ibv_poll_cq on the same CQ, which libibverbs allows.
 * read_clock is ibv_query_rt_values_ex's raw clock. Without a clock, or
 * when the extended CQ is refused, a CQ is a plain one, poll_cq_ts says
 * -EOPNOTSUPP and the core stamps in software.
 */
#include "verbs.h"

#include <errno.h>
#include <string.h>

void qps_verbs_ts_open(struct qps_verbs_dev *vd)
{
	struct ibv_device_attr_ex ax;

	memset(&ax, 0, sizeof(ax));
	if (ibv_query_device_ex(vd->ctx, NULL, &ax) ||
	    !ax.completion_timestamp_mask || !ax.hca_core_clock)
		return;
	vd->info.clock_hz = ax.hca_core_clock * 1000u;	/* kHz */
	vd->info.clock_mask = ax.completion_timestamp_mask;
}

struct ibv_cq *qps_verbs_ts_create_cq(struct qps_verbs_dev *vd,
				      struct qps_verbs_cq *vc, int cqe)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = (uint32_t)cqe,
		.cq_context = vc,
		.channel = vd->chan,
		.wc_flags = IBV_WC_STANDARD_FLAGS |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
	};

	if (!vd->info.clock_hz)
		return NULL;
	vc->cqx = ibv_create_cq_ex(vd->ctx, &ca);
	return vc->cqx ? ibv_cq_ex_to_cq(vc->cqx) : NULL;
}

/* The completion the extended CQ points at, as ibv_poll_cq fills it:
 * only wr_id, status, vendor_err and qp_num of a failed one. */
static void read_wc(struct ibv_cq_ex *cqx, struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = cqx->wr_id;
	wc->status = cqx->status;
	wc->qp_num = ibv_wc_read_qp_num(cqx);
	if (wc->status != IBV_WC_SUCCESS) {
		wc->vendor_err = ibv_wc_read_vendor_err(cqx);
		return;
	}
	wc->opcode = ibv_wc_read_opcode(cqx);
	wc->byte_len = ibv_wc_read_byte_len(cqx);
	wc->wc_flags = ibv_wc_read_wc_flags(cqx);
	if (wc->wc_flags & IBV_WC_WITH_IMM)
		wc->imm_data = ibv_wc_read_imm_data(cqx);
	wc->src_qp = ibv_wc_read_src_qp(cqx);
	wc->slid = (uint16_t)ibv_wc_read_slid(cqx);
	wc->sl = ibv_wc_read_sl(cqx);
	wc->dlid_path_bits = ibv_wc_read_dlid_path_bits(cqx);
}

int qps_verbs_poll_cq_ts(struct qps_cq *cq, int num, struct ibv_wc *wc,
			 struct qps_wc_ts *ts)
{
	struct qps_verbs_cq *vc = qps_verbs_cq(cq);
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	int n = 0, ret;

	if (!vc->cqx)
		return -EOPNOTSUPP;
	if (num < 0 || (num && (!wc || !ts)))
		return -EINVAL;
	if (!num)
		return 0;
	ret = ibv_start_poll(vc->cqx, &pa);
	if (ret == ENOENT)
		return 0;
	/* A failed poll carries no errno worth more: the CQ is broken. */
	if (ret)
		return -EIO;
	do {
		read_wc(vc->cqx, &wc[n]);
		ts[n].val = ibv_wc_read_completion_ts(vc->cqx);
		ts[n].clock = QPS_WC_TS_DEV;
		n++;
		/* ENOENT ends the batch; a broken CQ fails the next poll. */
	} while (n < num && !ibv_next_poll(vc->cqx));
	ibv_end_poll(vc->cqx);
	qps_verbs_cq_polled(vc, wc, n);
	return n;
}

int qps_verbs_read_clock(struct qps_dev *dev, uint64_t *cycles)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	int ret;

	if (!cycles)
		return -EINVAL;
	if (!vd->info.clock_hz)
		return -EOPNOTSUPP;
	ret = ibv_query_rt_values_ex(vd->ctx, &v);
	if (ret)
		return -ret;
	/* mlx4 and mlx5 put the cycles in tv_nsec. */
	*cycles = (uint64_t)v.raw_clock.tv_sec * 1000000000u +
		  (uint64_t)v.raw_clock.tv_nsec;
	return 0;
}
