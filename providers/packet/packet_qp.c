// SPDX-License-Identifier: MIT
/*
 * Raw-packet QPs: a software send queue in front of a TX ring, and a
 * receive queue of posted buffers (common/sw_rq.c) that the QP's steering
 * rules fill.
 */
#include "packet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PKT_MAX_SGE 16

static void qp_free(struct qps_packet_qp *qp)
{
	qps_packet_tx_close(qp);
	pthread_mutex_destroy(&qp->sq_lock);
	qps_sw_rq_fini(&qp->rq);
	free(qp->sq);
	free(qp);
}

int qps_packet_create_qp(struct qps_dev *d,
			 const struct qps_qp_init_attr *attr,
			 struct qps_qp **qp_out)
{
	struct qps_packet_dev *dev = qps_packet_dev(d);
	struct qps_packet_qp *qp;
	int ret;

	if (!attr || !qp_out)
		return -EINVAL;
	ret = qps_sw_qp_check(attr, QPS_PACKET_MAX_WR, PKT_MAX_SGE);
	if (ret < 0)
		return ret;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->tx_fd = -1;
	pthread_mutex_init(&qp->sq_lock, NULL);
	ret = qps_sw_rq_init(&qp->rq, attr->cap.max_recv_wr);
	qp->sq_cnt = qps_sw_pow2(attr->cap.max_send_wr < 2 ? 2 :
				 attr->cap.max_send_wr);
	qp->sq = calloc(qp->sq_cnt, sizeof(*qp->sq));
	if (!qp->sq || ret < 0) {
		qp_free(qp);
		return -ENOMEM;
	}
	qps_sw_qp_fill(&qp->base, d, attr, qp->sq_cnt, qp->rq.cnt,
		       PKT_MAX_SGE, dev->info.max_inline);
	qp->sq_sig_all = attr->sq_sig_all;
	ret = qps_packet_tx_open(dev, qp);
	if (ret < 0) {
		qp_free(qp);
		return ret;
	}
	pthread_mutex_lock(&dev->lock);
	qps_sw_qp_link(&qp->base, &dev->qp_seq);
	qp->next = dev->qps;
	dev->qps = qp;
	pthread_mutex_unlock(&dev->lock);
	*qp_out = &qp->base;
	return 0;
}

int qps_packet_destroy_qp(struct qps_qp *q)
{
	struct qps_packet_qp *qp = qps_packet_qp(q);
	struct qps_packet_dev *dev = qps_packet_dev(q->dev);
	struct qps_packet_qp **pp;

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
	qps_sw_sq_stats_add(&dev->retired, &qp->sq_stats);
	pthread_mutex_unlock(&dev->lock);
	qp_free(qp);
	return 0;
}
