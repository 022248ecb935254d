// SPDX-License-Identifier: MIT
/*
 * Raw-packet QP handles of a software provider: what a QP may ask for,
 * what it is granted, its number and its references on its CQs. The
 * queues themselves are the provider's.
 */
#include "prov_sw.h"

#include <errno.h>

int qps_sw_qp_check(const struct qps_qp_init_attr *a, uint32_t max_wr,
		    uint32_t max_sge)
{
	if (a->qp_type != IBV_QPT_RAW_PACKET)
		return -EOPNOTSUPP;
	if (!a->send_cq || !a->recv_cq || !a->cap.max_send_wr ||
	    a->cap.max_send_wr > max_wr || a->cap.max_recv_wr > max_wr ||
	    a->cap.max_send_sge > max_sge || a->cap.max_recv_sge > 1)
		return -EINVAL;
	return 0;
}

void qps_sw_qp_fill(struct qps_qp *q, struct qps_dev *dev,
		    const struct qps_qp_init_attr *attr, uint32_t sq_cnt,
		    uint32_t rq_cnt, uint32_t max_sge, uint32_t max_inline)
{
	q->dev = dev;
	q->qp_type = attr->qp_type;
	q->send_cq = attr->send_cq;
	q->recv_cq = attr->recv_cq;
	q->cap.max_send_wr = sq_cnt;
	q->cap.max_recv_wr = rq_cnt;
	q->cap.max_send_sge = max_sge;
	q->cap.max_recv_sge = 1;
	q->cap.max_inline_data = max_inline;
}

void qps_sw_qp_link(struct qps_qp *q, uint32_t *seq)
{
	/* Numbers are only names here; 0 is never one. */
	q->qp_num = ++*seq & 0xffffff;
	if (!q->qp_num)
		q->qp_num = ++*seq & 0xffffff;
	qps_sw_cq(q->send_cq)->users++;
	qps_sw_cq(q->recv_cq)->users++;
}

void qps_sw_qp_unlink(struct qps_qp *q)
{
	qps_sw_cq(q->send_cq)->users--;
	qps_sw_cq(q->recv_cq)->users--;
}
