// SPDX-License-Identifier: MIT
/*
 * Raw-packet QPs: a software send queue in front of the device's TX ring,
 * and a receive queue of posted buffers that the QP's steering rules
 * fill.
 */
#include "xdp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XDP_MAX_SGE 16

static void qp_free(struct qps_xdp_qp *qp)
{
	pthread_mutex_destroy(&qp->rq_lock);
	free(qp->sq);
	free(qp->rq);
	free(qp->wcs);
	free(qp);
}

static int check_attr(const struct qps_qp_init_attr *a)
{
	if (a->qp_type != IBV_QPT_RAW_PACKET)
		return -EOPNOTSUPP;
	if (!a->send_cq || !a->recv_cq || !a->cap.max_send_wr ||
	    a->cap.max_send_wr > QPS_XDP_MAX_WR ||
	    a->cap.max_recv_wr > QPS_XDP_MAX_WR ||
	    a->cap.max_send_sge > XDP_MAX_SGE || a->cap.max_recv_sge > 1)
		return -EINVAL;
	return 0;
}

int qps_xdp_create_qp(struct qps_dev *d, const struct qps_qp_init_attr *attr,
		      struct qps_qp **qp_out)
{
	struct qps_xdp_dev *dev = qps_xdp_dev(d);
	struct qps_xdp_qp *qp;
	int ret;

	if (!attr || !qp_out)
		return -EINVAL;
	ret = check_attr(attr);
	if (ret < 0)
		return ret;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	pthread_mutex_init(&qp->rq_lock, NULL);
	qp->sq_cnt = qps_xdp_pow2(attr->cap.max_send_wr < 2 ? 2 :
				  attr->cap.max_send_wr);
	qp->sq = calloc(qp->sq_cnt, sizeof(*qp->sq));
	if (attr->cap.max_recv_wr) {
		qp->rq_cnt = qps_xdp_pow2(attr->cap.max_recv_wr);
		qp->rq = calloc(qp->rq_cnt, sizeof(*qp->rq));
		qp->wcs = calloc(qp->rq_cnt, sizeof(*qp->wcs));
	}
	if (!qp->sq || (qp->rq_cnt && (!qp->rq || !qp->wcs))) {
		qp_free(qp);
		return -ENOMEM;
	}
	qp->base.dev = d;
	qp->base.qp_type = attr->qp_type;
	qp->base.send_cq = attr->send_cq;
	qp->base.recv_cq = attr->recv_cq;
	qp->base.cap.max_send_wr = qp->sq_cnt;
	qp->base.cap.max_recv_wr = qp->rq_cnt;
	qp->base.cap.max_send_sge = XDP_MAX_SGE;
	qp->base.cap.max_recv_sge = 1;
	qp->base.cap.max_inline_data = dev->info.max_inline;
	qp->sq_sig_all = attr->sq_sig_all;
	pthread_mutex_lock(&dev->lock);
	/* Numbers are only names here; 0 is never one. */
	qp->base.qp_num = ++dev->qp_seq & 0xffffff;
	if (!qp->base.qp_num)
		qp->base.qp_num = ++dev->qp_seq & 0xffffff;
	qp->next = dev->qps;
	dev->qps = qp;
	qps_xdp_cq(attr->send_cq)->users++;
	qps_xdp_cq(attr->recv_cq)->users++;
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
	qps_xdp_cq(q->send_cq)->users--;
	qps_xdp_cq(q->recv_cq)->users--;
	pthread_mutex_lock(&dev->tx_lock);
	qps_xdp_tx_forget(dev, qp);
	dev->retired.wqes += qps_xdp_read(&qp->wqes);
	dev->retired.doorbells += qps_xdp_read(&qp->doorbells);
	dev->retired.tx_cqes += qps_xdp_read(&qp->tx_cqes);
	dev->retired.tx_drops += qps_xdp_read(&qp->tx_drops);
	pthread_mutex_unlock(&dev->tx_lock);
	dev->retired.rx_cqes += qps_xdp_read(&qp->rx_cqes);
	dev->retired.rx_no_buf += qps_xdp_read(&qp->rx_no_buf);
	dev->retired.rx_drops += qps_xdp_read(&qp->rx_no_buf) +
				 qps_xdp_read(&qp->rx_len_err);
	pthread_mutex_unlock(&dev->lock);
	qp_free(qp);
	return 0;
}
