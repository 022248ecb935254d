// SPDX-License-Identifier: MIT
/*
 * Raw-packet QPs: a software send queue in front of the device's TX ring,
 * and a receive queue of posted buffers (common/sw_rq.c) that the QP's
 * steering rules fill.
 */
#include "xdp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XDP_MAX_SGE 16

static void qp_free(struct qps_xdp_qp *qp)
{
	qps_sw_rq_fini(&qp->rq);
	free(qp->sq);
	free(qp->wcs);
	free(qp);
}

int qps_xdp_create_qp(struct qps_dev *d, const struct qps_qp_init_attr *attr,
		      struct qps_qp **qp_out)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(d);
	struct qps_xdp_qp *qp;
	int ret;

	if (!attr || !qp_out)
		return -EINVAL;
	ret = qps_sw_qp_check(attr, QPS_XDP_MAX_WR, XDP_MAX_SGE);
	if (ret < 0)
		return ret;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	ret = qps_sw_rq_init(&qp->rq, attr->cap.max_recv_wr);
	qp->sq_cnt = qps_sw_pow2(attr->cap.max_send_wr < 2 ? 2 :
				 attr->cap.max_send_wr);
	qp->sq = calloc(qp->sq_cnt, sizeof(*qp->sq));
	if (qp->rq.cnt)
		qp->wcs = calloc(qp->rq.cnt, sizeof(*qp->wcs));
	if (!qp->sq || ret < 0 || (qp->rq.cnt && !qp->wcs)) {
		qp_free(qp);
		return -ENOMEM;
	}
	qps_sw_qp_fill(&qp->base, d, attr, qp->sq_cnt, qp->rq.cnt,
		       XDP_MAX_SGE, dev->info.max_inline);
	qp->sq_sig_all = attr->sq_sig_all;
	pthread_mutex_lock(&dev->lock);
	qps_sw_qp_link(&qp->base, &dev->qp_seq);
	qp->next = dev->qps;
	dev->qps = qp;
	pthread_mutex_unlock(&dev->lock);
	*qp_out = &qp->base;
	return 0;
}

int qps_xdp_destroy_qp(struct qps_qp *q)
{
	struct qps_xdp_qp *qp = qps_xdp_qp(q);
	struct qps_xdp_dev *dev = qps_xdp_dev(q->dev);
	struct qps_xdp_qp **pp;

	pthread_mutex_lock(&dev->lock);
	if (qp->nflows) {
		pthread_mutex_unlock(&dev->lock);
		return -EBUSY;	/* destroy its steering rules first */
	}
	for (pp = &dev->qps; *pp && *pp != qp; pp = &(*pp)->next)
		;
	if (!*pp) {
		pthread_mutex_unlock(&dev->lock);
		return -EINVAL;
	}
	*pp = qp->next;
	qps_sw_qp_unlink(q);
	pthread_mutex_lock(&dev->tx_lock);
	qps_xdp_tx_forget(dev, qp);
	qps_sw_sq_stats_add(&dev->retired, &qp->sq_stats);
	pthread_mutex_unlock(&dev->tx_lock);
	dev->retired.rx_cqes += qps_sw_read(&qp->rx_cqes);
	dev->retired.rx_no_buf += qps_sw_read(&qp->rx_no_buf);
	dev->retired.rx_drops += qps_sw_read(&qp->rx_no_buf) +
				 qps_sw_read(&qp->rx_len_err);
	pthread_mutex_unlock(&dev->lock);
	qp_free(qp);
	return 0;
}
