// SPDX-License-Identifier: MIT
/*
 * Receive side: posted receive buffers per QP, and steering rules, each an
 * AF_PACKET socket with a TPACKET_V2 RX ring (V2, not V3: V3 hands frames
 * over per block, milliseconds late).
 *
 * Set-up order matters: the socket is created with protocol 0 (not yet on
 * the receive path), the ring and the BPF program are attached, and only
 * then is it bound to ETH_P_IP on the interface; a socket bound first
 * would queue every frame until its filter arrives. ETH_P_IP sockets
 * never see outgoing frames; PACKET_IGNORE_OUTGOING and a PACKET_OUTGOING
 * check make sure.
 *
 * Polling the receive CQ moves ring frames into posted buffers, in post
 * order, and turns each into a receive completion. A frame that finds no
 * posted buffer is dropped and counted (rx_no_buf), as a NIC does; ring
 * overruns are the kernel's tp_drops (PACKET_STATISTICS).
 *
 * Checksums: a frame the kernel flags TP_STATUS_CSUMNOTREADY was built on
 * this host (veth peer, checksum offload) and carries only a partial UDP
 * checksum, which the core's parser would reject. The provider completes
 * it in the copy it hands over, so the buffer holds the frame as it would
 * look on a wire; frames without the flag are left untouched.
 */
#include "packet.h"

#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/net_tstamp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define PKT_RX_FRAME_EXTRA 96	/* tpacket2_hdr + sockaddr_ll + alignment */
#define PKT_VLAN_HLEN 4
#define PKT_LL_OFF TPACKET_ALIGN(sizeof(struct tpacket2_hdr))

int qps_packet_post_recv(struct qps_qp *q, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr)
{
	struct qps_packet_dev *dev = qps_packet_dev(q->dev);

	return qps_sw_rq_post(&qps_packet_qp(q)->rq, &dev->mrs, wr, bad_wr);
}

static uint16_t be16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Finish the UDP checksum of a locally built frame; false when the frame
 * is not a whole, readable IPv4/UDP datagram (the parser judges it). */
static bool udp_csum_complete(uint8_t *f, uint32_t len)
{
	const uint32_t e = QPS_PACKET_ETH_HLEN;
	uint32_t ihl, tot, ulen, sum;
	uint8_t *udp;
	uint16_t c;

	if (len < e + 20 || be16_at(f + 12) != ETH_P_IP || (f[e] >> 4) != 4)
		return false;
	ihl = (f[e] & 0xfu) * 4;
	tot = be16_at(f + e + 2);
	if (ihl < 20 || f[e + 9] != 17 || (be16_at(f + e + 6) & 0x3fff) ||
	    tot < ihl + 8 || e + tot > len)
		return false;
	udp = f + e + ihl;
	ulen = be16_at(udp + 4);
	if (ulen < 8 || ulen > tot - ihl)
		return false;
	udp[6] = udp[7] = 0;
	sum = qps_sw_csum_add(17 + ulen, f + e + 12, 8);	/* pseudo-header */
	sum = qps_sw_csum_fold(qps_sw_csum_add(sum, udp, ulen));
	/* A sum of 0xffff complements to 0, which would mean "no
	 * checksum": sent as 0xffff, its other form (RFC 768). */
	c = sum == 0xffff ? 0xffff : (uint16_t)~sum;
	udp[6] = (uint8_t)(c >> 8);
	udp[7] = (uint8_t)c;
	return true;
}

static struct tpacket2_hdr *rx_frame(struct qps_packet_flow *fl, uint32_t i)
{
	return (struct tpacket2_hdr *)(void *)(fl->rx.map +
		(size_t)(i & (fl->rx.frame_nr - 1)) * fl->rx.frame_size);
}

/* When the kernel took the frame in: the NIC's clock where it stamped it
 * (PACKET_TIMESTAMP asks for that, flow_open), else the kernel's
 * CLOCK_REALTIME on arrival. */
static void rx_stamp(const struct tpacket2_hdr *h, uint32_t status,
		     struct qps_wc_ts *ts)
{
	ts->val = (uint64_t)h->tp_sec * 1000000000u + h->tp_nsec;
	ts->clock = (status & TP_STATUS_TS_RAW_HARDWARE) ? QPS_WC_TS_HW :
							  QPS_WC_TS_SW;
}

/* One ring frame into the next posted buffer; 1 when @wc (and @ts, when
 * not NULL) was filled. */
static int rx_one(struct qps_packet_qp *qp, struct qps_packet_flow *fl,
		  struct tpacket2_hdr *h, uint32_t status, struct ibv_wc *wc,
		  struct qps_wc_ts *ts)
{
	const struct sockaddr_ll *ll =
		(const void *)((const uint8_t *)h + PKT_LL_OFF);
	uint32_t snap = h->tp_snaplen;
	struct qps_sw_rwqe *rw;

	if (ll->sll_pkttype == PACKET_OUTGOING)
		return 0;
	/* A tag the hardware stripped: another VLAN's frame, not ours. */
	if ((status & TP_STATUS_VLAN_VALID) && (h->tp_vlan_tci & 0xfff)) {
		qps_sw_count(&fl->rx_vlan, 1);
		return 0;
	}
	if (qp->rq.tail == qp->rq.head) {
		qps_sw_count(&fl->rx_no_buf, 1);
		return 0;
	}
	rw = &qp->rq.wqe[qp->rq.tail++ & (qp->rq.cnt - 1)];
	if (ts)
		rx_stamp(h, status, ts);
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = rw->wr_id;
	wc->opcode = IBV_WC_RECV;
	wc->qp_num = qp->base.qp_num;
	if (snap < h->tp_len || snap > rw->len ||
	    (uint64_t)h->tp_mac + snap > fl->rx.frame_size) {
		qps_sw_count(&fl->rx_len_err, 1);
		wc->status = IBV_WC_LOC_LEN_ERR;
		return 1;
	}
	memcpy((void *)rw->addr, (const uint8_t *)h + h->tp_mac, snap);
	if ((status & TP_STATUS_CSUMNOTREADY) &&
	    udp_csum_complete((uint8_t *)rw->addr, snap))
		qps_sw_count(&fl->rx_csum_fixed, 1);
	wc->status = IBV_WC_SUCCESS;
	wc->byte_len = snap;
	return 1;
}

static int rx_drain(struct qps_packet_qp *qp, struct qps_packet_flow *fl,
		    int num, struct ibv_wc *wc, struct qps_wc_ts *ts)
{
	int n = 0;

	while (n < num) {
		struct tpacket2_hdr *h = rx_frame(fl, fl->head);
		/* Acquire: pairs with the kernel's status store once the
		 * frame is written (tpacket_rcv, smp_wmb). */
		uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);

		if (!(st & TP_STATUS_USER))
			break;
		n += rx_one(qp, fl, h, st, &wc[n], ts ? &ts[n] : NULL);
		/* Release: pairs with the kernel's status read before it
		 * reuses the frame; we are done reading it. */
		__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL,
				 __ATOMIC_RELEASE);
		fl->head++;
	}
	qps_sw_count(&fl->rx_cqes, (uint64_t)n);
	return n;
}

/* dev->lock held (the flow list is stable). Flows take turns first. */
int qps_packet_rx_poll(struct qps_packet_dev *dev, struct qps_packet_qp *qp,
		       int num, struct ibv_wc *wc, struct qps_wc_ts *ts)
{
	struct qps_packet_flow *fl;
	int n = 0;

	pthread_mutex_lock(&qp->rq.lock);
	if (qp->nflows) {
		unsigned int i = 0, skip = qp->rr++ % qp->nflows;

		/* Two passes: from the flow whose turn it is, then the rest. */
		for (fl = dev->flows; fl && n < num; fl = fl->next) {
			if (fl->base.qp != &qp->base)
				continue;
			if (i++ >= skip)
				n += rx_drain(qp, fl, num - n, wc + n,
					      ts ? ts + n : NULL);
		}
		i = 0;
		for (fl = dev->flows; fl && n < num && i < skip; fl = fl->next) {
			if (fl->base.qp != &qp->base)
				continue;
			i++;
			n += rx_drain(qp, fl, num - n, wc + n,
				      ts ? ts + n : NULL);
		}
	}
	pthread_mutex_unlock(&qp->rq.lock);
	return n;
}

/* Add the kernel's ring drops (PACKET_STATISTICS resets on read).
 * dev->lock held. */
void qps_packet_flow_stats(struct qps_packet_flow *fl)
{
	struct tpacket_stats st;
	socklen_t len = sizeof(st);

	if (!getsockopt(fl->fd, SOL_PACKET, PACKET_STATISTICS, &st, &len))
		qps_sw_count(&fl->ring_drops, st.tp_drops);
}

/* Program of @fl: every stronger rule it overlaps, then itself.
 * dev->lock held. */
static int flow_filter(struct qps_packet_dev *dev, struct qps_packet_flow *fl)
{
	const struct qps_flow_rule *stronger[QPS_PACKET_MAX_FLOWS];
	struct sock_fprog fprog;
	struct sock_filter *prog;
	struct qps_packet_flow *it;
	unsigned int n = 0;
	int len, ret = 0;

	for (it = dev->flows; it && it != fl; it = it->next)
		if (!qps_packet_rule_disjoint(&it->rule, &fl->rule) &&
		    n < QPS_PACKET_MAX_FLOWS)
			stronger[n++] = &it->rule;
	prog = calloc(QPS_PACKET_BPF_MAX, sizeof(*prog));
	if (!prog)
		return -ENOMEM;
	len = qps_packet_bpf_build(&fl->rule, stronger, n, prog,
				   QPS_PACKET_BPF_MAX);
	if (len < 0) {
		free(prog);
		return len;
	}
	fprog.len = (unsigned short)len;
	fprog.filter = prog;
	if (setsockopt(fl->fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog,
		       sizeof(fprog)) < 0)
		ret = -errno;
	free(prog);
	return ret;
}

/* Re-filter the weaker rules that overlap @fl (just added or removed),
 * so each frame still reaches exactly one rule. dev->lock held. */
static void refilter_weaker(struct qps_packet_dev *dev,
			    const struct qps_flow_rule *r)
{
	struct qps_packet_flow *it;

	for (it = dev->flows; it; it = it->next)
		if (it->fd >= 0 && qps_flow_rule_before(r, &it->rule) &&
		    !qps_packet_rule_disjoint(r, &it->rule) &&
		    flow_filter(dev, it) < 0)
			qps_packet_log("cannot update the filter of a "
				       "steering rule; frames may reach two "
				       "rules");
}

static void flow_unlink(struct qps_packet_dev *dev, struct qps_packet_flow *fl)
{
	struct qps_packet_flow **pp;

	for (pp = &dev->flows; *pp; pp = &(*pp)->next)
		if (*pp == fl) {
			*pp = fl->next;
			dev->nflows--;
			return;
		}
}

static void flow_link(struct qps_packet_dev *dev, struct qps_packet_flow *fl)
{
	struct qps_packet_flow **pp = &dev->flows;

	while (*pp && qps_flow_rule_before(&(*pp)->rule, &fl->rule))
		pp = &(*pp)->next;
	fl->next = *pp;
	*pp = fl;
	dev->nflows++;
}

static bool group_mac(const struct qps_flow_rule *r)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

	return memcmp(r->mac_mask, bcast, 6) == 0 && (r->mac[0] & 1) &&
	       memcmp(r->mac, bcast, 6) != 0;
}

static void flow_close(struct qps_packet_dev *dev, struct qps_packet_flow *fl)
{
	if (fl->fd >= 0) {
		epoll_ctl(dev->epfd, EPOLL_CTL_DEL, fl->fd, NULL);
		qps_packet_flow_stats(fl);
		close(fl->fd);	/* drops its MAC membership too */
	}
	qps_packet_ring_unmap(&fl->rx);
	dev->retired.rx_cqes += qps_sw_read(&fl->rx_cqes);
	dev->retired.rx_no_buf += qps_sw_read(&fl->rx_no_buf);
	dev->retired.rx_drops += qps_sw_read(&fl->rx_no_buf) +
				 qps_sw_read(&fl->ring_drops) +
				 qps_sw_read(&fl->rx_len_err) +
				 qps_sw_read(&fl->rx_vlan);
	free(fl);
}

/* Socket, ring, filter, membership, bind: in that order (see top). */
static int flow_open(struct qps_packet_dev *dev, struct qps_packet_qp *qp,
		     struct qps_packet_flow *fl)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct sockaddr_ll sll;
	uint32_t frames;
	int one = 1, tsflags = SOF_TIMESTAMPING_RAW_HARDWARE, ret;

	fl->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fl->fd < 0)
		return -errno;
	/* Kernels before 4.20 lack it; ETH_P_IP sockets see no outgoing
	 * frames anyway, and rx_one() checks. */
	(void)setsockopt(fl->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one,
			 sizeof(one));
	/* The NIC's stamp in the ring header where the driver has hardware
	 * stamping on (TP_STATUS_TS_RAW_HARDWARE says so per frame); the
	 * kernel's software time otherwise, veth's case. */
	(void)setsockopt(fl->fd, SOL_PACKET, PACKET_TIMESTAMP, &tsflags,
			 sizeof(tsflags));
	frames = qps_sw_pow2(qp->base.cap.max_recv_wr);
	if (frames < QPS_PACKET_RX_FRAMES_MIN)
		frames = QPS_PACKET_RX_FRAMES_MIN;
	ret = qps_packet_ring_setup(fl->fd, PACKET_RX_RING,
				    qps_packet_frame_size(PKT_RX_FRAME_EXTRA +
							  dev->info.mtu +
							  QPS_PACKET_ETH_HLEN +
							  PKT_VLAN_HLEN),
				    frames, &fl->rx);
	if (ret < 0)
		return ret;
	ret = flow_filter(dev, fl);
	if (ret < 0)
		return ret;
	if (group_mac(&fl->rule)) {
		ret = qps_packet_mac_member(fl->fd, dev->ifindex, fl->rule.mac,
					    true);
		if (ret < 0)
			return ret;
		fl->mc_member = true;
	}
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_IP);
	sll.sll_ifindex = dev->ifindex;
	if (bind(fl->fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		return -errno;
	ev.data.ptr = fl;
	if (epoll_ctl(dev->epfd, EPOLL_CTL_ADD, fl->fd, &ev) < 0)
		return -errno;
	return 0;
}

int qps_packet_create_flow(struct qps_qp *q, struct ibv_flow_attr *attr,
			   struct qps_flow **flow_out)
{
	struct qps_packet_qp *qp = qps_packet_qp(q);
	struct qps_packet_dev *dev = qps_packet_dev(q->dev);
	struct qps_packet_flow *fl;
	struct qps_flow_rule r;
	int ret;

	if (!attr || !flow_out || !qp->rq.cnt)
		return -EINVAL;
	ret = qps_packet_rule_parse(attr, &r);
	if (ret < 0)
		return ret;
	fl = calloc(1, sizeof(*fl));
	if (!fl)
		return -ENOMEM;
	fl->fd = -1;
	fl->base.qp = q;
	pthread_mutex_lock(&dev->lock);
	if (dev->nflows >= QPS_PACKET_MAX_FLOWS) {
		pthread_mutex_unlock(&dev->lock);
		free(fl);
		return -ENOSPC;
	}
	r.seq = ++dev->flow_seq;
	fl->rule = r;
	/* Linked before its socket is bound: the weaker rules stop taking
	 * its frames first, so a frame is never delivered twice. */
	flow_link(dev, fl);
	refilter_weaker(dev, &fl->rule);
	ret = flow_open(dev, qp, fl);
	if (ret < 0) {
		flow_unlink(dev, fl);
		refilter_weaker(dev, &fl->rule);
		flow_close(dev, fl);
		pthread_mutex_unlock(&dev->lock);
		return ret;
	}
	pthread_mutex_lock(&qp->rq.lock);
	qp->nflows++;
	pthread_mutex_unlock(&qp->rq.lock);
	pthread_mutex_unlock(&dev->lock);
	*flow_out = &fl->base;
	return 0;
}

int qps_packet_destroy_flow(struct qps_flow *flow)
{
	struct qps_packet_flow *fl = qps_sw_container_of(flow,
						struct qps_packet_flow, base);
	struct qps_packet_qp *qp = qps_packet_qp(flow->qp);
	struct qps_packet_dev *dev = qps_packet_dev(flow->qp->dev);
	struct qps_flow_rule r = fl->rule;

	pthread_mutex_lock(&dev->lock);
	flow_unlink(dev, fl);
	pthread_mutex_lock(&qp->rq.lock);
	qp->nflows--;
	pthread_mutex_unlock(&qp->rq.lock);
	/* Closed before the weaker rules take over its frames: a frame in
	 * between is lost, never delivered twice. */
	flow_close(dev, fl);
	refilter_weaker(dev, &r);
	pthread_mutex_unlock(&dev->lock);
	return 0;
}
