// SPDX-License-Identifier: MIT
/*
 * Reading the counters from inside the process: qps_ctx_stats adds the
 * receive block, every send queue's block and what the modules keep
 * (stat_seg.c qps_stat_mods), each read under the lock its writers hold;
 * qps_ep_stats reads one endpoint's slot the same way. qps_stat does the
 * same additions from the published segment (stat_shm.h).
 */
#include <errno.h>
#include <string.h>

#include "prio_bands.h"
#include "sq.h"
#include "stat.h"

int qps_ctx_stats(struct qps_ctx *ctx, struct qps_stats *st, size_t size)
{
	QPS_ERRNO_GUARD;
	struct qps_stats all, m;
	uint32_t i;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	if (!st && size)
		return -EFAULT;

	qps_mutex_lock(&ctx->rx.lock);
	all = *ctx->st;
	qps_mutex_unlock(&ctx->rx.lock);
	for (i = 0; i < ctx->nsq; i++) {
		struct qps_sq_stats s;

		qps_alock_lock(&ctx->sq[i].lock);
		s = *ctx->sq[i].st;
		qps_alock_unlock(&ctx->sq[i].lock);
		qps_stat_sq_fold(&s, &all);
	}
	memset(&m, 0, sizeof(m));
	qps_stat_mods(ctx, &m);
	qps_stat_merge(&all, &m);
	qps_stat_finish(&all);
	if (size > sizeof(all))
		size = sizeof(all);
	if (size)
		memcpy(st, &all, size);
	return (int)size;
}

static void qps_ep_stats_sin(struct sockaddr_in *sin, uint32_t addr,
			     uint16_t port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = addr;
	sin->sin_port = port;
}

int qps_ep_stats(struct qps_ep *ep, struct qps_ep_counters *st, size_t size)
{
	QPS_ERRNO_GUARD;
	struct qps_ep_counters out;
	struct qps_stat_ep b;
	struct qps_ctx *ctx;
	uint32_t i;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (!st && size)
		return -EFAULT;
	ctx = ep->ctx;
	/* Every writer's lock, in the lock order (qps_int.h): the send
	 * queues' for the send counters, ctl_lock for the identity, rx.lock
	 * for the receive counters. */
	qps_sq_lock_all(ctx);
	pthread_mutex_lock(&ctx->ctl_lock);
	qps_mutex_lock(&ctx->rx.lock);
	ret = qps_ep_check(ep);
	b = *ep->sb;
	qps_mutex_unlock(&ctx->rx.lock);
	pthread_mutex_unlock(&ctx->ctl_lock);
	qps_sq_unlock_all(ctx);
	if (ret < 0)
		return ret;

	memset(&out, 0, sizeof(out));
	if (b.flags & QPS_STAT_EP_BOUND)
		qps_ep_stats_sin(&out.local, b.laddr, b.lport);
	if (b.flags & QPS_STAT_EP_CONNECTED)
		qps_ep_stats_sin(&out.peer, b.paddr, b.pport);
	out.priority = atomic_load_explicit(&b.priority, memory_order_relaxed);
	out.band = qps_prio_band((unsigned int)out.priority);
	out.txq = b.txq;
	out.rcvbuf = b.rcvbuf;
	out.rxq_depth = b.rxq_depth;
	out.rxq_hwm = b.rxq_hwm;
	out.ngroups = b.ngroups;
	out.rx_packets = b.rx_packets;
	out.rx_bytes = b.rx_bytes;
	out.rx_queue_full = b.rx_queue_full;
	out.rx_truncated = b.rx_truncated;
	out.rx_filtered = b.rx_filtered;
	out.tx_packets = b.tx_packets;
	out.tx_bytes = b.tx_bytes;
	out.tx_drops = b.tx_drops;
	/* Entries past ngroups are zero in the slot. */
	for (i = 0; i < QPS_EP_STATS_GROUPS; i++) {
		out.groups[i].group.s_addr = b.mc[i].group;
		out.groups[i].source.s_addr = b.mc[i].source;
	}
	if (size > sizeof(out))
		size = sizeof(out);
	if (size)
		memcpy(st, &out, size);
	return (int)size;
}
