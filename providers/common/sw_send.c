// SPDX-License-Identifier: MIT
/*
 * Send WRs of a software provider: what the device would refuse at post
 * time (-EINVAL, nothing posted) and what it would complete in error (a
 * length it cannot send, an SGE outside its MR), and the gather of the
 * SGEs into one frame. Every WR is copied at post time, so an inline WR
 * differs from another only in that its SGEs need no MR. Also what a
 * send queue counts, kept per QP and added to the device's counters.
 */
#include "prov_sw.h"

#include <errno.h>
#include <string.h>

#define SW_ETH_HLEN 14

int qps_sw_send_wr_check(const struct qps_qp *q, const struct ibv_send_wr *wr)
{
	if (wr->opcode != IBV_WR_SEND)
		return -EINVAL;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	return 0;
}

enum ibv_wc_status qps_sw_send_wr_len(struct qps_sw_mr_table *mrs,
				      const struct ibv_send_wr *wr,
				      uint32_t max_len, uint32_t *len_out)
{
	uint64_t total = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	*len_out = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
	if (total < SW_ETH_HLEN || total > max_len)
		return IBV_WC_LOC_LEN_ERR;
	for (i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];

		if (!(wr->send_flags & IBV_SEND_INLINE) &&
		    qps_sw_mr_check(mrs, s->lkey, (uintptr_t)s->addr,
				    s->length))
			return IBV_WC_LOC_PROT_ERR;
	}
	return IBV_WC_SUCCESS;
}

int qps_sw_send_wc(struct ibv_wc *wc, const struct qps_qp *q, uint64_t wr_id,
		   uint32_t byte_len, enum ibv_wc_status st, bool signaled)
{
	if (!signaled && st == IBV_WC_SUCCESS)
		return 0;
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = wr_id;
	wc->status = st;
	wc->opcode = IBV_WC_SEND;
	wc->byte_len = st == IBV_WC_SUCCESS ? byte_len : 0;
	wc->qp_num = q->qp_num;
	return 1;
}

void qps_sw_send_wr_copy(uint8_t *dst, const struct ibv_send_wr *wr)
{
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		memcpy(dst, (const void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		dst += wr->sg_list[i].length;
	}
}

void qps_sw_sq_count(struct qps_sw_sq_stats *s, enum ibv_wc_status st)
{
	if (st == IBV_WC_SUCCESS) {
		qps_sw_count(&s->wqes, 1);
		return;
	}
	if (st == IBV_WC_LOC_LEN_ERR)
		qps_sw_count(&s->tx_len_err, 1);
	qps_sw_count(&s->tx_drops, 1);
}

void qps_sw_sq_stats_add(struct qps_dev_counters *c,
			 const struct qps_sw_sq_stats *s)
{
	c->wqes += qps_sw_read(&s->wqes);
	c->doorbells += qps_sw_read(&s->doorbells);
	c->tx_cqes += qps_sw_read(&s->tx_cqes);
	c->tx_drops += qps_sw_read(&s->tx_drops);
}
