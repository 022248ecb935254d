// SPDX-License-Identifier: MIT
/*
 * PD-scoped objects, passed through to libibverbs: MRs, CQs on the
 * device's completion channel, QPs. A raw-packet QP has no addressing and
 * is brought to RTS here; a UD QP is created in RESET and brought up by
 * the core through modify_qp (provider.h). The wrappers count what they
 * see for counters(); poll_cq hands the direct path's send completions to
 * verbs_mlx4.c, whose wr_ids libmlx4 does not know.
 */
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

int qps_verbs_reg_mr(struct qps_dev *dev, void *addr, size_t len,
		     struct qps_mr **mr_out)
{
	struct qps_verbs_mr *vm;

	if (!addr || !len || !mr_out)
		return -EINVAL;
	vm = calloc(1, sizeof(*vm));
	if (!vm)
		return -ENOMEM;
	vm->mr = ibv_reg_mr(qps_verbs_dev(dev)->pd, addr, len,
			    IBV_ACCESS_LOCAL_WRITE);
	if (!vm->mr) {
		int ret = qps_verbs_errno();

		free(vm);
		return ret;
	}
	vm->base.dev = dev;
	vm->base.addr = addr;
	vm->base.length = len;
	vm->base.lkey = vm->mr->lkey;
	*mr_out = &vm->base;
	return 0;
}

int qps_verbs_dereg_mr(struct qps_mr *mr)
{
	struct qps_verbs_mr *vm = qps_verbs_container_of(mr,
							 struct qps_verbs_mr,
							 base);
	int ret = ibv_dereg_mr(vm->mr);

	if (ret)
		return qps_verbs_ret(ret);
	free(vm);
	return 0;
}

int qps_verbs_create_cq(struct qps_dev *dev, int cqe, struct qps_cq **cq_out)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	struct qps_verbs_cq *vc;

	if (cqe <= 0 || !cq_out)
		return -EINVAL;
	vc = calloc(1, sizeof(*vc));
	if (!vc)
		return -ENOMEM;
	vc->cq = qps_verbs_ts_create_cq(vd, vc, cqe);
	if (!vc->cq)
		vc->cq = ibv_create_cq(vd->ctx, cqe, vc, vd->chan, 0);
	if (!vc->cq) {
		int ret = qps_verbs_errno();

		free(vc);
		return ret;
	}
	vc->base.dev = dev;
	vc->base.cqe = vc->cq->cqe;
	*cq_out = &vc->base;
	return 0;
}

int qps_verbs_destroy_cq(struct qps_cq *cq)
{
	struct qps_verbs_cq *vc = qps_verbs_cq(cq);
	int ret = ibv_destroy_cq(vc->cq);

	if (ret)
		return qps_verbs_ret(ret);
	free(vc);
	return 0;
}

/* A CQ that serves both directions: the opcode tells, on success; a
 * failed completion's opcode is undefined and it counts as a send's. */
static void count_mixed(struct qps_verbs_dev *vd, const struct ibv_wc *wc,
			int n)
{
	uint64_t rx = 0;
	int i;

	for (i = 0; i < n; i++)
		rx += wc[i].status == IBV_WC_SUCCESS &&
		      (wc[i].opcode & IBV_WC_RECV);
	if (rx)
		qps_verbs_count(&vd->rx_cqes, rx);
	if ((uint64_t)n > rx)
		qps_verbs_count(&vd->tx_cqes, (uint64_t)n - rx);
}

int qps_verbs_poll_cq(struct qps_cq *cq, int num, struct ibv_wc *wc)
{
	struct qps_verbs_cq *vc = qps_verbs_cq(cq);
	int n;

	if (num < 0 || (num && !wc))
		return -EINVAL;
	n = ibv_poll_cq(vc->cq, num, wc);
	/* A negative return carries no errno: the CQ is broken. */
	if (n < 0)
		return -EIO;
	qps_verbs_cq_polled(vc, wc, n);
	return n;
}

void qps_verbs_cq_polled(struct qps_verbs_cq *vc, struct ibv_wc *wc, int n)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(vc->base.dev);

	if (n && vc->direct)
		qps_verbs_mlx4_complete(vc->direct, wc, n);
	if (n && vc->is_send != vc->is_recv)
		qps_verbs_count(vc->is_send ? &vd->tx_cqes : &vd->rx_cqes,
				(uint64_t)n);
	else if (n)
		count_mixed(vd, wc, n);
}

int qps_verbs_req_notify_cq(struct qps_cq *cq)
{
	return qps_verbs_ret(ibv_req_notify_cq(qps_verbs_cq(cq)->cq, 0));
}

int qps_verbs_get_event_fd(struct qps_dev *dev)
{
	return qps_verbs_dev(dev)->chan->fd;
}

/* Every CQ is created on the device's one completion channel. */
int qps_verbs_get_cq_event_fd(struct qps_cq *cq)
{
	return qps_verbs_get_event_fd(cq->dev);
}

/* Every event is acknowledged at once: ibv_destroy_cq waits for the
 * unacknowledged ones, and the core never needs them later. The loop ends
 * on a failed ibv_get_cq_event, whose errno says why. */
int qps_verbs_ack_events(struct qps_dev *dev)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	struct ibv_cq *cq;
	void *cq_ctx;
	int n = 0;

	while (!ibv_get_cq_event(vd->chan, &cq, &cq_ctx)) {
		ibv_ack_cq_events(cq, 1);
		n++;
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && !n)
		return qps_verbs_errno();
	return n;
}

static int raw_modify(const struct qps_verbs_dev *vd, struct ibv_qp *qp,
		      enum ibv_qp_state state, int mask)
{
	struct ibv_qp_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = state;
	qa.port_num = vd->port;
	return qps_verbs_ret(ibv_modify_qp(qp, &qa, IBV_QP_STATE | mask));
}

static void explain_create_qp(const struct qps_verbs_dev *vd,
			      enum ibv_qp_type type, int ret)
{
	if (type == IBV_QPT_RAW_PACKET && ret == -EPERM)
		qps_verbs_log("creating a raw packet QP on %s needs "
			      "CAP_NET_RAW (run as root or setcap "
			      "cap_net_raw+ep on the program)", vd->info.name);
	else if (type == IBV_QPT_RAW_PACKET && ret == -EINVAL &&
		 !strncmp(vd->info.name, "mlx4", 4))
		qps_verbs_log("%s refused a raw packet QP: mlx4 creates them "
			      "only under device-managed flow steering (load "
			      "mlx4_core with log_num_mgm_entry_size=-1)",
			      vd->info.name);
	else if (ret == -ENOMEM)
		qps_verbs_log("%s: out of QP resources (max_qp_wr %u; lower "
			      "tx_depth/rx_depth or the number of send queues)",
			      vd->info.name, vd->info.max_qp_wr);
}

int qps_verbs_create_qp(struct qps_dev *dev,
			const struct qps_qp_init_attr *attr,
			struct qps_qp **qp_out)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	struct ibv_qp_init_attr ia;
	struct qps_verbs_qp *vq;
	int ret;

	if (!attr || !qp_out || !attr->send_cq || !attr->recv_cq)
		return -EINVAL;
	if (attr->qp_type != IBV_QPT_RAW_PACKET &&
	    attr->qp_type != IBV_QPT_UD)
		return -EOPNOTSUPP;
	if (attr->qp_type == IBV_QPT_UD && !(vd->info.caps & QPS_DEV_CAP_UD))
		return -EOPNOTSUPP;
	vq = calloc(1, sizeof(*vq));
	if (!vq)
		return -ENOMEM;

	memset(&ia, 0, sizeof(ia));
	ia.qp_context = vq;
	ia.send_cq = qps_verbs_cq(attr->send_cq)->cq;
	ia.recv_cq = qps_verbs_cq(attr->recv_cq)->cq;
	ia.cap = attr->cap;
	ia.qp_type = attr->qp_type;
	ia.sq_sig_all = attr->sq_sig_all;
	vq->qp = ibv_create_qp(vd->pd, &ia);
	if (!vq->qp) {
		ret = qps_verbs_errno();
		explain_create_qp(vd, attr->qp_type, ret);
		free(vq);
		return ret;
	}

	if (attr->qp_type == IBV_QPT_RAW_PACKET) {
		/* No addressing: port only, then RTR, RTS. */
		ret = raw_modify(vd, vq->qp, IBV_QPS_INIT, IBV_QP_PORT);
		if (!ret)
			ret = raw_modify(vd, vq->qp, IBV_QPS_RTR, 0);
		if (!ret)
			ret = raw_modify(vd, vq->qp, IBV_QPS_RTS, 0);
		if (ret) {
			ibv_destroy_qp(vq->qp);
			free(vq);
			return ret;
		}
	}

	qps_verbs_cq(attr->send_cq)->is_send = true;
	if (ia.cap.max_recv_wr)
		qps_verbs_cq(attr->recv_cq)->is_recv = true;
	vq->base.dev = dev;
	vq->base.qp_num = vq->qp->qp_num;
	vq->base.qp_type = attr->qp_type;
	vq->base.send_cq = attr->send_cq;
	vq->base.recv_cq = attr->recv_cq;
	vq->base.cap = ia.cap;
	*qp_out = &vq->base;
	return 0;
}

int qps_verbs_destroy_qp(struct qps_qp *qp)
{
	struct qps_verbs_qp *vq = qps_verbs_qp(qp);
	struct qps_verbs_cq *scq = qps_verbs_cq(qp->send_cq);
	int ret = ibv_destroy_qp(vq->qp);

	if (ret)
		return qps_verbs_ret(ret);
	if (scq->direct == vq)
		scq->direct = NULL;
	free(vq->wrid);
	free(vq);
	return 0;
}

/*
 * Raw-packet QPs live in RTS, go to ERR (flush) or RESET, and come back
 * up from RESET by the verbs sequence (INIT with the port, RTR, RTS: the
 * core's recovery), as on emu; UD QPs take the verbs sequence too. Our
 * port is filled in when the caller leaves it 0.
 */
int qps_verbs_modify_qp(struct qps_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask)
{
	struct qps_verbs_qp *vq = qps_verbs_qp(qp);
	struct ibv_qp_attr a;
	int ret;

	if (!attr || !(attr_mask & IBV_QP_STATE))
		return -EINVAL;
	if (qp->qp_type == IBV_QPT_RAW_PACKET &&
	    attr_mask != (IBV_QP_STATE |
			  (attr->qp_state == IBV_QPS_INIT ? IBV_QP_PORT : 0)))
		return -EINVAL;
	a = *attr;
	if ((attr_mask & IBV_QP_PORT) && !a.port_num)
		a.port_num = qps_verbs_dev(qp->dev)->port;
	ret = qps_verbs_ret(ibv_modify_qp(vq->qp, &a, attr_mask));
	/* RESET: libmlx4 zeroes its own ring indices and the HCA restarts
	 * at WQE 0; the direct path's indices (ours) must follow, or the
	 * next WQE is written where the HCA never looks. */
	if (ret == 0 && a.qp_state == IBV_QPS_RESET && vq->direct)
		qps_verbs_mlx4_reset(vq);
	return ret;
}

int qps_verbs_post_send(struct qps_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(qp->dev);
	struct ibv_send_wr *bad = NULL, *it;
	uint64_t n = 0;
	int ret;

	if (!wr)
		return -EINVAL;
	ret = qps_verbs_ret(ibv_post_send(qps_verbs_qp(qp)->qp, wr, &bad));
	/* Everything before @bad was accepted: one doorbell per call. */
	for (it = wr; it && it != bad; it = it->next)
		n++;
	if (n) {
		qps_verbs_count(&vd->wqes, n);
		qps_verbs_count(&vd->doorbells, 1);
	}
	if (bad_wr)
		*bad_wr = bad;
	return ret;
}

int qps_verbs_post_recv(struct qps_qp *qp, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr)
{
	struct ibv_recv_wr *bad = NULL;
	int ret;

	if (!wr)
		return -EINVAL;
	ret = qps_verbs_ret(ibv_post_recv(qps_verbs_qp(qp)->qp, wr, &bad));
	if (bad_wr)
		*bad_wr = bad;
	return ret;
}

/*
 * max_inline_data is not in ibv_device_attr: ask for
 * QPS_VERBS_INLINE_PROBE bytes on a throwaway raw-packet QP and keep what
 * the driver grants (libmlx4 rounds up to its WQE stride). Best effort:
 * without CAP_NET_RAW the probe fails and sends are not inlined; the
 * core's own QPs will then report the missing capability.
 */
int qps_verbs_probe_inline(struct qps_verbs_dev *vd, uint32_t *max_inline)
{
	struct ibv_qp_init_attr ia;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int ret = 0;

	*max_inline = 0;
	cq = ibv_create_cq(vd->ctx, 1, NULL, NULL, 0);
	if (!cq)
		return qps_verbs_errno();
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RAW_PACKET;
	ia.cap.max_send_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_inline_data = QPS_VERBS_INLINE_PROBE;
	qp = ibv_create_qp(vd->pd, &ia);
	if (qp) {
		*max_inline = ia.cap.max_inline_data;
		ibv_destroy_qp(qp);
	} else {
		ret = qps_verbs_errno();
	}
	ibv_destroy_cq(cq);
	return ret;
}
