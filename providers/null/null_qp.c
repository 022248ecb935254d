// SPDX-License-Identifier: MIT
/*
 * Queue pairs of the null device. A send WQE is taken the moment the
 * device is told of it: from a WR chain in post_send (one doorbell per
 * chain, verbs semantics), or from the mlx4 ring the core writes on the
 * direct path, when it rings the doorbell or writes BlueFlame. The
 * device follows the ring's owner words as mlx4 hardware does, so a WQE
 * the core holds back is not taken early, and a WQE that asks for a
 * completion (IBV_SEND_SIGNALED, CQ_UPDATE) gets one at once. The data
 * is never read: nothing is transmitted.
 *
 * QP numbers: sequence << 6 | index in dev->qp[] (never 0).
 */
#include "null.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NULL_QPN_IDX_BITS 6
#define NULL_OWNER (1u << 31)
#define NULL_STAMP 0xffffffffu

_Static_assert(QPS_NULL_MAX_QP == 1u << NULL_QPN_IDX_BITS,
	       "the QPN's low bits index dev->qp[]");

static uint8_t *sq_slot(const struct qps_null_qp *qp, uint32_t ind)
{
	return qp->sq_buf + ((size_t)(ind & (qp->wqe_cnt - 1)) << qp->wqe_shift);
}

/* As mlx4_qp_init_sq_ownership: every slot software-owned for the first
 * lap, full size, its later chunks stamped. */
static void sq_reset(struct qps_null_qp *qp)
{
	uint32_t stride = 1u << qp->wqe_shift, i, off;

	memset(qp->sq_buf, 0, (size_t)qp->wqe_cnt << qp->wqe_shift);
	for (i = 0; i < qp->wqe_cnt; i++) {
		uint8_t *wqe = sq_slot(qp, i);
		struct mlx4_wqe_ctrl_seg *ctrl = (void *)wqe;

		ctrl->owner_opcode = htobe32(NULL_OWNER);
		ctrl->fence_size = (uint8_t)(stride / 16);
		for (off = QPS_NULL_WQEBB; off < stride; off += QPS_NULL_WQEBB)
			*(uint32_t *)(void *)(wqe + off) = NULL_STAMP;
	}
	qp->sq_head = 0;
	qp->sq_ci = 0;
	/* Release: pairs with the acquire of sq_tail in post_send and the
	 * core's direct path. */
	__atomic_store_n(&qp->sq_tail, 0, __ATOMIC_RELEASE);
}

static int sq_init(struct qps_null_qp *qp, const struct ibv_qp_cap *cap,
		   uint32_t max_inline)
{
	uint32_t stride = 1u << QPS_NULL_WQE_SHIFT;
	uint32_t max_sge = (stride - sizeof(struct mlx4_wqe_ctrl_seg)) /
			   sizeof(struct mlx4_wqe_data_seg);

	if (cap->max_send_wr > QPS_NULL_MAX_WR ||
	    cap->max_inline_data > max_inline || cap->max_send_sge > max_sge)
		return -EINVAL;
	qp->wqe_shift = QPS_NULL_WQE_SHIFT;
	qp->spare = (2048u >> qp->wqe_shift) + 1;
	qp->wqe_cnt = qps_null_roundup_pow2((cap->max_send_wr ?
					     cap->max_send_wr : 1) + qp->spare);
	qp->max_post = qp->wqe_cnt - qp->spare;
	qp->max_inline = max_inline;
	qp->sq_buf = aligned_alloc(4096, (size_t)qp->wqe_cnt << qp->wqe_shift);
	qp->wrid = calloc(qp->wqe_cnt, sizeof(*qp->wrid));
	if (!qp->sq_buf || !qp->wrid)
		return -ENOMEM;
	sq_reset(qp);
	qp->doorbell_qpn = htobe32(qp->base.qp_num << 8);
	qp->base.cap.max_send_wr = qp->max_post;
	qp->base.cap.max_send_sge = max_sge;
	qp->base.cap.max_inline_data = max_inline;
	return 0;
}

static int rq_init(struct qps_null_qp *qp, const struct ibv_qp_cap *cap)
{
	if (cap->max_recv_wr > QPS_NULL_MAX_WR || cap->max_recv_sge > 1)
		return -EINVAL;
	qp->rq_cnt = qps_null_roundup_pow2(cap->max_recv_wr);
	qp->rq = calloc(qp->rq_cnt, sizeof(*qp->rq));
	if (!qp->rq)
		return -ENOMEM;
	qp->has_rq = true;
	qp->base.cap.max_recv_wr = qp->rq_cnt;
	qp->base.cap.max_recv_sge = 1;
	return 0;
}

static void qp_free(struct qps_null_qp *qp)
{
	free(qp->sq_buf);
	free(qp->wrid);
	free(qp->rq);
	pthread_spin_destroy(&qp->lock);
	pthread_spin_destroy(&qp->rq_lock);
	free(qp);
}

static bool cq_of(const struct qps_null_dev *dev, const struct qps_cq *cq)
{
	return cq && cq->dev == &dev->base;
}

int qps_null_create_qp(struct qps_dev *d, const struct qps_qp_init_attr *attr,
		       struct qps_qp **qp_out)
{
	struct qps_null_dev *dev = qps_null_dev(d);
	struct qps_dev_info info;
	struct qps_null_qp *qp;
	unsigned int idx;
	int ret;

	if (!attr || !qp_out)
		return -EINVAL;
	if (attr->qp_type != IBV_QPT_RAW_PACKET)
		return -EOPNOTSUPP;
	if (!cq_of(dev, attr->send_cq) ||
	    (attr->cap.max_recv_wr && !cq_of(dev, attr->recv_cq)))
		return -EINVAL;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	pthread_spin_init(&qp->lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	qp->base.dev = d;
	qp->base.qp_type = attr->qp_type;
	qp->base.send_cq = attr->send_cq;
	qp->base.recv_cq = attr->recv_cq;
	qp->sq_sig_all = attr->sq_sig_all;
	d->ops->query(d, &info);

	pthread_mutex_lock(&dev->lock);
	for (idx = 0; idx < QPS_NULL_MAX_QP && dev->qp[idx]; idx++)
		;
	ret = -ENOMEM;
	if (idx == QPS_NULL_MAX_QP)
		goto err;
	qp->idx = idx;
	dev->qp_seq = (dev->qp_seq + 1) & 0x3ffff;
	if (!dev->qp_seq)
		dev->qp_seq = 1;
	qp->base.qp_num = dev->qp_seq << NULL_QPN_IDX_BITS | idx;
	ret = sq_init(qp, &attr->cap, info.max_inline);
	if (!ret && attr->cap.max_recv_wr)
		ret = rq_init(qp, &attr->cap);
	if (ret)
		goto err;
	qps_null_cq(attr->send_cq)->users++;
	if (attr->recv_cq)
		qps_null_cq(attr->recv_cq)->users++;
	if (qp->has_rq)
		__atomic_store_n(&qps_null_cq(attr->recv_cq)->rx_users,
				 qps_null_cq(attr->recv_cq)->rx_users + 1,
				 __ATOMIC_RELAXED);
	dev->qp[idx] = qp;
	pthread_mutex_unlock(&dev->lock);
	*qp_out = &qp->base;
	return 0;
err:
	pthread_mutex_unlock(&dev->lock);
	qp_free(qp);
	return ret;
}

static void stats_retire(struct qps_null_qp_stats *sum,
			 const struct qps_null_qp_stats *s)
{
	sum->wqes += s->wqes;
	sum->doorbells += s->doorbells;
	sum->bf_writes += s->bf_writes;
	sum->tx_cqes += s->tx_cqes;
	sum->tx_drops += s->tx_drops;
	sum->bad_writes += s->bad_writes;
	sum->rx_cqes += s->rx_cqes;
	sum->rx_no_buf += s->rx_no_buf;
}

int qps_null_destroy_qp(struct qps_qp *q)
{
	struct qps_null_qp *qp = qps_null_qp(q);
	struct qps_null_dev *dev = qps_null_dev(q->dev);

	/* The send CQ's lock before the device's (null.h). */
	qps_null_cq_clean(qps_null_cq(q->send_cq), qp);
	pthread_mutex_lock(&dev->lock);
	if (qp->nflows) {
		pthread_mutex_unlock(&dev->lock);
		return -EBUSY;
	}
	dev->qp[qp->idx] = NULL;
	qps_null_cq(q->send_cq)->users--;
	if (q->recv_cq)
		qps_null_cq(q->recv_cq)->users--;
	if (qp->has_rq)
		__atomic_store_n(&qps_null_cq(q->recv_cq)->rx_users,
				 qps_null_cq(q->recv_cq)->rx_users - 1,
				 __ATOMIC_RELAXED);
	stats_retire(&dev->retired, &qp->st);
	pthread_mutex_unlock(&dev->lock);
	/* The generator picks its QP under the receive CQ's lock and the
	 * device's: once both were free of us, it no longer holds us. */
	if (q->recv_cq) {
		pthread_spin_lock(&qps_null_cq(q->recv_cq)->lock);
		pthread_spin_unlock(&qps_null_cq(q->recv_cq)->lock);
	}
	qp_free(qp);
	return 0;
}

void qps_null_sq_completed(struct qps_null_qp *qp, uint32_t idx)
{
	/* Release: pairs with the acquire of sq_tail in post_send and the
	 * core's direct path: these slots may be rewritten now. */
	__atomic_store_n(&qp->sq_tail, idx + 1, __ATOMIC_RELEASE);
}

static void complete_locked(struct qps_null_qp *qp, struct qps_null_cq *cq,
			    uint64_t wr_id, uint32_t idx, uint32_t len,
			    enum ibv_wc_status status)
{
	struct qps_null_cqe e = {
		.wr_id = wr_id,
		.qp = qp,
		.idx = idx,
		.byte_len = len,
		.status = (uint8_t)status,
		.opcode = IBV_WC_SEND,
	};

	qps_null_cq_push_locked(cq, &e);
	qps_null_count(&qp->st.tx_cqes, 1);
}

/* What a device checks of a send WR before taking it; @len_out: its
 * bytes. A frame longer than the port's is taken and fails. */
static int check_wr(const struct qps_null_qp *qp, const struct ibv_send_wr *wr,
		    uint64_t *len_out)
{
	uint64_t total = 0;
	int i;

	if (wr->opcode != IBV_WR_SEND)
		return -EINVAL;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->base.cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if ((wr->send_flags & IBV_SEND_INLINE) && total > qp->max_inline)
		return -ENOMEM;	/* as libmlx4 */
	*len_out = total;
	return 0;
}

int qps_null_post_send(struct qps_qp *q, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad_wr)
{
	struct qps_null_qp *qp = qps_null_qp(q);
	struct qps_null_cq *cq = qps_null_cq(q->send_cq);
	unsigned int nreq = 0;
	int ret = 0;

	pthread_spin_lock(&qp->lock);
	pthread_spin_lock(&cq->lock);
	for (; wr; wr = wr->next, nreq++) {
		/* Acquire: pairs with poll_cq's release of sq_tail. */
		uint32_t tail = __atomic_load_n(&qp->sq_tail, __ATOMIC_ACQUIRE);
		uint64_t len;

		if (qp->sq_head - tail >= qp->max_post) {
			ret = -ENOMEM;
			break;
		}
		ret = check_wr(qp, wr, &len);
		if (ret)
			break;
		qps_null_count(&qp->st.wqes, 1);
		if (len > QPS_NULL_ETH_HLEN + QPS_NULL_MTU) {
			/* An error completes whether signalled or not. */
			qps_null_count(&qp->st.tx_drops, 1);
			complete_locked(qp, cq, wr->wr_id, qp->sq_head, 0,
					IBV_WC_LOC_LEN_ERR);
		} else if (qp->sq_sig_all ||
			   (wr->send_flags & IBV_SEND_SIGNALED)) {
			complete_locked(qp, cq, wr->wr_id, qp->sq_head,
					(uint32_t)len, IBV_WC_SUCCESS);
		}
		qp->sq_head++;
	}
	pthread_spin_unlock(&cq->lock);
	/* One doorbell for the chain, even when it stopped early. */
	if (nreq)
		qps_null_count(&qp->st.doorbells, 1);
	pthread_spin_unlock(&qp->lock);
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}

int qps_null_post_recv(struct qps_qp *q, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr)
{
	struct qps_null_qp *qp = qps_null_qp(q);
	struct qps_null_rq_ent *rq = qp->rq;
	uint32_t cnt = qp->rq_cnt, head, tail;
	int ret = 0;

	pthread_spin_lock(&qp->rq_lock);
	head = qp->rq_head;
	/* Acquire: pairs with the generator's release of rq_tail; the
	 * slots below it have been read. Taken again only when the ring
	 * looks full, which is when the generator may have moved it. */
	tail = __atomic_load_n(&qp->rq_tail, __ATOMIC_ACQUIRE);
	for (; wr; wr = wr->next) {
		const struct ibv_sge *sg = wr->sg_list;
		struct qps_null_rq_ent *e;

		if (!qp->has_rq || wr->num_sge != 1 || !sg) {
			ret = -EINVAL;
			break;
		}
		if (head - tail >= cnt &&
		    head - (tail = __atomic_load_n(&qp->rq_tail,
						   __ATOMIC_ACQUIRE)) >= cnt) {
			ret = -ENOMEM;
			break;
		}
		e = &rq[head & (cnt - 1)];
		*e = (struct qps_null_rq_ent){
			.wr_id = wr->wr_id,
			.addr = (uintptr_t)sg->addr,
			.len = sg->length,
		};
		head++;
	}
	/* Release: pairs with the generator's acquire of rq_head; the
	 * entries of the whole chain are written. */
	__atomic_store_n(&qp->rq_head, head, __ATOMIC_RELEASE);
	pthread_spin_unlock(&qp->rq_lock);
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}

/*
 * Take every WQE the core handed over: those whose owner bit matches the
 * lap of their index, in order, stopping at the first that is still the
 * core's. Under qp->lock.
 */
static void sq_consume_locked(struct qps_null_qp *qp)
{
	struct qps_null_cq *cq = qps_null_cq(qp->base.send_cq);
	uint32_t stride = 1u << qp->wqe_shift, n;

	pthread_spin_lock(&cq->lock);
	for (n = 0; n < qp->wqe_cnt; n++) {
		uint32_t ind = qp->sq_ci;
		struct mlx4_wqe_ctrl_seg *ctrl = (void *)sq_slot(qp, ind);
		/* Acquire: pairs with the core's release of owner_opcode;
		 * the WQE's segments and wr_id are visible. */
		uint32_t own = be32toh(__atomic_load_n(&ctrl->owner_opcode,
						       __ATOMIC_ACQUIRE));
		uint32_t size = (uint32_t)(ctrl->fence_size & 0x3f) * 16;

		if (!!(own & NULL_OWNER) != !!(ind & qp->wqe_cnt))
			break;
		qps_null_count(&qp->st.wqes, 1);
		if ((own & 0x1f) != MLX4_OPCODE_SEND || size < 32 ||
		    size > stride) {
			qps_null_count(&qp->st.tx_drops, 1);
			complete_locked(qp, cq, qp->wrid[ind & (qp->wqe_cnt - 1)],
					ind, 0, IBV_WC_LOC_QP_OP_ERR);
		} else if (qp->sq_sig_all ||
			   (ctrl->srcrb_flags &
			    htobe32(MLX4_WQE_CTRL_CQ_UPDATE))) {
			complete_locked(qp, cq, qp->wrid[ind & (qp->wqe_cnt - 1)],
					ind, 0, IBV_WC_SUCCESS);
		}
		qp->sq_ci = ind + 1;
	}
	pthread_spin_unlock(&cq->lock);
}

void qps_null_db_write(struct qps_qp *q, uint32_t be_val)
{
	struct qps_null_qp *qp = qps_null_qp(q);

	pthread_spin_lock(&qp->lock);
	if (be_val != qp->doorbell_qpn) {
		qps_null_count(&qp->st.bad_writes, 1);
	} else {
		qps_null_count(&qp->st.doorbells, 1);
		sq_consume_locked(qp);
	}
	pthread_spin_unlock(&qp->lock);
}

/*
 * BlueFlame: the last WQE of the burst arrives in one half of the
 * register (the device context's, provider.h); the ones before it are in
 * the ring. The register image must name this QP and the ring's last
 * handed-over WQE, else the write is refused and counted.
 */
void qps_null_bf_copy(struct qps_qp *q, void *dst, const void *src,
		      size_t len)
{
	struct qps_null_qp *qp = qps_null_qp(q);
	const uint8_t *reg = qps_null_dev(q->dev)->bf_reg;
	const struct mlx4_wqe_ctrl_seg *ctrl = dst;
	uint32_t ind;

	pthread_spin_lock(&qp->lock);
	if (((const uint8_t *)dst != reg &&
	     (const uint8_t *)dst != reg + QPS_NULL_BF_SIZE) || !src ||
	    !len || len > QPS_NULL_BF_SIZE || len % QPS_NULL_WQEBB) {
		qps_null_count(&qp->st.bad_writes, 1);
		goto out;
	}
	memcpy(dst, src, len);
	ind = (be32toh(ctrl->owner_opcode) >> 8) & 0xffff;
	if ((be32toh(ctrl->bf_qpn) >> 8) != q->qp_num) {
		qps_null_count(&qp->st.bad_writes, 1);
		goto out;
	}
	qps_null_count(&qp->st.bf_writes, 1);
	sq_consume_locked(qp);
	if (ind != ((qp->sq_ci - 1) & 0xffff))
		qps_null_count(&qp->st.bad_writes, 1);
out:
	pthread_spin_unlock(&qp->lock);
}

int qps_null_mlx4_sq(struct qps_qp *q, struct qps_mlx4_sq *out)
{
	struct qps_null_qp *qp = qps_null_qp(q);
	struct qps_null_dev *dev = qps_null_dev(q->dev);

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
	out->db_write = qps_null_db_write;
	out->bf_reg = dev->bf_reg;
	out->bf_buf_size = QPS_NULL_BF_SIZE;
	out->bf_state = &dev->bf;
	out->bf_copy = qps_null_bf_copy;
	return 0;
}
