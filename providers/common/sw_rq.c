// SPDX-License-Identifier: MIT
/*
 * Receive queue of a software provider: a ring of posted buffers that the
 * provider's poll fills in post order. Whatever the device would check at
 * post time (one SGE, inside a registered MR) is checked here, so that
 * the poll can copy into a buffer without looking again.
 */
#include "prov_sw.h"

#include <errno.h>
#include <stdlib.h>

int qps_sw_rq_init(struct qps_sw_rq *rq, uint32_t max_wr)
{
	pthread_mutex_init(&rq->lock, NULL);
	rq->wqe = NULL;
	rq->cnt = 0;
	rq->head = rq->tail = 0;
	if (!max_wr)
		return 0;
	rq->cnt = qps_sw_pow2(max_wr);
	rq->wqe = calloc(rq->cnt, sizeof(*rq->wqe));
	return rq->wqe ? 0 : -ENOMEM;
}

void qps_sw_rq_fini(struct qps_sw_rq *rq)
{
	pthread_mutex_destroy(&rq->lock);
	free(rq->wqe);
	rq->wqe = NULL;
}

int qps_sw_rq_post(struct qps_sw_rq *rq, struct qps_sw_mr_table *mrs,
		   struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	int ret = 0;

	pthread_mutex_lock(&rq->lock);
	for (; wr; wr = wr->next) {
		struct qps_sw_rwqe *e;

		if (rq->head - rq->tail >= rq->cnt) {
			ret = -ENOMEM;
			break;
		}
		if (wr->num_sge != 1 || !wr->sg_list ||
		    qps_sw_mr_check(mrs, wr->sg_list[0].lkey,
				    (uintptr_t)wr->sg_list[0].addr,
				    wr->sg_list[0].length)) {
			ret = -EINVAL;
			break;
		}
		e = &rq->wqe[rq->head & (rq->cnt - 1)];
		e->wr_id = wr->wr_id;
		e->addr = (uintptr_t)wr->sg_list[0].addr;
		e->len = wr->sg_list[0].length;
		rq->head++;
	}
	pthread_mutex_unlock(&rq->lock);
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}
