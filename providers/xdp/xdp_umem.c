// SPDX-License-Identifier: MIT
/*
 * One UMEM per device and the XSK of receive queue 0 on it, made with
 * libxdp's xsk API with XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD (the program
 * is ours, xdp_obj.c) and put into the program's XSKMAP.
 *
 * The UMEM holds QPS_XDP_NFRAMES frames of 4 KiB: the first half is the
 * receive side's, the second half the send side's free list, refilled
 * from the completion ring.
 *
 * The fill ring is a FIFO: the kernel writes into its frames in the order
 * they were given. Given all of the receive half, it would cycle through
 * every frame, each one cold in the cache and the TLB of both the kernel
 * writing it and the poller reading it. So it is kept at a target depth,
 * and the frames not on it wait on a stack: a frame read out of the RX
 * ring goes back on the stack's top and is the first to go to the fill
 * ring again. The target starts low; it doubles when the kernel has drawn
 * more than half of it between two polls (a burst: it may run dry before
 * the next one) and halves again after a long calm.
 *
 * That only while a thread busy-polls the device (xdp_event.c): frames
 * that come while nobody polls (before the first receive, or for a
 * thread that sleeps) must find the room they always had, so otherwise
 * every free frame of the receive half is on the fill ring. Once polls
 * spin, the ring shrinks to the target as the kernel uses it.
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
/* The fill ring's target: its floor, and how many frames the kernel must
 * take without drawing deep before it is halved. */
#define XDP_FILL_MIN 64u
#define XDP_FILL_CALM 65536u
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

/* Grow or shrink the target from what the kernel drew since the last
 * top-up (see top). rx_lock held. */
static void fill_adapt(struct qps_xdp_dev *dev, uint32_t in_ring, uint32_t n)
{
	uint32_t drawn = dev->fill_target > in_ring ?
			 dev->fill_target - in_ring : 0;

	if (drawn > dev->fill_target / 2 && dev->fill_target < QPS_XDP_RING) {
		dev->fill_target *= 2;
		dev->fill_calm = 0;
	} else if (drawn > dev->fill_target / 8) {
		dev->fill_calm = 0;
	} else if ((dev->fill_calm += n) >= XDP_FILL_CALM) {
		dev->fill_calm = 0;
		if (dev->fill_target > XDP_FILL_MIN)
			dev->fill_target /= 2;
	}
}

/* Top the fill ring up to @target from the stack's top. */
static void fill_top_up(struct qps_xdp_dev *dev, uint32_t in_ring,
			uint32_t target)
{
	uint32_t want, idx = 0, i;

	want = in_ring < target ? target - in_ring : 0;
	if (want > dev->rx_nfree)
		want = dev->rx_nfree;
	/* The ring has room for the whole receive half: this never fails
	 * while @want is within it. */
	if (!want || xsk_ring_prod__reserve(&dev->fq, want, &idx) != want)
		return;
	for (i = 0; i < want; i++)
		*xsk_ring_prod__fill_addr(&dev->fq, idx + i) =
			dev->rx_free[--dev->rx_nfree];
	/* Release: the addresses are written before the kernel sees the
	 * new producer index (pairs with its acquire of it). */
	xsk_ring_prod__submit(&dev->fq, want);
}

/* Frames on the fill ring that the kernel has not taken yet. */
static uint32_t fill_queued(const struct qps_xdp_dev *dev)
{
	/* Acquire: pairs with the kernel's release of the consumer index
	 * once it has read the addresses it took. */
	return dev->fq.cached_prod -
	       __atomic_load_n(dev->fq.consumer, __ATOMIC_ACQUIRE);
}

void qps_xdp_fill_return(struct qps_xdp_dev *dev, const uint64_t *addr,
			 uint32_t n)
{
	uint32_t in_ring = fill_queued(dev), i;

	for (i = 0; i < n; i++)
		dev->rx_free[dev->rx_nfree++] = addr[i];
	fill_adapt(dev, in_ring, n);
	fill_top_up(dev, in_ring, dev->rx_spinning ? dev->fill_target :
						     QPS_XDP_RING);
}

void qps_xdp_fill_deep(struct qps_xdp_dev *dev)
{
	fill_top_up(dev, fill_queued(dev), QPS_XDP_RING);
}

static int rx_half(struct qps_xdp_dev *dev)
{
	uint32_t i;

	dev->rx_free = calloc(QPS_XDP_RING, sizeof(*dev->rx_free));
	if (!dev->rx_free)
		return -ENOMEM;
	/* Frame 0 on top: the first given. */
	for (i = 0; i < QPS_XDP_RING; i++)
		dev->rx_free[i] = (uint64_t)(QPS_XDP_RING - 1 - i) *
				  QPS_XDP_FRAME_SIZE;
	dev->rx_nfree = QPS_XDP_RING;
	dev->fill_target = XDP_FILL_MIN;
	dev->fill_calm = 0;
	fill_top_up(dev, 0, QPS_XDP_RING);
	return dev->rx_nfree ? -ENOSPC : 0;
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
	ret = rx_half(dev);
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
	free(dev->rx_free);
	free(dev->tx_free);
	free(dev->tx_owner);
	dev->rx_free = NULL;
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
