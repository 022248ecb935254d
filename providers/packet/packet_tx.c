// SPDX-License-Identifier: MIT
/*
 * Send side: one TPACKET_V2 TX ring per QP.
 *
 * post_send copies each WR's frame into the next ring frame and hands it
 * to the kernel (TP_STATUS_SEND_REQUEST); the chain ends with one kick,
 * a zero-length send(), which is this provider's doorbell. The
 * kernel turns the frame SENDING and back to AVAILABLE once the skb is
 * freed (at once on veth, at TX completion on a NIC): that is the send
 * completion, reaped in WR order by polling the send CQ.
 *
 * A WR the ring must not see (frame above MTU + 14 bytes, shorter than an
 * Ethernet header, or outside its memory region) takes no ring frame; it
 * completes with an error in its place in the order. The kernel walks the
 * ring strictly in order, so frames are always used contiguously.
 *
 * The socket has protocol 0 (it never receives) and PACKET_QDISC_BYPASS
 * (no qdisc, no taps: tcpdump cannot see these frames). Not PACKET_LOSS:
 * with it the kernel skips a frame it cannot send (one above an MTU
 * lowered after the post) and hands it back AVAILABLE, exactly as a sent
 * one, so the loss would pass for a success. Without it the frame comes
 * back WRONG_FORMAT, the kick fails (EMSGSIZE) and the kernel stops at
 * it: tx_flush_unsent() completes it with an error and rewinds the ring
 * to it, where the kernel's position is.
 */
#define _GNU_SOURCE	/* strerrordesc_np: strerror is not thread safe */
#include "packet.h"

#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PKT_TX_DATA TPACKET_ALIGN(sizeof(struct tpacket2_hdr))
#define PKT_TX_BUSY (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING)

static struct tpacket2_hdr *tx_frame(struct qps_packet_qp *qp, uint32_t seq)
{
	return (struct tpacket2_hdr *)(void *)(qp->tx.map +
		(size_t)(seq & (qp->tx.frame_nr - 1)) * qp->tx.frame_size);
}

static uint32_t tx_status(struct qps_packet_qp *qp, uint32_t seq)
{
	/* Acquire: pairs with the kernel's status store after it finished
	 * with the frame (tpacket_destruct_skb, smp_wmb); the frame may be
	 * rewritten once it reads AVAILABLE. */
	return __atomic_load_n(&tx_frame(qp, seq)->tp_status, __ATOMIC_ACQUIRE);
}

int qps_packet_tx_open(struct qps_packet_dev *dev, struct qps_packet_qp *qp)
{
	struct sockaddr_ll sll;
	uint32_t fsize;
	int one = 1, buf, ret;

	qp->tx_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (qp->tx_fd < 0) {
		ret = -errno;
		if (ret == -EPERM || ret == -EACCES)
			qps_packet_log("AF_PACKET needs CAP_NET_RAW (run as "
				       "root or setcap cap_net_raw+ep)");
		return ret;
	}
	/* Best effort: kernels before 3.14 have no bypass. */
	(void)setsockopt(qp->tx_fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one,
			 sizeof(one));
	fsize = qps_packet_frame_size(PKT_TX_DATA + dev->info.mtu +
				      QPS_PACKET_ETH_HLEN);
	ret = qps_packet_ring_setup(qp->tx_fd, PACKET_TX_RING, fsize,
				    qp->sq_cnt, &qp->tx);
	if (ret < 0)
		return ret;
	/* Frames in flight are charged to the send buffer: make room for a
	 * full ring so the kernel does not stop half way through a kick. */
	buf = (int)(qp->tx.frame_nr * fsize);
	if (setsockopt(qp->tx_fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf,
		       sizeof(buf)) < 0)
		(void)setsockopt(qp->tx_fd, SOL_SOCKET, SO_SNDBUF, &buf,
				 sizeof(buf));
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = 0;
	sll.sll_ifindex = dev->ifindex;
	if (bind(qp->tx_fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		return -errno;
	return 0;
}

void qps_packet_tx_close(struct qps_packet_qp *qp)
{
	qps_packet_ring_unmap(&qp->tx);
	if (qp->tx_fd >= 0)
		close(qp->tx_fd);
	qp->tx_fd = -1;
}

/*
 * The kick failed for good (interface down or gone, or a frame the kernel
 * could not send: WRONG_FORMAT, where it stopped): the frames the kernel
 * did not take complete with an error (that one with a length error), and
 * the ring is rewound to the first of them, where the kernel's own
 * position still is.
 */
static void tx_flush_unsent(struct qps_packet_qp *qp, int err)
{
	uint32_t i, first = qp->tx_prod;
	bool found = false;

	for (i = qp->sq_tail; i != qp->sq_head; i++) {
		struct qps_packet_swqe *e = &qp->sq[i & (qp->sq_cnt - 1)];
		uint32_t s;

		if (!e->in_ring)
			continue;
		s = tx_status(qp, e->slot);
		if (!(s & (TP_STATUS_SEND_REQUEST | TP_STATUS_WRONG_FORMAT)))
			continue;
		if (!found)
			first = e->slot;
		found = true;
		e->in_ring = false;
		e->status = (s & TP_STATUS_WRONG_FORMAT) ? IBV_WC_LOC_LEN_ERR :
			    IBV_WC_GENERAL_ERR;
		if (s & TP_STATUS_WRONG_FORMAT)
			qps_sw_count(&qp->sq_stats.tx_len_err, 1);
		/* Release: pairs with our own acquire in tx_status(); the
		 * kernel never looks at an AVAILABLE frame. */
		__atomic_store_n(&tx_frame(qp, e->slot)->tp_status,
				 TP_STATUS_AVAILABLE, __ATOMIC_RELEASE);
		qps_sw_count(&qp->sq_stats.tx_drops, 1);
	}
	if (found) {
		const char *why = strerrordesc_np(err);

		qps_packet_log("send on QP %u failed: %s; %u frame(s) "
			       "completed with an error", qp->base.qp_num,
			       why ? why : "unknown error",
			       qp->tx_prod - first);
		qp->tx_prod = first;
	}
	qp->kick_pending = false;
}

/* The doorbell. sq_lock held. */
static void tx_kick(struct qps_packet_qp *qp)
{
	/* Length 0: the kernel sends what the ring holds and reads no
	 * buffer; any address will do. */
	static const uint8_t none;
	ssize_t r = send(qp->tx_fd, &none, 0, MSG_DONTWAIT);
	int err = errno;

	qps_sw_count(&qp->sq_stats.doorbells, 1);
	if (r < 0 && err != EAGAIN && err != ENOBUFS && err != EINTR) {
		tx_flush_unsent(qp, err);
		return;
	}
	/* The kernel stops early when the send buffer or the driver queue
	 * is full; what it left is sent by a later kick (poll_cq). */
	qp->kick_pending = qp->tx_prod != qp->tx_cons &&
		(tx_status(qp, qp->tx_prod - 1) & TP_STATUS_SEND_REQUEST);
}

/* Copy the WR's frame into ring frame @seq; an ibv_wc_status. */
static enum ibv_wc_status tx_fill(struct qps_packet_dev *dev,
				  struct qps_packet_qp *qp,
				  const struct ibv_send_wr *wr, uint32_t seq,
				  uint32_t *len_out)
{
	enum ibv_wc_status st;

	st = qps_sw_send_wr_len(&dev->mrs, wr,
				qps_packet_mtu(dev) + QPS_PACKET_ETH_HLEN,
				len_out);
	if (st == IBV_WC_SUCCESS)
		qps_sw_send_wr_copy((uint8_t *)tx_frame(qp, seq) + PKT_TX_DATA,
				    wr);
	return st;
}

int qps_packet_post_send(struct qps_qp *q, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr)
{
	struct qps_packet_qp *qp = qps_packet_qp(q);
	struct qps_packet_dev *dev = qps_packet_dev(q->dev);
	unsigned int in_ring = 0;
	int ret = 0;

	pthread_mutex_lock(&qp->sq_lock);
	for (; wr; wr = wr->next) {
		struct qps_packet_swqe *e;
		enum ibv_wc_status st;
		uint32_t len;

		if (qp->sq_head - qp->sq_tail >= qp->sq_cnt ||
		    (tx_status(qp, qp->tx_prod) & PKT_TX_BUSY)) {
			ret = -ENOMEM;	/* full, as verbs says it */
			break;
		}
		ret = qps_sw_send_wr_check(q, wr);
		if (ret)
			break;
		e = &qp->sq[qp->sq_head & (qp->sq_cnt - 1)];
		st = tx_fill(dev, qp, wr, qp->tx_prod, &len);
		e->wr_id = wr->wr_id;
		e->byte_len = len;
		e->signaled = qp->sq_sig_all ||
			      (wr->send_flags & IBV_SEND_SIGNALED);
		e->in_ring = st == IBV_WC_SUCCESS;
		e->status = (uint8_t)st;
		if (e->in_ring) {
			struct tpacket2_hdr *h = tx_frame(qp, qp->tx_prod);

			h->tp_len = len;
			e->slot = qp->tx_prod++;
			/* Release: pairs with the kernel's read of the status
			 * in tpacket_snd (smp_rmb): the frame and tp_len are
			 * in place before it is handed over. */
			__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST,
					 __ATOMIC_RELEASE);
			in_ring++;
		}
		qps_sw_sq_count(&qp->sq_stats, st);
		qp->sq_head++;
	}
	/* One doorbell for the chain, even when it stopped early: what was
	 * posted must go (verbs semantics). */
	if (in_ring || qp->kick_pending)
		tx_kick(qp);
	pthread_mutex_unlock(&qp->sq_lock);
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}

int qps_packet_tx_poll(struct qps_packet_qp *qp, int num, struct ibv_wc *wc)
{
	int n = 0;

	pthread_mutex_lock(&qp->sq_lock);
	if (qp->kick_pending) {
		qps_sw_count(&qp->rekicks, 1);
		tx_kick(qp);
	}
	while (n < num && qp->sq_tail != qp->sq_head) {
		struct qps_packet_swqe *e = &qp->sq[qp->sq_tail &
						    (qp->sq_cnt - 1)];
		enum ibv_wc_status st = (enum ibv_wc_status)e->status;

		if (e->in_ring) {
			uint32_t s = tx_status(qp, e->slot);

			if (s & PKT_TX_BUSY)
				break;
			/* Flushed by the kick that met it; never stall. */
			st = (s & TP_STATUS_WRONG_FORMAT) ? IBV_WC_LOC_LEN_ERR :
			     IBV_WC_SUCCESS;
			qp->tx_cons++;
		}
		qp->sq_tail++;
		n += qps_sw_send_wc(&wc[n], &qp->base, e->wr_id, e->byte_len,
				    st, e->signaled);
	}
	qps_sw_count(&qp->sq_stats.tx_cqes, (uint64_t)n);
	pthread_mutex_unlock(&qp->sq_lock);
	return n;
}
