// SPDX-License-Identifier: MIT
/*
 * Receive queues and delivery into a port.
 *
 * An RQ is a ring of struct mlx4_wqe_data_seg in the port's queue area;
 * each WQE's addr is an offset into the port's buffer pool, because every
 * process maps the wire at its own address. The owner posts (head, the
 * doorbell record); any process that delivers a frame consumes (tail)
 * under the port's rx_lock. wr_ids and lengths stay private to the owner.
 *
 * Delivery trusts nothing it reads from the port: slots, sizes, offsets
 * and indices are checked, and a violation drops the frame and counts
 * rx_corrupt.
 *
 * RoCE v2 frames (UDP 4791 to the port's address or a group) go to the UD
 * QPs (emu_ud_rx.c) before the steering table sees them; everything else
 * is steered. Either way the target QP must be in RTR or RTS.
 */
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EMU_RQ_WQE sizeof(struct mlx4_wqe_data_seg)

int qps_emu_rq_init(struct qps_emu_qp *qp, const struct ibv_qp_cap *cap)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);
	struct qps_emu_shm_rq *srq;
	bool used[QPS_EMU_MAX_RQ] = { false };
	unsigned int slot, i;
	uint64_t off;
	uint32_t cnt;
	int r;

	if (cap->max_recv_wr > QPS_EMU_MAX_WR || cap->max_recv_sge > 1)
		return -EINVAL;
	/* dev->lock held: the slots in use are those of our QPs. */
	for (i = 0; i < QPS_EMU_MAX_QP; i++)
		if (dev->qp[i] && dev->qp[i]->has_rq)
			used[dev->qp[i]->rq_slot] = true;
	for (slot = 0; slot < QPS_EMU_MAX_RQ && used[slot]; slot++)
		;
	if (slot == QPS_EMU_MAX_RQ)
		return -ENOMEM;
	cnt = qps_emu_roundup_pow2(cap->max_recv_wr);
	r = qps_emu_heap_alloc(&dev->qarea_heap, (uint64_t)cnt * EMU_RQ_WQE,
			       64, &off);
	if (r)
		return r;
	qp->rq_wrid = calloc(cnt, sizeof(*qp->rq_wrid));
	qp->rq_len = calloc(cnt, sizeof(*qp->rq_len));
	r = -ENOMEM;
	if (!qp->rq_wrid || !qp->rq_len)
		goto err;
	qp->rq_ring = (void *)(dev->qarea + off);
	memset(qp->rq_ring, 0, (size_t)cnt * EMU_RQ_WQE);
	r = qps_emu_lock(&dev->sp->rx_lock);
	if (r < 0)
		goto err;
	srq = &dev->sp->rq[slot];
	srq->qpn = qp->base.qp_num;
	srq->cq = qps_emu_cq(qp->base.recv_cq)->slot;
	srq->wqe_cnt = cnt;
	srq->ring_off = off;
	srq->head = 0;
	srq->tail = 0;
	srq->cqes = 0;
	srq->no_buf = 0;
	srq->qp_type = qp->base.qp_type;
	srq->qp_state = qp->state;
	srq->qkey = 0;
	srq->state = QPS_EMU_SLOT_ACTIVE;
	qps_emu_unlock(&dev->sp->rx_lock);
	qp->rq_slot = slot;
	qp->rq_off = off;
	qp->rq_cnt = cnt;
	qp->has_rq = true;
	qp->base.cap.max_recv_wr = cnt;
	qp->base.cap.max_recv_sge = 1;
	return 0;
err:
	free(qp->rq_wrid);
	free(qp->rq_len);
	qp->rq_wrid = NULL;
	qp->rq_len = NULL;
	qps_emu_heap_free(&dev->qarea_heap, off, (uint64_t)cnt * EMU_RQ_WQE);
	return r;
}

/* dev->lock held. */
void qps_emu_rq_fini(struct qps_emu_qp *qp)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);

	if (qps_emu_owner(dev) && qps_emu_lock(&dev->sp->rx_lock) >= 0) {
		dev->sp->rq[qp->rq_slot].state = QPS_EMU_SLOT_FREE;
		qps_emu_unlock(&dev->sp->rx_lock);
	}
	qps_emu_heap_free(&dev->qarea_heap, qp->rq_off,
			  (uint64_t)qp->rq_cnt * EMU_RQ_WQE);
	free(qp->rq_wrid);
	free(qp->rq_len);
	qp->rq_wrid = NULL;
	qp->rq_len = NULL;
	qp->has_rq = false;
}

int qps_emu_post_recv(struct qps_qp *q, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);
	struct qps_emu_dev *dev = qps_emu_dev(q->dev);
	uint64_t pool_size = dev->pool_heap.size;
	uint32_t head;
	int r = 0;

	if (!qp->has_rq) {
		if (bad_wr)
			*bad_wr = wr;
		return -EINVAL;
	}
	pthread_mutex_lock(&qp->rq_lock);
	/* As verbs: no receives before INIT (the state is stable under
	 * rq_lock); in ERR they are taken and flushed below. */
	if (qps_emu_qp_state(qp) == IBV_QPS_RESET) {
		pthread_mutex_unlock(&qp->rq_lock);
		if (bad_wr)
			*bad_wr = wr;
		return -EINVAL;
	}
	head = qp->rq_head;
	for (; wr; wr = wr->next) {
		/* Acquire: pairs with poll_cq's release of rq_done; the
		 * slot's wr_id has been consumed. */
		uint32_t done = __atomic_load_n(&qp->rq_done,
						__ATOMIC_ACQUIRE);
		const struct ibv_sge *sge = wr->sg_list;
		uint32_t slot = head & (qp->rq_cnt - 1);
		uint8_t *p;
		uint64_t off;

		if (wr->num_sge != 1 || !sge || !sge->length) {
			r = -EINVAL;
			break;
		}
		p = (uint8_t *)(uintptr_t)sge->addr;
		off = (uint64_t)(p - dev->pool);
		if (p < dev->pool || off >= pool_size ||
		    sge->length > pool_size - off) {
			r = -EINVAL;
			break;
		}
		if (head - done >= qp->rq_cnt) {
			r = -ENOMEM;
			break;
		}
		mlx4dv_set_data_seg(&qp->rq_ring[slot], sge->length, sge->lkey,
				    (uintptr_t)off);
		qp->rq_wrid[slot] = wr->wr_id;
		qp->rq_len[slot] = sge->length;
		head++;
	}
	if (head != qp->rq_head) {
		/* Release: pairs with poll_cq's acquire of rq_head. */
		__atomic_store_n(&qp->rq_head, head, __ATOMIC_RELEASE);
		/* Release: pairs with the acquire of head in port_rx(); the
		 * WQEs are written before peers may consume them. */
		__atomic_store_n(&dev->sp->rq[qp->rq_slot].head, head,
				 __ATOMIC_RELEASE);
		if (qps_emu_qp_state(qp) == IBV_QPS_ERR)
			qps_emu_rq_flush(qp);
	}
	pthread_mutex_unlock(&qp->rq_lock);
	if (r && bad_wr)
		*bad_wr = wr;
	return r;
}

/* The port's MAC filter: own MAC, broadcast, or a joined group. */
static bool l2_accept(const struct qps_emu_shm_port *sp, const uint8_t *dst)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	unsigned int i;

	if (!(dst[0] & 1))
		return !memcmp(dst, sp->mac, 6);
	if (!memcmp(dst, bcast, 6))
		return true;
	for (i = 0; i < QPS_EMU_MAX_MC; i++)
		if (sp->mc[i].refcnt && !memcmp(sp->mc[i].mac, dst, 6))
			return true;
	return false;
}

struct qps_emu_shm_rq *qps_emu_rq_checked(struct qps_emu_shm_port *sp,
					  int slot)
{
	struct qps_emu_shm_rq *srq;
	uint32_t cnt;
	uint64_t off;

	if (slot < 0 || (unsigned int)slot >= QPS_EMU_MAX_RQ)
		return NULL;
	srq = &sp->rq[slot];
	cnt = srq->wqe_cnt;
	off = srq->ring_off;
	if (srq->state != QPS_EMU_SLOT_ACTIVE || !qps_emu_is_pow2(cnt) ||
	    cnt > QPS_EMU_MAX_WR || off % EMU_RQ_WQE ||
	    off > QPS_EMU_QAREA_SIZE ||
	    (uint64_t)cnt * EMU_RQ_WQE > QPS_EMU_QAREA_SIZE - off)
		return NULL;
	return srq;
}

static bool rq_ready(const struct qps_emu_shm_rq *srq)
{
	return srq->qp_state == IBV_QPS_RTR || srq->qp_state == IBV_QPS_RTS;
}

void qps_emu_rq_deliver(struct qps_emu_shm_port *sp, uint8_t *qarea,
			uint8_t *pool, int slot, const struct qps_emu_piece *pc,
			unsigned int npc, struct qps_emu_cqe_info *ci,
			struct qps_emu_rx_result *res)
{
	struct qps_emu_shm_stats *st = &sp->st;
	struct qps_emu_shm_rq *srq;
	struct mlx4_wqe_data_seg ds;
	enum qps_emu_cqe_res cres;
	uint32_t head, tail, blen, len = 0, off, idx;
	uint64_t boff, roff;
	unsigned int i;

	for (i = 0; i < npc; i++)
		len += pc[i].len;
	srq = qps_emu_rq_checked(sp, slot);
	if (!srq)
		goto corrupt;
	if (!rq_ready(srq)) {
		qps_emu_count(&st->rx_qp_state, 1);
		goto drop;
	}
	/* Acquire: pairs with post_recv's release store of head; the WQEs
	 * below it are written. */
	head = __atomic_load_n(&srq->head, __ATOMIC_ACQUIRE);
	tail = srq->tail;
	if (head - tail > srq->wqe_cnt)
		goto corrupt;	/* claims more WQEs than the ring holds */
	if (head == tail) {
		qps_emu_count(&st->rx_no_buf, 1);
		qps_emu_count(&srq->no_buf, 1);
		goto drop;
	}
	cres = qps_emu_cq_room(sp, srq->cq);
	if (cres == QPS_EMU_CQE_FULL) {
		/* Keep the buffer: it is not lost to a CQE nobody sees. */
		qps_emu_count(&st->rx_cq_overrun, 1);
		goto drop;
	}
	if (cres != QPS_EMU_CQE_OK)
		goto corrupt;
	/* Each read once and the slot bounded again: a peer that ignores
	 * rx_lock may rewrite the geometry after qps_emu_rq_checked(). */
	roff = __atomic_load_n(&srq->ring_off, __ATOMIC_RELAXED);
	idx = tail & (__atomic_load_n(&srq->wqe_cnt, __ATOMIC_RELAXED) - 1);
	if (roff > QPS_EMU_QAREA_SIZE ||
	    ((uint64_t)idx + 1) * EMU_RQ_WQE > QPS_EMU_QAREA_SIZE - roff)
		goto corrupt;
	memcpy(&ds, qarea + roff + (uint64_t)idx * EMU_RQ_WQE, sizeof(ds));
	blen = be32toh(ds.byte_count);
	boff = be64toh(ds.addr);
	ci->qpn = srq->qpn;
	ci->wqe_index = (uint16_t)tail;
	if ((blen & MLX4_INLINE_SEG) || boff > QPS_EMU_POOL_SIZE ||
	    blen > QPS_EMU_POOL_SIZE - boff) {
		/* The WQE is consumed with an error, as on the HCA. */
		qps_emu_count(&st->rx_corrupt, 1);
		ci->opcode = MLX4_CQE_OPCODE_ERROR;
		ci->syndrome = MLX4_CQE_SYNDROME_LOCAL_PROT_ERR;
	} else if (len > blen) {
		qps_emu_count(&st->rx_len_err, 1);
		ci->opcode = MLX4_CQE_OPCODE_ERROR;
		ci->syndrome = MLX4_CQE_SYNDROME_LOCAL_LENGTH_ERR;
	} else {
		for (i = 0, off = 0; i < npc; off += pc[i].len, i++)
			memcpy(pool + boff + off, pc[i].p, pc[i].len);
		ci->byte_cnt = len;
	}
	cres = qps_emu_cq_write(sp, qarea, srq->cq, ci);
	if (cres != QPS_EMU_CQE_OK && cres != QPS_EMU_CQE_NOTIFY)
		goto corrupt;
	__atomic_store_n(&srq->tail, tail + 1, __ATOMIC_RELAXED);
	qps_emu_count(&st->rx_cqes, 1);
	qps_emu_count(&srq->cqes, 1);
	if (cres == QPS_EMU_CQE_NOTIFY) {
		res->notify = true;
		res->gen = sp->gen;
	}
	if (ci->opcode == MLX4_CQE_OPCODE_ERROR)
		qps_emu_count(&st->rx_drops, 1);
	return;
corrupt:
	qps_emu_count(&st->rx_corrupt, 1);
drop:
	qps_emu_count(&st->rx_drops, 1);
}

/* Steer, then deliver the frame as it is. rx_lock held. */
static void place(struct qps_emu_shm_port *sp, uint8_t *qarea, uint8_t *pool,
		  const uint8_t *frame, uint32_t len,
		  struct qps_emu_rx_result *res)
{
	struct qps_emu_cqe_info ci = { .opcode = QPS_EMU_RECV_OPCODE_SEND };
	struct qps_emu_piece pc = { .p = frame, .len = len };
	int slot;

	slot = qps_emu_flow_match(sp, frame, len);
	if (slot == -1) {
		qps_emu_count(&sp->st.rx_no_rule, 1);
		qps_emu_count(&sp->st.rx_drops, 1);
		return;
	}
	ci.status = qps_emu_csum_rx(frame, len, &ci.checksum);
	qps_emu_rq_deliver(sp, qarea, pool, slot, &pc, 1, &ci, res);
}

bool qps_emu_port_rx(struct qps_emu_wire *w, unsigned int port,
		     const uint8_t *frame, uint32_t len,
		     struct qps_emu_rx_result *res)
{
	struct qps_emu_shm_port *sp;
	int r;

	res->notify = false;
	if (port >= QPS_EMU_MAX_PORTS)
		return false;
	sp = qps_emu_port_ctl(w, port);
	r = qps_emu_lock(&sp->rx_lock);
	if (r < 0)
		return false;
	if (r == 1)
		qps_emu_count(&sp->st.lock_recovered, 1);
	if (sp->state != QPS_EMU_SLOT_ACTIVE || !l2_accept(sp, frame)) {
		qps_emu_unlock(&sp->rx_lock);
		return false;
	}
	qps_emu_count(&sp->st.rx_frames, 1);
	if (!qps_emu_ud_rx(sp, qps_emu_port_qarea(w, port),
			   qps_emu_port_pool(w, port), frame, len, res))
		place(sp, qps_emu_port_qarea(w, port),
		      qps_emu_port_pool(w, port), frame, len, res);
	qps_emu_unlock(&sp->rx_lock);
	return true;
}

void qps_emu_rq_set_state(struct qps_emu_qp *qp, uint32_t state, bool empty)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);
	struct qps_emu_shm_rq *srq = &dev->sp->rq[qp->rq_slot];

	if (!qps_emu_owner(dev) || qps_emu_lock(&dev->sp->rx_lock) < 0)
		return;
	srq->qp_state = state;
	srq->qkey = qp->qkey;
	if (empty) {
		/* RESET: posted buffers are forgotten, without completions;
		 * rq_lock held, so no post_recv races with this. */
		srq->head = 0;
		srq->tail = 0;
		qp->rq_head = 0;
		/* Release: pairs with post_recv's acquire of rq_done. */
		__atomic_store_n(&qp->rq_done, 0, __ATOMIC_RELEASE);
	}
	qps_emu_unlock(&dev->sp->rx_lock);
}

void qps_emu_rq_flush(struct qps_emu_qp *qp)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);
	struct qps_emu_shm_port *sp = dev->sp;
	struct qps_emu_shm_rq *srq = &sp->rq[qp->rq_slot];
	struct qps_emu_cqe_info ci = {
		.qpn = qp->base.qp_num,
		.opcode = MLX4_CQE_OPCODE_ERROR,
		.syndrome = MLX4_CQE_SYNDROME_WR_FLUSH_ERR,
	};
	bool notify = false;
	uint32_t tail;

	if (qps_emu_lock(&sp->rx_lock) < 0)
		return;
	/* rq_lock held: our own head is the truth, not the shared copy. */
	for (tail = srq->tail; tail != qp->rq_head; tail++) {
		enum qps_emu_cqe_res res;

		if (qp->rq_head - tail > qp->rq_cnt)
			break;	/* the shared tail was scribbled on */
		ci.wqe_index = (uint16_t)tail;
		res = qps_emu_cq_write(sp, dev->qarea,
				       qps_emu_cq(qp->base.recv_cq)->slot, &ci);
		if (res != QPS_EMU_CQE_OK && res != QPS_EMU_CQE_NOTIFY) {
			qps_emu_count(&sp->st.rx_cq_overrun, 1);
			break;
		}
		notify |= res == QPS_EMU_CQE_NOTIFY;
		qps_emu_count(&qp->rq_flushed, 1);
		qps_emu_count(&srq->cqes, 1);
	}
	srq->tail = tail;
	qps_emu_unlock(&sp->rx_lock);
	if (notify)
		qps_emu_notify(dev, dev->port, dev->gen);
}

uint32_t *qps_emu_test_rq_head(struct qps_qp *q)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);

	return qp->has_rq ?
	       &qps_emu_dev(q->dev)->sp->rq[qp->rq_slot].head : NULL;
}

struct qps_emu_shm_rq *qps_emu_test_shm_rq(struct qps_qp *q)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);

	return qp->has_rq ? &qps_emu_dev(q->dev)->sp->rq[qp->rq_slot] : NULL;
}
