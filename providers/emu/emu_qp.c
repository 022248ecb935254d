// SPDX-License-Identifier: MIT
/*
 * Queue pairs: a private send queue (emu_sq.c) and, when asked for, a
 * receive queue in the port's shared area (emu_rq.c).
 *
 * QP numbers are unique on the wire while the QP lives:
 * (port + 1) << 16 | sequence << 6 | index in dev->qp[].
 */
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EMU_QPN_IDX_BITS 6

struct qps_emu_qp *qps_emu_qp_by_qpn(struct qps_emu_dev *dev, uint32_t qpn)
{
	struct qps_emu_qp *qp;

	/* Acquire: pairs with the release store in qps_emu_create_qp(). */
	qp = __atomic_load_n(&dev->qp[qpn & (QPS_EMU_MAX_QP - 1)],
			     __ATOMIC_ACQUIRE);
	if (qp && qp->base.qp_num == qpn)
		return qp;
	return NULL;
}

static bool cq_of(struct qps_emu_dev *dev, struct qps_cq *cq)
{
	return cq && cq->dev == &dev->base;
}

/* Turn the CQEs @qp left in @cq into no-ops (qpn 0), as libmlx4 cleans a
 * CQ on destroy and on RESET: poll_cq then skips them instead of calling
 * them corrupt. Holds rx_lock (no producer) and the poll lock (no
 * consumer). */
void qps_emu_cq_clean(struct qps_emu_dev *dev, struct qps_emu_cq *cq,
		      uint32_t qpn)
{
	struct qps_emu_shm_cq *scq = &dev->sp->cq[cq->slot];

	if (!qps_emu_owner(dev))
		return;
	pthread_mutex_lock(&cq->poll_lock);
	if (qps_emu_lock(&dev->sp->rx_lock) >= 0) {
		uint32_t i, prod = scq->prod;

		for (i = cq->cons; i != prod && i - cq->cons < cq->cqe_cnt;
		     i++) {
			struct mlx4_cqe *cqe = &cq->ring[i & (cq->cqe_cnt - 1)];

			if ((be32toh(cqe->vlan_my_qpn) & MLX4_CQE_QPN_MASK) ==
			    qpn)
				cqe->vlan_my_qpn = 0;
		}
		qps_emu_unlock(&dev->sp->rx_lock);
	}
	pthread_mutex_unlock(&cq->poll_lock);
}

int qps_emu_create_qp(struct qps_dev *d, const struct qps_qp_init_attr *attr,
		      struct qps_qp **qp_out)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	struct qps_emu_qp *qp;
	unsigned int idx;
	void *mem;
	int r;

	if (!attr || !qp_out)
		return -EINVAL;
	if (attr->qp_type != IBV_QPT_RAW_PACKET &&
	    attr->qp_type != IBV_QPT_UD)
		return -EOPNOTSUPP;
	if (!cq_of(dev, attr->send_cq) ||
	    (attr->cap.max_recv_wr && !cq_of(dev, attr->recv_cq)) ||
	    (attr->recv_cq && !cq_of(dev, attr->recv_cq)))
		return -EINVAL;
	if (posix_memalign(&mem, 64, sizeof(*qp)))
		return -ENOMEM;
	qp = mem;
	memset(qp, 0, sizeof(*qp));
	pthread_mutex_init(&qp->sq_lock, NULL);
	pthread_mutex_init(&qp->eng_lock, NULL);
	pthread_mutex_init(&qp->rq_lock, NULL);
	qp->base.dev = d;
	qp->base.qp_type = attr->qp_type;
	qp->base.send_cq = attr->send_cq;
	qp->base.recv_cq = attr->recv_cq;
	qp->sq_sig_all = attr->sq_sig_all;
	/* UD starts in RESET (verbs); raw packet in RTS, ready for the
	 * core, which never modifies it. */
	qp->ud = attr->qp_type == IBV_QPT_UD;
	qp->state = qp->ud ? IBV_QPS_RESET : IBV_QPS_RTS;

	pthread_mutex_lock(&dev->lock);
	for (idx = 0; idx < QPS_EMU_MAX_QP && dev->qp[idx]; idx++)
		;
	r = -ENOMEM;
	if (idx == QPS_EMU_MAX_QP)
		goto err_unlock;
	qp->idx = idx;
	dev->qp_seq++;
	qp->base.qp_num = ((dev->port + 1) << 16) |
			  ((dev->qp_seq & 0x3ff) << EMU_QPN_IDX_BITS) | idx;
	r = qps_emu_sq_init(qp, &attr->cap);
	if (r)
		goto err_unlock;
	if (attr->cap.max_recv_wr) {
		r = qps_emu_rq_init(qp, &attr->cap);
		if (r)
			goto err_sq;
	}
	qps_emu_cq(attr->send_cq)->users++;
	if (attr->recv_cq)
		qps_emu_cq(attr->recv_cq)->users++;
	/* Release: pairs with the acquire in qps_emu_qp_by_qpn(). */
	__atomic_store_n(&dev->qp[idx], qp, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&dev->lock);
	*qp_out = &qp->base;
	return 0;

err_sq:
	qps_emu_sq_fini(qp);
err_unlock:
	pthread_mutex_unlock(&dev->lock);
	free(qp);
	return r;
}

int qps_emu_destroy_qp(struct qps_qp *q)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);
	struct qps_emu_dev *dev = qps_emu_dev(q->dev);
	struct qps_emu_qp_stats *s = &dev->retired;

	pthread_mutex_lock(&dev->lock);
	if (qp->nflows) {
		pthread_mutex_unlock(&dev->lock);
		return -EBUSY;
	}
	__atomic_store_n(&dev->qp[qp->idx], NULL, __ATOMIC_RELAXED);
	qps_emu_ud_detach_all(qp);
	if (qp->has_rq)
		qps_emu_rq_fini(qp);
	qps_emu_cq_clean(dev, qps_emu_cq(q->send_cq), q->qp_num);
	qps_emu_cq(q->send_cq)->users--;
	if (q->recv_cq) {
		if (q->recv_cq != q->send_cq)
			qps_emu_cq_clean(dev, qps_emu_cq(q->recv_cq),
					 q->qp_num);
		qps_emu_cq(q->recv_cq)->users--;
	}
	s->wqes += qp->st.wqes;
	s->doorbells += qp->st.doorbells;
	s->bf_writes += qp->st.bf_writes;
	s->tx_cqes += qp->st.tx_cqes;
	s->tx_drops += qp->st.tx_drops;
	s->tx_no_dest += qp->st.tx_no_dest;
	s->malformed += qp->st.malformed;
	s->tx_cq_overrun += qp->st.tx_cq_overrun;
	s->bf_bad += qp->st.bf_bad;
	s->db_bad += qp->st.db_bad;
	s->flushed += qp->st.flushed;
	pthread_mutex_unlock(&dev->lock);
	qps_emu_sq_fini(qp);
	pthread_mutex_destroy(&qp->sq_lock);
	pthread_mutex_destroy(&qp->eng_lock);
	pthread_mutex_destroy(&qp->rq_lock);
	free(qp);
	return 0;
}

int qps_emu_mlx4_sq(struct qps_qp *q, struct qps_mlx4_sq *out)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);

	memset(out, 0, sizeof(*out));
	out->buf = qp->sq_buf;
	out->wqe_cnt = qp->wqe_cnt;
	out->wqe_shift = qp->wqe_shift;
	out->spare_wqes = qp->spare;
	out->max_post = qp->max_post;
	out->doorbell_qpn = qp->doorbell_qpn;
	out->wrid = qp->wrid;
	out->head = &qp->sq_head;
	out->tail = &qp->sq_tail;
	out->db_write = qps_emu_db_write;
	out->bf_reg = qps_emu_dev(q->dev)->bf_reg;
	out->bf_buf_size = QPS_EMU_BF_SIZE;
	out->bf_state = &qps_emu_dev(q->dev)->bf;
	out->bf_copy = qps_emu_bf_copy;
	return 0;
}
