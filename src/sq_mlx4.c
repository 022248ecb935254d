// SPDX-License-Identifier: MIT
/*
 * mlx4 direct send path: the core writes WQEs into the provider's send
 * ring itself, in the layout of infiniband/mlx4dv.h (as libmlx4 and
 * mlx4_en do), and decides when to wake the device.
 *
 * A WQE passes to the device when its owner word is written, last and
 * after a release barrier; the device only looks when told to, by a
 * doorbell or a BlueFlame write. qps_sq_mlx4_ring() tells it once for
 * everything written since the last time: through BlueFlame when the last
 * WQE fits half of the register (the device then takes that WQE from the
 * register instead of fetching it), else through the doorbell register.
 * The doorbell carries no producer index, so a postponed doorbell only
 * delays the device; it never exposes a half-written WQE.
 *
 * Completion moderation: the WQE written last before a ring must ask for
 * a completion (CQ_UPDATE), and whether a WQE is the last is known only
 * at ring time. A device that is still running an earlier burst follows
 * owner words without waiting for our doorbell (the doorbell carries no
 * index), so a WQE it may already see cannot be changed safely. Hence the
 * newest unrung WQE is written with its owner word held back: writing the
 * next WQE hands it over as it is, ringing sets its CQ_UPDATE bit first.
 * The device therefore sees the unrung WQEs up to the newest one only;
 * it stops there, which is what a postponed doorbell asks anyway.
 *
 * Called under the send queue's lock (sq.h), or by a test that owns the
 * queue.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <infiniband/mlx4dv.h>

#include "sq.h"

#define QPS_MLX4_WQEBB 64u
#define QPS_MLX4_STAMP 0xffffffffu
#define QPS_MLX4_OWNER (1u << 31)
#define QPS_MLX4_BF_MAX 512u	/* largest register half we stage */
#define QPS_MLX4_SHIFT_MAX 12

static uint8_t *qps_sq_mlx4_slot(const struct qps_sq_mlx4 *sq, uint32_t ind)
{
	return (uint8_t *)sq->m.buf +
	       ((size_t)(ind & (sq->m.wqe_cnt - 1)) << sq->m.wqe_shift);
}

/* Inline bytes a slot holds: chunks never cross 64 bytes, the first loses
 * the ctrl segment, each one an inline header. */
static uint32_t qps_sq_mlx4_inline_cap(uint32_t stride)
{
	return QPS_MLX4_WQEBB - sizeof(struct mlx4_wqe_ctrl_seg) -
	       sizeof(struct mlx4_wqe_inline_seg) +
	       (stride / QPS_MLX4_WQEBB - 1) *
	       (QPS_MLX4_WQEBB - sizeof(struct mlx4_wqe_inline_seg));
}

int qps_sq_mlx4_init(struct qps_sq_mlx4 *sq, struct qps_qp *qp)
{
	const struct qps_mlx4_sq *m = &sq->m;
	uint32_t stride, cap;
	int ret;

	memset(sq, 0, sizeof(*sq));
	ret = qp->dev->ops->mlx4_sq(qp, &sq->m);
	if (ret < 0)
		return ret;
	/* What the provider hands over is checked once, here. */
	if (!m->buf || !m->wqe_cnt || (m->wqe_cnt & (m->wqe_cnt - 1)) ||
	    m->wqe_shift < 6 || m->wqe_shift > QPS_MLX4_SHIFT_MAX ||
	    !m->max_post || m->max_post + m->spare_wqes > m->wqe_cnt ||
	    !m->wrid || !m->head || !m->tail || !m->db_write)
		return -EPROTO;
	/* A new QP, or one back from RESET: the device starts at WQE 0 and
	 * holds nothing, so must the ring. A provider that kept its indices
	 * across the RESET would have us write where the device never
	 * looks. Acquire: pairs with poll_cq's release of the tail. */
	if (*m->head != 0 || __atomic_load_n(m->tail, __ATOMIC_ACQUIRE) != 0)
		return -EPROTO;
	stride = 1u << m->wqe_shift;
	cap = qps_sq_mlx4_inline_cap(stride);
	sq->qp = qp;
	sq->max_inline = qp->cap.max_inline_data < cap ?
			 qp->cap.max_inline_data : cap;
	sq->head = sq->rung = sq->tail_seen = 0;
	sq->bf = m->bf_reg && m->bf_copy && m->bf_state && m->bf_buf_size &&
		 m->bf_buf_size % QPS_MLX4_WQEBB == 0 &&
		 m->bf_buf_size <= QPS_MLX4_BF_MAX;
	return 0;
}

static uint32_t qps_sq_mlx4_free(const struct qps_sq_mlx4 *sq, uint32_t tail)
{
	uint32_t used = sq->head - tail;

	return used < sq->m.max_post ? sq->m.max_post - used : 0;
}

uint32_t qps_sq_mlx4_room(const struct qps_sq_mlx4 *sq)
{
	/* Acquire: pairs with the release of the tail by poll_cq (emu's
	 * send_wc); the slots below it are no longer read by the device. */
	return qps_sq_mlx4_free(sq, __atomic_load_n(sq->m.tail,
						    __ATOMIC_ACQUIRE));
}

/* Room for a write: the tail read last time while that leaves some,
 * which spares the device's line for most writes; else as
 * qps_sq_mlx4_room, keeping the tail it read. */
static uint32_t qps_sq_mlx4_room_update(struct qps_sq_mlx4 *sq)
{
	uint32_t room = qps_sq_mlx4_free(sq, sq->tail_seen);

	if (room)
		return room;
	/* Acquire: as in qps_sq_mlx4_room. */
	sq->tail_seen = __atomic_load_n(sq->m.tail, __ATOMIC_ACQUIRE);
	return qps_sq_mlx4_free(sq, sq->tail_seen);
}

/* Payload bytes of an inline chunk: the first shares its 64 bytes with
 * the ctrl segment, every chunk with its own header. */
#define QPS_MLX4_CHUNK0 (QPS_MLX4_WQEBB - sizeof(struct mlx4_wqe_ctrl_seg) - \
			 sizeof(struct mlx4_wqe_inline_seg))
#define QPS_MLX4_CHUNK (QPS_MLX4_WQEBB - sizeof(struct mlx4_wqe_inline_seg))

/* @n < 64 bytes as two fixed-size copies that may overlap: a datagram's
 * last chunk is short, and a copy of variable size is a library call. */
static inline void qps_sq_mlx4_copy_short(uint8_t *d, const uint8_t *s,
					  uint32_t n)
{
	if (n >= 32) {
		memcpy(d, s, 32);
		memcpy(d + n - 32, s + n - 32, 32);
	} else if (n >= 16) {
		memcpy(d, s, 16);
		memcpy(d + n - 16, s + n - 16, 16);
	} else if (n >= 8) {
		memcpy(d, s, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4) {
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else if (n) {
		d[0] = s[0];
		d[n - 1] = s[n - 1];
		d[n / 2] = s[n / 2];
	}
}

/* One chunk: @n bytes of data, then its byte count. As libmlx4: the data
 * before the count, so a device prefetching 64-byte chunks never pairs a
 * valid count with stale data. */
static inline void qps_sq_mlx4_chunk(struct mlx4_wqe_inline_seg *seg,
				     const uint8_t *src, uint32_t n)
{
	if (n == QPS_MLX4_CHUNK)	/* a whole one: a fixed-size copy */
		memcpy(seg + 1, src, QPS_MLX4_CHUNK);
	else if (n == QPS_MLX4_CHUNK0)
		memcpy(seg + 1, src, QPS_MLX4_CHUNK0);
	else
		qps_sq_mlx4_copy_short((uint8_t *)(seg + 1), src, n);
	qps_udma_to_device_barrier();
	seg->byte_count = htobe32(MLX4_INLINE_SEG | n);
}

/* The chunks after the first, from the WQE's second 64 bytes on: @len
 * bytes of @src. Returns how many. */
static uint32_t qps_sq_mlx4_inline_rest(uint8_t *wqe, const uint8_t *src,
					uint32_t len)
{
	uint32_t off = QPS_MLX4_WQEBB, nseg = 0, n;

	for (; len; src += n, len -= n, off += QPS_MLX4_WQEBB) {
		n = len < QPS_MLX4_CHUNK ? len : (uint32_t)QPS_MLX4_CHUNK;
		qps_sq_mlx4_chunk((void *)(wqe + off), src, n);
		nseg++;
	}
	return nseg;
}

/* Inline chunks of at most 64 bytes, headers included; returns the bytes
 * written after the ctrl segment. */
static uint32_t qps_sq_mlx4_inline(uint8_t *wqe, const uint8_t *src,
				   uint32_t len)
{
	uint32_t n = len < QPS_MLX4_CHUNK0 ? len : (uint32_t)QPS_MLX4_CHUNK0;
	uint32_t nseg;

	qps_sq_mlx4_chunk((void *)(wqe + sizeof(struct mlx4_wqe_ctrl_seg)),
			  src, n);
	nseg = 1 + qps_sq_mlx4_inline_rest(wqe, src + n, len - n);
	return len + nseg * (uint32_t)sizeof(struct mlx4_wqe_inline_seg);
}

_Static_assert(QPS_HDRS_LEN <= QPS_MLX4_CHUNK0,
	       "a frame's headers fit in the first inline chunk");

/* As qps_sq_mlx4_inline, for the frame @f: its headers, built in the
 * first chunk, then its payload. */
static uint32_t qps_sq_mlx4_inline_pieces(uint8_t *wqe,
					  const struct qps_tx_frame *f)
{
	struct mlx4_wqe_inline_seg *seg =
		(void *)(wqe + sizeof(struct mlx4_wqe_ctrl_seg));
	uint8_t *d = (uint8_t *)(seg + 1);
	uint32_t n = QPS_MLX4_CHUNK0 - QPS_HDRS_LEN, i, nseg;

	if (n > f->plen)
		n = f->plen;
	qps_tx_frame_hdrs(d, f);
	/* A byte or two: a loop, not a call. */
	for (i = 0; i < n; i++)
		d[QPS_HDRS_LEN + i] = f->payload[i];
	qps_udma_to_device_barrier();
	seg->byte_count = htobe32(MLX4_INLINE_SEG | (QPS_HDRS_LEN + n));
	nseg = 1;
	/* An empty payload may have no address at all. */
	if (f->plen > n)
		nseg += qps_sq_mlx4_inline_rest(wqe, f->payload + n,
						f->plen - n);
	return QPS_HDRS_LEN + f->plen +
	       nseg * (uint32_t)sizeof(struct mlx4_wqe_inline_seg);
}

/* 0xffffffff in the first dword of every chunk but the first of the WQE
 * at @ind, over its old size: a device reading ahead stops there. */
static void qps_sq_mlx4_stamp(struct qps_sq_mlx4 *sq, uint32_t ind)
{
	uint8_t *wqe = qps_sq_mlx4_slot(sq, ind);
	const struct mlx4_wqe_ctrl_seg *ctrl = (const void *)wqe;
	uint32_t size = (uint32_t)(ctrl->fence_size & 0x3f) * 16;
	uint32_t stride = 1u << sq->m.wqe_shift;
	uint32_t off;

	if (size > stride)
		size = stride;
	for (off = QPS_MLX4_WQEBB; off < size; off += QPS_MLX4_WQEBB)
		*(uint32_t *)(void *)(wqe + off) = QPS_MLX4_STAMP;
}

/* The owner word of the WQE at @ind: SEND, and the owner bit of its lap
 * of the ring. */
static uint32_t qps_sq_mlx4_owner(const struct qps_sq_mlx4 *sq, uint32_t ind)
{
	return htobe32(MLX4_OPCODE_SEND |
		       ((ind & sq->m.wqe_cnt) ? QPS_MLX4_OWNER : 0));
}

/* Hand the WQE at @ind to the device. Release: pairs with the device's
 * acquire of owner_opcode (emu's engine; udma_to_device_barrier on
 * hardware): the segments, ctrl flags and wr_id are visible before
 * ownership passes. */
static void qps_sq_mlx4_give(struct qps_sq_mlx4 *sq, uint32_t ind)
{
	struct mlx4_wqe_ctrl_seg *ctrl = (void *)qps_sq_mlx4_slot(sq, ind);

	__atomic_store_n(&ctrl->owner_opcode, qps_sq_mlx4_owner(sq, ind),
			 __ATOMIC_RELEASE);
}

/* Room for the WQE at sq->head: the one before it, not the last before
 * the ring after all, goes as written. -ENOSPC when the ring is full.
 * This and qps_sq_mlx4_end are the two halves of every write, inlined
 * into each (a call per WQE costs more than they do). */
static inline __attribute__((always_inline)) int
qps_sq_mlx4_begin(struct qps_sq_mlx4 *sq)
{
	if (!qps_sq_mlx4_room_update(sq))
		return -ENOSPC;
	if (sq->head != sq->rung)
		qps_sq_mlx4_give(sq, sq->head - 1);
	return 0;
}

/* The ctrl segment of the WQE at sq->head (@wqe), whose segments (@bytes
 * after the ctrl segment) are written, and its wr_id; then it is the
 * newest. */
static inline __attribute__((always_inline)) void
qps_sq_mlx4_end(struct qps_sq_mlx4 *sq, uint8_t *wqe, uint32_t bytes,
		uint64_t wr_id, bool signaled, uint32_t csum)
{
	uint32_t ind = sq->head;
	struct mlx4_wqe_ctrl_seg *ctrl = (void *)wqe;

	ctrl->bf_qpn = 0;
	ctrl->fence_size = (uint8_t)(1 + (bytes + 15) / 16);
	ctrl->srcrb_flags = htobe32(MLX4_WQE_CTRL_SOLICIT | csum |
				    (signaled ? MLX4_WQE_CTRL_CQ_UPDATE : 0));
	ctrl->imm = 0;
	sq->m.wrid[ind & (sq->m.wqe_cnt - 1)] = wr_id;
	/* The owner word still holds the previous lap's: the device does not
	 * take this WQE before qps_sq_mlx4_give(). The slot spare_wqes
	 * ahead held a WQE that completed (room above guarantees it): stamp
	 * it for the device's prefetcher. */
	qps_sq_mlx4_stamp(sq, ind + sq->m.spare_wqes);
	sq->head = ind + 1;
	*sq->m.head = sq->head;
}

/*
 * Write one SEND WQE for @frame: inline when it fits, else one data
 * segment (@lkey must cover the frame until its completion); @signaled:
 * it asks for a completion; @csum: the ctrl segment's checksum flags
 * (MLX4_WQE_CTRL_IP_HDR_CSUM, MLX4_WQE_CTRL_TCP_UDP_CSUM) or 0. The
 * device gets it, unchanged, when the next WQE is written, or with
 * CQ_UPDATE set when qps_sq_mlx4_ring() runs (see the top of this file).
 * -ENOSPC when the ring is full, -EINVAL for an empty frame.
 */
int qps_sq_mlx4_write(struct qps_sq_mlx4 *sq, const void *frame,
		      uint32_t len, uint32_t lkey, uint64_t wr_id,
		      bool signaled, uint32_t csum)
{
	uint8_t *wqe = qps_sq_mlx4_slot(sq, sq->head);
	uint32_t bytes;
	int ret;

	if (!len || !frame)
		return -EINVAL;
	ret = qps_sq_mlx4_begin(sq);
	if (ret < 0)
		return ret;
	if (len <= sq->max_inline) {
		bytes = qps_sq_mlx4_inline(wqe, frame, len);
	} else {
		mlx4dv_set_data_seg((void *)(wqe +
					     sizeof(struct mlx4_wqe_ctrl_seg)),
				    len, lkey, (uintptr_t)frame);
		bytes = sizeof(struct mlx4_wqe_data_seg);
	}
	qps_sq_mlx4_end(sq, wqe, bytes, wr_id, signaled, csum);
	return 0;
}

/* As qps_sq_mlx4_write, for the frame @f, inline: -EMSGSIZE when it does
 * not fit. */
int qps_sq_mlx4_write_pieces(struct qps_sq_mlx4 *sq,
			     const struct qps_tx_frame *f, uint64_t wr_id,
			     bool signaled, uint32_t csum)
{
	uint8_t *wqe;
	int ret;

	if (!f->tmpl || (f->plen && !f->payload))
		return -EINVAL;
	/* Above max_inline: it does not fit; that is always below the
	 * largest UDP payload, so the headers can be built. */
	if (QPS_HDRS_LEN + f->plen > sq->max_inline)
		return -EMSGSIZE;
	ret = qps_sq_mlx4_begin(sq);
	if (ret < 0)
		return ret;
	wqe = qps_sq_mlx4_slot(sq, sq->head);
	qps_sq_mlx4_end(sq, wqe, qps_sq_mlx4_inline_pieces(wqe, f), wr_id,
			signaled, csum);
	return 0;
}

/*
 * One BlueFlame write of the @bytes of @img. The register is the device
 * context's, shared by all its send queues (provider.h): its lock makes
 * the choice of half, the WC stores and their flush one step, as
 * libmlx4's bf_lock does. The lock is taken after the caller's barrier;
 * qps_mmio_wc_start() keeps our earlier stores ahead of the WC burst on
 * CPUs where taking a lock does not, and the flush before the unlock
 * empties the WC buffer before the next writer fills it.
 */
static void qps_sq_mlx4_bf_write(struct qps_sq_mlx4 *sq, const void *img,
				 uint32_t bytes)
{
	struct qps_mlx4_bf_state *bf = sq->m.bf_state;

	/* A register with one writer (bf_alone) is serialised by that
	 * queue's lock already, as libmlx4 drops its bf_lock for a
	 * single-threaded context. */
	if (!sq->bf_alone)
		pthread_spin_lock(&bf->lock);
	qps_mmio_wc_start();
	sq->m.bf_copy(sq->qp, (uint8_t *)sq->m.bf_reg + bf->off, img, bytes);
	qps_mmio_flush_writes();
	/* Alternate halves: back-to-back writes never share a
	 * write-combining buffer. */
	bf->off ^= sq->m.bf_buf_size;
	if (!sq->bf_alone)
		pthread_spin_unlock(&bf->lock);
}

/*
 * Wake the device for every WQE written since the last call. Returns
 * QPS_SQ_RANG_BF, QPS_SQ_RANG_DB, or QPS_SQ_RANG_NONE when nothing waited.
 */
int qps_sq_mlx4_ring(struct qps_sq_mlx4 *sq)
{
	struct mlx4_wqe_ctrl_seg *ctrl;
	uint32_t last, bytes;

	if (sq->head == sq->rung)
		return QPS_SQ_RANG_NONE;
	last = sq->head - 1;
	sq->rung = sq->head;
	ctrl = (void *)qps_sq_mlx4_slot(sq, last);
	/* The last WQE before the doorbell asks for a completion, so every
	 * WQE rung here is reaped without waiting for a later one. Still
	 * ours (owner word held back): plain stores, published by the
	 * release that gives it. */
	ctrl->srcrb_flags |= htobe32(MLX4_WQE_CTRL_CQ_UPDATE);
	bytes = ((uint32_t)(ctrl->fence_size & 0x3f) * 16 +
		 QPS_MLX4_WQEBB - 1) & ~(QPS_MLX4_WQEBB - 1);
	if (sq->bf && bytes <= sq->m.bf_buf_size) {
		/* The WQE is its own register image, as libmlx4 and mlx4_en
		 * build it in the ring: our QP number over the vlan bytes
		 * and its index in the owner word, both of which the device
		 * ignores when it fetches the WQE from the ring instead. */
		ctrl->bf_qpn |= sq->m.doorbell_qpn;
		/* Release: as qps_sq_mlx4_give(). */
		__atomic_store_n(&ctrl->owner_opcode,
				 qps_sq_mlx4_owner(sq, last) |
				 htobe32((last & 0xffff) << 8),
				 __ATOMIC_RELEASE);
		/* The earlier unrung WQEs in the ring are visible before
		 * the register write that makes the device run them; the
		 * device reads their owner words with acquire. */
		qps_udma_to_device_barrier();
		qps_sq_mlx4_bf_write(sq, ctrl, bytes);
		return QPS_SQ_RANG_BF;
	}
	qps_sq_mlx4_give(sq, last);
	/* The WQEs before the doorbell write (as above). */
	qps_udma_to_device_barrier();
	sq->m.db_write(sq->qp, sq->m.doorbell_qpn);
	return QPS_SQ_RANG_DB;
}

/* The send-path table (sq_path.h) over the functions above. */
static int qps_sq_mlx4_path_init(struct qps_sq *sq)
{
	int ret = qps_sq_mlx4_init(&sq->mlx4, sq->qp);

	/* The context's only send queue is the register's only writer
	 * (provider.h: one register per device context, one context per
	 * device open). */
	sq->mlx4.bf_alone = sq->ctx->nsq == 1;
	sq->pieces_max = ret < 0 ? 0 : sq->mlx4.max_inline;
	return ret;
}

static uint32_t qps_sq_mlx4_path_room(const struct qps_sq *sq)
{
	return qps_sq_mlx4_room(&sq->mlx4);
}

static int qps_sq_mlx4_path_write(struct qps_sq *sq, uint32_t slot,
				  const struct qps_tx_frame *f, uint32_t len,
				  bool signaled)
{
	const struct qps_ctx *ctx = sq->ctx;
	/* As libmlx4 turns IBV_SEND_IP_CSUM into a raw-packet WQE. */
	uint32_t csum = (sq->meta[slot].flags & QPS_TXM_CSUM) ?
			MLX4_WQE_CTRL_IP_HDR_CSUM |
			MLX4_WQE_CTRL_TCP_UDP_CSUM : 0;

	if (f)
		return qps_sq_mlx4_write_pieces(&sq->mlx4, f, slot, signaled,
						csum);
	return qps_sq_mlx4_write(&sq->mlx4,
				 sq->buf + (size_t)slot * ctx->tx_slot_size,
				 len, ctx->tx_mr->lkey, slot, signaled, csum);
}

static int qps_sq_mlx4_path_ring(struct qps_sq *sq, uint32_t *bf)
{
	int ret = qps_sq_mlx4_ring(&sq->mlx4);

	*bf = ret == QPS_SQ_RANG_BF;
	return ret != QPS_SQ_RANG_NONE;
}

const struct qps_sq_path qps_sq_path_mlx4 = {
	.name = "mlx4",
	.init = qps_sq_mlx4_path_init,
	/* After RESET the ring is taken over again, and must have
	 * restarted at WQE 0 (qps_sq_mlx4_init checks). */
	.reset = qps_sq_mlx4_path_init,
	.room = qps_sq_mlx4_path_room,
	.write = qps_sq_mlx4_path_write,
	.ring = qps_sq_mlx4_path_ring,
};
