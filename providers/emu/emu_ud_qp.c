// SPDX-License-Identifier: MIT
/*
 * QP states and modify_qp, for UD and raw-packet QPs.
 *
 * A UD QP is created in RESET and brought up RESET -> INIT (pkey_index,
 * port, qkey) -> RTR -> RTS (sq_psn); a raw-packet QP is created in RTS
 * (what the core expects) but follows the same machine after a RESET
 * (INIT needs the port only). Which attributes a transition requires or
 * allows follows the IB spec's table, as Linux checks it in
 * ib_modify_qp_is_ok(): a missing required attribute or one not allowed
 * is -EINVAL. SQD and SQE are not modelled (-EOPNOTSUPP).
 *
 * ERR flushes: every send WQE the device owns and every posted receive
 * WQE completes with IBV_WC_WR_FLUSH_ERR, and so does whatever is posted
 * while the QP stays in ERR. RESET empties both queues without
 * completions and removes the QP's CQEs from its CQs (as libmlx4 does).
 *
 * Locks: sq_lock -> rq_lock -> eng_lock (then rx_lock inside), so
 * post_send, post_recv and the engine each see a stable state under
 * their own lock.
 */
#include "emu.h"

#include <errno.h>
#include <string.h>

/* The attribute masks a transition needs / allows (beyond IBV_QP_STATE). */
struct trans {
	bool ok;
	int req, opt;
};

static struct trans transition(const struct qps_emu_qp *qp, uint32_t cur,
			       uint32_t next)
{
	struct trans t = { .ok = false };
	bool ud = qp->ud;

	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		t.ok = true;
		return t;
	}
	switch (cur * 16 + next) {
	case IBV_QPS_RESET * 16 + IBV_QPS_INIT:
		t.ok = true;
		t.req = ud ? IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY :
			     IBV_QP_PORT;
		break;
	case IBV_QPS_INIT * 16 + IBV_QPS_INIT:
		t.ok = true;
		t.opt = ud ? IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY :
			     IBV_QP_PORT;
		break;
	case IBV_QPS_INIT * 16 + IBV_QPS_RTR:
		t.ok = true;
		t.opt = ud ? IBV_QP_PKEY_INDEX | IBV_QP_QKEY : 0;
		break;
	case IBV_QPS_RTR * 16 + IBV_QPS_RTS:
		t.ok = true;
		t.req = ud ? IBV_QP_SQ_PSN : 0;
		t.opt = ud ? IBV_QP_CUR_STATE | IBV_QP_QKEY : 0;
		break;
	case IBV_QPS_RTS * 16 + IBV_QPS_RTS:
		t.ok = true;
		t.opt = ud ? IBV_QP_CUR_STATE | IBV_QP_QKEY : 0;
		break;
	default:
		break;
	}
	return t;
}

uint32_t qps_emu_qp_state(const struct qps_emu_qp *qp)
{
	/* Acquire: pairs with the release in set_state(). */
	return __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
}

static void set_state(struct qps_emu_qp *qp, uint32_t s)
{
	/* Release: pairs with qps_emu_qp_state(); qkey and psn written
	 * before it are seen with it. */
	__atomic_store_n(&qp->state, s, __ATOMIC_RELEASE);
}

static int check_attr(const struct qps_emu_qp *qp, uint32_t cur,
		      const struct ibv_qp_attr *a, int mask, uint32_t *next)
{
	const int known = IBV_QP_STATE | IBV_QP_CUR_STATE |
			  IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY |
			  IBV_QP_SQ_PSN;
	struct trans t;

	*next = (mask & IBV_QP_STATE) ? (uint32_t)a->qp_state : cur;
	if (*next > IBV_QPS_ERR || (mask & ~known))
		return -EINVAL;
	if (*next == IBV_QPS_SQD || *next == IBV_QPS_SQE)
		return -EOPNOTSUPP;
	if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != cur)
		return -EINVAL;
	t = transition(qp, cur, *next);
	if (!t.ok || (mask & t.req) != t.req ||
	    (mask & ~(t.req | t.opt | IBV_QP_STATE)))
		return -EINVAL;
	/* Port 0: this device's port, as the core asks (verbs fills it). */
	if ((mask & IBV_QP_PORT) && a->port_num > 1)
		return -EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return -EINVAL;	/* one P_Key: the default 0xffff */
	return 0;
}

/* Flush the send WQEs the device owns: the engine completes each with
 * WR_FLUSH_ERR while the state is ERR. eng_lock held. */
static void sq_flush(struct qps_emu_qp *qp)
{
	qps_emu_engine_run(qp, qp->wqe_cnt + QPS_EMU_BF_LATCH);
}

static void qp_reset(struct qps_emu_qp *qp)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);

	qps_emu_sq_reset(qp);
	if (qp->has_rq)
		qps_emu_rq_set_state(qp, IBV_QPS_RESET, true);
	qps_emu_cq_clean(dev, qps_emu_cq(qp->base.send_cq), qp->base.qp_num);
	if (qp->base.recv_cq && qp->base.recv_cq != qp->base.send_cq)
		qps_emu_cq_clean(dev, qps_emu_cq(qp->base.recv_cq),
				 qp->base.qp_num);
	qp->qkey = 0;
	qp->psn = 0;
}

int qps_emu_modify_qp(struct qps_qp *q, struct ibv_qp_attr *attr,
		      int attr_mask)
{
	struct qps_emu_qp *qp;
	uint32_t cur, next;
	int r;

	if (!q || !attr)
		return -EINVAL;
	qp = qps_emu_qp(q);
	pthread_mutex_lock(&qp->sq_lock);
	pthread_mutex_lock(&qp->rq_lock);
	pthread_mutex_lock(&qp->eng_lock);
	cur = qp->state;
	r = check_attr(qp, cur, attr, attr_mask, &next);
	if (r)
		goto out;
	if (attr_mask & IBV_QP_QKEY)
		qp->qkey = attr->qkey;
	if (attr_mask & IBV_QP_SQ_PSN)
		qp->psn = attr->sq_psn & 0xffffff;
	if (next == IBV_QPS_RESET) {
		qp_reset(qp);
	} else if (qp->has_rq) {
		/* What delivering peers check: state and Q_Key. */
		qps_emu_rq_set_state(qp, next, false);
	}
	set_state(qp, next);
	if (next == IBV_QPS_ERR) {
		sq_flush(qp);
		if (qp->has_rq)
			qps_emu_rq_flush(qp);
	}
out:
	pthread_mutex_unlock(&qp->eng_lock);
	pthread_mutex_unlock(&qp->rq_lock);
	pthread_mutex_unlock(&qp->sq_lock);
	return r;
}
