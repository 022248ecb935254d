// SPDX-License-Identifier: MIT
/*
 * The mlx4 direct send path on a ConnectX-3 (opt-in: QPS_TX_PATH=direct;
 * untested without the hardware, docs/verbs.md). The core writes WQEs
 * into the SQ ring itself (src/sq_mlx4.c); this file hands it the ring
 * and the doorbell:
 *
 *  - mlx4dv_init_obj(QP) gives the QP buffer, the SQ offset, wqe_cnt,
 *    wqe_shift, doorbell_qpn and sdb (UAR + MLX4_SEND_DOORBELL). libmlx4
 *    is dlopened, so libqpsock does not depend on it;
 *  - the doorbell is a 32-bit store of doorbell_qpn to sdb after the
 *    core's qps_udma_to_device_barrier() (src/udma.h, provider.h);
 *  - no BlueFlame: DV exposes no BF register. Mapping it ourselves would
 *    share it with libmlx4's own BF writes (its bf_offset toggle) in the
 *    same context, and some kernels refuse a second mapping. The last
 *    WQE of a burst is rung with the doorbell like the others, so the
 *    device fetches it by DMA;
 *  - head, tail and the wr_id array are ours: libmlx4 keeps its own in a
 *    private struct. Its poll_cq still parses the CQEs (wqe_index is not
 *    in struct ibv_wc) and fills wr_id from its own array, which we never
 *    wrote. So the CQ is marked, and each send completion of the QP is
 *    mapped back here: a CQE completes the oldest outstanding WQE that
 *    asked for one (MLX4_WQE_CTRL_CQ_UPDATE; unsignalled WQEs before it
 *    completed with it, SQ completions being in order). The core asks
 *    for one every tx_signal WQEs and on the last before each doorbell
 *    (completion moderation). An error CQE is charged the same way: the
 *    failing WQE lies between the oldest outstanding one and the next
 *    that asked (which would otherwise have completed first), and those
 *    before it completed. The flushes that follow, one per WQE, may then
 *    outnumber what is left: the surplus finds no WQE (wr_id UINT64_MAX),
 *    which the core counts as an error. Nothing is left outstanding.
 * That needs a send CQ that carries nothing else of the QP: the CQ must
 * not also be its receive CQ with receives posted (checked).
 */
#include <dlfcn.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/mlx4dv.h>

#include "verbs.h"

#define QPS_VERBS_MLX4_VENDOR 0x02c9	/* Mellanox */

/* ConnectX-3 and ConnectX-3 Pro, PF and VF: the mlx4 driver's parts. */
static bool is_connectx3(const struct ibv_device_attr *d)
{
	switch (d->vendor_part_id) {
	case 4099:
	case 4100:
	case 4103:
	case 4104:
		return d->vendor_id == QPS_VERBS_MLX4_VENDOR;
	default:
		return false;
	}
}

void qps_verbs_mlx4_open(struct qps_verbs_dev *vd,
			 const struct ibv_device_attr *dattr)
{
	const char *path = getenv("QPS_TX_PATH");
	void *sym;

	if (!path || strcmp(path, "direct") != 0)
		return;
	if (strncmp(vd->info.name, "mlx4", 4) != 0 || !is_connectx3(dattr)) {
		qps_verbs_log("%s: QPS_TX_PATH=direct needs a ConnectX-3 "
			      "(mlx4); this device sends through ibv_post_send "
			      "only", vd->info.name);
		return;
	}
	vd->mlx4_lib = dlopen("libmlx4.so.1", RTLD_NOW | RTLD_LOCAL);
	sym = vd->mlx4_lib ? dlsym(vd->mlx4_lib, "mlx4dv_init_obj") : NULL;
	if (!sym) {
		qps_verbs_log("%s: QPS_TX_PATH=direct: cannot load "
			      "mlx4dv_init_obj from libmlx4.so.1 (%s)",
			      vd->info.name, dlerror());
		qps_verbs_mlx4_close(vd);
		return;
	}
	/* POSIX guarantees a data pointer from dlsym converts. */
	memcpy(&vd->mlx4dv_init_obj, &sym, sizeof(sym));
	vd->info.caps |= QPS_DEV_CAP_MLX4_SQ;
}

void qps_verbs_mlx4_close(struct qps_verbs_dev *vd)
{
	if (vd->mlx4_lib)
		dlclose(vd->mlx4_lib);
	vd->mlx4_lib = NULL;
	vd->mlx4dv_init_obj = NULL;
}

static void db_write(struct qps_qp *qp, uint32_t be_val)
{
	struct qps_verbs_qp *vq = qps_verbs_qp(qp);

	/* The core's qps_udma_to_device_barrier() put the WQE stores
	 * before this one (provider.h). */
	qps_mmio_write32_be(vq->sdb, be_val);
	qps_verbs_count(&qps_verbs_dev(qp->dev)->doorbells, 1);
}

int qps_verbs_mlx4_sq(struct qps_qp *qp, struct qps_mlx4_sq *out)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(qp->dev);
	struct qps_verbs_qp *vq = qps_verbs_qp(qp);
	struct qps_verbs_cq *scq = qps_verbs_cq(qp->send_cq);
	struct mlx4dv_qp dq;
	struct mlx4dv_obj obj;
	uint32_t spare;
	int ret;

	if (!out)
		return -EINVAL;
	if (!vd->mlx4dv_init_obj)
		return -EOPNOTSUPP;
	if (qp->qp_type != IBV_QPT_RAW_PACKET)
		return -EOPNOTSUPP;
	if ((qp->recv_cq == qp->send_cq && qp->cap.max_recv_wr) ||
	    (scq->direct && scq->direct != vq)) {
		qps_verbs_log("%s: the direct path needs a send CQ of its own "
			      "per QP", vd->info.name);
		return -EINVAL;
	}
	memset(&dq, 0, sizeof(dq));
	memset(&obj, 0, sizeof(obj));
	obj.qp.in = vq->qp;
	obj.qp.out = &dq;
	ret = vd->mlx4dv_init_obj(&obj, MLX4DV_OBJ_QP);
	if (ret)
		return qps_verbs_ret(ret);
	if (!dq.buf.buf || !dq.sdb || !dq.sq.wqe_cnt || dq.sq.wqe_shift < 6)
		return -EPROTO;
	spare = (2048u >> dq.sq.wqe_shift) + 1;
	if (dq.sq.wqe_cnt <= spare)
		return -EPROTO;
	if (!vq->wrid) {
		vq->wrid = calloc(dq.sq.wqe_cnt, sizeof(*vq->wrid));
		if (!vq->wrid)
			return -ENOMEM;
	}
	vq->sq_buf = (uint8_t *)dq.buf.buf + dq.sq.offset;
	vq->wqe_cnt = dq.sq.wqe_cnt;
	vq->wqe_shift = dq.sq.wqe_shift;
	vq->sdb = dq.sdb;
	vq->direct = true;
	scq->direct = vq;

	memset(out, 0, sizeof(*out));
	out->buf = vq->sq_buf;
	out->wqe_cnt = vq->wqe_cnt;
	out->wqe_shift = vq->wqe_shift;
	out->spare_wqes = spare;
	out->max_post = vq->wqe_cnt - spare;
	out->doorbell_qpn = dq.doorbell_qpn;
	out->wrid = vq->wrid;
	out->head = &vq->head;
	out->tail = &vq->tail;
	out->db_write = db_write;
	return 0;
}

static bool wqe_signalled(const struct qps_verbs_qp *vq, uint32_t ind)
{
	const struct mlx4_wqe_ctrl_seg *ctrl = (const void *)
		((const uint8_t *)vq->sq_buf +
		 ((size_t)(ind & (vq->wqe_cnt - 1)) << vq->wqe_shift));

	return ctrl->srcrb_flags & htobe32(MLX4_WQE_CTRL_CQ_UPDATE);
}

void qps_verbs_mlx4_complete(struct qps_verbs_qp *vq, struct ibv_wc *wc,
			     int n)
{
	uint32_t tail = __atomic_load_n(&vq->tail, __ATOMIC_RELAXED);
	uint32_t head = __atomic_load_n(&vq->head, __ATOMIC_RELAXED);
	int i;

	for (i = 0; i < n; i++) {
		uint32_t ind = tail;

		if (wc[i].qp_num != vq->base.qp_num)
			continue;
		if (ind == head) {
			/* More completions than WQEs: not ours. */
			wc[i].wr_id = UINT64_MAX;
			continue;
		}
		while (ind + 1 != head && !wqe_signalled(vq, ind))
			ind++;
		wc[i].wr_id = vq->wrid[ind & (vq->wqe_cnt - 1)];
		tail = ind + 1;
	}
	/* Release: pairs with the acquire in qps_sq_mlx4_room(); the slots
	 * below the tail are free for the core to rewrite. */
	__atomic_store_n(&vq->tail, tail, __ATOMIC_RELEASE);
}

void qps_verbs_mlx4_reset(struct qps_verbs_qp *vq)
{
	memset(vq->wrid, 0, (size_t)vq->wqe_cnt * sizeof(*vq->wrid));
	vq->head = 0;
	/* Release: pairs with the acquire in qps_sq_mlx4_room() and
	 * qps_sq_mlx4_init(); the QP is out of RTS, nobody posts. */
	__atomic_store_n(&vq->tail, 0, __ATOMIC_RELEASE);
}
