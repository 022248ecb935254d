// SPDX-License-Identifier: MIT
/*
 * Completion queues in mlx4 CQE layout, in the port's shared queue area
 * (receive CQEs are written by the sending process).
 *
 * CQE n belongs to software when its owner bit (0x80 of owner_sr_opcode)
 * equals !!(n & cqe_cnt); the ring starts with every owner bit set, i.e.
 * invalid for the first pass. Producers write under the port's rx_lock
 * and never overwrite a CQE the owner has not consumed (cons).
 *
 * Events: each port has a non-blocking AF_UNIX datagram socket bound to
 * an abstract name (wire, port, generation). The producer of a CQE on an
 * armed CQ disarms it and sends one byte there.
 *
 * Overrun: a producer that finds the CQ full drops its CQE (never
 * overwrites) and sets the CQ's overrun flag; the next poll_cq that finds
 * the CQ empty clears it and returns -EIO, once. On hardware the CQ would
 * go to error with an asynchronous event; here it stays usable, and the
 * caller learns that completions were lost.
 */
#include "emu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define EMU_CQE_SIZE sizeof(struct mlx4_cqe)

_Static_assert(sizeof(struct mlx4_cqe) == 32, "mlx4 CQE is 32 bytes");
_Static_assert(sizeof(struct mlx4_err_cqe) == 32, "mlx4 error CQE size");
_Static_assert(offsetof(struct mlx4_cqe, owner_sr_opcode) == 31,
	       "owner byte is last");
_Static_assert(offsetof(struct mlx4_err_cqe, owner_sr_opcode) == 31,
	       "owner byte is last");

static socklen_t event_addr(const char *wire, unsigned int port, uint32_t gen,
			    struct sockaddr_un *a)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* Abstract namespace: sun_path[0] = 0, nothing on the filesystem. */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "qpsock-emu/%s/%u/%u", wire, port, gen);
	if (n < 0 || (size_t)n >= sizeof(a->sun_path) - 1)
		n = (int)sizeof(a->sun_path) - 2;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

int qps_emu_event_open(struct qps_emu_dev *dev)
{
	struct sockaddr_un a;
	socklen_t alen = event_addr(dev->wire.name, dev->port, dev->gen, &a);
	int fd;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, alen) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	if (dev->evfd >= 0)
		close(dev->evfd);
	dev->evfd = fd;
	return 0;
}

void qps_emu_notify(struct qps_emu_dev *dev, unsigned int port, uint32_t gen)
{
	struct sockaddr_un a;
	socklen_t alen = event_addr(dev->wire.name, port, gen, &a);
	char b = 0;

	/* EAGAIN: the queue is full, so an event is pending already. */
	(void)sendto(dev->evfd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
		     (struct sockaddr *)&a, alen);
}

int qps_emu_get_event_fd(struct qps_dev *d)
{
	return qps_emu_dev(d)->evfd;
}

/* One event socket per port: every CQ's events arrive on it. */
int qps_emu_get_cq_event_fd(struct qps_cq *c)
{
	return qps_emu_dev(c->dev)->evfd;
}

int qps_emu_ack_events(struct qps_dev *d)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	char buf[64];
	int n = 0;

	while (recv(dev->evfd, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		n++;
	return n;
}

/* Geometry of CQ @slot as found in shared memory; NULL when it fails
 * validation (a peer may have scribbled on it). rx_lock held. */
static struct qps_emu_shm_cq *cq_checked(struct qps_emu_shm_port *sp,
					 unsigned int slot)
{
	struct qps_emu_shm_cq *scq;
	uint64_t off;
	uint32_t cnt;

	if (slot >= QPS_EMU_MAX_CQ)
		return NULL;
	scq = &sp->cq[slot];
	cnt = scq->cqe_cnt;
	off = scq->ring_off;
	if (scq->state != QPS_EMU_SLOT_ACTIVE || !qps_emu_is_pow2(cnt) ||
	    cnt > QPS_EMU_MAX_CQE || off % EMU_CQE_SIZE ||
	    off > QPS_EMU_QAREA_SIZE ||
	    (uint64_t)cnt * EMU_CQE_SIZE > QPS_EMU_QAREA_SIZE - off)
		return NULL;
	return scq;
}

static enum qps_emu_cqe_res room(struct qps_emu_shm_cq *scq)
{
	/* Acquire: pairs with poll_cq's release store of cons; the owner has
	 * finished reading the slot that is about to be overwritten. */
	uint32_t cons = __atomic_load_n(&scq->cons, __ATOMIC_ACQUIRE);
	uint32_t used = scq->prod - cons;

	if (used > scq->cqe_cnt)
		return QPS_EMU_CQE_CORRUPT;
	if (used < scq->cqe_cnt)
		return QPS_EMU_CQE_OK;
	/* Relaxed: the owner reads it after the entries it polled, and a
	 * late flag only delays the report by one poll. */
	__atomic_store_n(&scq->overrun, 1, __ATOMIC_RELAXED);
	return QPS_EMU_CQE_FULL;
}

enum qps_emu_cqe_res qps_emu_cq_room(struct qps_emu_shm_port *sp,
				     unsigned int slot)
{
	struct qps_emu_shm_cq *scq = cq_checked(sp, slot);

	return scq ? room(scq) : QPS_EMU_CQE_CORRUPT;
}

enum qps_emu_cqe_res qps_emu_cq_write(struct qps_emu_shm_port *sp,
				      uint8_t *qarea, unsigned int slot,
				      const struct qps_emu_cqe_info *ci)
{
	struct qps_emu_shm_cq *scq = cq_checked(sp, slot);
	enum qps_emu_cqe_res res;
	struct mlx4_cqe tmp, *cqe;
	uint32_t prod, cnt, idx;
	uint64_t off, stamp;
	uint8_t op;

	if (!scq)
		return QPS_EMU_CQE_CORRUPT;
	res = room(scq);
	if (res != QPS_EMU_CQE_OK)
		return res;
	/* Each read once and the slot bounded again: a peer that ignores
	 * rx_lock may rewrite the geometry after cq_checked() looked. */
	prod = scq->prod;
	cnt = __atomic_load_n(&scq->cqe_cnt, __ATOMIC_RELAXED);
	off = __atomic_load_n(&scq->ring_off, __ATOMIC_RELAXED);
	idx = prod & (cnt - 1);
	if (!cnt || off > QPS_EMU_QAREA_SIZE ||
	    ((uint64_t)idx + 1) * EMU_CQE_SIZE > QPS_EMU_QAREA_SIZE - off)
		return QPS_EMU_CQE_CORRUPT;
	cqe = (struct mlx4_cqe *)(void *)(qarea + off) + idx;
	memset(&tmp, 0, sizeof(tmp));
	tmp.vlan_my_qpn = htobe32(ci->qpn & MLX4_CQE_QPN_MASK);
	tmp.wqe_index = htobe16(ci->wqe_index);
	if (ci->opcode == MLX4_CQE_OPCODE_ERROR) {
		struct mlx4_err_cqe *e = (void *)&tmp;

		e->syndrome = ci->syndrome;
		e->vendor_err = 0;
	} else {
		tmp.byte_cnt = htobe32(ci->byte_cnt);
		tmp.status = htobe32(ci->status);
		tmp.checksum = htobe16(ci->checksum);
		tmp.immed_rss_invalid = ci->imm;
		tmp.g_mlpath_rqpn = htobe32((ci->grh ? 0x80000000u : 0) |
					    (ci->src_qp & 0xffffff));
	}
	/* The device's clock when it wrote the CQE, as a NIC stamps it. */
	stamp = qps_emu_clock_now();
	tmp.ts_47_16 = htobe32((uint32_t)(stamp >> 16));
	tmp.ts_15_8 = (uint8_t)(stamp >> 8);
	tmp.ts_7_0 = (uint8_t)stamp;
	op = (uint8_t)((ci->opcode & MLX4_CQE_OPCODE_MASK) |
		       (ci->is_send ? MLX4_CQE_IS_SEND_MASK : 0) |
		       ((prod & cnt) ? MLX4_CQE_OWNER_MASK : 0));
	memcpy(cqe, &tmp, offsetof(struct mlx4_cqe, owner_sr_opcode));
	/* Release (as part of seq-cst): pairs with poll_cq's acquire load of
	 * owner_sr_opcode; the CQE body is visible before the entry turns
	 * valid. Seq-cst with the disarm below: together with the arm and
	 * check in qps_emu_req_notify_cq() (seq-cst too), either we see
	 * the arm or the arming side sees this CQE; no event is lost. */
	__atomic_store_n(&cqe->owner_sr_opcode, op, __ATOMIC_SEQ_CST);
	scq->prod = prod + 1;
	if (__atomic_exchange_n(&scq->armed, 0, __ATOMIC_SEQ_CST))
		return QPS_EMU_CQE_NOTIFY;
	return QPS_EMU_CQE_OK;
}

int qps_emu_create_cq(struct qps_dev *d, int cqe, struct qps_cq **cq_out)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	struct qps_emu_shm_cq *scq;
	struct qps_emu_cq *cq;
	unsigned int slot;
	uint32_t i, cnt;
	uint64_t off;
	int r;

	if (cqe < 1 || (uint32_t)cqe > QPS_EMU_MAX_CQE || !cq_out)
		return -EINVAL;
	cnt = qps_emu_roundup_pow2((uint32_t)cqe);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	pthread_mutex_init(&cq->poll_lock, NULL);
	pthread_mutex_lock(&dev->lock);
	for (slot = 0; slot < QPS_EMU_MAX_CQ && dev->cq[slot]; slot++)
		;
	r = -ENOMEM;
	if (slot == QPS_EMU_MAX_CQ)
		goto err;
	r = qps_emu_heap_alloc(&dev->qarea_heap, (uint64_t)cnt * EMU_CQE_SIZE,
			       64, &off);
	if (r)
		goto err;
	cq->ring = (struct mlx4_cqe *)(void *)(dev->qarea + off);
	memset(cq->ring, 0, (size_t)cnt * EMU_CQE_SIZE);
	for (i = 0; i < cnt; i++)
		cq->ring[i].owner_sr_opcode = MLX4_CQE_OWNER_MASK;
	r = qps_emu_lock(&dev->sp->rx_lock);
	if (r < 0) {
		qps_emu_heap_free(&dev->qarea_heap, off,
				  (uint64_t)cnt * EMU_CQE_SIZE);
		goto err;
	}
	scq = &dev->sp->cq[slot];
	scq->cqe_cnt = cnt;
	scq->ring_off = off;
	scq->prod = 0;
	scq->cons = 0;
	scq->armed = 0;
	scq->overrun = 0;
	scq->state = QPS_EMU_SLOT_ACTIVE;
	qps_emu_unlock(&dev->sp->rx_lock);
	cq->slot = slot;
	cq->cqe_cnt = cnt;
	cq->ring_off = off;
	cq->base.dev = d;
	cq->base.cqe = (int)cnt;
	dev->cq[slot] = cq;
	pthread_mutex_unlock(&dev->lock);
	*cq_out = &cq->base;
	return 0;
err:
	pthread_mutex_unlock(&dev->lock);
	pthread_mutex_destroy(&cq->poll_lock);
	free(cq);
	return r;
}

int qps_emu_destroy_cq(struct qps_cq *c)
{
	struct qps_emu_dev *dev = qps_emu_dev(c->dev);
	struct qps_emu_cq *cq = qps_emu_cq(c);

	pthread_mutex_lock(&dev->lock);
	if (cq->users) {
		pthread_mutex_unlock(&dev->lock);
		return -EBUSY;
	}
	if (qps_emu_owner(dev) && qps_emu_lock(&dev->sp->rx_lock) >= 0) {
		dev->sp->cq[cq->slot].state = QPS_EMU_SLOT_FREE;
		qps_emu_unlock(&dev->sp->rx_lock);
	}
	qps_emu_heap_free(&dev->qarea_heap, cq->ring_off,
			  (uint64_t)cq->cqe_cnt * EMU_CQE_SIZE);
	dev->cq[cq->slot] = NULL;
	pthread_mutex_unlock(&dev->lock);
	pthread_mutex_destroy(&cq->poll_lock);
	free(cq);
	return 0;
}

static enum ibv_wc_status syndrome_status(uint8_t syn)
{
	switch (syn) {
	case MLX4_CQE_SYNDROME_LOCAL_LENGTH_ERR:
		return IBV_WC_LOC_LEN_ERR;
	case MLX4_CQE_SYNDROME_LOCAL_QP_OP_ERR:
		return IBV_WC_LOC_QP_OP_ERR;
	case MLX4_CQE_SYNDROME_LOCAL_PROT_ERR:
		return IBV_WC_LOC_PROT_ERR;
	case MLX4_CQE_SYNDROME_WR_FLUSH_ERR:
		return IBV_WC_WR_FLUSH_ERR;
	default:
		return IBV_WC_GENERAL_ERR;
	}
}

/* A send CQE completes every WQE up to its index (selective signalling);
 * the index must lie between the tail and what the engine executed. */
static int send_wc(struct qps_emu_qp *qp, const struct mlx4_cqe *cqe,
		   struct ibv_wc *wc)
{
	uint32_t tail = qp->sq_tail;
	/* Acquire: pairs with the engine's release store of ci. */
	uint32_t ci = __atomic_load_n(&qp->ci, __ATOMIC_ACQUIRE);
	uint16_t d = (uint16_t)(be16toh(cqe->wqe_index) - (uint16_t)tail);

	if ((uint32_t)d >= ci - tail)
		return -1;
	tail += d;
	wc->wr_id = qp->wrid[tail & (qp->wqe_cnt - 1)];
	wc->opcode = IBV_WC_SEND;
	if (wc->status == IBV_WC_SUCCESS)
		wc->byte_len = be32toh(cqe->byte_cnt);
	/* Release: pairs with the acquire of sq_tail in post_send and the
	 * core's direct path: these slots may be rewritten now. */
	__atomic_store_n(&qp->sq_tail, tail + 1, __ATOMIC_RELEASE);
	return 0;
}

/* Receive CQEs come in RQ order: the index must be the next polled. */
static int recv_wc(struct qps_emu_dev *dev, struct qps_emu_qp *qp,
		   const struct mlx4_cqe *cqe, struct ibv_wc *wc)
{
	uint32_t done = qp->rq_done;
	/* Acquire: pairs with post_recv's release of rq_head. */
	uint32_t head = __atomic_load_n(&qp->rq_head, __ATOMIC_ACQUIRE);
	uint32_t slot = done & (qp->rq_cnt - 1);

	if (be16toh(cqe->wqe_index) != (uint16_t)done || done == head)
		return -1;
	wc->wr_id = qp->rq_wrid[slot];
	wc->opcode = IBV_WC_RECV;
	if (wc->status == IBV_WC_SUCCESS && qp->ud) {
		uint32_t g = be32toh(cqe->g_mlpath_rqpn);

		/* pkey_index, sl, slid and dlid_path_bits stay 0: one
		 * P_Key, untagged Ethernet, no LIDs. */
		wc->src_qp = g & 0xffffff;
		if (g & 0x80000000u)
			wc->wc_flags |= IBV_WC_GRH;
		if ((cqe->owner_sr_opcode & MLX4_CQE_OPCODE_MASK) ==
		    QPS_EMU_RECV_OPCODE_SEND_IMM) {
			wc->wc_flags |= IBV_WC_WITH_IMM;
			wc->imm_data = cqe->immed_rss_invalid;
		}
	}
	if (wc->status == IBV_WC_SUCCESS) {
		uint32_t n = be32toh(cqe->byte_cnt);

		if (n > qp->rq_len[slot]) {
			/* More than the buffer: never let the core read
			 * past it. */
			qps_emu_count(&dev->cqe_corrupt, 1);
			wc->status = IBV_WC_GENERAL_ERR;
		} else {
			wc->byte_len = n;
		}
		/* As libmlx4 on a raw-packet QP of a device with RX
		 * checksum offload (emu_csum.c). */
		if (!qp->ud &&
		    (be32toh(cqe->status) & MLX4_CQE_STATUS_IPV4_CSUM_OK) ==
		    MLX4_CQE_STATUS_IPV4_CSUM_OK)
			wc->wc_flags |= IBV_WC_IP_CSUM_OK;
	}
	/* Release: pairs with post_recv's acquire of rq_done: the slot's
	 * wr_id has been read. */
	__atomic_store_n(&qp->rq_done, done + 1, __ATOMIC_RELEASE);
	return 0;
}

static int cqe_to_wc(struct qps_emu_dev *dev, struct qps_emu_cq *cq,
		     const struct mlx4_cqe *cqe, uint8_t own,
		     struct ibv_wc *wc)
{
	uint32_t qpn = be32toh(cqe->vlan_my_qpn) & MLX4_CQE_QPN_MASK;
	uint8_t opcode = own & MLX4_CQE_OPCODE_MASK;
	bool is_send = own & MLX4_CQE_IS_SEND_MASK;
	struct qps_emu_qp *qp;

	if (!qpn)
		return -1;	/* cleaned when its QP was destroyed */
	qp = qps_emu_qp_by_qpn(dev, qpn);
	if (!qp)
		goto corrupt;
	memset(wc, 0, sizeof(*wc));
	wc->qp_num = qpn;
	if (opcode == MLX4_CQE_OPCODE_ERROR) {
		const struct mlx4_err_cqe *e = (const void *)cqe;

		wc->status = syndrome_status(e->syndrome);
		wc->vendor_err = e->vendor_err;
	} else {
		wc->status = IBV_WC_SUCCESS;
	}
	if (is_send) {
		if (qp->base.send_cq != &cq->base ||
		    (opcode != MLX4_OPCODE_SEND &&
		     opcode != MLX4_CQE_OPCODE_ERROR) ||
		    send_wc(qp, cqe, wc))
			goto corrupt;
	} else {
		if (!qp->has_rq || qp->base.recv_cq != &cq->base ||
		    (opcode != QPS_EMU_RECV_OPCODE_SEND &&
		     opcode != MLX4_CQE_OPCODE_ERROR &&
		     !(qp->ud && opcode == QPS_EMU_RECV_OPCODE_SEND_IMM)) ||
		    recv_wc(dev, qp, cqe, wc))
			goto corrupt;
	}
	return 0;
corrupt:
	qps_emu_count(&dev->cqe_corrupt, 1);
	return -1;
}

/* The 48-bit device clock a CQE was stamped with (qps_emu_cq_write). */
static uint64_t cqe_stamp(const struct mlx4_cqe *cqe)
{
	return (uint64_t)be32toh(cqe->ts_47_16) << 16 |
	       (uint64_t)cqe->ts_15_8 << 8 | cqe->ts_7_0;
}

static int emu_poll(struct qps_cq *c, int num, struct ibv_wc *wc,
		    struct qps_wc_ts *ts)
{
	struct qps_emu_dev *dev = qps_emu_dev(c->dev);
	struct qps_emu_cq *cq = qps_emu_cq(c);
	uint32_t cons;
	int n = 0;

	if (num < 0 || (num && !wc))
		return -EINVAL;
	pthread_mutex_lock(&cq->poll_lock);
	cons = cq->cons;
	while (n < num) {
		struct mlx4_cqe *cqe = &cq->ring[cons & (cq->cqe_cnt - 1)];
		struct mlx4_cqe tmp;
		/* Acquire: pairs with the (seq-cst, so releasing) store of
		 * owner_sr_opcode in qps_emu_cq_write(). */
		uint8_t own = __atomic_load_n(&cqe->owner_sr_opcode,
					      __ATOMIC_ACQUIRE);

		if (!!(own & MLX4_CQE_OWNER_MASK) != !!(cons & cq->cqe_cnt))
			break;
		memcpy(&tmp, cqe, sizeof(tmp));
		cons++;
		if (cqe_to_wc(dev, cq, &tmp, own, &wc[n]))
			continue;
		if (ts) {
			ts[n].val = cqe_stamp(&tmp);
			ts[n].clock = QPS_WC_TS_DEV;
		}
		n++;
	}
	if (cons != cq->cons) {
		cq->cons = cons;
		/* Release: pairs with the producers' acquire of cons in
		 * room(); the consumed entries have been read. */
		__atomic_store_n(&dev->sp->cq[cq->slot].cons, cons,
				 __ATOMIC_RELEASE);
	}
	/* Lost completions are reported once the CQ is drained, so that
	 * nothing that did arrive is held back by the error. */
	if (!n && num > 0 &&
	    __atomic_exchange_n(&dev->sp->cq[cq->slot].overrun, 0,
				__ATOMIC_RELAXED))
		n = -EIO;
	pthread_mutex_unlock(&cq->poll_lock);
	return n;
}

int qps_emu_poll_cq(struct qps_cq *c, int num, struct ibv_wc *wc)
{
	return emu_poll(c, num, wc, NULL);
}

int qps_emu_poll_cq_ts(struct qps_cq *c, int num, struct ibv_wc *wc,
		       struct qps_wc_ts *ts)
{
	if (num > 0 && !ts)
		return -EINVAL;
	return emu_poll(c, num, wc, ts);
}

int qps_emu_req_notify_cq(struct qps_cq *c)
{
	struct qps_emu_dev *dev = qps_emu_dev(c->dev);
	struct qps_emu_cq *cq = qps_emu_cq(c);
	struct qps_emu_shm_cq *scq = &dev->sp->cq[cq->slot];
	const struct mlx4_cqe *cqe;
	bool fire = false;
	uint8_t own;

	pthread_mutex_lock(&cq->poll_lock);
	/* Seq-cst arm, then seq-cst check: pairs with the owner store and
	 * disarm in qps_emu_cq_write(). A CQE that landed before the arm
	 * would otherwise never fire (the HCA compares with the consumer
	 * index given at arm time too). */
	__atomic_store_n(&scq->armed, 1, __ATOMIC_SEQ_CST);
	cqe = &cq->ring[cq->cons & (cq->cqe_cnt - 1)];
	own = __atomic_load_n(&cqe->owner_sr_opcode, __ATOMIC_SEQ_CST);
	/* The exchange races with a producer's disarm: one event, not two. */
	if (!!(own & MLX4_CQE_OWNER_MASK) == !!(cq->cons & cq->cqe_cnt) &&
	    __atomic_exchange_n(&scq->armed, 0, __ATOMIC_ACQ_REL))
		fire = true;
	pthread_mutex_unlock(&cq->poll_lock);
	if (fire)
		qps_emu_notify(dev, dev->port, dev->gen);
	return 0;
}

void qps_emu_inject_cq_overrun(struct qps_cq *c)
{
	__atomic_store_n(&qps_emu_test_shm_cq(c)->overrun, 1,
			 __ATOMIC_RELAXED);
}

struct qps_emu_shm_cq *qps_emu_test_shm_cq(struct qps_cq *c)
{
	return &qps_emu_dev(c->dev)->sp->cq[qps_emu_cq(c)->slot];
}
