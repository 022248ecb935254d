// SPDX-License-Identifier: MIT
/*
 * Send queue in mlx4 layout (as libmlx4 builds it) and the two registers
 * that wake the device: the 32-bit doorbell and the BlueFlame register.
 *
 * Ring: wqe_cnt slots of 1 << wqe_shift bytes, each WQE a ctrl segment
 * followed by inline or data segments. Ownership passes to the device
 * when owner_opcode is written with bit 31 = (index & wqe_cnt), last and
 * after a release barrier. The slot spare_wqes ahead of the producer is
 * stamped (0xffffffff in the first dword of each 64-byte chunk but the
 * first), so a device reading ahead never mistakes stale chunks for a WQE.
 *
 * A UD WQE puts a datagram segment (address vector, remote QPN and Q_Key,
 * next-hop MAC; 48 bytes) right after the ctrl segment, so its data starts
 * at the second 64-byte chunk, as libmlx4 lays it out.
 */
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint8_t *sq_slot(struct qps_emu_qp *qp, uint32_t ind)
{
	return qp->sq_buf + ((size_t)(ind & (qp->wqe_cnt - 1)) << qp->wqe_shift);
}

#define UD_SEGS (sizeof(struct mlx4_wqe_ctrl_seg) + \
		 sizeof(struct mlx4_wqe_datagram_seg))
_Static_assert(UD_SEGS == QPS_EMU_WQEBB, "UD data starts at chunk 1");

/* Where the data segments start. */
static uint32_t data_off(bool ud)
{
	return ud ? UD_SEGS : sizeof(struct mlx4_wqe_ctrl_seg);
}

/* Inline bytes a stride holds: the first chunk loses the ctrl segment
 * (UD: the whole chunk), every chunk one inline header (chunks never
 * cross 64 bytes). */
static uint32_t inline_cap(uint32_t stride, bool ud)
{
	uint32_t first = ud ? 0 : QPS_EMU_WQEBB -
				  sizeof(struct mlx4_wqe_ctrl_seg) -
				  sizeof(struct mlx4_wqe_inline_seg);

	return first + (stride / QPS_EMU_WQEBB - 1) *
	       (QPS_EMU_WQEBB - sizeof(struct mlx4_wqe_inline_seg));
}

static uint32_t sge_cap(uint32_t stride, bool ud)
{
	return (stride - data_off(ud)) / sizeof(struct mlx4_wqe_data_seg);
}

static void stamp_wqe(struct qps_emu_qp *qp, uint32_t ind)
{
	uint8_t *wqe = sq_slot(qp, ind);
	const struct mlx4_wqe_ctrl_seg *ctrl = (const void *)wqe;
	uint32_t size = (uint32_t)(ctrl->fence_size & 0x3f) * 16;
	uint32_t off;

	for (off = QPS_EMU_WQEBB; off < size; off += QPS_EMU_WQEBB)
		*(uint32_t *)(wqe + off) = QPS_EMU_STAMP;
}

int qps_emu_sq_init(struct qps_emu_qp *qp, const struct ibv_qp_cap *cap)
{
	uint32_t want_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	uint32_t stride;
	int shift;

	if (cap->max_send_wr > QPS_EMU_MAX_WR)
		return -EINVAL;
	for (shift = QPS_EMU_WQE_SHIFT; shift <= QPS_EMU_WQE_SHIFT_MAX;
	     shift++) {
		stride = 1u << shift;
		if (inline_cap(stride, qp->ud) >= cap->max_inline_data &&
		    sge_cap(stride, qp->ud) >= want_sge)
			break;
	}
	if (shift > QPS_EMU_WQE_SHIFT_MAX)
		return -EINVAL;
	qp->wqe_shift = shift;
	qp->spare = (2048u >> shift) + 1;
	qp->wqe_cnt = qps_emu_roundup_pow2((cap->max_send_wr ?
					    cap->max_send_wr : 1) + qp->spare);
	qp->max_post = qp->wqe_cnt - qp->spare;
	qp->max_inline = inline_cap(stride, qp->ud);
	qp->max_sge = sge_cap(stride, qp->ud);
	qp->sq_buf = aligned_alloc(4096, (size_t)qp->wqe_cnt << shift);
	qp->wrid = calloc(qp->wqe_cnt, sizeof(*qp->wrid));
	qp->frame = malloc(QPS_EMU_FRAME_MAX);
	if (!qp->sq_buf || !qp->wrid || !qp->frame) {
		qps_emu_sq_fini(qp);
		return -ENOMEM;
	}
	qps_emu_sq_reset(qp);
	qp->doorbell_qpn = htobe32(qp->base.qp_num << 8);
	qp->base.cap.max_send_wr = qp->max_post;
	qp->base.cap.max_send_sge = qp->max_sge;
	qp->base.cap.max_inline_data = qp->max_inline;
	return 0;
}

void qps_emu_sq_reset(struct qps_emu_qp *qp)
{
	uint32_t stride = 1u << qp->wqe_shift, i;
	uint32_t head = qp->keep_sq_index ? qp->sq_head : 0;
	uint32_t tail = qp->keep_sq_index ? qp->sq_tail : 0;

	memset(qp->sq_buf, 0, (size_t)qp->wqe_cnt << qp->wqe_shift);
	/* As mlx4_qp_init_sq_ownership: every slot software-owned for the
	 * first pass, full size, stamped. */
	for (i = 0; i < qp->wqe_cnt; i++) {
		struct mlx4_wqe_ctrl_seg *ctrl = (void *)sq_slot(qp, i);

		ctrl->owner_opcode = htobe32(1u << 31);
		ctrl->fence_size = (uint8_t)(stride / 16);
		stamp_wqe(qp, i);
	}
	memset(qp->wrid, 0, qp->wqe_cnt * sizeof(*qp->wrid));
	qp->sq_head = head;
	qp->bf_first = 0;
	qp->bf_n = 0;
	qp->db_pending = false;
	/* Release: pairs with post_send's acquire of sq_tail and poll_cq's
	 * acquire of ci (no completion of the old ring is accepted now). */
	__atomic_store_n(&qp->sq_tail, tail, __ATOMIC_RELEASE);
	__atomic_store_n(&qp->ci, 0, __ATOMIC_RELEASE);
}

void qps_emu_test_keep_sq_index(struct qps_qp *q, bool on)
{
	qps_emu_qp(q)->keep_sq_index = on;
}

void qps_emu_sq_fini(struct qps_emu_qp *qp)
{
	free(qp->sq_buf);
	free(qp->wrid);
	free(qp->frame);
	qp->sq_buf = NULL;
	qp->wrid = NULL;
	qp->frame = NULL;
}

/* Inline data cut into chunks that never cross a 64-byte boundary;
 * returns the segment bytes written after the ctrl segment. */
static uint32_t write_inline(uint8_t *wqe, const struct ibv_send_wr *wr,
			     uint32_t start)
{
	uint32_t off = start;
	uint32_t seg = off, seg_len = 0, nseg = 0, total = 0;
	int i;

	off += sizeof(struct mlx4_wqe_inline_seg);
	for (i = 0; i < wr->num_sge; i++) {
		const uint8_t *src = (const uint8_t *)(uintptr_t)
				     wr->sg_list[i].addr;
		uint32_t len = wr->sg_list[i].length;

		total += len;
		while (len) {
			uint32_t room = QPS_EMU_WQEBB - off % QPS_EMU_WQEBB;
			uint32_t n = len < room ? len : room;

			memcpy(wqe + off, src, n);
			off += n;
			src += n;
			len -= n;
			seg_len += n;
			if (off % QPS_EMU_WQEBB == 0) {
				*(uint32_t *)(wqe + seg) =
					htobe32(MLX4_INLINE_SEG | seg_len);
				nseg++;
				seg = off;
				seg_len = 0;
				off += sizeof(struct mlx4_wqe_inline_seg);
			}
		}
	}
	if (seg_len) {
		*(uint32_t *)(wqe + seg) = htobe32(MLX4_INLINE_SEG | seg_len);
		nseg++;
	}
	return total + nseg * sizeof(struct mlx4_wqe_inline_seg);
}

static uint32_t write_dsegs(uint8_t *wqe, const struct ibv_send_wr *wr,
			    uint32_t start)
{
	struct mlx4_wqe_data_seg *ds = (void *)(wqe + start);
	uint32_t n = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		if (!wr->sg_list[i].length)
			continue;
		mlx4dv_set_data_seg(&ds[n++], wr->sg_list[i].length,
				    wr->sg_list[i].lkey,
				    (uintptr_t)wr->sg_list[i].addr);
	}
	return n * sizeof(*ds);
}

/* Verbs refuses sends before RTS; in ERR they are taken and flushed. */
static bool can_send(uint32_t state)
{
	return state == IBV_QPS_RTS || state == IBV_QPS_ERR;
}

static int check_wr(const struct qps_emu_qp *qp, const struct ibv_send_wr *wr,
		    struct qps_emu_ah **ah)
{
	uint64_t total = 0;
	int i;

	if (!can_send(qps_emu_qp_state(qp)))
		return -EINVAL;
	if (qp->ud) {
		if (wr->opcode != IBV_WR_SEND &&
		    wr->opcode != IBV_WR_SEND_WITH_IMM)
			return -EINVAL;
		*ah = qps_emu_ah_of(qps_emu_dev(qp->base.dev), wr->wr.ud.ah);
		if (!*ah)
			return -EINVAL;
	} else if (wr->opcode != IBV_WR_SEND) {
		return -EINVAL;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (total > qp->max_inline)
			return -ENOMEM;	/* as libmlx4 */
	} else if (total > UINT32_MAX) {
		return -EINVAL;
	}
	return 0;
}

/* The datagram segment: the AH's address vector (RoCE: GID index, hop
 * limit, traffic class and flow label, destination GID, next-hop MAC),
 * the remote QPN and Q_Key as the WR gives them (the device resolves a
 * Q_Key with the high bit set). */
static void write_dgram(uint8_t *wqe, const struct ibv_send_wr *wr,
			struct qps_emu_ah *ah)
{
	struct mlx4_wqe_datagram_seg *dg = (void *)(wqe +
					sizeof(struct mlx4_wqe_ctrl_seg));

	mlx4dv_set_dgram_seg(dg, 1u << 24, 0x80, 0, QPS_GID_ROCE_V2_IPV4, 0,
			     ah->hop_limit,
			     (uint32_t)ah->sl << 28 |
			     (uint32_t)ah->tclass << 20 | ah->flow_label, ah->dgid,
			     wr->wr.ud.remote_qpn & 0xffffff,
			     wr->wr.ud.remote_qkey, 0, ah->mac);
}

static void write_wqe(struct qps_emu_qp *qp, uint32_t ind,
		      const struct ibv_send_wr *wr, struct qps_emu_ah *ah)
{
	uint8_t *wqe = sq_slot(qp, ind);
	struct mlx4_wqe_ctrl_seg *ctrl = (void *)wqe;
	bool signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	bool imm = qp->ud && wr->opcode == IBV_WR_SEND_WITH_IMM;
	uint32_t start = data_off(qp->ud), bytes, size;

	if (qp->ud)
		write_dgram(wqe, wr, ah);
	if (wr->send_flags & IBV_SEND_INLINE)
		bytes = write_inline(wqe, wr, start);
	else
		bytes = write_dsegs(wqe, wr, start);
	size = (start + bytes + 15) / 16;
	ctrl->bf_qpn = 0;
	ctrl->fence_size = (uint8_t)(size |
		((wr->send_flags & IBV_SEND_FENCE) ? MLX4_WQE_CTRL_FENCE : 0));
	ctrl->srcrb_flags = htobe32(
		(qp->ud ? ((wr->send_flags & IBV_SEND_SOLICITED) ?
			   MLX4_WQE_CTRL_SOLICIT : 0) :
			  MLX4_WQE_CTRL_SOLICIT) |
		(signaled ? MLX4_WQE_CTRL_CQ_UPDATE : 0) |
		/* As libmlx4 on a raw-packet QP; UD leaves it to the
		 * engine's RoCE framing. */
		(!qp->ud && (wr->send_flags & IBV_SEND_IP_CSUM) ?
		 MLX4_WQE_CTRL_IP_HDR_CSUM | MLX4_WQE_CTRL_TCP_UDP_CSUM : 0));
	ctrl->imm = imm ? wr->imm_data : 0;
	qp->wrid[ind & (qp->wqe_cnt - 1)] = wr->wr_id;
	/* Release: pairs with the engine's acquire load of owner_opcode;
	 * the segments are visible before ownership passes (libmlx4's
	 * udma_to_device_barrier). */
	__atomic_store_n(&ctrl->owner_opcode,
			 htobe32((imm ? MLX4_OPCODE_SEND_IMM :
					 MLX4_OPCODE_SEND) |
				 ((ind & qp->wqe_cnt) ? (1u << 31) : 0)),
			 __ATOMIC_RELEASE);
	stamp_wqe(qp, ind + qp->spare);
}

int qps_emu_post_send(struct qps_qp *q, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);
	unsigned int nreq = 0;
	int r = 0;

	pthread_mutex_lock(&qp->sq_lock);
	for (; wr; wr = wr->next, nreq++) {
		/* Acquire: pairs with poll_cq's release of sq_tail; the
		 * slots below it are no longer read by anyone. */
		uint32_t tail = __atomic_load_n(&qp->sq_tail, __ATOMIC_ACQUIRE);
		struct qps_emu_ah *ah = NULL;

		if (qp->sq_head - tail >= qp->max_post) {
			r = -ENOMEM;
			break;
		}
		r = check_wr(qp, wr, &ah);
		if (r)
			break;
		write_wqe(qp, qp->sq_head, wr, ah);
		qp->sq_head++;
	}
	pthread_mutex_unlock(&qp->sq_lock);
	if (r && bad_wr)
		*bad_wr = wr;
	/* One doorbell for the chain, even when it stopped early: what was
	 * posted must go (verbs semantics). */
	if (nreq)
		qps_emu_db_write(q, qp->doorbell_qpn);
	return r;
}

static bool stepping(const struct qps_emu_qp *qp)
{
	return __atomic_load_n(&qps_emu_dev(qp->base.dev)->stepping,
			       __ATOMIC_ACQUIRE);
}

/*
 * The cost model: a register write stalls the writing CPU on hardware (an
 * uncached store behind a store barrier; for BlueFlame, write-combined
 * stores and their flush). Spin that long in the writer's thread.
 */
static void cost_spin(const uint32_t *ns_p)
{
	uint32_t ns = __atomic_load_n(ns_p, __ATOMIC_RELAXED);
	struct timespec t0, t;
	int64_t d;

	if (!ns)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		clock_gettime(CLOCK_MONOTONIC, &t);
		d = (int64_t)(t.tv_sec - t0.tv_sec) * 1000000000 +
		    (t.tv_nsec - t0.tv_nsec);
	} while (d < (int64_t)ns);
}

int qps_emu_set_cost(struct qps_dev *d, uint32_t db_ns, uint32_t bf_ns)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);

	if (db_ns > QPS_EMU_COST_MAX_NS || bf_ns > QPS_EMU_COST_MAX_NS)
		return -EINVAL;
	__atomic_store_n(&dev->cost_db_ns, db_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&dev->cost_bf_ns, bf_ns, __ATOMIC_RELAXED);
	return 0;
}

void qps_emu_get_cost(struct qps_dev *d, uint32_t *db_ns, uint32_t *bf_ns)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);

	*db_ns = __atomic_load_n(&dev->cost_db_ns, __ATOMIC_RELAXED);
	*bf_ns = __atomic_load_n(&dev->cost_bf_ns, __ATOMIC_RELAXED);
}

void qps_emu_db_write(struct qps_qp *q, uint32_t be_val)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);

	cost_spin(&qps_emu_dev(q->dev)->cost_db_ns);
	if (be_val != qp->doorbell_qpn) {
		qps_emu_count(&qp->st.db_bad, 1);
		return;
	}
	pthread_mutex_lock(&qp->eng_lock);
	qps_emu_count(&qp->st.doorbells, 1);
	qp->db_pending = true;
	if (!stepping(qp))
		qps_emu_engine_run(qp, qp->wqe_cnt + QPS_EMU_BF_LATCH);
	pthread_mutex_unlock(&qp->eng_lock);
}

/*
 * BlueFlame: the WQE is copied into one half of the device context's
 * register (shared by every QP: the writer holds its bf_state lock,
 * provider.h) and the device takes it from there, not from the ring. The register copy is
 * latched (the device's internal buffer) so that stepping mode can run it
 * later and a rewrite of the ring meanwhile changes nothing.
 */
void qps_emu_bf_copy(struct qps_qp *q, void *dst, const void *src,
		     size_t len)
{
	struct qps_emu_qp *qp = qps_emu_qp(q);
	const uint8_t *reg = qps_emu_dev(q->dev)->bf_reg;
	uint8_t *d = dst;
	const struct mlx4_wqe_ctrl_seg *ctrl = (const void *)d;

	cost_spin(&qps_emu_dev(q->dev)->cost_bf_ns);
	if ((d != reg && d != reg + QPS_EMU_BF_SIZE) || !src ||
	    !len || len > QPS_EMU_BF_SIZE || len % QPS_EMU_WQEBB) {
		qps_emu_count(&qp->st.bf_bad, 1);
		return;
	}
	pthread_mutex_lock(&qp->eng_lock);
	memcpy(d, src, len);
	if ((be32toh(ctrl->bf_qpn) >> 8) != q->qp_num) {
		qps_emu_count(&qp->st.db_bad, 1);
		pthread_mutex_unlock(&qp->eng_lock);
		return;
	}
	qps_emu_count(&qp->st.bf_writes, 1);
	if (qp->bf_n < QPS_EMU_BF_LATCH) {
		struct qps_emu_bf_latch *l = &qp->bf_q[(qp->bf_first + qp->bf_n) %
						       QPS_EMU_BF_LATCH];

		memcpy(l->wqe, d, len);
		l->len = (uint32_t)len;
		qp->bf_n++;
	} else {
		/* Overwritten before the device took it: what is left is
		 * the doorbell part of the write. */
		qps_emu_count(&qp->st.bf_bad, 1);
	}
	qp->db_pending = true;
	if (!stepping(qp))
		qps_emu_engine_run(qp, qp->wqe_cnt + QPS_EMU_BF_LATCH);
	pthread_mutex_unlock(&qp->eng_lock);
}
