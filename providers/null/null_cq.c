// SPDX-License-Identifier: MIT
/*
 * Completion queues of the null device: a ring of completions that the
 * send side fills at once (one per signalled WQE), and, on the receive
 * CQ of a generating device, datagrams made up when the poller has found
 * the ring empty (null_rx.c).
 */
#include "null.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int qps_null_create_cq(struct qps_dev *d, int cqe, struct qps_cq **cq_out)
{
	struct qps_null_cq *cq;

	if (!cq_out || cqe < 1 || (uint32_t)cqe > QPS_NULL_MAX_CQE)
		return -EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	/* One more than asked, as mlx4 rounds up: cqe entries usable. */
	cq->cnt = qps_null_roundup_pow2((uint32_t)cqe + 1);
	cq->ring = calloc(cq->cnt, sizeof(*cq->ring));
	if (!cq->ring) {
		free(cq);
		return -ENOMEM;
	}
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	cq->base.dev = d;
	cq->base.cqe = cqe;
	cq->rx_due = true;
	*cq_out = &cq->base;
	return 0;
}

int qps_null_destroy_cq(struct qps_cq *c)
{
	struct qps_null_dev *dev = qps_null_dev(c->dev);
	struct qps_null_cq *cq = qps_null_cq(c);

	pthread_mutex_lock(&dev->lock);
	if (cq->users) {
		pthread_mutex_unlock(&dev->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&dev->lock);
	pthread_spin_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
	return 0;
}

void qps_null_cq_push_locked(struct qps_null_cq *cq,
			     const struct qps_null_cqe *e)
{
	if (cq->prod - cq->cons >= cq->cnt) {
		cq->overrun = true;
		qps_null_count(&cq->overruns, 1);
		return;
	}
	cq->ring[cq->prod & (cq->cnt - 1)] = *e;
	cq->prod++;
}

static void cqe_to_wc(const struct qps_null_cqe *e, struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = e->wr_id;
	wc->status = (enum ibv_wc_status)e->status;
	wc->opcode = (enum ibv_wc_opcode)e->opcode;
	wc->byte_len = e->byte_len;
	wc->qp_num = e->qp->base.qp_num;
	/* A send completion frees its WQE and every earlier one. */
	if (e->opcode == IBV_WC_SEND)
		qps_null_sq_completed(e->qp, e->idx);
}

/* Turn @qp's waiting completions into no-ops, as libmlx4 cleans a CQ when
 * a QP is destroyed: nothing polled later names a freed QP. */
void qps_null_cq_clean(struct qps_null_cq *cq, const struct qps_null_qp *qp)
{
	uint32_t i;

	pthread_spin_lock(&cq->lock);
	for (i = cq->cons; i != cq->prod; i++)
		if (cq->ring[i & (cq->cnt - 1)].qp == qp)
			cq->ring[i & (cq->cnt - 1)].qp = NULL;
	pthread_spin_unlock(&cq->lock);
}

int qps_null_poll_cq(struct qps_cq *c, int num, struct ibv_wc *wc)
{
	struct qps_null_dev *dev = qps_null_dev(c->dev);
	struct qps_null_cq *cq = qps_null_cq(c);
	int n = 0;

	if (num < 0 || (num && !wc))
		return -EINVAL;
	pthread_spin_lock(&cq->lock);
	while (n < num && cq->cons != cq->prod) {
		const struct qps_null_cqe *e = &cq->ring[cq->cons & (cq->cnt - 1)];

		cq->cons++;
		if (e->qp)
			cqe_to_wc(e, &wc[n++]);
	}
	if (!n && num > 0 && cq->overrun) {
		/* Lost completions, reported once what did arrive is out. */
		cq->overrun = false;
		n = -EIO;
	} else if (!n && num > 0 && dev->cfg.rx != QPS_NULL_RX_OFF &&
		   __atomic_load_n(&cq->rx_users, __ATOMIC_RELAXED)) {
		/* Frames arrive while the poller is away: a burst for every
		 * time it found the CQ empty. */
		if (cq->rx_due) {
			cq->rx_due = false;
			n = qps_null_rx_generate(cq, num, wc);
		} else {
			cq->rx_due = true;
		}
	}
	pthread_spin_unlock(&cq->lock);
	return n;
}
