// SPDX-License-Identifier: MIT
/*
 * One UMEM per device and an XSK per receive queue on it, made with
 * libxdp's xsk API with XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD (the program
 * is ours, xdp_obj.c), each put into the program's XSKMAP at its queue.
 *
 * Queues: as many as the interface receives on (ETHTOOL_GCHANNELS: its
 * rx and combined channels; 1 when the driver does not tell), at most
 * QPS_XDP_MAX_QUEUES, the XSKMAP's size. The
 * program redirects by the frame's receive queue, so with RSS spreading
 * flows a queue without an XSK would hand the context's frames to the
 * kernel instead. Queue 0's XSK owns the UMEM; the others share it
 * (XDP_SHARED_UMEM): the kernel gives each queue its own fill and
 * completion rings, so each queue is filled from its own frames.
 *
 * The UMEM holds the receive frames, split evenly between the queues
 * (QPS_XDP_RING in all, at least QPS_XDP_RXQ_MIN_FRAMES each), then
 * QPS_XDP_RING frames of the send side's free list, refilled from queue
 * 0's completion ring. Sends use queue 0's TX ring only.
 *
 * A fill ring is a FIFO: the kernel writes into its frames in the order
 * they were given. Given all of its queue's share, it would cycle through
 * every frame, each one cold in the cache and the TLB of both the kernel
 * writing it and the poller reading it. So each queue's is kept at a
 * target depth, and the frames not on it wait on the queue's stack: a
 * frame read out of the RX ring goes back on the stack's top and is the
 * first to go to the fill ring again. The target starts low; it doubles
 * when the kernel has drawn more than half of it between two polls (a
 * burst: it may run dry before the next one) and halves again after a
 * long calm.
 *
 * That only while a thread busy-polls the device (xdp_event.c): frames
 * that come while nobody polls (before the first receive, or for a
 * thread that sleeps) must find the room they always had, so otherwise
 * every free frame of a queue's share is on its fill ring. Once polls
 * spin, the rings shrink to their targets as the kernel uses them.
 *
 * Zero-copy when the driver offers it, copy otherwise (veth); preferred
 * busy polling when $QPS_XDP_BUSY_POLL=1 and the kernel has it (5.11),
 * found out by the setsockopt result. Each choice is logged once per
 * device and kept in its info for qps_ctx_query_ex.
 */
#include "xdp.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_xdp.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

/* Linux 5.11 names, absent from older headers. */
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif
#define XDP_BUSY_POLL_US 20
/* A fill ring's target: its floor (under QPS_XDP_RXQ_MIN_FRAMES), and
 * how many frames the kernel must take without drawing deep before it is
 * halved. */
#define XDP_FILL_MIN 64u
#define XDP_FILL_CALM 65536u
#define XDP_BUSY_POLL_BUDGET 64
/* The kernel lets go of a closed XSK's queue from a work item, a moment
 * after close: a bind to the queue right after meets EBUSY. */
#define XDP_BIND_TRIES 100
#define XDP_BIND_WAIT_NS 10000000L

/* Receive queues of the interface: its channels that receive
 * (ETHTOOL_GCHANNELS, asked in the netns the interface is in, which
 * sysfs need not show); 1 when the driver does not say. */
static uint32_t rxq_count(const struct qps_xdp_dev *dev)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct ifreq ifr;
	uint32_t n;

	if (dev->carrier_fd < 0)
		return 1;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, dev->info.name, IF_NAMESIZE - 1);
	ifr.ifr_data = (void *)&ch;
	if (ioctl(dev->carrier_fd, SIOCETHTOOL, &ifr) < 0)
		return 1;
	n = ch.rx_count + ch.combined_count;
	return n ? n : 1;
}

/* The UMEM with queue 0's XSK, which owns it and carries the sends. */
static int xsk_make(struct qps_xdp_dev *dev, uint16_t bind_flags)
{
	struct xsk_umem_config uc = {
		.fill_size = QPS_XDP_RING,
		.comp_size = QPS_XDP_RING,
		.frame_size = QPS_XDP_FRAME_SIZE,
		.frame_headroom = 0,
		.flags = 0,
	};
	struct xsk_socket_config sc = {
		.rx_size = QPS_XDP_RING,
		.tx_size = QPS_XDP_RING,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.xdp_flags = 0,
		.bind_flags = bind_flags,
	};
	struct qps_xdp_rxq *q = &dev->rxq[0];
	int ret;

	ret = xsk_umem__create(&dev->umem, dev->area, dev->area_len, &q->fq,
			       &dev->cq, &uc);
	if (ret < 0) {
		dev->umem = NULL;
		return ret;
	}
	ret = xsk_socket__create(&q->xsk, dev->info.name, 0, dev->umem,
				 &q->rx, &dev->tx, &sc);
	if (ret < 0) {
		q->xsk = NULL;
		xsk_umem__delete(dev->umem);
		dev->umem = NULL;
	}
	return ret;
}

/* Queue @qid's XSK on the UMEM: receive only, its own fill and
 * completion rings. The bind inherits queue 0's copy or zero-copy mode
 * and need_wakeup (XDP_SHARED_UMEM takes no other flag). */
static int xsk_make_shared(struct qps_xdp_dev *dev, uint32_t qid)
{
	struct xsk_socket_config sc = {
		.rx_size = QPS_XDP_RING,
		.tx_size = 0,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.xdp_flags = 0,
		.bind_flags = 0,
	};
	struct qps_xdp_rxq *q = &dev->rxq[qid];
	int ret;

	ret = xsk_socket__create_shared(&q->xsk, dev->info.name, qid,
					dev->umem, &q->rx, NULL, &q->fq,
					&q->cq, &sc);
	if (ret < 0)
		q->xsk = NULL;
	return ret;
}

static void busy_poll_on(struct qps_xdp_dev *dev)
{
	int one = 1, us = XDP_BUSY_POLL_US, budget = XDP_BUSY_POLL_BUDGET;
	const char *s = getenv("QPS_XDP_BUSY_POLL");
	uint32_t i;

	/* Opt-in: it pays only where the NIC's interrupts are deferred to
	 * the busy poller (napi_defer_hard_irqs, gro_flush_timeout), which
	 * the provider cannot tell; elsewhere every empty poll becomes a
	 * syscall (docs/xdp.md). */
	dev->busy_poll = false;
	if (!s || strcmp(s, "1") != 0)
		return;
	dev->busy_poll = true;
	for (i = 0; i < dev->nrxq; i++) {
		int fd = dev->rxq[i].fd;

		dev->busy_poll = dev->busy_poll &&
			setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one,
				   sizeof(one)) == 0 &&
			setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &us,
				   sizeof(us)) == 0 &&
			setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET,
				   &budget, sizeof(budget)) == 0;
	}
}

/* Grow or shrink the target from what the kernel drew since the last
 * top-up (see top). rx_lock held. */
static void fill_adapt(struct qps_xdp_rxq *q, uint32_t in_ring, uint32_t n)
{
	uint32_t drawn = q->fill_target > in_ring ?
			 q->fill_target - in_ring : 0;

	if (drawn > q->fill_target / 2 && q->fill_target < q->nframes) {
		q->fill_target *= 2;
		q->fill_calm = 0;
	} else if (drawn > q->fill_target / 8) {
		q->fill_calm = 0;
	} else if ((q->fill_calm += n) >= XDP_FILL_CALM) {
		q->fill_calm = 0;
		if (q->fill_target > XDP_FILL_MIN)
			q->fill_target /= 2;
	}
}

/* Top the fill ring up to @target from the stack's top. */
static void fill_top_up(struct qps_xdp_rxq *q, uint32_t in_ring,
			uint32_t target)
{
	uint32_t want, idx = 0, i;

	want = in_ring < target ? target - in_ring : 0;
	if (want > q->nfree)
		want = q->nfree;
	/* The ring has room for the queue's whole share: this never fails
	 * while @want is within it. */
	if (!want || xsk_ring_prod__reserve(&q->fq, want, &idx) != want)
		return;
	for (i = 0; i < want; i++)
		*xsk_ring_prod__fill_addr(&q->fq, idx + i) =
			q->free[--q->nfree];
	/* Release: the addresses are written before the kernel sees the
	 * new producer index (pairs with its acquire of it). */
	xsk_ring_prod__submit(&q->fq, want);
}

/* Frames on @q's fill ring that the kernel has not taken yet. */
static uint32_t fill_queued(const struct qps_xdp_rxq *q)
{
	/* Acquire: pairs with the kernel's release of the consumer index
	 * once it has read the addresses it took. */
	return q->fq.cached_prod -
	       __atomic_load_n(q->fq.consumer, __ATOMIC_ACQUIRE);
}

void qps_xdp_fill_return(struct qps_xdp_dev *dev, struct qps_xdp_rxq *q,
			 const uint64_t *addr, uint32_t n)
{
	uint32_t in_ring = fill_queued(q), i;

	for (i = 0; i < n; i++)
		q->free[q->nfree++] = addr[i];
	fill_adapt(q, in_ring, n);
	fill_top_up(q, in_ring, dev->rx_spinning ? q->fill_target :
						   q->nframes);
}

void qps_xdp_fill_deep(struct qps_xdp_dev *dev)
{
	uint32_t i;

	for (i = 0; i < dev->nrxq; i++) {
		struct qps_xdp_rxq *q = &dev->rxq[i];

		fill_top_up(q, fill_queued(q), q->nframes);
	}
}

/* Queue @qid's share of the receive frames, all on its fill ring. */
static int rx_share(struct qps_xdp_dev *dev, uint32_t qid)
{
	struct qps_xdp_rxq *q = &dev->rxq[qid];
	uint32_t per = dev->rx_frames / dev->nrxq, i;
	uint64_t first = (uint64_t)qid * per;

	q->free = calloc(per, sizeof(*q->free));
	if (!q->free)
		return -ENOMEM;
	/* The share's first frame on top: the first given. */
	for (i = 0; i < per; i++)
		q->free[i] = (first + per - 1 - i) * QPS_XDP_FRAME_SIZE;
	q->nfree = per;
	q->nframes = per;
	q->fill_target = XDP_FILL_MIN;	/* below any share */
	q->fill_calm = 0;
	fill_top_up(q, 0, per);
	return q->nfree ? -ENOSPC : 0;
}

static int tx_half(struct qps_xdp_dev *dev)
{
	uint32_t i;

	dev->tx_free = calloc(QPS_XDP_RING, sizeof(*dev->tx_free));
	dev->tx_owner = calloc(QPS_XDP_RING, sizeof(*dev->tx_owner));
	if (!dev->tx_free || !dev->tx_owner)
		return -ENOMEM;
	for (i = 0; i < QPS_XDP_RING; i++)
		dev->tx_free[i] = (uint64_t)(dev->rx_frames + i) *
				  QPS_XDP_FRAME_SIZE;
	dev->tx_nfree = QPS_XDP_RING;
	return 0;
}

/* xsk_make (@qid 0) or xsk_make_shared, again while the queue is still
 * the last owner's. */
static int xsk_make_wait(struct qps_xdp_dev *dev, uint32_t qid,
			 uint16_t bind_flags)
{
	const struct timespec ts = { 0, XDP_BIND_WAIT_NS };
	int i;

	for (i = 0;; i++) {
		int ret = qid ? xsk_make_shared(dev, qid) :
				xsk_make(dev, bind_flags);
		if (ret != -EBUSY || i == XDP_BIND_TRIES)
			return ret;
		nanosleep(&ts, NULL);
	}
}

/* The queues and the UMEM's layout (see top). */
static int rxq_alloc(struct qps_xdp_dev *dev)
{
	uint32_t n = rxq_count(dev), per;

	if (n > QPS_XDP_MAX_QUEUES) {
		qps_xdp_log("%s has %u receive queues: an XSK on the first "
			    "%u only, frames on the others go to the kernel "
			    "(docs/xdp.md \"Queues\")", dev->info.name, n,
			    QPS_XDP_MAX_QUEUES);
		n = QPS_XDP_MAX_QUEUES;
	}
	per = QPS_XDP_RING / n;
	if (per < QPS_XDP_RXQ_MIN_FRAMES)
		per = QPS_XDP_RXQ_MIN_FRAMES;
	dev->rxq = calloc(n, sizeof(*dev->rxq));
	if (!dev->rxq)
		return -ENOMEM;
	dev->nrxq = n;
	dev->rx_frames = per * n;
	return 0;
}

int qps_xdp_umem_open(struct qps_xdp_dev *dev)
{
	uint32_t i;
	int ret;

	ret = rxq_alloc(dev);
	if (ret < 0)
		return ret;
	dev->area_len = (size_t)(dev->rx_frames + QPS_XDP_RING) *
			QPS_XDP_FRAME_SIZE;
	dev->area = mmap(NULL, dev->area_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dev->area == MAP_FAILED) {
		dev->area = NULL;
		return -ENOMEM;
	}
	ret = -EOPNOTSUPP;
	if (dev->native)
		ret = xsk_make_wait(dev, 0, XDP_USE_NEED_WAKEUP |
					    XDP_ZEROCOPY);
	if (ret == 0) {
		dev->zerocopy = true;
	} else {
		ret = xsk_make_wait(dev, 0, XDP_USE_NEED_WAKEUP | XDP_COPY);
		if (ret == -EAFNOSUPPORT)
			qps_xdp_log("this kernel has no AF_XDP sockets "
				    "(CONFIG_XDP_SOCKETS)");
		else if (ret < 0)
			qps_xdp_log("cannot bind an AF_XDP socket to queue 0 "
				    "of %s (%d)", dev->info.name, ret);
		if (ret < 0)
			return ret;
	}
	for (i = 1; i < dev->nrxq; i++) {
		ret = xsk_make_wait(dev, i, 0);
		if (ret < 0) {
			qps_xdp_log("cannot bind an AF_XDP socket to queue %u "
				    "of %s, sharing queue 0's UMEM (%d)", i,
				    dev->info.name, ret);
			return ret;
		}
	}
	for (i = 0; i < dev->nrxq; i++)
		dev->rxq[i].fd = xsk_socket__fd(dev->rxq[i].xsk);
	dev->xsk_fd = dev->rxq[0].fd;
	busy_poll_on(dev);
	/* What the log says is what qps_ctx_query_ex reports. */
	dev->info.mode = QPS_DEV_MODE_HOST_NETDEV |
			 (dev->native ? QPS_DEV_MODE_XDP_NATIVE : 0) |
			 (dev->zerocopy ? QPS_DEV_MODE_XDP_ZEROCOPY : 0) |
			 (dev->busy_poll ? QPS_DEV_MODE_XDP_BUSY_POLL : 0);
	dev->info.rx_queue = 0;
	dev->info.rx_queues = dev->nrxq;
	qps_xdp_log("%s: %s XDP, %s, %s, %u receive queue%s", dev->info.name,
		    dev->native ? "native" : "generic (SKB)",
		    dev->zerocopy ? "zero-copy" : "copy mode",
		    dev->busy_poll ? "preferred busy polling" :
				     "no busy polling",
		    dev->nrxq, dev->nrxq > 1 ? "s, an XSK on each" : "");
	for (i = 0; i < dev->nrxq && ret == 0; i++)
		ret = rx_share(dev, i);
	if (ret == 0)
		ret = tx_half(dev);
	if (ret < 0)
		return ret;
	/* Into the map last: the program redirects to a queue only once
	 * its fill ring has frames. */
	for (i = 0; i < dev->nrxq; i++)
		if (bpf_map_update_elem(dev->xsks_fd, &i, &dev->rxq[i].fd,
					BPF_ANY) < 0)
			return -errno;
	return 0;
}

/* Frames each queue carried, when there are several: what RSS did. */
static void rxq_log(const struct qps_xdp_dev *dev)
{
	char line[QPS_XDP_MAX_QUEUES * 21 + 1];
	size_t off = 0;
	uint32_t i;

	if (dev->nrxq < 2)
		return;
	for (i = 0; i < dev->nrxq && off < sizeof(line); i++)
		off += (size_t)snprintf(line + off, sizeof(line) - off, " %llu",
					(unsigned long long)dev->rxq[i].frames);
	qps_xdp_log("%s: frames per receive queue:%s", dev->info.name, line);
}

void qps_xdp_umem_close(struct qps_xdp_dev *dev)
{
	uint32_t i;

	if (dev->rxq) {
		if (dev->umem)
			rxq_log(dev);
		/* Queue 0's last: its socket holds the UMEM. */
		for (i = dev->nrxq; i-- > 0;) {
			struct qps_xdp_rxq *q = &dev->rxq[i];

			if (q->xsk) {
				(void)bpf_map_delete_elem(dev->xsks_fd, &i);
				xsk_socket__delete(q->xsk);
			}
			free(q->free);
		}
		free(dev->rxq);
	}
	dev->rxq = NULL;
	dev->nrxq = 0;
	if (dev->umem)
		xsk_umem__delete(dev->umem);
	dev->umem = NULL;
	if (dev->area)
		munmap(dev->area, dev->area_len);
	dev->area = NULL;
	free(dev->tx_free);
	free(dev->tx_owner);
	dev->tx_free = NULL;
	dev->tx_owner = NULL;
}

/* Frames the kernel dropped on their way to the sockets: too long, or no
 * room in an RX ring or a fill ring (XDP_STATISTICS, totals since bind,
 * summed over the queues). */
void qps_xdp_umem_stats(struct qps_xdp_dev *dev)
{
	uint64_t sum = 0;
	uint32_t i;

	for (i = 0; i < dev->nrxq; i++) {
		struct xdp_statistics st;
		socklen_t len = sizeof(st);

		memset(&st, 0, sizeof(st));
		if (dev->rxq[i].xsk && !getsockopt(dev->rxq[i].fd, SOL_XDP,
						   XDP_STATISTICS, &st, &len))
			sum += st.rx_dropped + st.rx_ring_full +
			       st.rx_fill_ring_empty_descs;
	}
	__atomic_store_n(&dev->rx_xsk_drops, sum, __ATOMIC_RELAXED);
}
