// SPDX-License-Identifier: MIT
/*
 * One UMEM per device and the XSK of receive queue 0 on it, made with
 * libxdp's xsk API with XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD (the program
 * is ours, xdp_obj.c) and put into the program's XSKMAP.
 *
 * The UMEM holds QPS_XDP_NFRAMES frames of 4 KiB: the first half is
 * given to the fill ring once and comes back through the RX ring (each
 * frame returned to the fill ring as soon as its data is copied out),
 * the second half is the send side's free list, refilled from the
 * completion ring.
 *
 * Zero-copy when the driver offers it, copy otherwise (veth); preferred
 * busy polling when $QPS_XDP_BUSY_POLL=1 and the kernel has it (5.11),
 * found out by the setsockopt result. Each choice is logged once per
 * device and kept in its info for qps_ctx_query_ex.
 */
#include "xdp.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <linux/if_xdp.h>
#include <stdlib.h>
#include <string.h>
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
#define XDP_BUSY_POLL_BUDGET 64
/* The kernel lets go of a closed XSK's queue from a work item, a moment
 * after close: a bind to the queue right after meets EBUSY. */
#define XDP_BIND_TRIES 100
#define XDP_BIND_WAIT_NS 10000000L

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
	int ret;

	ret = xsk_umem__create(&dev->umem, dev->area, dev->area_len, &dev->fq,
			       &dev->cq, &uc);
	if (ret < 0) {
		dev->umem = NULL;
		return ret;
	}
	ret = xsk_socket__create(&dev->xsk, dev->info.name, 0, dev->umem,
				 &dev->rx, &dev->tx, &sc);
	if (ret < 0) {
		dev->xsk = NULL;
		xsk_umem__delete(dev->umem);
		dev->umem = NULL;
	}
	return ret;
}

static void busy_poll_on(struct qps_xdp_dev *dev)
{
	int one = 1, us = XDP_BUSY_POLL_US, budget = XDP_BUSY_POLL_BUDGET;
	const char *s = getenv("QPS_XDP_BUSY_POLL");

	/* Opt-in: it pays only where the NIC's interrupts are deferred to
	 * the busy poller (napi_defer_hard_irqs, gro_flush_timeout), which
	 * the provider cannot tell; elsewhere every empty poll becomes a
	 * syscall (docs/xdp.md). */
	dev->busy_poll = false;
	if (!s || strcmp(s, "1") != 0)
		return;
	dev->busy_poll =
		setsockopt(dev->xsk_fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one,
			   sizeof(one)) == 0 &&
		setsockopt(dev->xsk_fd, SOL_SOCKET, SO_BUSY_POLL, &us,
			   sizeof(us)) == 0 &&
		setsockopt(dev->xsk_fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET,
			   &budget, sizeof(budget)) == 0;
}

static int fill_all(struct qps_xdp_dev *dev)
{
	uint32_t idx = 0, i;

	if (xsk_ring_prod__reserve(&dev->fq, QPS_XDP_RING, &idx) !=
	    QPS_XDP_RING)
		return -ENOSPC;
	for (i = 0; i < QPS_XDP_RING; i++)
		*xsk_ring_prod__fill_addr(&dev->fq, idx + i) =
			(uint64_t)i * QPS_XDP_FRAME_SIZE;
	xsk_ring_prod__submit(&dev->fq, QPS_XDP_RING);
	return 0;
}

static int tx_half(struct qps_xdp_dev *dev)
{
	uint32_t i;

	dev->tx_free = calloc(QPS_XDP_RING, sizeof(*dev->tx_free));
	dev->tx_owner = calloc(QPS_XDP_RING, sizeof(*dev->tx_owner));
	if (!dev->tx_free || !dev->tx_owner)
		return -ENOMEM;
	for (i = 0; i < QPS_XDP_RING; i++)
		dev->tx_free[i] = (uint64_t)(QPS_XDP_RING + i) *
				  QPS_XDP_FRAME_SIZE;
	dev->tx_nfree = QPS_XDP_RING;
	return 0;
}

/* xsk_make, again while the queue is still the last owner's. */
static int xsk_make_wait(struct qps_xdp_dev *dev, uint16_t bind_flags)
{
	const struct timespec ts = { 0, XDP_BIND_WAIT_NS };
	int i;

	for (i = 0;; i++) {
		int ret = xsk_make(dev, bind_flags);
		if (ret != -EBUSY || i == XDP_BIND_TRIES)
			return ret;
		nanosleep(&ts, NULL);
	}
}

int qps_xdp_umem_open(struct qps_xdp_dev *dev)
{
	uint32_t q = 0;
	int ret;

	dev->area_len = (size_t)QPS_XDP_NFRAMES * QPS_XDP_FRAME_SIZE;
	dev->area = mmap(NULL, dev->area_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dev->area == MAP_FAILED) {
		dev->area = NULL;
		return -ENOMEM;
	}
	ret = -EOPNOTSUPP;
	if (dev->native)
		ret = xsk_make_wait(dev, XDP_USE_NEED_WAKEUP | XDP_ZEROCOPY);
	if (ret == 0) {
		dev->zerocopy = true;
	} else {
		ret = xsk_make_wait(dev, XDP_USE_NEED_WAKEUP | XDP_COPY);
		if (ret == -EAFNOSUPPORT)
			qps_xdp_log("this kernel has no AF_XDP sockets "
				    "(CONFIG_XDP_SOCKETS)");
		else if (ret < 0)
			qps_xdp_log("cannot bind an AF_XDP socket to queue 0 "
				    "of %s (%d)", dev->info.name, ret);
		if (ret < 0)
			return ret;
	}
	dev->xsk_fd = xsk_socket__fd(dev->xsk);
	busy_poll_on(dev);
	/* What the log says is what qps_ctx_query_ex reports. */
	dev->info.mode = QPS_DEV_MODE_HOST_NETDEV |
			 (dev->native ? QPS_DEV_MODE_XDP_NATIVE : 0) |
			 (dev->zerocopy ? QPS_DEV_MODE_XDP_ZEROCOPY : 0) |
			 (dev->busy_poll ? QPS_DEV_MODE_XDP_BUSY_POLL : 0);
	dev->info.rx_queue = q;
	dev->info.rx_queues = 1;
	qps_xdp_log("%s: %s XDP, %s, %s, receive queue %u", dev->info.name,
		    dev->native ? "native" : "generic (SKB)",
		    dev->zerocopy ? "zero-copy" : "copy mode",
		    dev->busy_poll ? "preferred busy polling" :
				     "no busy polling", q);
	ret = fill_all(dev);
	if (ret == 0)
		ret = tx_half(dev);
	if (ret < 0)
		return ret;
	if (bpf_map_update_elem(dev->xsks_fd, &q, &dev->xsk_fd, BPF_ANY) < 0)
		return -errno;
	return 0;
}

void qps_xdp_umem_close(struct qps_xdp_dev *dev)
{
	uint32_t q = 0;

	if (dev->xsk) {
		(void)bpf_map_delete_elem(dev->xsks_fd, &q);
		xsk_socket__delete(dev->xsk);
	}
	dev->xsk = NULL;
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

/* Frames the kernel dropped on their way to the socket: too long, or no
 * room in the RX ring or the fill ring (XDP_STATISTICS, totals since
 * bind). */
void qps_xdp_umem_stats(struct qps_xdp_dev *dev)
{
	struct xdp_statistics st;
	socklen_t len = sizeof(st);

	memset(&st, 0, sizeof(st));
	if (dev->xsk_fd >= 0 &&
	    !getsockopt(dev->xsk_fd, SOL_XDP, XDP_STATISTICS, &st, &len))
		__atomic_store_n(&dev->rx_xsk_drops,
				 st.rx_dropped + st.rx_ring_full +
				 st.rx_fill_ring_empty_descs,
				 __ATOMIC_RELAXED);
}
