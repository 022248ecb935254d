// SPDX-License-Identifier: MIT
/*
 * The device side of a send queue. It runs only when the doorbell or the
 * BlueFlame register is written (or, in stepping mode, when the test
 * steps it), in the writer's thread: there is no progress thread.
 *
 * Like the HCA, it executes WQEs from its consumer index while the owner
 * bit says the slot belongs to the device; the doorbell carries no
 * producer index. Everything in a WQE is checked before use: the core's
 * direct path writes the ring itself.
 *
 * A UD QP's WQEs become RoCE v2 frames (emu_ud_tx.c). A QP in ERR
 * executes nothing: every WQE completes with WR_FLUSH_ERR.
 */
#include "emu.h"

#include <errno.h>
#include <string.h>

#define EMU_OWNER_BIT (1u << 31)

static const uint8_t *sq_slot(const struct qps_emu_qp *qp, uint32_t ind)
{
	return qp->sq_buf + ((size_t)(ind & (qp->wqe_cnt - 1)) << qp->wqe_shift);
}

static uint32_t rd_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static bool device_owned(const struct qps_emu_qp *qp, uint32_t ind)
{
	const struct mlx4_wqe_ctrl_seg *ctrl = (const void *)sq_slot(qp, ind);
	/* Acquire: pairs with the release store of owner_opcode by
	 * post_send (or the core's barrier before it on the direct path). */
	uint32_t own = be32toh(__atomic_load_n(&ctrl->owner_opcode,
					       __ATOMIC_ACQUIRE));

	return !!(own & EMU_OWNER_BIT) == !!(ind & qp->wqe_cnt);
}

static uint8_t malformed(struct qps_emu_qp *qp)
{
	qps_emu_count(&qp->st.malformed, 1);
	return MLX4_CQE_SYNDROME_LOCAL_QP_OP_ERR;
}

/* Inline segments: the first right after the ctrl segment, each next one
 * on the following 64-byte boundary; none crosses a boundary. */
static uint8_t gather_inline(struct qps_emu_qp *qp, const uint8_t *w,
			     uint32_t start, uint32_t size, uint32_t *len)
{
	uint32_t off = start;

	for (;;) {
		uint32_t bc = rd_be32(w + off);
		uint32_t n = bc & ~(uint32_t)MLX4_INLINE_SEG;
		uint32_t room = QPS_EMU_WQEBB - off % QPS_EMU_WQEBB -
				sizeof(struct mlx4_wqe_inline_seg);

		if (!(bc & MLX4_INLINE_SEG) || n > room ||
		    off + sizeof(struct mlx4_wqe_inline_seg) + n > size)
			return malformed(qp);
		memcpy(qp->frame + *len, w + off + 4, n);
		*len += n;
		off += sizeof(struct mlx4_wqe_inline_seg) + n;
		if (off % QPS_EMU_WQEBB || off >= size)
			return 0;
	}
}

/* Data segments: gather from registered memory, checked by lkey. */
static uint8_t gather_data(struct qps_emu_qp *qp, const uint8_t *w,
			   uint32_t start, uint32_t size, uint32_t *len)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);
	uint32_t off;

	for (off = start; off + 16 <= size; off += 16) {
		struct mlx4_wqe_data_seg ds;
		uintptr_t mr_addr;
		size_t mr_len;
		uint64_t addr;
		uint32_t bc;

		memcpy(&ds, w + off, sizeof(ds));
		bc = be32toh(ds.byte_count);
		addr = be64toh(ds.addr);
		if (bc & MLX4_INLINE_SEG)
			return malformed(qp);
		if (!bc)	/* the HCA reads 0 as 2 GiB */
			return MLX4_CQE_SYNDROME_LOCAL_LENGTH_ERR;
		if (qps_emu_mr_lookup(dev, be32toh(ds.lkey), &mr_addr,
				      &mr_len) ||
		    addr < mr_addr || bc > mr_len || addr - mr_addr > mr_len - bc)
			return MLX4_CQE_SYNDROME_LOCAL_PROT_ERR;
		if (bc > QPS_EMU_FRAME_MAX - *len)
			return MLX4_CQE_SYNDROME_LOCAL_LENGTH_ERR;
		memcpy(qp->frame + *len, (const void *)(uintptr_t)addr, bc);
		*len += bc;
	}
	return 0;
}

/* Validate one WQE (a private copy of @size bytes) and build its frame
 * into qp->frame. Returns 0 or an mlx4 CQE syndrome. */
static uint8_t build_frame(struct qps_emu_qp *qp, const uint8_t *w,
			   uint32_t size, uint32_t *len)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);
	uint32_t off, op = rd_be32(w) & 0x1f;
	uint32_t start = sizeof(struct mlx4_wqe_ctrl_seg), hdr = 0;

	/* A stamp left inside the WQE: that chunk was never written. */
	for (off = QPS_EMU_WQEBB; off < size; off += QPS_EMU_WQEBB)
		if (rd_be32(w + off) == QPS_EMU_STAMP)
			return malformed(qp);
	if (qp->ud) {
		/* ctrl + datagram segment, data from the second chunk; the
		 * payload is gathered behind room for the headers. */
		if ((op != MLX4_OPCODE_SEND && op != MLX4_OPCODE_SEND_IMM) ||
		    size < QPS_EMU_WQEBB)
			return malformed(qp);
		start = QPS_EMU_WQEBB;
		hdr = qps_emu_roce_hdr_len(op == MLX4_OPCODE_SEND_IMM);
	} else if (op != MLX4_OPCODE_SEND) {
		return malformed(qp);
	}
	*len = hdr;
	if (size > start) {
		uint8_t syn;

		if (rd_be32(w + start) & MLX4_INLINE_SEG)
			syn = gather_inline(qp, w, start, size, len);
		else
			syn = gather_data(qp, w, start, size, len);
		if (syn)
			return syn;
	}
	if (qp->ud)
		return qps_emu_ud_frame(qp, w, hdr, len);
	if (*len < QPS_EMU_ETH_HLEN || *len > dev->mtu + QPS_EMU_ETH_HLEN)
		return MLX4_CQE_SYNDROME_LOCAL_LENGTH_ERR;
	return 0;
}

static void send_cqe(struct qps_emu_qp *qp, uint32_t ind, uint32_t len,
		     uint8_t syndrome)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);
	struct qps_emu_cqe_info ci = {
		.qpn = qp->base.qp_num,
		.byte_cnt = syndrome ? 0 : len,
		.wqe_index = (uint16_t)ind,
		.opcode = syndrome ? MLX4_CQE_OPCODE_ERROR : MLX4_OPCODE_SEND,
		.syndrome = syndrome,
		.is_send = true,
	};
	enum qps_emu_cqe_res res;
	int r;

	r = qps_emu_lock(&dev->sp->rx_lock);
	if (r < 0) {
		qps_emu_count(&qp->st.tx_cq_overrun, 1);
		return;
	}
	if (r == 1)
		qps_emu_count(&dev->sp->st.lock_recovered, 1);
	res = qps_emu_cq_write(dev->sp, dev->qarea,
			       qps_emu_cq(qp->base.send_cq)->slot, &ci);
	qps_emu_unlock(&dev->sp->rx_lock);
	if (res == QPS_EMU_CQE_OK || res == QPS_EMU_CQE_NOTIFY)
		qps_emu_count(&qp->st.tx_cqes, 1);
	else
		qps_emu_count(&qp->st.tx_cq_overrun, 1);
	if (res == QPS_EMU_CQE_NOTIFY)
		qps_emu_notify(dev, dev->port, dev->gen);
}

/* Execute the WQE at the consumer index, from @src (ring slot or latched
 * BlueFlame copy) of which @avail bytes are readable. */
static void exec_wqe(struct qps_emu_qp *qp, const uint8_t *src,
		     uint32_t avail)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);
	uint8_t w[1u << QPS_EMU_WQE_SHIFT_MAX];
	struct mlx4_wqe_ctrl_seg ctrl;
	uint32_t ind = qp->ci, size, len = 0;
	uint8_t syn;
	bool signaled;

	memcpy(&ctrl, src, sizeof(ctrl));
	size = (uint32_t)(ctrl.fence_size & 0x3f) * 16;
	signaled = be32toh(ctrl.srcrb_flags) & MLX4_WQE_CTRL_CQ_UPDATE;
	/* eng_lock held: modify_qp changes the state under it too. */
	if (qp->state == IBV_QPS_ERR) {
		syn = MLX4_CQE_SYNDROME_WR_FLUSH_ERR;
		qps_emu_count(&qp->st.flushed, 1);
	} else if (size < sizeof(ctrl) || size > avail) {
		syn = malformed(qp);
	} else {
		/* A private snapshot: what the device fetched. */
		memcpy(w, src, size);
		syn = build_frame(qp, w, size, &len);
		if (!syn && !qp->ud)
			qps_emu_csum_tx(qp->frame, len,
					be32toh(ctrl.srcrb_flags));
	}
	qps_emu_count(&qp->st.wqes, 1);
	/* Release: pairs with the acquire of ci in poll_cq, which accepts a
	 * send CQE only for an index the engine has passed. */
	__atomic_store_n(&qp->ci, ind + 1, __ATOMIC_RELEASE);
	if (!syn && dev->tap)
		dev->tap(dev->tap_arg, qp->frame, len);
	if (syn) {
		qps_emu_count(&qp->st.tx_drops, 1);
	} else if (!qps_emu_wire_tx(dev, qp->frame, len) &&
		   !(qp->frame[0] & 1)) {
		/* A real wire drops it silently: the send still succeeds. */
		qps_emu_count(&qp->st.tx_no_dest, 1);
		qps_emu_count(&qp->st.tx_drops, 1);
	}
	/* Errors complete whether signalled or not, as on the HCA. */
	if (syn || signaled)
		send_cqe(qp, ind, len, syn);
}

static void bf_pop(struct qps_emu_qp *qp)
{
	qp->bf_first = (qp->bf_first + 1) % QPS_EMU_BF_LATCH;
	qp->bf_n--;
}

unsigned int qps_emu_engine_run(struct qps_emu_qp *qp, unsigned int budget)
{
	unsigned int n = 0;

	while (n < budget) {
		if (qp->bf_n) {
			struct qps_emu_bf_latch *l = &qp->bf_q[qp->bf_first];
			uint32_t idx = (rd_be32(l->wqe) >> 8) & 0xffff;
			uint32_t d = (idx - qp->ci) & 0xffff;

			if (d == 0) {
				exec_wqe(qp, l->wqe, l->len);
				bf_pop(qp);
				n++;
				continue;
			}
			if (d >= qp->wqe_cnt) {
				/* Stale or bogus index: only the doorbell
				 * part of the write counts. */
				qps_emu_count(&qp->st.bf_bad, 1);
				bf_pop(qp);
				continue;
			}
			/* Ahead of us: first the WQEs written before it
			 * without a doorbell, from the ring. */
		}
		if (!device_owned(qp, qp->ci)) {
			if (qp->bf_n) {
				qps_emu_count(&qp->st.bf_bad, 1);
				bf_pop(qp);
				continue;
			}
			break;
		}
		exec_wqe(qp, sq_slot(qp, qp->ci), 1u << qp->wqe_shift);
		n++;
	}
	if (n < budget)
		qp->db_pending = false;
	return n;
}

void qps_emu_set_stepping(struct qps_dev *d, bool on)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);

	/* Release: pairs with the acquire in the register handlers. */
	__atomic_store_n(&dev->stepping, on, __ATOMIC_RELEASE);
	if (!on)
		qps_emu_step(d, 0);
}

int qps_emu_step(struct qps_dev *d, unsigned int max_wqes)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	unsigned int i, total = 0;

	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < QPS_EMU_MAX_QP; i++) {
		struct qps_emu_qp *qp = dev->qp[i];
		unsigned int budget;

		if (!qp)
			continue;
		if (max_wqes && total >= max_wqes)
			break;
		budget = max_wqes ? max_wqes - total :
				    qp->wqe_cnt + QPS_EMU_BF_LATCH;
		pthread_mutex_lock(&qp->eng_lock);
		if (qp->db_pending)
			total += qps_emu_engine_run(qp, budget);
		pthread_mutex_unlock(&qp->eng_lock);
	}
	pthread_mutex_unlock(&dev->lock);
	return (int)total;
}
